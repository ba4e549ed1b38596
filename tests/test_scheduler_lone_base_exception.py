"""A ``KeyboardInterrupt`` or ``SystemExit`` raised by a body in a parallel pool leaves
``run_tool_calls`` as itself, as it does from a barrier, with the session log balanced."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from dsh_tools import (
    TOOL_ABORTED,
    CancelController,
    CancelSignal,
    FrozenJsonObject,
    MemorySessionLog,
    ToolCallEvent,
    ToolCallRequest,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    run_tool_calls,
)
from support import registry_with, spec_tool


def _registry(fatal: BaseException) -> ToolRegistry:
    async def fine(args: FrozenJsonObject, context: ToolRunContext) -> str:
        await trio.sleep(1)
        return "fine"

    async def fail(args: FrozenJsonObject, context: ToolRunContext) -> str:
        await trio.sleep(0.5)
        raise fatal

    return registry_with(
        spec_tool("fine", fine, parallel=True), spec_tool("fail", fail, parallel=True)
    )


_CALLS = (
    ToolCallRequest(call_id="1", name="fine", arguments="{}"),
    ToolCallRequest(call_id="2", name="fail", arguments="{}"),
)


async def test_a_system_exit_from_a_pooled_body_leaves_the_batch_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemorySessionLog()

    with pytest.raises(SystemExit) as caught:
        await run_tool_calls(
            _registry(SystemExit(3)), _CALLS, signal=CancelSignal.never(), session=log
        )

    assert 3 == caught.value.code
    assert SystemExit is type(caught.value)
    calls = [event.call_id for event in log.events() if isinstance(event, ToolCallEvent)]
    results = {
        event.call_id: event.error.code if event.error else None
        for event in log.events()
        if isinstance(event, ToolResultEvent)
    }
    assert ["1", "2"] == calls
    assert {"1": TOOL_ABORTED, "2": TOOL_ABORTED} == results


async def test_a_keyboard_interrupt_from_a_pooled_body_leaves_the_batch_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(KeyboardInterrupt) as caught:
        await run_tool_calls(_registry(KeyboardInterrupt()), _CALLS, signal=CancelSignal.never())

    assert KeyboardInterrupt is type(caught.value)


async def test_an_exception_group_raised_by_a_pooled_body_is_not_unwrapped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    group = BaseExceptionGroup("body", [KeyboardInterrupt()])

    with pytest.raises(BaseExceptionGroup) as caught:
        await run_tool_calls(_registry(group), _CALLS, signal=CancelSignal.never())

    (inner,) = caught.value.exceptions
    assert isinstance(inner, BaseExceptionGroup)
    assert "body" == inner.message


def test_sys_exit_in_a_pooled_tool_sets_the_process_exit_code() -> None:
    async def main() -> None:
        await run_tool_calls(_registry(SystemExit(3)), _CALLS, signal=CancelSignal.never())

    with pytest.raises(SystemExit) as caught:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    assert 3 == caught.value.code


async def test_cancelling_the_callers_scope_during_a_pool_raises_a_bare_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(KeyboardInterrupt())
    calls = [ToolCallRequest(call_id=f"c{i}", name="fine", arguments="") for i in range(3)]
    raised: list[type[BaseException]] = []

    with trio.move_on_after(0.25) as scope:
        try:
            await run_tool_calls(registry, calls, signal=CancelSignal.never())
        except BaseException as exc:
            raised.append(type(exc))
            raise

    assert ([trio.Cancelled], True) == (raised, scope.cancelled_caught)


async def test_a_system_exit_from_a_pooled_body_under_a_live_signal_leaves_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # the bodies run in a nursery of their own, linked to the signal: two nurseries deep
    with pytest.raises(SystemExit) as caught:
        await run_tool_calls(_registry(SystemExit(5)), _CALLS, signal=CancelController().signal)

    assert (SystemExit, 5) == (type(caught.value), caught.value.code)
