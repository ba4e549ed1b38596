"""The cost of ``context.report_progress`` in a hot loop, when the report is coalesced away.

One tool body reports 10,000 times in a row without awaiting (far inside one
``progress_interval``), so every report but the first is coalesced: the per-report cost is
what a body pays for reporting often. Measured against the same loop without the report
(the floor) in the same run; the target is under 1 µs per coalesced report. Also measured: a
call with a session log, where the first report and the last pending one are appended.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import trio

from dsh_tools import (
    CancelSignal,
    MemorySessionLog,
    ToolCallRequest,
    ToolDefinition,
    ToolRegistry,
    ToolRunContext,
    run_tool_calls,
)

TARGET_NS_PER_REPORT = 1_000.0
REPORTS = 10_000


def _registry(samples: dict[str, list[float]]) -> ToolRegistry:
    async def reporting(args: Any, context: ToolRunContext) -> str:
        report = context.report_progress
        started = time.perf_counter_ns()
        for step in range(REPORTS):
            report(progress=step, total=REPORTS)
        samples["report"].append((time.perf_counter_ns() - started) / REPORTS)
        started = time.perf_counter_ns()
        for step in range(REPORTS):
            _nothing(progress=step, total=REPORTS)
        samples["floor"].append((time.perf_counter_ns() - started) / REPORTS)
        return "done"

    registry = ToolRegistry(progress_interval=3600.0)
    registry.register(
        ToolDefinition(name="reporting", description="d", parameters={}, execute=reporting)
    )
    return registry


def _nothing(*, progress: float, total: float) -> None:
    return None


async def _measure(rounds: int) -> tuple[dict[str, list[float]], int]:
    samples: dict[str, list[float]] = {"report": [], "floor": []}
    registry = _registry(samples)
    events = 0
    for _ in range(rounds):
        log = MemorySessionLog()
        await run_tool_calls(
            registry,
            [ToolCallRequest(call_id="c", name="reporting", arguments="{}")],
            signal=CancelSignal.never(),
            session=log,
        )
        events = sum(type(event).__name__ == "ToolProgressEvent" for event in log.events())
    return samples, events


def run(quick: bool) -> dict[str, object]:
    rounds = 5 if quick else 51
    samples, events = trio.run(_measure, rounds)
    best = {name: min(values) for name, values in samples.items()}
    median = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "reports_per_call": REPORTS,
        "rounds": rounds,
        "progress_events_logged_per_call": events,
        "best_ns_per_report": round(best["report"], 1),
        "median_ns_per_report": round(median["report"], 1),
        "best_ns_per_floor_call": round(best["floor"], 1),
        "target_ns_per_report": TARGET_NS_PER_REPORT,
        "target_met": best["report"] <= TARGET_NS_PER_REPORT,
    }
