"""The session events: what the scheduler, ``session_turn`` and ``UserApproval`` record.

A batch appends, in this order, a ``batch/start`` event listing all its calls, a ``tool/call``
event when a call starts, a ``tool/result`` event when it commits (its ``source_event_seqs``
point at the ``tool/call``; it carries the result's contexts), after every result of the batch
one ``context/message`` event per context, and last a ``batch/end`` event saying how it ended.
(Logs written before ``batch/start`` and ``batch/end`` existed hold batches without them; every
reader accepts both.) Each event checks its fields when it is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal, TypeAlias, get_args

import attrs

from dsh_tools._texts import ToolErrorInfo
from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._checks import check_int
from dsh_tools._values._content import ContentBlock, HookContext, MessageSource, content_blocks
from dsh_tools._values._converter import (
    content_block_classes,
)
from dsh_tools._values._execution import ApprovalOutcome, check_progress_amount
from dsh_tools._values._json import MAX_SAFE_INTEGER, FrozenJsonObject, JsonValue, snapshot_json

__all__ = [
    "ApprovalAskedEvent",
    "ApprovalDecidedEvent",
    "ApprovalPolicy",
    "ApprovalPolicyEvent",
    "ApprovalRevokedEvent",
    "MessageEvent",
    "BatchCallEvent",
    "BatchEndEvent",
    "BatchEndReason",
    "BatchStartEvent",
    "ContextMessageEvent",
    "SessionEvent",
    "ToolCallEvent",
    "ToolProgressEvent",
    "ToolResultEvent",
    "TurnEndEvent",
    "TurnStartEvent",
    "check_approval_policy",
    "check_event",
]


ApprovalPolicy: TypeAlias = Literal["ask", "never"]
"""``"ask"``: answerers decide; ``"never"``: every request is rejected without asking."""

_POLICY_ERROR: Final = 'approval policy must be one of "ask" or "never"'


def check_approval_policy(policy: object) -> ApprovalPolicy:
    """``policy`` as an :data:`ApprovalPolicy` (a ``str`` subclass is read by its value).

    The one check of a policy, for ``UserApproval`` and for ``approval/policy`` events.

    Raises:
        TypeError: ``policy`` is not a ``str``.
        ValueError: it is neither ``"ask"`` nor ``"never"``.
    """
    if not isinstance(policy, str):
        raise TypeError(_POLICY_ERROR)
    value = str.__str__(policy)
    if value == "ask":
        return "ask"
    if value == "never":
        return "never"
    raise ValueError(_POLICY_ERROR)


def _seqs(value: object) -> tuple[int, ...]:
    if isinstance(value, str):
        raise TypeError(f"source_event_seqs must be a sequence of ints, not {value!r}")
    try:
        return tuple(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"source_event_seqs must be a sequence of ints, not {type(value).__name__}"
        ) from None


def _check_seqs(_instance: object, _attribute: object, value: tuple[object, ...]) -> None:
    for seq in value:
        if type(seq) is not int or seq < 0:
            raise TypeError(f"source_event_seqs must hold non-negative ints, not {seq!r}")


def _count(_instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    check_int(attribute.name, value, least=0)


def _text(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a str, not {type(value).__name__}")


def _flag(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if type(value) is not bool:
        raise TypeError(f"{attribute.name} must be a bool, not {value!r}")


def _attempt(_instance: object, _attribute: object, value: object) -> None:
    check_int("attempt", value)


def _batch_id(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"batch_id must be a non-empty str, not {value!r}")
    if not value:
        raise ValueError(f"batch_id must be a non-empty str, not {value!r}")


def _refuse_non_sequence(value: object, kind: str, field: str) -> None:
    # a str (or one lone item) would otherwise be split or wrapped silently
    if not isinstance(value, list | tuple):
        shown = repr(value) if isinstance(value, str | bytes) else type(value).__name__
        raise TypeError(f"{field} must be a sequence of {kind}, not {shown}")


def _check_items(field: str, kind: type, value: tuple[object, ...]) -> None:
    for index, item in enumerate(value):
        if not isinstance(item, kind):
            raise TypeError(
                f"{field}[{index}] must be a {kind.__name__}, not {type(item).__name__}"
            )


def _calls(value: Iterable[ToolCallRequest]) -> tuple[ToolCallRequest, ...]:
    _refuse_non_sequence(value, "ToolCallRequest", "calls")
    return tuple(value)


def _check_calls(_instance: object, _attribute: object, value: tuple[object, ...]) -> None:
    _check_items("calls", ToolCallRequest, value)


def _contexts(value: Iterable[HookContext]) -> tuple[HookContext, ...]:
    _refuse_non_sequence(value, "HookContext", "contexts")
    contexts = tuple(value)
    if not contexts:
        return contexts
    # a context's meta is checked once by the pipeline; one built elsewhere is frozen here, so
    # the event holds lossless JSON (as ContextMessageEvent.meta does) and always writes
    frozen: list[HookContext] = []
    for context in contexts:
        if isinstance(context, HookContext):  # pyright: ignore[reportUnnecessaryIsInstance] - the validator names other items
            meta = snapshot_json(context.meta)
            if meta is not context.meta:
                context = attrs.evolve(context, meta=meta)
        frozen.append(context)
    return tuple(frozen)


def _check_contexts(_instance: object, _attribute: object, value: tuple[object, ...]) -> None:
    _check_items("contexts", HookContext, value)


def _error_info(_instance: object, _attribute: object, value: object) -> None:
    if value is not None and not isinstance(value, ToolErrorInfo):
        raise TypeError(f"error must be a ToolErrorInfo or None, not {type(value).__name__}")


def _source(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, MessageSource):
        raise TypeError(
            f"source must be a MessageSource (UserSource or PluginSource), "
            f"not {type(value).__name__}"
        )


_LIBRARY_BLOCKS: Final = frozenset(get_args(ContentBlock))


def _blocks(_instance: object, _attribute: object, value: tuple[object, ...]) -> None:
    for block in value:
        # the library's own blocks first (cheap); then those added by register_content_block
        if type(block) not in _LIBRARY_BLOCKS and type(block) not in content_block_classes():
            index = next(i for i, b in enumerate(value) if b is block)
            raise TypeError(f"content[{index}] must be a content block, not {type(block).__name__}")


@attrs.frozen(kw_only=True)
class ToolCallEvent:
    """A call started (wire ``tool/call``): the call exactly as the model emitted it.

    ``arguments`` is the raw JSON text, never the parsed value, so the log replays what the
    model said even when it was not valid JSON. ``attempt`` counts the runs of this call's body
    (1 for the first, omitted from the wire then; a call re-run after an interruption logs a
    new ``tool/call`` with the next attempt).
    """

    turn: int = attrs.field(validator=_count)
    step: int = attrs.field(validator=_count)
    call_id: str = attrs.field(validator=_text)
    name: str = attrs.field(validator=_text)
    arguments: str = attrs.field(validator=_text)
    attempt: int = attrs.field(default=1, validator=_attempt)


def _optional_text(
    _instance: object, attribute: attrs.Attribute[str | None], value: object
) -> None:
    if value is not None and type(value) is not str:
        raise TypeError(f"{attribute.name} must be a str or None, not {type(value).__name__}")


def _optional_amount(
    _instance: object, attribute: attrs.Attribute[float | None], value: object
) -> None:
    if value is not None:
        check_progress_amount(attribute.name, value)


def _js_amount(value: float | None) -> float | None:
    """An integral ``float`` amount as the ``int`` it equals (within ``2**53 - 1``): JSON has
    one number type, so ``1.0`` is stored as ``1`` and read back as ``1``; holding it as
    ``1`` from the start makes what is read equal, type and all, to what was appended.
    """
    if type(value) is float and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


@attrs.frozen(kw_only=True)
class ToolProgressEvent:
    """A running body reported progress (wire ``tool/progress``), between its call's
    ``tool/call`` and ``tool/result``. Never shown to the model.

    ``progress`` / ``total`` are amounts in the body's own unit (``total`` ``None``: unknown),
    JSON numbers: an integral ``float`` is held as the ``int`` it equals, as the log stores it;
    ``output`` is a chunk of terminal output, the chunks of reports coalesced into this event
    joined in order.
    """

    turn: int = attrs.field(validator=_count)
    step: int = attrs.field(validator=_count)
    call_id: str = attrs.field(validator=_text)
    message: str | None = attrs.field(default=None, validator=_optional_text)
    progress: float | None = attrs.field(
        default=None, converter=_js_amount, validator=_optional_amount
    )
    total: float | None = attrs.field(
        default=None, converter=_js_amount, validator=_optional_amount
    )
    output: str | None = attrs.field(default=None, validator=_optional_text)


@attrs.frozen(kw_only=True)
class ToolResultEvent:
    """A call committed (wire ``tool/result``): the final result the model receives.

    ``source_event_seqs`` holds the sequence number of the call's ``tool/call`` event.
    Contexts are not part of it: they follow as ``context/message`` events. ``surface_op``
    (wire ``surfaceOp``) says how a UI applies the event: absent (``None``) means ``"append"``, a
    new result; any other value (e.g. a replacement written by pruning) rewrites an earlier
    result and is not a new result for a UI (the ACP bridge sends no update for it).
    ``contexts`` are the result's additional contexts (wire ``contexts``, omitted when empty),
    so a batch read back from the log rebuilds ``batch.contexts`` exactly.
    """

    turn: int = attrs.field(validator=_count)
    step: int = attrs.field(validator=_count)
    call_id: str = attrs.field(validator=_text)
    content: tuple[ContentBlock, ...] = attrs.field(converter=content_blocks, validator=_blocks)
    is_error: bool = attrs.field(validator=_flag)
    error: ToolErrorInfo | None = attrs.field(default=None, validator=_error_info)
    meta: JsonValue = attrs.field(default=None, converter=snapshot_json)
    source_event_seqs: tuple[int, ...] = attrs.field(
        default=(), converter=_seqs, validator=_check_seqs
    )
    surface_op: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    contexts: tuple[HookContext, ...] = attrs.field(
        default=(), converter=_contexts, validator=_check_contexts
    )


@attrs.frozen(kw_only=True)
class ContextMessageEvent:
    """A context message for the model (wire ``context/message``), appended after every result
    of the batch it belongs to.
    """

    content: tuple[ContentBlock, ...] = attrs.field(converter=content_blocks, validator=_blocks)
    source: MessageSource = attrs.field(validator=_source)
    meta: JsonValue = attrs.field(default=None, converter=snapshot_json)


BatchEndReason: TypeAlias = Literal["completed", "aborted", "suspended", "failed"]
"""Why a batch ended (the ``reason`` of :class:`BatchEndEvent`)."""

_BATCH_END_REASONS: Final = ("completed", "aborted", "suspended", "failed")


def _batch_end_reason(_instance: object, _attribute: object, value: object) -> None:
    if type(value) is not str or value not in _BATCH_END_REASONS:
        choices = ", ".join(f'"{reason}"' for reason in _BATCH_END_REASONS)
        error = ValueError if isinstance(value, str) else TypeError
        raise error(f"reason must be one of {choices}, not {value!r}")


@attrs.frozen(kw_only=True)
class BatchStartEvent:
    """A batch began (wire ``batch/start``): every call of the batch, in model order, before
    any ``tool/call`` of it.

    ``batch_id`` names the batch (a fresh UUID string) in its ``batch/end``; ``calls`` are the
    batch's requests (wire ``[{"callId", "name", "arguments"}]``), so a batch whose process
    stopped can be finished from the log alone.
    """

    turn: int = attrs.field(validator=_count)
    step: int = attrs.field(validator=_count)
    batch_id: str = attrs.field(validator=_batch_id)
    calls: tuple[ToolCallRequest, ...] = attrs.field(converter=_calls, validator=_check_calls)


def _call(_instance: object, _attribute: object, value: object) -> None:
    if type(value) is not ToolCallRequest:
        raise TypeError(f"call must be a ToolCallRequest, not {type(value).__name__}")


@attrs.frozen(kw_only=True)
class BatchCallEvent:
    """A call of a streamed batch that arrived after the batch's ``batch/start`` (wire
    ``batch/call``), appended when it arrives, before its ``tool/call``: the batch's calls are
    its ``batch/start``'s followed by its ``batch/call`` events, in model order.
    """

    turn: int = attrs.field(validator=_count)
    step: int = attrs.field(validator=_count)
    batch_id: str = attrs.field(validator=_batch_id)
    call: ToolCallRequest = attrs.field(validator=_call)


@attrs.frozen(kw_only=True)
class BatchEndEvent:
    """A batch ended (wire ``batch/end``), after its results and contexts.

    ``reason`` is how: ``"completed"``, ``"aborted"`` (cancelled), ``"suspended"`` (to be
    finished later) or ``"failed"`` (it raised).
    """

    turn: int = attrs.field(validator=_count)
    step: int = attrs.field(validator=_count)
    batch_id: str = attrs.field(validator=_batch_id)
    reason: BatchEndReason = attrs.field(validator=_batch_end_reason)


# --- turns and approvals (appended by session_turn and UserApproval) ----------------------

_nonempty_str = attrs.validators.and_(
    attrs.validators.instance_of(str), attrs.validators.min_len(1)
)


def _turn_number(_instance: object, _attribute: object, value: int) -> None:
    check_int("turn", value, least=0)


@attrs.frozen(kw_only=True)
class TurnStartEvent:
    """A turn of the agent began (wire ``turn/start``).

    ``trigger`` is what started it, as opaque JSON (absent when not recorded).
    """

    turn: int = attrs.field(validator=_turn_number)
    trigger: JsonValue = attrs.field(default=None, converter=snapshot_json)


@attrs.frozen(kw_only=True)
class TurnEndEvent:
    """A turn of the agent ended (wire ``turn/end``, ``{"turn": 1, "reason": {"kind": ...}}``).

    ``kind`` is why: ``"completed"``, or ``"aborted"`` when the turn raised or was cancelled.
    """

    turn: int = attrs.field(validator=_turn_number)
    kind: str = attrs.field(default="completed", validator=_nonempty_str)


@attrs.frozen(kw_only=True)
class ApprovalAskedEvent:
    """The approval service was asked about a call (wire ``approval/asked``).

    ``id`` is fresh per request and pairs this event with its ``approval/decided``.
    """

    id: str = attrs.field(validator=_nonempty_str)
    tool_name: str
    call_id: str | None = None
    reason: str | None = None
    agent: str | None = None
    """The name of the agent that asked (a ``str`` agent, or an agent's ``name``), when it
    has one: session grants are recorded per (agent name, tool name)."""
    arguments_digest: str | None = None
    """:func:`~dsh_tools.arguments_digest` of the tool name and the arguments asked about
    (wire ``argumentsDigest``), when the request carried arguments."""


@attrs.frozen(kw_only=True)
class ApprovalDecidedEvent:
    """The approval service decided the request ``id`` (wire ``approval/decided``).

    ``answered_by`` (wire ``answeredBy``) says who decided when it was not an answerer:
    ``"grant"`` (a session grant stood) or ``"resume"`` (a deferred decision given to
    ``resume_tool_calls``). An ``"allowed-session"`` outcome records a session grant.
    """

    id: str = attrs.field(validator=_nonempty_str)
    outcome: ApprovalOutcome = attrs.field(converter=ApprovalOutcome)
    answered_by: str | None = None
    arguments_digest: str | None = None
    """The digest of the arguments this decision allows (wire ``argumentsDigest``): the asked
    ones, or the edited ``arguments``; a body starts only with arguments of this digest."""
    arguments: JsonValue = attrs.field(default=None, converter=snapshot_json)
    """The arguments the person approved in place of the model's, when they edited them."""
    note: str | None = None
    """A word from the person who decided, when they gave one."""


@attrs.frozen(kw_only=True)
class ApprovalRevokedEvent:
    """A session grant was revoked (wire ``approval/revoked``): ``tool_name`` for the agent
    named ``agent``, or for every agent when ``agent`` is ``None``.
    """

    tool_name: str = attrs.field(validator=_nonempty_str)
    agent: str | None = None


def _check_policy(_instance: object, _attribute: object, value: object) -> None:
    check_approval_policy(value)
    if type(value) is not str:  # an event holds a plain str
        raise TypeError(_POLICY_ERROR)


@attrs.frozen(kw_only=True)
class ApprovalPolicyEvent:
    """The approval policy changed (wire ``approval/policy``); the last one logged is in effect."""

    policy: Literal["ask", "never"] = attrs.field(validator=_check_policy)


def _json_object(value: object) -> JsonValue:
    frozen = snapshot_json(value)
    if not isinstance(frozen, FrozenJsonObject):
        raise TypeError(f"message must be a JSON object, not {type(value).__name__}")
    return frozen


def _role(_instance: object, _attribute: object, value: object) -> None:
    if type(value) is not str or not value:
        raise TypeError(f"role must be a non-empty str, not {value!r}")


@attrs.frozen(kw_only=True)
class MessageEvent:
    """A message of the conversation, as the loop sent or received it (wire ``message``).

    ``message`` is the provider's own shape (an OpenAI chat message, a Responses item, an
    Anthropic message), a JSON object; ``role`` says whose it is (``"user"``,
    ``"assistant"``, ...). A loop that appends its messages (and lets the batches log the tool
    results) can be resumed from the log alone: :func:`~dsh_tools.conversation` reads them back
    and :func:`~dsh_tools.next_turn` says which turn comes next.
    """

    turn: int = attrs.field(validator=_turn_number)
    role: str = attrs.field(validator=_role)
    message: JsonValue = attrs.field(converter=_json_object)


SessionEvent: TypeAlias = (
    ToolCallEvent
    | ToolProgressEvent
    | ToolResultEvent
    | ContextMessageEvent
    | BatchStartEvent
    | BatchCallEvent
    | BatchEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | ApprovalAskedEvent
    | ApprovalDecidedEvent
    | ApprovalPolicyEvent
    | ApprovalRevokedEvent
    | MessageEvent
)
"""Every event the library appends: the scheduler's (a batch's bounds, its calls, results and
contexts), a turn's bounds, approval audit events."""


_EVENT_CLASSES: Final = frozenset(
    (
        ToolCallEvent,
        ToolProgressEvent,
        ToolResultEvent,
        ContextMessageEvent,
        BatchStartEvent,
        BatchCallEvent,
        BatchEndEvent,
        TurnStartEvent,
        TurnEndEvent,
        ApprovalAskedEvent,
        ApprovalDecidedEvent,
        ApprovalPolicyEvent,
        ApprovalRevokedEvent,
        MessageEvent,
    )
)


def check_event(event: object) -> None:
    """Raise ``TypeError`` unless ``event`` is one of the library's session events."""
    if type(event) not in _EVENT_CLASSES:
        raise TypeError(f"event must be a session event, not {type(event).__name__}")
