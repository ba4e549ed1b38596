"""Appends per second to the file session logs.

The workload is what a batch appends per call: a ``tool/call`` event and a ``tool/result``
event with a short text result. Reported: appends per second (median of several rounds, each
appending a batch of events to a fresh file in a temporary directory) for
:class:`~dsh_tools.JsonlSessionLog` without and with ``fsync``, and for
:class:`~dsh_tools.SqliteSessionLog` with ``synchronous="normal"`` and ``"full"`` (one insert,
one transaction per append). The synced modes are bounded by the disk, not the library, and
use fewer appends. Also reported: calls per second through ``run_tool_calls`` (batches of
no-op calls, cap 100) with no log, a :class:`~dsh_tools.MemorySessionLog`, and each file log
without syncing. No target: the numbers are compared before/after a change, or with each
other, in one sitting.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio

from dsh_tools import (
    CancelSignal,
    JsonlSessionLog,
    MemorySessionLog,
    SessionEvent,
    SessionLog,
    SqliteSessionLog,
    TextBlock,
    ToolCallEvent,
    ToolResultEvent,
    run_tool_calls,
)
from dsh_tools.cli import bench

_LOGS: dict[str, Callable[[Path], JsonlSessionLog | SqliteSessionLog]] = {
    "jsonl": lambda path: JsonlSessionLog(path.with_suffix(".jsonl")),
    "jsonl_fsync": lambda path: JsonlSessionLog(path.with_suffix(".jsonl"), fsync=True),
    "sqlite_normal": lambda path: SqliteSessionLog(path.with_suffix(".sqlite")),
    "sqlite_full": lambda path: SqliteSessionLog(path.with_suffix(".sqlite"), synchronous="full"),
}
_SYNCED = frozenset(("jsonl_fsync", "sqlite_full"))


def sample_events() -> list[SessionEvent]:
    """A tool call and its result: what one append of each log kind writes."""
    return [
        ToolCallEvent(
            turn=3, step=1, call_id="call_0001", name="read_file", arguments='{"path":"a.py"}'
        ),
        ToolResultEvent(
            turn=3,
            step=1,
            call_id="call_0001",
            content=[TextBlock(text="def main() -> None:\n    print('hello')\n" * 4)],
            is_error=False,
            source_event_seqs=(0,),
        ),
    ]


def _appends_per_second(directory: Path, appends: int, *, log: str, round_: int) -> float:
    events = sample_events()
    session = _LOGS[log](directory / f"log-{log}-{round_}")
    try:
        started = time.perf_counter()
        for index in range(appends):
            session.append(events[index % 2])
        elapsed = time.perf_counter() - started
    finally:
        session.close()
    return appends / elapsed


_RUN_LOGS: dict[str, Callable[[Path], SessionLog | None]] = {
    "no_log": lambda path: None,
    "memory": lambda path: MemorySessionLog(),
    "jsonl": _LOGS["jsonl"],
    "sqlite_normal": _LOGS["sqlite_normal"],
}


def _calls_per_second(directory: Path, calls: int, *, log: str, round_: int) -> float:
    registry = bench._noop_registry()  # pyright: ignore[reportPrivateUsage] - the bench's own no-op tool
    batch = bench._calls(100)  # pyright: ignore[reportPrivateUsage]
    session = _RUN_LOGS[log](directory / f"run-{log}-{round_}")

    async def main() -> float:
        started = time.perf_counter()
        for _ in range(calls // len(batch)):
            await run_tool_calls(registry, batch, signal=CancelSignal.never(), session=session)
        return calls / (time.perf_counter() - started)

    try:
        return trio.run(main)
    finally:
        if isinstance(session, JsonlSessionLog | SqliteSessionLog):
            session.close()


def run(quick: bool) -> dict[str, object]:
    """Measure appends per second for each log; ``quick`` uses fewer rounds and appends."""
    rounds = 3 if quick else 7
    appends = 1_000 if quick else 10_000
    report: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-tools-bench-") as name:
        directory = Path(name)
        for log in _LOGS:
            count = appends // 20 if log in _SYNCED else appends
            rates = [
                _appends_per_second(directory, count, log=log, round_=r) for r in range(rounds)
            ]
            report[f"{log}_appends_per_second"] = round(statistics.median(rates))
            report[f"{log}_appends_per_second_max"] = round(max(rates))
        calls = appends // 5
        for log in _RUN_LOGS:
            rates = [_calls_per_second(directory, calls, log=log, round_=r) for r in range(rounds)]
            report[f"run_tool_calls_{log}_calls_per_second"] = round(statistics.median(rates))
    return report
