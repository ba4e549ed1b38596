"""What conflict keys and a shared limiter cost a call, and how many calls a second
``PostgresLimiter`` lets through from several processes.

In one process, a batch of N trivial parallel calls of a ``@tool`` function, timed per call
(median of rounds): without a key; with a conflict key each (all distinct: nobody waits, so
this is the gate's own cost); with a key each through a ``PostgresLimiter`` (what the round
trips cost), with the limiter's round trips per call (target: 1 to acquire + 1 to release for a
call that shares something, 0 for one that shares nothing). Then 3 processes, each running
batches of calls whose keys are drawn from 8 shared keys, through limiters on one database:
calls per second together. PostgreSQL uses ``DATABASE_URL`` if set, else a throwaway cluster
(the PostgreSQL rows are skipped, with the reason, when neither is possible). The per-call
instruction counts (deterministic) are ``python -m benchmarks.icount_tool_forms``'s ``keyed``
and ``classed`` forms.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import trio

from benchmarks.bench_postgres import optional_database
from dsh_tools import CancelSignal, Limiter, ToolCallRequest, ToolRegistry, run_tool_calls, tool


def _registry(limiter: Limiter | None, *, keyed: bool) -> ToolRegistry:
    registry = ToolRegistry(limiter=limiter)

    @tool(
        name="put",
        is_concurrency_safe=lambda _args: True,
        conflict_keys=(lambda args: [args.key]) if keyed else None,
    )
    async def put(key: str) -> str:
        """Store a value."""
        return key

    registry.register(put)
    return registry


def _per_call_us(registry: ToolRegistry, n: int, rounds: int) -> float:
    calls = [
        ToolCallRequest(call_id=f"c{i}", name="put", arguments=json.dumps({"key": f"k{i}"}))
        for i in range(n)
    ]
    times: list[float] = []

    async def main() -> None:
        for _ in range(rounds + 1):  # the first round warms up
            started = time.perf_counter()
            batch = await run_tool_calls(
                registry, calls, signal=CancelSignal.never(), max_parallel_tool_calls=64
            )
            times.append((time.perf_counter() - started) / n)
            assert not any(result.is_error for result in batch.results)

    trio.run(main)
    return statistics.median(times[1:]) * 1e6


_WORKER = textwrap.dedent(
    """
    import json, sys, time, trio
    from dsh_tools import CancelSignal, ToolCallRequest, ToolRegistry, run_tool_calls, tool
    from dsh_tools.postgres import PostgresLimiter

    dsn, name, batches, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    limiter = PostgresLimiter(dsn, poll_interval=0.002)
    registry = ToolRegistry(limiter=limiter)

    @registry.tool(is_concurrency_safe=lambda _a: True, conflict_keys=lambda a: [a.key])
    async def put(key: str) -> str:
        \"\"\"Store a value.\"\"\"
        await trio.sleep(0)
        return key

    async def main():
        for b in range(batches):
            calls = [ToolCallRequest(call_id=f"{name}{b}-{i}", name="put",
                     arguments=json.dumps({"key": f"k{(i * 7 + b) % 8}"})) for i in range(size)]
            batch = await run_tool_calls(registry, calls, signal=CancelSignal.never())
            assert not any(r.is_error for r in batch.results)

    sys.stdin.readline()  # start together
    started = time.perf_counter()
    trio.run(main)
    print(json.dumps({"seconds": time.perf_counter() - started,
                      "round_trips": limiter.round_trips}))
    """
)


def _three_processes(dsn: str, batches: int, size: int) -> dict[str, object]:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, dsn, name, str(batches), str(size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("p", "q", "r")
    ]
    time.sleep(1.0)  # let every worker connect before they start together
    started = time.perf_counter()
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    outcomes = [json.loads(worker.communicate(timeout=600)[0]) for worker in workers]
    wall = time.perf_counter() - started
    calls = 3 * batches * size
    return {
        "processes": 3,
        "calls": calls,
        "keys": 8,
        "calls_per_second": round(calls / wall, 1),
        "round_trips_per_call": round(
            sum(int(outcome["round_trips"]) for outcome in outcomes) / calls, 2
        ),
    }


def run(quick: bool) -> dict[str, object]:
    n, rounds = (200, 3) if quick else (1000, 5)
    report: dict[str, object] = {
        "calls": n,
        "rounds": rounds,
        "no_key_us_per_call": round(_per_call_us(_registry(None, keyed=False), n, rounds), 2),
        "one_key_us_per_call": round(_per_call_us(_registry(None, keyed=True), n, rounds), 2),
    }
    with contextlib.ExitStack() as stack:
        dsn = optional_database(stack, "limits")
        if dsn is None:
            report["postgres"] = {"skipped": "no PostgreSQL here"}
            return report
        from dsh_tools.postgres import PostgresLimiter

        shared_n = n // 4
        with PostgresLimiter(dsn) as limiter:
            shared = _registry(limiter, keyed=True)
            report["shared_key_us_per_call"] = round(_per_call_us(shared, shared_n, rounds), 2)
            report["shared_round_trips_per_call"] = round(
                limiter.round_trips / (shared_n * (rounds + 1)), 2
            )
            before = limiter.round_trips
            _per_call_us(_registry(limiter, keyed=False), shared_n, rounds)
            report["unshared_round_trips_per_call"] = limiter.round_trips - before
        report["three_processes"] = _three_processes(dsn, *((4, 50) if quick else (10, 100)))
    return report
