"""Invariants of the scheduler over random batches: parallel/exclusive mixes, durations,
failures, denials, contexts, interrupts at random virtual times and caps 1..4. Each example
runs under its own ``trio.run`` on a fresh virtual clock."""

from __future__ import annotations

import attrs
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    CancelController,
    ContextMessageEvent,
    MemorySessionLog,
    SessionEvent,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolResultEvent,
    run_tool_calls,
)
from test_scheduler import Lab, request


@attrs.frozen
class Call:
    parallel: bool
    duration: float
    fail: bool
    denied: bool
    context: bool


calls_strategy = st.lists(
    st.builds(
        Call,
        parallel=st.booleans(),
        duration=st.sampled_from([0, 0.5, 1, 2, 3]),
        fail=st.booleans(),
        denied=st.booleans(),
        context=st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


@attrs.frozen
class Outcome:
    batch: ToolBatch
    events: list[SessionEvent]
    lab: Lab


def run_batch(calls: list[Call], cap: int, interrupt_at: float | None) -> Outcome:
    lab = Lab()
    session = MemorySessionLog()

    async def main() -> ToolBatch:
        registry = lab.registry()
        registry.guard(lambda execution: "denied" if execution.call_id.endswith("!") else None)
        controller = CancelController()
        requests = [
            request(
                f"c{index}" + ("!" if call.denied else ""),
                "p" if call.parallel else "x",
                d=call.duration,
                **({"fail": f"failure {index}"} if call.fail else {}),
                **({"ctx": f"context {index}"} if call.context else {}),
            )
            for index, call in enumerate(calls)
        ]
        async with trio.open_nursery() as nursery:
            if interrupt_at is not None:

                async def interrupt(delay: float) -> None:
                    await trio.sleep(delay)
                    controller.cancel("esc")

                nursery.start_soon(interrupt, interrupt_at)
            batch = await run_tool_calls(
                registry,
                requests,
                signal=controller.signal,
                max_parallel_tool_calls=cap,
                session=session,
            )
            nursery.cancel_scope.cancel()
        return batch

    batch = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return Outcome(batch=batch, events=session.events(), lab=lab)


def ids(calls: list[Call]) -> list[str]:
    return [f"c{index}" + ("!" if call.denied else "") for index, call in enumerate(calls)]


examples = settings(max_examples=100, deadline=None)
interrupts = st.none() | st.sampled_from([0, 0.25, 0.5, 1, 1.5, 2, 3, 4.5, 6])


@examples
@given(calls=calls_strategy, cap=st.integers(1, 4), interrupt_at=interrupts)
def test_every_call_gets_exactly_one_result_in_model_order(
    calls: list[Call], cap: int, interrupt_at: float | None
) -> None:
    outcome = run_batch(calls, cap, interrupt_at)
    assert len(calls) == len(outcome.batch.results)
    for call_id, call, result in zip(ids(calls), calls, outcome.batch.results, strict=True):
        text = " ".join(b.text for b in result.content if isinstance(b, TextBlock))
        if not result.is_error:
            assert f"done {call_id}" == text
        elif call.denied and result.error is None:
            assert text == "Error: denied"


@examples
@given(calls=calls_strategy, cap=st.integers(1, 4), interrupt_at=interrupts)
def test_exclusive_bodies_never_overlap_and_the_cap_holds(
    calls: list[Call], cap: int, interrupt_at: float | None
) -> None:
    outcome = run_batch(calls, cap, interrupt_at)
    assert not outcome.lab.exclusive_overlapped
    assert outcome.lab.max_running <= cap


@examples
@given(calls=calls_strategy, cap=st.integers(1, 4), interrupt_at=interrupts)
def test_every_tool_call_event_has_exactly_one_result_event_pointing_at_it(
    calls: list[Call], cap: int, interrupt_at: float | None
) -> None:
    events = run_batch(calls, cap, interrupt_at).events
    call_seqs = [seq for seq, e in enumerate(events) if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert ids(calls) == [e.call_id for e in events if isinstance(e, ToolCallEvent)]
    assert ids(calls) == [e.call_id for e in results]
    assert [(seq,) for seq in call_seqs] == [e.source_event_seqs for e in results]
    assert all(pointer[0] < events.index(e) for e in results for pointer in [e.source_event_seqs])


@examples
@given(calls=calls_strategy, cap=st.integers(1, 4), interrupt_at=interrupts)
def test_contexts_come_only_after_every_result(
    calls: list[Call], cap: int, interrupt_at: float | None
) -> None:
    outcome = run_batch(calls, cap, interrupt_at)
    bracketed = outcome.events
    # inside the batch/start .. batch/end bracket (an empty batch has none)
    events = bracketed[1:-1] if calls else bracketed
    tool_events = events[: 2 * len(calls)]
    context_events = events[2 * len(calls) :]

    assert [] == [e for e in tool_events if isinstance(e, ContextMessageEvent)]
    assert [(c.content, c.source, c.meta) for c in outcome.batch.contexts] == [
        (e.content, e.source, e.meta) for e in context_events if isinstance(e, ContextMessageEvent)
    ]
    assert len(context_events) == len(outcome.batch.contexts)


@examples
@given(calls=calls_strategy, cap=st.integers(1, 4), interrupt_at=interrupts)
def test_the_batch_contexts_are_the_results_contexts_in_model_order(
    calls: list[Call], cap: int, interrupt_at: float | None
) -> None:
    batch = run_batch(calls, cap, interrupt_at).batch

    expected = [context for result in batch.results for context in result.additional_contexts]
    assert expected == list(batch.contexts)


@examples
@given(calls=calls_strategy, cap=st.integers(1, 4))
def test_without_an_interrupt_every_started_body_s_context_reaches_the_batch(
    calls: list[Call], cap: int
) -> None:
    batch = run_batch(calls, cap, None).batch

    expected = [
        f"context {index}" for index, call in enumerate(calls) if call.context and not call.denied
    ]
    assert expected == [
        block.text
        for context in batch.contexts
        for block in context.content
        if isinstance(block, TextBlock)
    ]


@examples
@given(calls=calls_strategy, cap=st.integers(1, 4))
def test_without_an_interrupt_no_call_is_aborted(calls: list[Call], cap: int) -> None:
    batch = run_batch(calls, cap, None).batch
    assert [r.error.code for r in batch.results if r.error is not None] == []
