"""PostgresSessionLog on a real, throwaway PostgreSQL cluster (what the log contract tests in
``tests/test_session.py`` do not cover: the schema, the fence, lost connections, the command).

Each test uses its own session id (the test's ``tmp_path``), so tests share one cluster.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Generator
from pathlib import Path

import local_servers
import psycopg
import pytest

from dsh_tools import (
    SessionLogCorruptError,
    SessionLogLockedError,
    TextBlock,
    ToolCallEvent,
    ToolResultEvent,
)
from dsh_tools._sessions._wire import encode_event_line
from dsh_tools.postgres import PostgresSessionLog, create_schema
from dsh_tools.postgres._log import describe_conninfo

CALL = ToolCallEvent(turn=0, step=0, call_id="c1", name="put", arguments='{"a":"\ud800\u0000"}')
RESULT = ToolResultEvent(
    turn=0, step=0, call_id="c1", content=[TextBlock(text="done")], is_error=False
)


@pytest.fixture
def session(tmp_path: Path) -> str:
    return str(tmp_path)


def test_sessions_of_one_database_number_and_read_their_events_apart(dsn: str) -> None:
    a, b = f"a-{uuid.uuid4()}", f"b-{uuid.uuid4()}"
    with PostgresSessionLog(dsn, a) as first, PostgresSessionLog(dsn, b) as second:
        assert [0, 0, 1] == [first.append(CALL), second.append(RESULT), first.append(RESULT)]
    assert ([CALL, RESULT], [RESULT]) == (
        PostgresSessionLog.read(dsn, a),
        PostgresSessionLog.read(dsn, b),
    )


def test_the_stored_event_is_the_jsonl_line_of_the_event(dsn: str, session: str) -> None:
    with PostgresSessionLog(dsn, session) as log:
        log.append(CALL)
    with psycopg.connect(dsn) as connection:
        row = connection.execute(
            "SELECT e.event FROM dsh.events e JOIN dsh.sessions s ON s.id = e.session "
            "WHERE s.name = %s",
            (session,),
        ).fetchone()
    assert row is not None
    assert encode_event_line(CALL)[:-1].decode() == row[0]


def test_a_schema_that_was_never_created_is_refused_naming_the_command(dsn: str) -> None:
    with pytest.raises(ValueError, match="create-schema DSN --schema nowhere"):
        PostgresSessionLog(dsn, "s", schema="nowhere")


def test_create_schema_twice_creates_it_once_and_logs_use_it(dsn: str) -> None:
    create_schema(dsn, schema="twice")
    create_schema(dsn, schema="twice")
    with PostgresSessionLog(dsn, "s", schema="twice") as log:
        assert 0 == log.append(CALL)
    assert [CALL] == PostgresSessionLog.read(dsn, "s", schema="twice")


def test_a_schema_of_another_version_is_refused_by_create_schema_and_by_a_log(dsn: str) -> None:
    create_schema(dsn, schema="older")
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("UPDATE older.meta SET version = 99")
    for attempt in (
        lambda: create_schema(dsn, schema="older"),
        lambda: PostgresSessionLog(dsn, "s", schema="older"),
    ):
        with pytest.raises(
            ValueError, match=r"schema 'older' holds session logs of schema version \[99\]"
        ):
            attempt()


def test_the_command_creates_the_schema(dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_tools.postgres", "create-schema", dsn, "--schema", "cli"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (0, f"schema 'cli' ready in {describe_conninfo(dsn)}\n") == (
        done.returncode,
        done.stdout,
    )
    with PostgresSessionLog(dsn, "s", schema="cli") as log:
        assert [] == log.events()


def test_the_command_reports_an_unreachable_database_without_a_traceback() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsh_tools.postgres",
            "create-schema",
            "postgresql://x@127.0.0.1:1/db",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (1, True, False) == (
        done.returncode,
        done.stderr.startswith("create-schema: "),
        "Traceback" in done.stderr,
    )


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"session_id": ""}, ValueError, "non-empty"),
        ({"session_id": 3}, TypeError, "session_id"),
        ({"session_id": "a\ud800"}, ValueError, "lone surrogate"),
        ({"session_id": "a\x00"}, ValueError, "NUL"),
        ({"session_id": "s", "schema": "Bad-Name"}, ValueError, "lower-case SQL identifier"),
        ({"session_id": "s", "synchronous_commit": "on"}, TypeError, "synchronous_commit"),
        ({"session_id": "s", "append_timeout": "5"}, TypeError, "append_timeout"),
        ({"session_id": "s", "append_timeout": True}, TypeError, "append_timeout"),
        ({"session_id": "s", "append_timeout": 0}, ValueError, "append_timeout"),
        ({"session_id": "s", "append_timeout": math.inf}, ValueError, "append_timeout"),
    ],
)
def test_bad_arguments_are_refused_before_connecting(
    arguments: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        PostgresSessionLog("postgresql://nobody@127.0.0.1:1/none", **arguments)  # type: ignore[arg-type]


def test_a_message_never_shows_the_password() -> None:
    described = describe_conninfo("postgresql://agent:s3cret@db.internal:5433/sessions")
    assert "postgresql host=db.internal port=5433 dbname=sessions user=agent" == described


def test_a_stored_row_that_is_not_an_event_is_corruption_naming_its_position(
    dsn: str, session: str
) -> None:
    with PostgresSessionLog(dsn, session) as log:
        log.append(CALL)
        log.append(RESULT)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(
            'UPDATE dsh.events SET event = \'{"type":"tool/call"}\' FROM dsh.sessions s '
            "WHERE s.id = dsh.events.session AND s.name = %s AND seq = 1",
            (session,),
        )
    with pytest.raises(SessionLogCorruptError, match=r"line 2: not a session event") as caught:
        PostgresSessionLog.read(dsn, session)
    assert 2 == caught.value.line


def test_a_writer_that_lost_its_lock_is_fenced_by_the_sequence_numbers(
    dsn: str, session: str
) -> None:
    stale = PostgresSessionLog(dsn, session)
    stale.append(CALL)
    # what a cut connection does to the lock, with the connection left usable
    connection = stale._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    connection.execute("SELECT pg_advisory_unlock_all()")
    with PostgresSessionLog(dsn, session) as successor:
        assert 1 == successor.append(RESULT)
        with pytest.raises(SessionLogLockedError, match="another PostgresSessionLog"):
            stale.append(CALL)
        assert stale.closed
        assert 2 == successor.append(CALL)
    assert [CALL, RESULT, CALL] == PostgresSessionLog.read(dsn, session)


def test_a_lost_connection_fails_the_append_and_frees_the_session(dsn: str, session: str) -> None:
    log = PostgresSessionLog(dsn, session)
    log.append(CALL)
    connection = log._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    with psycopg.connect(dsn, autocommit=True) as admin:  # only this log's own connection
        admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError):
        log.append(RESULT)
    log.close()
    with PostgresSessionLog(dsn, session) as again:
        assert ([CALL], 1) == (again.events(), again.append(RESULT))


@contextlib.contextmanager
def stopped(pid: int, *, at_most: float) -> Generator[None]:
    """The server process ``pid`` stopped (``SIGSTOP``) and continued on leaving, or after
    ``at_most`` seconds whatever happens (a test that would otherwise wait forever fails)."""
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(at_most, os.kill, (pid, signal.SIGCONT))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        os.kill(pid, signal.SIGCONT)


def test_an_append_to_a_stalled_server_fails_within_its_timeout_and_frees_the_session(
    dsn: str, session: str
) -> None:
    log = PostgresSessionLog(dsn, session, append_timeout=0.5)
    log.append(CALL)
    connection = log._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    # a real stall: the session's backend process stopped while the append waits for it
    with stopped(connection.info.backend_pid, at_most=30), pytest.raises(TimeoutError) as caught:
        log.append(RESULT)
    assert "did not answer an append within 0.5 s (append_timeout)" in str(caught.value)
    assert log.closed
    # the backend, continued, finds its connection gone and frees the session's lock
    for _ in range(200):
        try:
            again = PostgresSessionLog(dsn, session)
        except SessionLogLockedError:
            time.sleep(0.05)
            continue
        with again:
            assert CALL == again.events()[0]
            assert len(again.events()) in (1, 2)  # the cut append may or may not have landed
        break
    else:
        pytest.fail("the session stayed locked after its stalled backend continued")


def test_an_append_timeout_of_none_waits_as_long_as_the_server_takes(
    dsn: str, session: str
) -> None:
    with PostgresSessionLog(dsn, session, append_timeout=None) as log:
        log.append(CALL)
        connection = log._connection  # pyright: ignore[reportPrivateUsage]
        assert connection is not None
        with stopped(connection.info.backend_pid, at_most=0.5):
            assert 1 == log.append(RESULT)  # answered once the backend continued
        assert [CALL, RESULT] == log.events()


def test_an_unreachable_database_fails_at_construction() -> None:
    with pytest.raises(psycopg.OperationalError):
        PostgresSessionLog("postgresql://nobody@127.0.0.1:1/none", "s")


def test_the_repr_names_the_session_and_never_the_password(dsn: str, session: str) -> None:
    with PostgresSessionLog(dsn, session) as log:
        assert (
            f"<PostgresSessionLog {describe_conninfo(dsn)} schema 'dsh' session {session!r} next_seq=0>"
            == repr(log)
        )


def test_an_append_across_a_database_restart_is_retried_and_stored_once() -> None:
    with local_servers.postgres_cluster() as own:
        create_schema(own)
        with PostgresSessionLog(own, "restarted", append_retry=60) as log:
            log.append(CALL)
            local_servers.restart_postgres(own)  # every connection is cut
            assert 1 == log.append(RESULT)  # reconnected, the session locked again, stored
        assert [CALL, RESULT] == PostgresSessionLog.read(own, "restarted")
        with PostgresSessionLog(own, "not retried") as log:
            log.append(CALL)
            local_servers.restart_postgres(own)
            with pytest.raises(psycopg.OperationalError):
                log.append(RESULT)


def test_a_retried_append_never_writes_into_a_session_another_writer_took(
    dsn: str, session: str
) -> None:
    log = PostgresSessionLog(dsn, session, append_retry=30)
    log.append(CALL)
    connection = log._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
    with PostgresSessionLog(dsn, session) as other:  # took the session while the first was cut
        with pytest.raises(SessionLogLockedError):
            log.append(RESULT)
        assert [CALL] == other.events()
    log.close()


def test_a_read_from_a_sequence_number_returns_the_events_from_there(
    dsn: str, session: str
) -> None:
    with PostgresSessionLog(dsn, session) as log:
        for _ in range(3):
            log.append(CALL)
            log.append(RESULT)
        assert [CALL, RESULT] == log.events_since(4)
        assert log.events() == log.events_since(0)
        assert [] == log.events_since(6)
    assert [RESULT, CALL, RESULT] == PostgresSessionLog.read(dsn, session, since=3)
    with pytest.raises(ValueError, match="since must be a non-negative int, not -1"):
        PostgresSessionLog.read(dsn, session, since=-1)


def test_a_keyed_log_is_read_from_its_first_event(dsn: str, session: str) -> None:
    key = b"k" * 32
    with PostgresSessionLog(dsn, session, integrity_key=key) as log:
        log.append(CALL)
        log.append(RESULT)
        assert [CALL, RESULT] == log.events_since(0)
        with pytest.raises(ValueError, match="a keyed log is verified from its first event"):
            log.events_since(1)
    with pytest.raises(ValueError, match="a keyed log is verified from its first event"):
        PostgresSessionLog.read(dsn, session, integrity_key=key, since=1)


def test_a_read_from_a_stalled_server_fails_within_its_timeout(dsn: str, session: str) -> None:
    # what a worker reads at a batch's start: a stalled database fails the attempt (Temporal
    # then moves the batch) instead of hanging it while its heartbeats go on
    log = PostgresSessionLog(dsn, session, append_timeout=0.5)
    log.append(CALL)
    log.append(RESULT)
    connection = log._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    with stopped(connection.info.backend_pid, at_most=30), pytest.raises(TimeoutError) as caught:
        log.events_since(1)
    assert "did not answer a read within 0.5 s (append_timeout)" in str(caught.value)
    assert log.closed


def test_a_closed_log_frees_its_session_before_close_returns(dsn: str, session: str) -> None:
    # the log lets its lock go itself, not when the server gets round to ending the closed
    # connection's backend: a log opened at once never finds the session locked
    log = PostgresSessionLog(dsn, session)
    connection = log._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    backend = connection.info.backend_pid
    log.close()
    with psycopg.connect(dsn, autocommit=True) as admin:
        held = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (backend,)
        ).fetchone()
    assert (0,) == held
    with PostgresSessionLog(dsn, session) as again:
        assert [] == again.events()
