"""Session events check their fields at construction, logs refuse a non-event, and
``run_tool_calls`` checks ``turn``/``step`` before anything is appended: one wrongly typed
event can no longer make a whole JSONL log unreadable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from dsh_tools import (
    CancelSignal,
    ContextMessageEvent,
    JsonlSessionLog,
    MemorySessionLog,
    PluginSource,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolErrorInfo,
    ToolRegistry,
    ToolResultEvent,
    UserSource,
    read_session_log,
    register_content_block,
    run_tool_calls,
)
from support import FILE_LOGS, FileLogKind, registry_with, spec_tool

_TEXT = (TextBlock(text="ok"),)


def _call(**changes: object) -> ToolCallEvent:
    fields: dict[str, object] = {
        "turn": 1,
        "step": 0,
        "call_id": "c1",
        "name": "t",
        "arguments": "{}",
    }
    fields.update(changes)
    return ToolCallEvent(**fields)  # pyright: ignore[reportArgumentType]


def _result(**changes: object) -> ToolResultEvent:
    fields: dict[str, object] = {
        "turn": 1,
        "step": 0,
        "call_id": "c1",
        "content": _TEXT,
        "is_error": False,
    }
    fields.update(changes)
    return ToolResultEvent(**fields)  # pyright: ignore[reportArgumentType]


def _context(**changes: object) -> ContextMessageEvent:
    fields: dict[str, object] = {"content": _TEXT, "source": UserSource()}
    fields.update(changes)
    return ContextMessageEvent(**fields)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: _call(turn="1"), TypeError, "turn must be a non-negative int, not '1'"),
        (lambda: _call(turn=True), TypeError, "turn must be a non-negative int, not True"),
        (lambda: _call(turn=-1), ValueError, "turn must be a non-negative int, not -1"),
        (lambda: _call(step=None), TypeError, "step must be a non-negative int, not None"),
        (lambda: _call(step=1.0), TypeError, "step must be a non-negative int, not 1.0"),
        (lambda: _call(call_id=3), TypeError, "call_id must be a str, not int"),
        (lambda: _call(name=None), TypeError, "name must be a str, not NoneType"),
        (lambda: _call(arguments={"a": 1}), TypeError, "arguments must be a str, not dict"),
        (lambda: _result(turn=False), TypeError, "turn must be a non-negative int, not False"),
        (lambda: _result(step=-2), ValueError, "step must be a non-negative int, not -2"),
        (lambda: _result(call_id=None), TypeError, "call_id must be a str, not NoneType"),
        (
            lambda: _result(content="ok"),
            TypeError,
            "content must be a sequence of content blocks, not str; "
            "for text use [TextBlock(text=...)]",
        ),
        (
            lambda: _result(content=[{"type": "text", "text": "ok"}]),
            TypeError,
            "content[0] must be a content block, not dict",
        ),
        (lambda: _result(is_error=1), TypeError, "is_error must be a bool, not 1"),
        (lambda: _result(is_error=None), TypeError, "is_error must be a bool, not None"),
        (
            lambda: _result(error="boom"),
            TypeError,
            "error must be a ToolErrorInfo or None, not str",
        ),
        (
            lambda: _result(source_event_seqs=["0"]),
            TypeError,
            "source_event_seqs must hold non-negative ints, not '0'",
        ),
        (
            lambda: _result(source_event_seqs=[True]),
            TypeError,
            "source_event_seqs must hold non-negative ints, not True",
        ),
        (
            lambda: _result(source_event_seqs="01"),
            TypeError,
            "source_event_seqs must be a sequence of ints, not '01'",
        ),
        (
            lambda: _context(content=[TextBlock(text="a"), "b"]),
            TypeError,
            "content[1] must be a content block, not str",
        ),
        (
            lambda: _context(source="user"),
            TypeError,
            "source must be a MessageSource (UserSource or PluginSource), not str",
        ),
    ],
)
def test_a_wrongly_typed_event_field_is_refused_at_construction(
    build: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        build()

    assert type(caught.value) is error
    assert message == str(caught.value)


def test_well_typed_events_are_still_built_as_before() -> None:
    error = ToolErrorInfo(name="HarnessError", code="X")

    result = _result(
        content=[TextBlock(text="no")], is_error=True, error=error, source_event_seqs=[0]
    )
    context = _context(source=PluginSource(plugin="p"), content=[])

    assert (TextBlock(text="no"),) == result.content
    assert (0,) == result.source_event_seqs
    assert error == result.error
    assert () == context.content
    assert "{}" == _call().arguments


@pytest.mark.parametrize(
    "event", ["not an event", {"type": "tool/call"}, None, TextBlock(text="x")]
)
def test_a_memory_log_refuses_a_value_that_is_not_an_event(event: object) -> None:
    log = MemorySessionLog()

    with pytest.raises(TypeError) as caught:
        log.append(event)  # pyright: ignore[reportArgumentType]

    assert f"event must be a session event, not {type(event).__name__}" == str(caught.value)
    assert [] == log.events()


@pytest.mark.parametrize("kind", FILE_LOGS, ids=[kind.name for kind in FILE_LOGS])
def test_a_file_log_refuses_a_non_event_and_stays_readable(
    tmp_path: Path, kind: FileLogKind
) -> None:
    path = tmp_path / kind.file_name
    with kind.open(path) as log:
        log.append(_call())
        with pytest.raises(TypeError) as caught:
            log.append({"type": "tool/call"})  # pyright: ignore[reportArgumentType]

    assert "event must be a session event, not dict" == str(caught.value)
    assert [_call()] == kind.read(path)


def _registry() -> ToolRegistry:
    return registry_with(spec_tool("t", description="T."))


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"turn": "1"}, TypeError, "turn must be a non-negative int, not '1'"),
        ({"turn": True}, TypeError, "turn must be a non-negative int, not True"),
        ({"turn": -1}, ValueError, "turn must be a non-negative int, not -1"),
        ({"step": None}, TypeError, "step must be a non-negative int, not None"),
        ({"step": -3}, ValueError, "step must be a non-negative int, not -3"),
    ],
)
async def test_run_tool_calls_checks_turn_and_step_before_appending_anything(
    tmp_path: Path, changes: dict[str, object], error: type[Exception], message: str
) -> None:
    path = tmp_path / "log.jsonl"
    calls = [ToolCallRequest(call_id="c1", name="t", arguments="{}")]
    with JsonlSessionLog(path) as log:
        with pytest.raises(error) as caught:
            await run_tool_calls(
                _registry(),
                calls,
                signal=CancelSignal.never(),
                session=log,
                **changes,  # pyright: ignore[reportArgumentType]
            )
        batch = await run_tool_calls(
            _registry(), calls, signal=CancelSignal.never(), session=log, turn=1
        )

    assert type(caught.value) is error
    assert message == str(caught.value)
    assert ["ok"] == [
        block.text for block in batch.results[0].content if isinstance(block, TextBlock)
    ]
    assert ["c1", "c1"] == [
        event.call_id
        for event in read_session_log(path)
        if isinstance(event, ToolCallEvent | ToolResultEvent)
    ]


@attrs.frozen(kw_only=True)
class _Note:
    note: str


@attrs.frozen(kw_only=True)
class _Unregistered:
    note: str


register_content_block(_Note, "fixes-session-note")


def test_a_block_added_with_register_content_block_is_a_content_block_of_an_event() -> None:
    result = _result(content=[TextBlock(text="a"), _Note(note="n")])

    with pytest.raises(TypeError) as caught:
        _result(content=[TextBlock(text="a"), _Unregistered(note="n")])

    assert (TextBlock(text="a"), _Note(note="n")) == result.content
    assert "content[1] must be a content block, not _Unregistered" == str(caught.value)
