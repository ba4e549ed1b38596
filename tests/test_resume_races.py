"""Exactly once, whatever the caller does: two resumes of one log in one process, a
``recover_session`` while a resume runs, a decision that is logged already, and a resume that
has nothing to decide.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from dsh_tools import (
    ApprovalDecidedEvent,
    ApprovalOutcome,
    BatchEndEvent,
    MemorySessionLog,
    ToolBatch,
    ToolCallEvent,
    ToolRegistry,
    ToolResultEvent,
    recover_session,
    resume_tool_calls,
    session_turn,
)
from dsh_tools.testing import check_batch
from support import run_in_turn, texts
from test_approval_trust import Agent, write
from test_approval_trust import Lab as ApprovalLab
from test_resume import CALLS, NEVER, Lab, cut, index_of, record


def results_per_call(session: MemorySessionLog) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in session.events():
        if isinstance(event, ToolResultEvent):
            counts[event.call_id] = counts.get(event.call_id, 0) + 1
    return counts


async def test_two_resumes_of_one_log_run_each_body_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    # stopped while c1 ran: c1 dangling, c2..c6 never started
    session = cut(events, index_of(events, ToolCallEvent, "c1") + 1)
    lab = Lab()
    registry = lab.registry()
    returned: list[ToolBatch | None] = []

    async def resume() -> None:
        returned.append(await resume_tool_calls(registry, session, signal=NEVER))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(resume)
        nursery.start_soon(resume)

    # c1 (idempotent) runs again once; every other call once; the second resume found the
    # batch finished
    assert ["c1", "c2", "c3", "c4", "c5", "c6"] == sorted(lab.ran())
    assert {call.call_id: 1 for call in CALLS} == results_per_call(session)
    first, second = returned
    assert first is not None
    assert second is None
    check_batch(CALLS, first, session)


async def test_recover_session_while_a_resume_runs_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    session = cut(events, index_of(events, ToolCallEvent, "c1") + 1)
    lab = Lab()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: resume_tool_calls(lab.registry(), session, signal=NEVER))
        await trio.testing.wait_all_tasks_blocked()
        before = len(session.events())
        with pytest.raises(RuntimeError, match="a resume of this log is running"):
            recover_session(session)
        assert before == len(session.events())
    assert {call.call_id: 1 for call in CALLS} == results_per_call(session)
    assert () == recover_session(session)  # the resume finished it


async def test_two_resumes_with_conflicting_decisions_decide_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = ApprovalLab()
    session, _approval, registry = lab.wired(ApprovalOutcome.DEFERRED)
    await run_in_turn(registry, [write("w1")], session=session, agent=Agent())
    finished: list[tuple[str, list[str]]] = []
    refused: list[str] = []

    async def resume(decision: str) -> None:
        try:
            batch = await resume_tool_calls(
                registry, session, signal=NEVER, agent=Agent(), approvals={"w1": decision}
            )
        except ValueError as exc:
            refused.append(str(exc))
        else:
            assert batch is not None
            finished.append((decision, texts(batch)))

    async with session_turn(session, 2), trio.open_nursery() as nursery:
        nursery.start_soon(resume, "rejected")
        nursery.start_soon(resume, "allowed-once")

    # whichever came first decided; the other found nothing pending
    ((decision, text),) = finished
    expected: dict[str, tuple[list[str], list[str]]] = {
        "rejected": (['Error: the user rejected tool "write"'], []),
        "allowed-once": (["wrote NOTES.md"], ["w1"]),
    }
    assert expected[decision] == (text, lab.ran)
    (message,) = refused
    assert "no open or suspended batch ('w1')" in message
    decided = [e.outcome for e in session.events() if isinstance(e, ApprovalDecidedEvent)]
    assert [ApprovalOutcome(decision)] == decided


# --- a logged decision stands -----------------------------------------------------------------


async def suspended_then_decided(
    decision: str,
) -> tuple[ApprovalLab, ToolRegistry, MemorySessionLog]:
    """A batch of one deferred ``write``, then a resume that logged ``decision`` and stopped
    before the call's result (the log cut right after its ``approval/decided``)."""
    lab = ApprovalLab()
    session, _approval, registry = lab.wired(ApprovalOutcome.DEFERRED)
    await run_in_turn(registry, [write("w1")], session=session, agent=Agent())
    async with session_turn(session, 2):
        await resume_tool_calls(
            registry, session, signal=NEVER, agent=Agent(), approvals={"w1": decision}
        )
    events = session.events()
    decided = max(i for i, e in enumerate(events) if isinstance(e, ApprovalDecidedEvent))
    return lab, registry, cut(events, decided + 1)


async def test_a_later_decision_that_contradicts_the_logged_one_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab, registry, session = await suspended_then_decided("rejected")
    before = session.events()
    with pytest.raises(ValueError, match=r"'w1' was decided already: rejected"):
        await resume_tool_calls(
            registry, session, signal=NEVER, agent=Agent(), approvals={"w1": "allowed-once"}
        )
    assert before == session.events()
    # the same decision again, or none, finishes the batch from the logged one
    batch = await resume_tool_calls(
        registry, session, signal=NEVER, agent=Agent(), approvals={"w1": "rejected"}
    )
    assert batch is not None
    assert (['Error: the user rejected tool "write"'], []) == (texts(batch), lab.ran)
    assert 1 == len([e for e in session.events() if isinstance(e, ApprovalDecidedEvent)])


async def test_a_resume_that_decides_nothing_appends_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = ApprovalLab()
    session, _approval, registry = lab.wired(ApprovalOutcome.DEFERRED, ApprovalOutcome.DEFERRED)
    calls = [write("w1"), write("w2")]
    first = await run_in_turn(registry, calls, session=session, agent=Agent())
    before = session.events()
    async with session_turn(session, 2):
        polls = [
            await resume_tool_calls(registry, session, signal=NEVER, agent=Agent())
            for _ in range(3)
        ]
    # the turn's own events only: no batch/end "suspended" per poll
    added = session.events()[len(before) :]
    assert ["TurnStartEvent", "TurnEndEvent"] == [type(e).__name__ for e in added]
    for poll in polls:
        assert poll == first
    assert [] == lab.ran
    ends = [e.reason for e in session.events() if isinstance(e, BatchEndEvent)]
    assert ["suspended"] == ends
