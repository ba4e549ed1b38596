"""The events that bracket a batch (``batch/start``, ``batch/end``), a call's ``attempt`` and a
result's ``contexts``: their wire shape, their validation, and what ``check_batch`` makes of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from rich.console import Console

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    ContextMessageEvent,
    HookContext,
    JsonlSessionLog,
    MemorySessionLog,
    PluginSource,
    SessionEvent,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolExecutionResult,
    ToolResultEvent,
    UserSource,
    read_session_log,
    session_event_from_json,
)
from dsh_tools._sessions._wire import encode_event_line
from dsh_tools.cli.replay import main_replay
from dsh_tools.testing import check_batch

BATCH_ID = "5b0c2b7e-8a51-4c55-9a9e-0d4f8c6f0e11"
CALLS = (
    ToolCallRequest(call_id="c1", name="read", arguments='{"path":"a"}'),
    ToolCallRequest(call_id="c2", name="write", arguments="not json"),
)
START = BatchStartEvent(turn=1, step=2, batch_id=BATCH_ID, calls=CALLS)
END = BatchEndEvent(turn=1, step=2, batch_id=BATCH_ID, reason="completed")
NOTE = HookContext(content=[TextBlock(text="note")], source=PluginSource(plugin="lint"))


def _wire(event: SessionEvent) -> str:
    return encode_event_line(event).decode()


def test_batch_start_has_the_wire_shape_of_the_other_events() -> None:
    expected = (
        '{"type":"batch/start","turn":1,"step":2,"batchId":"' + BATCH_ID + '","calls":['
        '{"callId":"c1","name":"read","arguments":"{\\"path\\":\\"a\\"}"},'
        '{"callId":"c2","name":"write","arguments":"not json"}]}\n'
    )
    assert expected == _wire(START)


def test_batch_end_has_the_wire_shape_of_the_other_events() -> None:
    expected = (
        '{"type":"batch/end","turn":1,"step":2,"batchId":"' + BATCH_ID + '","reason":"completed"}\n'
    )
    assert expected == _wire(END)


def test_a_first_attempt_is_omitted_from_the_wire_and_a_later_one_is_written() -> None:
    first = ToolCallEvent(turn=0, step=0, call_id="c1", name="t", arguments="{}")
    second = ToolCallEvent(turn=0, step=0, call_id="c1", name="t", arguments="{}", attempt=2)
    assert (
        '{"type":"tool/call","turn":0,"step":0,"callId":"c1","name":"t","arguments":"{}"}\n',
        '{"type":"tool/call","turn":0,"step":0,"callId":"c1","name":"t","arguments":"{}",'
        '"attempt":2}\n',
    ) == (_wire(first), _wire(second))
    assert 1 == first.attempt


def test_a_result_writes_its_contexts_only_when_it_has_some() -> None:
    bare = ToolResultEvent(turn=0, step=0, call_id="c1", content=[], is_error=False)
    with_contexts = ToolResultEvent(
        turn=0, step=0, call_id="c1", content=[], is_error=False, contexts=[NOTE]
    )
    assert (
        '{"type":"tool/result","turn":0,"step":0,"callId":"c1","content":[],"isError":false}\n',
        '{"type":"tool/result","turn":0,"step":0,"callId":"c1","content":[],"isError":false,'
        '"contexts":[{"content":[{"type":"text","text":"note"}],'
        '"source":{"kind":"plugin","plugin":"lint"}}]}\n',
    ) == (_wire(bare), _wire(with_contexts))
    assert ((), (NOTE,)) == (bare.contexts, with_contexts.contexts)


@pytest.mark.parametrize(
    "event",
    [
        START,
        END,
        BatchStartEvent(turn=0, step=0, batch_id="b", calls=[]),
        ToolCallEvent(turn=0, step=0, call_id="c", name="t", arguments="", attempt=3),
        ToolResultEvent(
            turn=0,
            step=0,
            call_id="c",
            content=[TextBlock(text="x")],
            is_error=False,
            contexts=[NOTE, HookContext(content=[], source=UserSource(), meta={"k": [1]})],
        ),
    ],
)
def test_the_new_events_round_trip_through_the_wire(event: SessionEvent) -> None:
    assert event == session_event_from_json(json.loads(_wire(event)))


def test_the_new_events_round_trip_through_a_jsonl_log(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    events: list[SessionEvent] = [
        START,
        ToolCallEvent(turn=1, step=2, call_id="c1", name="read", arguments="{}", attempt=2),
        ToolResultEvent(turn=1, step=2, call_id="c1", content=[], is_error=False, contexts=[NOTE]),
        END,
    ]
    with JsonlSessionLog(path) as log:
        assert [0, 1, 2, 3] == [log.append(event) for event in events]
    assert events == read_session_log(path)


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (
            {"type": "batch/end", "turn": 0, "step": 0, "batchId": "b", "reason": "done"},
            'reason must be one of "completed", "aborted", "suspended", "failed", not \'done\'',
        ),
        (
            {"type": "batch/start", "turn": 0, "step": 0, "batchId": "b"}
            | {"calls": [{"name": "t", "arguments": ""}]},
            "required field missing @ $.calls[0].callId",
        ),
        (
            {"type": "batch/start", "turn": 0, "step": 0, "batchId": "b", "calls": "c1"},
            "invalid value for type, expected tuple @ $.calls",
        ),
        (
            {"type": "tool/call", "turn": 0, "step": 0, "callId": "c", "name": "t"}
            | {"arguments": "", "attempt": 0},
            "attempt must be a positive int, not 0",
        ),
    ],
)
def test_a_bad_wire_value_of_a_new_event_is_refused_with_its_reason(
    wire: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        session_event_from_json(wire)
    assert message in str(caught.value)


def _start(**changes: object) -> BatchStartEvent:
    fields: dict[str, object] = {"turn": 0, "step": 0, "batch_id": "b", "calls": CALLS}
    fields.update(changes)
    return BatchStartEvent(**fields)  # pyright: ignore[reportArgumentType]


def _end(**changes: object) -> BatchEndEvent:
    fields: dict[str, object] = {"turn": 0, "step": 0, "batch_id": "b", "reason": "aborted"}
    fields.update(changes)
    return BatchEndEvent(**fields)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: _start(turn="1"), TypeError, "turn must be a non-negative int, not '1'"),
        (lambda: _start(step=-1), ValueError, "step must be a non-negative int, not -1"),
        (lambda: _start(batch_id=""), ValueError, "batch_id must be a non-empty str, not ''"),
        (lambda: _start(batch_id=7), TypeError, "batch_id must be a non-empty str, not 7"),
        (
            lambda: _start(calls="c1"),
            TypeError,
            "calls must be a sequence of ToolCallRequest, not 'c1'",
        ),
        (
            lambda: _start(calls=[CALLS[0], {"call_id": "c2"}]),
            TypeError,
            "calls[1] must be a ToolCallRequest, not dict",
        ),
        (lambda: _end(turn=True), TypeError, "turn must be a non-negative int, not True"),
        (lambda: _end(batch_id=None), TypeError, "batch_id must be a non-empty str, not None"),
        (
            lambda: _end(reason="done"),
            ValueError,
            'reason must be one of "completed", "aborted", "suspended", "failed", not \'done\'',
        ),
        (
            lambda: _end(reason=None),
            TypeError,
            'reason must be one of "completed", "aborted", "suspended", "failed", not None',
        ),
        (
            lambda: ToolCallEvent(turn=0, step=0, call_id="c", name="t", arguments="", attempt=0),
            ValueError,
            "attempt must be a positive int, not 0",
        ),
        (
            lambda: ToolCallEvent(
                turn=0,
                step=0,
                call_id="c",
                name="t",
                arguments="",
                attempt=True,
            ),
            TypeError,
            "attempt must be a positive int, not True",
        ),
        (
            lambda: ToolResultEvent(
                turn=0,
                step=0,
                call_id="c",
                content=[],
                is_error=False,
                contexts=[NOTE, "c"],  # pyright: ignore[reportArgumentType]
            ),
            TypeError,
            "contexts[1] must be a HookContext, not str",
        ),
        (
            lambda: ToolResultEvent(
                turn=0,
                step=0,
                call_id="c",
                content=[],
                is_error=False,
                contexts=NOTE,  # pyright: ignore[reportArgumentType]
            ),
            TypeError,
            "contexts must be a sequence of HookContext, not HookContext",
        ),
    ],
)
def test_a_wrongly_typed_field_of_a_new_event_is_refused_at_construction(
    build: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        build()
    assert type(caught.value) is error
    assert message == str(caught.value)


def test_every_log_accepts_the_new_events() -> None:
    log = MemorySessionLog()
    assert [0, 1] == [log.append(START), log.append(END)]


# --- check_batch on a bracketed batch ----------------------------------------------------------


def _ok(text: str, contexts: tuple[HookContext, ...] = ()) -> ToolExecutionResult:
    return ToolExecutionResult(
        content=(TextBlock(text=text),), is_error=False, additional_contexts=contexts
    )


def _bracketed(
    *, start_calls: tuple[ToolCallRequest, ...] = CALLS, end: bool = True
) -> tuple[ToolBatch, list[SessionEvent]]:
    results = (_ok("a", (NOTE,)), _ok("b"))
    batch = ToolBatch(results=results, contexts=(NOTE,))
    events: list[SessionEvent] = [BatchStartEvent(turn=1, step=0, batch_id="b", calls=start_calls)]
    for index, (call, result) in enumerate(zip(CALLS, results, strict=True)):
        events.append(
            ToolCallEvent(
                turn=1, step=0, call_id=call.call_id, name=call.name, arguments=call.arguments
            )
        )
        events.append(
            ToolResultEvent(
                turn=1,
                step=0,
                call_id=call.call_id,
                content=result.content,
                is_error=False,
                source_event_seqs=(1 + 2 * index,),
                contexts=result.additional_contexts,
            )
        )
    events.append(ContextMessageEvent(content=NOTE.content, source=NOTE.source))
    if end:
        events.append(BatchEndEvent(turn=1, step=0, batch_id="b", reason="completed"))
    return batch, events


def test_check_batch_accepts_a_batch_bracketed_by_batch_start_and_batch_end() -> None:
    batch, events = _bracketed()
    check_batch(CALLS, batch, events)


def test_check_batch_refuses_a_batch_start_whose_calls_are_not_the_batch() -> None:
    batch, events = _bracketed(start_calls=CALLS[:1])
    with pytest.raises(
        AssertionError, match="batch/start and batch/call do not list the batch's calls"
    ):
        check_batch(CALLS, batch, events)


def test_check_batch_refuses_a_batch_start_without_its_batch_end() -> None:
    batch, events = _bracketed(end=False)
    with pytest.raises(AssertionError, match="batch/start b has no batch/end"):
        check_batch(CALLS, batch, events)


def test_check_batch_refuses_a_batch_end_before_the_batch_contexts() -> None:
    batch, events = _bracketed()
    events[-2], events[-1] = events[-1], events[-2]
    with pytest.raises(AssertionError, match="batch/end of b is not the batch's last event"):
        check_batch(CALLS, batch, events)


def test_check_batch_refuses_a_result_whose_logged_contexts_differ_from_the_batch() -> None:
    batch, events = _bracketed()
    result = events[2]
    assert isinstance(result, ToolResultEvent)
    events[2] = ToolResultEvent(
        turn=1,
        step=0,
        call_id="c1",
        content=result.content,
        is_error=False,
        source_event_seqs=(1,),
    )
    with pytest.raises(AssertionError, match=r"tool/result of call 0 \(c1\) differs"):
        check_batch(CALLS, batch, events)


def test_check_batch_still_accepts_a_batch_logged_without_the_bracket() -> None:
    batch, events = _bracketed()
    # the events of a log that has no batch/start, batch/end nor result contexts
    plain = [
        ToolResultEvent(
            turn=e.turn,
            step=e.step,
            call_id=e.call_id,
            content=e.content,
            is_error=e.is_error,
            source_event_seqs=(e.source_event_seqs[0] - 1,),
        )
        if isinstance(e, ToolResultEvent)
        else e
        for e in events[1:-1]
    ]
    check_batch(CALLS, batch, plain)


def test_replay_shows_the_batch_bracket(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(START)
        log.append(END)
    console = Console(width=100, record=True, color_system=None)
    assert 0 == main_replay(path, console=console, err=print)
    assert [f"batch {BATCH_ID}: c1, c2", f"end of batch {BATCH_ID} (completed)"] == (
        console.export_text().splitlines()[1:]
    )


def _resumed(second_attempt: int) -> list[SessionEvent]:
    """A batch whose process stopped while c2 ran, finished later by running c2 again."""
    c1, c2 = CALLS
    return [
        BatchStartEvent(turn=1, step=0, batch_id="b", calls=CALLS),
        ToolCallEvent(turn=1, step=0, call_id="c1", name=c1.name, arguments=c1.arguments),
        ToolResultEvent(
            turn=1,
            step=0,
            call_id="c1",
            content=[TextBlock(text="a")],
            is_error=False,
            source_event_seqs=(1,),
            contexts=[NOTE],
        ),
        ToolCallEvent(turn=1, step=0, call_id="c2", name=c2.name, arguments=c2.arguments),
        ToolCallEvent(
            turn=1,
            step=0,
            call_id="c2",
            name=c2.name,
            arguments=c2.arguments,
            attempt=second_attempt,
        ),
        ToolResultEvent(
            turn=1,
            step=0,
            call_id="c2",
            content=[TextBlock(text="b")],
            is_error=False,
            source_event_seqs=(4,),
        ),
        ContextMessageEvent(content=NOTE.content, source=NOTE.source),
        BatchEndEvent(turn=1, step=0, batch_id="b", reason="completed"),
    ]


def test_check_batch_accepts_a_call_run_again_under_its_next_attempt() -> None:
    batch, _ = _bracketed()
    check_batch(CALLS, batch, _resumed(2))


def test_check_batch_refuses_a_gap_in_a_calls_attempts() -> None:
    batch, _ = _bracketed()
    with pytest.raises(
        AssertionError, match=r"tool/call of c2 \(event 4\) is attempt 3, expected 2"
    ):
        check_batch(CALLS, batch, _resumed(3))


def test_check_batch_refuses_a_committed_call_run_again() -> None:
    batch, _ = _bracketed()
    events = _resumed(2)
    rerun = ToolCallEvent(turn=1, step=0, call_id="c1", name="read", arguments='{"path":"a"}')
    events[3:3] = [
        attrs.evolve(rerun, attempt=2),
        ToolResultEvent(
            turn=1, step=0, call_id="c1", content=[], is_error=False, source_event_seqs=(3,)
        ),
    ]
    with pytest.raises(AssertionError, match="tool/result events are not one per call"):
        check_batch(CALLS, batch, events)


def test_check_batch_judges_an_unbracketed_batch_after_a_bracketed_one_without_a_bracket() -> None:
    batch, events = _bracketed()
    # the same batch again, logged without a bracket, after the bracketed one
    again = [
        attrs.evolve(e, source_event_seqs=(e.source_event_seqs[0] + len(events) - 1,))
        if isinstance(e, ToolResultEvent)
        else e
        for e in events[1:-1]
    ]
    check_batch(CALLS, batch, [*events, *again])
