"""What the MAC chain of a keyed session log costs per event, for each stored log kind.

The workload is ``bench_session``'s: a ``tool/call`` and a ``tool/result`` event, appended
alternately. For the JSON Lines, SQLite and PostgreSQL logs, without and with an
``integrity_key``: microseconds per append (median of rounds, each appending to a fresh log)
and per event read back (``events()`` of that log, which verifies the whole chain when keyed),
and the difference the key makes. PostgreSQL uses ``DATABASE_URL`` if set, else a throwaway
cluster (skipped, with its reason, when neither is possible). No target: the numbers say what
a key costs next to the store's own write.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_postgres import optional_database
from benchmarks.bench_session import sample_events
from dsh_tools import JsonlSessionLog, SessionLog, SqliteSessionLog

KEY = b"\x07" * 32


def _measure(
    opener: Callable[[bytes | None], SessionLog], key: bytes | None, appends: int, rounds: int
) -> tuple[float, float]:
    """Microseconds per append and per event read, medians over ``rounds`` fresh logs."""
    events = sample_events()
    append_times: list[float] = []
    read_times: list[float] = []
    for _ in range(rounds):
        log = opener(key)
        try:
            started = time.perf_counter()
            for index in range(appends):
                log.append(events[index % len(events)])
            append_times.append((time.perf_counter() - started) / appends)
            started = time.perf_counter()
            read = log.events()
            read_times.append((time.perf_counter() - started) / len(read))
        finally:
            close = getattr(log, "close", None)
            if close is not None:
                close()
    return statistics.median(append_times) * 1e6, statistics.median(read_times) * 1e6


def _kinds(directory: Path, dsn: str | None) -> dict[str, Callable[[bytes | None], SessionLog]]:
    kinds: dict[str, Callable[[bytes | None], SessionLog]] = {
        "jsonl": lambda key: JsonlSessionLog(
            directory / f"{uuid.uuid4()}.jsonl", integrity_key=key
        ),
        "sqlite": lambda key: SqliteSessionLog(directory / f"{uuid.uuid4()}.db", integrity_key=key),
    }
    if dsn is not None:
        from dsh_tools.postgres import PostgresSessionLog

        kinds["postgres"] = lambda key: PostgresSessionLog(
            dsn, f"integrity-{uuid.uuid4()}", integrity_key=key
        )
    return kinds


def run(quick: bool) -> dict[str, object]:
    appends, rounds = (300, 3) if quick else (2_000, 5)
    report: dict[str, object] = {"appends": appends, "rounds": rounds}
    with contextlib.ExitStack() as stack:
        dsn = optional_database(stack, "integrity")
        if dsn is None:
            report["postgres"] = {"skipped": "no PostgreSQL here"}
        with tempfile.TemporaryDirectory() as directory:
            for name, opener in _kinds(Path(directory), dsn).items():
                plain_append, plain_read = _measure(opener, None, appends, rounds)
                keyed_append, keyed_read = _measure(opener, KEY, appends, rounds)
                report[name] = {
                    "append_us": {"no_key": round(plain_append, 2), "key": round(keyed_append, 2)},
                    "read_us_per_event": {
                        "no_key": round(plain_read, 2),
                        "key": round(keyed_read, 2),
                    },
                    "key_adds_us": {
                        "append": round(keyed_append - plain_append, 2),
                        "read": round(keyed_read - plain_read, 2),
                    },
                }
    return report
