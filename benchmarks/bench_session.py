"""Appends per second to a :class:`~dsh_tools.JsonlSessionLog` (no ``fsync``).

The workload is what a batch appends per call: a ``tool/call`` event and a ``tool/result``
event with a short text result. Reported: appends per second (median of several rounds, each
appending a batch of events to a fresh file in a temporary directory), and the same with
``fsync=True`` for scale (bounded by the disk, not the library). No target: the number is
compared before/after a change in one sitting.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from dsh_tools import JsonlSessionLog, SessionEvent, TextBlock, ToolCallEvent, ToolResultEvent


def _events() -> list[SessionEvent]:
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


def _appends_per_second(directory: Path, appends: int, *, fsync: bool, round_: int) -> float:
    events = _events()
    log = JsonlSessionLog(directory / f"log-{fsync}-{round_}.jsonl", fsync=fsync)
    try:
        started = time.perf_counter()
        for index in range(appends):
            log.append(events[index % 2])
        elapsed = time.perf_counter() - started
    finally:
        close = getattr(log, "close", None)  # logs before the lock had nothing to close
        if close is not None:
            close()
    return appends / elapsed


def run(quick: bool) -> dict[str, object]:
    """Measure appends per second; ``quick`` uses fewer rounds and appends."""
    rounds = 3 if quick else 7
    appends = 1_000 if quick else 10_000
    with tempfile.TemporaryDirectory(prefix="dsh-tools-bench-") as name:
        directory = Path(name)
        plain = [
            _appends_per_second(directory, appends, fsync=False, round_=r) for r in range(rounds)
        ]
        synced = [
            _appends_per_second(directory, appends // 20, fsync=True, round_=r)
            for r in range(rounds)
        ]
    return {
        "appends_per_second": round(statistics.median(plain)),
        "appends_per_second_max": round(max(plain)),
        "fsync_appends_per_second": round(statistics.median(synced)),
    }
