"""UserApproval: the approval service with its audit trail."""

from __future__ import annotations

import logging
import uuid

import pytest
import trio
import trio.testing

from dsh_tools import (
    Approval,
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalPolicyEvent,
    ApprovalRequest,
    ApprovalService,
    CancelController,
    CancelSignal,
    MemorySessionLog,
    SessionEvent,
    ToolRegistry,
    TurnEndEvent,
    TurnStartEvent,
    UserApproval,
    UserApprovalStatistics,
    converter,
    session_turn,
)
from support import answering, approval_service

ALLOWED = ApprovalOutcome.ALLOWED_ONCE
REJECTED = ApprovalOutcome.REJECTED
CANCELLED = ApprovalOutcome.CANCELLED
UNAVAILABLE = ApprovalOutcome.UNAVAILABLE


class Agent:
    def __repr__(self) -> str:
        return "<agent>"


AGENT = Agent()


def _open_session() -> MemorySessionLog:
    session = MemorySessionLog()
    session.append(TurnStartEvent(turn=1))
    return session


def _request(
    *,
    agent: object = AGENT,
    signal: CancelSignal | None = None,
    call_id: str = "c1",
    reason: str | None = None,
) -> ApprovalRequest:
    return ApprovalRequest(
        agent=agent,
        tool_name="write",
        call_id=call_id,
        signal=CancelSignal.never() if signal is None else signal,
        reason=reason,
    )


def _audit(session: MemorySessionLog) -> list[SessionEvent]:
    return [e for e in session.events() if isinstance(e, ApprovalAskedEvent | ApprovalDecidedEvent)]


def _delegate(log: list[str], name: str):
    async def answerer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome | Approval:
        log.append(name)
        return await next()

    return answerer


# --- the audit pair -----------------------------------------------------------------------


async def test_a_request_appends_one_asked_and_one_decided_event_with_the_same_id() -> None:
    session = _open_session()
    approval = approval_service(answering(ALLOWED), session=session)

    outcome = await approval.request(_request(reason="writes to disk"))

    asked, decided = _audit(session)
    assert ALLOWED == outcome
    assert isinstance(asked, ApprovalAskedEvent)
    assert isinstance(decided, ApprovalDecidedEvent)
    expected = ApprovalAskedEvent(
        id=asked.id, tool_name="write", call_id="c1", reason="writes to disk"
    )
    assert expected == asked
    assert ApprovalDecidedEvent(id=asked.id, outcome=ALLOWED) == decided
    assert str(uuid.UUID(asked.id)) == asked.id


async def test_a_request_without_a_call_id_is_audited_without_one() -> None:
    session = _open_session()
    approval = approval_service(answering(ALLOWED), session=session)
    request = ApprovalRequest(agent=None, tool_name="deploy", signal=CancelSignal.never())

    outcome = await approval.request(request)

    asked, _ = _audit(session)
    assert (ALLOWED, None) == (outcome, request.call_id)
    assert ApprovalAskedEvent(id=asked.id, tool_name="deploy") == asked  # type: ignore[union-attr]
    assert "callId" not in converter.unstructure(asked, SessionEvent)


async def test_every_request_gets_a_fresh_id() -> None:
    session = _open_session()
    approval = UserApproval(session)

    for _ in range(3):
        await approval.request(_request())

    ids = [e.id for e in _audit(session) if isinstance(e, ApprovalAskedEvent)]
    assert 3 == len(set(ids))


async def test_a_request_without_answerers_is_unavailable() -> None:
    session = _open_session()

    assert UNAVAILABLE == await UserApproval(session).request(_request())
    assert [UNAVAILABLE] == [
        e.outcome for e in _audit(session) if isinstance(e, ApprovalDecidedEvent)
    ]


async def test_a_request_outside_any_turn_raises_before_anything_is_appended() -> None:
    session = MemorySessionLog()
    ran: list[str] = []
    approval = approval_service(answering(ALLOWED, ran), session=session)

    with pytest.raises(RuntimeError, match=r"^approval.request\(\) outside an open turn: "):
        await approval.request(_request())

    assert [] == session.events()
    assert [] == ran


async def test_a_request_after_the_turn_ended_raises_before_anything_is_appended() -> None:
    session = _open_session()
    session.append(TurnEndEvent(turn=1))
    approval = UserApproval(session)

    with pytest.raises(
        RuntimeError, match=r"^approval.request\(\) outside an open turn: turn 1 has ended$"
    ):
        await approval.request(_request())

    assert 2 == len(session.events())


async def test_a_request_that_is_not_an_approval_request_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="request\\(\\) takes an ApprovalRequest, not dict"):
        await UserApproval(_open_session()).request({})  # type: ignore[arg-type]


# --- answerers ----------------------------------------------------------------------------


async def test_answerers_form_a_waterfall_and_the_first_answer_wins() -> None:
    log: list[str] = []
    approval = approval_service(
        _delegate(log, "a"),
        answering(REJECTED, log, "b"),
        answering(ALLOWED, log, "c"),
        session=_open_session(),
    )

    assert REJECTED == await approval.request(_request())
    assert ["a", "b"] == log


async def test_a_prepended_answerer_is_asked_first() -> None:
    log: list[str] = []
    approval = UserApproval(_open_session())
    approval.answerers.add(answering(REJECTED, log, "late"))
    approval.answerers.add(answering(ALLOWED, log, "early"), prepend=True)

    assert ALLOWED == await approval.request(_request())
    assert ["early"] == log


async def test_delegating_to_the_end_of_the_chain_is_unavailable() -> None:
    log: list[str] = []
    approval = approval_service(_delegate(log, "a"), _delegate(log, "b"), session=_open_session())

    assert UNAVAILABLE == await approval.request(_request())
    assert ["a", "b"] == log


async def test_a_disposed_answerer_is_no_longer_asked() -> None:
    approval = UserApproval(_open_session())
    dispose = approval.answerers.add(answering(ALLOWED))
    dispose()

    assert UNAVAILABLE == await approval.request(_request())


async def test_a_scoped_answerer_hears_only_its_agents_requests() -> None:
    other = Agent()
    approval = UserApproval(_open_session())
    approval.scope(AGENT).answerers.add(answering(ALLOWED))

    assert ALLOWED == await approval.request(_request(agent=AGENT))
    assert UNAVAILABLE == await approval.request(_request(agent=other))


async def test_scoped_and_global_answerers_keep_registration_order() -> None:
    log: list[str] = []
    approval = UserApproval(_open_session())
    approval.answerers.add(_delegate(log, "global-1"))
    approval.scope(AGENT).answerers.add(_delegate(log, "scoped"))
    approval.answerers.add(answering(REJECTED, log, "global-2"))

    assert REJECTED == await approval.request(_request())
    assert ["global-1", "scoped", "global-2"] == log


async def test_closing_a_scope_removes_its_answerers_and_a_new_scope_is_made() -> None:
    approval = UserApproval(_open_session())
    scope = approval.scope(AGENT)
    assert scope is approval.scope(AGENT)
    scope.answerers.add(answering(ALLOWED))

    with scope:
        pass

    assert scope.closed
    assert scope is not approval.scope(AGENT)
    assert UNAVAILABLE == await approval.request(_request())
    with pytest.raises(RuntimeError, match="this approval scope is closed"):
        scope.answerers.add(answering(ALLOWED))
    assert UNAVAILABLE == await approval.request(_request())


def test_the_global_scope_has_no_scope_object() -> None:
    with pytest.raises(TypeError, match="scope\\(\\) needs an agent"):
        UserApproval(MemorySessionLog()).scope(None)


@pytest.mark.parametrize("rogue", ["yolo", None, 1, True, "ALLOWED-ONCE"])
async def test_a_rogue_answer_is_unavailable(
    rogue: object, caplog: pytest.LogCaptureFixture
) -> None:
    session = _open_session()
    approval = approval_service(answering(rogue), session=session)

    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        assert UNAVAILABLE == await approval.request(_request())

    assert [UNAVAILABLE] == [
        e.outcome for e in _audit(session) if isinstance(e, ApprovalDecidedEvent)
    ]
    assert "not an ApprovalOutcome or Approval: unavailable" in caplog.text


async def test_a_plain_string_outcome_is_accepted() -> None:
    approval = approval_service(answering("rejected"), session=_open_session())

    outcome = await approval.request(_request())

    assert REJECTED == outcome
    assert ApprovalOutcome is type(outcome)


class _LyingStr(str):
    """A str whose ``__eq__`` / ``__hash__`` claim it is ``"allowed-once"``."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return other == "allowed-once"

    def __hash__(self) -> int:
        return hash("allowed-once")


async def test_a_str_subclass_is_read_by_its_value_not_its_eq_or_hash() -> None:
    session = _open_session()
    approval = approval_service(answering(_LyingStr("rejected")), session=session)

    outcome = await approval.request(_request())

    assert isinstance(outcome, ApprovalOutcome)
    assert "rejected" == str.__str__(outcome)
    decided = [e.outcome for e in _audit(session) if isinstance(e, ApprovalDecidedEvent)]
    assert ["rejected"] == [str.__str__(o) for o in decided]


async def test_an_answerer_that_raises_asynchronously_is_unavailable() -> None:
    async def raises(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await trio.lowlevel.checkpoint()
        raise ConnectionError("the client went away")

    approval = approval_service(raises, session=_open_session())

    assert UNAVAILABLE == await approval.request(_request())


async def test_an_answerer_that_raises_synchronously_is_unavailable() -> None:
    def raises(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        raise ValueError("sync")

    approval = UserApproval(_open_session())
    approval.answerers.add(raises)  # type: ignore[arg-type]

    assert UNAVAILABLE == await approval.request(_request())


async def test_a_sync_answerer_returning_an_outcome_is_unavailable() -> None:
    def sync(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        return ALLOWED

    approval = UserApproval(_open_session())
    approval.answerers.add(sync)  # type: ignore[arg-type]

    assert UNAVAILABLE == await approval.request(_request())


async def test_an_outer_answerer_sees_the_inner_raise_through_next() -> None:
    seen: list[str] = []

    async def outer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome | Approval:
        try:
            return await next()
        except LookupError as exc:
            seen.append(str(exc))
            return REJECTED

    async def inner(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        raise LookupError("no channel")

    approval = approval_service(outer, inner, session=_open_session())

    assert REJECTED == await approval.request(_request())
    assert ["no channel"] == seen


# --- policy -------------------------------------------------------------------------------


async def test_policy_never_rejects_before_any_answerer_even_a_prepended_one() -> None:
    ran: list[str] = []
    session = _open_session()
    approval = approval_service(answering(ALLOWED, ran, "a"), session=session)
    approval.scope(AGENT).answerers.add(answering(ALLOWED, ran, "scoped"), prepend=True)
    approval.answerers.add(answering(ALLOWED, ran, "first"), prepend=True)
    approval.set_policy("never")

    assert REJECTED == await approval.request(_request())
    assert [] == ran
    assert [REJECTED] == [e.outcome for e in _audit(session) if isinstance(e, ApprovalDecidedEvent)]


def test_set_policy_logs_an_approval_policy_event() -> None:
    session = MemorySessionLog()
    approval = UserApproval(session)

    approval.set_policy("never")
    approval.set_policy("ask")

    assert [
        ApprovalPolicyEvent(policy="never"),
        ApprovalPolicyEvent(policy="ask"),
    ] == session.events()


@pytest.mark.parametrize("bad", ["always", "", "Never", None, 1])
def test_set_policy_validates_and_appends_nothing_for_a_bad_policy(bad: object) -> None:
    session = MemorySessionLog()

    with pytest.raises((TypeError, ValueError)) as raised:
        UserApproval(session).set_policy(bad)  # type: ignore[arg-type]

    assert 'approval policy must be one of "ask" or "never"' == str(raised.value)
    assert [] == session.events()


def test_the_constructor_validates_its_default_policy() -> None:
    with pytest.raises(ValueError, match=r'^approval policy must be one of "ask" or "never"$'):
        UserApproval(MemorySessionLog(), policy="sometimes")  # type: ignore[arg-type]


def test_the_effective_policy_is_the_last_logged_one_else_the_default() -> None:
    session = MemorySessionLog()
    approval = UserApproval(session, policy="never")
    assert "never" == approval.policy

    session.append(ApprovalPolicyEvent(policy="ask"))
    assert "ask" == approval.policy
    session.append(TurnStartEvent(turn=2))
    session.append(ApprovalPolicyEvent(policy="never"))
    assert "never" == approval.policy
    # another service over the same log sees the logged policy, not its own default
    assert "never" == UserApproval(session, policy="ask").policy


async def test_a_default_policy_of_never_rejects_until_ask_is_logged() -> None:
    session = _open_session()
    approval = approval_service(answering(ALLOWED), session=session, policy="never")

    assert REJECTED == await approval.request(_request())
    approval.set_policy("ask")
    assert ALLOWED == await approval.request(_request())


# --- cancellation -------------------------------------------------------------------------


async def test_an_already_cancelled_signal_is_cancelled_without_asking_any_answerer() -> None:
    ran: list[str] = []
    controller = CancelController()
    controller.cancel("esc")
    session = _open_session()
    approval = approval_service(answering(ALLOWED, ran, "a"), session=session)

    assert CANCELLED == await approval.request(_request(signal=controller.signal))
    assert [] == ran
    assert 2 == len(_audit(session))


async def test_an_already_cancelled_signal_wins_over_policy_never() -> None:
    controller = CancelController()
    controller.cancel()
    approval = UserApproval(_open_session(), policy="never")

    assert CANCELLED == await approval.request(_request(signal=controller.signal))


async def test_cancelling_while_an_answerer_waits_is_cancelled_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController()
    unwound: list[float] = []

    async def waits(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        try:
            await trio.sleep(100)
        finally:
            unwound.append(trio.current_time())
        return ALLOWED

    session = _open_session()
    approval = approval_service(waits, session=session)

    async with trio.open_nursery() as nursery:

        async def user_presses_escape() -> None:
            await trio.sleep(3)
            controller.cancel("esc")

        nursery.start_soon(user_presses_escape)
        outcome = await approval.request(_request(signal=controller.signal))
        done = trio.current_time()

    assert (CANCELLED, 3.0, [3.0]) == (outcome, done, unwound)
    assert [CANCELLED] == [
        e.outcome for e in _audit(session) if isinstance(e, ApprovalDecidedEvent)
    ]


async def test_a_late_answer_after_cancellation_is_discarded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController()

    async def shielded(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        with trio.CancelScope(shield=True):
            await trio.sleep(5)
        return ALLOWED

    approval = approval_service(shielded, session=_open_session())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_after, controller, 1)
        outcome = await approval.request(_request(signal=controller.signal))

    assert CANCELLED == outcome


async def test_a_late_rejection_after_cancellation_is_discarded_silently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController()

    async def fails_late(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        try:
            await trio.sleep(10)
        finally:
            raise ConnectionError("rpc failed")

    approval = approval_service(fails_late, session=_open_session())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_after, controller, 1)
        outcome = await approval.request(_request(signal=controller.signal))

    assert CANCELLED == outcome


async def _cancel_after(controller: CancelController, seconds: float) -> None:
    await trio.sleep(seconds)
    controller.cancel("esc")


async def test_a_signal_deadline_cancels_a_waiting_answerer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController(deadline=trio.current_time() + 2)

    async def waits(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await trio.sleep_forever()

    approval = approval_service(waits, session=_open_session())

    assert CANCELLED == await approval.request(_request(signal=controller.signal))
    assert 2.0 == trio.current_time()


async def test_cancelling_the_callers_scope_logs_cancelled_and_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def waits(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await trio.sleep_forever()

    session = _open_session()
    approval = approval_service(waits, session=session)

    with trio.move_on_after(1) as scope:
        await approval.request(_request())

    assert scope.cancelled_caught
    asked, decided = _audit(session)
    assert isinstance(asked, ApprovalAskedEvent)
    assert ApprovalDecidedEvent(id=asked.id, outcome=CANCELLED) == decided


async def test_a_caller_cancelled_at_entry_appends_nothing() -> None:
    session = _open_session()
    with trio.CancelScope() as scope:
        scope.cancel()
        await UserApproval(session).request(_request())

    assert [TurnStartEvent(turn=1)] == session.events()


# --- append failures ----------------------------------------------------------------------


class FailingLog(MemorySessionLog):
    """Appends fail for the event types in ``fail``."""

    def __init__(self, *fail: type) -> None:
        super().__init__()
        self.fail = fail

    def append(self, event: SessionEvent, /) -> int:
        if isinstance(event, self.fail):
            raise OSError("disk full")
        return super().append(event)


async def test_a_failing_asked_append_propagates_and_no_answerer_is_asked() -> None:
    ran: list[str] = []
    session = FailingLog(ApprovalAskedEvent)
    session.append(TurnStartEvent(turn=1))
    approval = approval_service(answering(ALLOWED, ran, "a"), session=session)

    with pytest.raises(OSError, match="disk full"):
        await approval.request(_request())

    assert [] == ran
    assert [TurnStartEvent(turn=1)] == session.events()


async def test_a_failing_decided_append_propagates_instead_of_an_unrecorded_outcome() -> None:
    session = FailingLog(ApprovalDecidedEvent)
    session.append(TurnStartEvent(turn=1))
    approval = approval_service(answering(ALLOWED), session=session)

    with pytest.raises(OSError, match="disk full"):
        await approval.request(_request())


async def test_a_failing_decided_append_while_the_caller_is_cancelled_keeps_the_cancellation(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def waits(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await trio.sleep_forever()

    session = FailingLog(ApprovalDecidedEvent)
    session.append(TurnStartEvent(turn=1))
    approval = approval_service(waits, session=session)

    with trio.move_on_after(1) as scope:
        await approval.request(_request())

    assert scope.cancelled_caught
    assert "could not append approval/decided" in caplog.text


# --- turns --------------------------------------------------------------------------------


async def test_session_turn_appends_start_and_completed_end() -> None:
    session = MemorySessionLog()

    async with session_turn(session, 3, trigger={"kind": "user"}):
        assert [TurnStartEvent(turn=3, trigger={"kind": "user"})] == session.events()

    assert TurnEndEvent(turn=3, kind="completed") == session.events()[-1]


async def test_session_turn_ends_aborted_when_the_body_raises() -> None:
    session = MemorySessionLog()

    with pytest.raises(KeyError):
        async with session_turn(session, 1):
            raise KeyError("x")

    assert [TurnStartEvent(turn=1), TurnEndEvent(turn=1, kind="aborted")] == session.events()


async def test_session_turn_ends_aborted_when_the_body_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    session = MemorySessionLog()

    with trio.move_on_after(1):
        async with session_turn(session, 1):
            await trio.sleep_forever()

    assert [TurnStartEvent(turn=1), TurnEndEvent(turn=1, kind="aborted")] == session.events()


async def test_a_request_inside_session_turn_is_answered() -> None:
    session = MemorySessionLog()
    approval = approval_service(answering(ALLOWED), session=session)

    async with session_turn(session, 1):
        assert ALLOWED == await approval.request(_request())
    with pytest.raises(RuntimeError, match="turn 1 has ended"):
        await approval.request(_request())


def test_session_turn_rejects_a_bad_turn_number() -> None:
    with pytest.raises(ValueError, match="turn must be a non-negative int"):
        session_turn(MemorySessionLog(), -1)


def test_user_approval_is_an_approval_service_for_the_registry() -> None:
    service: ApprovalService = UserApproval(MemorySessionLog())  # pyright checks the protocol

    registry = ToolRegistry(approval=service)

    assert service is registry.approval


def test_closing_a_scope_twice_is_harmless_and_reprs_say_what_they_are() -> None:
    session = MemorySessionLog()
    approval = UserApproval(session)
    scope = approval.scope(AGENT)

    assert "<ApprovalScope open agent=<agent>>" == repr(scope)
    scope.close()
    scope.close()
    assert "<ApprovalScope closed agent=<agent>>" == repr(scope)
    assert session is approval.session
    assert "<UserApproval session=MemorySessionLog(_events=[])>" == repr(approval)


def test_a_policy_event_validates_its_policy() -> None:
    with pytest.raises(ValueError, match=r'^approval policy must be one of "ask" or "never"$'):
        ApprovalPolicyEvent(policy="always")  # type: ignore[arg-type]


async def test_statistics_count_answerers_scopes_and_requests_waiting_for_a_decision() -> None:
    session = _open_session()
    approval = UserApproval(session)
    gate = trio.Event()

    async def waits(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await gate.wait()
        return ALLOWED

    approval.answerers.add(waits)
    approval.scope(AGENT).answerers.add(answering(REJECTED))
    seen: list[UserApprovalStatistics] = [approval.statistics()]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(approval.request, _request(agent=Agent()))
        await trio.testing.wait_all_tasks_blocked()
        seen.append(approval.statistics())
        gate.set()
    seen.append(approval.statistics())

    assert [
        UserApprovalStatistics(answerers=2, scopes=1, pending=0),
        UserApprovalStatistics(answerers=2, scopes=1, pending=1),
        UserApprovalStatistics(answerers=2, scopes=1, pending=0),
    ] == seen
