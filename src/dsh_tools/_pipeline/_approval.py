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

import builtins
import inspect
import json
import logging
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Final, TypeAlias, cast, final

import attrs
import trio

from dsh_tools._errors import ApprovalSetupWarning
from dsh_tools._sessions._grants import agent_name, grants_in
from dsh_tools._sessions._session import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalPolicy,
    ApprovalPolicyEvent,
    ApprovalRevokedEvent,
    SessionEvent,
    SessionLog,
    TurnEndEvent,
    TurnStartEvent,
    check_approval_policy,
)
from dsh_tools._texts import error_message
from dsh_tools._values._content import TextBlock
from dsh_tools._values._disposer import DisposerGroup
from dsh_tools._values._execution import (
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    PreToolDecision,
    ToolExecution,
    read_approval_outcome,
)
from dsh_tools._values._presentation import DiffCallView, TerminalCallView, unified_diff_lines
from dsh_tools._values._printable import printable
from dsh_tools._values._signal import linked_cancel_scope

from ._call import PipelineHost
from ._hooks import HookList, HookPoint, PreExecuteHook, PreExecuteNext, waterfall

__all__ = [
    "ApprovalAnswerer",
    "ApprovalNext",
    "ApprovalScope",
    "UserApproval",
    "UserApprovalStatistics",
    "ask_before",
    "check_approval_setup",
    "console_answerer",
    "describe_call",
    "session_turn",
]

logger: Final = logging.getLogger("dsh_tools")


ApprovalNext: TypeAlias = Callable[[], Awaitable[ApprovalOutcome]]
"""Asks the rest of the answerers (``UNAVAILABLE`` at the end of the chain)."""

ApprovalAnswerer: TypeAlias = Callable[[ApprovalRequest, ApprovalNext], Awaitable[ApprovalOutcome]]
"""``async (request, next) -> ApprovalOutcome``: answer, or delegate with ``return await next()``."""


@attrs.frozen(kw_only=True)
class UserApprovalStatistics:
    """What :meth:`UserApproval.statistics` reports: a frozen snapshot, not a live view."""

    answerers: int
    """Answerers registered, global and scoped."""
    scopes: int
    """Agent scopes open."""
    pending: int
    """Requests asked and not yet decided (each waits for an answerer)."""


class ApprovalScope:
    """The answerers of one agent: heard only for requests whose ``agent`` is that agent.

    Obtain it with ``approval.scope(agent)``; ``close()`` (or leaving the ``with`` block)
    removes every answerer added through it.
    """

    __slots__ = ("_owned", "_scopes", "agent", "answerers")

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
        self._scopes = scopes
        self.agent = agent
        self._owned = owned = DisposerGroup("this approval scope")
        self.answerers = HookPoint(answerer_list, agent, owned.own)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._owned.closed

    def close(self) -> None:
        """Remove every answerer added through this scope, last first. Idempotent."""
        try:
            self._owned.close()
        finally:
            scopes = self._scopes
            if scopes.get(id(self.agent)) is self:
                del scopes[id(self.agent)]

    def __enter__(self) -> ApprovalScope:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._owned.closed else "open"
        return f"<ApprovalScope {state} agent={self.agent!r}>"


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
        return _policy_in(self._session.events(), self._default_policy)

    def set_policy(self, policy: ApprovalPolicy) -> None:
        """Validate ``policy`` and log it as ``approval/policy``; it applies from the next request.

        Raises:
            TypeError, ValueError: ``policy`` is not ``"ask"`` or ``"never"`` (text:
                ``approval policy must be one of "ask" or "never"``); nothing is appended.
        """
        self._session.append(ApprovalPolicyEvent(policy=check_approval_policy(policy)))

    async def request(self, request: ApprovalRequest, /) -> ApprovalOutcome:
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
        events = self._session.events()
        _check_open_turn(events)
        policy = _policy_in(events, self._default_policy)
        request_id = str(uuid.uuid4())
        name = agent_name(request.agent)
        self._session.append(
            ApprovalAskedEvent(
                id=request_id,
                tool_name=request.tool_name,
                call_id=request.call_id,
                reason=request.reason,
                agent=name,
            )
        )
        if (
            policy != "never"
            and not request.signal.cancelled
            and (name, request.tool_name) in grants_in(events)
        ):
            self._session.append(
                ApprovalDecidedEvent(
                    id=request_id, outcome=ApprovalOutcome.ALLOWED_SESSION, answered_by="grant"
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
        if outcome is not ApprovalOutcome.DEFERRED:
            self._session.append(ApprovalDecidedEvent(id=request_id, outcome=outcome))
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
        return grants_in(self._session.events())

    async def _decide(self, request: ApprovalRequest, policy: ApprovalPolicy) -> ApprovalOutcome:
        signal = request.signal
        if signal.cancelled:
            return ApprovalOutcome.CANCELLED  # noqa: ASYNC910 - request() checkpointed
        if policy == "never":
            return ApprovalOutcome.REJECTED  # noqa: ASYNC910 - request() checkpointed
        answerers = self._answerer_list.for_agent(request.agent)
        outcome = ApprovalOutcome.UNAVAILABLE
        with linked_cancel_scope(signal):
            try:
                outcome = await _chain(answerers, request)()
            except Exception as exc:
                logger.warning(
                    "tool %r call %r: an approval answerer raised: %s",
                    request.tool_name,
                    request.call_id,
                    error_message(exc),
                    exc_info=exc,
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


def _policy_in(events: Sequence[SessionEvent], default: ApprovalPolicy) -> ApprovalPolicy:
    for event in reversed(events):
        if isinstance(event, ApprovalPolicyEvent):
            return event.policy
    return default


def _check_open_turn(events: Sequence[SessionEvent]) -> None:
    for event in reversed(events):
        if isinstance(event, TurnStartEvent):
            return
        if isinstance(event, TurnEndEvent):
            raise RuntimeError(  # noqa: TRY004 - a state error, not a type error
                f"approval.request() outside an open turn: turn {event.turn} has ended"
            )
    raise RuntimeError(
        "approval.request() outside an open turn: the session has no turn/start "
        "(run the agent's turn inside session_turn())"
    )


async def _unavailable() -> ApprovalOutcome:
    await trio.lowlevel.checkpoint()
    return ApprovalOutcome.UNAVAILABLE


def _chain(answerers: Sequence[ApprovalAnswerer], request: ApprovalRequest) -> ApprovalNext:
    return waterfall(tuple(_checked(answerer) for answerer in answerers), (request,), _unavailable)


def _checked(answerer: ApprovalAnswerer) -> ApprovalAnswerer:
    """``answerer``, with its reply read as an :class:`ApprovalOutcome` (a plug-in: its
    annotation is not trusted; anything else is a rogue answer, read as unavailable).
    """

    async def step(request: ApprovalRequest, rest: ApprovalNext) -> ApprovalOutcome:
        pending = cast(object, answerer(request, rest))
        if not inspect.isawaitable(pending):
            await trio.lowlevel.checkpoint()
            return _rogue(request, pending, "returned (not awaitable)")
        answer = cast(object, await pending)
        known = read_approval_outcome(answer)
        if known is None:
            return _rogue(request, answer, "answered")
        return known

    return step


def _rogue(request: ApprovalRequest, answer: object, how: str) -> ApprovalOutcome:
    logger.warning(
        "tool %r call %r: an approval answerer %s %r, not an ApprovalOutcome: unavailable",
        request.tool_name,
        request.call_id,
        how,
        answer,
    )
    return ApprovalOutcome.UNAVAILABLE


# --- wiring -------------------------------------------------------------------------------


@final
class _AskBefore:
    __slots__ = ("reason", "tool_names")

    def __init__(self, tool_names: frozenset[str], reason: str | None) -> None:
        self.tool_names = tool_names
        self.reason = reason

    async def __call__(self, execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        if execution.name in self.tool_names:
            await trio.lowlevel.checkpoint()
            return Ask(reason=self.reason)
        return await next()

    def __repr__(self) -> str:
        names = ", ".join(repr(name) for name in sorted(self.tool_names))
        return f"ask_before({names})"


def ask_before(*tool_names: str, reason: str | None = None) -> PreExecuteHook:
    """A ``pre_execute`` policy that asks the approval service before every call of the named
    tools (``Ask(reason)``) and leaves every other call to the rest of the waterfall.

    Add it with ``registry.hooks.pre_execute.add(ask_before("write_file", "run_command"))``
    (or to an agent's scope). A batch set up on a registry with this policy and no approval
    service warns (:class:`~dsh_tools.ApprovalSetupWarning`).

    Raises:
        TypeError: no tool name, or a name that is not a non-empty ``str``; ``reason`` is
            neither ``None`` nor a ``str``.
    """
    if not tool_names:
        raise TypeError("ask_before() needs at least one tool name")
    for name in tool_names:
        if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ask_before(): a tool name must be a non-empty str, not {name!r}")
    if reason is not None and not isinstance(reason, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"ask_before(): reason must be a str or None, not {type(reason).__name__}")
    return _AskBefore(frozenset(tool_names), reason)


def check_approval_setup(
    host: PipelineHost, agent: object, *, answerers: bool = True, stacklevel: int = 3
) -> None:
    """Warn (:class:`~dsh_tools.ApprovalSetupWarning`) about approval that a batch of
    ``agent`` on ``host`` could never get. Only what the library can see for sure: an
    ``ask_before`` policy that hears the batch on a registry with no approval service, or with
    calls that have no agent to route a request through; a :class:`UserApproval` none of whose
    answerers hears ``agent`` (with ``answerers``), when the batch has an ``ask_before`` policy
    or the service's answerers all listen to other agents. Not a checkpoint.
    """
    listeners = host.hooks.pre_execute
    if not listeners.active:
        return
    heard = listeners.for_agent(agent)
    if not heard:
        return
    policies = [listener for listener in heard if isinstance(listener, _AskBefore)]
    service = host.approval
    if service is None:
        if policies:
            warnings.warn(
                f"{policies[0]!r} asks for approval, but the registry has no approval service: "
                "every such call is denied; pass ToolRegistry(approval=UserApproval(session))",
                ApprovalSetupWarning,
                stacklevel=stacklevel,
            )
        return
    if agent is None:
        if policies:
            warnings.warn(
                f"{policies[0]!r} asks for approval, but the batch's calls have no agent to "
                "route a request through: every such call is denied; pass "
                "run_tool_calls(..., agent=...)",
                ApprovalSetupWarning,
                stacklevel=stacklevel,
            )
        return
    if not (answerers and isinstance(service, UserApproval)) or service.hears(agent):
        return
    if not policies and not service.statistics().answerers:
        return  # nothing says this batch asks, and no answerer was meant for anyone
    if service.policy == "never":
        return
    warnings.warn(
        f"no approval answerer hears agent {agent!r} (none global, none in its scope): "
        "every Ask is answered unavailable; add one with approval.answerers.add(...) or "
        "approval.scope(agent).answerers.add(...) for this very agent object",
        ApprovalSetupWarning,
        stacklevel=stacklevel,
    )


# --- turns --------------------------------------------------------------------------------


class _SessionTurn:
    __slots__ = ("_session", "_trigger", "_turn")

    def __init__(self, session: SessionLog, turn: int, trigger: object) -> None:
        self._session = session
        self._turn = turn
        self._trigger = trigger

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint()
        self._session.append(TurnStartEvent(turn=self._turn, trigger=self._trigger))

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        kind = "completed" if exc_type is None else "aborted"
        self._session.append(TurnEndEvent(turn=self._turn, kind=kind))
        await trio.lowlevel.cancel_shielded_checkpoint()


def session_turn(
    session: SessionLog, turn: int, *, trigger: object = None
) -> AbstractAsyncContextManager[None]:
    """Bound one agent turn in ``session`` with ``turn/start`` and ``turn/end`` events.

    Use it as ``async with session_turn(session, 1): ...``.

    Appends ``turn/start`` on entry (after a checkpoint: a cancelled caller appends nothing)
    and ``turn/end`` on exit, with ``kind="aborted"`` when the block raised (a cancellation
    included), else ``"completed"``. Exiting is a schedule point that does not raise
    ``trio.Cancelled``. :class:`UserApproval` answers only inside an open turn.

    Args:
        session: the agent's session log.
        turn: the turn's number (a non-negative ``int``).
        trigger: what started the turn, as JSON (optional; logged on ``turn/start``).
    """
    TurnStartEvent(turn=turn, trigger=trigger)  # validate before the block runs
    return _SessionTurn(session, turn, trigger)


# --- a console answerer -------------------------------------------------------------------

_DEFAULT_PROMPT: Final = 'Allow tool "{tool_name}"{reason}? [y/N/a] '


def describe_call(request: ApprovalRequest) -> str:
    """The text a terminal shows of what ``request`` approves: its call card (a diff for an
    edit, the command for a shell tool, the arguments as JSON otherwise), every line made
    printable. Empty when the request carries no card and no arguments.
    """
    view = request.view
    if view is None:
        if request.arguments is None:
            return ""
        return _json_text(request.arguments)
    if isinstance(view, TerminalCallView):
        lines = [f"$ {printable(view.title, multiline=False)}"]
        if view.cwd is not None:
            lines.append(f"  in {printable(view.cwd, multiline=False)}")
        if view.description is not None:
            lines.append(f"  ({printable(view.description, multiline=False)})")
        return "\n".join(lines)
    if isinstance(view, DiffCallView):
        lines = [printable(view.title, multiline=False)]
        for diff in view.diffs:
            lines.extend(unified_diff_lines(diff))
        return "\n".join(lines)
    lines = [printable(view.title, multiline=False)]
    if view.raw_input is not None:
        lines.append(_json_text(view.raw_input))
    for block in view.content or ():
        if isinstance(block, TextBlock):
            lines.append(printable(block.text))
    return "\n".join(lines)


def _json_text(value: object) -> str:
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return printable(text)


def console_answerer(
    *,
    prompt: str = _DEFAULT_PROMPT,
    read_line: Callable[[str], str] = builtins.input,
    show: Callable[[str], object] = print,
) -> ApprovalAnswerer:
    r"""An answerer that asks on the terminal: it shows the call (its card: a diff for an
    edit, the command for a shell tool, the arguments otherwise), then reads ``y`` / ``yes``
    (allow this call once), ``a`` / ``always`` (allow it, and this tool for the rest of the
    session: ``allowed-session``), ``n`` / ``no`` / an empty line (reject); anything else asks
    again.

    The line is read in a worker thread (``trio.to_thread.run_sync``), so the event loop keeps
    running while the user thinks. When the request is cancelled the answerer returns at once
    (the thread is abandoned: it ends when its read does, and that answer is dropped). At the
    end of input (``EOFError``: no terminal) it delegates with ``next()``. One question is
    asked at a time.

    Args:
        prompt: a :meth:`str.format` template with ``{tool_name}``, ``{call_id}`` and
            ``{reason}`` (the request's reason as ``" (<reason>)"``, or empty). Each value is
            put in with its control characters (newlines too) written as visible escapes
            (``\x1b``), so a terminal never acts on them.
        read_line: ``(prompt) -> line``, called in the worker thread; :func:`input` by default.
        show: ``(text) -> None``, shows the call before the question (:func:`print` by
            default; called on the trio thread).
    """
    lock = trio.Lock()

    async def answer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        # the request's texts come from the model, a tool or a server: shown, never interpreted
        text = prompt.format(
            tool_name=printable(request.tool_name, multiline=False),
            call_id="" if request.call_id is None else printable(request.call_id, multiline=False),
            reason=""
            if request.reason is None
            else f" ({printable(request.reason, multiline=False)})",
        )
        async with lock:
            card = describe_call(request)
            if card:
                show(card)
            while True:
                try:
                    line = await trio.to_thread.run_sync(read_line, text, abandon_on_cancel=True)
                except EOFError:
                    break
                reply = line.strip().lower()
                if reply in ("y", "yes"):
                    return ApprovalOutcome.ALLOWED_ONCE
                if reply in ("a", "always"):
                    return ApprovalOutcome.ALLOWED_SESSION
                if reply in ("", "n", "no"):
                    return ApprovalOutcome.REJECTED
        return await next()

    return answer
