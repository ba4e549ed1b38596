"""The session-log contract, once for every store: in memory, JSON Lines, SQLite and PostgreSQL.

What every log promises (numbering, reading back, a closed log refused, the context manager,
the ``repr``, the warning of a log dropped while open, reopening continues the numbering, a
second writer refused) is checked here against each store the same way; what only one store
does (a torn JSONL line, a SQLite format check, a PostgreSQL lost lock) stays in its own module.
"""

from __future__ import annotations

import gc
import sqlite3
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    ImageBlock,
    JsonlSessionLog,
    MemorySessionLog,
    SessionLog,
    SessionLogCorruptError,
    SessionLogLockedError,
    SqliteSessionLog,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultEvent,
    TurnStartEvent,
)
from support import postgres_dsn

EVENTS = [
    TurnStartEvent(turn=1),
    BatchStartEvent(
        turn=1,
        step=0,
        batch_id="b1",
        calls=(ToolCallRequest(call_id="c1", name="t", arguments='{"n": 1}'),),
    ),
    ToolCallEvent(turn=1, step=0, call_id="c1", name="t", arguments='{"n": 1}'),
    BatchEndEvent(turn=1, step=0, batch_id="b1", reason="completed"),
]

Opener = Callable[[], Any]


def _jsonl(tmp_path: Path) -> Opener:
    path = tmp_path / "log.jsonl"
    return lambda: JsonlSessionLog(path)


def _sqlite(tmp_path: Path) -> Opener:
    path = tmp_path / "log.db"
    return lambda: SqliteSessionLog(path, session_id="s")


def _postgres(tmp_path: Path) -> Opener:
    from dsh_tools.postgres import PostgresSessionLog

    dsn = postgres_dsn()
    session = f"contract-{uuid.uuid4()}"
    return lambda: PostgresSessionLog(dsn, session)


STORES: dict[str, Callable[[Path], Opener]] = {
    "jsonl": _jsonl,
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(STORES))
def open_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a log of one stored kind; every call reaches the same log (the same file, database
    and session), so a test can reopen it. What it opened is closed after the test."""
    factory = STORES[request.param](tmp_path)
    opened: list[Any] = []

    def reopen() -> Any:
        log = factory()
        opened.append(log)
        return log

    yield reopen
    for log in opened:
        log.close()


@pytest.fixture(params=["memory", *sorted(STORES)])
def fresh_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionLog]:
    """A new, empty log of every kind, the in-memory one included."""
    log: Any = (
        MemorySessionLog() if request.param == "memory" else STORES[request.param](tmp_path)()
    )
    yield log
    getattr(log, "close", lambda: None)()


def test_appends_are_numbered_from_zero_and_read_back_equal_in_order(
    fresh_log: SessionLog,
) -> None:
    seqs = [fresh_log.append(event) for event in EVENTS]

    assert (list(range(len(EVENTS))), EVENTS) == (seqs, fresh_log.events())
    assert fresh_log.events() is not fresh_log.events()  # a fresh list each time


def test_a_value_that_is_not_an_event_is_refused_and_nothing_is_stored(
    fresh_log: SessionLog,
) -> None:
    with pytest.raises(TypeError, match="event must be a session event, not dict"):
        fresh_log.append({"type": "tool/call"})  # pyright: ignore[reportArgumentType]

    assert (0, [EVENTS[0]]) == (fresh_log.append(EVENTS[0]), fresh_log.events())


def test_reopening_continues_the_numbering(open_log: Opener) -> None:
    with open_log() as log:
        log.append(EVENTS[0])
        log.append(EVENTS[1])

    with open_log() as again:
        seq = again.append(EVENTS[2])
        events = again.events()

    assert (2, EVENTS[:3]) == (seq, events)


def test_a_closed_log_refuses_appends_and_reads_naming_its_class(open_log: Opener) -> None:
    log = open_log()
    name = type(log).__name__
    log.close()
    log.close()  # closing twice does nothing

    with pytest.raises(ValueError, match=rf"^append to a closed {name} \("):
        log.append(EVENTS[0])
    with pytest.raises(ValueError, match=rf"^events\(\) of a closed {name} \("):
        log.events()
    assert log.closed


def test_the_context_manager_closes_and_repr_tells_the_state(open_log: Opener) -> None:
    with open_log() as log:
        log.append(EVENTS[0])
        open_repr = repr(log)
    closed_repr = repr(log)

    name = type(log).__name__
    assert open_repr.startswith(f"<{name} ")
    assert open_repr.endswith(" next_seq=1>")
    assert closed_repr.endswith(" closed>")
    assert log.closed


def test_a_log_dropped_while_open_warns_and_closes(open_log: Opener) -> None:
    log = open_log()
    name = type(log).__name__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log.__del__()
    gc.collect()

    assert [f"unclosed {name} "] == [
        str(w.message)[: len(f"unclosed {name} ")]
        for w in caught
        if issubclass(w.category, ResourceWarning)
    ]
    assert log.closed


def test_a_second_writer_of_the_same_log_is_refused_until_the_first_closes(
    open_log: Opener,
) -> None:
    first = open_log()
    with pytest.raises(SessionLogLockedError):
        open_log()
    first.close()

    with open_log() as second:
        assert 0 == second.append(EVENTS[0])


def test_a_session_id_past_the_limit_is_refused_by_every_keyed_log_before_any_round_trip(
    tmp_path: Path,
) -> None:
    from dsh_tools.postgres import PostgresSessionLog

    too_long = "s" * 20_000
    expected = r"^session_id must be at most 1024 bytes in UTF-8, not 20000 \('s{40}'\.\.\.\)$"

    with pytest.raises(ValueError, match=expected):
        SqliteSessionLog(tmp_path / "refused.db", session_id=too_long)
    # an address nothing listens on: a round trip would fail differently (and slowly)
    with pytest.raises(ValueError, match=expected):
        PostgresSessionLog("postgresql://nobody@127.0.0.1:9/none", too_long)
    # 1024 bytes are accepted (512 two-byte characters)
    with SqliteSessionLog(tmp_path / "log.db", session_id="é" * 512) as log:
        assert 0 == log.append(EVENTS[0])
    assert not (tmp_path / "refused.db").exists()  # refused before the file was made


# --- pictures in a stored log --------------------------------------------------------------

_PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c4944415478da63f8cfc000000301010018dd8db00000000049454e44ae426082"
)


def _tamper(kind: str, tmp_path: Path, session: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the stored text of every event, behind the log's back."""
    if kind == "jsonl":
        path = tmp_path / "log.jsonl"
        path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    elif kind == "sqlite":
        with closing(sqlite3.connect(tmp_path / "log.db")) as connection, connection:
            connection.execute("UPDATE dsh_events SET event = replace(event, ?, ?)", (old, new))
    else:
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as connection:
            connection.execute(
                "UPDATE dsh.events SET event = replace(event, %s, %s) FROM dsh.sessions s "
                "WHERE s.id = dsh.events.session AND s.name = %s",
                (old, new, session),
            )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # one base64 character that is no base64: not a shorter picture, corruption
        ("iVBORw0K", "iVBORw0!", "not valid base64"),
        # bytes that decode but are no PNG any more
        ("iVBORw0K", "R0lGODlh", "signature of image/png"),
        ('"mediaType":"image/png"', '"mediaType":"image/bmp"', "unknown image media type"),
    ],
)
def test_a_stored_picture_reads_back_exactly_and_a_changed_one_is_corruption(
    open_log: Opener, tmp_path: Path, old: str, new: str, message: str
) -> None:
    result = ToolResultEvent(
        turn=1,
        step=0,
        call_id="c1",
        content=(TextBlock(text="shot"), ImageBlock(media_type="image/png", data=_PIXEL)),
        is_error=False,
    )
    log = open_log()
    log.append(result)
    assert [result] == log.events()
    log.close()
    reopened = open_log()
    assert [result] == reopened.events()  # the same bytes
    reopened.close()
    kind = type(log).__name__.removesuffix("SessionLog").lower()
    _tamper(kind, tmp_path, getattr(log, "session_id", ""), old, new)
    with pytest.raises(SessionLogCorruptError, match=message) as caught:
        open_log().events()
    assert 1 == caught.value.line
