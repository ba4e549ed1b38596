"""Session events, their wire shape, and the two session logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    HookContext,
    PluginSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolErrorInfo,
    ToolResultBlock,
    UserSource,
)
from dsh_tools._session import (
    ContextMessageEvent,
    JsonlSessionLog,
    MemorySessionLog,
    SessionEvent,
    SessionLog,
    SessionLogCorruptError,
    ToolCallEvent,
    ToolResultEvent,
    event_from_wire,
    event_to_wire,
)

CALL = ToolCallEvent(turn=0, step=1, call_id="c1", name="read_file", arguments='{"path":"a"}')
RESULT = ToolResultEvent(
    turn=0,
    step=1,
    call_id="c1",
    content=[TextBlock(text="hello")],
    is_error=False,
    source_event_seqs=(0,),
)
FAILED = ToolResultEvent(
    turn=2,
    step=0,
    call_id="c9",
    content=[TextBlock(text="Error: tool call aborted")],
    is_error=True,
    error=ToolErrorInfo(name="AbortError", code="ABORTED"),
    meta={"elapsed": 1.5, "tags": ["x"]},
    source_event_seqs=(4,),
)
CONTEXT = ContextMessageEvent(
    content=[TextBlock(text="note")], source=PluginSource(plugin="lint"), meta={"k": None}
)
ALL_EVENTS: list[SessionEvent] = [CALL, RESULT, FAILED, CONTEXT]


def test_tool_call_event_has_the_original_wire_shape() -> None:
    expected = {
        "type": "tool/call",
        "turn": 0,
        "step": 1,
        "callId": "c1",
        "name": "read_file",
        "arguments": '{"path":"a"}',
    }
    assert expected == event_to_wire(CALL)


def test_tool_result_event_omits_absent_optionals() -> None:
    expected = {
        "type": "tool/result",
        "turn": 0,
        "step": 1,
        "callId": "c1",
        "content": [{"type": "text", "text": "hello"}],
        "isError": False,
        "sourceEventSeqs": [0],
    }
    assert expected == event_to_wire(RESULT)


def test_tool_result_event_wire_carries_error_and_meta() -> None:
    expected = {
        "type": "tool/result",
        "turn": 2,
        "step": 0,
        "callId": "c9",
        "content": [{"type": "text", "text": "Error: tool call aborted"}],
        "isError": True,
        "error": {"name": "AbortError", "code": "ABORTED"},
        "meta": {"elapsed": 1.5, "tags": ["x"]},
        "sourceEventSeqs": [4],
    }
    assert expected == event_to_wire(FAILED)


def test_context_message_event_wire_names_its_source() -> None:
    expected = {
        "type": "context/message",
        "content": [{"type": "text", "text": "note"}],
        "source": {"kind": "plugin", "plugin": "lint"},
        "meta": {"k": None},
    }
    assert expected == event_to_wire(CONTEXT)


def test_every_content_block_type_round_trips_through_the_wire() -> None:
    event = ContextMessageEvent(
        content=[
            TextBlock(text="t"),
            ReasoningBlock(text="r"),
            ToolCallBlock(id="c", name="n", arguments="{}"),
            ToolResultBlock(tool_call_id="c", content=[TextBlock(text="x")], is_error=True),
            ToolResultBlock(tool_call_id="d", content=[]),
        ],
        source=UserSource(),
    )
    assert event == event_from_wire(json.loads(json.dumps(event_to_wire(event))))


@pytest.mark.parametrize("event", ALL_EVENTS)
def test_events_round_trip_through_the_wire(event: SessionEvent) -> None:
    assert event == event_from_wire(json.loads(json.dumps(event_to_wire(event))))


def test_an_unknown_event_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown SessionEvent type 'tool/other'"):
        event_from_wire({"type": "tool/other"})


def test_a_wire_event_missing_a_field_is_rejected_naming_it() -> None:
    wire = event_to_wire(CALL)
    del wire["name"]
    with pytest.raises(ValueError, match=r"required field missing @ \$\.name"):
        event_from_wire(wire)


def test_memory_log_numbers_events_from_zero_in_append_order() -> None:
    log = MemorySessionLog()
    assert [log.append(CALL), log.append(RESULT), log.append(CONTEXT)] == [0, 1, 2]


def test_memory_log_reads_back_a_fresh_list_in_order() -> None:
    log = MemorySessionLog()
    log.append(CALL)
    log.append(RESULT)
    first = log.events()
    first.clear()
    assert log.events() == [CALL, RESULT]


def test_both_logs_satisfy_the_session_log_protocol(tmp_path: Path) -> None:
    assert isinstance(MemorySessionLog(), SessionLog)
    assert isinstance(JsonlSessionLog(tmp_path / "log.jsonl"), SessionLog)


def test_jsonl_log_round_trips_every_event(tmp_path: Path) -> None:
    log = JsonlSessionLog(tmp_path / "log.jsonl")
    seqs = [log.append(event) for event in ALL_EVENTS]
    assert seqs == [0, 1, 2, 3]
    assert log.events() == ALL_EVENTS


def test_jsonl_log_writes_one_compact_line_per_event(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    log = JsonlSessionLog(path)
    log.append(CALL)
    log.append(RESULT)
    expected = (
        '{"type":"tool/call","turn":0,"step":1,"callId":"c1","name":"read_file",'
        '"arguments":"{\\"path\\":\\"a\\"}"}\n'
        '{"type":"tool/result","turn":0,"step":1,"callId":"c1",'
        '"content":[{"type":"text","text":"hello"}],"isError":false,"sourceEventSeqs":[0]}\n'
    )
    assert expected == path.read_text(encoding="utf-8")


def test_jsonl_log_of_a_missing_file_is_empty_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    log = JsonlSessionLog(path)
    assert log.events() == []
    assert not path.exists()


def test_reopened_jsonl_log_continues_the_sequence_numbers(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    first = JsonlSessionLog(path)
    first.append(CALL)
    first.append(RESULT)
    second = JsonlSessionLog(path)
    assert second.append(CONTEXT) == 2
    assert second.events() == [CALL, RESULT, CONTEXT]


def test_jsonl_log_reading_tolerates_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    log = JsonlSessionLog(path)
    log.append(CALL)
    log.append(RESULT)
    with path.open("ab") as file:
        file.write(b'{"type":"tool/call","turn":0,"st')
    assert log.events() == [CALL, RESULT]


def test_reopening_after_a_torn_line_cuts_it_and_appends_on_a_fresh_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    JsonlSessionLog(path).append(CALL)
    with path.open("ab") as file:
        file.write(b'{"type":"tool/res')
    reopened = JsonlSessionLog(path)
    assert reopened.append(CONTEXT) == 1
    assert reopened.events() == [CALL, CONTEXT]


def test_a_complete_last_event_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    line = json.dumps(event_to_wire(CALL))
    path.write_text(line, encoding="utf-8")
    reopened = JsonlSessionLog(path)
    assert reopened.append(RESULT) == 1
    assert reopened.events() == [CALL, RESULT]


def test_a_corrupt_line_in_the_middle_is_an_error_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    good = json.dumps(event_to_wire(CALL))
    path.write_text(f"{good}\nnot json\n{good}\n", encoding="utf-8")
    with pytest.raises(SessionLogCorruptError, match=r"line 2: not JSON") as caught:
        JsonlSessionLog(path)
    assert caught.value.line == 2


def test_a_newline_terminated_line_that_is_not_an_event_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"type":"tool/call"}\n', encoding="utf-8")
    with pytest.raises(
        SessionLogCorruptError,
        match=r"line 1: not a session event \(required field missing @ \$\.turn;",
    ):
        JsonlSessionLog(path)


def test_jsonl_log_with_fsync_still_round_trips(tmp_path: Path) -> None:
    log = JsonlSessionLog(tmp_path / "log.jsonl", fsync=True)
    log.append(CALL)
    assert log.events() == [CALL]


def test_context_message_event_carries_a_hook_context_unchanged() -> None:
    context = HookContext(content=[TextBlock(text="c")], source=UserSource(), meta=[1, 2])
    event = ContextMessageEvent(content=context.content, source=context.source, meta=context.meta)
    assert event == event_from_wire(json.loads(json.dumps(event_to_wire(event))))


def test_jsonl_log_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    assert JsonlSessionLog(path).path == path


def test_a_bool_is_not_accepted_as_a_turn_number() -> None:
    wire = event_to_wire(CALL) | {"turn": True}
    with pytest.raises(ValueError, match=r"expected int @ \$\.turn"):
        event_from_wire(wire)


def test_a_line_that_is_not_utf8_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    good = json.dumps(event_to_wire(CALL)).encode()
    path.write_bytes(good + b"\n\xff\xfe\n" + good + b"\n")
    with pytest.raises(SessionLogCorruptError, match=r"line 2: not UTF-8 text$"):
        JsonlSessionLog(path)


def _whole_json(text: bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@settings(max_examples=100)
@given(cut_at=st.integers(min_value=0, max_value=10**6), count=st.integers(1, 4))
def test_a_log_cut_at_any_byte_keeps_every_complete_event_and_appends_cleanly(
    tmp_path_factory: pytest.TempPathFactory, cut_at: int, count: int
) -> None:
    path = tmp_path_factory.mktemp("torn") / "log.jsonl"
    written = ALL_EVENTS[:count]
    log = JsonlSessionLog(path)
    for event in written:
        log.append(event)
    raw = path.read_bytes()
    kept = raw[: cut_at % (len(raw) + 1)]
    path.write_bytes(kept)
    # an event survives when its whole JSON text survived (only its newline may be cut off)
    complete = kept.count(b"\n") + (1 if _whole_json(kept.rsplit(b"\n", 1)[-1]) else 0)
    reopened = JsonlSessionLog(path)
    assert written[:complete] == reopened.events()
    assert complete == reopened.append(CALL)
    assert [*written[:complete], CALL] == reopened.events()
