"""Property tests of the scheduler and the pipeline written on the test kit (its first users):
random batches from ``tool_batches()``, random hook chains from ``hook_chains()``, interrupts at
random virtual times and at random stages, every example checked by ``check_batch``.

Each example runs under its own ``trio.run`` on a fresh virtual clock."""

from __future__ import annotations

import attrs
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    CancelController,
    MemorySessionLog,
    TextBlock,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    run_tool_calls,
    snapshot_json,
    thaw_json,
)
from dsh_tools.testing import (
    STAGES,
    CallStage,
    FailStep,
    HangStep,
    InjectStep,
    ReturnsStep,
    ScriptedRun,
    ScriptedTool,
    StageReached,
    cancel_at,
    check_batch,
    scripted_tool,
)
from dsh_tools.testing.strategies import (
    BatchPlan,
    HookChain,
    hook_chains,
    json_values,
    tool_batches,
)
from support import outcome_code

examples = settings(max_examples=50, deadline=None)
interrupts = st.none() | st.sampled_from([0, 0.25, 0.5, 1, 1.5, 2, 3, 4.5, 6])


def run_plan(
    plan: BatchPlan,
    cap: int,
    *,
    at_time: float | None = None,
    at_stage: StageReached | None = None,
) -> tuple[ToolBatch, MemorySessionLog, tuple[ScriptedTool, ...]]:
    session = MemorySessionLog()
    registry = ToolRegistry()
    tools = plan.build(registry)
    controller = CancelController()
    if at_time is not None:
        cancel_at(controller, when=at_time)
    if at_stage is not None:
        cancel_at(controller, when=at_stage, registry=registry)

    async def main() -> ToolBatch:
        return await run_tool_calls(
            registry,
            plan.requests,
            signal=controller.signal,
            max_parallel_tool_calls=cap,
            session=session,
        )

    batch = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return batch, session, tools


def runs(tools: tuple[ScriptedTool, ...]) -> list[tuple[ScriptedRun, bool]]:
    return [(run, tool.parallel) for tool in tools for run in tool.runs]


def overlap(a: ScriptedRun, b: ScriptedRun) -> bool:
    assert a.ended is not None
    assert b.ended is not None
    return a.started < b.ended and b.started < a.ended


@examples
@given(plan=tool_batches(shields=True, injects=True), cap=st.integers(1, 4), at_time=interrupts)
def test_every_batch_keeps_the_scheduler_invariants(
    plan: BatchPlan, cap: int, at_time: float | None
) -> None:
    batch, session, tools = run_plan(plan, cap, at_time=at_time)
    check_batch(plan.requests, batch, session, tools=tools)
    # every body that started and injected: its context is in the FIFO exactly once
    injected = sorted(
        run.call_id for tool in tools for run in tool.runs if isinstance(tool.steps[0], InjectStep)
    )
    texts = sorted(
        b.text.removeprefix("injected by ")
        for context in batch.contexts
        for b in context.content
        if isinstance(b, TextBlock)
    )
    assert injected == texts


@examples
@given(plan=tool_batches(hangs=True, shields=True), cap=st.integers(1, 4), at_time=interrupts)
def test_hanging_bodies_end_at_the_interrupt_and_never_outlive_the_batch(
    plan: BatchPlan, cap: int, at_time: float | None
) -> None:
    if plan.hangs and at_time is None:
        at_time = 10
    batch, session, tools = run_plan(plan, cap, at_time=at_time)
    check_batch(plan.requests, batch, session, tools=tools)
    hung = [run for tool in tools if isinstance(tool.steps[0], HangStep) for run in tool.runs]
    assert all(run.ending == "cancelled" for run in hung)


@examples
@given(plan=tool_batches(shields=True), cap=st.integers(1, 4), at_time=interrupts)
def test_exclusive_bodies_run_alone_and_the_cap_holds(
    plan: BatchPlan, cap: int, at_time: float | None
) -> None:
    _batch, _session, tools = run_plan(plan, cap, at_time=at_time)
    every = runs(tools)
    for run, parallel in every:
        others = [other for other, _ in every if other is not run and overlap(run, other)]
        if not parallel:
            assert [] == others
        # every moment a body starts, at most `cap` bodies are running
        running = [o for o, _ in every if o.started <= run.started < (o.ended or 0)]
        assert len(running) <= cap


@examples
@given(plan=tool_batches(), cap=st.integers(1, 4))
def test_without_an_interrupt_every_call_gives_its_scripted_outcome(
    plan: BatchPlan, cap: int
) -> None:
    batch, _session, _tools = run_plan(plan, cap)
    expected: list[str] = []
    for planned in plan.calls:
        last = planned.steps[-1]
        if isinstance(last, FailStep):
            expected.append("Error: boom")
        elif isinstance(last, ReturnsStep):
            expected.append(f"result of {planned.call_id}")
        else:
            expected.append(f"done {planned.call_id}")
    actual = [
        " ".join(b.text for b in r.content if isinstance(b, TextBlock)) for r in batch.results
    ]
    assert expected == actual


@examples
@given(
    plan=tool_batches(min_calls=1, max_calls=6, shields=True),
    cap=st.integers(1, 3),
    data=st.data(),
)
def test_cancelling_at_a_random_stage_of_a_random_call_keeps_the_invariants(
    plan: BatchPlan, cap: int, data: st.DataObject
) -> None:
    target = data.draw(st.sampled_from(plan.calls))
    stage: CallStage = data.draw(st.sampled_from(STAGES))
    point = StageReached(call_id=target.call_id, stage=stage)
    batch, session, tools = run_plan(plan, cap, at_stage=point)
    check_batch(plan.requests, batch, session, tools=tools)
    index = plan.calls.index(target)
    if stage in ("pre_execute", "guard", "execute"):
        assert "ABORTED_BEFORE_DISPATCH" == outcome_code(batch.results[index])


def run_chain(chain: HookChain) -> tuple[ToolBatch, ScriptedTool]:
    registry = ToolRegistry()
    tool = scripted_tool("t")
    tool.register(registry)
    controller = CancelController()
    chain.install(registry, controller)
    calls = [ToolCallRequest(call_id="c1", name="t", arguments="{}")]

    async def main() -> ToolBatch:
        return await run_tool_calls(registry, calls, signal=controller.signal)

    batch = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_batch(calls, batch, tools=[tool])
    return batch, tool


@examples
@given(chain=hook_chains())
def test_the_body_runs_exactly_when_the_chain_lets_it(chain: HookChain) -> None:
    _batch, tool = run_chain(chain)
    assert chain.body_runs == bool(tool.runs)


@examples
@given(chain=hook_chains())
def test_a_guard_denial_reaches_post_execute_unless_a_listener_replaces_it(
    chain: HookChain,
) -> None:
    batch, _tool = run_chain(chain)
    text = " ".join(b.text for b in batch.results[0].content if isinstance(b, TextBlock))
    if chain.guard_denies and not {"block", "raise"} & set(chain.post):
        assert "Error: denied by a guard" == text


@examples
@given(value=json_values())
def test_json_values_survive_the_lossless_boundary(value: object) -> None:
    assert value == thaw_json(snapshot_json(value))


@examples
@given(
    chain=hook_chains()
    .map(lambda chain: attrs.evolve(chain, wrappers=(*chain.wrappers, "cancel_after")))
    .filter(lambda chain: chain.body_runs)
)
def test_a_wrapper_cancelling_after_a_successful_body_makes_it_aborted(chain: HookChain) -> None:
    batch, tool = run_chain(chain)
    assert ["returned"] == [run.ending for run in tool.runs]
    deciders = [action for action in chain.post if action in ("accept", "block", "raise")]
    if deciders[:1] == ["block"]:
        assert "error" == outcome_code(batch.results[0])  # a block is never overwritten
    elif deciders[:1] == ["raise"]:
        assert "error" == outcome_code(batch.results[0])  # nor a post_execute failure
    else:
        assert "ABORTED" == outcome_code(batch.results[0])
