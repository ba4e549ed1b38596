"""UserApproval behind a real registry and scheduler: ``Ask`` → answerers → the call's result
(as in the original), with the audit trail and the turn in one session log."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from dsh_tools import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    SessionEvent,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserApproval,
    define_tool,
    run_tool_calls,
    session_turn,
)
from expected import ABORTED_BEFORE_DISPATCH
from support import Agent, answering, error_result, run_in_turn


def _setup(
    outcome: object = None,
) -> tuple[ToolRegistry, UserApproval, MemorySessionLog, list[str]]:
    session = MemorySessionLog()
    approval = UserApproval(session)
    registry = ToolRegistry(approval=approval)
    ran: list[str] = []

    async def write(args: object, context: object) -> str:
        ran.append("write")
        await trio.lowlevel.checkpoint()
        return "wrote"

    registry.register(define_tool(name="write", description="write", parameters={}, execute=write))

    async def ask_for_writes(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        if execution.name == "write":
            return Ask(reason="writes to disk")
        return await next()

    registry.hooks.pre_execute.add(ask_for_writes)
    if outcome is not None:
        approval.answerers.add(answering(outcome))
    return registry, approval, session, ran


CALL = ToolCallRequest(call_id="c1", name="write", arguments="")


def _kinds(events: list[SessionEvent]) -> list[str]:
    names: dict[type, str] = {
        TurnStartEvent: "turn/start",
        TurnEndEvent: "turn/end",
        ToolCallEvent: "tool/call",
        ToolResultEvent: "tool/result",
        ApprovalAskedEvent: "approval/asked",
        ApprovalDecidedEvent: "approval/decided",
        BatchStartEvent: "batch/start",
        BatchEndEvent: "batch/end",
    }
    return [names.get(type(event), type(event).__name__) for event in events]


async def test_allowed_once_runs_the_body_and_the_log_tells_the_whole_story() -> None:
    registry, _approval, session, ran = _setup(ApprovalOutcome.ALLOWED_ONCE)
    agent = Agent()

    batch = await run_in_turn(
        registry, [CALL], session=session, agent=agent, signal=CancelController().signal
    )

    assert (
        ToolExecutionResult(content=(TextBlock(text="wrote"),), is_error=False),
    ) == batch.results
    assert ["write"] == ran
    expected = [
        "turn/start",
        "batch/start",
        "tool/call",
        "approval/asked",
        "approval/decided",
        "tool/result",
        "batch/end",
        "turn/end",
    ]
    events = session.events()
    assert expected == _kinds(events)
    asked = events[3]
    assert isinstance(asked, ApprovalAskedEvent)
    assert ("write", "c1", "writes to disk") == (asked.tool_name, asked.call_id, asked.reason)


async def test_guards_still_run_after_allowed_once() -> None:
    registry, _approval, session, ran = _setup(ApprovalOutcome.ALLOWED_ONCE)
    registry.guard(lambda execution: "read-only session")

    batch = await run_in_turn(
        registry, [CALL], session=session, agent=Agent(), signal=CancelController().signal
    )

    assert (error_result("Error: read-only session"),) == batch.results
    assert [] == ran


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        (ApprovalOutcome.REJECTED, 'Error: the user rejected tool "write"'),
        (ApprovalOutcome.CANCELLED, 'Error: approval for tool "write" was cancelled'),
        (
            ApprovalOutcome.UNAVAILABLE,
            'Error: tool "write" requires approval, but no approval channel is available',
        ),
        ("yolo", 'Error: tool "write" requires approval, but no approval channel is available'),
    ],
)
async def test_a_denied_approval_gives_the_exact_denial_text(outcome: object, text: str) -> None:
    registry, _approval, session, ran = _setup(outcome)

    batch = await run_in_turn(
        registry, [CALL], session=session, agent=Agent(), signal=CancelController().signal
    )

    assert (error_result(text),) == batch.results
    assert [] == ran


async def test_no_answerer_is_unavailable() -> None:
    registry, _approval, session, _ran = _setup()

    batch = await run_in_turn(
        registry, [CALL], session=session, agent=Agent(), signal=CancelController().signal
    )

    expected = error_result(
        'Error: tool "write" requires approval, but no approval channel is available'
    )
    assert (expected,) == batch.results


async def test_policy_never_rejects_the_call_without_asking() -> None:
    registry, approval, session, ran = _setup(ApprovalOutcome.ALLOWED_ONCE)
    approval.set_policy("never")

    batch = await run_in_turn(
        registry, [CALL], session=session, agent=Agent(), signal=CancelController().signal
    )

    assert (error_result('Error: the user rejected tool "write"'),) == batch.results
    assert [] == ran


async def test_a_request_outside_a_turn_becomes_an_error_result_with_no_audit_events() -> None:
    registry, _approval, session, ran = _setup(ApprovalOutcome.ALLOWED_ONCE)

    batch = await run_tool_calls(
        registry, [CALL], signal=CancelController().signal, agent=Agent(), session=session
    )

    (result,) = batch.results
    assert result.is_error
    assert isinstance(result.content[0], TextBlock)
    assert result.content[0].text.startswith("Error: approval.request() outside an open turn: ")
    assert ["batch/start", "tool/call", "tool/result", "batch/end"] == _kinds(session.events())
    assert [] == ran


async def test_a_user_interrupt_while_the_approval_waits_aborts_before_dispatch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry, approval, session, ran = _setup()
    asked = trio.Event()

    async def waits_for_the_user(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        asked.set()
        await trio.sleep_forever()

    approval.answerers.add(waits_for_the_user)
    interrupt = CancelController()
    second = ToolCallRequest(call_id="c2", name="write", arguments="{}")

    async with session_turn(session, 1), trio.open_nursery() as nursery:

        async def user_presses_escape() -> None:
            await asked.wait()
            await trio.sleep(2)
            interrupt.cancel("esc")

        nursery.start_soon(user_presses_escape)
        batch = await run_tool_calls(
            registry, [CALL, second], signal=interrupt.signal, agent=Agent(), session=session
        )

    assert (ABORTED_BEFORE_DISPATCH, ABORTED_BEFORE_DISPATCH) == batch.results
    assert [] == ran
    assert 2.0 == trio.current_time()
    decided = [e.outcome for e in session.events() if isinstance(e, ApprovalDecidedEvent)]
    assert [ApprovalOutcome.CANCELLED] == decided
