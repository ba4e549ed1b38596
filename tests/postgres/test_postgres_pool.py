"""PostgresSessionLog on a borrowed pool connection (what a Temporal worker does): the session's
lock goes back with nothing else, the connection serves the next log, and a connection whose
lock could not be let go never returns to the pool. And the question the agent's runner asks
while a batch runs: is the batch open with nobody holding its session?
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from dsh_tools import BatchEndEvent, BatchStartEvent, SessionLogLockedError
from dsh_tools.postgres import PostgresSessionLog
from dsh_tools.postgres._log import session_state


@pytest.fixture
def pool(dsn: str) -> Iterator[ConnectionPool[psycopg.Connection[tuple[object, ...]]]]:
    opened: ConnectionPool[psycopg.Connection[tuple[object, ...]]] = ConnectionPool(
        dsn, min_size=1, max_size=1, kwargs={"autocommit": True}, open=True
    )
    with opened:
        yield opened


def _start(step: int) -> BatchStartEvent:
    return BatchStartEvent(turn=0, step=step, batch_id=f"b{step}", calls=())


def test_a_pooled_log_gives_its_connection_back_without_the_sessions_lock(
    dsn: str, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]]
) -> None:
    first, second = f"s-{uuid.uuid4()}", f"s-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as observer:
        with PostgresSessionLog(dsn, first, pool=pool) as log:
            log.append(_start(0))
            # held, so not orphaned although its batch is open
            assert "held" == session_state(observer, "dsh", first)
            # the pool's one connection is the log's: nobody else gets it meanwhile
            assert 0 == pool.get_stats().get("pool_available", 0)
        # the same connection serves the next session, and the first is anyone's again
        with PostgresSessionLog(dsn, second, pool=pool) as log:
            log.append(_start(0))
        with PostgresSessionLog(dsn, first) as again:
            again.append(_start(1))
    steps = [e.step for e in PostgresSessionLog.read(dsn, first) if isinstance(e, BatchStartEvent)]
    assert [0, 1] == steps
    assert 1 == pool.get_stats()["pool_size"]


def test_a_pooled_log_without_synchronous_commit_leaves_the_setting_behind(
    dsn: str, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]]
) -> None:
    with PostgresSessionLog(dsn, f"s-{uuid.uuid4()}", pool=pool, synchronous_commit=False) as log:
        log.append(_start(0))
    with pool.connection() as connection:
        row = connection.execute("SHOW synchronous_commit").fetchone()
    assert ("on",) == row


def test_a_pooled_log_refused_by_a_locked_session_gives_the_connection_back(
    dsn: str, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]]
) -> None:
    session = f"s-{uuid.uuid4()}"
    with PostgresSessionLog(dsn, session), pytest.raises(SessionLogLockedError):
        PostgresSessionLog(dsn, session, pool=pool)
    with PostgresSessionLog(dsn, session, pool=pool) as log:  # the one connection is back
        log.append(_start(0))


def test_a_pooled_connection_that_lost_its_server_is_dropped_not_given_back(
    dsn: str, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]]
) -> None:
    session = f"s-{uuid.uuid4()}"
    log = PostgresSessionLog(dsn, session, pool=pool)
    connection = log._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    with psycopg.connect(dsn, autocommit=True) as killer:
        killer.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
    log.close()
    assert connection.closed
    # the pool opens a fresh connection for the next log, and the session is free
    with PostgresSessionLog(dsn, session, pool=pool) as again:
        again.append(_start(0))
        assert again._connection is not connection  # pyright: ignore[reportPrivateUsage]


def test_a_batch_is_orphaned_only_while_open_with_nobody_holding_its_session(dsn: str) -> None:
    session = f"s-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as observer:

        def state() -> str:
            return session_state(observer, "dsh", session)

        assert "idle" == state()  # no such session yet
        log = PostgresSessionLog(dsn, session)
        log.append(_start(0))
        assert "held" == state()  # open, and its writer holds it
        connection = log._connection  # pyright: ignore[reportPrivateUsage]
        assert connection is not None
        observer.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
        for _ in range(200):  # the server lets the lock go as the backend ends
            if state() != "held":
                break
            time.sleep(0.01)
        assert "orphaned" == state()  # open, and its writer is gone
        log.close()
        with PostgresSessionLog(dsn, session) as again:
            assert "held" == state()  # a new writer holds it
            again.append(BatchEndEvent(turn=0, step=0, batch_id="b0", reason="aborted"))
        assert "idle" == state()  # ended


def test_a_pooled_connection_to_a_stalled_server_fails_the_open_within_its_timeout(
    dsn: str, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]]
) -> None:
    # the pool's one connection: its backend stopped (a server that accepts and never answers)
    with pool.connection() as connection:
        pid = connection.info.backend_pid
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(30, os.kill, (pid, signal.SIGCONT))  # never a hang
    timer.start()
    try:
        with pytest.raises(TimeoutError, match=r"did not answer opening the log within 0.5 s"):
            PostgresSessionLog(dsn, f"s-{uuid.uuid4()}", pool=pool, append_timeout=0.5)
    finally:
        timer.cancel()
        os.kill(pid, signal.SIGCONT)
    # the cut connection is not given back: the pool opens a fresh one
    with PostgresSessionLog(dsn, f"s-{uuid.uuid4()}", pool=pool) as log:
        log.append(_start(0))
        assert log._connection is not None  # pyright: ignore[reportPrivateUsage]
        assert pid != log._connection.info.backend_pid  # pyright: ignore[reportPrivateUsage]


def test_a_pooled_log_opens_on_the_next_connection_when_the_server_dropped_one(
    dsn: str, pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]]
) -> None:
    # as after a database restart: the pool's idle connection is dead, and the pool does not
    # know it yet
    with pool.connection() as connection:
        pid = connection.info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as killer:
        killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(500):  # gone, so the log's first statement surely meets a dead end
            if not killer.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone():
                break
            time.sleep(0.01)
        else:
            pytest.fail("the terminated backend did not end")
    with PostgresSessionLog(dsn, f"s-{uuid.uuid4()}", pool=pool) as log:
        log.append(_start(0))
        assert log._connection is not None  # pyright: ignore[reportPrivateUsage]
        assert pid != log._connection.info.backend_pid  # pyright: ignore[reportPrivateUsage]
