"""Streaming dispatch: ``run_tool_calls`` over an async iterable of calls starts each call the
moment the rules for the batch so far allow, on trio's virtual clock; the log records every
received call once (``batch/start``, then ``batch/call``), a resume finishes a streamed batch as
a listed one (after a real ``SIGKILL`` too), and interrupts, stream failures and bad items end
the batch balanced."""

from __future__ import annotations

import signal as signals
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    Allow,
    BatchCallEvent,
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    CancelSignal,
    MemorySessionLog,
    SessionEvent,
    ToolBatch,
    ToolBatchInfo,
    ToolCallEvent,
    ToolCallRequest,
    ToolDefinition,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    ToolStreamError,
    resume_tool_calls,
    run_tool_calls,
)
from dsh_tools._sessions._reader import SessionReader
from dsh_tools.testing import check_batch
from support import DURABLE_LOGS, OPEN_LOG, FileLogKind, first_text

NEVER = CancelSignal.never()


def _registry(seconds: float = 1.0, spans: list[tuple[str, float, float]] | None = None) -> Any:
    """``p`` is parallel-safe, ``x`` exclusive; each body takes ``seconds`` and records its span."""

    def tool(name: str, parallel: bool) -> ToolDefinition:
        async def body(_args: object, context: ToolRunContext) -> str:
            begin = trio.current_time()
            await trio.sleep(seconds)
            if spans is not None:
                spans.append((context.call_id, begin, trio.current_time()))
            return f"{name} {context.call_id}"

        return ToolDefinition(
            name=name,
            description=name,
            parameters={},
            execute=body,
            is_concurrency_safe=(lambda _args: True) if parallel else None,
        )

    registry = ToolRegistry()
    registry.register(tool("p", True))
    registry.register(tool("x", False))
    return registry


async def _stream(
    names: Sequence[str], gap: float, closed: list[bool] | None = None
) -> AsyncIterator[ToolCallRequest]:
    """The model's calls, one every ``gap`` seconds (``closed`` learns that it was closed)."""
    try:
        for index, name in enumerate(names):
            await trio.sleep(gap)
            yield ToolCallRequest(call_id=f"c{index}", name=name, arguments="{}")
    finally:
        if closed is not None:
            closed.append(True)


def _texts(batch: ToolBatch) -> list[str]:
    return [first_text(result) for result in batch.results]


@pytest.mark.parametrize(
    ("count", "gap", "seconds"), [(8, 0.25, 1.0), (3, 1.0, 0.5), (1, 0.0, 2.0)]
)
async def test_parallel_calls_start_as_they_arrive_and_the_turn_takes_the_ideal_time(
    autojump_clock: trio.testing.MockClock, count: int, gap: float, seconds: float
) -> None:
    begin = trio.current_time()
    batch = await run_tool_calls(_registry(seconds), _stream(["p"] * count, gap), signal=NEVER)

    # the ideal: the last call's arrival plus its body (every body runs while calls arrive)
    assert (count * gap + seconds, [f"p c{i}" for i in range(count)]) == (
        trio.current_time() - begin,
        _texts(batch),
    )


async def test_an_exclusive_call_waits_for_earlier_calls_and_holds_back_later_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    spans: list[tuple[str, float, float]] = []
    begin = trio.current_time()
    await run_tool_calls(_registry(1.0, spans), _stream(["p", "p", "x", "p"], 0.25), signal=NEVER)
    relative = {call_id: (start - begin, end - begin) for call_id, start, end in spans}

    # c0, c1 overlap; x (c2) starts when both ended; c3 arrived at 1.0 but waits for x
    assert {
        "c0": (0.25, 1.25),
        "c1": (0.5, 1.5),
        "c2": (1.5, 2.5),
        "c3": (2.5, 3.5),
    } == relative


async def test_policies_run_in_model_order_and_results_come_back_in_model_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(0.1)
    seen: list[str] = []

    async def policy(execution: Any, next: Any) -> Any:
        seen.append(execution.call_id)
        return await next()

    registry.hooks.pre_execute.add(policy)
    batch = await run_tool_calls(registry, _stream(["p", "x", "p", "p"], 0.05), signal=NEVER)

    assert (["c0", "c1", "c2", "c3"], ["p c0", "x c1", "p c2", "p c3"]) == (seen, _texts(batch))


def _kinds(events: Sequence[SessionEvent]) -> list[str]:
    names: dict[type, str] = {
        BatchStartEvent: "start",
        BatchCallEvent: "arrived",
        ToolCallEvent: "call",
        ToolResultEvent: "result",
        BatchEndEvent: "end",
    }
    return [names.get(type(event), type(event).__name__) for event in events]


async def test_every_received_call_is_logged_once_in_model_order_before_its_tool_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = MemorySessionLog()
    await run_tool_calls(_registry(1.0), _stream(["x", "x"], 0.5), signal=NEVER, session=log)
    events = log.events()
    start = events[0]

    assert isinstance(start, BatchStartEvent)
    assert ((), ["c0", "c1"]) == (
        start.calls,
        [e.call.call_id for e in events if isinstance(e, BatchCallEvent)],
    )
    assert ["start", "arrived", "call", "arrived", "result", "call", "result", "end"] == _kinds(
        events
    )
    record = SessionReader(events).batch(start.batch_id)
    assert record is not None
    assert ["c0", "c1"] == [call.call_id for call in record.calls]


@pytest.mark.parametrize("cut", range(2, 8))
async def test_resume_finishes_a_streamed_batch_cut_after_any_event(
    autojump_clock: trio.testing.MockClock, cut: int
) -> None:
    full = MemorySessionLog()
    await run_tool_calls(_registry(1.0), _stream(["p", "x", "p"], 0.5), signal=NEVER, session=full)
    crashed = MemorySessionLog()
    for event in full.events()[:cut]:
        crashed.append(event)
    received = SessionReader(crashed.events()).last_batch()
    assert received is not None

    resumed = await resume_tool_calls(_registry(1.0), crashed, signal=NEVER)

    assert resumed is not None
    check_batch(received.calls, resumed, crashed)
    assert len(received.calls) == len(resumed.results)


async def test_a_stream_that_raises_ends_the_batch_balanced_with_a_tool_stream_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def broken() -> AsyncIterator[ToolCallRequest]:
        yield ToolCallRequest(call_id="c0", name="p", arguments="{}")
        yield ToolCallRequest(call_id="c1", name="x", arguments="{}")
        await trio.sleep(0.1)
        raise ConnectionError("the model's connection dropped")

    log = MemorySessionLog()
    with pytest.raises(ToolStreamError) as caught:
        await run_tool_calls(_registry(1.0), broken(), signal=NEVER, session=log)

    error = caught.value
    # c0 was in flight and finished; c1 (exclusive, behind it) never started
    assert (["p c0", "Error: tool call aborted before dispatch"], "failed") == (
        [first_text(r) for r in error.batch.results],
        getattr(log.events()[-1], "reason", None),
    )
    assert isinstance(error.__cause__, ConnectionError)
    check_batch(
        [ToolCallRequest(call_id=c, name=n, arguments="{}") for c, n in (("c0", "p"), ("c1", "x"))],
        error.batch,
        log,
    )


async def test_an_item_that_is_not_a_call_fails_the_stream_naming_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def odd() -> AsyncIterator[object]:
        yield {"name": "p"}

    with pytest.raises(ToolStreamError) as caught:
        await run_tool_calls(_registry(), odd(), signal=NEVER)  # pyright: ignore[reportArgumentType]

    assert "the call stream gave dict, not a ToolCallRequest (call 0)" == str(
        caught.value.__cause__
    )
    assert () == caught.value.batch.results


async def test_the_signal_stops_reading_closes_the_stream_and_aborts_what_did_not_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    closed: list[bool] = []
    controller = CancelController()
    log = MemorySessionLog()

    async def interrupt() -> None:
        await trio.sleep(0.6)
        controller.cancel("the user pressed Ctrl-C")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt)
        batch = await run_tool_calls(
            _registry(1.0),
            _stream(["p", "x", "p", "p"], 0.25, closed),
            signal=controller.signal,
            session=log,
        )

    # c0 ran (aborted by the signal), c1 arrived but never started; c2, c3 never arrived
    assert (["ABORTED", "ABORTED_BEFORE_DISPATCH"], [True], "aborted") == (
        [r.error.code if r.error else "ok" for r in batch.results],
        closed,
        getattr(log.events()[-1], "reason", None),
    )


async def test_cancelling_the_callers_scope_mid_stream_closes_the_stream_and_balances_the_log(
    autojump_clock: trio.testing.MockClock,
) -> None:
    closed: list[bool] = []
    log = MemorySessionLog()
    with trio.move_on_after(0.6):
        await run_tool_calls(
            _registry(1.0), _stream(["p", "p", "p", "p"], 0.25, closed), signal=NEVER, session=log
        )

    events = log.events()
    called = [e.call_id for e in events if isinstance(e, ToolCallEvent)]
    resulted = [e.call_id for e in events if isinstance(e, ToolResultEvent)]
    assert ([True], ["c0", "c1"], called, "aborted") == (
        closed,
        called,
        resulted,
        getattr(events[-1], "reason", None),
    )


async def test_batch_listeners_see_the_calls_known_at_the_start_and_get_every_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(0.1)
    seen: list[tuple[int, int]] = []

    async def listener(info: ToolBatchInfo, next: Any) -> ToolBatch:
        batch = await next()
        seen.append((len(info.calls), len(batch.results)))
        return batch

    registry.hooks.batch.add(listener)
    await run_tool_calls(registry, _stream(["p", "p", "p"], 0.1), signal=NEVER)

    assert [(0, 3)] == seen


async def test_a_policy_that_allows_lets_streamed_calls_run_and_a_plain_list_is_unchanged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(1.0)

    async def allow(execution: Any, next: Any) -> Any:
        return Allow()

    registry.hooks.pre_execute.add(allow)
    calls = [ToolCallRequest(call_id=f"c{i}", name="p", arguments="{}") for i in range(3)]
    begin = trio.current_time()
    listed = await run_tool_calls(registry, calls, signal=NEVER)
    listed_time = trio.current_time() - begin
    streamed = await run_tool_calls(registry, _stream(["p"] * 3, 0.0), signal=NEVER)

    assert (1.0, _texts(listed)) == (listed_time, _texts(streamed))


# --- a real SIGKILL while the model still streams -------------------------------------------

_CHILD = (
    OPEN_LOG
    + """
import sys
import trio
from dsh_tools import CancelSignal, ToolCallRequest, ToolDefinition, ToolRegistry, run_tool_calls

path, kind, starts = sys.argv[1], sys.argv[2], sys.argv[3]

def tool(name, parallel, idempotent):
    async def body(args, context):
        with open(starts, "a") as file:
            file.write(f"child {context.call_id}\\n")
        await trio.sleep(0.2)
        return f"{name} {context.call_id}"
    return ToolDefinition(name=name, description=name, parameters={}, execute=body,
                          is_concurrency_safe=(lambda _a: True) if parallel else None,
                          idempotent=idempotent)

registry = ToolRegistry()
registry.register(tool("put", True, True))
registry.register(tool("send", True, False))

async def calls():
    for i, name in enumerate(["put", "send", "put", "send", "put", "send"]):
        await trio.sleep(0.05)
        yield ToolCallRequest(call_id=f"c{i}", name=name, arguments="{}")

async def main():
    log = open_log(kind, path)
    await run_tool_calls(registry, calls(), signal=CancelSignal.never(), session=log)
    print("finished", flush=True)

trio.run(main)
"""
)


def _parent_registry() -> ToolRegistry:
    def tool(name: str, idempotent: bool) -> ToolDefinition:
        async def body(_args: object, context: ToolRunContext) -> str:
            return f"{name} {context.call_id} again"

        return ToolDefinition(
            name=name,
            description=name,
            parameters={},
            execute=body,
            is_concurrency_safe=lambda _args: True,
            idempotent=idempotent,
        )

    registry = ToolRegistry()
    registry.register(tool("put", True))
    registry.register(tool("send", False))
    return registry


@pytest.mark.parametrize("kind", DURABLE_LOGS, ids=[kind.name for kind in DURABLE_LOGS])
@pytest.mark.parametrize("kill_after", [1, 3])
def test_a_streamed_batch_killed_mid_stream_is_finished_by_resume(
    tmp_path: Path, kind: FileLogKind, kill_after: int
) -> None:
    log_path = tmp_path / kind.file_name
    starts = tmp_path / "starts.txt"
    kind.start()
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(log_path), kind.name, str(starts)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        deadline = time.monotonic() + 30  # bounded: a child that hangs fails the test
        while not starts.exists() or len(starts.read_text().splitlines()) < kill_after:
            assert child.poll() is None, "the child finished before the kill"
            assert time.monotonic() < deadline, "the child never started enough bodies"
            time.sleep(0.002)
        child.send_signal(signals.SIGKILL)
        child.wait(timeout=30)
    assert -signals.SIGKILL == child.returncode

    with kind.open(log_path) as log:
        before = log.events()
        received = SessionReader(before).last_batch()
        assert received is not None
        assert received.is_open
        committed = {e.call_id for e in before if isinstance(e, ToolResultEvent)}
        called = {e.call_id for e in before if isinstance(e, ToolCallEvent)}

        async def main() -> ToolBatch | None:
            return await resume_tool_calls(_parent_registry(), log, signal=NEVER)

        resumed = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert resumed is not None
        check_batch(received.calls, resumed, log)

    for call, result in zip(received.calls, resumed.results, strict=True):
        text = first_text(result)
        if call.call_id in committed:
            assert f"{call.name} {call.call_id}" == text
        elif call.call_id in called and call.name == "send":
            assert text.startswith("Error: tool call interrupted")  # never a second body
        else:
            assert f"{call.name} {call.call_id} again" == text
    # every received call has exactly one tool/result in the file
    assert [call.call_id for call in received.calls] == [
        e.call_id for e in kind.read(log_path) if isinstance(e, ToolResultEvent)
    ]
