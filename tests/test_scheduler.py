"""The scheduler: barriers, rolling pools, the lane, events, interruption,
structured concurrency. Every timeline runs on trio's virtual clock."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    Allow,
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    CancelSignal,
    ContextMessageEvent,
    Deny,
    HookContext,
    MemorySessionLog,
    PluginSource,
    PostExecuteNext,
    PostToolDecision,
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
    run_tool_calls,
)
from expected import ABORTED_BEFORE_DISPATCH
from support import texts

# --- the laboratory -----------------------------------------------------------------------


def request(call_id: str, name: str, **arguments: object) -> ToolCallRequest:
    """A call whose arguments are ``arguments`` as JSON text."""
    return ToolCallRequest(call_id=call_id, name=name, arguments=json.dumps(arguments))


@attrs.define(eq=False)
class Lab:
    """Tools whose bodies defer ``ctx``, sleep ``d`` virtual seconds, fail with ``fail``, and
    note ``(time, what, call_id)``; the lab also tracks how many bodies run at once and
    whether an exclusive one ever overlapped another."""

    notes: list[tuple[float, str, str]] = attrs.field(
        factory=lambda: list[tuple[float, str, str]]()
    )
    running: set[str] = attrs.field(factory=lambda: set[str]())
    exclusive_running: int = 0
    max_running: int = 0
    exclusive_overlapped: bool = False
    received: dict[str, object] = attrs.field(factory=lambda: dict[str, object]())

    def note(self, what: str, call_id: str) -> None:
        self.notes.append((trio.current_time(), what, call_id))

    def times(self, what: str) -> dict[str, float]:
        return {call_id: time for time, kind, call_id in self.notes if kind == what}

    def order(self, what: str) -> list[str]:
        return [call_id for _time, kind, call_id in self.notes if kind == what]

    def tool(self, name: str, *, parallel: bool, reply: str = "done") -> ToolDefinition:
        async def execute(arguments: object, context: ToolRunContext) -> str:
            call_id = context.call_id
            self.received[call_id] = arguments
            args: Mapping[str, object] = arguments if isinstance(arguments, Mapping) else {}  # pyright: ignore[reportUnknownVariableType]
            self.running.add(call_id)
            self.exclusive_running += 0 if parallel else 1
            if self.exclusive_running and len(self.running) > 1:
                self.exclusive_overlapped = True
            self.max_running = max(self.max_running, len(self.running))
            self.note("start", call_id)
            context_text = args.get("ctx")
            if isinstance(context_text, str):
                context.defer_context(
                    HookContext(
                        content=[TextBlock(text=context_text)], source=PluginSource(plugin="lab")
                    )
                )
            try:
                duration = args.get("d", 0)
                assert isinstance(duration, int | float)
                await trio.sleep(duration)
            finally:
                self.note("end", call_id)
                self.running.discard(call_id)
                self.exclusive_running -= 0 if parallel else 1
            failure = args.get("fail")
            if isinstance(failure, str):
                raise RuntimeError(failure)
            return f"{reply} {call_id}"

        return ToolDefinition(
            name=name,
            description=f"test tool {name}",
            parameters={"type": "object"},
            execute=execute,
            is_concurrency_safe=(lambda _args: True) if parallel else None,
        )

    def registry(self) -> ToolRegistry:
        """A registry with ``p`` (parallel-safe) and ``x`` (exclusive)."""
        registry = ToolRegistry()
        registry.register(self.tool("p", parallel=True))
        registry.register(self.tool("x", parallel=False))
        return registry


def summarize(events: list[SessionEvent]) -> list[str]:
    """``"call c1"`` / ``"result c1"`` / ``"context <text>"`` per event."""
    out: list[str] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            out.append(f"call {event.call_id}")
        elif isinstance(event, ToolResultEvent):
            out.append(f"result {event.call_id}")
        elif isinstance(event, ContextMessageEvent):
            out.append(
                "context " + " ".join(b.text for b in event.content if isinstance(b, TextBlock))
            )
    return out


def codes(batch: ToolBatch) -> list[str | None]:
    return [None if r.error is None else r.error.code for r in batch.results]


NEVER = CancelSignal.never()
ABORTED_BEFORE_DISPATCH_TEXT = "Error: tool call aborted before dispatch"


def record_hooks(registry: ToolRegistry, lab: Lab) -> None:
    """Note every pre_execute and post_execute call (they must run in model order)."""

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        lab.note("pre", execution.call_id)
        return await next()

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        lab.note("post", execution.call_id)
        return await next()

    registry.hooks.pre_execute.add(pre)
    registry.hooks.post_execute.add(post)


# --- arguments ----------------------------------------------------------------------------


async def test_the_body_receives_the_parsed_arguments_of_each_call() -> None:
    lab = Lab()
    calls = [
        ToolCallRequest(call_id="c1", name="p", arguments=""),
        ToolCallRequest(call_id="c2", name="p", arguments="not json"),
        ToolCallRequest(call_id="c3", name="x", arguments='{"k": "v"}'),
    ]
    await run_tool_calls(lab.registry(), calls, signal=NEVER)
    assert lab.received == {"c1": {}, "c2": "not json", "c3": {"k": "v"}}


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ('{"a": 9007199254740992}', "$.a: integer 9007199254740992 is outside"),
        ('{"a": 1e400}', "$.a: inf is not a finite number"),
        ('{"a": "\\ud800"}', "$.a: "),
    ],
)
async def test_json_text_the_lossless_boundary_refuses_reaches_the_pipeline_and_is_logged(
    text: str, detail: str, caplog: pytest.LogCaptureFixture
) -> None:
    lab = Lab()
    call = ToolCallRequest(call_id="c1", name="p", arguments=text)

    batch = await run_tool_calls(lab.registry(), [call], signal=NEVER)

    expected: tuple[list[str], dict[str, object], bool] = (
        ["Error: tool execution arguments must be losslessly JSON-serializable"],
        {},
        True,
    )
    logged = [r.getMessage() for r in caplog.records]
    assert expected == (
        texts(batch),
        lab.received,
        any("arguments rejected at the JSON boundary: " + detail in m for m in logged),
    )


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [0, -1])
async def test_a_cap_below_one_is_a_value_error(cap: int) -> None:
    with pytest.raises(ValueError) as caught:
        await run_tool_calls(ToolRegistry(), [], signal=NEVER, max_parallel_tool_calls=cap)

    assert f"max_parallel_tool_calls must be a positive int, not {cap}" == str(caught.value)


@pytest.mark.parametrize("cap", [True, 2.0, "3"])
async def test_a_cap_that_is_not_an_int_is_a_type_error(cap: object) -> None:
    with pytest.raises(TypeError) as caught:
        await run_tool_calls(ToolRegistry(), [], signal=NEVER, max_parallel_tool_calls=cap)  # pyright: ignore[reportArgumentType]

    assert f"max_parallel_tool_calls must be a positive int, not {cap!r}" == str(caught.value)


async def test_an_empty_batch_has_no_results_and_no_events() -> None:
    session = MemorySessionLog()
    batch = await run_tool_calls(ToolRegistry(), [], signal=NEVER, session=session)
    assert ToolBatch(results=(), contexts=()) == batch
    assert session.events() == []


async def test_an_empty_batch_is_a_checkpoint() -> None:
    with trio.testing.assert_checkpoints():
        batch = await run_tool_calls(ToolRegistry(), [], signal=NEVER)
    assert ToolBatch(results=(), contexts=()) == batch


async def test_a_pre_cancelled_batch_is_a_checkpoint_and_starts_nothing() -> None:
    lab = Lab()
    controller = CancelController()
    controller.cancel()

    with trio.testing.assert_checkpoints():
        batch = await run_tool_calls(
            lab.registry(), [request("c1", "p"), request("c2", "x")], signal=controller.signal
        )

    expected: tuple[tuple[ToolExecutionResult, ...], list[str]] = (
        (ABORTED_BEFORE_DISPATCH, ABORTED_BEFORE_DISPATCH),
        [],
    )
    assert expected == (batch.results, lab.order("start"))


async def test_a_long_batch_of_calls_that_never_await_still_lets_other_tasks_run() -> None:
    # the lane yields once per group of commits, so a batch of calls settled before dispatch
    # (here: all denied) does not starve a sibling task for its whole length
    registry = Lab().registry()
    registry.guard(lambda _execution: "no")
    ticks: list[int] = []
    done = trio.Event()

    async def sibling() -> None:
        while not done.is_set():
            ticks.append(0)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sibling)
        await run_tool_calls(registry, [request(f"c{i}", "p") for i in range(1000)], signal=NEVER)
        done.set()

    assert len(ticks) >= 10


# --- results and grouping -----------------------------------------------------------------


async def test_results_come_in_model_order_one_per_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    calls = [
        request("c1", "p", d=3),
        request("c2", "p", d=1),
        request("c3", "x", d=1),
        request("c4", "p", d=2),
    ]
    batch = await run_tool_calls(lab.registry(), calls, signal=NEVER)
    assert texts(batch) == ["done c1", "done c2", "done c3", "done c4"]


@pytest.mark.parametrize(
    ("cap", "done", "starts"),
    [
        (3, 3.0, {"c1": 0, "c2": 0, "c3": 0, "c4": 1, "c5": 2, "c6": 2}),
        (2, 4.0, {"c1": 0, "c2": 0, "c3": 1, "c4": 2, "c5": 3, "c6": 3}),
    ],
)
async def test_parallel_calls_around_a_barrier_finish_at_3s_with_a_cap_of_3_and_4s_with_2(
    autojump_clock: trio.testing.MockClock, cap: int, done: float, starts: dict[str, int]
) -> None:
    lab = Lab()
    calls = [request(f"c{i}", "p", d=1) for i in (1, 2, 3)]
    calls += [request("c4", "x", d=1)]
    calls += [request(f"c{i}", "p", d=1) for i in (5, 6)]
    await run_tool_calls(lab.registry(), calls, signal=NEVER, max_parallel_tool_calls=cap)
    assert (done, starts) == (trio.current_time(), lab.times("start"))


async def test_an_exclusive_call_runs_alone_after_the_pool_before_it_drained(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    calls = [
        request("c1", "p", d=2),
        request("c2", "p", d=1),
        request("c3", "x", d=1),
        request("c4", "p", d=1),
    ]
    await run_tool_calls(lab.registry(), calls, signal=NEVER)
    assert lab.times("start") == {"c1": 0, "c2": 0, "c3": 2, "c4": 3}
    assert not lab.exclusive_overlapped


async def test_the_pool_rolls_a_new_body_in_as_soon_as_one_settles(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    calls = [
        request("c1", "p", d=1),
        request("c2", "p", d=3),
        request("c3", "p", d=1),
        request("c4", "p", d=1),
    ]
    await run_tool_calls(lab.registry(), calls, signal=NEVER, max_parallel_tool_calls=2)
    # c3 takes c1's slot at t=1 and c4 takes c3's at t=2, while c2 still runs: no fixed windows
    assert lab.times("start") == {"c1": 0, "c2": 0, "c3": 1, "c4": 2}


async def test_in_flight_bodies_never_exceed_the_cap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    calls = [request(f"c{i}", "p", d=1 + i % 3) for i in range(12)]
    await run_tool_calls(lab.registry(), calls, signal=NEVER, max_parallel_tool_calls=4)
    assert lab.max_running == 4


async def test_a_cap_of_one_runs_every_call_serially(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    calls = [request(f"c{i}", "p", d=1) for i in range(3)]
    await run_tool_calls(lab.registry(), calls, signal=NEVER, max_parallel_tool_calls=1)
    assert lab.times("start") == {"c0": 0, "c1": 1, "c2": 2}


async def test_an_unknown_tool_is_a_barrier_with_an_error_result_and_siblings_still_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    calls = [request("c1", "p", d=1), request("c2", "nope"), request("c3", "p", d=1)]
    batch = await run_tool_calls(lab.registry(), calls, signal=NEVER)
    assert texts(batch) == ["done c1", 'Error: unknown tool "nope"', "done c3"]
    assert codes(batch) == [None, "UNKNOWN_TOOL", None]


# --- the lane -----------------------------------------------------------------------------


async def test_pre_and_post_hooks_run_in_model_order_while_bodies_finish_in_reverse(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()
    record_hooks(registry, lab)
    calls = [request("c1", "p", d=3), request("c2", "p", d=2), request("c3", "p", d=1)]
    await run_tool_calls(registry, calls, signal=NEVER)
    assert lab.order("end") == ["c3", "c2", "c1"]
    assert lab.order("pre") == ["c1", "c2", "c3"]
    assert lab.order("post") == ["c1", "c2", "c3"]


async def test_a_fast_later_call_commits_only_after_a_slow_earlier_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()
    record_hooks(registry, lab)
    calls = [request("c1", "p", d=3), request("c2", "p", d=1)]
    await run_tool_calls(registry, calls, signal=NEVER)
    assert lab.times("post") == {"c1": 3, "c2": 3}


async def test_a_later_calls_pre_execute_runs_while_earlier_bodies_are_in_flight(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()
    record_hooks(registry, lab)
    calls = [request("c1", "p", d=2), request("c2", "p", d=1)]
    await run_tool_calls(registry, calls, signal=NEVER)
    assert [n for n in lab.notes if n[1] == "pre"] == [(0.0, "pre", "c1"), (0.0, "pre", "c2")]
    assert lab.times("start")["c1"] == 0.0


async def test_pre_execute_runs_one_call_at_a_time(autojump_clock: trio.testing.MockClock) -> None:
    lab = Lab()
    registry = lab.registry()
    active: list[str] = []
    overlaps: list[str] = []

    async def slow_pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        if active:
            overlaps.append(execution.call_id)
        active.append(execution.call_id)
        await trio.sleep(1)
        active.remove(execution.call_id)
        return await next()

    registry.hooks.pre_execute.add(slow_pre)
    calls = [request(f"c{i}", "p") for i in range(3)]
    await run_tool_calls(registry, calls, signal=NEVER)
    assert overlaps == []
    assert trio.current_time() == 3.0


async def test_denied_and_failing_calls_in_a_pool_do_not_affect_their_siblings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()

    async def deny_c2(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Deny("c2 is not allowed") if execution.call_id == "c2" else await next()

    registry.hooks.pre_execute.add(deny_c2)
    calls = [request("c1", "p", d=1), request("c2", "p", d=1), request("c3", "p", d=1, fail="boom")]
    batch = await run_tool_calls(registry, calls, signal=NEVER)
    assert texts(batch) == ["done c1", "Error: c2 is not allowed", "Error: boom"]
    assert [r.is_error for r in batch.results] == [False, True, True]


async def test_a_denied_call_takes_no_pool_capacity(autojump_clock: trio.testing.MockClock) -> None:
    lab = Lab()
    registry = lab.registry()
    registry.guard(lambda execution: "no" if execution.call_id == "c2" else None)
    calls = [request("c1", "p", d=1), request("c2", "p", d=1), request("c3", "p", d=1)]
    await run_tool_calls(registry, calls, signal=NEVER, max_parallel_tool_calls=2)
    assert lab.times("start") == {"c1": 0, "c3": 0}
    assert trio.current_time() == 1.0


# --- reclassification ---------------------------------------------------------------------


async def test_a_barrier_body_that_swaps_a_tool_changes_the_mode_of_later_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()
    exclusive_t = registry.register(lab.tool("t", parallel=False))

    async def swap(arguments: object, context: ToolRunContext) -> str:
        exclusive_t()
        registry.register(lab.tool("t", parallel=True))
        return "swapped"

    registry.register(
        ToolDefinition(name="swap", description="", parameters={"type": "object"}, execute=swap)
    )
    calls = [request("c1", "swap"), request("c2", "t", d=1), request("c3", "t", d=1)]
    await run_tool_calls(registry, calls, signal=NEVER)
    assert lab.times("start") == {"c2": 0, "c3": 0}


async def test_a_result_observer_that_swaps_a_tool_reclassifies_calls_not_yet_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = ToolRegistry()
    parallel_t = registry.register(lab.tool("t", parallel=True))

    def swap_after_c1(execution: ToolExecution, result: ToolExecutionResult) -> None:
        if execution.call_id == "c1":
            parallel_t()
            registry.register(lab.tool("t", parallel=False, reply="v2"))

    registry.hooks.result.add(swap_after_c1)
    calls = [request("c1", "t", d=1), request("c2", "t", d=2), request("c3", "t", d=1)]
    batch = await run_tool_calls(registry, calls, signal=NEVER, max_parallel_tool_calls=2)
    # c2 had started and keeps its mode; c3 is now exclusive, so it waits for c2 to end
    assert lab.times("start") == {"c1": 0, "c2": 0, "c3": 2}
    assert texts(batch) == ["done c1", "done c2", "v2 c3"]


async def test_a_call_that_became_exclusive_closes_the_pool_and_runs_as_the_next_barrier(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = ToolRegistry()
    registry.register(lab.tool("p", parallel=True))
    parallel_t = registry.register(lab.tool("t", parallel=True))

    async def swap_in_body(arguments: object, context: ToolRunContext) -> str:
        parallel_t()
        registry.register(lab.tool("t", parallel=False))
        await trio.sleep(1)
        return "swapped"

    registry.register(
        ToolDefinition(
            name="swapper",
            description="",
            parameters={"type": "object"},
            execute=swap_in_body,
            is_concurrency_safe=lambda _args: True,
        )
    )
    calls = [
        request("c1", "swapper"),
        request("c2", "p", d=2),
        request("c3", "t", d=1),
        request("c4", "p", d=1),
    ]
    await run_tool_calls(registry, calls, signal=NEVER, max_parallel_tool_calls=2)
    # c3 is re-classified when c1 frees a slot at t=1: exclusive now, so the pool closes,
    # drains c2 (t=2), runs c3 alone (2-3), and c4 starts a new pool
    assert lab.times("start") == {"c2": 0, "c3": 2, "c4": 3}
    assert not lab.exclusive_overlapped


# --- session events and contexts ----------------------------------------------------------


async def test_events_interleave_calls_and_results_with_a_cap_of_2(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    calls = [
        request("c1", "p", d=1),
        request("c2", "p", d=2),
        request("c3", "p", d=2),
        request("c4", "p", d=1),
    ]
    await run_tool_calls(
        lab.registry(), calls, signal=NEVER, max_parallel_tool_calls=2, session=session
    )
    expected = [
        "call c1",
        "call c2",
        "result c1",
        "call c3",
        "result c2",
        "call c4",
        "result c3",
        "result c4",
    ]
    assert expected == summarize(session.events())


async def test_each_result_event_points_at_its_call_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    calls = [request("c1", "p", d=1), request("c2", "p", d=2), request("c3", "p", d=1)]
    await run_tool_calls(
        lab.registry(), calls, signal=NEVER, max_parallel_tool_calls=2, session=session
    )
    events = session.events()
    call_seqs = {e.call_id: seq for seq, e in enumerate(events) if isinstance(e, ToolCallEvent)}
    pointers = {e.call_id: e.source_event_seqs for e in events if isinstance(e, ToolResultEvent)}
    assert {k: (v,) for k, v in call_seqs.items()} == pointers


async def test_events_carry_turn_step_and_the_raw_arguments() -> None:
    lab = Lab()
    session = MemorySessionLog()
    call = ToolCallRequest(call_id="c1", name="p", arguments='{"d":0,  "z": 1}')
    await run_tool_calls(lab.registry(), [call], signal=NEVER, session=session, turn=4, step=7)
    start = session.events()[0]
    assert isinstance(start, BatchStartEvent)
    batch_id = start.batch_id
    expected = [
        BatchStartEvent(turn=4, step=7, batch_id=batch_id, calls=[call]),
        ToolCallEvent(turn=4, step=7, call_id="c1", name="p", arguments='{"d":0,  "z": 1}'),
        ToolResultEvent(
            turn=4,
            step=7,
            call_id="c1",
            content=[TextBlock(text="done c1")],
            is_error=False,
            source_event_seqs=(1,),
        ),
        BatchEndEvent(turn=4, step=7, batch_id=batch_id, reason="completed"),
    ]
    assert expected == session.events()
    assert str(uuid.UUID(batch_id)) == batch_id


async def test_contexts_follow_every_result_in_model_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    calls = [request("c1", "p", d=2, ctx="from c1"), request("c2", "p", d=1, ctx="from c2")]
    batch = await run_tool_calls(lab.registry(), calls, signal=NEVER, session=session)
    expected = [
        "call c1",
        "call c2",
        "result c1",
        "result c2",
        "context from c1",
        "context from c2",
    ]
    assert expected == summarize(session.events())
    assert [
        " ".join(b.text for b in c.content if isinstance(b, TextBlock)) for c in batch.contexts
    ] == ["from c1", "from c2"]


async def test_the_result_event_carries_the_error_of_a_failed_call() -> None:
    session = MemorySessionLog()
    await run_tool_calls(ToolRegistry(), [request("c1", "nope")], signal=NEVER, session=session)
    result = session.events()[2]
    assert isinstance(result, ToolResultEvent)
    assert (result.error and result.error.code, result.is_error) == ("UNKNOWN_TOOL", True)


# --- interruption -------------------------------------------------------------------------


async def test_an_abort_before_the_batch_starts_gives_balanced_pairs_and_runs_no_stage() -> None:
    lab = Lab()
    registry = lab.registry()
    record_hooks(registry, lab)
    controller = CancelController()
    controller.cancel("esc")
    session = MemorySessionLog()
    calls = [request("c1", "p"), request("c2", "x")]
    batch = await run_tool_calls(registry, calls, signal=controller.signal, session=session)
    assert codes(batch) == ["ABORTED_BEFORE_DISPATCH"] * 2
    assert texts(batch) == [ABORTED_BEFORE_DISPATCH_TEXT] * 2
    assert summarize(session.events()) == ["call c1", "result c1", "call c2", "result c2"]
    assert lab.notes == []


async def test_an_abort_during_a_pool_drains_in_flight_calls_then_skips_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()
    record_hooks(registry, lab)
    controller = CancelController()
    session = MemorySessionLog()
    calls = [
        request("c1", "p", d=1),
        request("c2", "p", d=5, ctx="kept"),
        request("c3", "p", d=2, fail="own failure"),
        request("c4", "p", d=1),
        request("c5", "x", d=1),
    ]
    async with trio.open_nursery() as nursery:

        async def interrupt() -> None:
            await trio.sleep(2.5)
            controller.cancel("esc")

        nursery.start_soon(interrupt)
        batch = await run_tool_calls(
            registry, calls, signal=controller.signal, max_parallel_tool_calls=3, session=session
        )
    # c1 finished at t=1 and committed; c4 took its slot and finished at t=2, before the
    # abort: it commits only after c2, when the batch is already aborted, and keeps its own
    # success (honest interrupts); the abort reached only c2's running body; c3 failed at t=2,
    # before the abort, and its own failure stays; c5 never started
    assert codes(batch) == [None, "ABORTED", None, None, "ABORTED_BEFORE_DISPATCH"]
    assert texts(batch)[2] == "Error: own failure"
    assert texts(batch)[3] == "done c4"
    assert trio.current_time() == 2.5
    expected = [
        "call c1",
        "call c2",
        "call c3",
        "result c1",
        "call c4",
        "result c2",
        "result c3",
        "result c4",
        "call c5",
        "result c5",
        "context kept",
    ]
    assert expected == summarize(session.events())
    assert lab.order("post") == ["c1", "c2", "c3", "c4"]


async def test_a_call_whose_pre_execute_was_waiting_at_the_abort_is_aborted_before_dispatch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()
    record_hooks(registry, lab)
    controller = CancelController()

    async def user_hesitates(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        if execution.call_id == "c2":
            await trio.sleep(0.5)
            controller.cancel("esc")  # the user interrupts while c2's policy is deciding
            await trio.sleep(0.5)
        return Allow()

    registry.hooks.pre_execute.add(user_hesitates, prepend=True)
    session = MemorySessionLog()
    calls = [request("c1", "p", d=5), request("c2", "p", d=1), request("c3", "p", d=1)]
    batch = await run_tool_calls(registry, calls, signal=controller.signal, session=session)
    assert codes(batch) == ["ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    # c2 started (its post_execute ran); c3 never did (no registry stage at all)
    assert lab.order("post") == ["c1", "c2"]
    assert lab.order("start") == ["c1"]
    expected = ["call c1", "call c2", "result c1", "result c2", "call c3", "result c3"]
    assert expected == summarize(session.events())


async def test_an_abort_noticed_between_groups_starts_no_later_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()
    controller = CancelController()

    async def cancel_in_body(arguments: object, context: ToolRunContext) -> str:
        controller.cancel("esc")
        return "ok"

    registry.register(
        ToolDefinition(
            name="esc", description="", parameters={"type": "object"}, execute=cancel_in_body
        )
    )
    calls = [request("c1", "esc"), request("c2", "p"), request("c3", "x")]
    batch = await run_tool_calls(registry, calls, signal=controller.signal)
    assert codes(batch) == ["ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert lab.notes == []


# --- structured concurrency ---------------------------------------------------------------


class FailingSession(MemorySessionLog):
    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at = fail_at

    def append(self, event: SessionEvent, /) -> int:
        if len(self.events()) == self.fail_at:
            raise OSError("disk full")
        return super().append(event)


async def test_a_failing_session_append_cancels_and_awaits_every_body_before_it_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    tasks_before = trio.lowlevel.current_statistics().tasks_living
    calls = [request("c1", "p", d=1), request("c2", "p", d=10), request("c3", "p", d=10)]
    with pytest.raises(OSError, match=r"^disk full$"):
        # events: batch/start, call c1, call c2, call c3, then the result of c1 fails at t=1
        await run_tool_calls(lab.registry(), calls, signal=NEVER, session=FailingSession(4))
    assert lab.times("end") == {"c1": 1.0, "c2": 1.0, "c3": 1.0}
    assert trio.current_time() == 1.0
    assert tasks_before == trio.lowlevel.current_statistics().tasks_living


async def test_cancelling_the_callers_scope_propagates_after_every_body_unwound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    tasks_before = trio.lowlevel.current_statistics().tasks_living
    calls = [request("c1", "p", d=10), request("c2", "p", d=10), request("c3", "x", d=1)]
    with trio.move_on_after(2) as scope:
        await run_tool_calls(lab.registry(), calls, signal=NEVER)
    assert scope.cancelled_caught
    assert lab.times("end") == {"c1": 2.0, "c2": 2.0}
    assert tasks_before == trio.lowlevel.current_statistics().tasks_living


async def test_a_shielded_body_delays_the_callers_cancellation_until_it_finishes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    registry = lab.registry()

    async def stubborn(arguments: object, context: ToolRunContext) -> str:
        with trio.CancelScope(shield=True):
            await trio.sleep(3)
        lab.note("end", context.call_id)
        return "finished anyway"

    registry.register(
        ToolDefinition(
            name="stubborn",
            description="",
            parameters={"type": "object"},
            execute=stubborn,
            is_concurrency_safe=lambda _args: True,
        )
    )
    calls = [request("c1", "stubborn"), request("c2", "p", d=10)]
    with trio.move_on_after(1):
        await run_tool_calls(registry, calls, signal=NEVER)
    assert lab.times("end") == {"c1": 3.0, "c2": 1.0}
    assert trio.current_time() == 3.0


async def test_a_signal_that_is_not_a_cancel_signal_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"^signal must be a CancelSignal, not NoneType$"):
        await run_tool_calls(ToolRegistry(), [], signal=None)  # pyright: ignore[reportArgumentType]


async def test_a_call_that_is_not_a_tool_call_request_is_a_type_error() -> None:
    calls = [ToolCallRequest(call_id="c1", name="p", arguments=""), {"call_id": "c2"}]
    with pytest.raises(TypeError, match=r"^calls\[1\] must be a ToolCallRequest, not dict$"):
        await run_tool_calls(ToolRegistry(), calls, signal=NEVER)  # pyright: ignore[reportArgumentType]


def test_a_call_request_refuses_parsed_arguments() -> None:
    with pytest.raises(TypeError) as caught:
        ToolCallRequest(call_id="c1", name="p", arguments={"a": 1})  # pyright: ignore[reportArgumentType]

    expected = "arguments must be the model's JSON text (str); got dict"
    assert expected == str(caught.value)


async def test_calls_are_routed_through_the_agent_of_the_batch() -> None:
    lab = Lab()
    registry = ToolRegistry()
    agent = object()
    registry.scope(agent).register(lab.tool("scoped", parallel=True))
    calls = [request("c1", "scoped")]
    with_agent = await run_tool_calls(registry, calls, signal=NEVER, agent=agent)
    without_agent = await run_tool_calls(registry, calls, signal=NEVER)
    assert texts(with_agent) == ["done c1"]
    assert texts(without_agent) == ['Error: unknown tool "scoped"']


async def test_every_call_of_the_batch_shares_the_batch_signal() -> None:
    lab = Lab()
    registry = lab.registry()
    seen: list[CancelSignal] = []

    async def remember_signal(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        seen.append(execution.signal)
        return await next()

    registry.hooks.pre_execute.add(remember_signal)
    controller = CancelController()
    calls = [request("c1", "p"), request("c2", "x"), request("c3", "p")]
    await run_tool_calls(registry, calls, signal=controller.signal)
    assert [signal is controller.signal for signal in seen] == [True, True, True]
