"""Batches as an agent framework runs them: two at once on one registry, one inside another's
tool body, and one handed a session log that was already closed."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    CancelSignal,
    ContextMessageEvent,
    FrozenJsonObject,
    HookContext,
    JsonlSessionLog,
    MemorySessionLog,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    UserSource,
    define_tool,
    inject_context,
    run_tool_calls,
)
from support import registry_with, request, run_calls, string_tool


def _text(batch: ToolBatch) -> list[str]:
    return [
        "".join(block.text for block in result.content if isinstance(block, TextBlock))
        for result in batch.results
    ]


def _context(text: str) -> HookContext:
    return HookContext(content=(TextBlock(text=text),), source=UserSource())


def _echo_registry() -> ToolRegistry:
    async def echo(args: FrozenJsonObject, context: ToolRunContext) -> str:
        word = str(args["word"])
        await trio.sleep(1 if word.startswith("slow") else 0.5)
        inject_context(_context(f"saw {word}"))
        return word

    return registry_with(
        string_tool("echo", echo, field="word", description="Echo a word.", parallel=True)
    )


def _calls(*words: str) -> list[ToolCallRequest]:
    return [
        ToolCallRequest(call_id=word, name="echo", arguments=f'{{"word": "{word}"}}')
        for word in words
    ]


async def test_two_batches_at_once_on_one_registry_keep_their_own_results_and_contexts(
    autojump_clock: trio.abc.Clock,
) -> None:
    registry = _echo_registry()
    log = MemorySessionLog()
    batches: dict[str, ToolBatch] = {}

    async def run(name: str, *words: str) -> None:
        batches[name] = await run_tool_calls(
            registry, _calls(*words), signal=CancelSignal.never(), session=log
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "a", "slow-a1", "a2")
        nursery.start_soon(run, "b", "b1", "slow-b2")

    assert 1.0 == trio.current_time()
    assert ["slow-a1", "a2"] == _text(batches["a"])
    assert ["b1", "slow-b2"] == _text(batches["b"])
    assert [_context("saw a2"), _context("saw slow-a1")] == list(batches["a"].contexts)
    assert [_context("saw b1"), _context("saw slow-b2")] == list(batches["b"].contexts)
    # the shared log holds every call once, each result after its own call
    events = log.events()
    call_seqs = {e.call_id: i for i, e in enumerate(events) if isinstance(e, ToolCallEvent)}
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert {"slow-a1", "a2", "b1", "slow-b2"} == set(call_seqs)
    assert all((call_seqs[r.call_id],) == r.source_event_seqs for r in results)
    assert 4 == sum(isinstance(e, ContextMessageEvent) for e in events)


async def test_a_tool_body_can_run_a_batch_of_its_own_and_its_contexts_stay_apart(
    autojump_clock: trio.abc.Clock,
) -> None:
    registry = _echo_registry()
    log = MemorySessionLog()

    async def delegate(args: FrozenJsonObject, context: ToolRunContext) -> str:
        inner = await run_tool_calls(registry, _calls("inner"), signal=context.signal, session=log)
        inject_context(_context("outer context"))
        return f"inner said {_text(inner)[0]} with {len(inner.contexts)} context(s)"

    registry.register(
        define_tool(name="delegate", description="Delegate.", parameters={}, execute=delegate)
    )

    batch = await run_tool_calls(
        registry,
        [ToolCallRequest(call_id="outer", name="delegate", arguments="{}")],
        signal=CancelSignal.never(),
        session=log,
    )

    assert ["inner said inner with 1 context(s)"] == _text(batch)
    assert (_context("outer context"),) == batch.contexts
    assert [
        ("start", None),
        ("call", "outer"),
        ("start", None),
        ("call", "inner"),
        ("result", "inner"),
        ("context", None),
        ("end", None),
        ("result", "outer"),
        ("context", None),
        ("end", None),
    ] == [
        (
            "call"
            if isinstance(e, ToolCallEvent)
            else "result"
            if isinstance(e, ToolResultEvent)
            else "start"
            if isinstance(e, BatchStartEvent)
            else "end"
            if isinstance(e, BatchEndEvent)
            else "context",
            getattr(e, "call_id", None),
        )
        for e in log.events()
    ]


async def test_a_batch_given_a_closed_session_log_fails_before_any_body_runs(
    tmp_path: Path,
) -> None:
    ran: list[str] = []

    async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
        ran.append(context.call_id)
        return "ran"

    registry = ToolRegistry()
    registry.register(define_tool(name="t", description="T.", parameters={}, execute=body))
    log = JsonlSessionLog(tmp_path / "session.jsonl")
    log.close()

    with pytest.raises(ValueError, match="append to a closed JsonlSessionLog"):
        await run_calls(registry, request("c1", "t"), session=log)
    assert [] == ran
