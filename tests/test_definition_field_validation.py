"""``define_tool`` and a hand-written ``ToolDefinition`` refuse their own fields of the wrong
type (name, description, body, classifier, presenters) at definition time, instead of a
schema with ``"name": 42`` or an error result on every call."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_tools import (
    ToolDefinition,
    ToolRegistry,
    define_tool,
)
from support import ok_body

_CASES = [
    ({"name": 42}, "tool name must be a non-empty str, not 42"),
    ({"name": ""}, "tool name must be a non-empty str, not ''"),
    ({"name": None}, "tool name must be a non-empty str, not None"),
    ({"description": None}, 'tool "t": description must be a str, not NoneType'),
    ({"description": b"d"}, 'tool "t": description must be a str, not bytes'),
    ({"execute": None}, 'tool "t": execute must be callable, not NoneType'),
    ({"execute": "hi"}, 'tool "t": execute must be callable, not str'),
    (
        {"is_concurrency_safe": True},
        'tool "t": is_concurrency_safe must be callable or None, not bool',
    ),
    ({"present_call": 1}, 'tool "t": present_call must be callable or None, not int'),
    ({"present_result": "x"}, 'tool "t": present_result must be callable or None, not str'),
]


def _fields(changes: dict[str, object]) -> dict[str, object]:
    fields: dict[str, object] = {
        "name": "t",
        "description": "d",
        "parameters": {},
        "execute": ok_body,
    }
    fields.update(changes)
    return fields


@pytest.mark.parametrize(("changes", "message"), _CASES)
def test_define_tool_refuses_a_wrongly_typed_field(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        define_tool(**_fields(changes))  # pyright: ignore[reportArgumentType, reportCallIssue]

    assert message == str(caught.value)


@pytest.mark.parametrize(("changes", "message"), _CASES)
def test_a_hand_written_definition_refuses_a_wrongly_typed_field(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        ToolDefinition(**_fields(changes))  # pyright: ignore[reportArgumentType]

    assert message == str(caught.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: define_tool(
            name="t",
            description="",
            parameters={},
            execute=ok_body,
            is_concurrency_safe=lambda args: True,
        ),
        lambda: ToolDefinition(
            name="t",
            description="",
            parameters={"type": "object", "properties": {}},
            execute=lambda args, context: "x",
            is_concurrency_safe=None,
        ),
    ],
    ids=["define_tool", "ToolDefinition"],
)
def test_well_typed_definitions_still_register(build: Callable[[], ToolDefinition]) -> None:
    registry = ToolRegistry()

    registry.register(build())

    assert [("t", "")] == [(schema.name, schema.description) for schema in registry.schemas()]
