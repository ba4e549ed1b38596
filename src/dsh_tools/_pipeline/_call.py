"""The stages of one tool call, split so the scheduler can interleave them.

::

    prepare()   0  snapshot the arguments        invalid            -> final-result
                1  signal already cancelled      ABORTED_BEFORE_DISPATCH -> final-result
                   validation first (a define_tool tool, when a hook or guard hears the call)
                                                 INVALID_ARGS       -> post-result
                2  pre_execute waterfall         a listener raised  -> final-result
                3  Ask -> approval service       raised / impossible outcome -> final-result
                                                 deferred: suspended (APPROVAL_PENDING
                                                 placeholder, neither logged nor observed)
                4  approval cancelled + signal   ABORTED_BEFORE_DISPATCH -> post-result
                5  Deny, or guards after Allow   Error: <reason>    -> post-result
                                                 a guard raised     -> final-result
                6  signal cancelled              ABORTED_BEFORE_DISPATCH -> post-result
    dispatch()  7  execute wrappers, body        a wrapper raised   -> final-result
                                                 anything else      -> post-result
    complete()  8  post_execute (post-results)   a listener raised  -> final-result
                9  final snapshot (all results)  invalid: Error: tool result must be ...
               10  result observers, then return the very same frozen result

A post-result goes through ``post_execute``; a final-result skips it. :class:`PreparedCall`
holds one call between the stages. Nothing here raises for a tool or policy failure;
``trio.Cancelled`` of the caller's own scope (and ``KeyboardInterrupt`` etc.) always propagates.

The stages are deliberately not checkpoints each (``# noqa: ASYNC910``): ``ToolRegistry.execute``
and the scheduler are, and a schedule point per stage would multiply the per-call cost.
``prepare`` is a cancel point at entry; ``ToolRegistry.execute`` ends with a schedule point and the
scheduler yields once per group of commits, so every path through either checkpoints.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import threading
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

import attrs
import trio

from dsh_tools._errors import (
    ApprovalSetupWarning,
    HarnessError,
    JsonSnapshotError,
    ToolArgsError,
    ToolNotFoundError,
)
from dsh_tools._texts import (
    approval_cancelled,
    approval_needs_agent,
    approval_not_supported,
    approval_rejected,
    approval_unavailable,
    deny_reason_not_str,
    error_message,
    post_execute_returned,
    post_execute_unreadable,
    pre_execute_returned,
    sync_body_returned_awaitable,
)
from dsh_tools._values._content import HookContext
from dsh_tools._values._definition import argument_validator
from dsh_tools._values._execution import (
    Accept,
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    Block,
    ContextFields,
    Deny,
    PostToolDecision,
    PreToolDecision,
    RunBatch,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolExecutionToken,
    ToolRunContext,
    new_execution_token,
    read_approval_outcome,
    run_context,
    text_success,
)
from dsh_tools._values._json import CHECKED_BY, FrozenJsonObject, JsonValue, snapshot_json
from dsh_tools._values._presentation import call_view_of
from dsh_tools._values._signal import (
    CancelController,
    CancelSignal,
    DeadlineReached,
    fuse,
    linked_cancel_scope,
)

from ._hooks import waterfall
from ._progress import ProgressState, TimeoutSettings
from ._results import (
    ABANDONED,
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    INVALID_ARGUMENTS,
    INVALID_RESULT,
    Invalid,
    approval_pending_result,
    describe,
    error_result,
    freeze_result,
    idle_timeout_result,
    is_return_value,
    kind,
    normalize,
    reason_text,
    text_error,
    timeout_result,
    valid_str,
)

if TYPE_CHECKING:
    from dsh_tools._values._definition import BodyPlan, ToolDefinition
    from dsh_tools._values._execution import ApprovalService

    from ._hooks import ExecuteHook, HookLists, ResultObserver

__all__ = [
    "ALLOWED",
    "PENDING",
    "REPLAYED",
    "SUSPENDED",
    "CallEnv",
    "CallRequest",
    "HasExecution",
    "PipelineHost",
    "PreparedCall",
    "open_call",
    "prepare",
    "resume_suspended",
]

logger: Final = logging.getLogger("dsh_tools")

_ALLOW: Final = Allow()
_ACCEPT: Final = Accept()
_MISSING: Final[Any] = object()
_NEVER: Final = CancelSignal.never()

# PreparedCall.stage: how far the call got (the scheduler reads it; only PreparedCall writes it)
OPENED: Final = 0
PENDING: Final = 1
ALLOWED: Final = 2
DISPATCHED: Final = 3
FINAL: Final = 4  # settled on a final-result (it skips post_execute), from any stage
SUSPENDED: Final = 5  # its approval was deferred: a placeholder, neither logged nor observed
REPLAYED: Final = 6  # a result read back from the session log (a resumed batch): final as it is
# PreparedCall._body: what happened to the body
_NOT_RUN: Final = 0
_RAN: Final = 1
_ABANDONED: Final = 2


def _log_raised(call: CallRequest, what: str, exc: BaseException) -> None:
    """Log, once, an exception a body, hook, guard, wrapper or observer raised: WARNING with
    its traceback, or DEBUG for a :class:`HarnessError` (an expected, model-facing failure).
    """
    level = logging.DEBUG if isinstance(exc, HarnessError) else logging.WARNING
    if logger.isEnabledFor(level):
        logger.log(
            level,
            'tool "%s" (%s): %s raised %s',
            call.name,
            call.call_id,
            what,
            type(exc).__name__,
            exc_info=exc,
        )


def _log_invalid(call: CallRequest, detail: str) -> None:
    logger.warning(
        'tool "%s" (%s): tool result must be losslessly JSON-serializable: %s',
        call.name,
        call.call_id,
        detail,
    )


class _Unreachable(Exception):
    pass


class HasExecution(Protocol):
    """A call whose guard view can be built on demand (a :class:`PreparedCall`)."""

    def validated_execution(self) -> ToolExecution: ...


@attrs.frozen(eq=False)
class PipelineHost:
    """What the stages of one call need from the registry that runs them.

    The registry builds one at construction and passes it down, so the pipeline never reaches
    into the registry (and never imports it).

    Attributes:
        hooks: the registry's hook lists (read per dispatch, so listeners added later count).
        lookup: ``lookup(name, agent)``: the definition visible to ``agent``, or ``None``.
        evaluate_guards: ``evaluate_guards(agent, call)``: the first denial reason of the
            guards that apply to a call of ``agent``, or ``None``; ``call.validated_execution()``
            builds the view the guards receive (called only when a guard applies).
        approval: the approval service ``Ask`` decisions go to, or ``None``.
        thread_limiter: bounds how many sync bodies run in worker threads at once.
        timeouts: the registry's timeout policy and progress settings (read per call).
    """

    hooks: HookLists
    lookup: Callable[[str, object], ToolDefinition | None]
    evaluate_guards: Callable[[object, HasExecution], str | None]
    approval: ApprovalService | None
    thread_limiter: trio.CapacityLimiter
    timeouts: TimeoutSettings = attrs.field(factory=lambda: TimeoutSettings(None, 0.1))


# --- the waterfalls ------------------------------------------------------------------------


async def _default_allow() -> PreToolDecision:
    return _ALLOW  # noqa: ASYNC910


async def _default_accept() -> PostToolDecision:
    return _ACCEPT  # noqa: ASYNC910


# --- one call --------------------------------------------------------------------------------


class CallRequest(Protocol):
    """A call's identity as the model named it (a :class:`ToolCallRequest` or a
    :class:`ToolExecutionInput`).
    """

    @property
    def call_id(self) -> str: ...

    @property
    def name(self) -> str: ...


@attrs.frozen(eq=False)
class CallEnv:
    """What the calls of one batch share: the pipeline host, the caller's signal, the agent the
    calls belong to, the token of an enclosing execution, and the batch (its id, and the
    attempts of a resumed batch's calls; ``None`` outside a batch).
    """

    host: PipelineHost
    signal: CancelSignal
    agent: object | None = None
    parent: ToolExecutionToken | None = None
    batch: RunBatch | None = None


class PreparedCall:
    """One call after stages 0-6 of the pipeline: arguments snapshotted, policy decided.

    A pool holds one per call in flight, so it stays small: the call's views (its
    :class:`ToolExecution` and token) are built on first use, and a call that no hook, guard or
    observer looks at never builds a ``ToolExecution`` (its body's context mints the token).

    Attributes:
        arguments: the frozen snapshot of the arguments (``None`` when it failed).
        stage: how far the call got: ``OPENED``, ``PENDING`` (await :meth:`apply_policies`),
            ``ALLOWED`` (await :meth:`dispatch`), ``DISPATCHED``, or settled as it is:
            ``FINAL`` (a final-result), ``SUSPENDED`` (a deferred approval's placeholder) or
            ``REPLAYED`` (a result read back from the session log). Read it; only the call's
            own methods change it.
    """

    __slots__ = (
        "_body",
        "_deferred",
        "_env",
        "_progress",
        "_request",
        "_result",
        "_returned",
        "_trusted",
        "_view",
        "arguments",
        "stage",
    )

    def __init__(self, env: CallEnv, request: CallRequest, arguments: JsonValue) -> None:
        self._env = env
        self._request = request
        self.arguments = arguments
        # None, then the token, then the ToolExecution that holds it
        self._view: ToolExecutionToken | ToolExecution | None = None
        # how far the call got: OPENED, PENDING (stages 2-6 are left to apply_policies()),
        # ALLOWED (it needs dispatch, stage 7), DISPATCHED; or FINAL (settled on a
        # final-result)
        self.stage = OPENED
        # what happened to the body: _NOT_RUN, _RAN (a sync body: its thread started it),
        # _ABANDONED (a sync body's worker thread was left running)
        self._body = _NOT_RUN
        # the outcome (a post-result, through post_execute) or, at FINAL, the final result
        self._result: ToolExecutionResult | None = None
        # allocated when the body is invoked (most calls never defer a context)
        self._deferred: list[HookContext] | None = None
        # the success built from a valid str: final as it is (stage 9 has nothing to check)
        self._trusted: ToolExecutionResult | None = None
        # what a body returned that is not content (named in the stage-9 log), or _MISSING
        self._returned: object = _MISSING
        # the body's progress and idle deadline (made on the first report, or by an idle
        # timeout), which also counts the runs of a retried body
        self._progress: ProgressState | None = None

    def final_result(self, result: ToolExecutionResult) -> PreparedCall:
        """Settle on a final-result (it skips ``post_execute``)."""
        self._result = result
        self.stage = FINAL
        return self

    def post_result(self, result: ToolExecutionResult) -> PreparedCall:
        """Settle on a post-result (it goes through ``post_execute``)."""
        self._result = result
        return self

    def suspend(self) -> PreparedCall:
        """Settle on the ``APPROVAL_PENDING`` placeholder: the call's approval was deferred."""
        self._result = approval_pending_result(self._request.name)
        self.stage = SUSPENDED
        return self

    def replay(self, result: ToolExecutionResult) -> PreparedCall:
        """Settle on a result the session log holds already (a resumed batch's): no stage
        runs, no observer hears it again.
        """
        self._result = result
        self.stage = REPLAYED
        return self

    def allow(self) -> PreparedCall:
        """Settle on dispatch: the call was allowed."""
        self.stage = ALLOWED
        return self

    def pending(self) -> PreparedCall:
        """Leave stages 2-6 to :meth:`apply_policies` (``pre_execute`` listeners hear the call)."""
        self.stage = PENDING
        return self

    async def apply_policies(self) -> None:
        """Stages 2-6 for a call at stage ``PENDING``: the ``pre_execute`` waterfall, the
        approval service, guards. Never raises for a tool or policy failure; raises
        ``trio.Cancelled`` when the caller's trio scope is cancelled while a listener or the
        approval service awaits.
        """
        if self.stage != PENDING:
            raise RuntimeError("apply_policies() runs once, for a call whose policies are pending")
        self.stage = OPENED
        await _apply_policies(self)

    @property
    def env(self) -> CallEnv:
        """What the call shares with the other calls of its batch."""
        return self._env

    @property
    def call_id(self) -> str:
        """The model's id of the call."""
        return self._request.call_id

    @property
    def name(self) -> str:
        """The tool name the model called."""
        return self._request.name

    @property
    def needs_dispatch(self) -> bool:
        """``True`` when the call was allowed: await :meth:`dispatch` before :meth:`complete`."""
        return self.stage in (ALLOWED, DISPATCHED)

    @property
    def body_invoked(self) -> bool:
        """Whether the tool body started (a sync body: whether its thread started it)."""
        return self._body != _NOT_RUN

    @property
    def token(self) -> ToolExecutionToken:
        """The call's token, shared by every view of it (minted on first use)."""
        view = self._view
        if view is None:
            token = self._view = new_execution_token()
            return token
        if isinstance(view, ToolExecutionToken):
            return view
        return view.token

    def execution(self) -> ToolExecution:
        """The read-only view that hooks, guards and observers receive (built once)."""
        view = self._view
        if isinstance(view, ToolExecution):
            return view
        env = self._env
        request = self._request
        execution = ToolExecution(
            token=self.token,
            call_id=request.call_id,
            name=request.name,
            arguments=self.arguments,
            signal=env.signal,
            agent=env.agent,
            parent=env.parent,
        )
        self._view = execution
        return execution

    def validated_execution(self) -> ToolExecution:
        """:meth:`execution`, for guards: built only once a guard applies, after the arguments
        are validated (validation first: an invalid call stops the guards).
        """
        violations = _violations(self)
        if violations:
            raise _InvalidArguments(violations)
        return self.execution()

    # --- stage 7 -------------------------------------------------------------------------

    async def dispatch(self, report: Callable[[int], None] | None = None, index: int = 0) -> None:
        """Stage 7: the ``execute`` wrapper waterfall around the body.

        The body runs in a trio cancel scope linked to the fusion of the caller's signal and a
        wrapper's replacement, and is always awaited until it returns (a sync body: until its
        worker thread returns, unless its definition says ``abandon_on_cancel``). Never raises
        for a tool, wrapper or policy failure (each becomes the call's outcome). Cancelling
        the caller's own trio scope raises ``trio.Cancelled`` once the body has unwound. Call
        at most once, and only when :attr:`needs_dispatch` is true.

        ``report`` (the scheduler's pools, which run this as a body task): the caller runs this
        inside a cancel scope linked to the call's signal already, so a body that no wrapper
        hears gets no scope of its own; when that scope cancels the body (or the body raises
        what no result holds, such as ``SystemExit``), the outcome is recorded
        (:meth:`interrupted_result`) and the exception propagates. ``report(index)`` is called
        once the outcome is recorded, on every path.
        """
        if self.stage != ALLOWED:
            raise RuntimeError("dispatch() runs once, and only for a call that needs dispatch")
        self.stage = DISPATCHED
        env = self._env
        hooks = env.host.hooks.execute
        linked = report is not None
        try:
            if hooks.active and (wrappers := hooks.for_agent(env.agent)):
                try:
                    result = await self._run_wrappers(wrappers)
                except Exception as exc:
                    # a wrapper failed: final-result, deferred contexts lost, post_execute
                    # skipped
                    _log_raised(self, "an execute wrapper", exc)
                    self.final_result(error_result(exc))
                    return  # noqa: ASYNC910 (the caller's stages checkpoint)
                self._settle(result)
                return
            result = await self._invoke(env.signal, linked)
            # _invoke read the signal after the body returned: nothing to replace
            if type(result) is ToolExecutionResult and not self._deferred:
                # what _settle records when the body deferred no context
                self._deferred = None
                self._result = result
            else:
                self._settle(result, replace=False)
        except BaseException:
            if linked and self._result is None:
                self._settle(self.interrupted_result())
            raise
        finally:
            if report is not None:
                report(index)

    def interrupted_result(self) -> ToolExecutionResult:
        """The outcome of a call whose body a cancellation stopped: ``ABANDONED`` when a sync
        body's thread was left running, ``ABORTED`` when the body started, else
        ``ABORTED_BEFORE_DISPATCH``.
        """
        body = self._body
        if body == _ABANDONED:
            return ABANDONED
        return ABORTED if body == _RAN else ABORTED_BEFORE_DISPATCH

    def _settle(self, result: ToolExecutionResult, *, replace: bool = True) -> None:
        """Record what stage 7 produced: the outcome, with the contexts the body deferred
        (``replace``: a success becomes ``ABORTED`` if the signal has fired meanwhile).
        """
        if type(result) is not ToolExecutionResult:
            _log_invalid(
                self, f"an execute wrapper returned {kind(result)}, not a ToolExecutionResult"
            )
            self.final_result(INVALID_RESULT)
            return
        deferred = self._deferred
        if deferred:
            try:
                result = attrs.evolve(
                    result, additional_contexts=(*deferred, *result.additional_contexts)
                )
            except Exception as exc:  # a hand-built result whose contexts are not a sequence
                _log_invalid(self, f"its additional_contexts cannot be read: {exc!r}")
                self.final_result(INVALID_RESULT)
                return
        # read only here: a pool need not keep the list until the call commits
        self._deferred = None
        self._result = self._replace_if_cancelled(result) if replace else result

    async def _run_wrappers(self, wrappers: tuple[ExecuteHook, ...]) -> ToolExecutionResult:
        env = self._env
        caller = env.signal
        dispatch_execution = ToolDispatchExecution(
            token=self.token,
            call_id=self.call_id,
            name=self.name,
            arguments=self.arguments,
            signal=caller,
            agent=env.agent,
            parent=env.parent,
        )

        async def body() -> ToolExecutionResult:
            upstream = dispatch_execution.signal
            if upstream is caller:
                return await self._invoke(caller)
            # wrapper first: its reason wins when both are already cancelled
            fused, detach = fuse((upstream, caller))
            dispatch_execution.signal = fused
            try:
                return await self._invoke(fused)
            finally:
                dispatch_execution.signal = upstream
                detach()

        return await waterfall(wrappers, (dispatch_execution,), body)()

    @property
    def runs(self) -> int:
        """How many times the body has been started within this call (``1`` until a retry
        policy runs it again).
        """
        state = self._progress
        return 1 if state is None else state.runs

    @property
    def batch(self) -> RunBatch | None:
        """The batch the call belongs to (``None``: run by ``registry.execute``)."""
        return self._env.batch

    def progress_state(self) -> ProgressState:
        """The call's progress state (made on first use)."""
        state = self._progress
        if state is None:
            env = self._env
            batch = env.batch
            state = self._progress = ProgressState(
                self._request.call_id, batch, env.host.timeouts.progress_interval
            )
        return state

    def context_fields(self) -> ContextFields:
        """What the body's context reads from the call (its token and the list the body's
        deferred contexts join are made now if need be; a context kept past its call gets a
        list nobody reads, as the call's own was read when the body returned).
        """
        deferred = self._deferred
        if deferred is None:
            deferred = self._deferred = []
        request = self._request
        env = self._env
        return (
            self.token,
            request.call_id,
            request.name,
            self.arguments,
            env.agent,
            env.parent,
            deferred,
        )

    def report_progress(
        self,
        message: str | None,
        progress: float | None,
        total: float | None,
        output: str | None,
        /,
    ) -> ProgressState:
        """Take a progress report of the running body (checked by the context); returns the
        call's progress state, which takes the body's next reports directly.
        """
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            # a sync body's worker thread: the state is made and fed on the trio thread
            return trio.from_thread.run_sync(self.report_progress, message, progress, total, output)
        state = self._progress
        if state is None:
            if self._result is not None or self.stage == FINAL:
                raise RuntimeError(
                    "report_progress() after the call ended: a tool body reports progress "
                    "only while it runs"
                )
            state = self.progress_state()
        return state.report_progress(message, progress, total, output)

    async def _invoke(
        self, signal: CancelSignal, linked: bool = False, timed: bool = False
    ) -> ToolExecutionResult:
        """The innermost ``next()``: look the tool up, run the body under ``signal`` with its
        context (which reads the call's token, identity, arguments and the list its deferred
        contexts join from the call when the body first asks), and turn what it returned into
        the call's outcome.

        ``linked``: the caller's cancel scope is linked to ``signal`` already (see
        :meth:`dispatch`); an async body runs without a scope of its own, and nothing here
        checkpoints after it. ``timed``: :meth:`_run_timed` applied the tool's timeouts to
        ``signal`` already.
        """
        if signal is not _NEVER and signal.cancelled:
            return ABORTED_BEFORE_DISPATCH  # noqa: ASYNC910 (the caller's stages checkpoint)
        env = self._env
        request = self._request
        tool = env.host.lookup(request.name, env.agent)
        if tool is None:
            return error_result(ToolNotFoundError(request.name))  # noqa: ASYNC910
        timeouts = env.host.timeouts
        # two reads when no tool of the registry has a timeout and there is no default (the
        # body runs in this frame: no extra coroutine on the common path)
        if timeouts.watched and timeouts.enforced and not timed:
            timeout = tool.timeout
            if timeout is None:
                timeout = timeouts.default_timeout
            idle = tool.idle_timeout
            if timeout is not None or idle is not None:
                return await self._run_timed(signal, timeout, idle)
        if self._body != _NOT_RUN:
            # the body runs again within this call (a retry policy called next() again)
            state = self.progress_state()
            state.ended = False
            state.runs += 1
        arguments = self.arguments
        # the context reads the call's token, identity, arguments and deferred list from the
        # call when the body first asks (context_fields): a body that reads none of them costs
        # no token and no list
        context = run_context(signal, self)
        plan: BodyPlan = tool._plan  # pyright: ignore[reportPrivateUsage]
        if not plan.awaited:
            return await self._invoke_sync(tool, tool.execute, context, signal, linked)
        # the labelled shortcut (checked against the general path in tests/test_hot_path.py):
        # arguments define_tool's validator accepted go straight to the author's body, as
        # ``execute`` itself would send them after finding the mark
        run: Callable[[object, ToolRunContext], Awaitable[object]]
        body = plan.body
        if (
            body is not None
            and type(arguments) is FrozenJsonObject
            and getattr(arguments, CHECKED_BY, None) is plan.validate
        ):
            run = body
            convert = plan.convert
        else:
            # no runtime cast on the hot path: the plan says the body returns an awaitable
            run = tool.execute  # pyright: ignore[reportAssignmentType]
            convert = None
        self._body = _RAN
        returned: object = _MISSING
        failure: Exception | None = None
        try:
            # converted here, as the validating execute converts inside the body's call: a
            # conversion that raises (an attrs validator, say) is the call's failure
            value = arguments if convert is None else convert(arguments)
            if linked or signal is _NEVER:
                returned = await run(value, context)
            else:
                with linked_cancel_scope(signal):
                    returned = await run(value, context)
        except Exception as exc:
            # outside the per-call cancel scope: the failure belongs to the model
            failure = exc
        finally:
            progress = self._progress
            if progress is not None:
                progress.end()
        # The body has unwound. If the caller's own trio scope was cancelled meanwhile (a
        # shielded body finished anyway), that cancellation wins now, as trio requires. (A
        # linked caller is inside a scope that may be cancelled by the signal itself: the
        # outcome is recorded first, and the caller's next checkpoint raises.)
        if not linked:
            await trio.lowlevel.checkpoint_if_cancelled()
        if failure is not None:
            _log_raised(self, "the tool body", failure)
            return error_result(failure)  # noqa: ASYNC910
        if returned is _MISSING or (signal is not _NEVER and signal.cancelled):
            return ABORTED  # noqa: ASYNC910
        if type(returned) is str and returned.isascii():
            # the common case of _normalize, inline: valid JSON text by construction
            result = self._trusted = text_success(returned)
            return result  # noqa: ASYNC910
        return self._normalize(returned)  # noqa: ASYNC910

    async def _run_timed(
        self,
        signal: CancelSignal,
        timeout: float | None,  # noqa: ASYNC109 (the tool's own budget, applied as a deadline)
        idle: float | None,
    ) -> ToolExecutionResult:
        """The registry's timeout policy: run the body under the caller's signal fused with
        its own deadline (``timeout``) and idle deadline (``idle``, moved by each progress
        report). Its own deadline firing first makes the outcome ``TOOL_TIMEOUT``, whatever
        the body returned; a caller that cancelled first keeps ``ABORTED``.
        """
        now = trio.current_time()
        deadline = math.inf if timeout is None else now + timeout
        controller: CancelController | None = None
        state: ProgressState | None = None
        sources: tuple[CancelSignal, ...] = (signal,)
        if idle is not None:
            controller = CancelController(deadline=now + idle)
            state = self.progress_state()
            state.idle = controller
            state.idle_timeout = idle
            sources = (signal, controller.signal)
        # the deadline is data on the fused signal: the body's cancel scope carries it
        fused, detach = fuse(sources, deadline)
        try:
            result = await self._invoke(fused, False, True)
        finally:
            detach()
            if state is not None:
                state.idle = None
        reason = fused.reason
        if isinstance(reason, DeadlineReached):
            if timeout is not None and reason.deadline == deadline:
                return timeout_result(timeout)
            if controller is not None and idle is not None and controller.signal.cancelled:
                return idle_timeout_result(idle)
        return result

    async def _invoke_sync(
        self,
        tool: ToolDefinition,
        body: Callable[..., object],
        context: ToolRunContext,
        signal: CancelSignal,
        linked: bool,
    ) -> ToolExecutionResult:
        """Run a sync body in a worker thread through the registry's thread limiter.

        ``started`` is set in the thread, under a lock, right before the body runs; once the
        call gives up on the thread (abandoned), a thread that had not started yet does not run
        the body at all. So "cancelled while waiting for a slot" is exactly "never started".
        """
        arguments = self.arguments
        lock = threading.Lock()
        state = {"started": False, "given_up": False}

        def run() -> tuple[object]:
            # boxed: trio refuses a thread function that returns a coroutine; we report it
            with lock:
                if state["given_up"]:
                    return (_MISSING,)
                state["started"] = True
            return (body(arguments, context),)

        returned: object = _MISSING
        failure: Exception | None = None
        scope = contextlib.nullcontext() if signal is _NEVER else linked_cancel_scope(signal)
        try:
            with scope:
                (returned,) = await trio.to_thread.run_sync(
                    run,
                    abandon_on_cancel=tool.abandon_on_cancel,
                    limiter=self._env.host.thread_limiter,
                )
        except Exception as exc:
            failure = exc
        finally:
            progress = self._progress
            if progress is not None:
                progress.end()
            with lock:
                state["given_up"] = True
                started = state["started"]
            if not started:
                self._body = _NOT_RUN
            elif returned is _MISSING and failure is None and tool.abandon_on_cancel:
                # a cancellation left the started body's thread running (in a pool, this is
                # what the outcome recorded while the cancellation propagates says)
                self._body = _ABANDONED
            else:
                self._body = _RAN
        if not linked:
            await trio.lowlevel.checkpoint_if_cancelled()
        if failure is not None:
            _log_raised(self, "the tool body", failure)
            return error_result(failure)  # noqa: ASYNC910
        if returned is _MISSING:
            return self.interrupted_result()  # noqa: ASYNC910
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()
            text = sync_body_returned_awaitable(self.name, type(returned).__name__)
            logger.warning('tool "%s" (%s): %s', self.name, self.call_id, text)
            return text_error(text)  # noqa: ASYNC910
        if signal.cancelled:
            return ABORTED  # noqa: ASYNC910
        return self._normalize(returned)  # noqa: ASYNC910

    def _normalize(self, returned: object) -> ToolExecutionResult:
        """Stage 7.6, remembering what stage 9 needs: a success built from a valid ``str`` is
        final as it is; a value that is not content is named in the stage-9 log.
        """
        if type(returned) is str and returned.isascii():
            # the common case, without normalize's dispatch: valid JSON text by construction
            result = self._trusted = text_success(returned)
            return result
        result = normalize(returned)
        if type(returned) is str and valid_str(returned):
            self._trusted = result
        elif not is_return_value(returned):
            self._returned = returned
        return result

    # --- stages 8-10 ---------------------------------------------------------------------

    def _replace_if_cancelled(self, result: ToolExecutionResult) -> ToolExecutionResult:
        signal = self._env.signal
        if result.is_error or signal is _NEVER or not signal.cancelled:
            return result
        replacement = ABORTED if self._body != _NOT_RUN else ABORTED_BEFORE_DISPATCH
        contexts = result.additional_contexts
        if contexts:
            return attrs.evolve(replacement, additional_contexts=contexts)
        return replacement

    def _outcome(self) -> ToolExecutionResult:
        """The post-result (a call that needed dispatch but never had it: aborted)."""
        outcome = self._result
        if outcome is None:
            return ABORTED_BEFORE_DISPATCH
        return outcome

    def complete_now(self) -> ToolExecutionResult | None:
        """What :meth:`complete` returns, when it needs no await: ``None`` when a
        ``post_execute`` listener hears the call (then await :meth:`complete`).
        """
        result = self._result
        stage = self.stage
        if stage >= FINAL:
            assert result is not None
            # a suspended call's placeholder is no result, a replayed one was observed already
            return self._materialize(result) if stage == FINAL else result
        env = self._env
        listeners = env.host.hooks.post_execute
        if listeners.active and listeners.for_agent(env.agent):
            return None
        if result is None:
            result = ABORTED_BEFORE_DISPATCH  # what _outcome gives
        elif result is self._trusted and not env.host.hooks.result.active:
            return result  # what _materialize gives: nothing to check, no observer
        return self._materialize(result)

    async def complete(self) -> ToolExecutionResult:
        """Stages 8-10: the ``post_execute`` waterfall (for outcomes that reach it), the final
        snapshot, the ``result`` observers.

        Honest interrupts: an outcome settled before the signal fired is kept as it is, even
        when the signal has fired by the time the call commits (only a body or wrapper still
        running when it fired makes the outcome ``ABORTED``, in :meth:`dispatch`).

        Returns the frozen final result, the very object the observers saw. Never raises for a
        tool or policy failure. Not a checkpoint by itself (the caller yields once per group of
        commits); cancelling the caller's trio scope while ``post_execute`` awaits raises
        ``trio.Cancelled``. If the call needed dispatch but :meth:`dispatch`
        never ran, the outcome is ``ABORTED_BEFORE_DISPATCH``.
        """
        result = self.complete_now()
        if result is not None:
            return result  # noqa: ASYNC910
        return self._materialize(await self._post_execute(self._outcome()))

    def _materialize(self, final: ToolExecutionResult) -> ToolExecutionResult:
        """Stages 9-10: the final snapshot (not for the very success built from a valid str),
        then the ``result`` observers.
        """
        if final is not self._trusted:
            try:
                final = freeze_result(final)
            except Invalid as invalid:
                detail = str(invalid)
                bad = self._returned
                if bad is not _MISSING and detail.startswith("content[0] "):
                    detail = (
                        f"a body returned {kind(bad)}, where str, content blocks, ToolOutput or "
                        "lossless JSON data belong"
                    )
                _log_invalid(self, detail)
                final = INVALID_RESULT
        env = self._env
        observers = env.host.hooks.result
        if observers.active:
            heard = observers.for_agent(env.agent)
            if heard:
                self._notify(final, heard)
        return final

    async def _post_execute(self, outcome: ToolExecutionResult) -> ToolExecutionResult:
        env = self._env
        execution = self.execution()
        listeners = env.host.hooks.post_execute.for_agent(env.agent)
        try:
            decision = cast(
                object, await waterfall(listeners, (execution, outcome), _default_accept)()
            )
        except Exception as exc:
            _log_raised(self, "a post_execute listener", exc)
            return error_result(exc)  # noqa: ASYNC910
        # Block is read first: a value that is somehow both is the restrictive one.
        try:
            if isinstance(decision, Block):
                result = ToolExecutionResult(
                    content=decision.feedback,
                    is_error=True,
                    additional_contexts=decision.additional_contexts,
                )
            elif isinstance(decision, Accept):
                content = decision.content
                extra = tuple(decision.additional_contexts)
                result = outcome
                if content is not None or extra:
                    result = attrs.evolve(
                        outcome,
                        content=outcome.content if content is None else content,
                        additional_contexts=(*outcome.additional_contexts, *extra),
                    )
            else:
                return text_error(post_execute_returned(describe(decision)))
        except Exception as exc:  # a hand-built decision whose fields cannot be read
            _log_raised(self, "reading a post_execute decision", exc)
            return text_error(post_execute_unreadable(type(decision).__name__, error_message(exc)))
        return result

    def _notify(self, result: ToolExecutionResult, observers: tuple[ResultObserver, ...]) -> None:
        execution = self.execution()
        for observer in observers:
            try:
                returned = observer(execution, result)
                if inspect.isawaitable(returned):
                    if inspect.iscoroutine(returned):
                        returned.close()
                    raise TypeError("result observers are synchronous: it returned an awaitable")
            except Exception as exc:
                logger.warning(
                    'tool "%s" (%s): tools/result observer failed: %s',
                    self.name,
                    self.call_id,
                    error_message(exc),
                    exc_info=exc,
                )


# --- stages 0-6 ------------------------------------------------------------------------------


async def prepare(host: PipelineHost, input: ToolExecutionInput) -> PreparedCall:
    """Stages 0-6 of one call: a cancel point at entry, :func:`open_call`, then (when
    ``pre_execute`` listeners hear the call) :meth:`PreparedCall.apply_policies`.

    Raises:
        TypeError: ``input`` is not a :class:`ToolExecutionInput`.
        trio.Cancelled: the caller's trio scope is cancelled (at entry, or while a
            ``pre_execute`` listener or the approval service awaits).
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    if type(input) is not ToolExecutionInput and not isinstance(input, ToolExecutionInput):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"execute() takes a ToolExecutionInput, not {type(input).__name__}")
    prepared = open_call(
        CallEnv(host, input.signal, input.agent, input.parent), input, input.arguments
    )
    if prepared.stage == PENDING:
        await prepared.apply_policies()
    return prepared


def open_call(env: CallEnv, request: CallRequest, arguments: object) -> PreparedCall:
    """Stages 0-1 of one call, and stages 5-6 too when no ``pre_execute`` listener hears it
    (then the decision is ``Allow`` and nothing awaits). Otherwise the call is left at stage
    ``PENDING``: await :meth:`PreparedCall.apply_policies` next.

    Never raises for a tool or policy failure.
    """
    # stage 0: wins over a cancelled signal
    try:
        # a frozen object the library built passes at once (snapshot_json's first rule, inline
        # for the scheduler's parsed arguments); one built around its constructor (a plugin's
        # dict.__new__) is checked like a dict
        if type(arguments) is FrozenJsonObject and hasattr(arguments, CHECKED_BY):
            frozen: JsonValue = arguments
        else:
            frozen = snapshot_json(arguments)
    except JsonSnapshotError as exc:
        logger.warning(
            'tool "%s" (%s): arguments rejected at the JSON boundary: %s',
            request.name,
            request.call_id,
            exc,
        )
        return PreparedCall(env, request, None).final_result(INVALID_ARGUMENTS)
    except Exception as exc:
        prepared = PreparedCall(env, request, None)
        _log_raised(prepared, "reading the arguments", exc)
        return prepared.final_result(error_result(exc))
    prepared = PreparedCall(env, request, frozen)
    signal = env.signal
    if signal is not _NEVER and signal.cancelled:  # stage 1
        return prepared.final_result(ABORTED_BEFORE_DISPATCH)
    host = env.host
    listeners = host.hooks.pre_execute
    if listeners.active and listeners.for_agent(env.agent):
        # validation first: nobody decides about a call that cannot run
        violations = _violations(prepared)
        if violations:
            return _invalid(prepared, violations)
        return prepared.pending()
    return _allowed(prepared, env)


def _violations(prepared: PreparedCall) -> list[str] | None:
    """What the call's tool's own validation says about its arguments (``None``: the tool is
    unknown or validates nothing). A frozen value a validator accepted is marked, so the body
    does not validate it again.
    """
    env = prepared.env
    tool = env.host.lookup(prepared.name, env.agent)
    validate = None if tool is None else argument_validator(tool)
    if validate is None:
        return None
    try:
        return validate(prepared.arguments)
    except Exception as exc:  # the body's own validation would raise it too: the body reports
        _log_raised(prepared, "validating the arguments", exc)
        return None


def _invalid(prepared: PreparedCall, violations: list[str]) -> PreparedCall:
    """Settle on ``INVALID_ARGS``, as the body's own validation would have (a post-result)."""
    error = ToolArgsError(violations)
    _log_raised(prepared, "validating the arguments", error)
    return prepared.post_result(error_result(error))


class _InvalidArguments(Exception):
    def __init__(self, violations: list[str]) -> None:
        super().__init__()
        self.violations = violations


async def _apply_policies(prepared: PreparedCall) -> None:  # noqa: ASYNC910
    """Stages 2-6 of a call that ``pre_execute`` listeners hear.

    Fails closed: a decision the pipeline cannot read (not an ``Allow`` / ``Deny`` / ``Ask``,
    a ``Deny`` whose ``reason`` is not a ``str``, an ``Ask`` whose ``reason`` is neither
    ``str`` nor ``None``) becomes an error result, as a raising listener does, and the body
    never runs. A value that is an instance of several decision classes reads as the most
    restrictive one (``Deny``, then ``Ask``, then ``Allow``).
    """
    env = prepared.env
    host = env.host
    # stage 2 (the listeners are read again: one may have been removed since open_call)
    decision: object = _ALLOW
    listeners = host.hooks.pre_execute.for_agent(env.agent)
    if listeners:
        try:
            decision = await waterfall(listeners, (prepared.execution(),), _default_allow)()
        except Exception as exc:  # more specific than a concurrent cancellation
            _log_raised(prepared, "a pre_execute listener", exc)
            prepared.final_result(error_result(exc))
            return  # noqa: ASYNC910

    # stage 3
    approval_cancelled = False
    if not isinstance(decision, Deny) and isinstance(decision, Ask):
        try:
            decision, approval_cancelled = await _resolve_ask(host, prepared.execution(), decision)
        except Exception as exc:
            _log_raised(prepared, "the approval service", exc)
            prepared.final_result(error_result(exc))
            return  # noqa: ASYNC910
        if decision is _DEFERRED:
            prepared.suspend()
            return  # noqa: ASYNC910
    _decided(prepared, decision, approval_cancelled=approval_cancelled)


def resume_suspended(
    env: CallEnv, request: CallRequest, arguments: object, outcome: ApprovalOutcome | None
) -> PreparedCall:
    """A suspended call of a resumed batch, settled on its deferred approval's ``outcome``
    (``None``: still undecided, so suspended again).

    Its ``pre_execute`` listeners decided ``Ask`` before the batch was suspended and do not
    run again: stage 0 (the arguments), validation, then stages 4-6 from the decision
    (``ALLOWED_ONCE`` / ``ALLOWED_SESSION`` run the guards and leave the call to dispatch;
    the other outcomes deny it with the texts of a live decision). Never raises for a tool or
    policy failure.
    """
    try:
        frozen = snapshot_json(arguments)
    except JsonSnapshotError:
        return PreparedCall(env, request, None).final_result(INVALID_ARGUMENTS)
    prepared = PreparedCall(env, request, frozen)
    if outcome is None:
        return prepared.suspend()
    signal = env.signal
    if signal is not _NEVER and signal.cancelled:
        return prepared.final_result(ABORTED_BEFORE_DISPATCH)
    violations = _violations(prepared)
    if violations:
        return _invalid(prepared, violations)
    decision, approval_cancelled = _decision_for(request.name, outcome, outcome)
    if decision is _DEFERRED:
        return prepared.suspend()
    return _decided(prepared, decision, approval_cancelled=approval_cancelled)


def _decided(prepared: PreparedCall, decision: object, *, approval_cancelled: bool) -> PreparedCall:
    """Stages 4-6: settle the call on the decision (guards run after an ``Allow``)."""
    signal = prepared.env.signal
    # stage 4
    if approval_cancelled and signal.cancelled:
        return prepared.post_result(ABORTED_BEFORE_DISPATCH)

    # stage 5: Deny is read first, so a value that is somehow Deny and Allow denies
    if isinstance(decision, Deny):
        reason = _deny_reason(prepared, decision)
        if reason is None:
            return prepared.final_result(
                text_error(deny_reason_not_str(describe(_read_reason(decision))))
            )
    elif isinstance(decision, Allow):
        return _allowed(prepared, prepared.env)
    else:
        return prepared.final_result(text_error(pre_execute_returned(describe(decision))))
    return prepared.post_result(text_error(reason_text(reason)))


def _allowed(prepared: PreparedCall, env: CallEnv) -> PreparedCall:
    """Stages 5-6 after an ``Allow``: the guards, then the signal."""
    try:
        reason = env.host.evaluate_guards(env.agent, prepared)
    except _InvalidArguments as invalid:
        return _invalid(prepared, invalid.violations)
    except Exception as exc:
        _log_raised(prepared, "a guard", exc)
        return prepared.final_result(error_result(exc))
    # any non-None guard return denies (``False`` and ``""`` too): guards fail closed
    if reason is not None:
        return prepared.post_result(text_error(reason_text(reason)))
    # stage 6
    signal = env.signal
    if signal is not _NEVER and signal.cancelled:
        return prepared.post_result(ABORTED_BEFORE_DISPATCH)
    return prepared.allow()


def _read_reason(decision: Deny | Ask) -> object:
    try:
        return cast(object, decision.reason)
    except Exception as exc:
        return exc


def _deny_reason(call: CallRequest, decision: Deny) -> str | None:
    """The reason of a ``Deny``, or ``None`` when it cannot be read as a ``str`` (a decision
    built around the constructor's check, or a subclass whose ``reason`` misbehaves).
    """
    reason = _read_reason(decision)
    if isinstance(reason, str):
        return reason
    logger.warning(
        'tool "%s" (%s): a pre_execute listener returned a Deny whose reason is %s, not a str; '
        "the call is denied",
        call.name,
        call.call_id,
        kind(reason),
    )
    return None


async def _resolve_ask(
    host: PipelineHost, execution: ToolExecution, ask: Ask
) -> tuple[PreToolDecision, bool]:
    name = execution.name
    reason = _read_reason(ask)
    if reason is not None and not isinstance(reason, str):
        raise TypeError(
            f"tools/pre-execute returned an Ask whose reason is {kind(reason)}, not a str or None"
        )
    service = host.approval
    if service is None:
        warnings.warn(
            f'a pre_execute listener asked for approval of tool "{name}", but the registry has '
            "no approval service: the call is denied; pass ToolRegistry(approval=...)",
            ApprovalSetupWarning,
            stacklevel=2,
        )
        if reason is None:
            reason = approval_not_supported(name)
        return Deny(reason), False  # noqa: ASYNC910
    if execution.agent is None:
        return Deny(  # noqa: ASYNC910
            approval_needs_agent(name)
        ), False
    # the service is a plug-in: do not trust its annotation
    arguments = execution.arguments
    tool = host.lookup(name, execution.agent)
    view, error = call_view_of(None if tool is None else tool.present_call, name, arguments)
    if error is not None:
        _log_raised(execution, "present_call (for the approval request)", error)
    answer = cast(
        object,
        await service.request(
            ApprovalRequest(
                agent=execution.agent,
                tool_name=name,
                call_id=execution.call_id,
                signal=execution.signal,
                reason=reason,
                arguments=arguments,
                view=view,
            )
        ),
    )
    return _decision_for(name, read_approval_outcome(answer), answer)


_DEFERRED: Final[Any] = object()


def _decision_for(
    name: str, known: ApprovalOutcome | None, answer: object
) -> tuple[PreToolDecision, bool]:
    """The decision an approval outcome stands for, and whether it is a cancellation
    (``_DEFERRED`` for a deferred one).
    """
    if known is ApprovalOutcome.ALLOWED_ONCE or known is ApprovalOutcome.ALLOWED_SESSION:
        return _ALLOW, False
    if known is ApprovalOutcome.REJECTED:
        return Deny(approval_rejected(name)), False
    if known is ApprovalOutcome.CANCELLED:
        return Deny(approval_cancelled(name)), True
    if known is ApprovalOutcome.UNAVAILABLE:
        return Deny(approval_unavailable(name)), False
    if known is ApprovalOutcome.DEFERRED:
        return _DEFERRED, False
    raise _Unreachable(f"unreachable variant in ApprovalOutcome: {describe(answer)}")
