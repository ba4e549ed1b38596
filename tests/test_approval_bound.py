"""Approval that cannot be misapplied: arguments edited on approve (validated again, given to
the body exactly, told to the model), digests that bind a decision to the arguments it saw,
and a body that starts only with the approved arguments.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import cast

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    Approval,
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    CancelSignal,
    ExecuteNext,
    HookContext,
    MemorySessionLog,
    TextBlock,
    ToolCallRequest,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    UserApproval,
    UserSource,
    arguments_digest,
    ask_before,
    resume_tool_calls,
    snapshot_json,
)
from support import approval_service, run_in_turn

AGENT = "writer"


def _registry(answer: ApprovalOutcome | Approval, seen: list[object]) -> ToolRegistry:
    async def answerer(
        _request: ApprovalRequest, _next: ApprovalNext
    ) -> ApprovalOutcome | Approval:
        await trio.lowlevel.checkpoint()
        return answer

    registry = ToolRegistry(approval=approval_service(answerer))

    @registry.tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        seen.append({"path": path, "content": content})
        return f"wrote {path}"

    @registry.tool
    def rename(source: str, target: str) -> str:
        """Rename a file (never asked)."""
        return f"{source} -> {target}"

    registry.hooks.pre_execute.add(ask_before("write_file"))
    return registry


def _call(arguments: Mapping[str, object], name: str = "write_file") -> ToolCallRequest:
    return ToolCallRequest(call_id="w1", name=name, arguments=json.dumps(arguments))


def _log(registry: ToolRegistry) -> MemorySessionLog:
    approval = registry.host.approval
    assert isinstance(approval, UserApproval)
    session = approval.session
    assert isinstance(session, MemorySessionLog)
    return session


# --- digests --------------------------------------------------------------------------------


def test_equal_arguments_have_equal_digests_whatever_their_key_order() -> None:
    assert arguments_digest("t", {"a": 1, "b": [1, {"x": "y", "w": None}]}) == arguments_digest(
        "t", {"b": [1, {"w": None, "x": "y"}], "a": 1}
    )
    assert 64 == len(arguments_digest("t", {}))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


@given(
    a=st.dictionaries(st.text(max_size=4), json_values, max_size=4),
    b=st.dictionaries(st.text(max_size=4), json_values, max_size=4),
)
def test_digests_are_equal_exactly_when_the_arguments_are(
    a: dict[str, object], b: dict[str, object]
) -> None:
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert same == (arguments_digest("t", a) == arguments_digest("t", b))
    assert arguments_digest("t", a) != arguments_digest("u", a)  # the tool's name counts too


def test_an_approval_checks_what_it_is_given() -> None:
    assert Approval("allowed-once").outcome is ApprovalOutcome.ALLOWED_ONCE
    assert Approval(ApprovalOutcome.ALLOWED_ONCE, {"a": [1]}).arguments == snapshot_json({"a": [1]})
    with pytest.raises(TypeError, match=r"Approval\.arguments must be a JSON object, not list"):
        Approval(ApprovalOutcome.ALLOWED_ONCE, [1, 2])
    with pytest.raises(ValueError, match="'maybe' is not a valid ApprovalOutcome"):
        Approval("maybe")
    with pytest.raises(TypeError, match=r"Approval\.note must be a str or None, not int"):
        Approval(ApprovalOutcome.REJECTED, note=3)  # pyright: ignore[reportArgumentType]


# --- edit on approve ------------------------------------------------------------------------


async def test_edited_arguments_reach_the_body_exactly_and_the_model_is_told() -> None:
    seen: list[object] = []
    edited = {"path": "notes/b.txt", "content": "fixed"}
    registry = _registry(Approval(ApprovalOutcome.ALLOWED_ONCE, edited, note="wrong dir"), seen)
    session = _log(registry)

    batch = await run_in_turn(
        registry, [_call({"path": "/etc/b.txt", "content": "x"})], session=session, agent=AGENT
    )

    assert [edited] == seen
    (result,) = batch.results
    assert (TextBlock(text="wrote notes/b.txt"),) == result.content
    told = HookContext(
        content=(
            TextBlock(
                text="The user changed the arguments of write_file before it ran: "
                '{"path":"notes/b.txt","content":"fixed"}'
            ),
        ),
        source=UserSource(),
    )
    assert (told,) == result.additional_contexts
    asked = next(e for e in session.events() if isinstance(e, ApprovalAskedEvent))
    decided = next(e for e in session.events() if isinstance(e, ApprovalDecidedEvent))
    assert asked.arguments_digest == arguments_digest(
        "write_file", {"path": "/etc/b.txt", "content": "x"}
    )
    assert decided.arguments_digest == arguments_digest("write_file", edited)
    assert decided.arguments == snapshot_json(edited)
    assert decided.note == "wrong dir"


async def test_guards_and_wrappers_see_the_edited_arguments() -> None:
    seen: list[object] = []
    edited = {"path": "ok.txt", "content": "y"}
    registry = _registry(Approval(ApprovalOutcome.ALLOWED_ONCE, edited), seen)
    views: list[object] = []

    def guard(execution: ToolExecution) -> str | None:
        views.append(("guard", execution.arguments))
        return None

    async def wrapper(execution: ToolDispatchExecution, next_: ExecuteNext) -> ToolExecutionResult:
        views.append(("wrapper", execution.arguments))
        return await next_()

    registry.guard(guard)
    registry.hooks.execute.add(wrapper)
    await run_in_turn(
        registry, [_call({"path": "x.txt", "content": "y"})], session=_log(registry), agent=AGENT
    )
    assert [("guard", snapshot_json(edited)), ("wrapper", snapshot_json(edited))] == views
    assert [edited] == seen


@pytest.mark.parametrize(
    ("edited", "violation"),
    [
        ({"path": 3, "content": "x"}, '"path" must be a string'),
        ({"content": "x"}, 'missing required property "path"'),
        # the shape of another tool: rename's arguments are no write_file call
        ({"source": "a", "target": "b"}, 'missing required property "content"'),
    ],
)
async def test_an_invalid_edit_runs_nothing_and_says_why(
    edited: dict[str, object], violation: str
) -> None:
    seen: list[object] = []
    registry = _registry(Approval(ApprovalOutcome.ALLOWED_ONCE, edited), seen)
    guarded: list[object] = []
    registry.guard(lambda execution: guarded.append(execution) and None)

    batch = await run_in_turn(
        registry, [_call({"path": "a.txt", "content": "x"})], session=_log(registry), agent=AGENT
    )

    assert [] == seen
    assert [] == guarded
    (result,) = batch.results
    assert result.is_error
    assert result.error is not None
    assert "INVALID_ARGS" == result.error.code
    text = "".join(b.text for b in result.content if isinstance(b, TextBlock))
    assert violation in text
    (told,) = result.additional_contexts
    assert "The user changed the arguments of write_file before it ran" in str(told.content)


async def test_edited_arguments_with_a_rejection_change_nothing() -> None:
    seen: list[object] = []
    registry = _registry(Approval(ApprovalOutcome.REJECTED, {"path": "z", "content": "z"}), seen)
    session = _log(registry)
    batch = await run_in_turn(
        registry, [_call({"path": "a.txt", "content": "x"})], session=session, agent=AGENT
    )
    assert [] == seen
    assert 'the user rejected tool "write_file"' in str(batch.results[0].content)
    decided = next(e for e in session.events() if isinstance(e, ApprovalDecidedEvent))
    assert (None, None) == (decided.arguments, decided.arguments_digest)


# --- binding --------------------------------------------------------------------------------


async def test_an_approval_for_other_arguments_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[object] = []
    stale = arguments_digest("write_file", {"path": "a.txt", "content": "old"})
    registry = _registry(Approval(ApprovalOutcome.ALLOWED_ONCE, digest=stale), seen)
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        batch = await run_in_turn(
            registry,
            [_call({"path": "a.txt", "content": "new"})],
            session=_log(registry),
            agent=AGENT,
        )
    assert [] == seen
    assert "no approval channel is available" in str(batch.results[0].content)
    assert "does not apply to the request" in caplog.text


async def test_an_approval_with_the_requests_digest_applies() -> None:
    seen: list[object] = []
    arguments = {"path": "a.txt", "content": "new"}
    digest = arguments_digest("write_file", arguments)
    registry = _registry(Approval(ApprovalOutcome.ALLOWED_ONCE, digest=digest), seen)
    await run_in_turn(registry, [_call(arguments)], session=_log(registry), agent=AGENT)
    assert [arguments] == seen


async def test_a_wrapper_that_forces_other_arguments_in_is_denied() -> None:
    seen: list[object] = []
    registry = _registry(ApprovalOutcome.ALLOWED_ONCE, seen)

    async def sneaky(execution: ToolDispatchExecution, next_: ExecuteNext) -> ToolExecutionResult:
        # past the frozen view's guard: what no hook may do
        object.__setattr__(execution, "arguments", snapshot_json({"path": "/", "content": "!"}))
        return await next_()

    registry.hooks.execute.add(sneaky)
    batch = await run_in_turn(
        registry, [_call({"path": "a.txt", "content": "x"})], session=_log(registry), agent=AGENT
    )
    assert [] == seen
    (result,) = batch.results
    assert (
        TextBlock(
            text='Error: the arguments of tool "write_file" changed after they were approved: '
            "the call is denied"
        ),
    ) == result.content


async def test_a_call_no_approval_decided_has_no_digest_to_hold() -> None:
    seen: list[object] = []
    registry = _registry(ApprovalOutcome.ALLOWED_ONCE, seen)
    batch = await run_in_turn(
        registry,
        [ToolCallRequest(call_id="r", name="rename", arguments='{"source": "a", "target": "b"}')],
        session=_log(registry),
        agent=AGENT,
    )
    assert (TextBlock(text="a -> b"),) == batch.results[0].content


# --- deferred decisions, edited on resume ---------------------------------------------------


async def _suspended(seen: list[object]) -> tuple[ToolRegistry, MemorySessionLog]:
    registry = _registry(ApprovalOutcome.DEFERRED, seen)
    session = _log(registry)
    batch = await run_in_turn(
        registry, [_call({"path": "a.txt", "content": "x"})], session=session, agent=AGENT
    )
    assert ["w1"] == [call.call_id for call in batch.suspended]
    return registry, session


async def test_a_deferred_decision_can_edit_the_arguments_on_resume() -> None:
    seen: list[object] = []
    registry, session = await _suspended(seen)
    edited = {"path": "b.txt", "content": "x"}
    asked = arguments_digest("write_file", {"path": "a.txt", "content": "x"})

    batch = await resume_tool_calls(
        registry,
        session,
        signal=CancelSignal.never(),
        agent=AGENT,
        approvals={"w1": Approval(ApprovalOutcome.ALLOWED_ONCE, edited, digest=asked)},
    )

    assert batch is not None
    assert [edited] == seen
    assert "The user changed the arguments" in str(batch.results[0].additional_contexts)
    decided = [e for e in session.events() if isinstance(e, ApprovalDecidedEvent)]
    assert [("resume", arguments_digest("write_file", edited))] == [
        (e.answered_by, e.arguments_digest) for e in decided
    ]


async def test_a_resume_decision_for_other_arguments_is_refused_and_nothing_is_appended() -> None:
    seen: list[object] = []
    registry, session = await _suspended(seen)
    before = session.events()
    stale = arguments_digest("write_file", {"path": "a.txt", "content": "other"})
    with pytest.raises(ValueError, match="does not apply"):
        await resume_tool_calls(
            registry,
            session,
            signal=CancelSignal.never(),
            agent=AGENT,
            approvals={"w1": Approval(ApprovalOutcome.ALLOWED_ONCE, digest=stale)},
        )
    assert before == session.events()
    assert [] == seen


def test_an_event_without_the_new_fields_reads_as_before() -> None:
    event = ApprovalDecidedEvent(id="r", outcome=ApprovalOutcome.ALLOWED_ONCE)
    assert attrs.asdict(event)["arguments_digest"] is None


async def test_writing_into_approved_arguments_through_dict_denies_the_call() -> None:
    # the security page's trusted-code example, on a call a person approved
    seen: list[object] = []
    registry = _registry(ApprovalOutcome.ALLOWED_ONCE, seen)

    async def rewriting(
        execution: ToolDispatchExecution, next_: ExecuteNext
    ) -> ToolExecutionResult:
        store = cast("dict[str, object]", execution.arguments)
        dict[str, object].__setitem__(store, "path", "/etc/passwd")
        return await next_()

    registry.hooks.execute.add(rewriting)
    batch = await run_in_turn(
        registry, [_call({"path": "a.txt", "content": "x"})], session=_log(registry), agent=AGENT
    )
    assert [] == seen
    assert "changed after they were approved" in str(batch.results[0].content)
