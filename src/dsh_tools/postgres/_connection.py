"""The connection half of :class:`~dsh_tools.postgres.PostgresSessionLog`: opening a session
(its lock taken, every statement bounded, a pooled connection given back), the insert that
reconnects across a lost connection, the bounded read, and the release.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
from typing import TYPE_CHECKING, Final, NoReturn

import psycopg
from psycopg import sql

from dsh_tools import SessionEvent, SessionLogLockedError
from dsh_tools._for_integrations import MacChain, SessionRowsLog, events_from_rows

from ._watchdog import WATCHDOG

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = [
    "DEFAULT_APPEND_TIMEOUT",
    "SCHEMA_VERSION",
    "SessionConnection",
    "check_database_on",
    "lock_key",
    "read_events",
]

logger: Final = logging.getLogger("dsh_tools.postgres")

SCHEMA_VERSION: Final = 1

DEFAULT_APPEND_TIMEOUT: Final = 5.0
"""How long (seconds) an append may wait for the server before its connection is cut."""


class SessionConnection(SessionRowsLog):
    """A session log's connection to PostgreSQL (the base of
    :class:`~dsh_tools.postgres.PostgresSessionLog`, which sets these attributes and opens it
    with :meth:`_open`).
    """

    __slots__ = (
        "_append_retry",
        "_append_timeout",
        "_borrowed",
        "_conninfo",
        "_insert_sql",
        "_lock",
        "_place",
        "_pool",
        "_schema",
        "_synchronous_commit",
    )

    _append_retry: float | None
    _append_timeout: float | None
    _borrowed: psycopg.Connection[tuple[object, ...]] | None
    _conninfo: str
    _insert_sql: sql.Composed
    _lock: int
    _place: str
    _pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] | None
    _schema: str
    _synchronous_commit: bool
    _connection: psycopg.Connection[tuple[object, ...]] | None

    def _open(
        self, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] | None
    ) -> tuple[psycopg.Connection[tuple[object, ...]], tuple[object, ...] | None]:
        """A connection holding the session's lock, and the session's key and next sequence
        number; every statement bounded by ``append_timeout`` (the watchdog cuts a stalled
        server's connection: ``TimeoutError``).
        """
        timeout = self._append_timeout
        if pool is None:
            connect_timeout = 0 if timeout is None else max(2, math.ceil(timeout))
            connection = psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=connect_timeout
            )
        else:
            connection = self._borrowed = pool.getconn()
        token = None if timeout is None else WATCHDOG.arm(connection.pgconn.socket, timeout)
        try:
            if pool is None:
                check_database_on(connection, self._schema, self._place)
            self._take_session(connection)
            name = sql.Identifier(self._schema)
            connection.execute(
                sql.SQL("INSERT INTO {}.sessions (name) VALUES (%s) ON CONFLICT DO NOTHING").format(
                    name
                ),
                (self._session_id,),
            )
            row = connection.execute(
                sql.SQL(
                    "SELECT s.id, (SELECT COALESCE(MAX(seq) + 1, 0) FROM {}.events "
                    "WHERE session = s.id) FROM {}.sessions s WHERE s.name = %s"
                ).format(name, name),
                (self._session_id,),
            ).fetchone()
        except BaseException:
            cut = token is not None and WATCHDOG.disarm(token)
            connection.close()
            self._give_back()
            if cut:
                self._timed_out_opening(timeout)
            raise
        if token is not None and WATCHDOG.disarm(token):
            # the statements returned as the deadline passed: the connection is cut anyway
            connection.close()
            self._give_back()
            self._timed_out_opening(timeout)
        return connection, row

    def _take_session(self, connection: psycopg.Connection[tuple[object, ...]]) -> None:
        """Take the session's lock on ``connection`` (and set its commit mode).

        Raises:
            SessionLogLockedError: another writer holds the session.
        """
        locked = connection.execute("SELECT pg_try_advisory_lock(%s)", (self._lock,)).fetchone()
        if locked is None or locked[0] is not True:
            raise SessionLogLockedError(
                self._place, self._session_id, log_class="PostgresSessionLog"
            )
        if not self._synchronous_commit:
            connection.execute("SET synchronous_commit = off")

    def _timed_out_opening(self, timeout: float | None) -> NoReturn:
        raise TimeoutError(
            f"{self._place} session {self._session_id!r}: the server did not answer opening the "
            f"log within {timeout:g} s (append_timeout), so the connection was cut"
        )

    def _give_back(self) -> None:
        """The borrowed connection back to its pool (which drops it if it is closed)."""
        borrowed, self._borrowed = self._borrowed, None
        if borrowed is not None and self._pool is not None:
            self._pool.putconn(borrowed)

    def _release(self) -> None:
        # the session's lock is let go before the connection closes: the server ends a closed
        # connection's backend (and frees its locks) a moment after close() returns, and a log
        # opened right after must find the session free
        connection = self._connection
        unlocked = False
        if connection is not None and not connection.closed:
            # bounded as an append is: a stalled server never holds close() up
            timeout = self._append_timeout or DEFAULT_APPEND_TIMEOUT
            token = WATCHDOG.arm(connection.pgconn.socket, timeout)
            try:
                with contextlib.suppress(psycopg.Error):
                    row = connection.execute(
                        "SELECT pg_advisory_unlock(%s)",
                        (self._lock,),
                    ).fetchone()
                    unlocked = row is not None and row[0] is True
                    if unlocked and not self._synchronous_commit and self._pool is not None:
                        connection.execute("RESET synchronous_commit")
            finally:
                if WATCHDOG.disarm(token):
                    unlocked = False  # the watchdog cut it
        if connection is not None and connection is self._borrowed and unlocked:
            # the pool's connection, the lock let go: it serves the next log
            self._connection = None
            self._give_back()
            return
        super()._release()  # closes it (a lock that could not be let go goes with it)
        self._give_back()

    def _insert(
        self, connection: psycopg.Connection[tuple[object, ...]], seq: int, text: str
    ) -> None:
        retry = self._append_retry
        if retry is None:
            self._insert_once(connection, seq, text)
            return
        began = time.monotonic()
        deadline = began + retry
        pause = 0.1
        lost = False
        while True:
            current = self._connection
            assert current is not None  # an append on a closed log was refused before
            try:
                self._insert_once(current, seq, text)
            except psycopg.OperationalError as exc:
                # the connection was lost (a database restart, a cut): the event is held here
                # until the server is back, or the retry bound passes
                if time.monotonic() + pause > deadline:
                    raise  # the caller says what failed
                if not lost:
                    lost = True
                    logger.warning(
                        "%s session %r: lost the connection (%s); holding event %d and "
                        "reconnecting for up to %g s (append_retry)",
                        self._place,
                        self._session_id,
                        str(exc).partition("\n")[0],
                        seq,
                        retry,
                    )
            else:
                if lost:
                    logger.warning(
                        "%s session %r: reconnected; event %d stored after %.1f s",
                        self._place,
                        self._session_id,
                        seq,
                        time.monotonic() - began,
                    )
                return
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
            try:
                if self._reopen(seq, text):
                    logger.warning(
                        "%s session %r: reconnected; event %d had been stored before the "
                        "connection was lost",
                        self._place,
                        self._session_id,
                        seq,
                    )
                    return  # the lost insert had landed
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                continue

    def _reopen(self, seq: int, text: str) -> bool:
        """A new connection holding the session's lock again, in place of the lost one;
        whether the event ``seq`` is stored already (with this very text).

        Raises:
            SessionLogLockedError: another writer took the session meanwhile (its lock, or a
                row at ``seq`` that is not this event): this log is closed.
            psycopg.OperationalError: the server is not back yet.
        """
        lost = self._connection
        if lost is not None:
            with contextlib.suppress(psycopg.Error):
                lost.close()
        connection = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5)
        try:
            self._take_session(connection)
            row = connection.execute(
                sql.SQL("SELECT event FROM {}.events WHERE session = %s AND seq = %s").format(
                    sql.Identifier(self._schema)
                ),
                (self._key, seq),
            ).fetchone()
        except BaseException:
            connection.close()
            raise
        if row is not None and row[0] != text:
            connection.close()
            self.close()
            raise SessionLogLockedError(
                self._place, self._session_id, log_class="PostgresSessionLog"
            )
        self._connection = connection
        return row is not None

    def _insert_once(
        self, connection: psycopg.Connection[tuple[object, ...]], seq: int, text: str
    ) -> None:
        timeout = self._append_timeout
        token = None if timeout is None else WATCHDOG.arm(connection.pgconn.socket, timeout)
        try:
            connection.execute(self._insert_sql, (self._key, seq, text))
        except psycopg.OperationalError:
            if token is None or not WATCHDOG.disarm(token):
                raise
            token = None
            self._timed_out(timeout)
        except psycopg.errors.UniqueViolation:
            self.close()
            raise SessionLogLockedError(
                self._place, self._session_id, log_class="PostgresSessionLog"
            ) from None
        finally:
            if token is not None and WATCHDOG.disarm(token):
                # the insert returned as its deadline passed: the connection is cut anyway
                self._timed_out(timeout)

    def _timed_out(
        self,
        timeout: float | None,
        what: str = "an append",
        unknown: str = "; the event may or may not be stored",
    ) -> NoReturn:
        self.close()
        raise TimeoutError(
            f"{self._place} session {self._session_id!r}: the server did not answer {what} "
            f"within {timeout:g} s (append_timeout), so the connection was cut and the log "
            f"closed{unknown}. Open a new log to continue the session once the server answers"
        )

    def _read_chained(self, chain: MacChain | None, since: int = 0) -> list[SessionEvent]:
        """The session's events (from ``since``), bounded by ``append_timeout`` as an append
        is: a stalled server cuts the connection and closes the log (``TimeoutError``), so a
        worker's attempt fails and Temporal moves the batch, instead of waiting forever.
        """
        connection = self._connection
        assert connection is not None
        timeout = self._append_timeout
        token = None if timeout is None else WATCHDOG.arm(connection.pgconn.socket, timeout)
        try:
            return read_events(connection, self._schema, self._key, self._describe(), chain, since)
        except psycopg.OperationalError:
            if token is None or not WATCHDOG.disarm(token):
                raise
            token = None
            self._timed_out(timeout, "a read", "")
        finally:
            if token is not None and WATCHDOG.disarm(token):
                # the read returned as its deadline passed: the connection is cut anyway
                self._timed_out(timeout, "a read", "")


def check_database_on(
    connection: psycopg.Connection[tuple[object, ...]], schema: str, place: str
) -> None:
    encoding = connection.execute("SHOW server_encoding").fetchone()
    if encoding is None or encoding[0] != "UTF8":
        raise ValueError(
            f"{place}: the database's encoding is {encoding and encoding[0]}, not UTF8: "
            "a session log holds any Unicode text the model sends"
        )
    found = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.meta",)).fetchone()
    if found is None or found[0] is not True:
        raise ValueError(
            f"{place}: schema {schema!r} holds no session logs; create it with "
            f"`python -m dsh_tools.postgres create-schema DSN --schema {schema}`"
        )
    rows = connection.execute(
        sql.SQL("SELECT version FROM {}.meta").format(sql.Identifier(schema))
    ).fetchall()
    if rows != [(SCHEMA_VERSION,)]:
        raise ValueError(
            f"{place}: schema {schema!r} holds session logs of schema version "
            f"{[row[0] for row in rows]}; this version of dsh-tools reads version "
            f"{SCHEMA_VERSION}"
        )


def read_events(
    connection: psycopg.Connection[tuple[object, ...]],
    schema: str,
    key: int,
    name: str,
    chain: MacChain | None,
    since: int = 0,
) -> list[SessionEvent]:
    rows = connection.execute(
        sql.SQL(
            "SELECT seq, event FROM {}.events WHERE session = %s AND seq >= %s ORDER BY seq"
        ).format(sql.Identifier(schema)),
        (key, since),
    )
    return events_from_rows(rows, name, chain, since)


def lock_key(schema: str, session_id: str) -> int:
    """A signed 64-bit advisory lock key for one session of one schema."""
    digest = hashlib.sha256(f"dsh-tools\0{schema}\0{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
