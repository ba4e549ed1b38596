"""User approval: an :class:`~dsh_tools.ApprovalService` that asks answerers and keeps an audit
trail in the session log (the original's ``dsh-user-approval`` service).

One request, in order::

    open turn?          no  -> RuntimeError, nothing appended
    append approval/asked {id, toolName, callId?, reason?, agent?}   (id: a fresh UUID)
    signal cancelled?   yes -> cancelled      (no answerer asked)
    policy "never"?     yes -> rejected       (no answerer asked, a prepended one neither)
    a session grant?    yes -> allowed-session, answeredBy "grant" (no answerer asked)
    answerers           waterfall of the request agent's answerers; the end answers unavailable;
                        a raise or a value outside ApprovalOutcome -> unavailable;
                        the signal fires meanwhile -> cancelled at once, the late answer dropped
    deferred?           yes -> return deferred; the request stays pending (no approval/decided
                        until resume_tool_calls decides it)
    append approval/decided {id, outcome, answeredBy?}
    return outcome

Every request appends exactly one ``approval/asked`` and one ``approval/decided`` with the same
id (a deferred one: once it is decided), also when the caller's own trio scope is cancelled
while an answerer waits (then the decided outcome is ``cancelled`` and ``trio.Cancelled``
propagates). A failing append propagates: an approval that could not be recorded is not given.

Grants are part of the log: ``allowed-session`` grants the agent the tool until
:meth:`UserApproval.revoke` logs ``approval/revoked``, in this process or after a restart.

The policy is part of the log: :meth:`UserApproval.set_policy` appends ``approval/policy``, and
the policy in effect is the last one logged (the constructor's default until then).
"""

from __future__ import annotations

import logging
import uuid
from typing import Final

import attrs
import trio

from dsh_tools._sessions._events import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalPolicy,
    ApprovalPolicyEvent,
    ApprovalRevokedEvent,
    TurnEndEvent,
    TurnStartEvent,
    check_approval_policy,
)
from dsh_tools._sessions._grants import agent_name
from dsh_tools._sessions._log import SessionLog
from dsh_tools._sessions._reader import SessionReader
from dsh_tools._texts import debug_traceback, one_line
from dsh_tools._values._disposer import AgentScope
from dsh_tools._values._execution import (
    Approval,
    ApprovalOutcome,
    ApprovalRequest,
    arguments_digest,
    decided_digest,
)
from dsh_tools._values._signal import linked_cancel_scope

from ._answerers import ApprovalAnswerer, answer_chain
from ._hooks import HookList, HookPoint

__all__ = [
    "ApprovalScope",
    "UserApproval",
    "UserApprovalStatistics",
]

logger: Final = logging.getLogger("dsh_tools")


@attrs.frozen(kw_only=True)
class UserApprovalStatistics:
    """What :meth:`UserApproval.statistics` reports: a frozen snapshot, not a live view."""

    answerers: int
    """Answerers registered, global and scoped."""
    scopes: int
    """Agent scopes open."""
    pending: int
    """Requests asked and not yet decided (each waits for an answerer)."""


class ApprovalScope(AgentScope):
    """The answerers of one agent: heard only for requests whose ``agent`` is that agent.

    Obtain it with ``approval.scope(agent)``; ``close()`` (or leaving the ``with`` block)
    removes every answerer added through it.
    """

    __slots__ = ("_scopes", "answerers")

    agent: object
    """The agent (compared by identity)."""

    answerers: HookPoint[ApprovalAnswerer]
    """``add(fn, *, prepend=False) -> Disposer`` for this agent's answerers."""

    def __init__(
        self,
        answerer_list: HookList[ApprovalAnswerer],
        agent: object,
        scopes: dict[int, ApprovalScope],
    ) -> None:
        # the owning UserApproval's answerer list and its scope table (forgets this scope
        # on close)
        super().__init__(agent, "this approval scope")
        self._scopes = scopes
        self.answerers = HookPoint(answerer_list, agent, self._owned.own)

    def _forget(self) -> None:
        scopes = self._scopes
        if scopes.get(id(self.agent)) is self:
            del scopes[id(self.agent)]


class UserApproval:
    """Asks the user (through answerers) whether a call marked ``Ask`` may run, and records
    every request and decision in ``session``.

    Pass it as ``ToolRegistry(approval=UserApproval(session))``. Answerers are added with
    ``approval.answerers.add(fn)`` (every agent's requests) or
    ``approval.scope(agent).answerers.add(fn)`` (that agent's only); they form a waterfall in
    registration order (``prepend=True`` puts one first), each an
    ``async (request, next) -> ApprovalOutcome``.

    Args:
        session: the agent's session log: requests need an open turn in it (see
            :func:`session_turn`), and the audit events and policy changes go there.
        policy: the policy until one is logged: ``"ask"`` (default) or ``"never"``.

    Raises:
        TypeError, ValueError: ``policy`` is not ``"ask"`` or ``"never"``.
        TypeError: ``session`` is not a :class:`~dsh_tools.SessionLog` (no ``append`` and
            ``events``).
    """

    __slots__ = (
        "_answerer_list",
        "_default_policy",
        "_pending",
        "_scopes",
        "_session",
        "answerers",
    )

    answerers: HookPoint[ApprovalAnswerer]
    """``add(fn, *, prepend=False) -> Disposer`` for answerers heard by every agent."""

    def __init__(self, session: SessionLog, *, policy: ApprovalPolicy = "ask") -> None:
        if not (
            callable(getattr(session, "append", None))
            and callable(getattr(session, "events", None))
        ):
            raise TypeError(
                "session must be a SessionLog (with append and events), "
                f"not {type(session).__name__}"
            )
        self._session = session
        self._default_policy: ApprovalPolicy = check_approval_policy(policy)
        self._answerer_list = HookList[ApprovalAnswerer]()
        self._scopes: dict[int, ApprovalScope] = {}
        self._pending = 0
        self.answerers = HookPoint(self._answerer_list)

    def statistics(self) -> UserApprovalStatistics:
        """How many answerers and scopes the service holds and how many requests wait for a
        decision right now. Not a checkpoint.
        """
        return UserApprovalStatistics(
            answerers=len(self._answerer_list), scopes=len(self._scopes), pending=self._pending
        )

    @property
    def session(self) -> SessionLog:
        """The session log the audit events go to."""
        return self._session

    def scope(self, agent: object) -> ApprovalScope:
        """The answerer scope of ``agent`` (not ``None``): the same object until it is closed."""
        if agent is None:
            raise TypeError("scope() needs an agent: None is the global scope")
        scope = self._scopes.get(id(agent))
        if scope is None or scope.agent is not agent:
            scope = self._scopes[id(agent)] = ApprovalScope(
                self._answerer_list, agent, self._scopes
            )
        return scope

    @property
    def policy(self) -> ApprovalPolicy:
        """The policy in effect: the last ``approval/policy`` in the session, else the default.

        Reads the session's events (a file read for a :class:`~dsh_tools.JsonlSessionLog`).
        """
        return SessionReader(self._session.events()).policy(self._default_policy)

    def set_policy(self, policy: ApprovalPolicy) -> None:
        """Validate ``policy`` and log it as ``approval/policy``; it applies from the next request.

        Raises:
            TypeError, ValueError: ``policy`` is not ``"ask"`` or ``"never"`` (text:
                ``approval policy must be one of "ask" or "never"``); nothing is appended.
        """
        self._session.append(ApprovalPolicyEvent(policy=check_approval_policy(policy)))

    async def request(self, request: ApprovalRequest, /) -> ApprovalOutcome | Approval:
        """Decide ``request`` and record it (``approval/asked`` then ``approval/decided``).

        A checkpoint on entry, before anything is appended. Cancellation through
        ``request.signal`` is an outcome (``CANCELLED``), at once even while an answerer
        waits: the answerer is cancelled and whatever it would have answered is dropped. A
        cancellation of the caller's own trio scope while an answerer waits logs
        ``cancelled`` as the decision and propagates.

        Raises:
            RuntimeError: the session is not inside an open turn (nothing is appended).
            TypeError: ``request`` is not an :class:`~dsh_tools.ApprovalRequest`.
            Exception: whatever the session's ``append`` raises.
        """
        await trio.lowlevel.checkpoint()
        if not isinstance(request, ApprovalRequest):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"request() takes an ApprovalRequest, not {type(request).__name__}")
        reader = SessionReader(self._session.events())
        _check_open_turn(reader)
        policy = reader.policy(self._default_policy)
        request_id = str(uuid.uuid4())
        name = agent_name(request.agent)
        asked_digest = (
            None
            if request.arguments is None
            else arguments_digest(request.tool_name, request.arguments)
        )
        self._session.append(
            ApprovalAskedEvent(
                id=request_id,
                tool_name=request.tool_name,
                call_id=request.call_id,
                reason=request.reason,
                agent=name,
                arguments_digest=asked_digest,
            )
        )
        if (
            policy != "never"
            and not request.signal.cancelled
            and (name, request.tool_name) in reader.grants()
        ):
            self._session.append(
                ApprovalDecidedEvent(
                    id=request_id,
                    outcome=ApprovalOutcome.ALLOWED_SESSION,
                    answered_by="grant",
                    arguments_digest=asked_digest,
                )
            )
            return ApprovalOutcome.ALLOWED_SESSION
        self._pending += 1
        try:
            outcome = await self._decide(request, policy)
        except BaseException:
            # the caller's own scope was cancelled (or the process is going down): the request
            # still gets its decision, and the original exception goes on
            try:
                self._session.append(
                    ApprovalDecidedEvent(id=request_id, outcome=ApprovalOutcome.CANCELLED)
                )
            except Exception:
                logger.exception("approval %s: could not append approval/decided", request_id)
            raise
        finally:
            self._pending -= 1
        if type(outcome) is Approval:
            outcome = _bound(request, outcome, asked_digest)
        decided = outcome.outcome if type(outcome) is Approval else outcome
        if decided is not ApprovalOutcome.DEFERRED:
            self._session.append(_decided_event(request, request_id, outcome, asked_digest))
        return outcome

    def revoke(self, tool_name: str, *, agent: object = None) -> None:
        """Revoke the session grant of ``tool_name`` (logged as ``approval/revoked``): the
        grant of ``agent`` (by its name, see :class:`ApprovalAskedEvent`), or, with
        ``agent=None``, of every agent. An agent without a name cannot be told apart in the
        log, so revoking its grant revokes the tool's grant of every agent (it errs towards
        asking again). Later requests ask the answerers again. Not a checkpoint.

        Raises:
            TypeError: ``tool_name`` is not a non-empty ``str``.
        """
        if not isinstance(tool_name, str) or not tool_name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"revoke() needs a tool name (a non-empty str), not {tool_name!r}")
        name = None if agent is None else agent_name(agent)
        self._session.append(ApprovalRevokedEvent(tool_name=tool_name, agent=name))

    @property
    def grants(self) -> frozenset[tuple[str | None, str]]:
        """The session grants standing now, as (agent name, tool name) pairs, folded from the
        session log (a file read for a file log).
        """
        return SessionReader(self._session.events()).grants()

    async def _decide(
        self, request: ApprovalRequest, policy: ApprovalPolicy
    ) -> ApprovalOutcome | Approval:
        signal = request.signal
        if signal.cancelled:
            return ApprovalOutcome.CANCELLED  # noqa: ASYNC910 - request() checkpointed
        if policy == "never":
            return ApprovalOutcome.REJECTED  # noqa: ASYNC910 - request() checkpointed
        answerers = self._answerer_list.for_agent(request.agent)
        outcome: ApprovalOutcome | Approval = ApprovalOutcome.UNAVAILABLE
        with linked_cancel_scope(signal):
            try:
                outcome = await answer_chain(answerers, request)()
            except Exception as exc:
                logger.warning(
                    "tool %r call %r: an approval answerer raised: %s",
                    request.tool_name,
                    request.call_id,
                    one_line(exc),
                    exc_info=debug_traceback(logger, exc),
                )
                outcome = ApprovalOutcome.UNAVAILABLE
        if signal.cancelled:
            return ApprovalOutcome.CANCELLED  # noqa: ASYNC910 - request() checkpointed
        return outcome  # noqa: ASYNC910 - request() checkpointed

    def hears(self, agent: object) -> bool:
        """Whether an answerer (global, or ``agent``'s scope's) would hear ``agent``'s
        requests. Not a checkpoint.
        """
        return bool(self._answerer_list.for_agent(agent))

    def __repr__(self) -> str:
        return f"<UserApproval session={self._session!r}>"


def _bound(
    request: ApprovalRequest, approval: Approval, asked: str | None
) -> ApprovalOutcome | Approval:
    """``approval``, if it may apply to ``request``: one whose ``digest`` names other arguments
    than the request's is refused (logged; the request is then unavailable), as are edited
    arguments for a request that carried none (it is not a tool call's).
    """
    if approval.digest is not None and approval.digest != asked:
        logger.warning(
            "tool %r call %r: an approval for arguments of digest %s does not apply to the "
            "request (digest %s): unavailable",
            request.tool_name,
            request.call_id,
            approval.digest,
            asked,
        )
        return ApprovalOutcome.UNAVAILABLE
    if approval.arguments is not None and request.arguments is None:
        logger.warning(
            "tool %r: an approval edited the arguments of a request that has none: unavailable",
            request.tool_name,
        )
        return ApprovalOutcome.UNAVAILABLE
    return approval


def _decided_event(
    request: ApprovalRequest,
    request_id: str,
    answer: ApprovalOutcome | Approval,
    asked: str | None,
) -> ApprovalDecidedEvent:
    """The ``approval/decided`` of ``answer``: its outcome, and (allowing) the digest of the
    arguments it allows, edited arguments and a note when it has them.
    """
    decision = answer if type(answer) is Approval else Approval(answer)
    digest = (
        None
        if asked is None and decision.arguments is None
        else decided_digest(request.tool_name, request.arguments, decision)
    )
    allowed = digest is not None
    return ApprovalDecidedEvent(
        id=request_id,
        outcome=decision.outcome,
        arguments_digest=digest,
        arguments=decision.arguments if allowed else None,
        note=decision.note,
    )


def _check_open_turn(reader: SessionReader) -> None:
    turn = reader.open_turn()
    if isinstance(turn, TurnStartEvent):
        return
    if isinstance(turn, TurnEndEvent):
        raise RuntimeError(  # noqa: TRY004 - a state error, not a type error
            f"approval.request() outside an open turn: turn {turn.turn} has ended"
        )
    raise RuntimeError(
        "approval.request() outside an open turn: the session has no turn/start "
        "(run the agent's turn inside session_turn())"
    )
