"""Small input checks: a ``ToolCallRequest`` field of the wrong type gets a readable message,
``ToolExecutionMode`` accepts only its two kinds, and ``schema_spec_to_json_schema`` refuses
an unknown ``type`` as ``define_tool`` and ``validate_args`` do."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_tools import (
    SchemaSpec,
    ToolCallRequest,
    ToolExecutionMode,
    define_tool,
    schema_spec_to_json_schema,
    validate_args,
)
from support import ok_body


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ToolCallRequest(call_id="c", name=None, arguments="{}"),  # pyright: ignore[reportArgumentType]
            "name must be a str, not NoneType",
        ),
        (
            lambda: ToolCallRequest(call_id=7, name="t", arguments="{}"),  # pyright: ignore[reportArgumentType]
            "call_id must be a str, not int",
        ),
    ],
)
def test_a_call_request_field_of_the_wrong_type_reads_as_one_sentence(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        build()

    assert message == str(caught.value)


@pytest.mark.parametrize("kind", ["x", "Parallel", None, 1])
def test_an_execution_mode_has_only_its_two_kinds(kind: object) -> None:
    with pytest.raises(ValueError) as caught:
        ToolExecutionMode(kind=kind)  # pyright: ignore[reportArgumentType]

    assert f'kind must be "parallel" or "exclusive", not {kind!r}' == str(caught.value)
    assert ToolExecutionMode.PARALLEL == ToolExecutionMode(kind="parallel")
    assert ToolExecutionMode.EXCLUSIVE == ToolExecutionMode(kind="exclusive")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"a": {"type": ["string", "null"]}},
            'unreachable variant in validateArgs: ["string","null"]',
        ),
        ({"a": {"type": "weird"}}, 'unreachable variant in validateArgs: "weird"'),
        (
            {"a": {"type": "array", "items": {"type": "date"}}},
            'unreachable variant in validateArgs: "date"',
        ),
        (
            {"a": {"type": "object", "properties": {"b": {"type": "float"}}}},
            'unreachable variant in validateArgs: "float"',
        ),
    ],
)
def test_every_spec_reader_refuses_an_unknown_type_alike(spec: object, message: str) -> None:
    typed = _as_spec(spec)
    readers: list[Callable[[], object]] = [
        lambda: schema_spec_to_json_schema(typed),
        lambda: validate_args(typed, {}),
        lambda: define_tool(name="t", description="d", parameters=typed, execute=ok_body),
    ]

    messages: list[str] = []
    for read in readers:
        with pytest.raises(ValueError) as caught:
            read()
        messages.append(str(caught.value))

    assert [message] * 3 == messages


def _as_spec(spec: object) -> SchemaSpec:
    return spec  # pyright: ignore[reportReturnType]


def test_a_well_formed_spec_still_converts() -> None:
    spec: SchemaSpec = {
        "a": {"type": "array", "items": {"type": "integer"}, "required": True},
        "b": {"type": "object", "properties": {"c": {"type": "boolean"}}},
    }

    assert {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "integer"}},
            "b": {"type": "object", "properties": {"c": {"type": "boolean"}}},
        },
        "required": ["a"],
    } == schema_spec_to_json_schema(spec)
