"""The scheduler brackets a batch's events with ``batch/start`` .. ``batch/end``, logs each
result's contexts, and gives every body its attempt and idempotency key."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    MemorySessionLog,
    SessionEvent,
    ToolCallEvent,
    ToolDefinition,
    ToolResultEvent,
    ToolRunContext,
    define_tool,
)
from dsh_tools.testing import check_batch
from support import execution_input, plugin_context, registry_with, request, run_calls, tool


def _kinds(events: list[SessionEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


def _end(events: list[SessionEvent]) -> BatchEndEvent:
    end = events[-1]
    assert isinstance(end, BatchEndEvent)
    return end


async def test_batch_start_lists_every_call_before_the_first_tool_call() -> None:
    session = MemorySessionLog()
    calls = [request("c1", "t"), request("c2", "t", '{"a": 1}')]
    batch = await run_calls(registry_with(tool()), *calls, session=session)
    events = session.events()
    start = events[0]
    assert isinstance(start, BatchStartEvent)
    assert (tuple(calls), start.batch_id, "completed") == (
        start.calls,
        _end(events).batch_id,
        _end(events).reason,
    )
    check_batch(calls, batch, session)


async def test_two_batches_get_two_fresh_batch_ids() -> None:
    session = MemorySessionLog()
    registry = registry_with(tool())
    await run_calls(registry, request("c1", "t"), session=session)
    await run_calls(registry, request("c1", "t"), session=session)
    ids = [e.batch_id for e in session.events() if isinstance(e, BatchStartEvent)]
    assert 2 == len(set(ids))


async def test_a_batch_whose_signal_fired_ends_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(_args: object, _context: ToolRunContext) -> str:
        await trio.sleep(10)
        return "late"

    controller = CancelController()
    session = MemorySessionLog()
    async with trio.open_nursery() as nursery:

        async def interrupt() -> None:
            await trio.sleep(1)
            controller.cancel("esc")

        nursery.start_soon(interrupt)
        batch = await run_calls(
            registry_with(tool("slow", slow)),
            request("c1", "slow"),
            request("c2", "slow"),
            signal=controller.signal,
            session=session,
        )
    assert "aborted" == _end(session.events()).reason
    check_batch([request("c1", "slow"), request("c2", "slow")], batch, session)


async def test_a_batch_that_raised_ends_failed_after_balancing() -> None:
    async def leave(_args: object, _context: ToolRunContext) -> str:
        raise SystemExit(3)  # no result holds it: it leaves run_tool_calls

    session = MemorySessionLog()
    with pytest.raises(SystemExit):
        await run_calls(
            registry_with(tool("p"), tool("exit", leave)),
            request("c1", "p"),
            request("c2", "exit"),
            request("c3", "p"),
            session=session,
        )
    events = session.events()
    assert [
        "BatchStartEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "BatchEndEvent",
    ] == _kinds(events)
    assert "failed" == _end(events).reason


async def test_a_tool_result_carries_the_result_s_contexts() -> None:
    async def noting(_args: object, context: ToolRunContext) -> str:
        context.defer_context(plugin_context("seen"))
        return "ok"

    session = MemorySessionLog()
    batch = await run_calls(registry_with(tool("n", noting)), request("c1", "n"), session=session)
    (result,) = [e for e in session.events() if isinstance(e, ToolResultEvent)]
    assert (plugin_context("seen"),) == result.contexts == batch.results[0].additional_contexts


async def test_a_body_in_a_batch_gets_attempt_1_and_the_batch_s_idempotency_key() -> None:
    seen: list[tuple[int, str]] = []

    async def body(_args: object, context: ToolRunContext) -> str:
        seen.append((context.attempt, context.idempotency_key))
        return "ok"

    session = MemorySessionLog()
    await run_calls(registry_with(tool("t", body)), request("c1", "t"), session=session)
    start = session.events()[0]
    assert isinstance(start, BatchStartEvent)
    assert [(1, f"{start.batch_id}/c1")] == seen


async def test_a_body_outside_a_batch_has_the_call_id_as_its_idempotency_key() -> None:
    seen: list[tuple[int, str]] = []

    async def body(_args: object, context: ToolRunContext) -> str:
        seen.append((context.attempt, context.idempotency_key))
        return "ok"

    await registry_with(tool("t", body)).execute(execution_input("t", call_id="x9"))
    assert [(1, "x9")] == seen


def test_a_tool_is_not_idempotent_unless_it_says_so() -> None:
    plain = tool()
    marked = define_tool(
        name="put", description="d", parameters={}, execute=tool().execute, idempotent=True
    )
    assert (False, True) == (plain.idempotent, marked.idempotent)


def test_idempotent_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="idempotent must be a bool, not int"):
        ToolDefinition(
            name="t",
            description="d",
            parameters={},
            execute=tool().execute,
            idempotent=1,  # pyright: ignore[reportArgumentType]
        )


async def test_an_empty_batch_writes_no_bracket() -> None:
    session = MemorySessionLog()
    await run_calls(registry_with(tool()), session=session)
    assert [] == session.events()


def test_a_tool_call_of_a_first_attempt_is_attempt_1() -> None:
    assert 1 == ToolCallEvent(turn=0, step=0, call_id="c", name="t", arguments="{}").attempt
