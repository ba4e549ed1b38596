"""``SqliteSessionLog``: session logs in one SQLite file (stdlib :mod:`sqlite3`, WAL).

The file holds many sessions. Its schema::

    dsh_sessions(id INTEGER PRIMARY KEY, name TEXT UNIQUE)       one row per session id
    dsh_events(session INTEGER, seq INTEGER, event TEXT,         one row per event: its wire
               PRIMARY KEY (session, seq)) WITHOUT ROWID         JSON, the JSONL log's line

and ``PRAGMA application_id`` marks it as a dsh-tools log (``user_version`` is the schema
version). The primary key is the only index: an append is one small insert in its own
transaction.

One writer per session: a writer holds an exclusive ``fcntl.flock`` on a small lock file for
its session (in the directory ``<file>-locks`` next to the database, named by a hash of the
session id) until it is closed. ``flock`` belongs to the open file, not the process, so a
second writer in the same process is refused too, and it never touches the locks SQLite itself
takes on the database.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Final, Literal

from dsh_tools._errors import SessionLogLockedError

from ._events import SessionEvent
from ._log import SessionRowsLog, check_integrity_key, check_session_id, fresh_chain
from ._wire import MacChain, events_from_rows

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["SqliteSessionLog"]

APPLICATION_ID: Final = 0x64736854  # "dshT"
"""``PRAGMA application_id`` of a dsh-tools session log."""

SCHEMA_VERSION: Final = 1

BUSY_TIMEOUT_MS: Final = 10_000
"""How long a statement waits for another connection's write (another session's writer in the
same file commits one small insert; a reader never blocks a writer in WAL mode)."""

_SCHEMA: Final = (
    "CREATE TABLE dsh_sessions (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
    "CREATE TABLE dsh_events ("
    "session INTEGER NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, "
    "PRIMARY KEY (session, seq)) WITHOUT ROWID",
    f"PRAGMA application_id = {APPLICATION_ID}",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)

_SYNCHRONOUS: Final = ("normal", "full")


class SqliteSessionLog(SessionRowsLog):
    """A :class:`~dsh_tools.SessionLog` in an SQLite database: many sessions in one file, the
    same events and wire JSON as :class:`~dsh_tools.JsonlSessionLog`.

    Args:
        path: the database file. It is opened (created, with its schema, if missing) here, so
            a bad path fails here. An existing session is continued: its events keep their
            sequence numbers, new ones follow.
        session_id: the session this log appends to and reads (any non-empty ``str`` without
            lone surrogates).
        synchronous: ``"normal"`` (the default): every event whose ``append`` returned
            survives a crash of the process (``SIGKILL`` included). ``"full"``: it also
            survives a power loss (SQLite syncs the write-ahead log on every commit).
        integrity_key: a secret that makes the session tamper-evident, as for
            :class:`~dsh_tools.JsonlSessionLog`: every row carries ``"mac"``, and opening,
            reading and :meth:`read` with the key verify the chain
            (:class:`~dsh_tools.SessionLogIntegrityError` at the first bad event).

    Raises:
        TypeError: ``session_id`` is not a ``str`` or ``synchronous`` not a ``str``.
        ValueError: ``session_id`` is empty or holds a lone surrogate, ``synchronous`` is neither ``"normal"`` nor
            ``"full"``, or the file is not a dsh-tools session log (not an SQLite database,
            a database of another application, or a schema version this version does not
            know).
        SessionLogLockedError: another writer holds this session of this file.
        OSError: the file (or its lock directory) cannot be opened or created.

    One writer per session, any number of sessions per file and of readers: the writer holds
    an exclusive lock on its session until :meth:`close` (it is also a context manager); a
    second writer of the same session, in this process or another, gets
    :class:`~dsh_tools.SessionLogLockedError`, while writers of other sessions of the file
    append alongside it. Read a session someone else is writing with :meth:`read`. A log
    garbage-collected while open is closed with a ``ResourceWarning``. Needs ``fcntl.flock``
    (POSIX): constructing one raises ``NotImplementedError`` elsewhere.

    A writer that finds its next sequence number taken (another writer got in: the lock
    directory was deleted while it held it) raises :class:`~dsh_tools.SessionLogLockedError`
    and is closed. Each ``append`` is one ``INSERT`` in its own transaction, on the calling
    thread: it blocks
    the trio loop for that insert (and, every few thousand events, for SQLite's automatic
    checkpoint of the write-ahead log). A failed insert (a full disk) rolls back whole, so no
    partial event is ever stored and the log stays usable. A statement that finds another
    session's writer committing waits for it, up to 10 seconds, then fails with
    ``sqlite3.OperationalError``.
    """

    __slots__ = ("_lock", "_path")

    _path: Path
    _connection: sqlite3.Connection | None
    _lock: int | None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str = "default",
        synchronous: Literal["normal", "full"] = "normal",
        integrity_key: bytes | None = None,
    ) -> None:
        self._closed = True  # until the database is open and the session locked
        self._connection = None
        self._lock = None
        check_session_id(session_id)
        self._integrity_key = check_integrity_key(integrity_key)
        if not isinstance(synchronous, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f'synchronous must be "normal" or "full", not {synchronous!r}')
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(f'synchronous must be "normal" or "full", not {synchronous!r}')
        self._path = Path(path)
        self._session_id = session_id
        if not self._path.parent.is_dir():
            raise FileNotFoundError(f"no directory {self._path.parent} for the session log")
        connection = _connect(self._path, read_only=False)
        try:
            _check_format(connection, self._path)  # before a lock file is made for a foreign file
            self._lock = _lock_session(self._path, session_id)
            connection.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            _prepare(connection, self._path)
            connection.execute(
                "INSERT OR IGNORE INTO dsh_sessions (name) VALUES (?)", (session_id,)
            )
            key, next_seq = connection.execute(
                "SELECT s.id, (SELECT COALESCE(MAX(seq) + 1, 0) FROM dsh_events "
                "WHERE session = s.id) FROM dsh_sessions s WHERE s.name = ?",
                (session_id,),
            ).fetchone()
        except BaseException:
            connection.close()
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None
            raise
        try:
            self._opened_session(connection, key, next_seq)
        except BaseException:  # a keyed session that fails its check: the lock goes too
            lock, self._lock = self._lock, None
            os.close(lock)
            raise

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def _insert(self, connection: sqlite3.Connection, seq: int, text: str) -> None:
        try:
            connection.execute(
                "INSERT INTO dsh_events (session, seq, event) VALUES (?, ?, ?)",
                (self._key, seq, text),
            )
        except sqlite3.IntegrityError:
            # another writer of the session took this seq: its lock was bypassed (the lock
            # directory deleted under us, say); this writer is out, as a refused one would be
            self.close()
            raise SessionLogLockedError(
                str(self._path), self._session_id, log_class="SqliteSessionLog"
            ) from None

    def _read_chained(self, chain: MacChain | None) -> list[SessionEvent]:
        connection = self._connection
        assert connection is not None
        return _read_events(connection, self._key, self._describe(), chain)

    @staticmethod
    def read(
        path: str | os.PathLike[str],
        session_id: str = "default",
        *,
        integrity_key: bytes | None = None,
    ) -> list[SessionEvent]:
        """Read every event of session ``session_id`` of the database at ``path``, in order,
        without writing or locking: safe while a writer (in this process or another) appends.
        With ``integrity_key``, every event is verified (a keyed log reads without it too,
        unchecked).

        Raises:
            FileNotFoundError: there is no such file.
            LookupError: the file holds no session ``session_id``.
            ValueError: the file is not a dsh-tools session log.
            SessionLogCorruptError: a stored event is not an event.
            SessionLogIntegrityError: with a key, an event the chain does not vouch for.
        """
        check_session_id(session_id)
        chain = fresh_chain(check_integrity_key(integrity_key))
        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"no session log at {file}")
        connection = _connect(file, read_only=True)
        try:
            _check_format(connection, file)
            if not _has_schema(connection):
                raise LookupError(f"{file}: no session {session_id!r} (the log is empty)")
            row = connection.execute(
                "SELECT id FROM dsh_sessions WHERE name = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise LookupError(f"{file}: no session {session_id!r}")
            return _read_events(connection, row[0], f"{file} (session {session_id!r})", chain)
        finally:
            connection.close()

    def _release(self) -> None:
        lock = self._lock
        self._lock = None
        try:
            super()._release()
        finally:
            if lock is not None:
                os.close(lock)

    def _describe(self) -> str:
        return f"{str(self._path)!r} session {self._session_id!r}"


def _lock_session(path: Path, session_id: str) -> int:
    if fcntl is None:  # pragma: no cover - Windows
        raise NotImplementedError("SqliteSessionLog needs fcntl.flock (a POSIX system)")
    real = path.resolve()  # one lock directory however the file is named (a symlink, "..")
    directory = real.parent / f"{real.name}-locks"
    directory.mkdir(exist_ok=True)
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:32]
    handle = os.open(directory / f"{digest}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        raise SessionLogLockedError(str(path), session_id, log_class="SqliteSessionLog") from None
    except BaseException:
        os.close(handle)
        raise
    return handle


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    if read_only:
        uri = f"{path.resolve().as_uri()}?mode=ro"
        connection = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    else:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return connection


def _check_format(connection: sqlite3.Connection, path: Path) -> None:
    """Raise ``ValueError`` unless the database is empty or a dsh-tools log of a known schema."""
    try:
        application_id = connection.execute("PRAGMA application_id").fetchone()[0]
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = connection.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
    except sqlite3.OperationalError:
        raise  # the file is busy or cannot be opened now (another process is creating it)
    except sqlite3.DatabaseError as exc:
        raise ValueError(
            f"{path} is not a dsh-tools session log (not an SQLite database: {exc})"
        ) from exc
    if application_id == 0 and tables == 0:
        return  # a new, empty database
    if application_id != APPLICATION_ID:
        raise ValueError(
            f"{path} is not a dsh-tools session log (an SQLite database of another "
            f"application: application_id {application_id})"
        )
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{path} is a dsh-tools session log of schema version {version}; this version "
            f"of dsh-tools reads version {SCHEMA_VERSION}"
        )


def _has_schema(connection: sqlite3.Connection) -> bool:
    return connection.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def _prepare(connection: sqlite3.Connection, path: Path) -> None:
    """Check the file, switch it to WAL, and create the schema if it is new."""
    _check_format(connection, path)
    mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise OSError(f"{path}: SQLite cannot use a write-ahead log here (journal mode {mode})")
    if _has_schema(connection):
        return
    connection.execute("BEGIN IMMEDIATE")  # two processes creating one file: one creates
    try:
        _check_format(connection, path)
        if not _has_schema(connection):
            for statement in _SCHEMA:
                connection.execute(statement)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _read_events(
    connection: sqlite3.Connection, key: int, name: str, chain: MacChain | None
) -> list[SessionEvent]:
    # a text row comes back as its stored bytes, decoded (strictly) by the one reader of rows:
    # sqlite3 would otherwise fail the whole read on a row that is not UTF-8, quoting its bytes
    rows = connection.execute(
        "SELECT seq, CASE typeof(event) WHEN 'text' THEN CAST(event AS BLOB) ELSE NULL END "
        "FROM dsh_events WHERE session = ? ORDER BY seq",
        (key,),
    )
    return events_from_rows(rows, name, chain)
