"""What a Temporal worker's batch costs as its session grows: the batch activity's trio side
(open the session's PostgreSQL log, find the batch, run one trivial call, read it back) and
the agent's read of the batch, on a fresh session and on one that already holds N events.

Reading from the batch's first sequence number (what the workflow hands the worker, and the
outcome hands the agent) against reading the whole log (what a request without ``from_seq``
does): milliseconds per batch, median of rounds. Target: the same cost at event 50,000 as at
event 50. PostgreSQL uses ``DATABASE_URL`` if set, else a throwaway cluster (skipped, with
the reason, when neither is possible). Needs the ``[temporal]`` extra (no Temporal server: the
activity's trio side is called directly).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import statistics
import time
import uuid

import trio

from benchmarks.bench_postgres import optional_database
from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    ToolRegistry,
    tool,
)


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @tool(name="echo")
    async def echo(text: str) -> str:
        """Echo a text."""
        return text

    registry.register(echo)
    return registry


def _session(dsn: str, events: int) -> str:
    from dsh_tools.postgres import PostgresSessionLog

    session = f"reads-{uuid.uuid4()}"
    with PostgresSessionLog(dsn, session, synchronous_commit=False) as log:
        for index in range(events // 2):
            log.append(BatchStartEvent(turn=0, step=index, batch_id=f"old{index}", calls=[]))
            log.append(
                BatchEndEvent(turn=0, step=index, batch_id=f"old{index}", reason="completed")
            )
    return session


def _per_batch_ms(dsn: str, session: str, prior: int, *, from_start: bool, rounds: int) -> float:
    from dsh_tools.postgres import PostgresSessionLog
    from dsh_tools.temporal._activity import BatchActivity
    from dsh_tools.temporal._workflow import BatchCall, BatchRequest

    times: list[float] = []
    next_seq = prior

    async def main() -> None:
        nonlocal next_seq
        activity = BatchActivity(
            _registry(),
            dsn,
            "dsh",
            False,
            trio.lowlevel.current_trio_token(),
        )
        for round_ in range(rounds + 1):  # the first round warms up
            request = BatchRequest(
                session_id=session,
                calls=[BatchCall(call_id=f"c{round_}", name="echo", arguments='{"text": "x"}')],
                turn=1,
                step=round_,
                max_parallel_tool_calls=1,
                capacity_limits=None,
                heartbeat_timeout=10,
                batch_timeout=60,
            )
            if not from_start:
                request = dataclasses.replace(request, from_seq=next_seq)
            started = time.perf_counter()
            outcome = await activity._run_on_trio(request, CancelController(), 1)  # pyright: ignore[reportPrivateUsage]
            since = 0 if from_start else outcome.first_seq
            events = await trio.to_thread.run_sync(
                functools.partial(PostgresSessionLog.read, dsn, session, since=since)
            )
            times.append(time.perf_counter() - started)
            assert events
            next_seq = outcome.next_seq

    trio.run(main)
    return statistics.median(times[1:]) * 1e3


def run(quick: bool) -> dict[str, object]:
    sizes, rounds = ((50, 5_000), 3) if quick else ((50, 50_000), 5)
    report: dict[str, object] = {"rounds": rounds}
    with contextlib.ExitStack() as stack:
        dsn = optional_database(stack, "worker_reads")
        if dsn is None:
            report["postgres"] = {"skipped": "no PostgreSQL here"}
            return report
        for size in sizes:
            session = _session(dsn, size)
            report[f"at_{size}_events"] = {
                "from_the_batch_ms": round(
                    _per_batch_ms(dsn, session, size, from_start=False, rounds=rounds), 2
                ),
                "whole_log_ms": round(
                    _per_batch_ms(dsn, session, size, from_start=True, rounds=rounds), 2
                ),
            }
    return report
