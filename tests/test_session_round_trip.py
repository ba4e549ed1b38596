"""What a log reads back is what was appended: every kind of event, in every log kind, equal
and of the same types (an amount appended as ``1`` is not read back as ``1.0``), also from a
reopened log and through each store's own reader.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    JsonlSessionLog,
    MemorySessionLog,
    SessionEvent,
    SqliteSessionLog,
    ToolProgressEvent,
    read_session_log,
)
from strategies import every_session_event
from support import postgres_dsn

Events = Sequence[SessionEvent]


def through_memory(events: Events) -> list[list[SessionEvent]]:
    log = MemorySessionLog()
    for event in events:
        log.append(event)
    return [log.events()]


def through_jsonl(events: Events) -> list[list[SessionEvent]]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log.jsonl"
        with JsonlSessionLog(path) as log:
            for event in events:
                log.append(event)
            live = log.events()
        with JsonlSessionLog(path) as reopened:
            return [live, reopened.events(), read_session_log(path)]


def through_sqlite(events: Events) -> list[list[SessionEvent]]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log.db"
        with SqliteSessionLog(path, session_id="s") as log:
            for event in events:
                log.append(event)
            live = log.events()
        with SqliteSessionLog(path, session_id="s") as reopened:
            return [live, reopened.events(), SqliteSessionLog.read(path, "s")]


def through_postgres(events: Events) -> list[list[SessionEvent]]:
    from dsh_tools.postgres import PostgresSessionLog

    dsn = postgres_dsn()
    session_id = f"round-trip-{uuid.uuid4()}"
    with PostgresSessionLog(dsn, session_id) as log:
        for event in events:
            log.append(event)
        live = log.events()
    with PostgresSessionLog(dsn, session_id) as reopened:
        return [live, reopened.events(), PostgresSessionLog.read(dsn, session_id)]


STORES: dict[str, Callable[[Events], list[list[SessionEvent]]]] = {
    "memory": through_memory,
    "jsonl": through_jsonl,
    "sqlite": through_sqlite,
    "postgres": through_postgres,
}


def exactly(events: Events) -> list[str]:
    """The events as ``repr`` shows them: equal values of other types (``1`` and ``1.0``)
    differ here."""
    return [repr(event) for event in events]


@pytest.mark.parametrize("kind", sorted(STORES))
@settings(max_examples=40)
@given(events=st.lists(every_session_event, min_size=1, max_size=6))
def test_every_event_reads_back_as_it_was_appended(kind: str, events: list[SessionEvent]) -> None:
    for read in STORES[kind](events):
        assert exactly(events) == exactly(read)
        assert list(events) == read  # a picture's repr shows its size, not its bytes


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize(
    ("progress", "total"), [(1, 2), (1.0, 2.0), (0.5, 3), (0, None), (2**53 - 1, 1e300)]
)
def test_progress_amounts_keep_their_value_and_type(
    kind: str, progress: float, total: float | None
) -> None:
    event = ToolProgressEvent(turn=0, step=0, call_id="c", progress=progress, total=total)
    for read in STORES[kind]([event]):
        (back,) = read
        assert isinstance(back, ToolProgressEvent)
        assert (repr(event.progress), repr(event.total)) == (repr(back.progress), repr(back.total))
