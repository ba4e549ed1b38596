"""A property over random batches and random answerer chains that include ``"deferred"`` and
session grants, resumed (perhaps several times) until every deferred call is decided:

- one ``approval/asked`` / ``approval/decided`` pair per request (a deferred one decided once,
  when it is resumed);
- no body runs without an allowing decision for its call;
- every batch, suspended or resumed, has one result per call in model order, and the calls
  that were not deferred keep the results they had.

Each example runs under its own ``trio.run`` on a ``MockClock`` (function-scoped fixtures and
``@given`` do not mix).
"""

from __future__ import annotations

import attrs
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    APPROVAL_PENDING,
    Approval,
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    BatchEndEvent,
    CancelSignal,
    FrozenJsonObject,
    MemorySessionLog,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    UserApproval,
    ask_before,
    define_tool,
    resume_tool_calls,
    run_tool_calls,
    session_turn,
)
from dsh_tools.testing import check_batch

NEVER = CancelSignal.never()
ALLOWING = (ApprovalOutcome.ALLOWED_ONCE, ApprovalOutcome.ALLOWED_SESSION)


@attrs.frozen
class Call:
    tool: str  # "write" asks first; "read" does not
    seconds: int


calls_strategy = st.lists(
    st.builds(Call, tool=st.sampled_from(["write", "write", "read"]), seconds=st.integers(0, 2)),
    min_size=1,
    max_size=6,
)
answers_strategy = st.lists(
    st.tuples(
        st.sampled_from(
            [
                ApprovalOutcome.ALLOWED_ONCE,
                ApprovalOutcome.ALLOWED_SESSION,
                ApprovalOutcome.REJECTED,
                ApprovalOutcome.DEFERRED,
                ApprovalOutcome.DEFERRED,
                ApprovalOutcome.UNAVAILABLE,
            ]
        ),
        st.integers(0, 3),
    ),
    max_size=8,
)
decisions_strategy = st.lists(
    st.sampled_from(["allowed-once", "allowed-session", "rejected"]), min_size=6, max_size=6
)


def _registry(approval: UserApproval, ran: list[str]) -> ToolRegistry:
    registry = ToolRegistry(approval=approval)
    for name, parallel in (("write", False), ("read", True)):

        async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
            await trio.sleep(float(args["seconds"]))  # pyright: ignore[reportArgumentType]
            ran.append(context.call_id)
            return f"done {context.call_id}"

        registry.register(
            define_tool(
                name=name,
                description=name,
                parameters={"seconds": {"type": "number", "required": True}},
                execute=body,
                is_concurrency_safe=(lambda _args: True) if parallel else None,
            )
        )
    registry.hooks.pre_execute.add(ask_before("write"))
    return registry


@given(
    calls=calls_strategy,
    answers=answers_strategy,
    decisions=decisions_strategy,
    per_resume=st.integers(1, 3),
)
def test_deferred_decisions_and_grants_keep_the_approval_and_batch_invariants(
    calls: list[Call],
    answers: list[tuple[ApprovalOutcome, int]],
    decisions: list[str],
    per_resume: int,
) -> None:
    session = MemorySessionLog()
    approval = UserApproval(session)
    ran: list[str] = []
    remaining = list(answers)

    async def answerer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome | Approval:
        if not remaining:
            return await next()  # unavailable
        outcome, delay = remaining.pop(0)
        await trio.sleep(delay)
        return outcome

    approval.answerers.add(answerer)
    registry = _registry(approval, ran)
    requests = [
        ToolCallRequest(
            call_id=f"c{index}", name=call.tool, arguments=f'{{"seconds": {call.seconds}}}'
        )
        for index, call in enumerate(calls)
    ]
    batches: list[ToolBatch] = []

    async def main() -> None:
        async with session_turn(session, 1):
            batch = await run_tool_calls(
                registry, requests, signal=NEVER, agent="main", session=session
            )
            batches.append(batch)
            given_decisions = list(decisions)
            while batch.suspended:
                chosen = batch.suspended[:per_resume]
                approvals = {call.call_id: given_decisions.pop(0) for call in chosen}
                resumed = await resume_tool_calls(
                    registry, session, signal=NEVER, agent="main", approvals=approvals
                )
                assert resumed is not None
                batches.append(resumed)
                batch = resumed
            assert await resume_tool_calls(registry, session, signal=NEVER, agent="main") is None

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    # every batch: one result per call in model order; a non-deferred call keeps its result
    for batch in batches:
        check_batch(requests, batch)
        pending = {call.call_id for call in batch.suspended}
        codes = {
            request.call_id
            for request, result in zip(requests, batch.results, strict=True)
            if result.error is not None and result.error.code == APPROVAL_PENDING
        }
        assert pending == codes
    # the log of the finished batch, up to its turn's end: every call balanced, the results
    # in model order but for the deferred calls, which commit after a suspension
    check_batch(requests, batches[-1], session.events()[:-1])
    first, last = batches[0], batches[-1]
    deferred = {call.call_id for call in first.suspended}
    for request, before, after in zip(requests, first.results, last.results, strict=True):
        if request.call_id not in deferred:
            assert before == after
    assert () == last.suspended

    events = session.events()
    # one asked/decided pair per request
    asked = [e for e in events if isinstance(e, ApprovalAskedEvent)]
    decided = [e for e in events if isinstance(e, ApprovalDecidedEvent)]
    assert sorted(e.id for e in asked) == sorted(e.id for e in decided)
    assert len({e.id for e in asked}) == len(asked)
    # no body runs without an allowing decision for its call
    outcome_of = {e.id: e.outcome for e in decided}
    allowed = {e.call_id for e in asked if outcome_of[e.id] in ALLOWING}
    writes = {r.call_id for r in requests if r.name == "write"}
    assert set(ran) & writes <= allowed
    assert len(ran) == len(set(ran))  # and none runs twice
    # the batch ends once for real, after one suspension per resume that left calls pending
    ends = [e.reason for e in events if isinstance(e, BatchEndEvent)]
    assert ["suspended"] * (len(batches) - 1) + ["completed"] == ends
