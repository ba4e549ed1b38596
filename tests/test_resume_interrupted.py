"""A batch that Ctrl-C (``KeyboardInterrupt``), a cancelled caller or a failure stopped before
some of its calls started ends ``"aborted"`` / ``"failed"`` balanced, and can be finished like
a killed one: ``resume_tool_calls`` runs the calls that never started, ``recover_session``
closes them. A batch that ended with every call answered is finished: nothing to resume.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing

from dsh_tools import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    BatchEndEvent,
    CancelController,
    CancelSignal,
    MemorySessionLog,
    ToolCallRequest,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    recover_session,
    resume_tool_calls,
    run_tool_calls,
)
from dsh_tools.testing import check_batch

NEVER = CancelSignal.never()
CALLS = [
    ToolCallRequest(call_id=f"c{index}", name=name, arguments="{}")
    for index, name in enumerate(("read", "read", "write", "read"), 1)
]


def lab(ran: list[str], *, interrupt: str | None = None) -> ToolRegistry:
    """``read`` (parallel) and ``write`` (exclusive); the call ``interrupt`` presses Ctrl-C."""

    async def body(_args: object, context: ToolRunContext) -> str:
        await trio.sleep(2 if context.call_id == interrupt else 1)
        if context.call_id == interrupt:
            raise KeyboardInterrupt  # pressed at t=2, after c1 committed
        ran.append(context.call_id)
        return f"done {context.call_id}"

    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="read",
            description="read",
            parameters={},
            execute=body,
            is_concurrency_safe=lambda _args: True,
        )
    )
    registry.register(define_tool(name="write", description="write", parameters={}, execute=body))
    return registry


def ends(log: MemorySessionLog) -> list[str]:
    return [e.reason for e in log.events() if isinstance(e, BatchEndEvent)]


def codes(results: Sequence[ToolExecutionResult]) -> list[str]:
    return ["ok" if r.error is None else r.error.code for r in results]


async def interrupted(log: MemorySessionLog) -> None:
    with pytest.raises(KeyboardInterrupt):
        await run_tool_calls(lab([], interrupt="c2"), CALLS, signal=NEVER, session=log)


async def test_ctrl_c_ends_the_batch_aborted_and_a_resume_runs_the_calls_that_never_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemorySessionLog()
    await interrupted(log)
    assert ["aborted"] == ends(log)

    ran: list[str] = []
    resumed = await resume_tool_calls(lab(ran), log, signal=NEVER)

    assert resumed is not None
    # c1 committed, c2 was running (ABORTED, as logged); the write and c4 had not started
    assert ["ok", TOOL_ABORTED, "ok", "ok"] == codes(resumed.results)
    assert ["c3", "c4"] == ran
    assert ["aborted", "completed"] == ends(log)
    check_batch(CALLS, resumed, log)
    assert await resume_tool_calls(lab(ran), log, signal=NEVER) is None


async def test_recover_session_closes_a_ctrl_c_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemorySessionLog()
    await interrupted(log)

    recovered = recover_session(log)

    assert ["c1", "c2", "c3", "c4"] == [e.call_id for e in recovered]
    assert [TOOL_ABORTED_BEFORE_DISPATCH] * 2 == [
        e.error.code for e in recovered[2:] if e.error is not None
    ]
    assert ["aborted", "aborted"] == ends(log)
    assert () == recover_session(log)


async def test_a_cancelled_caller_leaves_a_batch_a_resume_finishes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemorySessionLog()
    with trio.move_on_after(1.5):  # c1 and c2 committed at t=1; the write runs; c4 waits
        await run_tool_calls(lab([]), CALLS, signal=NEVER, session=log)
    assert ["aborted"] == ends(log)

    ran: list[str] = []
    resumed = await resume_tool_calls(lab(ran), log, signal=NEVER)

    assert resumed is not None
    assert ["ok", "ok", TOOL_ABORTED, "ok"] == codes(resumed.results)
    assert ["c4"] == ran
    check_batch(CALLS, resumed, log)


async def test_a_batch_whose_signal_fired_answered_every_call_and_is_finished(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemorySessionLog()
    controller = CancelController()
    controller.set_deadline(1.5)
    batch = await run_tool_calls(lab([]), CALLS, signal=controller.signal, session=log)
    assert ["aborted"] == ends(log)
    check_batch(CALLS, batch, log)

    assert await resume_tool_calls(lab([]), log, signal=NEVER) is None
    assert () == recover_session(log)
