"""Approval a person can trust: validation first, what is approved, session grants, deferred
decisions finished by ``resume_tool_calls`` (also from a reopened JSONL or SQLite log).

Every test runs on trio's virtual clock (``autojump_clock``): nothing sleeps for real.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest
import trio

from dsh_tools import (
    APPROVAL_PENDING,
    ApprovalAnswerer,
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalRevokedEvent,
    Ask,
    BatchEndEvent,
    CancelSignal,
    ContextMessageEvent,
    DiffCallView,
    FileDiff,
    FrozenJsonObject,
    GenericCallView,
    HookContext,
    JsonlSessionLog,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    SessionEvent,
    SessionLog,
    SqliteSessionLog,
    SuspendedCall,
    TextBlock,
    ToolCallKind,
    ToolCallRequest,
    ToolDefinition,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    UserApproval,
    UserSource,
    define_tool,
    recover_session,
    resume_tool_calls,
    run_tool_calls,
    session_turn,
    snapshot_json,
)
from dsh_tools.testing import check_batch
from support import approval_service, run_in_turn, texts

NEVER = CancelSignal.never()
INVALID_N = 'Error: invalid arguments: "n" must be a number'


class Agent:
    """An agent object with a name: its grants are recorded under it."""

    def __init__(self, name: str | None = "main") -> None:
        self.name = name


@attrs.define
class Lab:
    """A registry whose ``write`` tool asks first, and whose bodies record what ran."""

    ran: list[str] = attrs.Factory(lambda: list[str]())
    asked: list[ApprovalRequest] = attrs.Factory(lambda: list[ApprovalRequest]())
    guarded: list[str] = attrs.Factory(lambda: list[str]())

    def registry(self, approval: UserApproval | None) -> ToolRegistry:
        registry = ToolRegistry(approval=approval)

        async def write(args: FrozenJsonObject, context: ToolRunContext) -> str:
            await trio.sleep(1)
            self.ran.append(context.call_id)
            return f"wrote {args['path']}"

        async def read(args: FrozenJsonObject, context: ToolRunContext) -> str:
            await trio.sleep(1)
            self.ran.append(context.call_id)
            context.defer_context(
                HookContext(
                    content=(TextBlock(text=f"ctx {context.call_id}"),), source=UserSource()
                )
            )
            return "read"

        registry.register(
            define_tool(
                name="write",
                description="Write a file.",
                parameters={
                    "path": {"type": "string", "required": True},
                    "text": {"type": "string", "required": True},
                },
                execute=write,
                present_call=lambda args: DiffCallView(
                    title=f"write {args['path']}",
                    diffs=(
                        FileDiff(path=str(args["path"]), old_text=None, new_text=str(args["text"])),
                    ),
                ),
            )
        )
        registry.register(
            ToolDefinition(
                name="read",
                description="Read.",
                parameters={"type": "object"},
                execute=read,
                is_concurrency_safe=lambda _args: True,
            )
        )
        registry.register(
            define_tool(
                name="count",
                description="Count.",
                parameters={"n": {"type": "number", "required": True}},
                execute=self._count,
            )
        )

        async def ask_before_writes(
            execution: ToolExecution, next: PreExecuteNext
        ) -> PreToolDecision:
            if execution.name in ("write", "count", "raw"):
                return Ask(reason="changes things")
            return await next()

        registry.hooks.pre_execute.add(ask_before_writes)

        def guard(execution: ToolExecution) -> str | None:
            self.guarded.append(execution.call_id)
            return None

        registry.guard(guard)
        return registry

    async def _count(self, args: FrozenJsonObject, context: ToolRunContext) -> str:
        await trio.sleep(1)
        self.ran.append(context.call_id)
        return str(args["n"])

    def answerer(self, *answers: ApprovalOutcome) -> ApprovalAnswerer:
        remaining = list(answers)

        async def answer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
            await trio.sleep(5)  # a person thinks (virtual time)
            self.asked.append(request)
            return remaining.pop(0)

        return answer

    def wired(
        self, *answers: ApprovalOutcome
    ) -> tuple[MemorySessionLog, UserApproval, ToolRegistry]:
        """A fresh session, its approval service answered by ``answerer(*answers)``, and the
        lab's registry asking it.
        """
        session = MemorySessionLog()
        approval = approval_service(self.answerer(*answers), session=session)
        return session, approval, self.registry(approval)


def write(call_id: str, path: str = "NOTES.md") -> ToolCallRequest:
    return ToolCallRequest(
        call_id=call_id, name="write", arguments=f'{{"path": "{path}", "text": "hi\\n"}}'
    )


def read(call_id: str) -> ToolCallRequest:
    return ToolCallRequest(call_id=call_id, name="read", arguments="{}")


def approval_events(session: SessionLog) -> list[SessionEvent]:
    return [
        event
        for event in session.events()
        if isinstance(event, ApprovalAskedEvent | ApprovalDecidedEvent | ApprovalRevokedEvent)
    ]


# --- validation first ------------------------------------------------------------------------


async def test_invalid_arguments_are_rejected_before_anyone_is_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session, _approval, registry = lab.wired(ApprovalOutcome.ALLOWED_ONCE)

    batch = await run_in_turn(
        registry,
        [ToolCallRequest(call_id="c1", name="count", arguments='{"n": "five"}')],
        session=session,
        agent=Agent(),
    )

    assert ([INVALID_N], [], [], [], []) == (
        texts(batch),
        lab.asked,
        lab.ran,
        lab.guarded,
        approval_events(session),
    )
    assert batch.results[0].error is not None
    assert "INVALID_ARGS" == batch.results[0].error.code


async def test_invalid_arguments_are_rejected_before_the_guards_without_pre_execute() -> None:
    lab = Lab()
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="count",
            description="Count.",
            parameters={"n": {"type": "number", "required": True}},
            execute=lab._count,  # pyright: ignore[reportPrivateUsage]
        )
    )
    registry.guard(lambda execution: lab.guarded.append(execution.call_id))

    batch = await run_tool_calls(
        registry,
        [ToolCallRequest(call_id="c1", name="count", arguments='{"n": "five"}')],
        signal=NEVER,
    )

    assert ([INVALID_N], []) == (texts(batch), lab.guarded)


async def test_valid_arguments_are_validated_once_and_then_asked_about(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    approval = approval_service(lab.answerer(ApprovalOutcome.ALLOWED_ONCE), session=session)

    batch = await run_in_turn(
        lab.registry(approval),
        [ToolCallRequest(call_id="c1", name="count", arguments='{"n": 5}')],
        session=session,
        agent=Agent(),
    )

    assert (["5"], ["c1"], ["c1"]) == (texts(batch), lab.ran, lab.guarded)


async def test_a_raw_definition_is_asked_about_as_the_original_does() -> None:
    # a raw ToolDefinition validates nothing: the original's order stands
    asked: list[str] = []

    async def answer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await trio.lowlevel.checkpoint()
        asked.append(request.tool_name)
        return ApprovalOutcome.REJECTED

    session = MemorySessionLog()
    approval = approval_service(answer, session=session)
    registry = Lab().registry(approval)

    async def raw(args: object, context: ToolRunContext) -> str:
        raise AssertionError("never runs")

    registry.register(
        ToolDefinition(name="raw", description="", parameters={"type": "object"}, execute=raw)
    )

    batch = await run_in_turn(
        registry,
        [ToolCallRequest(call_id="c1", name="raw", arguments="[1]")],
        session=session,
        agent=Agent(),
    )

    assert (['Error: the user rejected tool "raw"'], ["raw"]) == (texts(batch), asked)


# --- what is approved ---------------------------------------------------------------------------


async def test_the_request_carries_the_arguments_and_the_tools_card(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    approval = approval_service(lab.answerer(ApprovalOutcome.REJECTED), session=session)

    await run_in_turn(
        lab.registry(approval), [write("c1", "/etc/passwd")], session=session, agent=Agent()
    )

    (request,) = lab.asked
    expected = (
        {"path": "/etc/passwd", "text": "hi\n"},
        DiffCallView(
            title="write /etc/passwd",
            diffs=(FileDiff(path="/etc/passwd", old_text=None, new_text="hi\n"),),
        ),
    )
    assert expected == (request.arguments, request.view)


async def test_a_tool_without_a_presenter_gets_the_generic_card(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    approval = approval_service(lab.answerer(ApprovalOutcome.REJECTED), session=session)

    await run_in_turn(
        lab.registry(approval),
        [ToolCallRequest(call_id="c1", name="count", arguments='{"n": 2}')],
        session=session,
        agent=Agent(),
    )

    expected = GenericCallView(title="count", kind=ToolCallKind.OTHER, raw_input={"n": 2})
    assert expected == lab.asked[0].view


# --- session grants -----------------------------------------------------------------------------


async def test_allowed_session_grants_the_agent_its_tool_for_later_asks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session, approval, registry = lab.wired(ApprovalOutcome.ALLOWED_SESSION)
    agent = Agent()

    first = await run_in_turn(registry, [write("c1")], session=session, agent=agent, turn=1)
    start = trio.current_time()
    second = await run_in_turn(
        registry, [write("c2"), write("c3")], session=session, agent=agent, turn=2
    )

    assert (["wrote NOTES.md"], ["wrote NOTES.md"] * 2) == (texts(first), texts(second))
    assert 1 == len(lab.asked)  # the grant answered c2 and c3 at once: no person thinks
    assert 2.0 == trio.current_time() - start  # two bodies of 1s, no 5s answers
    decided = [e for e in session.events() if isinstance(e, ApprovalDecidedEvent)]
    expected = [
        (ApprovalOutcome.ALLOWED_SESSION, None),
        (ApprovalOutcome.ALLOWED_SESSION, "grant"),
        (ApprovalOutcome.ALLOWED_SESSION, "grant"),
    ]
    assert expected == [(e.outcome, e.answered_by) for e in decided]
    assert frozenset({("main", "write")}) == approval.grants


async def test_each_granted_ask_still_logs_one_asked_decided_pair(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session, _approval, registry = lab.wired(ApprovalOutcome.ALLOWED_SESSION)

    await run_in_turn(registry, [write("c1"), write("c2")], session=session, agent=Agent())

    events = approval_events(session)
    asked = [e.id for e in events if isinstance(e, ApprovalAskedEvent)]
    decided = [e.id for e in events if isinstance(e, ApprovalDecidedEvent)]
    assert (2, asked) == (len(set(asked)), decided)


async def test_a_grant_is_for_its_agent_only(autojump_clock: trio.testing.MockClock) -> None:
    lab = Lab()
    session, _approval, registry = lab.wired(
        ApprovalOutcome.ALLOWED_SESSION, ApprovalOutcome.REJECTED
    )

    await run_in_turn(registry, [write("c1")], session=session, agent=Agent("main"), turn=1)
    other = await run_in_turn(
        registry, [write("c2")], session=session, agent=Agent("helper"), turn=2
    )

    assert (['Error: the user rejected tool "write"'], 2) == (texts(other), len(lab.asked))


async def test_revoke_makes_the_next_ask_go_to_the_answerers_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session, approval, registry = lab.wired(
        ApprovalOutcome.ALLOWED_SESSION, ApprovalOutcome.REJECTED
    )
    agent = Agent()

    await run_in_turn(registry, [write("c1")], session=session, agent=agent, turn=1)
    approval.revoke("write", agent=agent)
    after = await run_in_turn(registry, [write("c2")], session=session, agent=agent, turn=2)

    assert (['Error: the user rejected tool "write"'], frozenset()) == (
        texts(after),
        approval.grants,
    )
    assert ApprovalRevokedEvent(tool_name="write", agent="main") in session.events()


async def test_the_never_policy_wins_over_a_grant(autojump_clock: trio.testing.MockClock) -> None:
    lab = Lab()
    session, approval, registry = lab.wired(ApprovalOutcome.ALLOWED_SESSION)
    agent = Agent()

    await run_in_turn(registry, [write("c1")], session=session, agent=agent, turn=1)
    approval.set_policy("never")
    after = await run_in_turn(registry, [write("c2")], session=session, agent=agent, turn=2)

    assert ['Error: the user rejected tool "write"'] == texts(after)


@contextmanager
def file_log(kind: str, path: Path) -> Generator[SessionLog]:
    if kind == "jsonl":
        with JsonlSessionLog(path / "log.jsonl") as log:
            yield log
    else:
        with SqliteSessionLog(path / "log.db", session_id="s1") as log:
            yield log


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_grants_survive_a_reopened_log(
    kind: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    lab = Lab()
    with file_log(kind, tmp_path) as session:
        approval = approval_service(lab.answerer(ApprovalOutcome.ALLOWED_SESSION), session=session)
        await run_in_turn(
            lab.registry(approval), [write("c1")], session=session, agent=Agent(), turn=1
        )

    # a new process: a new service and registry over the reopened log; its answerer is
    # never asked
    again = Lab()
    with file_log(kind, tmp_path) as session:
        approval = approval_service(again.answerer(), session=session)
        batch = await run_in_turn(
            again.registry(approval), [write("c2")], session=session, agent=Agent(), turn=2
        )

    assert (["wrote NOTES.md"], ["c2"], []) == (texts(batch), again.ran, again.asked)


# --- deferred decisions ---------------------------------------------------------------------


async def test_a_deferred_call_suspends_its_batch_while_the_rest_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    approval = approval_service(lab.answerer(ApprovalOutcome.DEFERRED), session=session)

    batch = await run_in_turn(
        lab.registry(approval),
        [read("r1"), write("w1"), read("r2")],
        session=session,
        agent=Agent(),
    )
    # the log, up to the turn's end: the deferred call has no tool/result, no context yet
    check_batch([read("r1"), write("w1"), read("r2")], batch, session.events()[:-1])

    assert ["r1", "r2"] == lab.ran
    assert batch.results[1].error is not None
    assert APPROVAL_PENDING == batch.results[1].error.code
    (asked,) = [e for e in session.events() if isinstance(e, ApprovalAskedEvent)]
    expected = (
        SuspendedCall(
            call_id="w1",
            tool_name="write",
            arguments=snapshot_json({"path": "NOTES.md", "text": "hi\n"}),
            view=DiffCallView(
                title="write NOTES.md",
                diffs=(FileDiff(path="NOTES.md", old_text=None, new_text="hi\n"),),
            ),
            request_id=asked.id,
        ),
    )
    assert expected == batch.suspended
    events = session.events()
    results = [e.call_id for e in events if isinstance(e, ToolResultEvent)]
    ends = [e.reason for e in events if isinstance(e, BatchEndEvent)]
    decided = [e for e in events if isinstance(e, ApprovalDecidedEvent)]
    contexts = [e for e in events if isinstance(e, ContextMessageEvent)]
    assert (["r1", "r2"], ["suspended"], [], []) == (results, ends, decided, contexts)


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize(
    ("decision", "expected_text", "expected_ran"),
    [
        ("allowed-once", "wrote NOTES.md", ["r1", "r2", "w1"]),
        ("allowed-session", "wrote NOTES.md", ["r1", "r2", "w1"]),
        ("rejected", 'Error: the user rejected tool "write"', ["r1", "r2"]),
    ],
)
async def test_resume_decides_a_deferred_call_from_a_reopened_log(
    kind: str,
    decision: str,
    expected_text: str,
    expected_ran: list[str],
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    calls = [read("r1"), write("w1"), read("r2")]
    with file_log(kind, tmp_path) as session:
        approval = approval_service(lab.answerer(ApprovalOutcome.DEFERRED), session=session)
        async with session_turn(session, 1):
            suspended = await run_tool_calls(
                lab.registry(approval), calls, signal=NEVER, agent=Agent(), session=session
            )
    assert ["w1"] == [call.call_id for call in suspended.suspended]

    # hours later, in another process: the decision comes from the command line
    with file_log(kind, tmp_path) as session:
        approval = UserApproval(session)
        registry = lab.registry(approval)
        async with session_turn(session, 2):
            batch = await resume_tool_calls(
                registry, session, signal=NEVER, agent=Agent(), approvals={"w1": decision}
            )
        assert batch is not None
        check_batch(calls, batch)
        assert (["read", expected_text, "read"], expected_ran, ()) == (
            texts(batch),
            lab.ran,
            batch.suspended,
        )
        events = session.events()
        (asked,) = [e for e in events if isinstance(e, ApprovalAskedEvent)]
        decided = [
            (e.id, e.outcome, e.answered_by) for e in events if isinstance(e, ApprovalDecidedEvent)
        ]
        assert [(asked.id, ApprovalOutcome(decision), "resume")] == decided
        assert ["suspended", "completed"] == [
            e.reason for e in events if isinstance(e, BatchEndEvent)
        ]
        # the contexts, in model order, once the batch really ended
        contexts = [e.content[0] for e in events if isinstance(e, ContextMessageEvent)]
        assert [TextBlock(text="ctx r1"), TextBlock(text="ctx r2")] == contexts
        assert (decision == "allowed-session") == (("main", "write") in approval.grants)
        assert await resume_tool_calls(registry, session, signal=NEVER, agent=Agent()) is None


async def test_a_deferred_call_without_a_decision_stays_suspended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session, _approval, registry = lab.wired(ApprovalOutcome.DEFERRED, ApprovalOutcome.DEFERRED)
    calls = [write("w1"), write("w2")]
    first = await run_in_turn(registry, calls, session=session, agent=Agent())
    assert ["w1", "w2"] == [call.call_id for call in first.suspended]

    async with session_turn(session, 2):
        partial = await resume_tool_calls(
            registry, session, signal=NEVER, agent=Agent(), approvals={"w2": "allowed-once"}
        )
        assert partial is not None
        assert (["w1"], ["w2"]) == ([call.call_id for call in partial.suspended], lab.ran)
        assert partial.suspended[0].request_id == first.suspended[0].request_id
        done = await resume_tool_calls(
            registry, session, signal=NEVER, agent=Agent(), approvals={"w1": "rejected"}
        )

    assert done is not None
    assert ['Error: the user rejected tool "write"', "wrote NOTES.md"] == texts(done)
    ends = [e.reason for e in session.events() if isinstance(e, BatchEndEvent)]
    assert ["suspended", "suspended", "completed"] == ends


async def test_approvals_for_a_call_that_is_not_pending_are_a_value_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session, _approval, registry = lab.wired(ApprovalOutcome.DEFERRED)
    await run_in_turn(registry, [write("w1")], session=session, agent=Agent())
    before = session.events()

    with pytest.raises(ValueError, match=r"not pending in batch .*: 'w9' \(pending: 'w1'\)"):
        await resume_tool_calls(
            registry, session, signal=NEVER, agent=Agent(), approvals={"w9": "rejected"}
        )
    with pytest.raises(ValueError, match='must be one of "allowed-once"'):
        await resume_tool_calls(
            registry, session, signal=NEVER, agent=Agent(), approvals={"w1": "deferred"}
        )
    assert before == session.events()


async def test_approvals_for_a_session_with_no_open_batch_are_a_value_error() -> None:
    session = MemorySessionLog()
    registry = Lab().registry(UserApproval(session))

    with pytest.raises(ValueError, match=r"no open or suspended batch \('w1'\)"):
        await resume_tool_calls(
            registry, session, signal=NEVER, agent=Agent(), approvals={"w1": "rejected"}
        )
    # without decisions there is simply nothing to resume
    assert await resume_tool_calls(registry, session, signal=NEVER, agent=Agent()) is None
    assert [] == session.events()


def test_revoke_without_an_agent_or_for_an_unnamed_one_revokes_every_agents_grant() -> None:
    session = MemorySessionLog()
    approval = UserApproval(session)
    grants = [
        ApprovalDecidedEvent(id=f"r{i}", outcome=ApprovalOutcome.ALLOWED_SESSION) for i in range(2)
    ]
    for index, (agent, event) in enumerate(zip(("main", None), grants, strict=True)):
        session.append(
            ApprovalAskedEvent(id=f"r{index}", tool_name="write", agent=agent, call_id=f"c{index}")
        )
        session.append(event)
    assert frozenset({("main", "write"), (None, "write")}) == approval.grants

    approval.revoke("write", agent=object())  # an agent with no name
    assert frozenset() == approval.grants
    assert ApprovalRevokedEvent(tool_name="write") == session.events()[-1]

    with pytest.raises(TypeError, match="needs a tool name"):
        approval.revoke("")


async def test_a_deferred_call_in_a_direct_execute_gets_the_placeholder() -> None:
    async def defer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await trio.lowlevel.checkpoint()
        return ApprovalOutcome.DEFERRED

    session = MemorySessionLog()
    approval = approval_service(defer, session=session)
    lab = Lab()
    registry = lab.registry(approval)
    seen: list[ToolExecutionResult] = []
    registry.hooks.result.add(lambda _execution, result: seen.append(result))

    async with session_turn(session, 1):
        batch = await run_tool_calls(registry, [write("w1")], signal=NEVER, agent=Agent())

    assert batch.results[0].error is not None
    assert (APPROVAL_PENDING, [], []) == (batch.results[0].error.code, seen, lab.ran)


async def test_recover_closes_a_suspended_batch_and_its_pending_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lab = Lab()
    session = MemorySessionLog()
    approval = approval_service(lab.answerer(ApprovalOutcome.DEFERRED), session=session)
    await run_in_turn(
        lab.registry(approval), [read("r1"), write("w1")], session=session, agent=Agent()
    )

    results = recover_session(session)

    assert ["r1", "w1"] == [event.call_id for event in results]
    assert results[1].error is not None
    assert "ABORTED_BEFORE_DISPATCH" == results[1].error.code
    decided = [e.outcome for e in session.events() if isinstance(e, ApprovalDecidedEvent)]
    assert [ApprovalOutcome.CANCELLED] == decided
    assert ["suspended", "aborted"] == [
        e.reason for e in session.events() if isinstance(e, BatchEndEvent)
    ]
