"""``SqliteSessionLog``: many sessions in one file, one writer per session, clear errors for a
file that is not a log, and the JSON Lines log's wire JSON. (The contract every file log keeps
is in ``test_session.py``; crashes and other processes are in ``test_session_multiprocess.py``.)
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    SessionLogCorruptError,
    SessionLogLockedError,
    SqliteSessionLog,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultEvent,
)
from dsh_tools._sessions._wire import encode_event_line

CALL = ToolCallEvent(turn=0, step=0, call_id="c1", name="echo", arguments='{"a":"\\ud800"}')
RESULT = ToolResultEvent(
    turn=0,
    step=0,
    call_id="c1",
    content=[TextBlock(text="h\u00e9llo \ud83d")],
    is_error=False,
    source_event_seqs=(0,),
)
START = BatchStartEvent(
    turn=0, step=0, batch_id="b1", calls=[ToolCallRequest(call_id="c1", name="echo", arguments="")]
)
END = BatchEndEvent(turn=0, step=0, batch_id="b1", reason="suspended")


def test_sessions_of_one_file_number_and_read_their_events_apart(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    with (
        SqliteSessionLog(path, session_id="a") as first,
        SqliteSessionLog(path, session_id="b") as second,
    ):
        seqs = [first.append(CALL), second.append(START), first.append(RESULT), second.append(END)]
        assert ([0, 0, 1, 1], [CALL, RESULT], [START, END]) == (
            seqs,
            first.events(),
            second.events(),
        )
    assert ([CALL, RESULT], [START, END]) == (
        SqliteSessionLog.read(path, "a"),
        SqliteSessionLog.read(path, "b"),
    )


def test_a_second_writer_of_a_session_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    with SqliteSessionLog(path, session_id="a"), pytest.raises(SessionLogLockedError) as caught:
        SqliteSessionLog(path, session_id="a")
    assert (str(path), "a") == (caught.value.path, caught.value.session_id)
    assert str(caught.value).endswith(
        "another SqliteSessionLog is writing session 'a' (it holds the session's lock); "
        "read it with SqliteSessionLog.read()"
    )


def test_the_stored_event_is_the_jsonl_line_of_the_event(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    with SqliteSessionLog(path) as log:
        log.append(CALL)
        log.append(RESULT)
    with sqlite3.connect(path) as connection:
        stored = [row[0] for row in connection.execute("SELECT event FROM dsh_events ORDER BY seq")]
    assert [encode_event_line(CALL)[:-1].decode(), encode_event_line(RESULT)[:-1].decode()] == (
        stored
    )
    assert [CALL, RESULT] == SqliteSessionLog.read(path)


def test_reading_a_session_that_does_not_exist_is_a_lookup_error(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    SqliteSessionLog(path, session_id="a").close()
    with pytest.raises(LookupError) as caught:
        SqliteSessionLog.read(path, "b")
    assert f"{path}: no session 'b'" == str(caught.value)


def test_an_opened_session_without_events_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    SqliteSessionLog(path, session_id="a").close()
    assert [] == SqliteSessionLog.read(path, "a")


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_event_line(CALL))
    with pytest.raises(ValueError) as caught:
        SqliteSessionLog(path)
    with pytest.raises(ValueError) as read:
        SqliteSessionLog.read(path)
    assert str(caught.value).startswith(
        f"{path} is not a dsh-tools session log (not an SQLite database"
    )
    assert str(caught.value) == str(read.value)
    assert (encode_event_line(CALL), ["log.jsonl"]) == (
        path.read_bytes(),
        sorted(p.name for p in tmp_path.iterdir()),
    )


def test_a_database_of_another_application_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (text TEXT)")
    connection.close()
    with pytest.raises(ValueError) as caught:
        SqliteSessionLog(path)
    assert (
        f"{path} is not a dsh-tools session log (an SQLite database of another application: "
        "application_id 0)"
    ) == str(caught.value)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"session_id": ""}, ValueError, "session_id must be a non-empty str, not ''"),
        ({"session_id": 7}, TypeError, "session_id must be a non-empty str, not 7"),
        ({"synchronous": "off"}, ValueError, 'synchronous must be "normal" or "full", not \'off\''),
        ({"synchronous": True}, TypeError, 'synchronous must be "normal" or "full", not True'),
    ],
)
def test_bad_arguments_are_refused_before_the_file_is_touched(
    tmp_path: Path, changes: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        SqliteSessionLog(tmp_path / "log.sqlite", **changes)  # pyright: ignore[reportArgumentType]
    assert (type(caught.value), message, []) == (error, str(caught.value), list(tmp_path.iterdir()))


@pytest.mark.parametrize(("synchronous", "level"), [("normal", 1), ("full", 2)])
def test_the_synchronous_mode_is_sqlites_and_the_journal_is_a_write_ahead_log(
    tmp_path: Path, synchronous: str, level: int
) -> None:
    with SqliteSessionLog(tmp_path / "log.sqlite", synchronous=synchronous) as log:  # pyright: ignore[reportArgumentType]
        connection = cast("sqlite3.Connection", log._connection)  # pyright: ignore[reportPrivateUsage]
        assert (level, "wal") == (
            connection.execute("PRAGMA synchronous").fetchone()[0],
            connection.execute("PRAGMA journal_mode").fetchone()[0],
        )


_DEEP = "[" * 100_000 + "]" * 100_000
_HUGE = '{"type":"turn/start","turn":' + "7" * 5_000 + "}"


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        ("not json", "not JSON (Expecting value)"),
        ('{"type":"tool/call"}', "not a session event (required field missing @ $.turn"),
        (_DEEP, "not JSON (nested too deeply)"),
        (_HUGE, f"not JSON (a number longer than {sys.get_int_max_str_digits()} digits)"),
    ],
)
def test_a_stored_row_that_is_not_an_event_is_corruption_naming_its_position(
    tmp_path: Path, stored: str, reason: str
) -> None:
    path = tmp_path / "log.sqlite"
    with SqliteSessionLog(path, session_id="s") as log:
        log.append(CALL)
        connection = cast("sqlite3.Connection", log._connection)  # pyright: ignore[reportPrivateUsage]
        connection.execute("INSERT INTO dsh_events VALUES (1, 1, ?)", (stored,))
        with pytest.raises(SessionLogCorruptError) as caught:
            log.events()
    assert 2 == caught.value.line
    assert str(caught.value).startswith(f"'{path}' session 's', line 2: {reason}")


_TERMINAL_BYTES = b"\xff\x1b]52;c;cHduZWQ=\x07\x1b]0;PWNED\x07\x1b[2J"


def test_a_row_that_is_not_utf8_is_corruption_that_never_quotes_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    with SqliteSessionLog(path, session_id="s") as log:
        log.append(CALL)
        connection = cast("sqlite3.Connection", log._connection)  # pyright: ignore[reportPrivateUsage]
        connection.execute(
            "INSERT INTO dsh_events VALUES (1, 1, CAST(? AS TEXT))", (_TERMINAL_BYTES,)
        )
        with pytest.raises(SessionLogCorruptError) as caught:
            log.events()
    with pytest.raises(SessionLogCorruptError) as read_back:
        SqliteSessionLog.read(path, "s")

    assert (
        f"'{path}' session 's', line 2: not UTF-8 text",
        f"{path} (session 's'), line 2: not UTF-8 text",
    ) == (str(caught.value), str(read_back.value))


def test_replay_of_a_row_that_is_not_utf8_prints_one_line_and_no_terminal_control(
    tmp_path: Path,
) -> None:
    from rich.console import Console

    from dsh_tools.cli.replay import main_replay

    path = tmp_path / "log.sqlite"
    with SqliteSessionLog(path) as log:
        log.append(CALL)
        connection = cast("sqlite3.Connection", log._connection)  # pyright: ignore[reportPrivateUsage]
        connection.execute(
            "INSERT INTO dsh_events VALUES (1, 1, CAST(? AS TEXT))", (_TERMINAL_BYTES,)
        )
    errors: list[str] = []
    console = Console(record=True, color_system=None)

    code = main_replay(path, console=console, err=errors.append)

    assert (1, [f"dsh-tools replay: {path} (session 'default'), line 2: not UTF-8 text"]) == (
        code,
        errors,
    )
    assert "\x1b" not in console.export_text()


_FULL_DISK = """
import json, resource, signal, sqlite3, sys
from dsh_tools import SqliteSessionLog, TextBlock, ToolCallEvent, ToolResultEvent

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
first = ToolCallEvent(turn=0, step=0, call_id="c1", name="echo", arguments="{}")
large = ToolResultEvent(
    turn=0, step=0, call_id="c1", content=[TextBlock(text="x" * 200_000)], is_error=False
)
small = ToolResultEvent(turn=0, step=0, call_id="c1", content=[TextBlock(text="ok")], is_error=False)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
report = {}
with SqliteSessionLog(sys.argv[1]) as log:
    report["first"] = log.append(first)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
    try:
        log.append(large)
    except sqlite3.Error as exc:
        report["error"] = type(exc).__name__
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    report["small"] = log.append(small)
print(json.dumps(report))
"""


def test_an_insert_that_fails_on_a_full_disk_stores_nothing_and_the_log_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.sqlite"
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    assert {"first": 0, "error": "OperationalError", "small": 1} == json.loads(done.stdout)
    small = ToolResultEvent(
        turn=0, step=0, call_id="c1", content=[TextBlock(text="ok")], is_error=False
    )
    assert [
        ToolCallEvent(turn=0, step=0, call_id="c1", name="echo", arguments="{}"),
        small,
    ] == SqliteSessionLog.read(path)


def test_a_session_id_that_is_not_unicode_text_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        SqliteSessionLog(tmp_path / "log.sqlite", session_id="a\ud800")
    assert "session_id must be Unicode text, not 'a\\ud800' (a lone surrogate)" == str(caught.value)


def test_a_writer_through_a_symlink_is_refused_like_one_by_the_real_name(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    link = tmp_path / "link.sqlite"
    with SqliteSessionLog(path):
        link.symlink_to(path)
        with pytest.raises(SessionLogLockedError):
            SqliteSessionLog(link)


def test_a_writer_let_in_by_a_deleted_lock_directory_is_a_locked_error_not_a_driver_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.sqlite"
    with SqliteSessionLog(path, session_id="a") as first:
        first.append(START)
        # someone removes the lock directory: a second writer is no longer refused
        shutil.rmtree(tmp_path / "log.sqlite-locks")
        with SqliteSessionLog(path, session_id="a") as second:
            second.append(CALL)
            with pytest.raises(SessionLogLockedError) as caught:
                first.append(RESULT)  # its seq is taken
            assert (str(path), "a") == (caught.value.path, caught.value.session_id)
            assert "another SqliteSessionLog is writing session 'a'" in str(caught.value)
            # the refused writer is closed: nothing more of it reaches the session
            with pytest.raises(ValueError, match="closed"):
                first.append(END)
    assert [START, CALL] == SqliteSessionLog.read(path, "a")
