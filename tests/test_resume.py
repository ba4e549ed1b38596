"""``resume_tool_calls`` and ``recover_session``: a batch finished from its session log.

A log cut at an event boundary is what a process that stopped at that moment leaves (events
are appended one at a time, in order), so each test records a whole batch, cuts its log, and
finishes the cut log.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    CancelSignal,
    ContextMessageEvent,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    SessionEvent,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolDefinition,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    recover_session,
    resume_tool_calls,
    run_tool_calls,
)
from dsh_tools.testing import check_batch
from support import first_text, note_post_execute, outcome_code, plugin_context, request

NEVER = CancelSignal.never()
INTERRUPTED_TEXT = (
    "Error: tool call interrupted: the process stopped while it ran; its effects are unknown"
)


@attrs.define
class Lab:
    """Tools whose bodies record every run: (call id, attempt, idempotency key)."""

    runs: list[tuple[str, int, str]] = attrs.Factory(lambda: list[tuple[str, int, str]]())

    def tool(self, name: str, *, parallel: bool, idempotent: bool) -> ToolDefinition:
        async def body(args: object, context: ToolRunContext) -> str:
            self.runs.append((context.call_id, context.attempt, context.idempotency_key))
            await trio.sleep(1)
            context.defer_context(plugin_context(f"from {context.call_id}"))
            return f"{name} {context.call_id}"

        return ToolDefinition(
            name=name,
            description=name,
            parameters={},
            execute=body,
            is_concurrency_safe=(lambda _args: True) if parallel else None,
            idempotent=idempotent,
        )

    def registry(self) -> ToolRegistry:
        """``put`` (parallel, idempotent), ``send`` (parallel), ``rm`` (exclusive),
        ``get`` (exclusive, idempotent)."""
        registry = ToolRegistry()
        registry.register(self.tool("put", parallel=True, idempotent=True))
        registry.register(self.tool("send", parallel=True, idempotent=False))
        registry.register(self.tool("rm", parallel=False, idempotent=False))
        registry.register(self.tool("get", parallel=False, idempotent=True))
        return registry

    def ran(self) -> list[str]:
        return [call_id for call_id, _, _ in self.runs]


CALLS = (
    request("c1", "put"),
    request("c2", "send"),
    request("c3", "rm"),
    request("c4", "get"),
    request("c5", "put"),
    request("c6", "send"),
)


async def record(calls: Sequence[ToolCallRequest] = CALLS) -> tuple[ToolBatch, list[SessionEvent]]:
    """The batch and the whole log of an uninterrupted run."""
    session = MemorySessionLog()
    batch = await run_tool_calls(Lab().registry(), calls, signal=NEVER, session=session)
    return batch, session.events()


def cut(events: Sequence[SessionEvent], count: int) -> MemorySessionLog:
    """A log holding the first ``count`` events: what a process stopped there leaves."""
    session = MemorySessionLog()
    for event in events[:count]:
        session.append(event)
    return session


def index_of(
    events: Sequence[SessionEvent], kind: type[ToolCallEvent | ToolResultEvent], call_id: str
) -> int:
    return next(
        i
        for i, e in enumerate(events)
        if isinstance(e, ToolCallEvent | ToolResultEvent)
        and isinstance(e, kind)
        and e.call_id == call_id
    )


# --- which batch ---------------------------------------------------------------------------


async def test_a_log_without_a_batch_has_nothing_to_resume() -> None:
    session = MemorySessionLog()
    assert None is await resume_tool_calls(Lab().registry(), session, signal=NEVER)
    assert () == recover_session(session)
    assert [] == session.events()


async def test_a_finished_batch_is_not_resumed_and_nothing_is_appended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    session = cut(events, len(events))
    lab = Lab()
    assert None is await resume_tool_calls(lab.registry(), session, signal=NEVER)
    assert (events, []) == (session.events(), lab.runs)


async def test_a_suspended_batch_is_resumed(autojump_clock: trio.testing.MockClock) -> None:
    batch, events = await record()
    start = events[0]
    assert isinstance(start, BatchStartEvent)
    session = cut(events, index_of(events, ToolCallEvent, "c3"))
    session.append(BatchEndEvent(turn=0, step=0, batch_id=start.batch_id, reason="suspended"))
    resumed = await resume_tool_calls(Lab().registry(), session, signal=NEVER)
    assert resumed is not None
    assert batch.results == resumed.results
    assert "completed" == getattr(session.events()[-1], "reason", None)


async def test_an_open_batch_before_a_finished_one_is_the_one_resumed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    batch, events = await record()
    count = index_of(events, ToolResultEvent, "c1")  # c1 and c2 dangling
    session = cut(events, count)
    later = [request("d1", "put")]
    await run_tool_calls(Lab().registry(), later, signal=NEVER, session=session)
    lab = Lab()
    resumed = await resume_tool_calls(lab.registry(), session, signal=NEVER)
    assert resumed is not None
    assert (["put c1", INTERRUPTED_TEXT], ["c1", "c3", "c4", "c5", "c6"]) == (
        [first_text(r) for r in resumed.results[:2]],
        sorted(lab.ran()),
    )
    assert resumed.results[2:] == batch.results[2:]
    # both batches have ended now
    assert None is await resume_tool_calls(lab.registry(), session, signal=NEVER)


async def test_a_batch_whose_tool_body_ran_a_batch_of_its_own_is_resumed_around_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    session = MemorySessionLog()
    lab = Lab()
    registry = lab.registry()

    async def delegate(_args: object, context: ToolRunContext) -> str:
        inner = await run_tool_calls(
            registry, [request("i1", "put")], signal=context.signal, session=session
        )
        return f"inner said {first_text(inner.results[0])}"

    registry.register(
        ToolDefinition(name="delegate", description="d", parameters={}, execute=delegate)
    )
    outer = [request("o1", "delegate"), request("o2", "put")]
    await run_tool_calls(registry, outer, signal=NEVER, session=session)
    events = session.events()
    # the process stopped after the inner batch ended, before o1 committed
    inner_end = next(
        i for i, e in enumerate(events) if isinstance(e, BatchEndEvent) and i < len(events) - 1
    )
    cut_session = cut(events, inner_end + 1)
    resumed = await resume_tool_calls(registry, cut_session, signal=NEVER)
    assert resumed is not None
    assert [INTERRUPTED_TEXT, "put o2"] == [first_text(r) for r in resumed.results]
    o1_result = cut_session.events()[index_of(cut_session.events(), ToolResultEvent, "o1")]
    assert isinstance(o1_result, ToolResultEvent)
    assert (index_of(events, ToolCallEvent, "o1"),) == o1_result.source_event_seqs


# --- the three kinds of calls --------------------------------------------------------------


async def test_committed_results_are_returned_as_logged_and_nothing_runs_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    batch, events = await record()
    session = cut(events, len(events) - 1)  # everything but the batch/end
    lab = Lab()
    registry = lab.registry()
    notes: list[str] = []
    note_post_execute(registry, notes)
    resumed = await resume_tool_calls(registry, session, signal=NEVER)
    assert (batch, [], []) == (resumed, lab.runs, notes)
    assert events == session.events()  # the same batch/end, of the same batch id
    check_batch(CALLS, batch, session)


async def test_a_dangling_call_of_a_tool_that_is_not_idempotent_is_interrupted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    # c1 and c2 started together; the process stopped before either committed
    count = index_of(events, ToolResultEvent, "c1")
    session = cut(events, count)
    lab = Lab()
    resumed = await resume_tool_calls(lab.registry(), session, signal=NEVER)
    assert resumed is not None
    assert INTERRUPTED_TEXT == first_text(resumed.results[1])
    assert "TOOL_INTERRUPTED" == outcome_code(resumed.results[1])
    # c2 never runs again; the result points at its only tool/call
    assert "c2" not in lab.ran()
    result = session.events()[index_of(session.events(), ToolResultEvent, "c2")]
    assert isinstance(result, ToolResultEvent)
    assert (index_of(events, ToolCallEvent, "c2"),) == result.source_event_seqs
    check_batch(CALLS, resumed, session)


async def test_a_dangling_call_of_an_idempotent_tool_runs_again_with_the_next_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    first = Lab()
    session = MemorySessionLog()
    await run_tool_calls(first.registry(), CALLS, signal=NEVER, session=session)
    events = session.events()
    session = cut(events, index_of(events, ToolResultEvent, "c1"))
    lab = Lab()
    resumed = await resume_tool_calls(lab.registry(), session, signal=NEVER)
    assert resumed is not None
    assert "put c1" == first_text(resumed.results[0])
    (c1_first,) = [run for run in first.runs if run[0] == "c1"]
    (c1_again,) = [run for run in lab.runs if run[0] == "c1"]
    # the same idempotency key on both attempts
    assert (1, 2, c1_first[2]) == (c1_first[1], c1_again[1], c1_again[2])
    attempts = [
        e.attempt for e in session.events() if isinstance(e, ToolCallEvent) and e.call_id == "c1"
    ]
    assert [1, 2] == attempts
    check_batch(CALLS, resumed, session)


async def test_abort_interrupts_every_dangling_call_idempotent_or_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    session = cut(events, index_of(events, ToolResultEvent, "c1"))
    lab = Lab()
    resumed = await resume_tool_calls(lab.registry(), session, signal=NEVER, on_interrupted="abort")
    assert resumed is not None
    assert ["TOOL_INTERRUPTED"] * 2 == [outcome_code(r) for r in resumed.results[:2]]
    assert ["c3", "c4", "c5", "c6"] == sorted(lab.ran())
    check_batch(CALLS, resumed, session)


async def test_calls_that_never_started_run_through_the_scheduler(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    # stopped after c4 committed: c5 and c6 never started; they share a pool
    session = cut(events, index_of(events, ToolResultEvent, "c4") + 1)
    lab = Lab()
    before = trio.current_time()
    resumed = await resume_tool_calls(lab.registry(), session, signal=NEVER)
    assert resumed is not None
    assert (["c5", "c6"], 1.0) == (sorted(lab.ran()), trio.current_time() - before)
    assert ["put c5", "send c6"] == [first_text(r) for r in resumed.results[4:]]
    check_batch(CALLS, resumed, session)


async def test_the_resumed_batch_equals_the_uninterrupted_one_for_the_same_outcomes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    batch, events = await record()
    # stopped after c3 committed: c4 (idempotent) had started
    session = cut(events, index_of(events, ToolCallEvent, "c4") + 1)
    resumed = await resume_tool_calls(Lab().registry(), session, signal=NEVER)
    assert resumed is not None
    assert batch == resumed
    assert 6 == len(batch.contexts)  # rebuilt from the logged results' contexts


async def test_contexts_logged_before_the_stop_are_not_logged_twice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    batch, events = await record()
    first_context = next(i for i, e in enumerate(events) if isinstance(e, ContextMessageEvent))
    session = cut(events, first_context + 2)
    resumed = await resume_tool_calls(Lab().registry(), session, signal=NEVER)
    assert resumed is not None
    assert batch == resumed
    check_batch(CALLS, resumed, session)


async def test_a_resume_whose_signal_fires_interrupts_the_calls_it_did_not_run_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    session = cut(events, index_of(events, ToolResultEvent, "c1"))
    controller = CancelController()
    controller.cancel("esc")
    lab = Lab()
    resumed = await resume_tool_calls(lab.registry(), session, signal=controller.signal)
    assert resumed is not None
    assert ["TOOL_INTERRUPTED", "TOOL_INTERRUPTED"] + ["ABORTED_BEFORE_DISPATCH"] * 4 == [
        outcome_code(r) for r in resumed.results
    ]
    assert ([], "aborted") == (lab.runs, getattr(session.events()[-1], "reason", None))
    check_batch(CALLS, resumed, session)


async def test_a_resume_cancelled_by_its_caller_still_balances_every_dangling_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    count = index_of(events, ToolResultEvent, "c1")  # c1 and c2 dangling
    session = cut(events, count)
    registry = Lab().registry()

    async def slow_policy(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        await trio.sleep(10)  # c1's policy is still deciding when the caller gives up
        return await next()

    registry.hooks.pre_execute.add(slow_policy)
    with trio.move_on_after(1) as scope:
        await resume_tool_calls(registry, session, signal=NEVER)
    assert scope.cancelled_caught
    added = session.events()[count:]
    assert ["ToolCallEvent", "ToolResultEvent", "ToolResultEvent", "BatchEndEvent"] == [
        type(e).__name__ for e in added
    ]
    c1_again, c1_result, c2_result, end = added
    assert isinstance(c1_again, ToolCallEvent)
    assert isinstance(c1_result, ToolResultEvent)
    assert isinstance(c2_result, ToolResultEvent)
    assert isinstance(end, BatchEndEvent)
    assert (2, (count,), "ABORTED_BEFORE_DISPATCH") == (
        c1_again.attempt,
        c1_result.source_event_seqs,
        c1_result.error and c1_result.error.code,
    )
    assert ((index_of(events, ToolCallEvent, "c2"),), "TOOL_INTERRUPTED", "aborted") == (
        c2_result.source_event_seqs,
        c2_result.error and c2_result.error.code,
        end.reason,
    )


# --- bad input -----------------------------------------------------------------------------


async def test_a_registry_without_a_tool_of_the_batch_gives_that_call_the_unknown_tool_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    session = cut(events, index_of(events, ToolResultEvent, "c1"))
    lab = Lab()
    registry = ToolRegistry()
    registry.register(lab.tool("send", parallel=True, idempotent=False))
    registry.register(lab.tool("rm", parallel=False, idempotent=False))
    registry.register(lab.tool("get", parallel=False, idempotent=True))
    resumed = await resume_tool_calls(registry, session, signal=NEVER)
    assert resumed is not None
    assert ['Error: unknown tool "put"', INTERRUPTED_TEXT, "rm c3", "get c4"] == [
        first_text(r) for r in resumed.results[:4]
    ]
    assert 'Error: unknown tool "put"' == first_text(resumed.results[4])
    check_batch(CALLS, resumed, session)


async def test_a_tool_call_that_disagrees_with_batch_start_is_refused_before_any_append(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    count = index_of(events, ToolResultEvent, "c1")
    tampered = list(events[:count])
    at = index_of(tampered, ToolCallEvent, "c2")
    call = tampered[at]
    assert isinstance(call, ToolCallEvent)
    tampered[at] = attrs.evolve(call, arguments='{"to": "everyone"}')
    session = cut(tampered, count)
    with pytest.raises(ValueError, match="does not match its batch/start"):
        await resume_tool_calls(Lab().registry(), session, signal=NEVER)
    with pytest.raises(ValueError, match="does not match its batch/start"):
        recover_session(session)
    assert tampered == session.events()


async def test_results_out_of_model_order_are_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    tampered = [e for e in events if not (isinstance(e, ToolResultEvent) and e.call_id == "c1")]
    session = cut(tampered, index_of(tampered, ToolResultEvent, "c2") + 1)
    with pytest.raises(ValueError, match="tool/result 'c2' is out of model order"):
        await resume_tool_calls(Lab().registry(), session, signal=NEVER)


async def test_a_tool_call_of_a_call_the_batch_does_not_list_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    count = index_of(events, ToolResultEvent, "c1")
    stranger = ToolCallEvent(turn=0, step=0, call_id="x9", name="put", arguments="{}")
    session = cut([*events[:count], stranger], count + 1)
    with pytest.raises(ValueError, match="tool/call 'x9' is not a call of it"):
        await resume_tool_calls(Lab().registry(), session, signal=NEVER)


async def test_a_tool_call_that_skips_a_call_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    skipped = [e for e in events if not (isinstance(e, ToolCallEvent) and e.call_id == "c1")]
    session = cut(skipped, index_of(skipped, ToolCallEvent, "c2") + 1)
    with pytest.raises(ValueError, match=r"tool/call 'c2' \(attempt 1\) is out of model order"):
        await resume_tool_calls(Lab().registry(), session, signal=NEVER)


async def test_a_batch_whose_calls_repeat_a_call_id_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = [request("c1", "put"), request("c1", "put")]
    _, events = await record(calls)
    session = cut(events, 2)
    with pytest.raises(ValueError, match=r"its calls repeat a call id.*recover_session"):
        await resume_tool_calls(Lab().registry(), session, signal=NEVER)
    assert events[:2] == session.events()


async def test_recover_session_closes_a_batch_that_repeats_a_call_id_by_position(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = [request("c1", "send"), request("c1", "rm"), request("c2", "send")]
    _, events = await record(calls)
    # stopped after the first c1 committed, while the second c1 ran; c2 never started
    rm_call = next(
        i for i, e in enumerate(events) if isinstance(e, ToolCallEvent) and e.name == "rm"
    )
    session = cut(events, rm_call + 1)
    # the loop went on without resuming: a later batch ran and completed
    await run_tool_calls(Lab().registry(), [request("d1", "put")], signal=NEVER, session=session)
    before = len(session.events())
    with pytest.raises(ValueError, match="repeat a call id"):
        await resume_tool_calls(Lab().registry(), session, signal=NEVER)

    recovered = recover_session(session)

    assert ["send c1", INTERRUPTED_TEXT, "Error: tool call aborted before dispatch"] == [
        " ".join(b.text for b in e.content if isinstance(b, TextBlock)) for e in recovered
    ]
    added = session.events()[before:]
    interrupted = added[0]
    assert isinstance(interrupted, ToolResultEvent)
    assert ("c1", (rm_call,)) == (interrupted.call_id, interrupted.source_event_seqs)
    assert "aborted" == getattr(added[-1], "reason", None)
    # nothing is open any more: resumes find nothing, the session goes on
    assert None is await resume_tool_calls(Lab().registry(), session, signal=NEVER)
    assert () == recover_session(session)


async def test_a_session_that_is_not_a_log_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="session must be a SessionLog"):
        await resume_tool_calls(Lab().registry(), [], signal=NEVER)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="session must be a SessionLog"):
        recover_session(None)  # pyright: ignore[reportArgumentType]


async def test_approvals_that_are_not_a_mapping_are_a_type_error() -> None:
    with pytest.raises(TypeError, match="approvals must map call ids to outcomes, not object"):
        await resume_tool_calls(
            Lab().registry(), MemorySessionLog(), signal=NEVER, approvals=object()
        )


async def test_an_unknown_on_interrupted_is_a_value_error() -> None:
    with pytest.raises(ValueError, match='on_interrupted must be "rerun-idempotent" or "abort"'):
        await resume_tool_calls(
            Lab().registry(),
            MemorySessionLog(),
            signal=NEVER,
            on_interrupted="retry",  # pyright: ignore[reportArgumentType]
        )


# --- recover_session -----------------------------------------------------------------------


async def test_recover_closes_the_batch_without_running_anything(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _, events = await record()
    # stopped while c1 and c2 ran
    session = cut(events, index_of(events, ToolResultEvent, "c1"))
    results = recover_session(session)
    assert [INTERRUPTED_TEXT] * 2 + ["Error: tool call aborted before dispatch"] * 4 == [
        " ".join(b.text for b in r.content if isinstance(b, TextBlock)) for r in results
    ]
    assert "aborted" == getattr(session.events()[-1], "reason", None)
    batch = ToolBatch(
        results=tuple(
            ToolExecutionResult(
                content=r.content,
                is_error=r.is_error,
                error=r.error,
                meta=r.meta,
                additional_contexts=r.contexts,
            )
            for r in results
        ),
        contexts=(),
    )
    check_batch(CALLS, batch, session)
    # a closed batch is not recovered twice
    assert () == recover_session(session)


# --- every stopping point ------------------------------------------------------------------

TOOL_NAMES = ("put", "send", "rm", "get")
IDEMPOTENT = {"put", "get"}


def _record_on_virtual_time(calls: Sequence[ToolCallRequest]) -> list[SessionEvent]:
    async def main() -> list[SessionEvent]:
        return (await record(calls))[1]

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _resume_cut_on_virtual_time(
    calls: Sequence[ToolCallRequest], events: Sequence[SessionEvent], count: int
) -> None:
    async def main() -> None:
        session = cut(events, count)
        lab = Lab()
        resumed = await resume_tool_calls(lab.registry(), session, signal=NEVER)
        if count == 0 or count == len(events):
            assert resumed is None
            return
        assert resumed is not None
        check_batch(calls, resumed, session)
        logged = events[:count]
        committed = {e.call_id for e in logged if isinstance(e, ToolResultEvent)}
        called = {e.call_id for e in logged if isinstance(e, ToolCallEvent)}
        for index, call in enumerate(calls):
            runs = lab.ran().count(call.call_id)
            if call.call_id in committed:
                assert (0, events_result(events, call.call_id)) == (
                    runs,
                    resumed.results[index],
                )
            elif call.call_id in called and call.name not in IDEMPOTENT:
                assert (0, INTERRUPTED_TEXT) == (runs, first_text(resumed.results[index]))
            else:  # dangling and idempotent, or never started: runs once
                assert (1, f"{call.name} {call.call_id}") == (
                    runs,
                    first_text(resumed.results[index]),
                )

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def events_result(events: Sequence[SessionEvent], call_id: str) -> ToolExecutionResult:
    event = events[index_of(events, ToolResultEvent, call_id)]
    assert isinstance(event, ToolResultEvent)
    return ToolExecutionResult(
        content=event.content,
        is_error=event.is_error,
        error=event.error,
        meta=event.meta,
        additional_contexts=event.contexts,
    )


@settings(max_examples=15, deadline=None)
@given(names=st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=6))
def test_a_log_cut_at_every_event_boundary_resumes_to_a_balanced_batch(names: list[str]) -> None:
    calls = [request(f"c{index}", name) for index, name in enumerate(names)]
    events = _record_on_virtual_time(calls)
    for count in range(len(events) + 1):
        _resume_cut_on_virtual_time(calls, events, count)
