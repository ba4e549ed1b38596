"""Turn time with streaming dispatch, on trio's virtual clock (exact and repeatable).

A scripted model streams N calls evenly over S seconds (call k is complete at k * S / N, and
the message ends at S); each tool takes T seconds and is parallel-safe. Three turn times:

- ``collect_then_run``: wait for the whole message, then ``run_tool_calls`` on the list
  (S + T: what a loop without streaming dispatch pays);
- ``streamed``: ``run_tool_calls`` on the call stream (calls start as they arrive);
- ``ideal``: the latest ``arrival + T`` over the calls, and never before the message ends
  (no layer can do better).

Targets: the stream within 2% of the ideal; at N=8, S=2 s, T=1 s at least 1.5x faster than
collect-then-run. The second cannot be met in this scenario by any scheduler: the ideal itself
is (N - 1) * S / N + T = 2.75 s against 3 s (1.09x); streaming wins most where early calls'
tools are long and the stream goes on after them, the ``varied`` rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import trio
import trio.testing

from dsh_tools import (
    CancelSignal,
    ToolCallRequest,
    ToolDefinition,
    ToolRegistry,
    ToolRunContext,
    run_tool_calls,
)


def _registry(seconds: float, first: float | None = None) -> ToolRegistry:
    """Every tool takes ``seconds``; the first call's ``first`` when given. ``t`` is
    parallel-safe, ``x`` exclusive."""

    async def body(_args: object, context: ToolRunContext) -> str:
        await trio.sleep(first if first is not None and context.call_id == "c0" else seconds)
        return "ok"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            execute=body,
            is_concurrency_safe=lambda _args: True,
        )
    )
    registry.register(ToolDefinition(name="x", description="x", parameters={}, execute=body))
    return registry


async def _model(
    count: int, stream_seconds: float, barrier_at: int | None = None
) -> AsyncIterator[ToolCallRequest]:
    """Call k is complete at k * S / N; the message ends (its finish event) at S."""
    for index in range(count):
        if index:
            await trio.sleep(stream_seconds / count)
        name = "x" if index == barrier_at else "t"
        yield ToolCallRequest(call_id=f"c{index}", name=name, arguments="{}")
    await trio.sleep(stream_seconds / count)


def _turn(
    count: int,
    stream_seconds: float,
    tool_seconds: float,
    *,
    streamed: bool,
    first: float | None = None,
    barrier_at: int | None = None,
) -> float:
    registry = _registry(tool_seconds, first)

    async def main() -> float:
        begin = trio.current_time()
        if streamed:
            batch = await run_tool_calls(
                registry,
                _model(count, stream_seconds, barrier_at),
                signal=CancelSignal.never(),
                max_parallel_tool_calls=count,
            )
        else:
            calls = [call async for call in _model(count, stream_seconds, barrier_at)]
            batch = await run_tool_calls(
                registry, calls, signal=CancelSignal.never(), max_parallel_tool_calls=count
            )
        assert len(batch.results) == count
        return trio.current_time() - begin

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def run(quick: bool) -> dict[str, object]:
    cases = [(1, 2.0, 1.0), (8, 2.0, 1.0), (64, 2.0, 1.0), (4, 3.0, 0.5)]
    if not quick:
        cases += [(1000, 2.0, 1.0), (16, 1.0, 2.0), (2, 0.5, 3.0)]
    rows: list[dict[str, object]] = []
    for count, stream_seconds, tool_seconds in cases:
        last_arrival = (count - 1) * stream_seconds / count
        ideal = max(last_arrival + tool_seconds, stream_seconds)
        collected = _turn(count, stream_seconds, tool_seconds, streamed=False)
        streamed = _turn(count, stream_seconds, tool_seconds, streamed=True)
        rows.append(
            {
                "calls": count,
                "stream_s": stream_seconds,
                "tool_s": tool_seconds,
                "collect_then_run_s": round(collected, 6),
                "streamed_s": round(streamed, 6),
                "ideal_s": round(ideal, 6),
                "streamed_over_ideal": round(streamed / ideal, 4),
                "speedup_over_collect": round(collected / streamed, 3),
            }
        )
    # varied: the first call's tool is long (a build, a search), the rest are quick
    varied: list[dict[str, object]] = []
    for count, stream_seconds, first in [(8, 2.0, 2.0), (4, 3.0, 4.0)]:
        tool_seconds = 0.25
        arrivals = [index * stream_seconds / count for index in range(count)]
        ideal = max(stream_seconds, first, *(arrival + tool_seconds for arrival in arrivals[1:]))
        collected = _turn(count, stream_seconds, tool_seconds, streamed=False, first=first)
        streamed = _turn(count, stream_seconds, tool_seconds, streamed=True, first=first)
        varied.append(
            {
                "calls": count,
                "stream_s": stream_seconds,
                "first_tool_s": first,
                "other_tools_s": tool_seconds,
                "collect_then_run_s": round(collected, 6),
                "streamed_s": round(streamed, 6),
                "ideal_s": round(ideal, 6),
                "streamed_over_ideal": round(streamed / ideal, 4),
                "speedup_over_collect": round(collected / streamed, 3),
            }
        )
    # a barrier in the middle: N/2 parallel calls, one exclusive call, N/2 parallel calls; the
    # ideal the barrier allows: it starts when it arrived and every earlier call ended, the
    # calls after it start when it ended (or when they arrive)
    barrier: list[dict[str, object]] = []
    for count, stream_seconds, tool_seconds in [(9, 2.0, 1.0), (65, 2.0, 0.5)]:
        middle = count // 2
        arrivals = [index * stream_seconds / count for index in range(count)]
        earlier_end = max(arrival + tool_seconds for arrival in arrivals[:middle])
        barrier_end = max(arrivals[middle], earlier_end) + tool_seconds
        ideal = max(
            stream_seconds,
            barrier_end,
            *(max(arrival, barrier_end) + tool_seconds for arrival in arrivals[middle + 1 :]),
        )
        streamed = _turn(count, stream_seconds, tool_seconds, streamed=True, barrier_at=middle)
        collected = _turn(count, stream_seconds, tool_seconds, streamed=False, barrier_at=middle)
        barrier.append(
            {
                "calls": count,
                "barrier_index": middle,
                "collect_then_run_s": round(collected, 6),
                "streamed_s": round(streamed, 6),
                "ideal_s": round(ideal, 6),
                "streamed_over_ideal": round(streamed / ideal, 4),
            }
        )
    return {
        "barrier": barrier,
        "arrival_to_body_latency_us": _latency(200 if quick else 2000),
        "varied": varied,
        "targets": {
            "streamed_over_ideal_at_most": 1.02,
            "speedup_over_collect_at_least (N=8, S=2, T=1)": 1.5,
        },
        "turns": rows,
    }


def _latency(count: int) -> dict[str, float]:
    """On the real clock: from a call's arrival (the stream yields it) to its body's first
    line, through the reader, the lane and the pipeline; median and p99 in microseconds."""
    arrived: dict[str, float] = {}
    delays: list[float] = []

    async def body(_args: object, context: ToolRunContext) -> str:
        delays.append(trio.current_time() - arrived[context.call_id])
        return "ok"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            execute=body,
            is_concurrency_safe=lambda _args: True,
        )
    )

    async def model() -> AsyncIterator[ToolCallRequest]:
        for index in range(count):
            await trio.sleep(0.0005)  # the next call completes a moment later
            call_id = f"c{index}"
            arrived[call_id] = trio.current_time()
            yield ToolCallRequest(call_id=call_id, name="t", arguments="{}")

    async def main() -> None:
        await run_tool_calls(registry, model(), signal=CancelSignal.never())

    trio.run(main)
    delays.sort()
    return {
        "median": round(delays[len(delays) // 2] * 1e6, 1),
        "p99": round(delays[int(len(delays) * 0.99)] * 1e6, 1),
    }
