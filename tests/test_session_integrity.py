"""Tamper-evident session logs: with an ``integrity_key`` every event carries a MAC chained to
the one before, and reading, resuming and folding grants verify it. Checked for each stored log
kind (JSON Lines, SQLite, PostgreSQL on a real throwaway cluster) by changing what is stored
behind the log's back: a flipped byte, a dropped event, two events swapped, a forged grant or
result, the tail cut, the wrong key.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    ApprovalDecidedEvent,
    ApprovalOutcome,
    CancelSignal,
    JsonlSessionLog,
    SessionEvent,
    SessionLogCorruptError,
    SessionLogIntegrityError,
    SqliteSessionLog,
    TextBlock,
    ToolCallRequest,
    ToolRegistry,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserApproval,
    ask_before,
    read_session_log,
    resume_tool_calls,
)
from support import postgres_dsn, run_in_turn

KEY = b"k" * 32
OTHER_KEY = b"o" * 32

EVENTS: list[SessionEvent] = [
    TurnStartEvent(turn=1),
    ToolResultEvent(
        turn=1, step=0, call_id="c1", content=(TextBlock(text="hello"),), is_error=False
    ),
    ToolResultEvent(
        turn=1, step=0, call_id="c2", content=(TextBlock(text="world"),), is_error=False
    ),
    TurnEndEvent(turn=1),
]


class Store:
    """One stored log kind: open it (with a key), read it, and rewrite its stored lines."""

    def __init__(self, kind: str, directory: Path) -> None:
        self.kind = kind
        self.directory = directory
        self.session = f"integrity-{uuid.uuid4()}"

    def open(self, key: bytes | None = KEY) -> Any:
        if self.kind == "jsonl":
            return JsonlSessionLog(self.directory / "log.jsonl", integrity_key=key)
        if self.kind == "sqlite":
            return SqliteSessionLog(self.directory / "log.db", integrity_key=key)
        from dsh_tools.postgres import PostgresSessionLog

        return PostgresSessionLog(postgres_dsn(), self.session, integrity_key=key)

    def read(self, key: bytes | None = KEY) -> list[SessionEvent]:
        if self.kind == "jsonl":
            return read_session_log(self.directory / "log.jsonl", integrity_key=key)
        if self.kind == "sqlite":
            return SqliteSessionLog.read(self.directory / "log.db", integrity_key=key)
        from dsh_tools.postgres import PostgresSessionLog

        return PostgresSessionLog.read(postgres_dsn(), self.session, integrity_key=key)

    def lines(self) -> list[bytes]:
        """The stored lines, in order (each an event's sealed JSON)."""
        if self.kind == "jsonl":
            return (self.directory / "log.jsonl").read_bytes().splitlines()
        if self.kind == "sqlite":
            with closing(sqlite3.connect(self.directory / "log.db")) as connection:
                rows = connection.execute("SELECT event FROM dsh_events ORDER BY seq").fetchall()
            return [str(row[0]).encode() for row in rows]
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as connection:
            rows = connection.execute(
                "SELECT event FROM dsh.events e JOIN dsh.sessions s ON s.id = e.session "
                "WHERE s.name = %s ORDER BY seq",
                (self.session,),
            ).fetchall()
        return [str(row[0]).encode() for row in rows]

    def rewrite(self, lines: list[bytes]) -> None:
        """Store ``lines`` in place of the log's, numbered 0, 1, ... (a writer of the store
        without the key)."""
        if self.kind == "jsonl":
            (self.directory / "log.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
            return
        texts = [line.decode("utf-8", "replace") for line in lines]
        if self.kind == "sqlite":
            with closing(sqlite3.connect(self.directory / "log.db")) as connection, connection:
                connection.execute("DELETE FROM dsh_events")
                connection.executemany(
                    "INSERT INTO dsh_events (session, seq, event) VALUES (1, ?, ?)",
                    list(enumerate(texts)),
                )
            return
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as connection:
            (key,) = connection.execute(
                "SELECT id FROM dsh.sessions WHERE name = %s", (self.session,)
            ).fetchone() or (None,)
            connection.execute("DELETE FROM dsh.events WHERE session = %s", (key,))
            for seq, text in enumerate(texts):
                connection.execute(
                    "INSERT INTO dsh.events (session, seq, event) VALUES (%s, %s, %s)",
                    (key, seq, text),
                )


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    store = Store(request.param, tmp_path)
    with store.open() as log:
        for event in EVENTS:
            log.append(event)
    return store


def _forged(event: SessionEvent, key: bytes, previous: bytes = b"") -> bytes:
    """``event``'s sealed line as a writer with ``key`` would write it after ``previous``."""
    from dsh_tools._sessions._wire import MacChain, encode_event_line

    chain = MacChain(key)
    chain.mac = previous
    return chain.seal(encode_event_line(event)[:-1])[0]


def _mac(line: bytes) -> bytes:
    return bytes.fromhex(json.loads(line)["mac"])


def test_a_keyed_log_reads_back_and_goes_on_after_a_reopen(store: Store) -> None:
    assert EVENTS == store.read()
    with store.open() as log:
        assert EVENTS == log.events()
        assert len(EVENTS) == log.append(TurnStartEvent(turn=2))
    assert [*EVENTS, TurnStartEvent(turn=2)] == store.read()
    assert all(b'"mac":"' in line for line in store.lines())


def test_without_a_key_nothing_changes_on_the_wire(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(TurnStartEvent(turn=1))
    assert b'{"type":"turn/start","turn":1}\n' == path.read_bytes()


def test_a_keyed_log_read_without_its_key_reads_unchecked(store: Store) -> None:
    assert EVENTS == store.read(key=None)


Mutation = Callable[[list[bytes]], list[bytes]]


def _flip(index: int, at: int) -> Mutation:
    def mutate(lines: list[bytes]) -> list[bytes]:
        line = bytearray(lines[index])
        line[at % len(line)] ^= 0x01
        return [*lines[:index], bytes(line), *lines[index + 1 :]]

    return mutate


MUTATIONS: dict[str, tuple[Mutation, int]] = {
    # name: (what it does to the stored lines, the seq the error must name)
    "flip a byte of the first event": (_flip(0, 5), 0),
    "flip a byte of the last event": (_flip(3, 9), 3),
    "flip a digit of a MAC": (_flip(1, -5), 1),
    "drop an event": (lambda lines: [lines[0], *lines[2:]], 1),
    "swap two events": (lambda lines: [lines[0], lines[2], lines[1], lines[3]], 1),
    "replay an event twice": (lambda lines: [*lines[:2], lines[1], *lines[2:]], 2),
    "insert an unkeyed event": (
        lambda lines: [*lines[:2], b'{"type":"turn/start","turn":9}', *lines[2:]],
        2,
    ),
    "append a session grant forged with another key": (
        lambda lines: [
            *lines,
            _forged(
                ApprovalDecidedEvent(
                    id="forged", outcome=ApprovalOutcome.ALLOWED_SESSION, answered_by="grant"
                ),
                OTHER_KEY,
                _mac(lines[-1]),
            ),
        ],
        4,
    ),
    "append a result forged with another key": (
        lambda lines: [
            *lines,
            _forged(
                ToolResultEvent(
                    turn=1, step=0, call_id="c9", content=(TextBlock(text="x"),), is_error=False
                ),
                OTHER_KEY,
                _mac(lines[-1]),
            ),
        ],
        4,
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_any_change_behind_the_logs_back_is_named_at_its_first_event(
    store: Store, mutation: str
) -> None:
    mutate, seq = MUTATIONS[mutation]
    store.rewrite(mutate(store.lines()))
    with pytest.raises(SessionLogIntegrityError) as caught:
        store.read()
    assert seq == caught.value.seq
    assert seq + 1 == caught.value.line
    # opening the log to write checks it too: nothing is appended to a log that was forged
    with pytest.raises(SessionLogIntegrityError):
        store.open()


def test_the_wrong_key_fails_at_the_first_event(store: Store) -> None:
    with pytest.raises(SessionLogIntegrityError, match="sequence number 0") as caught:
        store.read(key=OTHER_KEY)
    assert 0 == caught.value.seq


def test_cutting_whole_events_off_the_tail_is_not_detected(store: Store) -> None:
    # the limit of a chain, stated in the security page: a log rolled back to an earlier state
    # is a valid log (keep the last MAC elsewhere to detect it)
    store.rewrite(store.lines()[:2])
    assert EVENTS[:2] == store.read()


def test_a_torn_last_line_is_a_crash_not_tampering(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path, integrity_key=KEY) as log:
        for event in EVENTS:
            log.append(event)
    whole = path.read_bytes()
    torn = _forged(TurnStartEvent(turn=2), KEY, _mac(whole.splitlines()[-1]))[:17]
    path.write_bytes(whole + torn)  # a write that died partway: no newline, not JSON
    assert EVENTS == read_session_log(path, integrity_key=KEY)
    with JsonlSessionLog(path, integrity_key=KEY) as log:  # the writer cuts it and goes on
        log.append(TurnStartEvent(turn=2))
    assert [*EVENTS, TurnStartEvent(turn=2)] == read_session_log(path, integrity_key=KEY)


def test_bytes_after_the_last_sealed_line_are_tampering_not_a_torn_write(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path, integrity_key=KEY) as log:
        for event in EVENTS:
            log.append(event)
    whole = path.read_bytes()
    path.write_bytes(whole[:-1] + b"X")  # its newline changed: no torn write looks like it
    with pytest.raises(SessionLogIntegrityError) as caught:
        read_session_log(path, integrity_key=KEY)
    assert 3 == caught.value.seq


def test_an_integrity_error_is_a_corruption_error() -> None:
    error = SessionLogIntegrityError("log", 4, "why")
    assert isinstance(error, SessionLogCorruptError)
    assert (4, 5) == (error.seq, error.line)
    assert str(error) == "log, line 5: integrity check failed at sequence number 4: why"


def test_the_key_is_bytes() -> None:
    with pytest.raises(TypeError, match="integrity_key must be bytes"):
        JsonlSessionLog("unused.jsonl", integrity_key="secret")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="integrity_key must not be empty"):
        read_session_log("unused.jsonl", integrity_key=b"")


# --- any single mutation, and what it could make run ----------------------------------------


@settings(max_examples=60)
@given(data=st.data())
def test_any_single_mutation_of_a_keyed_log_is_detected(tmp_path_factory: Any, data: Any) -> None:
    directory = tmp_path_factory.mktemp("mutation")
    path = directory / "log.jsonl"
    with JsonlSessionLog(path, integrity_key=KEY) as log:
        for event in EVENTS:
            log.append(event)
    raw = bytearray(path.read_bytes())
    kind = data.draw(st.sampled_from(["flip", "delete-byte", "insert-byte", "move-line"]))
    # the final newline stays: removing it (and what precedes it) is a cut tail, which a
    # chain cannot tell from a log that was shorter (see the test above)
    at = data.draw(st.integers(0, len(raw) - 2))
    if kind == "flip":
        raw[at] ^= data.draw(st.integers(1, 255))
    elif kind == "delete-byte":
        del raw[at]
    elif kind == "insert-byte":
        raw.insert(at, data.draw(st.integers(0, 255)))
    else:
        lines = bytes(raw).splitlines(keepends=True)
        source = data.draw(st.integers(0, len(lines) - 1))
        target = data.draw(st.integers(0, len(lines) - 1).filter(lambda t: t != source))
        lines.insert(target, lines.pop(source))
        raw = bytearray(b"".join(lines))
    path.write_bytes(bytes(raw))
    with pytest.raises(SessionLogIntegrityError):
        read_session_log(path, integrity_key=KEY)


async def test_a_forged_approval_makes_no_body_run(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    ran: list[str] = []
    registry = await _suspended_keyed_log(path, ran)
    # someone with write access to the file, but not the key, approves the call
    lines = path.read_bytes().splitlines()
    asked = next(json.loads(line) for line in lines if b'"approval/asked"' in line)
    forged = ApprovalDecidedEvent(id=asked["id"], outcome=ApprovalOutcome.ALLOWED_ONCE)
    path.write_bytes(path.read_bytes() + _forged(forged, OTHER_KEY, _mac(lines[-1])) + b"\n")

    with pytest.raises(SessionLogIntegrityError) as caught:
        JsonlSessionLog(path, integrity_key=KEY)  # the resume's log: refused at once
    assert len(lines) == caught.value.seq
    # a log opened before the forgery (the writer still holds it) refuses it when it reads
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    with JsonlSessionLog(path, integrity_key=KEY) as reopened:
        path.write_bytes(path.read_bytes() + _forged(forged, OTHER_KEY, _mac(lines[-1])) + b"\n")
        with pytest.raises(SessionLogIntegrityError):
            await resume_tool_calls(registry, reopened, signal=CancelSignal.never(), agent="agent")
    assert [] == ran


async def _suspended_keyed_log(path: Path, ran: list[str]) -> ToolRegistry:
    session = JsonlSessionLog(path, integrity_key=KEY)

    async def defer(_request: object, _next: object) -> ApprovalOutcome:
        await trio.lowlevel.checkpoint()
        return ApprovalOutcome.DEFERRED

    approval = UserApproval(session)
    approval.answerers.add(defer)
    registry = ToolRegistry(approval=approval)

    @registry.tool
    def delete_everything() -> str:
        """Delete every file."""
        ran.append("deleted")
        return "done"

    registry.hooks.pre_execute.add(ask_before("delete_everything"))
    call = ToolCallRequest(call_id="d1", name="delete_everything", arguments="{}")
    await run_in_turn(registry, [call], session=session, agent="agent")
    session.close()
    return registry


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_no_mutation_of_a_keyed_log_makes_a_body_run_its_decisions_did_not_allow(
    tmp_path_factory: Any, data: Any
) -> None:
    path = tmp_path_factory.mktemp("suspended") / "agent.jsonl"
    ran: list[str] = []
    registry = trio.run(_suspended_keyed_log, path, ran)
    lines = path.read_bytes().splitlines()
    asked = next(json.loads(line) for line in lines if b'"approval/asked"' in line)
    kind = data.draw(st.sampled_from(["forge-decision", "flip", "move-line", "drop-line"]))
    if kind == "forge-decision":
        outcome = data.draw(
            st.sampled_from([ApprovalOutcome.ALLOWED_ONCE, ApprovalOutcome.ALLOWED_SESSION])
        )
        forged = ApprovalDecidedEvent(id=asked["id"], outcome=outcome, answered_by="resume")
        key = data.draw(st.sampled_from([OTHER_KEY, b""]))
        line = (
            _forged(forged, key, _mac(lines[-1]))
            if key
            else json.dumps(
                {"type": "approval/decided", "id": asked["id"], "outcome": outcome.value}
            ).encode()
        )
        at = data.draw(st.integers(0, len(lines)))
        lines.insert(at, line)
    elif kind == "flip":
        index = data.draw(st.integers(0, len(lines) - 1))
        line = bytearray(lines[index])
        line[data.draw(st.integers(0, len(line) - 1))] ^= data.draw(st.integers(1, 255))
        lines[index] = bytes(line)
    elif kind == "move-line":
        source = data.draw(st.integers(0, len(lines) - 1))
        target = data.draw(st.integers(0, len(lines) - 1).filter(lambda t: t != source))
        lines.insert(target, lines.pop(source))
    else:
        del lines[data.draw(st.integers(0, len(lines) - 2))]  # the last one: a cut tail
    path.write_bytes(b"".join(line + b"\n" for line in lines))

    async def resume() -> None:
        with JsonlSessionLog(path, integrity_key=KEY) as session:
            await resume_tool_calls(registry, session, signal=CancelSignal.never(), agent="agent")

    with pytest.raises(SessionLogIntegrityError):
        trio.run(resume)
    assert [] == ran
