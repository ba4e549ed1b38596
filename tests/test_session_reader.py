"""The one reader of a session log: the bracket rule that tells batches apart, and the answers
approval asks of a log (policy, grants, pending requests, the open turn)."""

from __future__ import annotations

from dsh_tools import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalOutcome,
    ApprovalPolicyEvent,
    BatchEndEvent,
    BatchStartEvent,
    ContextMessageEvent,
    HookContext,
    SessionEvent,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserSource,
)
from dsh_tools._sessions._reader import SessionReader


def _start(batch_id: str, *call_ids: str) -> BatchStartEvent:
    calls = tuple(ToolCallRequest(call_id=c, name="t", arguments="{}") for c in call_ids)
    return BatchStartEvent(turn=1, step=0, batch_id=batch_id, calls=calls)


def _call(call_id: str) -> ToolCallEvent:
    return ToolCallEvent(turn=1, step=0, call_id=call_id, name="t", arguments="{}")


def _result(call_id: str) -> ToolResultEvent:
    return ToolResultEvent(
        turn=1, step=0, call_id=call_id, content=(TextBlock(text=call_id),), is_error=False
    )


def _context(text: str) -> ContextMessageEvent:
    return ContextMessageEvent(content=(TextBlock(text=text),), source=UserSource())


def _end(batch_id: str, reason: str = "completed") -> BatchEndEvent:
    return BatchEndEvent(turn=1, step=0, batch_id=batch_id, reason=reason)  # type: ignore[arg-type]


# b1's call c1 runs a batch of its own (b2) inside it; then b1 goes on
NESTED: list[SessionEvent] = [
    _start("b1", "c1", "c2"),  # 0
    _call("c1"),  # 1
    _start("b2", "x1"),  # 2
    _call("x1"),  # 3
    _result("x1"),  # 4
    _context("b2's context"),  # 5
    _end("b2"),  # 6
    _result("c1"),  # 7
    _call("c2"),  # 8
    _result("c2"),  # 9
    _context("b1's context"),  # 10
    _end("b1"),  # 11
]


def _owned(events: list[SessionEvent], batch_id: str) -> list[int]:
    record = SessionReader(events).batch(batch_id)
    assert record is not None
    return [seq for seq, _ in record.events]


def test_a_batch_owns_its_events_and_not_those_of_a_batch_started_inside_it() -> None:
    assert ([1, 7, 8, 9, 10, 11], [3, 4, 5, 6]) == (_owned(NESTED, "b1"), _owned(NESTED, "b2"))


def test_a_batch_started_inside_another_does_not_end_it() -> None:
    # b1 is cut off after b2 ended: b1 is the open batch, with its own events only
    record = SessionReader(NESTED[:8]).open_batch()

    assert record is not None
    assert ("b1", [1, 7], None) == (
        record.start.batch_id,
        [seq for seq, _ in record.events],
        record.end,
    )


def test_results_logged_after_a_later_batch_started_still_belong_to_their_batch() -> None:
    # two tasks share one log: b2 starts while b1 is still running; b1's last result and its
    # end come after b2's start (a reader that stopped at the next batch/start lost them)
    events: list[SessionEvent] = [
        _start("b1", "c1", "c2"),
        _call("c1"),
        _result("c1"),
        _call("c2"),
        _start("b2", "y1"),
        _call("y1"),
        _result("c2"),
        _end("b1"),
        _result("y1"),
        _end("b2"),
    ]
    record = SessionReader(events).batch("b1")

    assert record is not None
    assert (["c1", "c2"], "completed") == (
        [e.call_id for _, e in record.events if isinstance(e, ToolResultEvent)],
        record.end.reason if record.end else None,
    )


def test_a_suspended_batch_stays_open_and_owns_what_its_resume_appended() -> None:
    events: list[SessionEvent] = [
        _start("b1", "c1"),
        _call("c1"),
        ApprovalAskedEvent(id="r1", tool_name="t", call_id="c1"),
        _end("b1", "suspended"),
    ]
    suspended = SessionReader(events).open_batch()
    resumed = [
        *events,
        ApprovalDecidedEvent(id="r1", outcome=ApprovalOutcome.ALLOWED_ONCE, answered_by="resume"),
        _call("c1"),
        _result("c1"),
        _end("b1"),
    ]
    finished = SessionReader(resumed).batch("b1")

    assert suspended is not None
    assert suspended.is_open
    assert SessionReader(resumed).open_batch() is None
    assert finished is not None
    assert ([1, 2, 3, 4, 5, 6, 7], False) == (
        [seq for seq, _ in finished.events],
        finished.is_open,
    )


def test_the_last_batch_and_an_unknown_one() -> None:
    reader = SessionReader(NESTED)
    last = reader.last_batch()

    assert last is not None
    assert ("b2", None, None) == (
        last.start.batch_id,
        reader.batch("nope"),
        SessionReader([]).last_batch(),
    )


def test_policy_grants_pending_requests_and_the_open_turn() -> None:
    events: list[SessionEvent] = [
        TurnStartEvent(turn=1),
        ApprovalPolicyEvent(policy="never"),
        ApprovalAskedEvent(id="r1", tool_name="deploy", agent="alice"),
        ApprovalDecidedEvent(id="r1", outcome=ApprovalOutcome.ALLOWED_SESSION),
        ApprovalAskedEvent(id="r2", tool_name="delete", agent="alice"),
    ]
    reader = SessionReader(events)

    assert (
        "never",
        frozenset({("alice", "deploy")}),
        ["r2"],
        TurnStartEvent(turn=1),
    ) == (
        reader.policy("ask"),
        reader.grants(),
        list(reader.pending_requests()),
        reader.open_turn(),
    )
    assert ("ask", TurnEndEvent(turn=1, kind="completed")) == (
        SessionReader([]).policy("ask"),
        SessionReader([*events, TurnEndEvent(turn=1, kind="completed")]).open_turn(),
    )


def test_contexts_of_a_batch_are_read_as_hook_contexts() -> None:
    # the record hands the context/message events themselves; their content is the batch's
    record = SessionReader(NESTED).batch("b1")

    assert record is not None
    assert [HookContext(content=(TextBlock(text="b1's context"),), source=UserSource())] == [
        HookContext(content=e.content, source=e.source)
        for _, e in record.events
        if isinstance(e, ContextMessageEvent)
    ]
