"""The library's values handed to the libraries a user hands them to, as the docs promise:
``json``, ``orjson`` and ``httpx`` take frozen arguments and schemas as they are, and
``jsonschema`` takes the plain schemas of ``registry.schemas()`` (or a thawed definition)."""

from __future__ import annotations

import json
import pickle
from typing import Literal

import attrs
import httpx
import jsonschema
import orjson
import pytest

from dsh_tools import (
    CancelSignal,
    FrozenJsonObject,
    MemorySessionLog,
    SchemaSpec,
    ToolCallRequest,
    ToolDefinition,
    ToolRegistry,
    ToolRunContext,
    converter,
    define_tool,
    run_tool_calls,
    thaw_json,
)


@attrs.frozen(kw_only=True)
class EditArgs:
    path: str = attrs.field(metadata={"description": "The file."})
    mode: Literal["apply", "preview"] = "preview"
    limit: int | None = None


SPEC: SchemaSpec = {
    "path": {"type": "string", "required": True},
    "level": {"type": "string", "enum": ["low", "high"]},
    "tags": {"type": "array", "items": {"type": "string"}},
}


async def edit(args: EditArgs, context: ToolRunContext) -> str:
    return args.path


async def tag(args: FrozenJsonObject, context: ToolRunContext) -> str:
    return json.dumps(args)


DEFINITIONS = [
    define_tool(name="edit", description="Edit.", parameters=EditArgs, execute=edit),
    define_tool(name="tag", description="Tag.", parameters=SPEC, execute=tag),
]


@pytest.mark.parametrize("definition", DEFINITIONS, ids=["attrs form", "spec form"])
def test_registry_schemas_are_valid_json_schema_as_they_are_and_through_the_converter(
    definition: ToolDefinition,
) -> None:
    registry = ToolRegistry()
    registry.register(definition)
    [schema] = registry.schemas()

    jsonschema.Draft202012Validator.check_schema(schema.parameters)
    jsonschema.Draft202012Validator.check_schema(converter.unstructure(schema)["parameters"])
    jsonschema.Draft202012Validator.check_schema(thaw_json(definition.parameters))


@pytest.mark.parametrize("definition", DEFINITIONS, ids=["attrs form", "spec form"])
def test_a_definitions_frozen_parameters_fail_the_metaschema_as_the_docs_warn(
    definition: ToolDefinition,
) -> None:
    with pytest.raises(jsonschema.SchemaError) as caught:
        jsonschema.Draft202012Validator.check_schema(definition.parameters)
    assert "is not of type 'array'" in caught.value.message


def test_schemas_serialize_the_same_with_json_orjson_and_the_converter() -> None:
    registry = ToolRegistry()
    for definition in DEFINITIONS:
        registry.register(definition)
    wire = converter.unstructure(registry.schemas())

    assert json.loads(json.dumps(wire)) == orjson.loads(orjson.dumps(wire))
    assert "edit" == wire[0]["name"]
    assert ["path"] == wire[1]["parameters"]["required"]


async def test_frozen_arguments_go_into_json_orjson_and_httpx_bodies_as_they_are() -> None:
    bodies: dict[str, object] = {}

    async def send(args: FrozenJsonObject, context: ToolRunContext) -> str:
        bodies["json"] = json.loads(json.dumps({"args": args}))
        bodies["orjson"] = orjson.loads(orjson.dumps({"args": args}))
        request = httpx.Request("POST", "https://tracker.example/api", json={"args": args})
        bodies["httpx"] = json.loads(request.content)
        jsonschema.validate(thaw_json(args), registry.schemas()[0].parameters)
        return "sent"

    registry = ToolRegistry()
    registry.register(define_tool(name="send", description="Send.", parameters=SPEC, execute=send))
    text = (
        '{"path": "a.txt", "level": "high", "tags": ["x", "y"], "extra": {"k": [true, null, 1.5]}}'
    )

    batch = await run_tool_calls(
        registry,
        [ToolCallRequest(call_id="c1", name="send", arguments=text)],
        signal=CancelSignal.never(),
    )

    assert not batch.results[0].is_error
    expected = {"args": json.loads(text)}
    assert {"json": expected, "orjson": expected, "httpx": expected} == bodies


async def test_a_batch_and_its_session_events_survive_pickle_unchanged() -> None:
    registry = ToolRegistry()
    registry.register(DEFINITIONS[1])
    log = MemorySessionLog()
    batch = await run_tool_calls(
        registry,
        [
            ToolCallRequest(call_id="c1", name="tag", arguments='{"path": "a", "tags": ["t"]}'),
            ToolCallRequest(call_id="c2", name="tag", arguments='{"level": "mid"}'),
        ],
        signal=CancelSignal.never(),
        session=log,
    )

    assert batch == pickle.loads(pickle.dumps(batch))
    assert log.events() == pickle.loads(pickle.dumps(log.events()))
