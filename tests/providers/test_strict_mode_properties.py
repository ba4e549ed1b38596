"""OpenAI strict mode over generated schemas, with ``jsonschema`` as the oracle.

For any object schema and any arguments valid under it, the arguments a strict-mode model sends
(every optional property present, ``null`` when absent) are valid under the strict copy that
``tool_params(..., strict=True)`` emits, and ``tool_calls(..., strict_schemas=...)`` turns them
back into exactly the original arguments.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import ToolSchema
from dsh_tools.providers import openai as adapter

_MAX_DEPTH = 3
names = st.text(max_size=5)
Pair = tuple[dict[str, Any], Any]


@st.composite
def schema_and_value(draw: st.DrawFn, depth: int = 0) -> Pair:
    """A schema node and a value valid under it."""
    kinds = ["string", "integer", "boolean"]
    if depth < _MAX_DEPTH:
        kinds += ["object", "array"]
    kind = draw(st.sampled_from(kinds))
    if kind == "string":
        return {"type": "string"}, draw(st.text(max_size=4))
    if kind == "integer":
        return {"type": "integer"}, draw(st.integers(-100, 100))
    if kind == "boolean":
        return {"type": "boolean"}, draw(st.booleans())
    if kind == "array":
        items, _ = draw(schema_and_value(depth + 1))
        array = {"type": "array", "items": items}
        return array, draw(value_for(array, depth))
    return draw(object_and_value(depth))


@st.composite
def object_and_value(draw: st.DrawFn, depth: int = 0) -> Pair:
    properties: dict[str, Any] = {}
    required: list[str] = []
    value: dict[str, Any] = {}
    for name in draw(st.lists(names, max_size=4, unique=True)):
        sub, sub_value = draw(schema_and_value(depth + 1))
        properties[name] = sub
        is_required = draw(st.booleans())
        if is_required:
            required.append(name)
        if is_required or draw(st.booleans()):
            value[name] = sub_value
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema, value


def value_for(schema: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    """Another value valid under an already drawn ``schema``."""
    kind = schema["type"]
    if kind == "string":
        return st.text(max_size=4)
    if kind == "integer":
        return st.integers(-100, 100)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(value_for(schema["items"], depth + 1), max_size=3)
    required = set(schema.get("required", []))
    fields = {
        name: value_for(sub, depth + 1)
        for name, sub in schema["properties"].items()
        if name in required
    }
    optional = {
        name: value_for(sub, depth + 1)
        for name, sub in schema["properties"].items()
        if name not in required
    }
    return st.fixed_dictionaries(fields, optional=optional)


def as_strict_model_sends(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` as a strict-mode model writes it: every absent property present as ``null``."""
    if schema["type"] == "object":
        return {
            name: as_strict_model_sends(value[name], sub) if name in value else None
            for name, sub in schema["properties"].items()
        }
    if schema["type"] == "array":
        return [as_strict_model_sends(item, schema["items"]) for item in value]
    return value


def closed_objects(schema: Any) -> list[bool]:
    """For every object node: does it require all its properties and allow no others?"""
    found: list[bool] = []
    if isinstance(schema, dict):
        node: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
        if "properties" in node:
            found.append(
                list(node["properties"]) == node["required"]
                and node["additionalProperties"] is False
            )
        for sub in node.values():
            found.extend(closed_objects(sub))
    elif isinstance(schema, list):
        for sub in schema:  # pyright: ignore[reportUnknownVariableType]
            found.extend(closed_objects(sub))
    return found


@given(object_and_value())
def test_strict_mode_round_trips_every_valid_argument_object(pair: Pair) -> None:
    schema, value = pair
    jsonschema.validate(value, schema)  # the generator's own claim
    tool = ToolSchema(name="t", description="", parameters=schema)
    [param] = adapter.tool_params([tool], strict=True)
    strict = param["function"]["parameters"]
    assert all(closed_objects(strict))
    sent = as_strict_model_sends(value, schema)
    jsonschema.validate(sent, strict)
    message = {
        "tool_calls": [{"id": "c", "function": {"name": "t", "arguments": json.dumps(sent)}}]
    }
    [call] = adapter.tool_calls(message, strict_schemas=[tool])
    assert value == json.loads(call.arguments)
