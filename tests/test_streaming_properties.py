"""Streaming dispatch under random schedules (Hypothesis, trio's virtual clock): whatever the
arrival times, tool kinds, cap and interrupt, every received call gets one result in model
order, no body starts before its call arrived, an exclusive body runs alone and after every
earlier call, and never more bodies run at once than the cap allows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    CancelController,
    MemorySessionLog,
    ToolCallRequest,
    ToolDefinition,
    ToolRegistry,
    ToolRunContext,
    run_tool_calls,
)
from dsh_tools.testing import check_batch

# each call: (gap before it arrives, exclusive?, body seconds); then the cap and an interrupt
_calls = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.1, 0.25, 0.5]),
        st.booleans(),
        st.sampled_from([0.1, 0.3, 1.0]),
    ),
    min_size=1,
    max_size=12,
)


def _scenario(
    plan: list[tuple[float, bool, float]], cap: int, interrupt_at: float | None
) -> dict[str, Any]:
    arrivals: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    running: list[int] = [0, 0]  # now, most at once

    def tool(name: str, exclusive: bool) -> ToolDefinition:
        async def body(_args: object, context: ToolRunContext) -> str:
            begin = trio.current_time()
            running[0] += 1
            running[1] = max(running)
            try:
                await trio.sleep(plan[int(context.call_id[1:])][2])
            finally:
                running[0] -= 1
                spans[context.call_id] = (begin, trio.current_time())
            return context.call_id

        return ToolDefinition(
            name=name,
            description=name,
            parameters={},
            execute=body,
            is_concurrency_safe=None if exclusive else (lambda _args: True),
        )

    registry = ToolRegistry()
    registry.register(tool("p", False))
    registry.register(tool("x", True))
    log = MemorySessionLog()
    received: list[ToolCallRequest] = []

    async def model() -> AsyncIterator[ToolCallRequest]:
        for index, (gap, exclusive, _) in enumerate(plan):
            await trio.sleep(gap)
            call = ToolCallRequest(
                call_id=f"c{index}", name="x" if exclusive else "p", arguments="{}"
            )
            arrivals[call.call_id] = trio.current_time()
            received.append(call)
            yield call

    async def main() -> Any:
        controller = CancelController()
        async with trio.open_nursery() as nursery:
            if interrupt_at is not None:
                delay = interrupt_at

                async def interrupt() -> None:
                    await trio.sleep(delay)
                    controller.cancel("interrupted")

                nursery.start_soon(interrupt)
            batch = await run_tool_calls(
                registry,
                model(),
                signal=controller.signal,
                max_parallel_tool_calls=cap,
                session=log,
            )
            nursery.cancel_scope.cancel()
        return batch

    batch = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return {
        "batch": batch,
        "log": log,
        "received": received,
        "arrivals": arrivals,
        "spans": spans,
        "most": running[1],
        "plan": plan,
    }


@settings(deadline=None)
@given(
    plan=_calls,
    cap=st.integers(1, 4),
    interrupt_at=st.none() | st.sampled_from([0.05, 0.4, 1.5]),
)
def test_any_schedule_keeps_the_batchs_rules(
    plan: list[tuple[float, bool, float]], cap: int, interrupt_at: float | None
) -> None:
    run = _scenario(plan, cap, interrupt_at)
    received: list[ToolCallRequest] = run["received"]
    spans: dict[str, tuple[float, float]] = run["spans"]

    # one result per received call, in model order, and the log agrees
    check_batch(received, run["batch"], run["log"])
    # no body before its call arrived; never more bodies at once than the cap
    assert all(spans[c][0] >= run["arrivals"][c] for c in spans)
    assert run["most"] <= cap
    # an exclusive body runs alone, after every earlier call's body ended and before any
    # later call's body began
    order = [call.call_id for call in received]
    for index, call in enumerate(received):
        if call.name != "x" or call.call_id not in spans:
            continue
        begin, end = spans[call.call_id]
        for other in order[:index]:
            if other in spans:
                assert spans[other][1] <= begin
        for other in order[index + 1 :]:
            if other in spans:
                assert spans[other][0] >= end
