"""``subscribe``: a session's events as they are appended, in this process (woken by each
append, on trio's virtual clock) and from another process's log (followed on disk), and
``dsh-tools watch`` drawing a log another process writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from dsh_tools import (
    BatchEndEvent,
    CancelSignal,
    MemorySessionLog,
    SessionEvent,
    SqliteSessionLog,
    ToolCallRequest,
    ToolRegistry,
    TurnStartEvent,
    read_session_log,
    run_tool_calls,
    subscribe,
)
from support import ROOT


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(is_concurrency_safe=lambda _args: True)
    async def step(n: int) -> str:
        """One step."""
        await trio.sleep(0.01)
        return f"step {n}"

    return registry


def _calls(count: int) -> list[ToolCallRequest]:
    return [
        ToolCallRequest(call_id=f"c{n}", name="step", arguments=f'{{"n": {n}}}')
        for n in range(count)
    ]


async def test_a_slow_subscriber_gets_every_event_in_order_and_never_holds_the_writer_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    session = MemorySessionLog()
    received: list[SessionEvent] = []
    batch_done_after: list[int] = []

    async def slow_reader() -> None:
        async for event in subscribe(session, poll_interval=3600):
            received.append(event)
            await trio.sleep(1)  # a slow UI: one event per virtual second
            if isinstance(event, BatchEndEvent):
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow_reader)
        await run_tool_calls(_registry(), _calls(20), signal=CancelSignal.never(), session=session)
        batch_done_after.append(len(received))

    assert session.events() == received  # every event, in order, none missed
    assert batch_done_after[0] < len(received) // 2  # the batch ended long before the reader


async def test_an_append_wakes_the_subscriber_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    session = MemorySessionLog()
    woke_at: list[float] = []

    async def reader() -> None:
        async for _event in subscribe(session, poll_interval=3600):
            woke_at.append(trio.current_time())
            return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.sleep(5)
        session.append(TurnStartEvent(turn=1))
    assert [5.0] == woke_at  # not at the next poll, an hour later


async def test_a_stored_log_object_is_followed_too(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    received: list[SessionEvent] = []
    with SqliteSessionLog(tmp_path / "log.db", session_id="s") as session:

        async def reader() -> None:
            async for event in subscribe(session):
                received.append(event)
                if isinstance(event, BatchEndEvent):
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await run_tool_calls(
                _registry(), _calls(3), signal=CancelSignal.never(), session=session
            )
        assert session.events() == received


WRITER = """
import sys, time
from pathlib import Path
import trio
from dsh_tools import CancelSignal, JsonlSessionLog, SqliteSessionLog, ToolCallRequest, ToolRegistry, run_tool_calls

registry = ToolRegistry()

@registry.tool
async def step(n: int) -> str:
    '''One step.'''
    await trio.sleep(0.02)
    return f"step {n}"

calls = [ToolCallRequest(call_id=f"c{n}", name="step", arguments=f'{{"n": {n}}}') for n in range(5)]
path = Path(sys.argv[1])
log = JsonlSessionLog(path) if path.suffix == ".jsonl" else SqliteSessionLog(path, session_id="s")
with log:
    trio.run(lambda: run_tool_calls(registry, calls, signal=CancelSignal.never(), session=log))
"""


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


@pytest.mark.parametrize("name", ["log.jsonl", "log.db"])
async def test_a_log_another_process_writes_is_followed_from_its_path(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    writer = await trio.lowlevel.open_process(
        [sys.executable, "-c", WRITER, str(path)], env=_environment()
    )
    received: list[SessionEvent] = []
    try:
        with trio.fail_after(60):  # a bound, not a timing: the writer takes a fraction of it
            async for event in subscribe(str(path), session_id="s", poll_interval=0.02):
                received.append(event)
                if isinstance(event, BatchEndEvent):
                    break
    finally:
        with trio.fail_after(60):
            await writer.wait()
    assert 0 == writer.returncode
    stored = read_session_log(path) if name.endswith(".jsonl") else SqliteSessionLog.read(path, "s")
    assert stored == received


def test_subscribe_refuses_what_it_cannot_follow() -> None:
    async def first() -> None:
        async for _event in subscribe(42):  # pyright: ignore[reportArgumentType]
            break

    with pytest.raises(TypeError, match="subscribe\\(\\) follows a session log"):
        trio.run(first)


def test_dsh_tools_watch_draws_a_log_another_process_writes(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    watcher = subprocess.Popen(
        [sys.executable, "-m", "dsh_tools", "watch", str(path)],
        env={**_environment(), "COLUMNS": "100"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert watcher.stdout is not None
    os.set_blocking(watcher.stdout.fileno(), False)
    seen = bytearray()

    def read_until(marker: bytes) -> None:
        deadline = time.monotonic() + 60
        while marker not in seen:
            assert time.monotonic() < deadline, f"watch never showed {marker!r}: {bytes(seen)!r}"
            chunk = watcher.stdout.read()  # pyright: ignore[reportOptionalMemberAccess]
            if chunk:
                seen.extend(chunk)
            else:
                time.sleep(0.05)  # waiting for another process's output, not for a timer

    try:
        read_until(b"watching")
        subprocess.run(
            [sys.executable, "-c", WRITER, str(path)], env=_environment(), check=True, timeout=60
        )
        read_until(b"end of batch")
        watcher.send_signal(signal.SIGINT)
        _out, err = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert 130 == watcher.returncode
    assert b"dsh-tools: interrupted" in err
    assert b"c0" in seen
    assert b"step 4" in seen
    assert len(read_session_log(path)) > 0
