"""Cancellation through the signal at every stage, and of the caller's own trio scope.

Each matrix case cancels the call's signal while the call is blocked at one point (forced with
``wait_all_tasks_blocked``), then checks the exact result, whether the body ran, and that the
``result`` observers heard exactly one notification.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    BatchStartEvent,
    CancelController,
    CancelSignal,
    ExecuteNext,
    HookContext,
    MemorySessionLog,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    SessionEvent,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolDefinition,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolReturn,
    ToolRunContext,
    UserSource,
    run_tool_calls,
)
from expected import ABORTED, ABORTED_BEFORE_DISPATCH
from support import Agent, request, run_calls

NO_RESULTS: list[ToolExecutionResult] = []


class Harness:
    """A registry with one tool, a body whose behaviour a test picks, and a result counter."""

    def __init__(
        self,
        body: Callable[[ToolRunContext], Awaitable[ToolReturn]] | None = None,
        *,
        parallel: bool = False,
    ):
        self.controller = CancelController()
        self.body_started = False
        self.notifications: list[ToolExecutionResult] = []
        self.agent = Agent()

        async def run(args: Any, context: ToolRunContext) -> ToolReturn:
            self.body_started = True
            if body is None:
                return "done"
            return await body(context)

        self.registry = ToolRegistry(approval=_WaitingApproval())
        self.registry.register(
            ToolDefinition(
                name="t",
                description="t",
                parameters={},
                execute=run,
                is_concurrency_safe=(lambda _args: True) if parallel else None,
            )
        )
        self.registry.hooks.result.add(lambda execution, result: self.notifications.append(result))

    def input(self) -> ToolExecutionInput:
        return ToolExecutionInput(
            call_id="c", name="t", arguments={}, signal=self.controller.signal, agent=self.agent
        )

    async def run_and_cancel_when_blocked(self) -> ToolExecutionResult:
        """Execute the call; cancel its signal once every task is blocked."""
        results: list[ToolExecutionResult] = []

        async def call() -> None:
            results.append(await self.registry.execute(self.input()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            self.controller.cancel("stop")
        return results[0]

    async def run_pool_and_cancel_when_blocked(self) -> tuple[ToolExecutionResult, ...]:
        """Run two calls as one pool of a batch; cancel its signal once every task is blocked."""
        batches: list[ToolBatch] = []
        calls = [ToolCallRequest(call_id=f"c{i}", name="t", arguments="{}") for i in (1, 2)]

        async def batch() -> None:
            batches.append(
                await run_tool_calls(
                    self.registry, calls, signal=self.controller.signal, agent=self.agent
                )
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(batch)
            await trio.testing.wait_all_tasks_blocked()
            self.controller.cancel("stop")
        return batches[0].results

    def outcome(self, result: ToolExecutionResult) -> tuple[ToolExecutionResult, bool, int]:
        assert result is self.notifications[-1]
        return result, self.body_started, len(self.notifications)


class _WaitingApproval:
    """Waits for the request's signal, then reports ``cancelled`` (as a real service must)."""

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        await request.signal.wait()
        return ApprovalOutcome.CANCELLED


async def _wait_for_cancel(execution: ToolExecution | ToolDispatchExecution) -> None:
    await execution.signal.wait()


# --- the matrix -------------------------------------------------------------------------------


async def test_cancel_before_entry_is_aborted_before_dispatch() -> None:
    harness = Harness()
    harness.controller.cancel()

    result = await harness.registry.execute(harness.input())

    expected = (ABORTED_BEFORE_DISPATCH, False, 1)
    assert expected == harness.outcome(result)


async def test_cancel_while_pre_execute_awaits_is_aborted_before_dispatch() -> None:
    harness = Harness()

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        await _wait_for_cancel(execution)
        return await next()

    harness.registry.hooks.pre_execute.add(pre)

    result = await harness.run_and_cancel_when_blocked()

    expected = (ABORTED_BEFORE_DISPATCH, False, 1)
    assert expected == harness.outcome(result)


async def test_cancel_while_approval_waits_is_aborted_before_dispatch() -> None:
    harness = Harness()

    async def ask(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Ask("may I?")

    harness.registry.hooks.pre_execute.add(ask)

    result = await harness.run_and_cancel_when_blocked()

    expected = (ABORTED_BEFORE_DISPATCH, False, 1)
    assert expected == harness.outcome(result)


async def test_cancel_while_a_wrapper_waits_before_next_is_aborted_before_dispatch() -> None:
    harness = Harness()

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        await _wait_for_cancel(execution)
        return await next()

    harness.registry.hooks.execute.add(wrap)

    result = await harness.run_and_cancel_when_blocked()

    expected = (ABORTED_BEFORE_DISPATCH, False, 1)
    assert expected == harness.outcome(result)


async def test_cancel_while_a_wrapper_waits_after_next_is_aborted() -> None:
    harness = Harness()

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        result = await next()
        await _wait_for_cancel(execution)
        return result

    harness.registry.hooks.execute.add(wrap)

    result = await harness.run_and_cancel_when_blocked()

    expected = (ABORTED, True, 1)
    assert expected == harness.outcome(result)


async def test_cancel_during_a_cooperative_body_is_aborted() -> None:
    async def body(context: ToolRunContext) -> ToolReturn:
        await trio.sleep_forever()

    harness = Harness(body)

    result = await harness.run_and_cancel_when_blocked()

    expected = (ABORTED, True, 1)
    assert expected == harness.outcome(result)


async def test_cancel_during_an_uncooperative_body_waits_for_it_then_is_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def body(context: ToolRunContext) -> ToolReturn:
        with trio.CancelScope(shield=True):
            await trio.sleep(3)
        return "finished anyway"

    harness = Harness(body)

    async def cancel_soon() -> None:
        await trio.sleep(1)
        harness.controller.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_soon)
        result = await harness.registry.execute(harness.input())

    expected = (ABORTED, True, 1, 3.0)
    assert expected == (*harness.outcome(result), trio.current_time())


async def test_cancel_while_post_execute_awaits_keeps_the_settled_outcome() -> None:
    harness = Harness()

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        await _wait_for_cancel(execution)
        return await next()

    harness.registry.hooks.post_execute.add(post)

    result = await harness.run_and_cancel_when_blocked()

    # honest interrupts: the body had returned before the signal fired
    assert ((TextBlock(text="done"),), False) == (result.content, result.is_error)
    assert (True, 1) == harness.outcome(result)[1:]


async def test_cancel_while_a_short_circuiting_wrapper_waits_is_aborted_before_dispatch() -> None:
    harness = Harness()

    async def cached(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        await _wait_for_cancel(execution)
        return ToolExecutionResult(content=(TextBlock(text="cached"),), is_error=False)

    harness.registry.hooks.execute.add(cached)

    result = await harness.run_and_cancel_when_blocked()

    expected = (ABORTED_BEFORE_DISPATCH, False, 1)
    assert expected == harness.outcome(result)


async def test_a_body_failure_after_cancellation_is_kept() -> None:
    async def body(context: ToolRunContext) -> ToolReturn:
        try:
            await trio.sleep_forever()
        finally:
            raise RuntimeError("cleanup failed")

    harness = Harness(body)

    result = await harness.run_and_cancel_when_blocked()

    expected = (
        ToolExecutionResult(content=(TextBlock(text="Error: cleanup failed"),), is_error=True),
        True,
        1,
    )
    assert expected == harness.outcome(result)


async def test_a_cancellation_replacement_keeps_the_contexts() -> None:
    note = HookContext(content=(TextBlock(text="note"),), source=UserSource())

    async def body(context: ToolRunContext) -> ToolReturn:
        context.defer_context(note)
        await trio.sleep_forever()

    harness = Harness(body)

    result = await harness.run_and_cancel_when_blocked()

    expected = (note,)
    assert expected == result.additional_contexts


async def test_the_body_signal_carries_the_cancel_reason() -> None:
    reasons: list[object] = []

    async def body(context: ToolRunContext) -> ToolReturn:
        try:
            await trio.sleep_forever()
        finally:
            reasons.append(context.signal.reason)

    harness = Harness(body)

    await harness.run_and_cancel_when_blocked()

    expected = ["stop"]
    assert expected == reasons


# --- the caller's own trio scope ---------------------------------------------------------------


async def test_cancelling_the_caller_scope_during_the_body_propagates_cancelled() -> None:
    unwound: list[str] = []

    async def body(context: ToolRunContext) -> ToolReturn:
        try:
            await trio.sleep_forever()
        finally:
            unwound.append("body unwound")

    harness = Harness(body)
    before = trio.lowlevel.current_statistics().tasks_living

    with trio.CancelScope() as scope:

        async def cancel_when_blocked() -> None:
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_when_blocked)
            await harness.registry.execute(harness.input())

    expected = (True, ["body unwound"], NO_RESULTS, before)
    assert expected == (
        scope.cancelled_caught,
        unwound,
        harness.notifications,
        trio.lowlevel.current_statistics().tasks_living,
    )


async def test_cancelling_the_caller_scope_waits_for_a_shielded_body_then_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def body(context: ToolRunContext) -> ToolReturn:
        with trio.CancelScope(shield=True):
            await trio.sleep(2)
        return "finished anyway"

    harness = Harness(body)

    with trio.CancelScope() as scope:
        scope.deadline = trio.current_time() + 1
        await harness.registry.execute(harness.input())

    expected = (True, 2.0, NO_RESULTS)
    assert expected == (scope.cancelled_caught, trio.current_time(), harness.notifications)


async def test_a_caller_scope_already_cancelled_raises_before_anything_runs() -> None:
    harness = Harness()

    with trio.CancelScope() as scope:
        scope.cancel()
        await harness.registry.execute(harness.input())

    expected = (True, False, NO_RESULTS)
    assert expected == (scope.cancelled_caught, harness.body_started, harness.notifications)


async def test_cancelling_the_caller_scope_while_pre_execute_awaits_propagates() -> None:
    harness = Harness()

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        await trio.sleep_forever()

    harness.registry.hooks.pre_execute.add(pre)

    with trio.CancelScope() as scope:

        async def cancel_when_blocked() -> None:
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_when_blocked)
            await harness.registry.execute(harness.input())

    expected = (True, False, NO_RESULTS)
    assert expected == (scope.cancelled_caught, harness.body_started, harness.notifications)


async def test_an_aborted_replacement_keeps_the_wrapper_contexts() -> None:
    harness = Harness()
    note = HookContext(content=(TextBlock(text="from wrapper"),), source=UserSource())

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        result = await next()
        await _wait_for_cancel(execution)
        return ToolExecutionResult(
            content=result.content, is_error=False, additional_contexts=(note,)
        )

    harness.registry.hooks.execute.add(wrap)

    result = await harness.run_and_cancel_when_blocked()

    expected = ToolExecutionResult(
        content=ABORTED.content, is_error=True, error=ABORTED.error, additional_contexts=(note,)
    )
    assert expected == result


# --- the caller's own trio scope: every appended tool/call still gets its tool/result ----------


@pytest.mark.parametrize(
    ("cancel_at", "expected"),
    [
        # c1 is in its pre_execute: its body never ran
        (0.25, [("c1", "ABORTED_BEFORE_DISPATCH")]),
        # c1's body runs, c2 is in its pre_execute
        (0.75, [("c1", "ABORTED"), ("c2", "ABORTED_BEFORE_DISPATCH")]),
        # both bodies run
        (1.25, [("c1", "ABORTED"), ("c2", "ABORTED")]),
        # c1 committed; c2's body runs
        (2.0, [("c1", "done"), ("c2", "ABORTED")]),
        # c3 (the barrier) is in its pre_execute
        (3.25, [("c1", "done"), ("c2", "done"), ("c3", "ABORTED_BEFORE_DISPATCH")]),
        # c3's body runs
        (4.0, [("c1", "done"), ("c2", "done"), ("c3", "ABORTED")]),
    ],
)
async def test_cancelling_the_caller_scope_balances_every_appended_call(
    autojump_clock: trio.testing.MockClock, cancel_at: float, expected: list[tuple[str, str]]
) -> None:
    registry = ToolRegistry()

    def tool(name: str, seconds: float, parallel: bool) -> None:
        async def body(args: Any, context: ToolRunContext) -> ToolReturn:
            await trio.sleep(seconds)
            return "done"

        registry.register(
            ToolDefinition(
                name=name,
                description="d",
                parameters={},
                execute=body,
                is_concurrency_safe=(lambda args: True) if parallel else None,
            )
        )

    tool("p1", 1, True)
    tool("p2", 2, True)
    tool("x", 1, False)

    async def slow_policy(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        await trio.sleep(0.5)
        return await next()

    registry.hooks.pre_execute.add(slow_policy)
    session = MemorySessionLog()
    calls = [
        ToolCallRequest(call_id="c1", name="p1", arguments="{}"),
        ToolCallRequest(call_id="c2", name="p2", arguments="{}"),
        ToolCallRequest(call_id="c3", name="x", arguments="{}"),
    ]

    with trio.move_on_after(cancel_at) as scope:
        await run_tool_calls(
            registry, calls, signal=CancelSignal.never(), session=session, max_parallel_tool_calls=2
        )

    events = session.events()
    called = [event.call_id for event in events if isinstance(event, ToolCallEvent)]
    answered = [
        (
            event.call_id,
            event.error.code if event.error is not None else cast(TextBlock, event.content[0]).text,
        )
        for event in events
        if isinstance(event, ToolResultEvent)
    ]
    assert (True, [call_id for call_id, _ in expected], expected) == (
        scope.cancelled_caught,
        called,
        answered,
    )


async def test_a_failing_append_is_not_balanced_and_its_error_propagates() -> None:
    class Full(MemorySessionLog):
        def append(self, event: SessionEvent, /) -> int:
            if isinstance(event, ToolResultEvent):
                raise OSError("disk full")
            return super().append(event)

    registry = ToolRegistry()

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        return "done"

    registry.register(ToolDefinition(name="t", description="d", parameters={}, execute=body))
    session = Full()

    with pytest.raises(OSError, match="disk full"):
        await run_calls(registry, request("c1", "t"), session=session)

    # no tool/result and no batch/end: once an append failed, nothing more is written
    assert [BatchStartEvent, ToolCallEvent] == [type(event) for event in session.events()]


# --- pools: one cancel scope linked to the signal for every body of the pool ---------------


async def test_a_pool_whose_signal_fires_aborts_every_body_and_keeps_deferred_contexts() -> None:
    note = HookContext(content=(TextBlock(text="note"),), source=UserSource())

    async def body(context: ToolRunContext) -> ToolReturn:
        context.defer_context(note)
        await trio.sleep_forever()

    harness = Harness(body, parallel=True)

    results = await harness.run_pool_and_cancel_when_blocked()

    expected = (attrs.evolve(ABORTED, additional_contexts=(note,)),) * 2
    assert expected == results


async def test_a_pool_body_that_fails_while_cancelled_gives_its_error() -> None:
    async def body(context: ToolRunContext) -> ToolReturn:
        try:
            await trio.sleep_forever()
        finally:
            raise RuntimeError("cleanup failed")

    harness = Harness(body, parallel=True)

    results = await harness.run_pool_and_cancel_when_blocked()

    failed = ToolExecutionResult(content=(TextBlock(text="Error: cleanup failed"),), is_error=True)
    assert (failed, failed) == results


async def test_a_pool_body_that_finishes_despite_the_cancellation_is_aborted() -> None:
    reasons: list[object] = []

    async def body(context: ToolRunContext) -> ToolReturn:
        released = trio.Event()
        context.signal.on_cancel(lambda _reason: released.set())
        with trio.CancelScope(shield=True):
            await released.wait()
        reasons.append(context.signal.reason)
        return "finished"

    harness = Harness(body, parallel=True)

    results = await harness.run_pool_and_cancel_when_blocked()

    assert ((ABORTED, ABORTED), ["stop", "stop"]) == (results, reasons)
