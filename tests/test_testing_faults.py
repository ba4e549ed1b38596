"""dsh_tools.testing.cancel_at: cancellation at a virtual time or at a named stage of a named
call, and the sweep that cancels at every stage of every call of a mixed batch."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    CancelController,
    DeadlineReached,
    ExecuteNext,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    ToolBatch,
    ToolCallRequest,
    ToolDefinition,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    run_tool_calls,
)
from dsh_tools.testing import (
    STAGES,
    CallStage,
    ScriptedTool,
    StageReached,
    cancel_at,
    check_batch,
    fail,
    scripted_tool,
    shielded,
    sleep,
)
from support import outcome_code, request


class AllowAfterAWhile:
    """An approval service that answers ``allowed-once`` after half a second."""

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        await trio.sleep(0.5)
        return ApprovalOutcome.ALLOWED_ONCE


async def ask_for_confirm(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
    if execution.name == "confirm":
        return Ask(reason="needs a human")
    return await next()


@attrs.frozen
class Mixed:
    """The mixed batch of the sweep: a pool, an approval, a barrier, a shielded body, a
    failure, a final barrier."""

    calls: tuple[ToolCallRequest, ...] = (
        request("c1", "read"),  # parallel, 1 s
        request("c2", "confirm"),  # parallel, asks for approval, 2 s
        request("c3", "write"),  # exclusive barrier, 1 s
        request("c4", "careful"),  # parallel, shielded 1 s
        request("c5", "broken"),  # parallel, fails after 0.5 s
        request("c6", "write"),  # exclusive barrier
        request("c7", "stamp"),  # a sync body, run in a worker thread
    )
    # what each call gives when nothing is cancelled
    undisturbed: tuple[str, ...] = ("ok", "ok", "ok", "ok", "error", "ok", "ok")
    # the stages each call reaches when nothing is cancelled
    reaches: tuple[frozenset[CallStage], ...] = (
        frozenset(STAGES) - {"approval"},
        frozenset(STAGES),
        frozenset(STAGES) - {"approval"},
        frozenset(STAGES) - {"approval"},
        frozenset(STAGES) - {"approval"},
        frozenset(STAGES) - {"approval"},
        frozenset(STAGES) - {"approval"},
    )


MIXED = Mixed()


def stamp(arguments: object, context: ToolRunContext) -> str:
    return f"stamped {context.call_id}"


def build(registry: ToolRegistry) -> list[ScriptedTool]:
    tools = [
        scripted_tool("read", sleep(1)),
        scripted_tool("confirm", sleep(2)),
        scripted_tool("write", sleep(1), parallel=False),
        scripted_tool("careful", shielded(1)),
        scripted_tool("broken", sleep(0.5), fail("boom")),
    ]
    for tool in tools:
        tool.register(registry)
    registry.register(
        ToolDefinition(name="stamp", description="sync", parameters={}, execute=stamp)
    )
    registry.hooks.pre_execute.add(ask_for_confirm)
    return tools


def run_mixed(
    point: StageReached | float | None,
) -> tuple[ToolBatch, MemorySessionLog, list[ScriptedTool]]:
    session = MemorySessionLog()
    registry = ToolRegistry(approval=AllowAfterAWhile())
    tools = build(registry)
    controller = CancelController()
    if isinstance(point, StageReached):
        cancel_at(controller, when=point, registry=registry, reason="sweep")
    elif point is not None:
        cancel_at(controller, when=point)

    async def main() -> ToolBatch:
        return await run_tool_calls(
            registry,
            MIXED.calls,
            signal=controller.signal,
            agent="agent",
            max_parallel_tool_calls=2,
            session=session,
        )

    batch = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return batch, session, tools


def sweep() -> Iterator[tuple[int, CallStage]]:
    for index in range(len(MIXED.calls)):
        for stage in STAGES:
            yield index, stage


def expected_code_of_target(index: int, stage: CallStage) -> str:
    """What the cancelled call itself must give when the cancellation lands at ``stage``."""
    undisturbed = MIXED.undisturbed[index]
    if stage in ("pre_execute", "approval", "guard", "execute"):
        return "ABORTED_BEFORE_DISPATCH"  # the body never starts
    if stage == "body":
        return "ABORTED"  # started; a failure after a sleep never happens
    # at "post_execute" and "result" the body had settled before the signal fired: its own
    # outcome stays (honest interrupts)
    return undisturbed


@pytest.mark.parametrize(("index", "stage"), list(sweep()))
def test_cancelling_at_any_stage_of_any_call_keeps_every_invariant(
    index: int, stage: CallStage
) -> None:
    call_id = MIXED.calls[index].call_id
    batch, session, tools = run_mixed(StageReached(call_id=call_id, stage=stage))

    check_batch(MIXED.calls, batch, session, tools=tools)
    codes = [outcome_code(result) for result in batch.results]
    if stage in MIXED.reaches[index]:
        assert expected_code_of_target(index, stage) == codes[index]
        # nothing after the cancelled call runs to success
        assert "ok" not in codes[index + 1 :]
    else:
        assert list(MIXED.undisturbed) == codes


def test_without_a_cancellation_the_mixed_batch_gives_its_undisturbed_outcomes() -> None:
    batch, session, tools = run_mixed(None)

    check_batch(MIXED.calls, batch, session, tools=tools)
    assert list(MIXED.undisturbed) == [outcome_code(r) for r in batch.results]


def test_cancelling_at_a_virtual_time_aborts_what_is_in_flight_at_that_moment() -> None:
    batch, session, tools = run_mixed(2.25)

    check_batch(MIXED.calls, batch, session, tools=tools)
    # c1 (0-1) and c2 (approval 0-0.5, body 0.5-2.5) in the pool; c3 waits for the pool
    expected = ["ok", "ABORTED", *["ABORTED_BEFORE_DISPATCH"] * 5]
    assert expected == [outcome_code(r) for r in batch.results]
    confirm = tools[1]
    assert [(0.5, 2.25, "cancelled")] == [(r.started, r.ended, r.ending) for r in confirm.runs]


async def test_a_time_becomes_the_deadline_and_the_reason_says_so(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController()
    cancel_at(controller, when=3)

    await controller.signal.wait()

    assert (3.0, DeadlineReached(deadline=3.0)) == (trio.current_time(), controller.signal.reason)


def test_an_earlier_deadline_is_kept_and_the_disposer_restores_the_previous_one() -> None:
    controller = CancelController(deadline=2)
    dispose = cancel_at(controller, when=5)
    assert 2 == controller.signal.deadline
    dispose()
    assert 2 == controller.signal.deadline


async def test_the_kth_visit_of_a_stage_is_the_one_that_cancels(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    tool = scripted_tool("retry", sleep(1))
    tool.register(registry)
    controller = CancelController()

    async def retry_twice(
        execution: ToolDispatchExecution, next: ExecuteNext
    ) -> ToolExecutionResult:
        await next()
        return await next()

    registry.hooks.execute.add(retry_twice)
    cancel_at(
        controller,
        when=StageReached(call_id="c1", stage="body", count=2),
        registry=registry,
        reason="second try",
    )

    batch = await run_tool_calls(registry, [request("c1", "retry")], signal=controller.signal)

    assert ["returned", "cancelled"] == [r.ending for r in tool.runs]
    assert ["ABORTED"] == [outcome_code(r) for r in batch.results]
    assert "second try" == controller.signal.reason


async def test_the_disposer_removes_the_observing_hook(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read", sleep(1)).register(registry)
    controller = CancelController()
    dispose = cancel_at(
        controller, when=StageReached(call_id="c1", stage="pre_execute"), registry=registry
    )
    dispose()

    batch = await run_tool_calls(registry, [request("c1", "read")], signal=controller.signal)

    assert (["ok"], False) == (
        [outcome_code(r) for r in batch.results],
        controller.signal.cancelled,
    )


async def test_other_calls_do_not_count_as_visits(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("read", sleep(1)).register(registry)
    controller = CancelController()
    cancel_at(controller, when=StageReached(call_id="zz", stage="execute"), registry=registry)

    batch = await run_tool_calls(
        registry, [request("c1", "read"), request("c2", "read")], signal=controller.signal
    )

    assert ["ok", "ok"] == [outcome_code(r) for r in batch.results]


def test_a_stage_point_without_a_registry_is_refused() -> None:
    with pytest.raises(TypeError, match=r"needs registry="):
        cancel_at(CancelController(), when=StageReached(call_id="c1", stage="body"))  # type: ignore[call-overload]


def test_an_unknown_stage_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="stage must be one of pre_execute, approval, guard"):
        StageReached(call_id="c1", stage="dispatch")  # type: ignore[arg-type]


def test_a_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="count must be a positive int, not 0"):
        StageReached(call_id="c1", stage="body", count=0)


def test_a_when_that_is_neither_time_nor_stage_is_refused() -> None:
    with pytest.raises(TypeError, match="when must be a trio clock time or a StageReached"):
        cancel_at(CancelController(), when="soon")  # type: ignore[call-overload]


async def test_allow_is_what_ask_for_confirm_passes_on_for_other_tools(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    # the sweep's policy asks only for "confirm"
    execution_names: list[str] = []

    async def innermost(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        execution_names.append(execution.name)
        return Allow()

    registry.hooks.pre_execute.add(ask_for_confirm)
    registry.hooks.pre_execute.add(innermost)
    scripted_tool("read").register(registry)
    await run_tool_calls(registry, [request("c1", "read")], signal=CancelController().signal)
    assert ["read"] == execution_names
