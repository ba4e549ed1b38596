"""Session events, their wire shape, and the two session logs."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    ContextMessageEvent,
    HookContext,
    JsonlSessionLog,
    MemorySessionLog,
    PluginSource,
    ReasoningBlock,
    SessionEvent,
    SessionLog,
    SessionLogCorruptError,
    SessionLogLockedError,
    TextBlock,
    ToolCallBlock,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultBlock,
    ToolResultEvent,
    UserSource,
    read_session_log,
    session_event_from_json,
)
from dsh_tools._sessions._wire import event_to_wire
from dsh_tools.postgres import PostgresSessionLog
from strategies import session_events
from support import DURABLE_LOGS, FILE_LOGS, OPEN_LOG, FileLogKind

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


@pytest.fixture(params=FILE_LOGS, ids=[kind.name for kind in FILE_LOGS])
def kind(request: pytest.FixtureRequest) -> FileLogKind:
    """Each file log in turn: the tests of files below hold for every one of them."""
    file_log: FileLogKind = request.param
    return file_log


@pytest.fixture(params=DURABLE_LOGS, ids=[kind.name for kind in DURABLE_LOGS])
def durable(request: pytest.FixtureRequest) -> FileLogKind:
    """Each durable log in turn (the file logs and ``PostgresSessionLog``, its session named by
    the path): the contract tests below hold for every one of them."""
    log: FileLogKind = request.param
    log.start()
    return log


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


def test_a_replacement_result_carries_its_surface_op_on_the_wire() -> None:
    pruned = ToolResultEvent(
        turn=0, step=1, call_id="c1", content=(), is_error=False, surface_op="replace"
    )

    wire = event_to_wire(pruned)

    assert ("replace", pruned) == (wire["surfaceOp"], session_event_from_json(wire))


def test_a_surface_op_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="surface_op"):
        ToolResultEvent(turn=0, step=1, call_id="c1", content=(), is_error=False, surface_op=1)  # type: ignore[arg-type]


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
    assert event == session_event_from_json(json.loads(json.dumps(event_to_wire(event))))


@pytest.mark.parametrize("event", ALL_EVENTS)
def test_events_round_trip_through_the_wire(event: SessionEvent) -> None:
    assert event == session_event_from_json(json.loads(json.dumps(event_to_wire(event))))


def test_an_unknown_event_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown SessionEvent type 'tool/other'"):
        session_event_from_json({"type": "tool/other"})


def test_a_wire_event_missing_a_field_is_rejected_naming_it() -> None:
    wire = event_to_wire(CALL)
    del wire["name"]
    with pytest.raises(ValueError, match=r"required field missing @ \$\.name"):
        session_event_from_json(wire)


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


def test_every_log_satisfies_the_session_log_protocol(tmp_path: Path, durable: FileLogKind) -> None:
    assert isinstance(MemorySessionLog(), SessionLog)
    with durable.open(tmp_path / durable.file_name) as log:
        assert isinstance(log, SessionLog)


def test_a_durable_log_round_trips_every_event(tmp_path: Path, durable: FileLogKind) -> None:
    path = tmp_path / durable.file_name
    with durable.open(path) as log:
        seqs = [log.append(event) for event in ALL_EVENTS]
        assert seqs == [0, 1, 2, 3]
        assert log.events() == ALL_EVENTS
    assert ALL_EVENTS == durable.read(path)


def test_jsonl_log_writes_one_compact_line_per_event(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(CALL)
        log.append(RESULT)
    expected = (
        '{"type":"tool/call","turn":0,"step":1,"callId":"c1","name":"read_file",'
        '"arguments":"{\\"path\\":\\"a\\"}"}\n'
        '{"type":"tool/result","turn":0,"step":1,"callId":"c1",'
        '"content":[{"type":"text","text":"hello"}],"isError":false,"sourceEventSeqs":[0]}\n'
    )
    assert expected == path.read_text(encoding="utf-8")


def test_a_new_jsonl_log_creates_its_empty_file_at_construction(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        assert (b"", []) == (path.read_bytes(), log.events())


def test_a_file_log_at_a_bad_path_fails_at_construction(tmp_path: Path, kind: FileLogKind) -> None:
    with pytest.raises(FileNotFoundError):
        kind.open(tmp_path / "missing-directory" / kind.file_name)


def test_a_reopened_durable_log_continues_the_sequence_numbers(
    tmp_path: Path, durable: FileLogKind
) -> None:
    path = tmp_path / durable.file_name
    with durable.open(path) as first:
        first.append(CALL)
        first.append(RESULT)
    with durable.open(path) as second:
        assert second.append(CONTEXT) == 2
        assert second.events() == [CALL, RESULT, CONTEXT]


def test_jsonl_log_reading_tolerates_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(CALL)
        log.append(RESULT)
        with path.open("ab") as file:
            file.write(b'{"type":"tool/call","turn":0,"st')
        assert log.events() == [CALL, RESULT]


def test_reopening_after_a_torn_line_cuts_it_and_appends_on_a_fresh_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(CALL)
    with path.open("ab") as file:
        file.write(b'{"type":"tool/res')
    with JsonlSessionLog(path) as reopened:
        assert reopened.append(CONTEXT) == 1
        assert reopened.events() == [CALL, CONTEXT]


def test_a_torn_multibyte_character_at_the_end_is_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(json.dumps(event_to_wire(CALL)).encode() + b'\n{"type":"\xc3')
    assert [CALL] == read_session_log(path)


def test_a_complete_last_event_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    line = json.dumps(event_to_wire(CALL))
    path.write_text(line, encoding="utf-8")
    with JsonlSessionLog(path) as reopened:
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


@pytest.mark.parametrize(
    "last_line",
    ['{"type":"tool/call"}', '{"type":"tool/other","turn":0}', "[1, 2]", "42", '"text"', "null"],
)
def test_an_unterminated_last_line_that_is_json_but_not_an_event_is_corruption(
    tmp_path: Path, last_line: str
) -> None:
    # no proper prefix of an event's JSON object is JSON, so this cannot be a torn write
    path = tmp_path / "log.jsonl"
    content = json.dumps(event_to_wire(CALL)) + "\n" + last_line
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SessionLogCorruptError, match=r"line 2: not a session event"):
        read_session_log(path)
    with pytest.raises(SessionLogCorruptError, match=r"line 2: not a session event"):
        JsonlSessionLog(path)
    assert content == path.read_text(encoding="utf-8")  # nothing was cut


@given(st.integers(min_value=1))
def test_no_proper_prefix_of_an_event_line_is_json(cut: int) -> None:
    line = json.dumps(event_to_wire(FAILED), separators=(",", ":"))
    assert not _whole_json(line[: cut % len(line)].encode())


def test_corruption_names_the_wire_key_not_the_python_field(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    wire = event_to_wire(RESULT) | {"isError": "no"}
    del wire["callId"]
    path.write_text(json.dumps(wire) + "\n", encoding="utf-8")
    with pytest.raises(SessionLogCorruptError) as caught:
        read_session_log(path)
    assert "@ $.callId" in str(caught.value)
    assert "@ $.isError" in str(caught.value)
    assert "call_id" not in str(caught.value)
    assert "is_error" not in str(caught.value)


def test_nested_error_paths_use_wire_names_too() -> None:
    wire = event_to_wire(FAILED)
    wire["content"] = [{"type": "tool-result", "toolCallId": 1, "content": []}]
    with pytest.raises(ValueError, match=r"@ \$\.content\[0\]\.toolCallId"):
        session_event_from_json(wire)


def test_session_event_from_json_reads_one_wire_object() -> None:
    event: SessionEvent = session_event_from_json(json.loads(json.dumps(event_to_wire(FAILED))))
    assert FAILED == event


def test_session_event_from_json_rejects_an_unknown_key() -> None:
    with pytest.raises(ValueError, match="extra"):
        session_event_from_json(event_to_wire(CALL) | {"extra": 1})


def test_session_event_from_json_rejects_what_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="SessionEvent"):
        session_event_from_json(["tool/call"])


# --- writer lock, readers, lifetime ------------------------------------------------------------


def test_a_second_writer_in_the_same_process_is_refused(
    tmp_path: Path, durable: FileLogKind
) -> None:
    path = tmp_path / durable.file_name
    with durable.open(path) as log:
        log.append(CALL)
        with pytest.raises(SessionLogLockedError) as caught:
            durable.open(path)
        assert caught.value.path == durable.where(path)
        assert log.append(RESULT) == 1
    assert [CALL, RESULT] == durable.read(path)


def test_closing_the_writer_releases_the_lock(tmp_path: Path, durable: FileLogKind) -> None:
    path = tmp_path / durable.file_name
    durable.open(path).close()
    with durable.open(path) as again:
        assert again.append(CALL) == 0


_OTHER_WRITER = (
    OPEN_LOG
    + """
import sys
from dsh_tools import SessionLogLockedError
try:
    open_log(sys.argv[2], sys.argv[1]).close()
except SessionLogLockedError as exc:
    print("locked", exc.path)
else:
    print("opened")
"""
)


def test_a_second_writer_in_another_process_is_refused(
    tmp_path: Path, durable: FileLogKind
) -> None:
    path = tmp_path / durable.file_name
    with durable.open(path):
        held = subprocess.run(
            [sys.executable, "-c", _OTHER_WRITER, str(path), durable.name],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    free = subprocess.run(
        [sys.executable, "-c", _OTHER_WRITER, str(path), durable.name],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert (f"locked {durable.where(path)}\n", "opened\n") == (held.stdout, free.stdout)


def test_a_reader_never_cuts_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(CALL)
        with path.open("ab") as file:
            file.write(b'{"type":"tool/res')  # a writer in the middle of its write
        before = path.read_bytes()
        assert [CALL] == read_session_log(path)
        assert before == path.read_bytes()


def test_a_reader_of_a_locked_log_is_not_refused(tmp_path: Path, durable: FileLogKind) -> None:
    path = tmp_path / durable.file_name
    with durable.open(path) as log:
        log.append(CALL)
        assert [CALL] == durable.read(path)


def test_reading_a_log_never_written_is_a_missing_log_error(
    tmp_path: Path, durable: FileLogKind
) -> None:
    with pytest.raises(durable.missing):
        durable.read(tmp_path / durable.file_name)


def test_appending_after_close_raises_value_error(tmp_path: Path, durable: FileLogKind) -> None:
    log = durable.open(tmp_path / durable.file_name)
    log.close()
    log.close()  # closing twice does nothing
    with pytest.raises(ValueError, match="closed"):
        log.append(CALL)
    assert log.closed


def test_the_context_manager_closes_the_log(tmp_path: Path, durable: FileLogKind) -> None:
    with durable.open(tmp_path / durable.file_name) as log:
        assert not log.closed
    assert log.closed


def test_a_log_garbage_collected_while_open_is_closed_with_a_resource_warning(
    tmp_path: Path, durable: FileLogKind
) -> None:
    path = tmp_path / durable.file_name
    log = durable.open(path)
    log.append(CALL)

    def drop() -> None:
        nonlocal log
        del log
        gc.collect()

    with pytest.warns(ResourceWarning, match=f"unclosed {durable.class_name}"):
        drop()
    with durable.open(path) as again:  # the lock was released
        assert again.events() == [CALL]


def test_the_writer_keeps_its_file_open_between_appends(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(CALL)
        path.unlink()  # a writer that reopened per event would recreate the file here
        log.append(RESULT)
        assert ([CALL, RESULT], False) == (log.events(), path.exists())


def test_jsonl_log_with_fsync_still_round_trips(tmp_path: Path) -> None:
    with JsonlSessionLog(tmp_path / "log.jsonl", fsync=True) as log:
        log.append(CALL)
        assert log.events() == [CALL]


def test_context_message_event_carries_a_hook_context_unchanged() -> None:
    context = HookContext(content=[TextBlock(text="c")], source=UserSource(), meta=[1, 2])
    event = ContextMessageEvent(content=context.content, source=context.source, meta=context.meta)
    assert event == session_event_from_json(json.loads(json.dumps(event_to_wire(event))))


def test_a_file_log_names_its_path(tmp_path: Path, kind: FileLogKind) -> None:
    path = tmp_path / kind.file_name
    with kind.open(path) as log:
        assert not isinstance(log, PostgresSessionLog)  # a session of a database has no path
        assert log.path == path


def test_a_bool_is_not_accepted_as_a_turn_number() -> None:
    wire = event_to_wire(CALL) | {"turn": True}
    with pytest.raises(ValueError, match=r"expected int @ \$\.turn"):
        session_event_from_json(wire)


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
    with JsonlSessionLog(path) as log:
        for event in written:
            log.append(event)
    raw = path.read_bytes()
    kept = raw[: cut_at % (len(raw) + 1)]
    path.write_bytes(kept)
    # an event survives when its whole JSON text survived (only its newline may be cut off)
    complete = kept.count(b"\n") + (1 if _whole_json(kept.rsplit(b"\n", 1)[-1]) else 0)
    assert written[:complete] == read_session_log(path)
    assert kept == path.read_bytes()  # reading cut nothing
    with JsonlSessionLog(path) as reopened:
        assert written[:complete] == reopened.events()
        assert complete == reopened.append(CALL)
        assert [*written[:complete], CALL] == reopened.events()


# no per-example deadline: each example also makes round trips to a PostgreSQL server
@settings(max_examples=50, deadline=None)
@given(events=st.lists(session_events, max_size=6))
def test_any_events_read_back_equal_from_every_durable_log(
    tmp_path_factory: pytest.TempPathFactory, events: list[SessionEvent]
) -> None:
    for kind in DURABLE_LOGS:
        path = tmp_path_factory.mktemp(kind.name) / kind.file_name
        with kind.open(path) as log:
            assert list(range(len(events))) == [log.append(event) for event in events]
            assert events == log.events()
        assert events == kind.read(path)
