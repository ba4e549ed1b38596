"""A session log: the protocol every log meets, the checks of a log and of a session id, and
:class:`SessionLogBase`, the lifecycle every stored log shares.

Appends are synchronous on purpose: the scheduler appends on its one lane, in model order,
and a synchronous ``append`` cannot interleave with another lane step or be cancelled halfway
(a half-appended event would be worse than a late one). A store therefore blocks the trio
thread for one small write per event, as a logging handler would.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Final, Protocol, Self, cast, runtime_checkable

import trio

from ._events import SessionEvent, check_event
from ._wire import MacChain, event_line

__all__ = [
    "SessionLog",
    "SessionLogBase",
    "MAX_SESSION_ID_BYTES",
    "SessionRowsLog",
    "check_session_id",
    "check_integrity_key",
    "check_session_log",
    "fresh_chain",
    "notify_appended",
    "wait_appended",
]


@runtime_checkable
class SessionLog(Protocol):
    """Where the scheduler records a batch. Both methods are synchronous (see the module
    docs for why).
    """

    def append(self, event: SessionEvent, /) -> int:
        """Store ``event`` durably and return its sequence number (0-based, append order)."""
        ...

    def events(self) -> list[SessionEvent]:
        """Every stored event, in append order (a fresh list)."""
        ...


def check_session_id(session_id: object) -> str:
    """``session_id`` if it names a session in a log that keys rows by it: a non-empty ``str``
    of Unicode text (no lone surrogate) of at most :data:`MAX_SESSION_ID_BYTES` bytes in
    UTF-8, the same rule for every log kind (a database would refuse a longer key only after a
    round trip, in its own words).

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, longer than the limit, or it holds a lone surrogate.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a non-empty str, not {session_id!r}")
    if not session_id:
        raise ValueError("session_id must be a non-empty str, not ''")
    try:
        size = len(session_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            f"session_id must be Unicode text, not {session_id[:40]!r}... (a lone surrogate)"
            if len(session_id) > 40
            else f"session_id must be Unicode text, not {session_id!r} (a lone surrogate)"
        ) from None
    if size > MAX_SESSION_ID_BYTES:
        raise ValueError(
            f"session_id must be at most {MAX_SESSION_ID_BYTES} bytes in UTF-8, not {size} "
            f"({session_id[:40]!r}...)"
        )
    return session_id


MAX_SESSION_ID_BYTES: Final = 1024
"""The longest session id, in UTF-8 bytes (PostgreSQL indexes keys up to about 2,700)."""


def check_session_log(session: object, *, optional: bool = False) -> SessionLog | None:
    """``session`` if it is a session log (it has ``append`` and ``events``): the one check of
    a log every entry point makes. ``optional``: ``None`` is accepted too.

    Raises:
        TypeError: it is not (``session must be a SessionLog (with append and events)[ or
            None], not <type>``).
    """
    if session is None and optional:
        return None
    if not (
        callable(getattr(session, "append", None)) and callable(getattr(session, "events", None))
    ):
        either = " or None" if optional else ""
        raise TypeError(
            f"session must be a SessionLog (with append and events){either}, "
            f"not {type(session).__name__}"
        )
    return cast(SessionLog, session)


def check_integrity_key(key: object) -> bytes | None:
    """``key`` if it can key a log's MAC chain: ``None`` (no chain) or non-empty ``bytes``.

    Raises:
        TypeError: not ``bytes`` (a ``str`` too: encode it, or better, use random bytes).
        ValueError: empty.
    """
    if key is None:
        return None
    if type(key) is not bytes:
        raise TypeError(
            f"integrity_key must be bytes (32 random bytes, say) or None, not {type(key).__name__}"
        )
    if not key:
        raise ValueError("integrity_key must not be empty")
    return key


def fresh_chain(key: bytes | None) -> MacChain | None:
    """A chain that starts at a log's first event (reading the log again from the start)."""
    return None if key is None else MacChain(key)


# the subscribers waiting for the next append of a log object, by its id (see _follow): an
# append only looks the dict up, and only when someone waits at all
_WAITING: Final[dict[int, trio.Event]] = {}


def notify_appended(log: object) -> None:
    """Wake the subscribers waiting for an append to ``log`` (every log calls it after one)."""
    if not _WAITING:
        return
    event = _WAITING.pop(id(log), None)
    if event is not None:
        with contextlib.suppress(RuntimeError):  # an append made outside trio: a poll finds it
            event.set()


async def wait_appended(log: object) -> None:
    """Wait until ``log`` (this object, in this process) is appended to."""
    event = _WAITING.get(id(log))
    if event is None:
        event = _WAITING[id(log)] = trio.Event()
    await event.wait()


class SessionLogBase:
    """The lifecycle every stored session log shares: the closed state, the context manager,
    the ``ResourceWarning`` of a log garbage-collected while open, the ``repr``, and the
    append template (check the event, refuse a closed log, store it under the next sequence
    number, count it).

    A store implements four methods and nothing else of the lifecycle: :meth:`_store` (write
    one event's line under a sequence number; raise, with nothing stored, when it cannot),
    :meth:`_read` (every event, in order), :meth:`_release` (free the file, connection and
    lock; called once, by :meth:`close`) and :meth:`_describe` (where the log is, for
    messages). Its ``__init__`` sets ``_closed = True`` first (so that a constructor that
    fails leaves nothing for ``__del__``), opens and locks, then calls :meth:`_opened`.
    """

    __slots__ = ("_chain", "_closed", "_next_seq")

    _closed: bool
    _next_seq: int
    _chain: MacChain | None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (no more appends; the lock is released)."""
        return self._closed

    def _opened(self, next_seq: int) -> None:
        """Mark the log open, its next event numbered ``next_seq`` (the end of a store's
        ``__init__``, once it holds its file or connection and its lock, and has read its
        events: a keyed log's chain then holds the last one's MAC).
        """
        self._next_seq = next_seq
        self._closed = False

    def append(self, event: SessionEvent, /) -> int:
        """Store ``event`` durably and return its sequence number (0-based, append order).
        Blocks the calling thread for the write.

        Raises:
            TypeError: ``event`` is not a session event.
            ValueError: the log is closed (or, for a store that says so, refuses appends).
            OSError, or the store's database error: the event was not stored.
        """
        check_event(event)
        if self._closed:
            raise ValueError(f"append to a closed {type(self).__name__} ({self._where()})")
        seq = self._next_seq
        line = event_line(event)
        chain = self._chain
        if chain is None:
            self._store(seq, line)
        else:
            line, mac = chain.seal(line)
            self._store(seq, line)
            chain.mac = mac
        self._next_seq = seq + 1
        if _WAITING:
            notify_appended(self)
        return seq

    def events(self) -> list[SessionEvent]:
        """Every stored event, in append order (a fresh list).

        Raises:
            SessionLogCorruptError: a stored line or row is not an event.
            ValueError: the log is closed (read it with the store's own reader).
        """
        if self._closed:
            raise ValueError(f"events() of a closed {type(self).__name__} ({self._where()})")
        return self._read()

    def close(self) -> None:
        """Release the log (its file or connection, and its lock). Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        self._release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            warnings.warn(
                f"unclosed {type(self).__name__} {self._describe()}", ResourceWarning, stacklevel=2
            )
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"next_seq={self._next_seq}"
        return f"<{type(self).__name__} {self._describe()} {state}>"

    # --- what a store implements ---------------------------------------------------------

    def _store(self, seq: int, line: bytes) -> None:
        """Store one event's line (UTF-8 JSON, no newline) under ``seq``; raise with nothing
        stored.
        """
        raise NotImplementedError

    def _read(self) -> list[SessionEvent]:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def _describe(self) -> str:
        raise NotImplementedError

    def _where(self) -> str:
        """Where the log is, in the message of a refused append or read."""
        return self._describe()


class SessionRowsLog(SessionLogBase):
    """A store that keeps the events of several sessions in one database, a row per event under
    its session's key: the connection, the key, the session id, an append as one row
    (:meth:`_insert`, given the event's line as text), and the release of the
    connection (which frees the session's lock).
    """

    __slots__ = ("_connection", "_integrity_key", "_key", "_session_id")

    _connection: Any
    _key: int
    _session_id: str
    _integrity_key: bytes | None

    @property
    def session_id(self) -> str:
        """The session this log appends to."""
        return self._session_id

    def _opened_session(self, connection: Any, key: int, next_seq: int) -> None:
        """Mark the log open on ``connection``, its session's rows keyed ``key`` (a keyed log
        verifies the session's events now: its chain goes on from the last one's MAC).

        Raises:
            SessionLogIntegrityError: with a key, a stored event the chain does not vouch for
                (the connection is closed).
        """
        self._key = key
        self._connection = connection
        chain = fresh_chain(self._integrity_key)
        if chain is not None:
            try:
                self._read_chained(chain)
            except BaseException:
                self._connection = None
                connection.close()
                raise
        self._chain = chain
        self._opened(next_seq)

    def _read(self) -> list[SessionEvent]:
        return self._read_chained(fresh_chain(self._integrity_key))

    def _read_chained(self, chain: MacChain | None) -> list[SessionEvent]:
        """Every event of the session, verified with ``chain`` when it is not ``None``."""
        raise NotImplementedError

    def _store(self, seq: int, line: bytes) -> None:
        self._insert(self._connection, seq, line.decode("utf-8"))

    def _insert(self, connection: Any, seq: int, text: str) -> None:
        """Store one event's row (``connection``: the open one); raise with nothing stored."""
        raise NotImplementedError

    def _release(self) -> None:
        connection = self._connection
        self._connection = None
        if connection is not None:
            connection.close()
