"""Following a session as it is written: :func:`subscribe`.

A subscriber reads the log itself, from where it left off, so it never holds a writer back
and never misses an event: an append wakes the subscribers of that log object (in this
process) at once, and a log another process writes is read again every ``poll_interval``
seconds.
"""

from __future__ import annotations

import os
import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import cast

import trio

from dsh_tools._values._checks import check_seconds

from ._events import SessionEvent
from ._jsonl import read_session_log
from ._log import SessionLog, check_session_log, wait_appended
from ._sqlite import SqliteSessionLog

__all__ = ["subscribe"]

_SQLITE_HEADER = b"SQLite format 3\x00"

_Read = Callable[[], list[SessionEvent] | None]


def subscribe(
    source: SessionLog | str | os.PathLike[str] | Callable[[], list[SessionEvent]],
    *,
    session_id: str = "default",
    poll_interval: float = 0.2,
) -> AsyncIterator[SessionEvent]:
    """Every event of a session, in order: those it holds now, then each one as it is
    appended, for as long as the caller iterates (cancel its scope, or stop, to end it).

    ``source`` is what to follow:

    - a session log object (any kind): its appends in this process wake the subscriber at once;
      a stored log is also read again every ``poll_interval`` seconds;
    - the path of a JSON Lines or SQLite log (session ``session_id``) that another process
      writes: read again every ``poll_interval`` seconds (a torn last line waits for its end);
    - a callable that returns the whole log (``lambda: PostgresSessionLog.read(dsn, sid)``).

    A slow subscriber never blocks the writer and misses nothing: it reads the log itself, from
    where it left off (a run of progress reports arrives as the log holds them). Use it from
    another task than the one that runs the batch::

        async for event in subscribe(session):
            show(event)

    Each step is a checkpoint. The iterator holds nothing to close: stop iterating at any time.

    Raises:
        TypeError: ``source`` is none of the above, or ``poll_interval`` not a number.
        ValueError: ``poll_interval`` is not a positive finite number.
    """
    interval = check_seconds("poll_interval", poll_interval)
    read, wake = _reader(source, session_id)
    return _Subscription(read, wake, interval)


class _Subscription:
    """The iterator :func:`subscribe` returns (a plain async iterator: nothing to finalize)."""

    __slots__ = ("_interval", "_pending", "_read", "_seen", "_wake")

    def __init__(self, read: _Read, wake: object | None, interval: float) -> None:
        self._read = read
        self._wake = wake
        self._interval = interval
        self._seen = 0
        self._pending: deque[SessionEvent] = deque()

    def __aiter__(self) -> _Subscription:
        return self

    async def __anext__(self) -> SessionEvent:
        await trio.lowlevel.checkpoint()
        while not self._pending:
            events = self._read()
            if events is not None:  # None: not readable right now, as if nothing was appended
                if len(events) < self._seen:
                    self._seen = 0  # the log was replaced: follow it from its start
                self._pending.extend(events[self._seen :])
                self._seen = len(events)
                if self._pending:
                    break
            if self._wake is None:
                await trio.sleep(self._interval)
            else:
                with trio.move_on_after(self._interval):  # a stored log may be written elsewhere
                    await wait_appended(self._wake)
        return self._pending.popleft()


def _reader(
    source: SessionLog | str | os.PathLike[str] | Callable[[], list[SessionEvent]],
    session_id: str,
) -> tuple[_Read, object | None]:
    if isinstance(source, str | os.PathLike):
        path = Path(cast("str | os.PathLike[str]", source))

        def read_path() -> list[SessionEvent] | None:
            try:
                with path.open("rb") as file:
                    header = file.read(len(_SQLITE_HEADER))
            except FileNotFoundError:
                return []  # not written yet
            if header == _SQLITE_HEADER:
                try:
                    return SqliteSessionLog.read(path, session_id)
                except LookupError:
                    return []  # the session has no event yet
                except sqlite3.OperationalError:
                    return None  # busy (another process is creating it): the next poll reads
            return read_session_log(path)

        return read_path, None
    if callable(getattr(source, "events", None)) and callable(getattr(source, "append", None)):
        log = check_session_log(source)
        assert log is not None
        return log.events, log
    if callable(source):
        return source, None
    raise TypeError(
        "subscribe() follows a session log, the path of a JSON Lines or SQLite log, or a "
        f"callable that reads a log, not {type(source).__name__}"
    )
