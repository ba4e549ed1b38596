r"""``PostgresSessionLog``: session logs in a PostgreSQL database (psycopg 3, synchronous API).

The schema (``dsh`` unless told otherwise), made by :func:`create_schema`::

    sessions(id bigint PRIMARY KEY, name text UNIQUE)         one row per session id
    events(session bigint, seq bigint, event text,            one row per event: its wire
           PRIMARY KEY (session, seq))                        JSON, the JSONL log's line
    meta(version integer)                                     the schema version

An event is stored as ``text``, not ``jsonb``: ``jsonb`` reorders keys and refuses some strings
the model can send, while the text is the exact line a :class:`~dsh_tools.JsonlSessionLog`
writes (lone surrogates as ``\u`` escapes, so it is valid UTF-8 without NUL).

One writer per session: a writer holds a session-level advisory lock (its key a hash of the
schema and the session id) on its own connection until it is closed; PostgreSQL releases it
when that connection ends, a killed process's included. The primary key is a fence behind the
lock: a writer that lost its lock without noticing (its connection was cut and another writer
took over) fails on the first sequence number the other one stored, instead of interleaving.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Final, Literal

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from dsh_tools import (
    BatchEndEvent,
    SessionEvent,
)
from dsh_tools._for_integrations import (
    MacChain,
    check_int,
    check_integrity_key,
    check_seconds,
    events_from_rows,
    fresh_chain,
)
from dsh_tools._for_integrations import check_session_id as check_session_text

from ._connection import (
    DEFAULT_APPEND_TIMEOUT,
    SCHEMA_VERSION,
    SessionConnection,
    check_database_on,
    lock_key,
    read_events,
)

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = [
    "DEFAULT_SCHEMA",
    "PostgresSessionLog",
    "check_conninfo",
    "check_database",
    "check_schema",
    "check_session_id",
    "create_schema",
    "describe_conninfo",
    "read_on",
    "session_state",
]

DEFAULT_SCHEMA: Final = "dsh"

_IDENTIFIER: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_CREATE_LOCK: Final = 0x64736854  # "dshT": two create_schema calls at once make it once


def _statements(schema: str) -> tuple[sql.Composed, ...]:
    name = sql.Identifier(schema)
    return (
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name),
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.sessions ("
            "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL UNIQUE)"
        ).format(name),
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.events ("
            "session bigint NOT NULL REFERENCES {}.sessions (id), seq bigint NOT NULL, "
            "event text NOT NULL, PRIMARY KEY (session, seq))"
        ).format(name, name),
        sql.SQL("CREATE TABLE IF NOT EXISTS {}.meta (version integer NOT NULL)").format(name),
    )


def create_schema(conninfo: str, *, schema: str = DEFAULT_SCHEMA) -> None:
    """Create the tables of the session logs in schema ``schema`` of the database (nothing if
    they exist): what :class:`PostgresSessionLog` needs, run once per database by someone
    allowed to create tables. Also ``python -m dsh_tools.postgres create-schema DSN``.

    Args:
        conninfo: a libpq connection string or URI (``postgresql://user@host:5432/db``).
        schema: the PostgreSQL schema (a lower-case SQL identifier).

    Raises:
        TypeError: ``conninfo`` or ``schema`` is not a ``str``.
        ValueError: ``schema`` is not a lower-case identifier, or it holds tables of another
            schema version.
        psycopg.Error: the database cannot be reached or refused a statement.
    """
    check_conninfo(conninfo)
    check_schema(schema)
    with psycopg.connect(conninfo, autocommit=True) as connection, connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
        for statement in _statements(schema):
            connection.execute(statement)
        found = connection.execute(
            sql.SQL("SELECT version FROM {}.meta").format(sql.Identifier(schema))
        ).fetchone()
        if found is None:
            connection.execute(
                sql.SQL("INSERT INTO {}.meta (version) VALUES (%s)").format(sql.Identifier(schema)),
                (SCHEMA_VERSION,),
            )
        # what every log checks when it opens (the encoding, the version): a database no log
        # could use is refused here already
        check_database_on(connection, schema, describe_conninfo(conninfo))


class PostgresSessionLog(SessionConnection):
    """A :class:`~dsh_tools.SessionLog` in a PostgreSQL database: many sessions (and many
    machines) per database, the same events and wire JSON as
    :class:`~dsh_tools.JsonlSessionLog` and :class:`~dsh_tools.SqliteSessionLog`.

    Args:
        conninfo: a libpq connection string or URI (``postgresql://user@host:5432/db``). A
            connection is opened here, so a bad address or password fails here.
        session_id: the session this log appends to and reads (any non-empty ``str`` without
            lone surrogates). An existing session is continued: its events keep their sequence
            numbers, new ones follow.
        schema: the PostgreSQL schema that :func:`create_schema` made.
        append_timeout: how long (seconds) an ``append``, or a read of this log
            (``events``, ``events_since``), may wait for the server, 5 by default; ``None``: as
            long as it takes. Past it, the connection is cut, the log
            closed, and the append raises :class:`TimeoutError` (the event may or may not be
            stored; a resume reads which). It bounds how long a stalled server freezes the trio
            loop, whose deadlines cannot fire while an append waits on its thread.
        synchronous_commit: ``True`` (the default): an event whose ``append`` returned is on
            the server's disk (it survives a crash of the server, not only of this process).
            ``False``: the server acknowledges before its write-ahead log reaches the disk
            (PostgreSQL's ``synchronous_commit = off``): a crash of this process still loses
            nothing, a crash of the server may lose the last fraction of a second of events,
            and an append waits for no disk flush (faster, the more so the busier the disk).
        append_retry: how long (seconds) an ``append`` whose connection was lost (the
            server restarted, the connection was cut) keeps reconnecting and trying again
            before it raises; ``None`` (the default): it raises at once. The new connection
            takes the session's lock again (another writer that took the session meanwhile is
            a :class:`~dsh_tools.SessionLogLockedError`), and an insert that had landed before
            the connection died is not stored twice. The calling thread waits meanwhile.
        integrity_key: a secret that makes the session tamper-evident, as for
            :class:`~dsh_tools.JsonlSessionLog`: every row carries ``"mac"``, and opening,
            reading and :meth:`read` with the key verify the chain.
        pool: a ``psycopg_pool.ConnectionPool`` (autocommit connections to the database of
            ``conninfo``) to borrow the connection from instead of opening one: :meth:`close`
            lets the session's lock go and gives the connection back (or, when the lock could
            not be let go, closes it). The database is not checked again (check it once with
            :func:`check_database`). A reconnection (``append_retry``) opens its own.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``session_id`` is empty or holds a lone surrogate, ``schema`` is not a
            lower-case identifier, the database's encoding is not UTF-8, or the schema does
            not hold session logs (run :func:`create_schema`) or holds another schema version.
        SessionLogLockedError: another writer holds this session (in this process or on any
            machine).
        psycopg.Error: the database cannot be reached.
        TypeError, ValueError: ``append_timeout`` is not a positive number of seconds or
            ``None``.

    One writer per session, any number of sessions and of readers: the writer holds a
    PostgreSQL advisory lock for its session on its own connection until :meth:`close` (it is
    also a context manager). Read a session someone else is writing with :meth:`read`. A log
    garbage-collected while open is closed with a ``ResourceWarning``.

    Each ``append`` is one ``INSERT`` committed on its own, on the calling thread: it blocks
    the trio loop for one round trip to the server (and, with ``synchronous_commit=True``, for
    the server's flush of its write-ahead log), never longer than ``append_timeout``. A
    failed insert stores nothing. If the
    connection is lost, ``append`` raises ``psycopg.OperationalError`` and so does every later
    one: the lock went with the connection, so open a new log (which continues the session).
    """

    __slots__ = ()

    def __init__(
        self,
        conninfo: str,
        session_id: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        synchronous_commit: bool = True,
        append_timeout: float | None = DEFAULT_APPEND_TIMEOUT,
        integrity_key: bytes | None = None,
        append_retry: float | None = None,
        pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] | None = None,
    ) -> None:
        self._closed = True  # until the connection is open and the session locked
        self._connection = None
        self._pool = pool
        self._borrowed = None
        check_conninfo(conninfo)
        check_session_id(session_id)
        self._integrity_key = check_integrity_key(integrity_key)
        check_schema(schema)
        if not isinstance(synchronous_commit, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"synchronous_commit must be a bool, not {synchronous_commit!r}")
        self._append_timeout = _check_timeout(append_timeout)
        self._append_retry = (
            None if append_retry is None else check_seconds("append_retry", append_retry)
        )
        self._conninfo = conninfo
        self._synchronous_commit = synchronous_commit
        self._place = describe_conninfo(conninfo)
        self._session_id = session_id
        self._schema = schema
        self._lock = lock_key(schema, session_id)
        self._insert_sql = sql.SQL(
            "INSERT INTO {}.events (session, seq, event) VALUES (%s, %s, %s)"
        ).format(sql.Identifier(schema))
        # a pooled connection the server dropped (a restart) fails its first statement: the
        # next one of the pool is tried (the pool drops the dead one)
        tries = 1 if pool is None else 3
        while True:
            tries -= 1
            try:
                connection, row = self._open(pool)
            except psycopg.OperationalError:
                if tries == 0:
                    raise
            else:
                break
        assert row is not None  # the row was inserted above, or was there
        key, next_seq = row
        assert isinstance(key, int)
        assert isinstance(next_seq, int)
        try:
            self._opened_session(connection, key, next_seq)
        except BaseException:
            self._give_back()
            raise

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the log."""
        return self._schema

    def events_since(self, since: int) -> list[SessionEvent]:
        """The session's events from sequence number ``since``, in order: what
        :meth:`events` returns from that point, at the cost of what it returns (an unkeyed
        log; a keyed one is read whole with :meth:`events`).

        Raises:
            ValueError: ``since`` is negative, or the log is keyed and ``since`` is not 0.
            RuntimeError: the log is closed.
            TimeoutError: the server did not answer within ``append_timeout`` (the log is then
                closed), as :meth:`events` does.
        """
        since = _check_since(since, self._integrity_key)
        if since == 0:
            return self.events()
        if self._connection is None:
            raise RuntimeError(f"{self._describe()}: the log is closed")
        return self._read_chained(None, since)

    @staticmethod
    def read(
        conninfo: str,
        session_id: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        integrity_key: bytes | None = None,
        since: int = 0,
    ) -> list[SessionEvent]:
        """Read every event of session ``session_id`` from sequence number ``since`` (0: the
        first), in order, without writing or locking: safe while a writer (on this machine or
        another) appends. A read from a later event costs what it returns, not the session's
        length. With ``integrity_key``, every event is verified
        (:class:`~dsh_tools.SessionLogIntegrityError` at the first bad one; a keyed log is
        read from its first event).

        Raises:
            LookupError: the database holds no session ``session_id``.
            ValueError: the schema does not hold session logs (or another version of them).
            SessionLogCorruptError: a stored event is not an event.
            psycopg.Error: the database cannot be reached.
        TypeError, ValueError: ``append_timeout`` is not a positive number of seconds or
            ``None``.
        """
        check_conninfo(conninfo)
        check_session_id(session_id)
        check_schema(schema)
        key_bytes = check_integrity_key(integrity_key)
        since = _check_since(since, key_bytes)
        chain = fresh_chain(key_bytes)
        place = describe_conninfo(conninfo)
        with psycopg.connect(conninfo, autocommit=True) as connection:
            check_database_on(connection, schema, place)
            return read_on(
                connection, session_id, schema=schema, place=place, since=since, chain=chain
            )

    def _describe(self) -> str:
        return f"{self._place} schema {self._schema!r} session {self._session_id!r}"


def describe_conninfo(conninfo: str) -> str:
    """The database ``conninfo`` names, for messages: host, port, database and user, never
    the password.
    """
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "postgresql (an unreadable connection string)"
    shown = ("host", "port", "dbname", "user")
    return "postgresql " + " ".join(f"{key}={parts[key]}" for key in shown if key in parts)


def session_state(
    connection: psycopg.Connection[tuple[object, ...]], schema: str, session_id: str
) -> Literal["held", "orphaned", "idle"]:
    """Whether a writer holds the session's lock (``"held"``), or its last batch is open (its
    last event is not a ``batch/end``) while no writer holds it (``"orphaned"``: the writer
    that ran it is gone, it died or lost its connection), or neither (``"idle"``). Nothing is
    locked to ask (``pg_locks`` is read), so no writer ever waits for the question. A writer
    appends its ``batch/end`` before it lets the lock go, so a batch that ended normally is
    never orphaned.
    """
    key = lock_key(schema, session_id) & 0xFFFF_FFFF_FFFF_FFFF
    name = sql.Identifier(schema)
    row = connection.execute(
        sql.SQL(
            "SELECT e.seq, e.event, EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
            "AND granted AND database = (SELECT oid FROM pg_database WHERE datname = "
            "current_database()) AND classid = %s::bigint::oid AND objid = %s::bigint::oid "
            "AND objsubid = 1) FROM {}.sessions s, LATERAL (SELECT seq, event FROM {}.events "
            "WHERE session = s.id ORDER BY seq DESC LIMIT 1) e WHERE s.name = %s"
        ).format(name, name),
        (key >> 32, key & 0xFFFF_FFFF, session_id),
    ).fetchone()
    if row is None:
        return "idle"
    if row[2] is True:
        return "held"
    seq, event = row[0], row[1]
    assert isinstance(seq, int)
    last = events_from_rows([(seq, event)], f"session {session_id!r}", None, seq)
    return "idle" if isinstance(last[-1], BatchEndEvent) else "orphaned"


def check_conninfo(conninfo: object) -> None:
    if not isinstance(conninfo, str):
        raise TypeError(f"conninfo must be a str, not {type(conninfo).__name__}")


def _check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"append_timeout must be a number of seconds or None, not {timeout!r}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"append_timeout must be a finite number of seconds > 0, not {timeout!r}")
    return float(timeout)


def check_schema(schema: object) -> None:
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a str, not {type(schema).__name__}")
    if not _IDENTIFIER.fullmatch(schema):
        raise ValueError(
            f"schema must be a lower-case SQL identifier (letters, digits, _), not {schema!r}"
        )


def check_session_id(session_id: object) -> str:
    """A session log's check of ``session_id``, and PostgreSQL's own: no NUL character.

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, a lone surrogate, or a NUL character.
    """
    checked = check_session_text(session_id)
    if "\0" in checked:
        raise ValueError(
            f"session_id must not hold NUL characters (PostgreSQL text cannot): {checked!r}"
        )
    return checked


def check_database(
    conninfo: str, *, schema: str = DEFAULT_SCHEMA, connect_timeout: int = 10
) -> None:
    """Check that the session logs of ``schema`` can be used in the database: it answers
    within ``connect_timeout`` seconds, its encoding is UTF-8, the schema exists at this
    version. What a worker checks before it serves.

    Raises:
        TypeError, ValueError: a bad argument, or a database no log could use (the reason and
            the command that fixes it).
        ConnectionError: the database cannot be reached (its address, without the password,
            and libpq's reason).
    """
    check_conninfo(conninfo)
    check_schema(schema)
    place = describe_conninfo(conninfo)
    try:
        with psycopg.connect(
            conninfo, autocommit=True, connect_timeout=connect_timeout
        ) as connection:
            check_database_on(connection, schema, place)
    except psycopg.OperationalError as exc:
        raise ConnectionError(
            f"cannot reach the session logs' database {place}: {str(exc).strip()}"
        ) from exc


def read_on(
    connection: psycopg.Connection[tuple[object, ...]],
    session_id: str,
    *,
    schema: str,
    place: str,
    since: int = 0,
    chain: MacChain | None = None,
) -> list[SessionEvent]:
    """:meth:`PostgresSessionLog.read` on an open (autocommit) connection, e.g. a pool's;
    ``place`` names the database in messages.

    Raises:
        LookupError: the database holds no session ``session_id``.
        SessionLogCorruptError: a stored event is not an event.
        psycopg.Error: the connection failed.
    """
    row = connection.execute(
        sql.SQL("SELECT id FROM {}.sessions WHERE name = %s").format(sql.Identifier(schema)),
        (session_id,),
    ).fetchone()
    if row is None:
        raise LookupError(f"{place}: no session {session_id!r} in schema {schema!r}")
    key = row[0]
    assert isinstance(key, int)
    return read_events(connection, schema, key, f"{place} (session {session_id!r})", chain, since)


def _check_since(since: object, integrity_key: bytes | None) -> int:
    since = check_int("since", since, least=0)
    if since and integrity_key is not None:
        raise ValueError(
            "a keyed log is verified from its first event: read it with since=0 (the MAC chain "
            "of a later event vouches for every earlier one)"
        )
    return since
