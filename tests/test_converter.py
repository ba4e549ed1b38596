"""The converter: the original's wire JSON for every public value type, and strict reading."""

from __future__ import annotations

import json
import re
from typing import Any, cast

import attrs
import cattrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    Accept,
    Allow,
    Ask,
    Block,
    ContentBlock,
    Deny,
    DiffCallView,
    DiffResultView,
    FileDiff,
    FileLocation,
    FrozenJsonObject,
    GenericCallView,
    GenericResultView,
    HookContext,
    MessageSource,
    PluginSource,
    PostToolDecision,
    PreToolDecision,
    ReasoningBlock,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallBlock,
    ToolCallKind,
    ToolCallView,
    ToolErrorInfo,
    ToolExecutionMode,
    ToolExecutionResult,
    ToolResult,
    ToolResultBlock,
    ToolResultView,
    ToolSchema,
    UserSource,
    converter,
    register_content_block,
    snapshot_json,
)
from dsh_tools._values._converter import register_wire_class
from strategies import any_public_value, public_values_by_kind

# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(public_values_by_kind))
@given(data=st.data())
def test_every_public_value_round_trips_through_its_wire_json(
    kind: str, data: st.DataObject
) -> None:
    value: object = data.draw(public_values_by_kind[kind])

    wire = converter.unstructure(value)

    assert value == converter.structure(wire, type(value))


@given(any_public_value)
def test_the_wire_form_of_every_public_value_survives_json_text(value: object) -> None:
    wire = converter.unstructure(value)

    assert wire == json.loads(json.dumps(wire, allow_nan=False))


@given(any_public_value)
def test_the_wire_form_of_every_public_value_contains_only_plain_json_types(
    value: object,
) -> None:
    def plain(data: object) -> bool:
        if type(data) is dict:
            items = cast("dict[object, object]", data).items()
            return all(type(k) is str and plain(v) for k, v in items)
        if type(data) is list:
            return all(plain(item) for item in cast("list[object]", data))
        return data is None or type(data) in (bool, int, float, str)

    assert plain(converter.unstructure(value))


# --- pinned wire JSON, one example per type ------------------------------------------------

PINNED: list[tuple[object, object]] = [
    (TextBlock(text="hi"), {"type": "text", "text": "hi"}),
    (ReasoningBlock(text="hmm"), {"type": "reasoning", "text": "hmm"}),
    (
        ToolCallBlock(id="c1", name="read", arguments='{"path":"a"}'),
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"path":"a"}'},
    ),
    (
        ToolResultBlock(tool_call_id="c1", content=[TextBlock(text="ok")], is_error=True),
        {
            "type": "tool-result",
            "toolCallId": "c1",
            "content": [{"type": "text", "text": "ok"}],
            "isError": True,
        },
    ),
    (
        ToolResultBlock(tool_call_id="c1", content=[]),
        {"type": "tool-result", "toolCallId": "c1", "content": []},
    ),
    (UserSource(), {"kind": "user"}),
    (PluginSource(plugin="lint"), {"kind": "plugin", "plugin": "lint"}),
    (
        HookContext(
            content=[TextBlock(text="note")], source=UserSource(), meta=snapshot_json({"a": [1]})
        ),
        {
            "content": [{"type": "text", "text": "note"}],
            "source": {"kind": "user"},
            "meta": {"a": [1]},
        },
    ),
    (
        HookContext(content=[], source=PluginSource(plugin="p")),
        {"content": [], "source": {"kind": "plugin", "plugin": "p"}},
    ),
    (
        ToolErrorInfo(name="ToolArgsError", code="INVALID_ARGS"),
        {"name": "ToolArgsError", "code": "INVALID_ARGS"},
    ),
    (
        ToolExecutionResult(
            content=[TextBlock(text="Error: no")],
            is_error=True,
            error=ToolErrorInfo(name="AbortError", code="ABORTED"),
            additional_contexts=[HookContext(content=[], source=UserSource())],
            meta={"k": None},
        ),
        {
            "content": [{"type": "text", "text": "Error: no"}],
            "isError": True,
            "error": {"name": "AbortError", "code": "ABORTED"},
            "additionalContexts": [{"content": [], "source": {"kind": "user"}}],
            "meta": {"k": None},
        },
    ),
    (
        ToolExecutionResult(content=[], is_error=False),
        {"content": [], "isError": False},
    ),
    (
        ToolResult(content=[TextBlock(text="x")], is_error=False, meta=None),
        {"content": [{"type": "text", "text": "x"}], "isError": False},
    ),
    (
        ToolSchema(name="read", description="Read a file", parameters={"type": "object"}),
        {"name": "read", "description": "Read a file", "parameters": {"type": "object"}},
    ),
    (ToolExecutionMode.PARALLEL, {"kind": "parallel"}),
    (ToolExecutionMode.EXCLUSIVE, {"kind": "exclusive"}),
    (Allow(), {"kind": "allow"}),
    (Deny("not here"), {"kind": "deny", "reason": "not here"}),
    (Ask(), {"kind": "ask"}),
    (Ask("sure?"), {"kind": "ask", "reason": "sure?"}),
    (Accept(), {"kind": "accept"}),
    (Accept(content=[]), {"kind": "accept", "content": []}),
    (
        Block(
            feedback=[TextBlock(text="no")],
            additional_contexts=[HookContext(content=[], source=UserSource())],
        ),
        {
            "kind": "block",
            "feedback": [{"type": "text", "text": "no"}],
            "additionalContexts": [{"content": [], "source": {"kind": "user"}}],
        },
    ),
    (FileLocation(path="a.py"), {"path": "a.py"}),
    (FileLocation(path="a.py", line=3), {"path": "a.py", "line": 3}),
    (
        FileDiff(path="a.py", old_text=None, new_text="x"),
        {"path": "a.py", "oldText": None, "newText": "x"},
    ),
    (
        GenericCallView(
            title="read",
            kind=ToolCallKind.READ,
            raw_input={"path": "a.py"},
            content=[TextBlock(text="t")],
            locations=[FileLocation(path="a.py", line=1)],
        ),
        {
            "card": "generic",
            "title": "read",
            "kind": "read",
            "rawInput": {"path": "a.py"},
            "content": [{"type": "text", "text": "t"}],
            "locations": [{"path": "a.py", "line": 1}],
        },
    ),
    (GenericCallView(title="t"), {"card": "generic", "title": "t"}),
    (
        TerminalCallView(title="ls -l", description="list", cwd="/tmp"),
        {"card": "terminal", "title": "ls -l", "description": "list", "cwd": "/tmp"},
    ),
    (
        DiffCallView(title="edit", diffs=[FileDiff(path="a", old_text="1", new_text="2")]),
        {
            "card": "diff",
            "title": "edit",
            "diffs": [{"path": "a", "oldText": "1", "newText": "2"}],
        },
    ),
    (GenericResultView(), {"card": "generic"}),
    (
        TerminalResultView(title="ls", output="a\n", exit_code=0),
        {"card": "terminal", "title": "ls", "output": "a\n", "exitCode": 0},
    ),
    (TerminalResultView(signal="SIGKILL"), {"card": "terminal", "signal": "SIGKILL"}),
    (DiffResultView(), {"card": "diff", "diffs": []}),
]


@pytest.mark.parametrize(("value", "wire"), PINNED, ids=lambda v: type(v).__name__)
def test_a_value_unstructures_to_the_original_wire_json(value: object, wire: object) -> None:
    assert wire == converter.unstructure(value)


@pytest.mark.parametrize(("value", "wire"), PINNED, ids=lambda v: type(v).__name__)
def test_the_original_wire_json_structures_to_the_value(value: object, wire: object) -> None:
    assert value == converter.structure(wire, type(value))


def test_the_tag_comes_first_in_a_wire_object() -> None:
    wire = converter.unstructure(ToolCallBlock(id="c", name="n", arguments="{}"))

    assert list(wire) == ["type", "id", "name", "arguments"]


_CONTENT_BLOCK: Any = ContentBlock  # cattrs' stubs accept only classes as targets

# --- unions --------------------------------------------------------------------------------

UNIONS: list[tuple[Any, object, object]] = [
    (ContentBlock, {"type": "reasoning", "text": "r"}, ReasoningBlock(text="r")),
    (MessageSource, {"kind": "plugin", "plugin": "p"}, PluginSource(plugin="p")),
    (PreToolDecision, {"kind": "deny", "reason": "r"}, Deny("r")),
    (PostToolDecision, {"kind": "block", "feedback": []}, Block(feedback=[])),
    (ToolCallView, {"card": "terminal", "title": "ls"}, TerminalCallView(title="ls")),
    (ToolResultView, {"card": "diff", "diffs": []}, DiffResultView()),
]


@pytest.mark.parametrize(("union", "wire", "value"), UNIONS)
def test_a_union_alias_structures_by_its_tag(union: Any, wire: object, value: object) -> None:
    assert value == converter.structure(wire, union)


def test_an_unknown_content_block_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown ContentBlock type 'hologram'"):
        converter.structure({"type": "hologram", "url": "x"}, _CONTENT_BLOCK)


def test_an_unknown_content_block_type_inside_a_result_is_rejected() -> None:
    wire = {"content": [{"type": "text", "text": "a"}, {"type": "video"}], "isError": False}

    [message] = _errors(wire, ToolExecutionResult)

    # other test modules may register more block types, so the known list is matched loosely
    assert re.fullmatch(
        r"ValueError: unknown ContentBlock type 'video' \(known: \"text\", \"reasoning\", "
        r"\"tool-call\", \"tool-result\".*\) @ \$\.content\[1\]",
        message,
    )


def test_a_content_block_without_its_tag_is_rejected() -> None:
    with pytest.raises(ValueError, match='ContentBlock is missing its "type" tag'):
        converter.structure({"text": "a"}, _CONTENT_BLOCK)


def test_a_class_structured_from_another_class_s_tag_is_rejected() -> None:
    with pytest.raises(ValueError, match='expected type "text" for TextBlock'):
        converter.structure({"type": "reasoning", "text": "a"}, TextBlock)


# --- strict structuring --------------------------------------------------------------------


def _describe(exc: BaseException, _type: object) -> str:
    return f"{type(exc).__name__}: {exc}"


def _errors(data: object, cls: Any) -> list[str]:
    """The leaf errors of structuring ``data`` as ``cls``, each with its path (Python names)."""
    with pytest.raises(cattrs.BaseValidationError) as caught:
        converter.structure(data, cls)
    return cattrs.transform_error(caught.value, format_exception=_describe)


def test_an_unknown_key_is_rejected_rather_than_dropped() -> None:
    assert _errors({"type": "text", "text": "a", "colour": "red"}, TextBlock) == [
        "ForbiddenExtraKeysError: Extra fields in constructor for TextBlock: colour @ $"
    ]


def test_a_snake_case_key_is_rejected_on_the_wire() -> None:
    assert _errors({"content": [], "isError": False, "is_error": True}, ToolResult) == [
        "ForbiddenExtraKeysError: Extra fields in constructor for ToolResult: is_error @ $"
    ]


def test_a_missing_required_key_is_rejected() -> None:
    assert _errors({"content": []}, ToolExecutionResult) == ["KeyError: 'isError' @ $.is_error"]


def test_a_number_is_not_read_as_a_string() -> None:
    assert _errors({"type": "text", "text": 5}, TextBlock) == [
        "TypeError: expected a string, got int @ $.text"
    ]


def test_a_number_is_not_read_as_a_boolean() -> None:
    assert _errors({"content": [], "isError": 1}, ToolResult) == [
        "TypeError: expected a boolean, got int @ $.is_error"
    ]


def test_a_boolean_is_not_read_as_an_integer() -> None:
    assert _errors({"path": "a", "line": True}, FileLocation) == [
        "TypeError: expected an integer, got bool @ $.line"
    ]


def test_a_string_is_not_read_as_an_array() -> None:
    assert _errors({"content": "abc", "isError": False}, ToolResult) == [
        "TypeError: expected a JSON array, got str @ $.content"
    ]


def test_an_unknown_execution_mode_is_rejected() -> None:
    assert _errors({"kind": "serial"}, ToolExecutionMode) == [
        "CattrsError: serial not in literal typing.Literal['parallel', 'exclusive'] @ $.kind"
    ]


def test_an_unknown_call_kind_is_rejected() -> None:
    assert _errors({"card": "generic", "title": "t", "kind": "teleport"}, GenericCallView) == [
        "ValueError: 'teleport' is not a valid ToolCallKind @ $.kind"
    ]


def test_a_non_object_is_rejected_where_an_object_belongs() -> None:
    with pytest.raises(TypeError, match=r"expected a JSON object \(ToolErrorInfo\), got list"):
        converter.structure([], ToolErrorInfo)


def test_meta_that_is_not_lossless_json_is_rejected() -> None:
    wire: dict[str, object] = {"content": [], "isError": False, "meta": {"x": [float("nan")]}}

    assert _errors(wire, ToolExecutionResult) == [
        "JsonValueError: $.x[0]: nan is not a finite number @ $.meta"
    ]


# --- JSON payloads -------------------------------------------------------------------------


def test_meta_structures_into_a_frozen_snapshot() -> None:
    result = converter.structure(
        {"content": [], "isError": False, "meta": {"rows": [1, 2]}}, ToolExecutionResult
    )

    assert isinstance(result.meta, FrozenJsonObject)
    assert result.meta["rows"] == (1, 2)


def test_meta_unstructures_into_plain_mutable_json() -> None:
    wire = converter.unstructure(ToolExecutionResult(content=[], is_error=False, meta={"a": [1]}))

    assert dict is type(wire["meta"])
    assert list is type(wire["meta"]["a"])


def test_a_schema_s_parameters_are_copied_on_the_way_out() -> None:
    parameters: dict[str, object] = {"type": "object", "properties": {}}
    schema = ToolSchema(name="n", description="d", parameters=parameters)

    wire = converter.unstructure(schema)
    wire["parameters"]["properties"]["x"] = {"type": "string"}

    assert parameters == {"type": "object", "properties": {}}


def test_an_empty_accept_content_is_kept_because_it_replaces_the_result() -> None:
    assert converter.unstructure(Accept(content=()))["content"] == []


# --- extension -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _StickerBlock:
    media_type: str
    data: str
    alt_text: str | None = None


register_content_block(_StickerBlock, "sticker")


def test_a_registered_content_block_unstructures_with_its_tag_and_camel_case_keys() -> None:
    assert converter.unstructure(_StickerBlock(media_type="image/png", data="AAAA")) == {
        "type": "sticker",
        "mediaType": "image/png",
        "data": "AAAA",
    }


def test_a_registered_content_block_structures_inside_a_result() -> None:
    wire = {
        "content": [
            {"type": "sticker", "mediaType": "image/png", "data": "AAAA", "altText": "dot"}
        ],
        "isError": False,
    }

    result = converter.structure(wire, ToolExecutionResult)

    assert (_StickerBlock(media_type="image/png", data="AAAA", alt_text="dot"),) == result.content


def test_a_registered_content_block_unstructures_inside_a_result() -> None:
    block = _StickerBlock(media_type="image/gif", data="R0")
    result = ToolExecutionResult(content=[block], is_error=False)  # pyright: ignore[reportArgumentType]

    assert converter.unstructure(result)["content"] == [
        {"type": "sticker", "mediaType": "image/gif", "data": "R0"}
    ]


def test_a_content_block_tag_cannot_be_taken_twice() -> None:
    @attrs.frozen
    class Other:
        text: str

    with pytest.raises(ValueError, match='ContentBlock tag "text" is taken by TextBlock'):
        register_content_block(Other, "text")


def test_registering_a_non_attrs_class_is_rejected() -> None:
    class Plain:
        pass

    with pytest.raises(TypeError, match="is not an attrs class"):
        register_wire_class(Plain)


@attrs.frozen(kw_only=True)
class _PingEvent:
    turn: int
    call_id: str
    note: str | None = None


@attrs.frozen(kw_only=True)
class _PongEvent:
    turn: int


_Event = _PingEvent | _PongEvent
_EVENT: Any = _Event  # cattrs' stubs accept only classes as targets; unions work at runtime
register_wire_class(_PingEvent, tag_key="type", tag="test/ping", union=_Event, union_name="Event")
register_wire_class(_PongEvent, tag_key="type", tag="test/pong", union=_Event, union_name="Event")


def test_a_wire_class_registered_elsewhere_gets_camel_case_keys_and_its_tag() -> None:
    assert converter.unstructure(_PingEvent(turn=1, call_id="c")) == {
        "type": "test/ping",
        "turn": 1,
        "callId": "c",
    }


def test_a_union_registered_elsewhere_structures_by_its_tag() -> None:
    assert _PongEvent(turn=2) == converter.structure({"type": "test/pong", "turn": 2}, _EVENT)


def test_a_union_given_something_other_than_an_object_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"expected a JSON object \(ContentBlock\), got str"):
        converter.structure("text", _CONTENT_BLOCK)


def test_unstructuring_a_non_member_as_a_union_is_rejected() -> None:
    with pytest.raises(TypeError, match="UserSource is not a registered ContentBlock type"):
        converter.unstructure(UserSource(), unstructure_as=ContentBlock)


def test_a_tagged_class_given_something_other_than_an_object_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"expected a JSON object \(TextBlock\), got list"):
        converter.structure(["text"], TextBlock)


def test_a_tag_without_a_tag_key_is_rejected() -> None:
    @attrs.frozen
    class Tagless:
        x: int

    with pytest.raises(ValueError, match="tag_key and tag go together"):
        register_wire_class(Tagless, tag="t")


def test_a_union_member_without_a_tag_is_rejected() -> None:
    @attrs.frozen
    class Untagged:
        x: int

    with pytest.raises(ValueError, match="a union member needs a tag_key and a tag"):
        register_wire_class(Untagged, union=_Event)


def test_a_union_member_with_another_tag_key_is_rejected() -> None:
    @attrs.frozen
    class OtherKey:
        x: int

    with pytest.raises(ValueError, match='Event members are tagged by "type", not "kind"'):
        register_wire_class(OtherKey, tag_key="kind", tag="other", union=_Event, union_name="Event")
