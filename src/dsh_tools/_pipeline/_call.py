"""One tool call between the stages of the pipeline: :class:`PreparedCall`, its state.

::

    _open       0  snapshot the arguments        invalid            -> final-result
    (prepare,   1  signal already cancelled      ABORTED_BEFORE_DISPATCH -> final-result
    open_call,     validation first (a define_tool tool, when a hook or guard hears the call)
    apply_                                       INVALID_ARGS       -> post-result
    policies)   2  pre_execute waterfall         a listener raised  -> final-result
                3  Ask -> approval service       raised / impossible outcome -> final-result
                                                 deferred: suspended (APPROVAL_PENDING
                                                 placeholder, neither logged nor observed)
                4  approval cancelled + signal   ABORTED_BEFORE_DISPATCH -> post-result
                5  Deny, or guards after Allow   Error: <reason>    -> post-result
                                                 a guard raised     -> final-result
                6  signal cancelled              ABORTED_BEFORE_DISPATCH -> post-result
    _execute    7  execute wrappers, body        a wrapper raised   -> final-result
    (dispatch)     (_timeouts: the call's        anything else      -> post-result
                   timeout and idle deadline)
    _complete   8  post_execute (post-results)   a listener raised  -> final-result
    (complete)  9  final snapshot (all results)  invalid: Error: tool result must be ...
               10  result observers, then return the very same frozen result

A post-result goes through ``post_execute``; a final-result skips it. :class:`PreparedCall`
holds one call between the stages: the stage modules read and settle it, the scheduler reads
its ``stage``. Nothing here raises for a tool or policy failure;
``trio.Cancelled`` of the caller's own scope (and ``KeyboardInterrupt`` etc.) always propagates.

The stages are deliberately not checkpoints each (``# noqa: ASYNC910``): ``ToolRegistry.execute``
and the scheduler are, and a schedule point per stage would multiply the per-call cost.
``prepare`` is a cancel point at entry; ``ToolRegistry.execute`` ends with a schedule point and the
scheduler yields once per group of commits, so every path through either checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import trio

from dsh_tools._errors import (
    HarnessError,
)
from dsh_tools._texts import debug_traceback, one_line
from dsh_tools._values._content import HookContext
from dsh_tools._values._definition import argument_validator
from dsh_tools._values._execution import (
    ContextFields,
    RunBatch,
    ToolExecution,
    ToolExecutionResult,
    ToolExecutionToken,
    new_execution_token,
)
from dsh_tools._values._json import JsonValue
from dsh_tools._values._media import DEFAULT_MAX_BINARY_BYTES
from dsh_tools._values._signal import (
    CancelSignal,
)

from ._gate import Gate
from ._progress import ProgressState, TimeoutSettings
from ._results import (
    ABANDONED,
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    approval_pending_result,
)

if TYPE_CHECKING:
    from dsh_tools._values._definition import ToolDefinition
    from dsh_tools._values._execution import ApprovalService

    from ._hooks import HookLists

__all__ = [
    "ALLOWED",
    "BODY_ABANDONED",
    "BODY_NOT_RUN",
    "BODY_RAN",
    "DISPATCHED",
    "FINAL",
    "MISSING",
    "OPENED",
    "PENDING",
    "REPLAYED",
    "SUSPENDED",
    "CallEnv",
    "CallRequest",
    "HasExecution",
    "InvalidArguments",
    "PipelineHost",
    "PreparedCall",
    "log_invalid",
    "log_raised",
    "logger",
    "violations",
]

logger: Final = logging.getLogger("dsh_tools")

# what a body returned before it returned (and what a failed run leaves)
MISSING: Final[Any] = object()
_NEVER: Final = CancelSignal.never()

# PreparedCall.stage: how far the call got (the scheduler reads it; only PreparedCall writes it)
OPENED: Final = 0
PENDING: Final = 1
ALLOWED: Final = 2
DISPATCHED: Final = 3
FINAL: Final = 4  # settled on a final-result (it skips post_execute), from any stage
SUSPENDED: Final = 5  # its approval was deferred: a placeholder, neither logged nor observed
REPLAYED: Final = 6  # a result read back from the session log (a resumed batch): final as it is
# PreparedCall.body: what happened to the body
BODY_NOT_RUN: Final = 0
BODY_RAN: Final = 1
BODY_ABANDONED: Final = 2


def log_raised(call: CallRequest, what: str, exc: BaseException) -> None:
    """Log, once, an exception a body, hook, guard, wrapper or observer raised: one record,
    WARNING (DEBUG for a :class:`HarnessError`, an expected, model-facing failure), whose
    message is one line naming the tool, the call, what raised and the exception's first line.
    The traceback rides on the same record only when the ``dsh_tools`` logger is enabled for
    DEBUG, so a failing tool costs a program that never configured logging one line on stderr.
    The exception itself is always on the record (``dsh_tools_exception``), for handlers such
    as the OpenTelemetry bridge.
    """
    level = logging.DEBUG if isinstance(exc, HarnessError) else logging.WARNING
    if logger.isEnabledFor(level):
        logger.log(
            level,
            'tool "%s" (%s): %s raised %s: %s',
            call.name,
            call.call_id,
            what,
            type(exc).__name__,
            one_line(exc),
            exc_info=debug_traceback(logger, exc),
            extra={"dsh_tools_exception": exc},
        )


def log_invalid(call: CallRequest, detail: str) -> None:
    logger.warning(
        'tool "%s" (%s): tool result must be losslessly JSON-serializable: %s',
        call.name,
        call.call_id,
        detail,
    )


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
        max_binary_bytes: the largest picture, sound or file a final result may carry; a larger
            one is replaced by a note (see ``ToolRegistry``).
        gate: the conflict keys, capacity classes and rates the registry holds for the calls of
            every batch (``_gate``).
    """

    hooks: HookLists
    lookup: Callable[[str, object], ToolDefinition | None]
    evaluate_guards: Callable[[object, HasExecution], str | None]
    approval: ApprovalService | None
    thread_limiter: trio.CapacityLimiter
    timeouts: TimeoutSettings = attrs.field(factory=lambda: TimeoutSettings(None, 0.1))
    max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES
    gate: Gate = attrs.field(factory=lambda: Gate({}, {}, None))


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
        "approved",
        "arguments",
        "body",
        "deferred",
        "env",
        "progress",
        "request",
        "result",
        "returned",
        "stage",
        "trusted",
        "view",
    )

    def __init__(self, env: CallEnv, request: CallRequest, arguments: JsonValue) -> None:
        self.env = env
        self.request = request
        self.arguments = arguments
        # None, then the token, then the ToolExecution that holds it
        self.view: ToolExecutionToken | ToolExecution | None = None
        # how far the call got: OPENED, PENDING (stages 2-6 are left to apply_policies()),
        # ALLOWED (it needs dispatch, stage 7), DISPATCHED; or FINAL (settled on a
        # final-result)
        self.stage = OPENED
        # what happened to the body: BODY_NOT_RUN, BODY_RAN (a sync body: its thread started it),
        # BODY_ABANDONED (a sync body's worker thread was left running)
        self.body = BODY_NOT_RUN
        # the outcome (a post-result, through post_execute) or, at FINAL, the final result
        self.result: ToolExecutionResult | None = None
        # allocated when the body is invoked (most calls never defer a context)
        self.deferred: list[HookContext] | None = None
        # the success built from a valid str: final as it is (stage 9 has nothing to check)
        self.trusted: ToolExecutionResult | None = None
        # what a body returned that is not content (named in the stage-9 log), or MISSING
        self.returned: object = MISSING
        # the body's progress and idle deadline (made on the first report, or by an idle
        # timeout), which also counts the runs of a retried body
        self.progress: ProgressState | None = None
        # the digest of the arguments an approval allowed: the body starts only with them
        self.approved: str | None = None

    def final_result(self, result: ToolExecutionResult) -> PreparedCall:
        """Settle on a final-result (it skips ``post_execute``)."""
        self.result = result
        self.stage = FINAL
        return self

    def post_result(self, result: ToolExecutionResult) -> PreparedCall:
        """Settle on a post-result (it goes through ``post_execute``)."""
        self.result = result
        return self

    def suspend(self) -> PreparedCall:
        """Settle on the ``APPROVAL_PENDING`` placeholder: the call's approval was deferred."""
        self.result = approval_pending_result(self.request.name)
        self.stage = SUSPENDED
        return self

    def replay(self, result: ToolExecutionResult) -> PreparedCall:
        """Settle on a result the session log holds already (a resumed batch's): no stage
        runs, no observer hears it again.
        """
        self.result = result
        self.stage = REPLAYED
        return self

    def allow(self) -> PreparedCall:
        """Settle on dispatch: the call was allowed."""
        self.stage = ALLOWED
        return self

    def withhold(self, result: ToolExecutionResult) -> PreparedCall:
        """An allowed call that will not be dispatched after all (its conflict keys could not
        be computed, it was interrupted while it waited for its limits): settle on ``result``
        as a post-result, as a stage-6 refusal is.
        """
        if self.stage != ALLOWED:
            raise RuntimeError("withhold() is for an allowed call that was not dispatched")
        self.stage = OPENED
        self.result = result
        return self

    def pending(self) -> PreparedCall:
        """Leave stages 2-6 to :meth:`apply_policies` (``pre_execute`` listeners hear the call)."""
        self.stage = PENDING
        return self

    @property
    def call_id(self) -> str:
        """The model's id of the call."""
        return self.request.call_id

    @property
    def name(self) -> str:
        """The tool name the model called."""
        return self.request.name

    @property
    def needs_dispatch(self) -> bool:
        """``True`` when the call was allowed: await :meth:`dispatch` before :meth:`complete`."""
        return self.stage in (ALLOWED, DISPATCHED)

    @property
    def body_invoked(self) -> bool:
        """Whether the tool body started (a sync body: whether its thread started it)."""
        return self.body != BODY_NOT_RUN

    @property
    def token(self) -> ToolExecutionToken:
        """The call's token, shared by every view of it (minted on first use)."""
        view = self.view
        if view is None:
            token = self.view = new_execution_token()
            return token
        if isinstance(view, ToolExecutionToken):
            return view
        return view.token

    def execution(self) -> ToolExecution:
        """The read-only view that hooks, guards and observers receive (built once)."""
        view = self.view
        if isinstance(view, ToolExecution):
            return view
        env = self.env
        request = self.request
        execution = ToolExecution(
            token=self.token,
            call_id=request.call_id,
            name=request.name,
            arguments=self.arguments,
            signal=env.signal,
            agent=env.agent,
            parent=env.parent,
        )
        self.view = execution
        return execution

    def validated_execution(self) -> ToolExecution:
        """:meth:`execution`, for guards: built only once a guard applies, after the arguments
        are validated (validation first: an invalid call stops the guards).
        """
        violations_found = violations(self)
        if violations_found:
            raise InvalidArguments(violations_found)
        return self.execution()

    def interrupted_result(self) -> ToolExecutionResult:
        """The outcome of a call whose body a cancellation stopped: ``ABANDONED`` when a sync
        body's thread was left running, ``ABORTED`` when the body started, else
        ``ABORTED_BEFORE_DISPATCH``.
        """
        body = self.body
        if body == BODY_ABANDONED:
            return ABANDONED
        return ABORTED if body == BODY_RAN else ABORTED_BEFORE_DISPATCH

    @property
    def runs(self) -> int:
        """How many times the body has been started within this call (``1`` until a retry
        policy runs it again).
        """
        state = self.progress
        return 1 if state is None else state.runs

    @property
    def batch(self) -> RunBatch | None:
        """The batch the call belongs to (``None``: run by ``registry.execute``)."""
        return self.env.batch

    def progress_state(self) -> ProgressState:
        """The call's progress state (made on first use)."""
        state = self.progress
        if state is None:
            env = self.env
            batch = env.batch
            hooks = env.host.hooks.progress
            state = self.progress = ProgressState(
                self.request.call_id,
                batch,
                env.host.timeouts.progress_interval,
                hooks.for_agent(env.agent) if hooks.active else (),
            )
        return state

    def context_fields(self) -> ContextFields:
        """What the body's context reads from the call (its token and the list the body's
        deferred contexts join are made now if need be; a context kept past its call gets a
        list nobody reads, as the call's own was read when the body returned).
        """
        deferred = self.deferred
        if deferred is None:
            deferred = self.deferred = []
        request = self.request
        env = self.env
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
        state = self.progress
        if state is None:
            if self.result is not None or self.stage == FINAL:
                raise RuntimeError(
                    "report_progress() after the call ended: a tool body reports progress "
                    "only while it runs"
                )
            state = self.progress_state()
        return state.report_progress(message, progress, total, output)


def violations(prepared: PreparedCall) -> list[str] | None:
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
        log_raised(prepared, "validating the arguments", exc)
        return None


class InvalidArguments(Exception):
    """Raised by :meth:`PreparedCall.validated_execution`: the arguments break the tool's
    own validation (the guards never see such a call).
    """

    def __init__(self, violations: list[str]) -> None:
        super().__init__()
        self.violations = violations
