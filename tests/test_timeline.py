"""TimelineRecorder: one span per dispatched call, on the virtual clock, with the result code."""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    CancelSignal,
    Deny,
    PreExecuteNext,
    PreToolDecision,
    TimelineRecorder,
    TimelineSpan,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    install_timeout_policy,
    run_tool_calls,
)
from dsh_tools.testing import fail, hang, scripted_tool, sleep
from support import request, run_calls


async def test_spans_follow_the_pool_and_the_barrier_on_virtual_time(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read", sleep(1)).register(registry)
    scripted_tool("write", sleep(0.5), parallel=False).register(registry)
    scripted_tool("broken", sleep(0.25), fail("boom")).register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)
    calls = [
        request("a", "read"),
        request("b", "broken"),
        request("c", "write"),
        request("d", "read"),
    ]

    await run_tool_calls(registry, calls, signal=CancelSignal.never())

    expected = {
        TimelineSpan(call_id="a", name="read", started=0.0, finished=1.0, code="ok"),
        TimelineSpan(call_id="b", name="broken", started=0.0, finished=0.25, code="error"),
        TimelineSpan(call_id="c", name="write", started=1.0, finished=1.5, code="ok"),
        TimelineSpan(call_id="d", name="read", started=1.5, finished=2.5, code="ok"),
    }
    assert expected == set(recorder.spans)
    assert 2 == recorder.peak_running()


async def test_a_span_covers_the_timeout_wrapper_and_records_its_code(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    install_timeout_policy(registry)
    slow = scripted_tool("slow", hang())
    registry.register(
        ToolDefinition(
            name="slow",
            description="hangs",
            parameters={},
            execute=slow,
            timeout=0.75,
        )
    )
    recorder = TimelineRecorder()
    recorder.install(registry)

    await run_calls(registry, request("a", "slow"))

    assert (
        TimelineSpan(call_id="a", name="slow", started=0.0, finished=0.75, code="TOOL_TIMEOUT"),
    ) == recorder.spans


async def test_an_interrupted_call_is_aborted_and_an_unstarted_one_has_no_span(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read", sleep(1)).register(registry)
    scripted_tool("write", sleep(1), parallel=False).register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)
    controller = CancelController(deadline=0.5)

    await run_tool_calls(
        registry, [request("a", "read"), request("b", "write")], signal=controller.signal
    )

    assert (
        TimelineSpan(call_id="a", name="read", started=0.0, finished=0.5, code="ABORTED"),
    ) == recorder.spans
    assert recorder.span("b") is None


async def test_a_denied_call_never_reaches_the_timeline(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    async def deny(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Deny("no")

    registry.hooks.pre_execute.add(deny)
    scripted_tool("read").register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)

    await run_calls(registry, request("a", "read"))

    assert () == recorder.spans


async def test_on_change_sees_every_start_and_finish_in_order(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read", sleep(1)).register(registry)
    seen: list[tuple[str, float | None, str | None]] = []
    recorder = TimelineRecorder(on_change=lambda s: seen.append((s.call_id, s.finished, s.code)))
    recorder.install(registry)

    await run_calls(registry, request("a", "read"))

    assert [("a", None, None), ("a", 1.0, "ok")] == seen


async def test_a_cancelled_caller_scope_is_recorded_as_cancelled(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("stuck", hang()).register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)

    with trio.move_on_after(2):
        await run_calls(registry, request("a", "stuck"))

    assert (
        TimelineSpan(call_id="a", name="stuck", started=0.0, finished=2.0, code="cancelled"),
    ) == recorder.spans


async def test_a_wall_clock_records_real_time_under_a_virtual_clock(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read", sleep(3600)).register(registry)
    recorder = TimelineRecorder(clock=time.perf_counter)
    recorder.install(registry)

    await run_calls(registry, request("a", "read"))

    (span,) = recorder.spans
    assert span.duration is not None
    assert span.duration < 60  # an hour of virtual time is not an hour of wall time


async def test_clear_forgets_finished_spans_and_refuses_while_a_call_runs(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read", sleep(1)).register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: run_calls(registry, request("a", "read")))
        await trio.sleep(0.5)
        assert ("a",) == tuple(s.call_id for s in recorder.running)
        with pytest.raises(RuntimeError, match="while calls are running"):
            recorder.clear()
    recorder.clear()
    assert () == recorder.spans


async def test_the_disposer_stops_the_recording(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read").register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)()

    await run_calls(registry, request("a", "read"))

    assert () == recorder.spans
