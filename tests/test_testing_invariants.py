"""dsh_tools.testing.check_batch: passes for real batches, and names each broken invariant
of a tampered one with a readable diff."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    CancelSignal,
    ContextMessageEvent,
    HookContext,
    MemorySessionLog,
    PluginSource,
    SessionEvent,
    TextBlock,
    ToolBatch,
    ToolCallRequest,
    ToolErrorInfo,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools._values._execution import new_execution_token
from dsh_tools.testing import check_batch, hang, scripted_tool, sleep

CALLS = (
    ToolCallRequest(call_id="a", name="read", arguments="{}"),
    ToolCallRequest(call_id="b", name="read", arguments="{}"),
    ToolCallRequest(call_id="c", name="note", arguments="{}"),
)


async def note(args: object, context: ToolRunContext) -> str:
    await trio.sleep(0.5)
    context.defer_context(
        HookContext(content=(TextBlock(text="noted"),), source=PluginSource(plugin="notes"))
    )
    return "ok"


def run(session: MemorySessionLog | None = None) -> tuple[ToolBatch, list[SessionEvent]]:
    session = MemorySessionLog() if session is None else session
    registry = ToolRegistry()
    scripted_tool("read", sleep(1)).register(registry)
    registry.register(define_tool(name="note", description="notes", parameters={}, execute=note))

    async def main() -> ToolBatch:
        return await run_tool_calls(registry, CALLS, signal=CancelSignal.never(), session=session)

    batch = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return batch, session.events()


def test_a_real_batch_passes() -> None:
    batch, events = run()
    check_batch(CALLS, batch, events)


def test_earlier_batches_in_the_log_are_ignored() -> None:
    session = MemorySessionLog()
    run(session)
    batch, events = run(session)
    assert 18 == len(events)  # twice: batch/start, 3 calls, 3 results, 1 context, batch/end
    check_batch(CALLS, batch, session)


def test_a_missing_result_is_named() -> None:
    batch, _ = run()
    with pytest.raises(AssertionError, match="3 calls but 2 results"):
        check_batch(CALLS, attrs.evolve(batch, results=batch.results[:2]))


def test_results_out_of_model_order_show_a_diff() -> None:
    batch, events = run()
    results = [i for i, e in enumerate(events) if isinstance(e, ToolResultEvent)]
    swapped = list(events)
    swapped[results[0]], swapped[results[1]] = swapped[results[1]], swapped[results[0]]

    with pytest.raises(AssertionError) as raised:
        check_batch(CALLS, batch, swapped)

    message = str(raised.value)
    assert "tool/result events are not one per call in model order" in message
    assert "--- expected tool/result\n+++ actual tool/result" in message
    assert "@@ -1,3 +1,3 @@\n+b\n a\n-b\n c\n" in message


def test_a_context_among_the_results_breaks_adjacency() -> None:
    batch, events = run()
    context = events[-2]  # the last event is the batch/end
    assert isinstance(context, ContextMessageEvent)
    moved = [*events[:3], context, *events[3:-2], events[-1]]

    with pytest.raises(AssertionError, match="call/result adjacency is broken"):
        check_batch(CALLS, batch, moved)


def test_a_result_pointing_elsewhere_is_named() -> None:
    batch, events = run()
    index = next(i for i, e in enumerate(events) if isinstance(e, ToolResultEvent))
    result = events[index]
    assert isinstance(result, ToolResultEvent)
    tampered = [*events]
    tampered[index] = attrs.evolve(result, source_event_seqs=(99,))

    with pytest.raises(AssertionError, match=r"points at \[99\], not at its tool/call"):
        check_batch(CALLS, batch, tampered)


def test_a_logged_result_that_differs_from_the_returned_one_is_named() -> None:
    batch, events = run()
    other = ToolExecutionResult(content=(TextBlock(text="other"),), is_error=False)
    tampered = attrs.evolve(batch, results=(other, *batch.results[1:]))

    with pytest.raises(AssertionError, match=r"differs from batch.results\[0\]"):
        check_batch(CALLS, tampered, events)


def test_a_lost_context_is_named() -> None:
    batch, _ = run()
    with pytest.raises(AssertionError, match="lacks result contexts in model order: found 0 of 1"):
        check_batch(CALLS, attrs.evolve(batch, contexts=()))


def test_a_non_canonical_abort_is_named() -> None:
    batch, _ = run()
    fake = attrs.evolve(
        batch.results[0],
        content=(TextBlock(text="Error: stopped"),),
        is_error=True,
        error=_abort_info("ABORTED"),
    )
    with pytest.raises(AssertionError, match="has code ABORTED but is not the canonical result"):
        check_batch(CALLS, attrs.evolve(batch, results=(fake, *batch.results[1:])))


def test_an_interrupted_result_under_the_wrong_error_name_is_named() -> None:
    batch, _ = run()
    fake = attrs.evolve(
        batch.results[0],
        content=(
            TextBlock(
                text="Error: tool call interrupted: the process stopped while it ran; "
                "its effects are unknown"
            ),
        ),
        is_error=True,
        error=_abort_info("TOOL_INTERRUPTED"),
    )
    with pytest.raises(
        AssertionError, match="has code TOOL_INTERRUPTED but is not the canonical result"
    ):
        check_batch(CALLS, attrs.evolve(batch, results=(fake, *batch.results[1:])))


def _abort_info(code: str) -> ToolErrorInfo:
    return ToolErrorInfo(name="AbortError", code=code)


async def test_a_body_still_running_after_the_batch_is_named(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    tool = scripted_tool("read", hang())
    tool.register(registry)
    calls = [ToolCallRequest(call_id="a", name="read", arguments="{}")]
    controller = CancelController(deadline=1)
    async with trio.open_nursery() as nursery:
        # the body runs outside any batch: the kit sees it running when the batch is checked
        nursery.start_soon(tool, None, _context("a"))
        batch = await run_tool_calls(registry, calls, signal=controller.signal)
        with pytest.raises(AssertionError, match="the body of read for call a is still running"):
            check_batch(calls, batch, tools=[tool])
        nursery.cancel_scope.cancel()


async def test_aborted_without_a_started_body_is_named(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    tool = scripted_tool("read", sleep(1))
    tool.register(registry)
    calls = [ToolCallRequest(call_id="a", name="read", arguments="{}")]
    controller = CancelController()
    controller.cancel()
    batch = await run_tool_calls(registry, calls, signal=controller.signal)
    relabelled = attrs.evolve(
        batch,
        results=(
            attrs.evolve(
                batch.results[0],
                content=(TextBlock(text="Error: tool call aborted"),),
                error=_abort_info("ABORTED"),
            ),
        ),
    )
    with pytest.raises(AssertionError, match=r"call 0 \(a\) is ABORTED but its body never started"):
        check_batch(calls, relabelled, tools=[tool])


def _context(call_id: str) -> ToolRunContext:
    return ToolRunContext(
        token=new_execution_token(),
        call_id=call_id,
        name="read",
        arguments=None,
        signal=CancelSignal.never(),
    )
