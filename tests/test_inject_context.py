"""``inject_context``: a context put into the running batch's FIFO at call time."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    CancelSignal,
    ContextMessageEvent,
    MemorySessionLog,
    SchemaSpec,
    TextBlock,
    ToolBatchStatistics,
    ToolCallEvent,
    ToolDefinition,
    ToolRegistry,
    ToolResultEvent,
    ToolReturn,
    ToolRunContext,
    batch_statistics,
    inject_context,
    run_tool_calls,
)
from support import (
    plugin_context,
    plugin_label,
    registry_with,
    request,
    run_calls,
    spec_tool,
    tool,
)


def test_inject_context_outside_a_batch_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError) as caught:
        inject_context(plugin_context("x"))

    assert "inject_context() called outside an active batch" == str(caught.value)


async def test_an_injection_while_an_earlier_call_runs_precedes_later_commits_and_follows_results() -> (
    None
):
    injected = trio.Event()
    registry = ToolRegistry()

    async def slow(args: Any, context: ToolRunContext) -> ToolReturn:
        await injected.wait()
        context.defer_context(plugin_context("slow's own"))
        return "slow"

    async def injector(args: Any, context: ToolRunContext) -> ToolReturn:
        inject_context(plugin_context("injected", meta={"rows": [1]}))
        context.defer_context(plugin_context("injector's own"))
        injected.set()
        return "fast"

    for name, body in (("slow", slow), ("injector", injector)):
        registry.register(tool(name, body, parallel=True))
    session = MemorySessionLog()

    batch = await run_tool_calls(
        registry,
        [request("c1", "slow"), request("c2", "injector")],
        signal=CancelSignal.never(),
        session=session,
    )

    events = session.events()
    assert (
        ["injected", "slow's own", "injector's own"],
        [BatchStartEvent, ToolCallEvent, ToolCallEvent, ToolResultEvent, ToolResultEvent]
        + [ContextMessageEvent] * 3
        + [BatchEndEvent],
        {"rows": (1,)},
    ) == (
        [plugin_label(context) for context in batch.contexts],
        [type(event) for event in events],
        batch.contexts[0].meta,
    )


async def test_a_context_that_is_not_lossless_json_is_refused_at_injection() -> None:
    registry = ToolRegistry()

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        inject_context(plugin_context("bad", meta={"when": b"now"}))
        return "unreachable"

    registry.register(ToolDefinition(name="t", description="d", parameters={}, execute=body))

    batch = await run_calls(registry, request("c1", "t"))

    block = batch.results[0].content[0]
    assert (
        TextBlock(text="Error: agent context must be losslessly JSON-serializable"),
        (),
    ) == (block, batch.contexts)


async def test_an_injection_after_the_batch_settled_is_refused() -> None:
    registry = ToolRegistry()
    captured: list[contextvars.Context] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        captured.append(contextvars.copy_context())
        return "ok"

    registry.register(ToolDefinition(name="t", description="d", parameters={}, execute=body))
    await run_calls(registry, request("c1", "t"))

    with pytest.raises(RuntimeError) as caught:
        captured[0].run(inject_context, plugin_context("late"))

    assert "inject_context() called outside an active batch" == str(caught.value)


# --- batch_statistics ---------------------------------------------------------------------------


async def test_batch_statistics_tell_a_body_how_far_its_batch_has_got(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: dict[str, ToolBatchStatistics] = {}

    async def body(args: Any, context: ToolRunContext) -> str:
        await trio.sleep(float(args["wait"]))
        seen[context.call_id] = batch_statistics()
        return "ok"

    parameters: SchemaSpec = {"wait": {"type": "number", "required": True}}
    registry = registry_with(
        spec_tool("p", body, parameters=parameters, parallel=True),
        spec_tool("x", body, parameters=parameters),
    )
    calls = [
        request("c1", "p", '{"wait": 1}'),
        request("c2", "p", '{"wait": 2}'),
        request("c3", "x", '{"wait": 0}'),
    ]

    await run_calls(registry, *calls)

    assert {
        "c1": ToolBatchStatistics(calls=3, started=2, committed=0, in_flight=2),
        "c2": ToolBatchStatistics(calls=3, started=2, committed=1, in_flight=1),
        "c3": ToolBatchStatistics(calls=3, started=3, committed=2, in_flight=0),
    } == seen


def test_batch_statistics_outside_a_batch_is_an_error() -> None:
    with pytest.raises(
        RuntimeError, match=r"^batch_statistics\(\) called outside an active batch$"
    ):
        batch_statistics()
