"""The explorers of ``dsh_tools.testing``: runs per second, and how the number of points grows
with the scenario.

A scenario of N calls (alternating parallel reads and exclusive writes, each body one virtual
second) is explored: ``explore_cancellations`` (two runs per task step: through the signal and
through the caller's scope) and ``explore_crashes`` (one run per append, and its resume), in
process mode with a JSONL log (a child killed per run, another per resume, and a torn run per
append) and inline with a memory log. Reported per N: the points, the runs, the wall time, and
runs per second. No target but the issue's: a 5-call scenario explored in seconds.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from dsh_tools import (
    CancelSignal,
    JsonlSessionLog,
    MemorySessionLog,
    SessionLog,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.testing import Exploration, explore_cancellations, explore_crashes


async def _body(_args: object, _context: ToolRunContext) -> str:
    await trio.sleep(1)
    return "done"


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="read",
            description="read",
            parameters={},
            execute=_body,
            is_concurrency_safe=lambda _args: True,
            idempotent=True,
        )
    )
    registry.register(define_tool(name="write", description="write", parameters={}, execute=_body))
    return registry


def _calls(n: int) -> list[ToolCallRequest]:
    return [
        ToolCallRequest(call_id=f"c{i}", name="read" if i % 3 else "write", arguments="{}")
        for i in range(n)
    ]


def _cancel_scenario(n: int) -> Callable[[CancelSignal], Awaitable[ToolBatch]]:
    async def scenario(signal: CancelSignal) -> ToolBatch:
        return await run_tool_calls(
            _registry(), _calls(n), signal=signal, session=MemorySessionLog()
        )

    return scenario


def _crash_scenario(n: int) -> Callable[[SessionLog], Awaitable[ToolBatch]]:
    async def scenario(session: SessionLog) -> ToolBatch:
        return await run_tool_calls(
            _registry(), _calls(n), signal=CancelSignal.never(), session=session
        )

    return scenario


def _timed(explore: Callable[[], Exploration]) -> dict[str, float]:
    started = time.perf_counter()
    exploration = explore()
    seconds = time.perf_counter() - started
    assert exploration.ok, str(exploration)
    return {
        "points": exploration.points,
        "runs": len(exploration.runs),
        "seconds": round(seconds, 3),
        "runs_per_second": round(len(exploration.runs) / seconds, 1),
    }


def run(quick: bool) -> dict[str, object]:
    sizes = (1, 5) if quick else (1, 5, 10, 20)
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as directory:
        count = iter(range(10**9))

        def jsonl() -> SessionLog:
            return JsonlSessionLog(Path(directory) / f"{next(count)}.jsonl")

        for n in sizes:
            report[f"calls_{n}"] = {
                "cancellations": _timed(lambda n=n: explore_cancellations(_cancel_scenario(n))),
                "crashes_inline_memory": _timed(
                    lambda n=n: explore_crashes(
                        _crash_scenario(n), log=MemorySessionLog, mode="inline"
                    )
                ),
                "crashes_process_jsonl": _timed(
                    lambda n=n: explore_crashes(_crash_scenario(n), log=jsonl)
                ),
            }
    return report
