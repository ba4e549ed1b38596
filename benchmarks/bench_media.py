"""What a 1 MB picture costs: through one call, and through each session log.

The picture is a 1,000,000-byte PNG (a real header, then incompressible bytes). Reported, each
the median of several rounds:

- ``call``: one ``run_tool_calls`` of a tool that returns it (no log): seconds per call, the
  peak of memory traced while the call runs (``tracemalloc``), that peak in picture sizes
  (``copies``), and whether the result holds the very bytes the body returned (``same_bytes``:
  no copy on the way).
- ``logs``: for the in-memory, JSON Lines, SQLite and PostgreSQL logs, appending the
  ``tool/result`` event that carries it and reading the log back: seconds and traced peak (and
  copies) of each. A file log writes the bytes as base64 (4/3 of their size) inside one JSON
  text, so it holds the encoded text and the line at once.

PostgreSQL uses ``DATABASE_URL`` if set, else a throwaway cluster, as ``bench_postgres`` does
(skipped, with its reason, when neither is possible). No target: the numbers say how many
copies a picture makes on its way, compared before/after a change.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import struct
import tempfile
import time
import tracemalloc
import uuid
import zlib
from collections.abc import Callable, Generator
from pathlib import Path

import trio

from benchmarks.bench_postgres import optional_database
from dsh_tools import (
    CancelSignal,
    ImageBlock,
    JsonlSessionLog,
    MemorySessionLog,
    SessionLog,
    SqliteSessionLog,
    TextBlock,
    ToolCallRequest,
    ToolRegistry,
    ToolResultEvent,
    run_tool_calls,
)

SIZE = 1_000_000


def one_megabyte_png() -> bytes:
    header = struct.pack(">IIBBBBB", 1000, 1000, 8, 2, 0, 0, 0)
    ihdr = b"IHDR" + header
    start = (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    )
    return start + os.urandom(SIZE - len(start))


def _traced(action: Callable[[], object]) -> tuple[float, int]:
    """Seconds and traced peak bytes of ``action()``."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    started = time.perf_counter()
    action()
    elapsed = time.perf_counter() - started
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak


def _summary(samples: list[tuple[float, int]]) -> dict[str, object]:
    seconds = statistics.median(s for s, _ in samples)
    peak = statistics.median(p for _, p in samples)
    return {"seconds": round(seconds, 6), "peak_bytes": int(peak), "copies": round(peak / SIZE, 2)}


def _call(picture: bytes, rounds: int) -> dict[str, object]:
    registry = ToolRegistry()

    @registry.tool
    def screenshot() -> ImageBlock:
        """A screenshot."""
        return ImageBlock(media_type="image/png", data=picture)

    calls = [ToolCallRequest(call_id="s", name="screenshot", arguments="{}")]
    held: list[object] = []

    def one() -> None:
        batch = trio.run(lambda: run_tool_calls(registry, calls, signal=CancelSignal.never()))
        held[:] = [batch.results[0].content[0]]

    samples = [_traced(one) for _ in range(rounds)]
    block = held[0]
    same = isinstance(block, ImageBlock) and block.data is picture
    return {**_summary(samples), "same_bytes": same}


def _stores(directory: Path, dsn: str | None) -> Generator[tuple[str, Callable[[], SessionLog]]]:
    yield "memory", MemorySessionLog
    yield "jsonl", lambda: JsonlSessionLog(directory / f"{uuid.uuid4()}.jsonl")
    yield "sqlite", lambda: SqliteSessionLog(directory / f"{uuid.uuid4()}.db")
    if dsn is not None:
        from dsh_tools.postgres import PostgresSessionLog

        yield "postgres", lambda: PostgresSessionLog(dsn, f"media-{uuid.uuid4()}")


def _log(opener: Callable[[], SessionLog], picture: bytes, rounds: int) -> dict[str, object]:
    event = ToolResultEvent(
        turn=0,
        step=0,
        call_id="s",
        content=(TextBlock(text="the screen"), ImageBlock(media_type="image/png", data=picture)),
        is_error=False,
    )
    appends: list[tuple[float, int]] = []
    reads: list[tuple[float, int]] = []
    for _ in range(rounds):
        log = opener()
        try:
            appends.append(_traced(lambda log=log: log.append(event)))
            reads.append(_traced(log.events))
            assert log.events() == [event]
        finally:
            close = getattr(log, "close", None)
            if close is not None:
                close()
    return {"append": _summary(appends), "read": _summary(reads)}


def run(quick: bool) -> dict[str, object]:
    rounds = 3 if quick else 7
    picture = one_megabyte_png()
    logs: dict[str, object] = {}
    with contextlib.ExitStack() as stack:
        dsn = optional_database(stack, "media")
        if dsn is None:
            logs["postgres"] = {"skipped": "no PostgreSQL here"}
        with tempfile.TemporaryDirectory() as directory:
            for name, opener in _stores(Path(directory), dsn):
                logs[name] = _log(opener, picture, rounds)
    return {
        "picture_bytes": SIZE,
        "rounds": rounds,
        "call": _call(picture, rounds),
        "logs": logs,
    }
