"""The timeout policy, on trio's virtual clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    CancelSignal,
    ExecuteNext,
    HookContext,
    PluginSource,
    TextBlock,
    ToolDefinition,
    ToolDispatchExecution,
    ToolErrorInfo,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    install_timeout_policy,
)
from dsh_tools._pipeline._results import timeout_result
from expected import ABORTED
from support import execution_input, registry_with, tool

OK = ToolExecutionResult(content=(TextBlock(text="done"),), is_error=False)


def _timed_out(ms: str) -> ToolExecutionResult:
    return ToolExecutionResult(
        content=(TextBlock(text=f"Error: tool call timed out after {ms}ms"),),
        is_error=True,
        error=ToolErrorInfo(name="ToolTimeoutError", code="TOOL_TIMEOUT"),
    )


def _registry(body: Any, timeout: float | None = 0.1) -> ToolRegistry:
    registry = registry_with(tool("t", body, description="t", timeout=timeout))
    install_timeout_policy(registry)
    return registry


def _input(signal: CancelSignal | None = None) -> ToolExecutionInput:
    return execution_input("t", call_id="c", signal=signal)


async def _sleepy(args: Any, context: ToolRunContext) -> ToolReturn:
    await trio.sleep(10)
    return "done"


async def test_a_body_that_outlives_its_timeout_gets_the_timeout_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(_sleepy)

    result = await registry.execute(_input())

    expected = (_timed_out("100"), 0.1)
    assert expected == (result, pytest.approx(trio.current_time()))


async def test_a_body_that_finishes_in_time_keeps_its_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def quick(args: Any, context: ToolRunContext) -> ToolReturn:
        await trio.sleep(0.05)
        return "done"

    registry = _registry(quick)

    expected = OK
    assert expected == await registry.execute(_input())


async def test_a_tool_without_timeout_sees_the_caller_signal_itself() -> None:
    seen: list[CancelSignal] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        seen.append(context.signal)
        return "done"

    registry = _registry(body, timeout=None)
    signal = CancelController().signal

    await registry.execute(_input(signal))

    assert [signal] == seen


async def test_a_tool_with_timeout_sees_a_signal_carrying_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadlines: list[float] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        deadlines.append(context.signal.deadline)
        return "done"

    registry = _registry(body, timeout=2.5)

    await registry.execute(_input())

    expected = [trio.current_time() + 2.5]
    assert expected == deadlines


async def test_the_timeout_runs_no_extra_task() -> None:
    living: list[int] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        living.append(trio.lowlevel.current_statistics().tasks_living)
        return "done"

    registry = _registry(body, timeout=5)
    before = trio.lowlevel.current_statistics().tasks_living

    await registry.execute(_input())

    assert [before] == living


async def test_a_caller_cancellation_before_the_deadline_stays_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(_sleepy, timeout=1)
    controller = CancelController()

    async def cancel_later() -> None:
        await trio.sleep(0.5)
        controller.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_later)
        result = await registry.execute(_input(controller.signal))

    expected = ABORTED
    assert expected == result


async def test_a_caller_deadline_earlier_than_the_timeout_stays_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(_sleepy, timeout=1)
    controller = CancelController(deadline=trio.current_time() + 0.5)

    expected = ABORTED
    assert expected == await registry.execute(_input(controller.signal))


async def test_a_deadline_that_fired_first_stays_a_timeout_when_the_caller_cancels_during_cleanup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow_cleanup(args: Any, context: ToolRunContext) -> ToolReturn:
        try:
            await trio.sleep(10)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(1)
        return "unreachable"

    registry = _registry(slow_cleanup, timeout=0.1)
    controller = CancelController()

    async def cancel_during_cleanup() -> None:
        await trio.sleep(0.5)
        controller.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_during_cleanup)
        result = await registry.execute(_input(controller.signal))

    assert _timed_out("100") == result


async def test_an_uncooperative_body_is_awaited_then_timed_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def stubborn(args: Any, context: ToolRunContext) -> ToolReturn:
        with trio.CancelScope(shield=True):
            await trio.sleep(2)
        return "finished anyway"

    registry = _registry(stubborn, timeout=0.1)

    result = await registry.execute(_input())

    expected = (_timed_out("100"), 2.0)
    assert expected == (result, pytest.approx(trio.current_time()))


async def test_deferred_contexts_survive_the_timeout_replacement(
    autojump_clock: trio.testing.MockClock,
) -> None:
    context_value = HookContext(
        content=(TextBlock(text="partial"),), source=PluginSource(plugin="p")
    )

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(context_value)
        await trio.sleep(10)
        return "done"

    registry = _registry(body, timeout=0.1)

    result = await registry.execute(_input())

    expected = (context_value,)
    assert expected == result.additional_contexts


async def test_the_upstream_signal_is_restored_after_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(_sleepy)
    after: list[CancelSignal] = []

    async def outer(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        result = await next()
        after.append(execution.signal)
        return result

    registry.hooks.execute.add(outer, prepend=True)
    signal = CancelController().signal

    await registry.execute(_input(signal))

    assert [signal] == after


async def test_an_unknown_tool_passes_through_the_policy() -> None:
    registry = _registry(_sleepy)

    result = await registry.execute(
        ToolExecutionInput(call_id="c", name="nope", arguments={}, signal=CancelSignal.never())
    )

    expected = ToolExecutionResult(
        content=(TextBlock(text='Error: unknown tool "nope"'),),
        is_error=True,
        error=ToolErrorInfo(name="ToolNotFoundError", code="UNKNOWN_TOOL"),
    )
    assert expected == result


async def test_disposing_the_policy_removes_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    registry.register(
        ToolDefinition(name="t", description="t", parameters={}, execute=_sleepy, timeout=0.1)
    )
    install_timeout_policy(registry)()

    expected = OK
    assert expected == await registry.execute(_input())


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.1, "100"),
        (2, "2000"),
        (0.0015, "1.5"),
        (1.5, "1500"),
        (0.007, "7"),
        (0.0000015, "0.0015"),
        (0.00000001, "0.00001"),
        (3.0, "3000"),
        (1e18, "1e+21"),
    ],
)
def test_the_timeout_text_keeps_milliseconds_without_a_needless_decimal(
    seconds: float, shown: str
) -> None:
    assert _timed_out(shown) == timeout_result(seconds)
