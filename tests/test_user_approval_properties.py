"""A property over random answerer chains: whatever the answerers do and whenever the user
cancels, one request logs exactly one asked/decided pair and decides what the rules say."""

from __future__ import annotations

from typing import Literal

import attrs
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    Approval,
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    CancelController,
    MemorySessionLog,
    TurnStartEvent,
    UserApproval,
)

Action = Literal["answer", "delegate", "rogue", "raise"]


@attrs.frozen
class Step:
    """One answerer: waits ``delay`` seconds (0 = not at all), then acts."""

    delay: int
    action: Action
    outcome: ApprovalOutcome = ApprovalOutcome.ALLOWED_ONCE
    scoped_elsewhere: bool = False  # added for another agent: never heard


steps = st.builds(
    Step,
    delay=st.sampled_from([0, 0, 1, 2, 3]),
    action=st.sampled_from(["answer", "delegate", "rogue", "raise"]),
    outcome=st.sampled_from(list(ApprovalOutcome)),
    scoped_elsewhere=st.booleans(),
)


def expected_run(
    chain: list[Step], cancel_at: float | None, pre_cancelled: bool, policy: str
) -> tuple[ApprovalOutcome, list[int]]:
    """What the rules say: the outcome, and which answerers (by index) are asked."""
    if pre_cancelled:
        return ApprovalOutcome.CANCELLED, []
    if policy == "never":
        return ApprovalOutcome.REJECTED, []
    now = 0.0
    asked: list[int] = []
    for index, step in enumerate(chain):
        if step.scoped_elsewhere:
            continue
        asked.append(index)
        if step.delay:
            if cancel_at is not None and cancel_at < now + step.delay:
                return ApprovalOutcome.CANCELLED, asked
            now += step.delay
        if step.action == "answer":
            return step.outcome, asked
        if step.action in ("rogue", "raise"):
            return ApprovalOutcome.UNAVAILABLE, asked
    return ApprovalOutcome.UNAVAILABLE, asked


def _answerer(index: int, step: Step, asked: list[int]):
    async def answerer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome | Approval:
        asked.append(index)
        if step.delay:
            await trio.sleep(step.delay)
        else:
            await trio.lowlevel.checkpoint()
        if step.action == "delegate":
            return await next()
        if step.action == "rogue":
            return "yolo"  # type: ignore[return-value]
        if step.action == "raise":
            raise ConnectionError("answerer failed")
        return step.outcome

    return answerer


@settings(deadline=None)
@given(
    chain=st.lists(steps, max_size=6),
    cancel_at=st.none() | st.sampled_from([0.5, 1.5, 2.5, 3.5, 5.5, 8.5]),
    pre_cancelled=st.booleans(),
    policy=st.sampled_from(["ask", "ask", "never"]),
)
def test_one_pair_per_request_and_the_rules_decide(
    chain: list[Step], cancel_at: float | None, pre_cancelled: bool, policy: str
) -> None:
    agent, other = object(), object()
    session = MemorySessionLog()
    session.append(TurnStartEvent(turn=1))
    approval = UserApproval(session)
    if policy == "never":
        approval.set_policy("never")
    asked: list[int] = []
    for index, step in enumerate(chain):
        target = approval.scope(other) if step.scoped_elsewhere else approval
        target.answerers.add(_answerer(index, step, asked))
    controller = CancelController()
    if pre_cancelled:
        controller.cancel("before")
    outcomes: list[ApprovalOutcome | Approval] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            if cancel_at is not None:
                when = cancel_at

                async def cancel() -> None:
                    await trio.sleep(when)
                    controller.cancel("esc")

                nursery.start_soon(cancel)
            request = ApprovalRequest(
                agent=agent, tool_name="t", call_id="c", signal=controller.signal
            )
            outcomes.append(await approval.request(request))
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    audit = [
        e for e in session.events() if isinstance(e, ApprovalAskedEvent | ApprovalDecidedEvent)
    ]
    expected_outcome, expected_asked = expected_run(chain, cancel_at, pre_cancelled, policy)
    if expected_outcome is ApprovalOutcome.DEFERRED:
        # a deferred request stays pending: its approval/decided comes when it is decided
        assert [ApprovalAskedEvent] == [type(e) for e in audit]
    else:
        assert 2 == len(audit)
        asked_event, decided_event = audit
        assert isinstance(asked_event, ApprovalAskedEvent)
        assert ApprovalDecidedEvent(id=asked_event.id, outcome=expected_outcome) == decided_event
    assert [expected_outcome] == outcomes
    assert expected_asked == asked
