"""Appends to :class:`~dsh_tools.postgres.PostgresSessionLog`: per second, and how long one
append blocks the trio loop.

An append is one ``INSERT`` committed on its own, on the calling thread: the trio loop waits
for one round trip to the server (and, with ``synchronous_commit=True``, for the server's flush
of its write-ahead log). Reported per mode (``synchronous_commit`` on and off): appends per
second (median of rounds, each appending the events of a batch's calls to a fresh session),
and the latency of one append (median and 99th percentile, in microseconds): the time the
loop is blocked (never longer than ``append_timeout``: a watchdog thread cuts the connection
of an append its server does not answer in time). The mode ``synchronous_commit_off_unbounded``
appends with ``append_timeout=None``, without the watchdog: its difference from
``synchronous_commit_off`` is what arming and disarming the watchdog costs an append.

The database: ``DATABASE_URL`` if set, else a throwaway cluster (``examples/local_servers.py``,
needs PostgreSQL's server programs) on loopback. Without psycopg or a server the benchmark is
skipped, with its reason in the report and on stderr. No target: loopback numbers say what the
library adds; a real network adds its round trip to every append.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Generator
from pathlib import Path

from benchmarks.bench_session import sample_events


def optional_database(stack: contextlib.ExitStack, area: str) -> str | None:
    """A database for ``area``'s PostgreSQL rows (its schema made), held by ``stack``, or
    ``None`` (said on stderr) when none can be had here: the other rows still count."""
    try:
        dsn = stack.enter_context(_database())
        from dsh_tools.postgres import create_schema

        create_schema(dsn)
    except Exception as exc:
        print(f"# {area}: postgres skipped: {exc}", file=sys.stderr)
        return None
    return dsn


@contextlib.contextmanager
def _database() -> Generator[str]:
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import local_servers

    with local_servers.postgres_cluster() as dsn:
        yield dsn


def _measure(
    dsn: str,
    *,
    synchronous_commit: bool,
    appends: int,
    rounds: int,
    append_timeout: float | None = 5.0,
) -> dict[str, float]:
    from dsh_tools.postgres import PostgresSessionLog

    events = sample_events()
    rates: list[float] = []
    latencies: list[float] = []
    for _ in range(rounds):
        with PostgresSessionLog(
            dsn,
            f"bench-{uuid.uuid4()}",
            synchronous_commit=synchronous_commit,
            append_timeout=append_timeout,
        ) as log:
            started = time.perf_counter()
            for index in range(appends):
                before = time.perf_counter()
                log.append(events[index % 2])
                latencies.append(time.perf_counter() - before)
            rates.append(appends / (time.perf_counter() - started))
    latencies.sort()
    return {
        "appends_per_second": round(statistics.median(rates)),
        "append_median_us": round(statistics.median(latencies) * 1e6, 1),
        "append_p99_us": round(latencies[int(len(latencies) * 0.99)] * 1e6, 1),
    }


def run(quick: bool) -> dict[str, object]:
    try:
        from dsh_tools.postgres import create_schema
    except ModuleNotFoundError as exc:
        reason = f"skipped: {exc}"
        print(f"# postgres: {reason}", file=sys.stderr)
        return {"skipped": reason}
    appends, rounds = (300, 3) if quick else (2_000, 5)
    try:
        with _database() as dsn:
            create_schema(dsn)
            return {
                "appends": appends,
                "rounds": rounds,
                "synchronous_commit_on": _measure(
                    dsn, synchronous_commit=True, appends=appends, rounds=rounds
                ),
                "synchronous_commit_off": _measure(
                    dsn, synchronous_commit=False, appends=appends, rounds=rounds
                ),
                # the same without the watchdog's bound: what arming it costs an append
                "synchronous_commit_off_unbounded": _measure(
                    dsn,
                    synchronous_commit=False,
                    appends=appends,
                    rounds=rounds,
                    append_timeout=None,
                ),
            }
    except Exception as exc:  # no server programs, no database: say why, measure nothing
        reason = f"skipped: no PostgreSQL server ({type(exc).__name__}: {exc})"
        print(f"# postgres: {reason}", file=sys.stderr)
        return {"skipped": reason}
