"""asyncio hosts: ``dsh_tools.aio`` runs a batch in trio's guest mode on the running asyncio
loop. Each test is an asyncio program (``asyncio.run``); trio runs on a ``MockClock``, so the
tools' waits are virtual, and cancellation is tested both ways: the asyncio task cancelled
reaches the tools, and trio cancelling a body reaches the asyncio code it awaits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    ApprovalOutcome,
    CancelSignal,
    MemorySessionLog,
    TextBlock,
    ToolCallRequest,
    ToolRegistry,
    ToolResultEvent,
    UserApproval,
    aio,
    ask_before,
    run_tool_calls,
    session_turn,
)


def _run(main: Coroutine[Any, Any, None]) -> None:
    asyncio.run(main)


def _call(call_id: str, name: str, arguments: str = "{}") -> ToolCallRequest:
    return ToolCallRequest(call_id=call_id, name=name, arguments=arguments)


def _clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


def test_a_batch_runs_from_asyncio_with_trio_and_thread_bodies() -> None:
    registry = ToolRegistry()

    @registry.tool(is_concurrency_safe=lambda _args: True)
    async def nap(seconds: float) -> str:
        """Sleep (trio)."""
        await trio.sleep(seconds)
        return f"slept {seconds}"

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add (a plain def: a worker thread)."""
        return a + b

    async def main() -> None:
        batch = await aio.run_tool_calls(
            registry,
            [_call("n1", "nap", '{"seconds": 5}'), _call("a1", "add", '{"a": 2, "b": 3}')],
            clock=_clock(),
        )
        assert [(TextBlock(text="slept 5.0"),), (TextBlock(text="5"),)] == [
            r.content for r in batch.results
        ]

    _run(main())


def test_a_tool_body_awaits_asyncio_code_of_the_host() -> None:
    registry = ToolRegistry()
    queue: asyncio.Queue[str] = asyncio.Queue()

    async def fetch() -> str:  # asyncio code: an asyncio primitive of the host
        return await queue.get()

    @registry.tool
    async def receive() -> str:
        """Wait for the host's message."""
        return await aio.run_asyncio(fetch)

    async def main() -> None:
        queue.put_nowait("from asyncio")
        batch = await aio.run_tool_calls(registry, [_call("r1", "receive")], clock=_clock())
        assert (TextBlock(text="from asyncio"),) == batch.results[0].content

    _run(main())


def test_cancelling_the_asyncio_task_interrupts_the_tools_and_balances_the_log() -> None:
    registry = ToolRegistry()
    session = MemorySessionLog()
    seen: list[str] = []
    asyncio_started = asyncio.Event()

    async def forever() -> None:
        asyncio_started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("asyncio code cancelled")
            raise

    @registry.tool
    async def wait_on_asyncio() -> str:
        """Wait for asyncio code that never ends."""
        try:
            await aio.run_asyncio(forever)
        except trio.Cancelled:
            seen.append("trio body cancelled")
            raise
        return "never"

    async def main() -> None:
        task = asyncio.ensure_future(
            aio.run_tool_calls(registry, [_call("w1", "wait_on_asyncio")], session=session)
        )
        await asyncio_started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _run(main())
    # asyncio -> trio (the body) -> asyncio (the code it awaited), then the log was balanced
    assert ["asyncio code cancelled", "trio body cancelled"] == seen
    (result,) = [e for e in session.events() if isinstance(e, ToolResultEvent)]
    assert (TextBlock(text="Error: tool call aborted"),) == result.content


def test_a_trio_timeout_cancels_the_asyncio_code_a_body_awaits() -> None:
    registry = ToolRegistry()
    seen: list[str] = []
    never = asyncio.Event()

    async def waits() -> None:
        try:
            await never.wait()
        except asyncio.CancelledError:
            seen.append("asyncio code cancelled")
            raise

    @registry.tool(timeout=30)
    async def slow() -> str:
        """Wait on asyncio code longer than the tool's timeout."""
        await aio.run_asyncio(waits)
        return "never"

    async def main() -> None:
        batch = await aio.run_tool_calls(registry, [_call("s1", "slow")], clock=_clock())
        assert "timed out after 30000ms" in str(batch.results[0].content)

    _run(main())
    assert ["asyncio code cancelled"] == seen


def test_a_deferred_batch_is_resumed_from_asyncio() -> None:
    session = MemorySessionLog()
    approval = UserApproval(session)
    ran: list[str] = []

    async def defer(_request: object, _next: object) -> ApprovalOutcome:
        await trio.lowlevel.checkpoint()
        return ApprovalOutcome.DEFERRED

    approval.answerers.add(defer)
    registry = ToolRegistry(approval=approval)

    @registry.tool
    def deploy() -> str:
        """Deploy."""
        ran.append("deployed")
        return "deployed"

    registry.hooks.pre_execute.add(ask_before("deploy"))

    async def suspend() -> None:
        async with session_turn(session, 1):
            await run_tool_calls(
                registry,
                [_call("d1", "deploy")],
                signal=CancelSignal.never(),
                session=session,
                agent="ops",
            )

    async def main() -> None:
        await aio.run(suspend)
        assert [] == ran

        resumed = await aio.resume_tool_calls(
            registry, session, agent="ops", approvals={"d1": "allowed-once"}
        )
        assert resumed is not None
        assert (TextBlock(text="deployed"),) == resumed.results[0].content

    _run(main())
    assert ["deployed"] == ran


def test_calling_the_library_from_asyncio_without_the_door_names_it() -> None:
    registry = ToolRegistry()

    async def main() -> None:
        with pytest.raises(
            RuntimeError, match=r"From asyncio, await dsh_tools\.aio\.run_tool_calls"
        ):
            await run_tool_calls(registry, [], signal=CancelSignal.never())

    _run(main())


def test_run_asyncio_outside_a_guest_run_and_the_door_outside_asyncio_are_errors() -> None:
    async def nothing() -> None:
        await asyncio.sleep(0)

    async def in_trio() -> None:
        with pytest.raises(RuntimeError, match="needs an asyncio host"):
            await aio.run_asyncio(nothing)
        with pytest.raises(RuntimeError, match="a running asyncio loop"):
            await aio.run(trio.lowlevel.checkpoint)

    trio.run(in_trio)


def test_an_exception_in_the_guest_reaches_the_asyncio_caller() -> None:
    async def fails() -> None:
        await trio.lowlevel.checkpoint()
        raise LookupError("from trio")

    async def main() -> None:
        with pytest.raises(LookupError, match="from trio"):
            await aio.run(fails)

    _run(main())
