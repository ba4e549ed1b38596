"""The values that flow through one tool call: inputs, execution views, results, decisions,
approval requests.

Every type here is an immutable attrs value, except :class:`ToolDispatchExecution`, whose
``signal`` an ``execute`` wrapper may replace (never with ``None``).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    Literal,
    NoReturn,
    Protocol,
    TypeAlias,
    final,
)

import attrs

from dsh_tools._texts import ToolErrorInfo

from ._content import ContentBlock, HookContext, TextBlock, content_blocks, unchecked_meta
from ._json import MAX_SAFE_INTEGER, FrozenJsonObject, JsonValue, snapshot_json, thaw_json
from ._presentation import ToolCallView
from ._signal import CancelSignal

__all__ = [
    "Accept",
    "Allow",
    "Approval",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalService",
    "Ask",
    "Block",
    "ContextFields",
    "Deny",
    "PostToolDecision",
    "PreToolDecision",
    "ProgressReceiver",
    "RunBatch",
    "ToolDispatchExecution",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolExecutionMode",
    "ToolExecutionResult",
    "ToolExecutionToken",
    "ToolGuard",
    "ToolResult",
    "ToolRunContext",
    "check_progress_amount",
    "new_execution_token",
    "arguments_digest",
    "decided_digest",
    "read_approval",
    "read_approval_outcome",
    "run_context",
    "success_result",
    "text_success",
]


@final
class ToolExecutionToken:
    """The opaque identity of one ``execute()`` call: minted by the registry, compared by
    identity, shared by every view of the call. It has no public constructor and refuses to be
    pickled or serialized.
    """

    __slots__ = ()

    def __init__(self) -> None:
        raise TypeError("ToolExecutionToken has no public constructor: the registry mints them")

    def __reduce__(self) -> NoReturn:
        raise TypeError("a ToolExecutionToken cannot be serialized")

    def __copy__(self) -> ToolExecutionToken:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolExecutionToken:
        return self

    def __repr__(self) -> str:
        return f"<ToolExecutionToken {id(self):#x}>"


new_execution_token: Final[Callable[[], ToolExecutionToken]] = functools.partial(
    object.__new__, ToolExecutionToken
)
"""Mint a fresh :class:`ToolExecutionToken` (internal: the pipeline's one way to make one; a
``partial`` so that minting is one C call)."""


def _check_signal(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, CancelSignal):
        raise TypeError(f"signal must be a CancelSignal, not {type(value).__name__}")


@attrs.frozen(kw_only=True)
class ToolExecutionInput:
    """What the caller asks the registry to run: one tool call.

    ``arguments`` is the parsed, not yet validated JSON the model sent (a ``str`` when it was
    not valid JSON); it is snapshotted before any policy sees it. ``signal`` is required: pass
    ``CancelSignal.never()`` for a call that cannot be cancelled. ``agent`` is an identity key
    that routes the call to that agent's scope; ``parent`` is the token of an enclosing
    execution, if any.
    """

    call_id: str
    name: str
    arguments: object
    signal: CancelSignal = attrs.field(validator=_check_signal)
    agent: object | None = None
    parent: ToolExecutionToken | None = None


@attrs.frozen(kw_only=True)
class ToolExecution:
    """The read-only view of a call that ``pre_execute``, guards, ``post_execute`` and
    ``result`` observers receive. ``arguments`` is the frozen snapshot (``None`` only when the
    snapshot failed, as seen by ``result`` observers).
    """

    token: ToolExecutionToken
    call_id: str
    name: str
    arguments: JsonValue
    signal: CancelSignal
    agent: object | None = None
    parent: ToolExecutionToken | None = None


_view_token: Final = ToolExecution.__dict__["token"].__set__
_view_call_id: Final = ToolExecution.__dict__["call_id"].__set__
_view_name: Final = ToolExecution.__dict__["name"].__set__
_view_arguments: Final = ToolExecution.__dict__["arguments"].__set__
_view_signal: Final = ToolExecution.__dict__["signal"].__set__
_view_agent: Final = ToolExecution.__dict__["agent"].__set__
_view_parent: Final = ToolExecution.__dict__["parent"].__set__


@attrs.frozen
class RunBatch:
    """What the bodies of one batch share (internal): the batch's id, in a resumed batch the
    attempt of each call run again (by call id; ``None``: every call is attempt 1), and where
    its calls' progress is recorded (``(call_id, message, progress, total, output)``;
    ``None``: the batch has no session log).
    """

    batch_id: str
    attempts: Mapping[str, int] | None = None
    progress: Callable[[str, str | None, float | None, float | None, str | None], None] | None = (
        None
    )


class ProgressReceiver(Protocol):
    """Who takes a body's progress reports (the pipeline's call, then the call's progress
    state; internal). Returns the receiver of the next reports.
    """

    @property
    def runs(self) -> int:
        """How many times the call's body has been started within the call."""
        ...

    @property
    def batch(self) -> RunBatch | None:
        """The batch the call belongs to (``None``: run by ``registry.execute``)."""
        ...

    def report_progress(
        self,
        message: str | None,
        progress: float | None,
        total: float | None,
        output: str | None,
        /,
    ) -> ProgressReceiver: ...


ContextFields: TypeAlias = tuple[
    ToolExecutionToken,
    str,
    str,
    JsonValue,
    object | None,
    ToolExecutionToken | None,
    list[HookContext],
]
"""What a body's context reads from its call (internal): its ``token``, ``call_id``, ``name``,
``arguments``, ``agent``, ``parent`` and the list its deferred contexts join."""


class ContextSource(ProgressReceiver, Protocol):
    """The call a body's context reads its identity from (the pipeline's call; internal)."""

    def context_fields(self) -> ContextFields:
        """The context's ``token``, ``call_id``, ``name``, ``arguments``, ``agent``,
        ``parent`` and the list its deferred contexts join.
        """
        ...


@attrs.frozen(kw_only=True)
class ToolRunContext(ToolExecution):
    """What a tool body receives: the execution view (its ``signal`` is the fused signal of the
    caller and any wrapper) plus :meth:`defer_context`, :attr:`attempt` and
    :attr:`idempotency_key`.
    """

    # The pipeline builds a body's context with its ``signal`` and its call only (two writes
    # instead of nine on every call): the other fields are read from the call on first use
    # and kept. A context built by its constructor has every field from the start.

    _deferred: list[HookContext] = attrs.field(
        alias="_deferred", factory=lambda: list[HookContext](), repr=False, eq=False
    )
    # the call that takes this body's progress and knows its batch (None: a context no
    # registry gave a body, which belongs to no batch)
    _receiver: ProgressReceiver | None = attrs.field(
        alias="_receiver", default=None, repr=False, eq=False
    )

    if not TYPE_CHECKING:  # type checkers see the fields, not how a lazy one is read

        def __getattr__(self, name: str) -> object:
            # only reached when a slot is unset: a context the pipeline made reads its call
            if name in _FROM_CALL:
                try:
                    source = _context_receiver_get(self)
                except AttributeError:
                    source = None
                if source is not None:
                    fill_from_call(self, source)
                    return object.__getattribute__(self, name)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def attempt(self) -> int:
        """How many times this call's body has been started, this run included: ``1`` on the
        first run; ``resume_tool_calls`` runs an interrupted call of an idempotent tool again
        with the next attempt, and ``install_retry_policy`` runs the body again within the call
        (each run counts).
        """
        receiver = self._receiver
        batch = None if receiver is None else receiver.batch
        attempts = None if batch is None else batch.attempts
        first = 1 if attempts is None else attempts.get(self.call_id, 1)
        # a retry policy runs the body again within the call: its runs add to the attempt
        return first if receiver is None else first + receiver.runs - 1

    @property
    def idempotency_key(self) -> str:
        """What a body passes to an API that deduplicates: ``"<batch_id>/<call_id>"``, the same
        on every attempt of the call. Outside a batch (``registry.execute``) there is no batch
        id, and the key is the ``call_id`` alone: the caller owns its uniqueness.
        """
        receiver = self._receiver
        batch = None if receiver is None else receiver.batch
        return self.call_id if batch is None else f"{batch.batch_id}/{self.call_id}"

    def report_progress(
        self,
        *,
        message: str | None = None,
        progress: float | None = None,
        total: float | None = None,
        output: str | None = None,
    ) -> None:
        """Report how far the body got: a ``tool/progress`` session event that UIs show and
        the model never sees. Synchronous and non-blocking (from a sync body's worker thread
        too). Reports closer together than the registry's ``progress_interval`` are
        coalesced: the last one's message and amounts are kept, the ``output`` chunks are
        joined. Each report also resets the tool's ``idle_timeout``.

        Args:
            message: what the body is doing (``"resolving dependencies"``).
            progress: how much is done, in the body's own unit (a finite number >= 0).
            total: how much there is in all, if known (a finite number >= 0).
            output: a chunk of terminal output (shown as a terminal's output would be).

        Raises:
            RuntimeError: the context was not given to a running body by a registry, or the
                call has ended.
            TypeError: ``message`` / ``output`` is not a ``str`` or ``None``, or ``progress``
                / ``total`` is not a number or ``None``.
            ValueError: ``progress`` / ``total`` is negative, NaN or infinite, or an ``int``
                beyond ``2**53 - 1`` (what JSON carries exactly).
        """
        receiver = self._receiver
        if receiver is None:
            raise RuntimeError(
                "report_progress() is for a running tool body: this context was not given "
                "to a body by a registry"
            )
        if message is not None and type(message) is not str:
            raise TypeError(f"message must be a str or None, not {type(message).__name__}")
        if output is not None and type(output) is not str:
            raise TypeError(f"output must be a str or None, not {type(output).__name__}")
        # the common cases first (an int or a float from 0 to 2**53 - 1; NaN fails the
        # comparison; anything else is read by the one rule)
        if progress is not None and (
            (type(progress) is not int and type(progress) is not float)
            or not 0 <= progress <= MAX_SAFE_INTEGER
        ):
            check_progress_amount("progress", progress)
        if total is not None and (
            (type(total) is not int and type(total) is not float)
            or not 0 <= total <= MAX_SAFE_INTEGER
        ):
            check_progress_amount("total", total)
        following = receiver.report_progress(message, progress, total, output)
        if following is not receiver:
            # the call's progress state takes the next reports; the fields the context reads
            # from its call are read now, while the call is still its receiver
            self.token  # noqa: B018
            _context_receiver(self, following)

    def defer_context(self, context: HookContext) -> None:
        """Attach ``context`` to this call's result; deferred contexts come first, in call order,
        and are kept even when the result is an error.
        """
        if not isinstance(context, HookContext):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"defer_context() takes a HookContext, not {type(context).__name__}")
        self._deferred.append(context)


def check_progress_amount(name: str, value: object) -> None:
    """The one rule of a progress amount (``progress``, ``total``): ``None`` is checked by the
    caller; else a finite, non-negative ``int`` / ``float`` (``bool`` is not a number), an
    ``int`` no larger than JSON carries exactly (``2**53 - 1``: the session log stores it).

    Raises:
        TypeError: not a number.
        ValueError: negative, NaN or infinite, or an ``int`` beyond ``2**53 - 1``.
    """
    if (type(value) is not float and type(value) is not int) and (
        isinstance(value, bool) or not isinstance(value, int | float)
    ):
        raise TypeError(f"{name} must be a number or None, not {type(value).__name__}")
    if isinstance(value, int) and value > MAX_SAFE_INTEGER:
        raise ValueError(
            f"{name} must be at most {MAX_SAFE_INTEGER} (what JSON carries exactly), "
            f"not an int of {len(str(value)) if value.bit_length() < 14_000 else 'thousands of'} digits"
        )
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")


_context_deferred: Final = ToolRunContext.__dict__["_deferred"].__set__
_context_receiver: Final = ToolRunContext.__dict__["_receiver"].__set__
_context_receiver_get: Final = ToolRunContext.__dict__["_receiver"].__get__


def run_context(signal: CancelSignal, call: ContextSource) -> ToolRunContext:
    """A body's context as the pipeline builds it (internal): its ``signal`` and its call;
    the other fields are read from ``call`` on first use (:func:`fill_from_call`).
    """
    context = _new(ToolRunContext)
    _view_signal(context, signal)
    _context_receiver(context, call)
    return context


def fill_from_call(context: ToolRunContext, call: ContextSource) -> None:
    """Give a context :func:`run_context` built the fields it reads from its call."""
    token, call_id, name, arguments, agent, parent, deferred = call.context_fields()
    _view_token(context, token)
    _view_call_id(context, call_id)
    _view_name(context, name)
    _view_arguments(context, arguments)
    _view_agent(context, agent)
    _view_parent(context, parent)
    _context_deferred(context, deferred)


_new: Final = object.__new__
# the fields a context built by run_context reads from its call
_FROM_CALL: Final = frozenset(
    ("token", "call_id", "name", "arguments", "agent", "parent", "_deferred")
)


def _frozen_unless_signal(
    instance: object, attribute: attrs.Attribute[object], value: object
) -> object:
    if attribute.name != "signal":
        raise attrs.exceptions.FrozenAttributeError()
    if value is None:
        raise TypeError("an execute wrapper may replace signal, but never with None")
    _check_signal(instance, attribute, value)
    return value


@attrs.define(kw_only=True, on_setattr=_frozen_unless_signal)
class ToolDispatchExecution:
    """The view ``execute`` wrappers share: like :class:`ToolExecution`, but ``signal`` may be
    reassigned (to another :class:`CancelSignal`, never ``None``). The body then runs under the
    fusion of the caller's signal and the replacement.
    """

    token: ToolExecutionToken
    call_id: str
    name: str
    arguments: JsonValue
    signal: CancelSignal
    agent: object | None = None
    parent: ToolExecutionToken | None = None


def _check_mode_kind(_instance: object, _attribute: object, value: object) -> None:
    if value not in ("parallel", "exclusive") or type(value) is not str:
        raise ValueError(f'kind must be "parallel" or "exclusive", not {value!r}')


@attrs.frozen(kw_only=True)
class ToolExecutionMode:
    """How the scheduler may run a call: ``"parallel"`` (may overlap other parallel calls) or
    ``"exclusive"`` (a barrier, run alone). Use the constants ``PARALLEL`` / ``EXCLUSIVE``.
    """

    kind: Literal["parallel", "exclusive"] = attrs.field(validator=_check_mode_kind)

    PARALLEL: ClassVar[ToolExecutionMode]
    EXCLUSIVE: ClassVar[ToolExecutionMode]


ToolExecutionMode.PARALLEL = ToolExecutionMode(kind="parallel")
ToolExecutionMode.EXCLUSIVE = ToolExecutionMode(kind="exclusive")


@attrs.frozen(kw_only=True)
class ToolExecutionResult:
    """The final outcome of one call: what the model receives.

    ``error`` is set only when the failure was a :class:`~dsh_tools.HarnessError` (or one of the
    synthetic cancellation/timeout codes); ``additional_contexts`` are context messages that
    follow the batch's results; ``meta`` is private presentation data, persisted but hidden from
    the model. ``meta`` is not checked here: the pipeline checks the whole result once, at final
    materialization (a result that is not lossless JSON becomes
    ``Error: tool result must be losslessly JSON-serializable``), and a result it returns is
    deeply frozen.
    """

    content: tuple[ContentBlock, ...] = attrs.field(converter=content_blocks)
    is_error: bool
    error: ToolErrorInfo | None = None
    additional_contexts: tuple[HookContext, ...] = attrs.field(default=(), converter=tuple)
    meta: JsonValue = attrs.field(default=None, converter=unchecked_meta)


# The pipeline builds a run context and a success per call: its fast constructors fill the slots
# through their descriptors (what attrs' frozen __init__ does through object.__setattr__).
_result_content: Final = ToolExecutionResult.__dict__["content"].__set__
_result_is_error: Final = ToolExecutionResult.__dict__["is_error"].__set__
_result_error: Final = ToolExecutionResult.__dict__["error"].__set__
_result_contexts: Final = ToolExecutionResult.__dict__["additional_contexts"].__set__
_result_meta: Final = ToolExecutionResult.__dict__["meta"].__set__


def success_result(content: tuple[ContentBlock, ...], meta: JsonValue) -> ToolExecutionResult:
    """A success built without attrs' converters, for the pipeline's hot path (internal).

    No check and no conversion: ``content`` must be a ``tuple`` of content blocks already;
    ``meta`` is checked and frozen at final materialization like any result's.
    """
    result = object.__new__(ToolExecutionResult)
    _result_content(result, content)
    _result_is_error(result, False)
    _result_error(result, None)
    _result_contexts(result, ())
    _result_meta(result, meta)
    return result


_block_text: Final = TextBlock.__dict__["text"].__set__


def text_success(text: str) -> ToolExecutionResult:
    """``success_result((text_block(text),), None)``, for the pipeline's hot path (internal)."""
    block = object.__new__(TextBlock)
    _block_text(block, text)
    result = object.__new__(ToolExecutionResult)
    _result_content(result, (block,))
    _result_is_error(result, False)
    _result_error(result, None)
    _result_contexts(result, ())
    _result_meta(result, None)
    return result


@attrs.frozen(kw_only=True)
class ToolResult:
    """What ``present_result`` receives: the content and whether it is an error."""

    content: tuple[ContentBlock, ...] = attrs.field(converter=content_blocks)
    is_error: bool
    meta: JsonValue = None


# --- decisions -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Allow:
    """``pre_execute``: run the call (guards still apply)."""


def _check_reason(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"Deny.reason must be a str, not {type(value).__name__}")


def _check_optional_reason(_instance: object, _attribute: object, value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"Ask.reason must be a str or None, not {type(value).__name__}")


@attrs.frozen
class Deny:
    """``pre_execute``: refuse the call; the model sees ``Error: <reason>``.

    Raises:
        TypeError: ``reason`` is not a ``str`` (a denial always says why; the pipeline treats
            any decision it cannot read as a failure that denies, never as an allow).
    """

    reason: str = attrs.field(validator=_check_reason)


@attrs.frozen
class Ask:
    """``pre_execute``: ask the approval service; ``reason`` is shown to the user.

    Without an approval service the call is denied with ``reason`` as given (an empty string
    included) or, when it is ``None``, ``tool "<name>" requires approval (not yet supported)``.

    Raises:
        TypeError: ``reason`` is neither a ``str`` nor ``None``.
    """

    reason: str | None = attrs.field(default=None, validator=_check_optional_reason)


PreToolDecision: TypeAlias = Allow | Deny | Ask
"""What a ``pre_execute`` listener returns (wire tag ``kind``: ``allow`` / ``deny`` / ``ask``)."""


def _tuple_or_none(value: Sequence[ContentBlock] | None) -> tuple[ContentBlock, ...] | None:
    return None if value is None else content_blocks(value)


@attrs.frozen(kw_only=True)
class Accept:
    """``post_execute``: keep the result; ``content`` (when not ``None``, even empty) replaces
    its content; ``additional_contexts`` are appended after the result's own.
    """

    content: tuple[ContentBlock, ...] | None = attrs.field(default=None, converter=_tuple_or_none)
    additional_contexts: tuple[HookContext, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen(kw_only=True)
class Block:
    """``post_execute``: replace the result with an error whose content is ``feedback``; every
    earlier context, ``error`` and ``meta`` is dropped, only this decision's contexts remain.
    """

    feedback: tuple[ContentBlock, ...] = attrs.field(
        converter=functools.partial(content_blocks, name="feedback")
    )
    additional_contexts: tuple[HookContext, ...] = attrs.field(default=(), converter=tuple)


PostToolDecision: TypeAlias = Accept | Block
"""What a ``post_execute`` listener returns (wire tag ``kind``: ``accept`` / ``block``)."""

ToolGuard: TypeAlias = Callable[[ToolExecution], str | None]
"""A synchronous guard: return a denial reason, or ``None`` to let the call through. Guards can
only deny (monotonic): no listener can undo a guard's denial."""


# --- approval ------------------------------------------------------------------------------


class ApprovalOutcome(enum.StrEnum):
    """What the approval service decided for one request.

    ``ALLOWED_SESSION`` allows the call and grants the agent its tool for the rest of the
    session; ``DEFERRED`` decides nothing yet: the call waits (its batch ends suspended) until
    ``resume_tool_calls(..., approvals=...)`` decides it.
    """

    ALLOWED_ONCE = "allowed-once"
    ALLOWED_SESSION = "allowed-session"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    UNAVAILABLE = "unavailable"
    DEFERRED = "deferred"


_OUTCOMES: Final = {str.__str__(outcome): outcome for outcome in ApprovalOutcome}


def read_approval_outcome(answer: object) -> ApprovalOutcome | None:
    """The :class:`ApprovalOutcome` that ``answer`` (a plug-in's reply) names, or ``None``.

    The one reading of an answer, for every place that receives one. A ``str`` subclass is
    read by its value, never through its own ``__eq__`` / ``__hash__``: a subclass valued
    ``"rejected"`` that claims to equal ``"allowed-once"`` is read as ``REJECTED``.
    """
    if not isinstance(answer, str):
        return None
    return _OUTCOMES.get(str.__str__(answer))


def _approved_arguments(value: object) -> JsonValue:
    if value is None:
        return None
    frozen = snapshot_json(value)
    if not isinstance(frozen, FrozenJsonObject):
        raise TypeError(f"Approval.arguments must be a JSON object, not {type(value).__name__}")
    return frozen


def _optional_str(name: str) -> Callable[[object, object, object], None]:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None and type(value) is not str:
            raise TypeError(f"Approval.{name} must be a str or None, not {type(value).__name__}")

    return check


@attrs.frozen
class Approval:
    """An answer that says more than an :class:`ApprovalOutcome`: answerers, approval services
    and ``resume_tool_calls(approvals=...)`` may give one wherever an outcome is taken.

    ``arguments``: with an allowing outcome, the arguments the person approved in place of the
    model's (edited before the call runs). They are validated again (invalid: the call's
    ``INVALID_ARGS`` result, nothing runs), replace the model's for everything after the
    decision (guards, wrappers, the body), and the model is told in the result's contexts.
    ``note``: a word from the person, kept in the log's ``approval/decided``. ``digest``: the
    :func:`~dsh_tools.arguments_digest` of the request this decision is meant for; a decision
    whose digest does not match the request's is refused.

    Raises:
        ValueError: ``outcome`` is not an outcome.
        TypeError: ``arguments`` is not a JSON object (or not lossless JSON data: then
            ``JsonSnapshotError``), or ``note`` / ``digest`` is not a ``str``.
    """

    outcome: ApprovalOutcome = attrs.field(converter=ApprovalOutcome)
    arguments: JsonValue = attrs.field(default=None, converter=_approved_arguments)
    note: str | None = attrs.field(default=None, validator=_optional_str("note"), kw_only=True)
    digest: str | None = attrs.field(default=None, validator=_optional_str("digest"), kw_only=True)


def read_approval(answer: object) -> tuple[ApprovalOutcome | None, Approval | None]:
    """The outcome ``answer`` (a plug-in's reply) names, and the :class:`Approval` it is when
    it is one (``(None, None)``: neither). The one reading of an answer.
    """
    if type(answer) is Approval:
        return answer.outcome, answer
    return read_approval_outcome(answer), None


def arguments_digest(tool_name: str, arguments: object) -> str:
    """SHA-256 (hex) of the canonical JSON of ``{"arguments": arguments, "name": tool_name}``:
    keys sorted at every level, no spaces, UTF-8. Equal arguments give equal digests whatever
    the order of their keys; any change of a value or of the name changes it.

    Raises:
        JsonSnapshotError: ``arguments`` is not lossless JSON data.
    """
    canonical = json.dumps(
        {"arguments": thaw_json(snapshot_json(arguments)), "name": tool_name},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def decided_digest(tool_name: str, asked: object, decision: Approval) -> str | None:
    """The digest of the arguments ``decision`` allows (its edited ``arguments``, else the
    ``asked`` ones), or ``None`` when it allows nothing (or the arguments are not JSON data).
    """
    if decision.outcome not in (ApprovalOutcome.ALLOWED_ONCE, ApprovalOutcome.ALLOWED_SESSION):
        return None
    arguments = asked if decision.arguments is None else decision.arguments
    try:
        return arguments_digest(tool_name, arguments)
    except (TypeError, ValueError):
        return None


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """One request for the user's approval of a call.

    The registry always fills ``call_id``, ``arguments`` (the validated, frozen arguments) and
    ``view`` (the call's card from its tool's ``present_call``, or the generic card), so an
    answerer shows what it approves; other callers of an approval service (a plugin asking
    before something that is not a tool call) may leave them out.
    """

    agent: object
    tool_name: str
    signal: CancelSignal
    call_id: str | None = None
    reason: str | None = None
    arguments: JsonValue = None
    view: ToolCallView | None = None


class ApprovalService(Protocol):
    """Asks a user (or a policy) whether a call that a ``pre_execute`` listener marked ``Ask``
    may run. ``request`` should return ``CANCELLED`` promptly once ``request.signal`` fires.
    """

    def request(self, request: ApprovalRequest, /) -> Awaitable[ApprovalOutcome | Approval]: ...
