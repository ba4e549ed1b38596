"""``define_tool(parameters=...)`` with a dataclass or a TypedDict: the same derivation, validation
and typed values as the attrs-class form."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Literal, NotRequired, TypedDict

import attrs
import pytest

from dsh_tools import (
    CancelSignal,
    ToolArgsError,
    ToolDefinition,
    ToolRunContext,
    converter,
    define_tool,
    snapshot_json,
    thaw_json,
)
from dsh_tools._values._execution import new_execution_token


async def _run(definition: ToolDefinition, arguments: object) -> object:
    returned = definition.execute(snapshot_json(arguments), _context())
    assert inspect.isawaitable(returned)
    return await returned


def _context() -> ToolRunContext:
    return ToolRunContext(
        token=new_execution_token(),
        call_id="call-1",
        name="tool",
        arguments=None,
        signal=CancelSignal.never(),
    )


@dataclasses.dataclass(frozen=True)
class Edit:
    old: str = dataclasses.field(metadata={"description": "Exact text to find."})
    new: str


@dataclasses.dataclass(frozen=True)
class EditArgs:
    path: str
    edits: list[Edit]
    mode: Literal["apply", "preview"] = "preview"
    note: str | None = None
    tags: list[str] = dataclasses.field(default_factory=list[str])


class SearchArgs(TypedDict):
    pattern: str
    limit: NotRequired[int]
    root: str | None


class Point(TypedDict):
    x: float
    y: float


@attrs.frozen
class Shape:
    corners: list[Point]


def test_a_dataclass_gives_the_schema_of_its_fields() -> None:
    async def body(args: EditArgs, context: ToolRunContext) -> str:
        return "ok"

    definition = define_tool(name="edit", description="d", parameters=EditArgs, execute=body)

    assert {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "old": {"type": "string", "description": "Exact text to find."},
                        "new": {"type": "string"},
                    },
                    "required": ["old", "new"],
                },
            },
            "mode": {"type": "string", "enum": ["apply", "preview"], "default": "preview"},
            "note": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["path", "edits"],
    } == thaw_json(definition.parameters)


async def test_a_dataclass_body_receives_an_instance_with_defaults_filled() -> None:
    seen: list[EditArgs] = []

    async def body(args: EditArgs, context: ToolRunContext) -> str:
        seen.append(args)
        return "ok"

    definition = define_tool(name="edit", description="d", parameters=EditArgs, execute=body)
    await _run(definition, {"path": "a.py", "edits": [{"old": "x", "new": "y"}]})

    assert [EditArgs(path="a.py", edits=[Edit(old="x", new="y")])] == seen


async def test_a_dataclass_reports_violations_with_the_spec_messages() -> None:
    async def body(args: EditArgs, context: ToolRunContext) -> str:
        return "ok"

    definition = define_tool(name="edit", description="d", parameters=EditArgs, execute=body)

    with pytest.raises(ToolArgsError) as caught:
        await _run(definition, {"edits": [{"new": 1}], "mode": "x"})
    assert [
        'missing required property "path"',
        'missing required property "edits[0].old"',
        '"edits[0].new" must be a string',
        '"mode" must be one of ["apply","preview"]',
    ] == list(caught.value.violations)


def test_a_typeddict_gives_required_and_not_required_keys() -> None:
    async def body(args: SearchArgs, context: ToolRunContext) -> str:
        return "ok"

    definition = define_tool(name="s", description="d", parameters=SearchArgs, execute=body)

    assert {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "limit": {"type": "integer"},
            "root": {"type": "string"},
        },
        "required": ["pattern"],
    } == thaw_json(definition.parameters)


async def test_a_typeddict_body_receives_a_dict_with_none_for_an_absent_optional_key() -> None:
    seen: list[SearchArgs] = []

    def body(args: SearchArgs, context: ToolRunContext) -> str:
        seen.append(args)
        return "ok"

    definition = define_tool(name="s", description="d", parameters=SearchArgs, execute=body)
    definition.execute(snapshot_json({"pattern": "p", "limit": 3.0}), _context())

    assert [{"pattern": "p", "limit": 3, "root": None}] == seen
    assert int is type(seen[0].get("limit"))


async def test_typeddicts_nest_inside_an_attrs_class() -> None:
    seen: list[Shape] = []

    async def body(args: Shape, context: ToolRunContext) -> str:
        seen.append(args)
        return "ok"

    definition = define_tool(name="s", description="d", parameters=Shape, execute=body)
    await _run(definition, {"corners": [{"x": 1, "y": 2.5}]})

    assert [Shape(corners=[{"x": 1.0, "y": 2.5}])] == seen


def test_a_plain_class_is_still_rejected() -> None:
    class Plain:
        x: int

    async def body(args: object, context: ToolRunContext) -> str:
        return "ok"

    with pytest.raises(
        TypeError,
        match=r"^define_tool\(t\): parameters must be a schema spec, an attrs class, a dataclass",
    ):
        define_tool(name="t", description="d", parameters=Plain, execute=body)


class Note(TypedDict):
    text: str
    author: NotRequired[str]


class NoteArgs(TypedDict):
    note: Note
    pinned: NotRequired[bool]


async def test_an_absent_not_required_key_is_absent_from_the_typeddict_at_every_level() -> None:
    # under ``from __future__ import annotations`` Python 3.11 counts NotRequired keys as required
    seen: list[NoteArgs] = []

    async def body(args: NoteArgs, context: ToolRunContext) -> str:
        seen.append(args)
        return "ok"

    definition = define_tool(name="n", description="d", parameters=NoteArgs, execute=body)
    await _run(definition, {"note": {"text": "hi"}})

    assert [{"note": {"text": "hi"}}] == seen


def test_the_converter_structures_a_typeddict_without_its_not_required_keys() -> None:
    assert {"note": {"text": "hi", "author": "ada"}} == converter.structure(
        {"note": {"text": "hi", "author": "ada"}}, NoteArgs
    )
    assert {"note": {"text": "hi"}} == converter.structure({"note": {"text": "hi"}}, NoteArgs)
