"""Durable session events: what the scheduler records about one batch of tool calls.

A batch appends, in this order, a ``batch/start`` event listing all its calls, a ``tool/call``
event when a call starts, a ``tool/result`` event when it commits (its ``source_event_seqs``
point at the ``tool/call``; it carries the result's contexts), after every result of the batch
one ``context/message`` event per context, and last a ``batch/end`` event saying how it ended.
(Logs written before ``batch/start`` and ``batch/end`` existed hold batches without them; every
reader accepts both.) A :class:`SessionLog` stores
them and numbers them from 0 in append order.

Appends are synchronous on purpose: the scheduler appends on its one lane, in model order,
and a synchronous ``append`` cannot interleave with another lane step or be cancelled halfway
(a half-appended event would be worse than a late one). :class:`JsonlSessionLog` therefore
blocks the trio thread for one small ``write`` + ``flush`` per event (plus an ``fsync`` when
asked for), as a logging handler would.

The wire shape is the original's: camelCase keys, a ``type`` tag (``tool/call``,
``tool/result``, ``context/message``, ``batch/start``, ``batch/end``), absent optionals omitted.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, Literal, Protocol, Self, TypeAlias, cast, get_args, runtime_checkable

import attrs
import cattrs

from dsh_tools._errors import SessionLogCorruptError, SessionLogLockedError
from dsh_tools._texts import ToolErrorInfo
from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._checks import check_int
from dsh_tools._values._content import ContentBlock, HookContext, MessageSource, content_blocks
from dsh_tools._values._converter import (
    content_block_classes,
    converter,
    register_wire_class,
    wire_error_messages,
)
from dsh_tools._values._execution import ApprovalOutcome, check_progress_amount
from dsh_tools._values._json import JsonValue, snapshot_json

__all__ = [
    "ApprovalAskedEvent",
    "ApprovalDecidedEvent",
    "ApprovalPolicy",
    "ApprovalPolicyEvent",
    "ApprovalRevokedEvent",
    "BatchEndEvent",
    "BatchEndReason",
    "BatchStartEvent",
    "ContextMessageEvent",
    "JsonlSessionLog",
    "MemorySessionLog",
    "SessionEvent",
    "SessionLog",
    "ToolCallEvent",
    "ToolProgressEvent",
    "ToolResultEvent",
    "TurnEndEvent",
    "TurnStartEvent",
    "check_approval_policy",
    "check_event",
    "check_session_id",
    "events_from_rows",
    "encode_event_line",
    "json_problem",
    "read_session_log",
    "session_event_from_json",
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


def events_from_rows(rows: Iterable[tuple[object, ...]], name: str) -> list[SessionEvent]:
    """The events of a database log's rows ``(seq, JSONL line)``, read in ``seq`` order
    (internal: the SQLite and PostgreSQL logs).

    Raises:
        SessionLogCorruptError: a gap in the sequence numbers, or a row that is not text, not
            JSON or not a session event (``name`` and the 1-based row number say where).
    """
    events: list[SessionEvent] = []
    for number, (seq, text) in enumerate(rows, start=1):
        if seq != number - 1:
            raise SessionLogCorruptError(name, number, f"sequence number {seq}, not {number - 1}")
        if not isinstance(text, str):
            raise SessionLogCorruptError(name, number, "not text")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise SessionLogCorruptError(name, number, f"not JSON ({json_problem(exc)})") from exc
        events.append(_event_at(data, name, number))
    return events


def _event_at(data: object, name: str, number: int) -> SessionEvent:
    """The event a log's line or row ``number`` holds (``data``: its JSON)."""
    try:
        return session_event_from_json(data)
    except (ValueError, RecursionError) as exc:
        raise SessionLogCorruptError(
            name, number, f"not a session event ({json_problem(exc)})"
        ) from exc


def check_session_id(session_id: object) -> str:
    """``session_id`` if it names a session in a log that keys rows by it: a non-empty ``str``
    of Unicode text (no lone surrogate).

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, or it holds a lone surrogate.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a non-empty str, not {session_id!r}")
    if not session_id:
        raise ValueError("session_id must be a non-empty str, not ''")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"session_id must be Unicode text, not {session_id!r} (a lone surrogate)"
        ) from None
    return session_id


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


@attrs.frozen(kw_only=True)
class ToolProgressEvent:
    """A running body reported progress (wire ``tool/progress``), between its call's
    ``tool/call`` and ``tool/result``. Never shown to the model.

    ``progress`` / ``total`` are amounts in the body's own unit (``total`` ``None``: unknown);
    ``output`` is a chunk of terminal output, the chunks of reports coalesced into this event
    joined in order.
    """

    turn: int = attrs.field(validator=_count)
    step: int = attrs.field(validator=_count)
    call_id: str = attrs.field(validator=_text)
    message: str | None = attrs.field(default=None, validator=_optional_text)
    progress: float | None = attrs.field(default=None, validator=_optional_amount)
    total: float | None = attrs.field(default=None, validator=_optional_amount)
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


SessionEvent: TypeAlias = (
    ToolCallEvent
    | ToolProgressEvent
    | ToolResultEvent
    | ContextMessageEvent
    | BatchStartEvent
    | BatchEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | ApprovalAskedEvent
    | ApprovalDecidedEvent
    | ApprovalPolicyEvent
    | ApprovalRevokedEvent
)
"""Every event the library appends: the scheduler's (a batch's bounds, its calls, results and
contexts), a turn's bounds, approval audit events."""


@runtime_checkable
class SessionLog(Protocol):
    """Where the scheduler records a batch. Both methods are synchronous (see the module
    docs for why).
    """

    def append(self, event: SessionEvent, /) -> int:
        """Store ``event`` durably and return its sequence number (0-based, append order)."""
        ...

    def events(self) -> list[SessionEvent]:
        """Every stored event, in append order (a fresh list)."""
        ...


# --- wire shape ---------------------------------------------------------------------------


def _structure_batch_end_reason(value: object, _tp: object) -> str:
    # BatchEndEvent's validator names the allowed reasons; cattrs' Literal hook would not
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


converter.register_structure_hook_func(
    lambda tp: tp == BatchEndReason,
    _structure_batch_end_reason,
)


# a batch's calls on the wire: {"callId", "name", "arguments"}, registered before the event
# that holds them (a class's hooks capture its fields' hooks)
register_wire_class(ToolCallRequest)

register_wire_class(
    ToolCallEvent,
    tag_key="type",
    tag="tool/call",
    union=SessionEvent,
    union_name="SessionEvent",
    omit=("attempt",),
)
for _cls, _tag in (
    (ToolProgressEvent, "tool/progress"),
    (ToolResultEvent, "tool/result"),
    (ContextMessageEvent, "context/message"),
    (BatchStartEvent, "batch/start"),
    (BatchEndEvent, "batch/end"),
):
    register_wire_class(
        _cls, tag_key="type", tag=_tag, union=SessionEvent, union_name="SessionEvent"
    )
del _cls, _tag

for _cls, _tag in (
    (TurnStartEvent, "turn/start"),
    (TurnEndEvent, "turn/end"),
    (ApprovalAskedEvent, "approval/asked"),
    (ApprovalDecidedEvent, "approval/decided"),
    (ApprovalPolicyEvent, "approval/policy"),
    (ApprovalRevokedEvent, "approval/revoked"),
):
    register_wire_class(
        _cls, tag_key="type", tag=_tag, union=SessionEvent, union_name="SessionEvent"
    )
del _cls, _tag


def _unstructure_turn_end(event: TurnEndEvent) -> dict[str, Any]:
    # the original nests the reason: {"type": "turn/end", "turn": 1, "reason": {"kind": ...}}
    return {"type": "turn/end", "turn": event.turn, "reason": {"kind": event.kind}}


def _structure_turn_end(value: object, _tp: object) -> TurnEndEvent:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object (TurnEndEvent), got {type(value).__name__}")
    data = cast("dict[str, object]", value)
    if data.get("type") != "turn/end":
        raise ValueError(f'expected type "turn/end" for TurnEndEvent, got {data.get("type")!r}')
    extra = sorted(set(data) - {"type", "turn", "reason"})
    if extra:
        raise ValueError(f"TurnEndEvent has unknown keys: {', '.join(extra)}")
    reason = data.get("reason")
    if not isinstance(reason, dict) or set(cast("dict[str, object]", reason)) != {"kind"}:
        raise ValueError('TurnEndEvent "reason" must be an object with exactly a "kind"')
    kind = cast("dict[str, object]", reason)["kind"]
    turn = data.get("turn")
    if type(turn) is not int or type(kind) is not str:
        raise TypeError('TurnEndEvent needs an integer "turn" and a string reason "kind"')
    return TurnEndEvent(turn=turn, kind=kind)


converter.register_unstructure_hook(TurnEndEvent, _unstructure_turn_end)
converter.register_structure_hook(TurnEndEvent, _structure_turn_end)


def event_to_wire(event: SessionEvent) -> dict[str, Any]:
    """The wire JSON of ``event`` (what :data:`~dsh_tools.converter` gives)."""
    wire: dict[str, Any] = converter.unstructure(event)
    return wire


def session_event_from_json(data: object) -> SessionEvent:
    """Read one session event from its wire JSON (a ``dict`` as ``json.loads`` gives it).

    Strict, like :data:`~dsh_tools.converter`: an unknown ``type`` tag or key, a missing key or
    a value of the wrong JSON type is an error, never guessed at.

    Raises:
        ValueError: ``data`` is not the wire shape of an event; the message lists every
            problem with its path in wire names (``required field missing @ $.callId``).
    """
    try:
        # cattrs cannot type a union alias as a target: the cast stays here, not at callers
        event: object = converter.structure(data, SessionEvent)  # pyright: ignore[reportArgumentType, reportUnknownVariableType]
    except (ValueError, TypeError) as exc:
        raise ValueError(_describe_error(exc)) from exc
    except cattrs.BaseValidationError as exc:
        raise ValueError("; ".join(wire_error_messages(exc))) from exc
    return cast("SessionEvent", event)


def _describe_error(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


# --- logs ---------------------------------------------------------------------------------

_EVENT_CLASSES: Final = frozenset(
    (
        ToolCallEvent,
        ToolProgressEvent,
        ToolResultEvent,
        ContextMessageEvent,
        BatchStartEvent,
        BatchEndEvent,
        TurnStartEvent,
        TurnEndEvent,
        ApprovalAskedEvent,
        ApprovalDecidedEvent,
        ApprovalPolicyEvent,
        ApprovalRevokedEvent,
    )
)


def check_event(event: object) -> None:
    """Raise ``TypeError`` unless ``event`` is one of the library's session events."""
    if type(event) not in _EVENT_CLASSES:
        raise TypeError(f"event must be a session event, not {type(event).__name__}")


@attrs.define(eq=False)
class MemorySessionLog:
    """A :class:`SessionLog` in memory (tests, demos, short-lived agents)."""

    _events: list[SessionEvent] = attrs.field(factory=lambda: list[SessionEvent](), init=False)

    def append(self, event: SessionEvent, /) -> int:
        """Store ``event``; return its sequence number.

        Raises:
            TypeError: ``event`` is not a session event.
        """
        check_event(event)
        self._events.append(event)
        return len(self._events) - 1

    def events(self) -> list[SessionEvent]:
        """A fresh list of every stored event, in append order."""
        return list(self._events)


class JsonlSessionLog:
    r"""A :class:`SessionLog` in an append-only JSON Lines file: one event per line.

    Args:
        path: the file. It is opened (and created if missing) here, so a bad path fails here;
            an existing file is continued (its events keep their sequence numbers, new ones
            follow).
        fsync: also ``os.fsync`` after every event, so an appended event survives a power
            loss, not just a crash of this process. Every event reaches the operating system
            before ``append`` returns either way.

    Raises:
        TypeError: ``fsync`` is not a ``bool``.
        SessionLogLockedError: another writer holds the file.
        SessionLogCorruptError: the existing file holds a line that is not an event.
        OSError: the file cannot be opened or created.

    One writer per file. The log keeps the file open and holds an exclusive advisory lock on it
    (``fcntl.flock``, so POSIX systems: Linux, macOS, the BSDs) until :meth:`close`; it is also
    a context manager. A second ``JsonlSessionLog`` on the same file, in this process or
    another, gets :class:`SessionLogLockedError`. Readers use :func:`read_session_log`, which
    takes no lock and never writes. A log garbage-collected while open is closed with a
    ``ResourceWarning``, as a file is. Not available where ``fcntl`` is not (Windows):
    constructing one raises ``NotImplementedError`` there.

    Durability rules. Each event is written as one line with a single unbuffered ``write``
    before ``append`` returns, so an event whose ``append`` returned is never lost by a crash
    of the process. A crash in the middle of a write leaves a torn last line (no newline, not
    parseable): reading tolerates it, and the next writer, holding the lock, cuts it off first
    so the next event starts on a fresh line. A last line that parses as an event but lost only
    its newline is a complete event and is kept. A last line without newline that is JSON but
    not an event cannot be a torn write (no proper prefix of an event's JSON object is JSON),
    so it is corruption, like any other line that is not an event: reading raises
    :class:`SessionLogCorruptError` with its line number, never skipping it silently. An
    ``append`` whose write fails partway (a full disk, a file-size limit) cuts the file back to
    its last complete event before it raises, or refuses further appends until the log is
    reopened when it cannot (:meth:`append` says which in its error).

    Text. Every Python ``str`` is written losslessly: text is UTF-8, and a lone surrogate
    (from ``surrogateescape``, or model text) is written as its JSON ``\udXXX`` escape, which
    reads back as the same string. The one exception JSON itself imposes: a high surrogate
    directly followed by a low one is, in JSON, the escape of the character they spell, and
    reads back as that character.
    """

    __slots__ = ("_broken", "_closed", "_end", "_file", "_fsync", "_next_seq", "_path")

    _path: Path
    _fsync: bool
    _next_seq: int
    _end: int
    _broken: bool
    _file: io.FileIO | None
    _closed: bool

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self._closed = True  # until the file is open and locked (so __del__ has nothing to do)
        self._file = None
        if type(fsync) is not bool:
            raise TypeError(f"fsync must be a bool, not {fsync!r}")
        self._path = Path(path)
        self._fsync = fsync
        created = not self._path.exists()
        file = io.FileIO(self._path, "a+")
        try:
            _lock(file, self._path)
            raw = _read_all(file)
            events, good_end, needs_newline = _parse_log(raw, str(self._path))
            if good_end is not None:
                # a torn tail from an earlier crash: cut it off so the next event starts clean
                file.truncate(good_end)
            elif needs_newline:
                _write_all(file, b"\n")
            if fsync:
                os.fsync(file.fileno())
                if created:
                    _fsync_directory(self._path.parent)  # makes the new file's name durable
            end = os.fstat(file.fileno()).st_size
        except BaseException:
            file.close()
            raise
        self._next_seq = len(events)
        self._end = end
        self._broken = False
        self._file = file
        self._closed = False

    @property
    def path(self) -> Path:
        """The file this log appends to."""
        return self._path

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (no more appends; the lock is released)."""
        return self._closed

    def append(self, event: SessionEvent, /) -> int:
        """Write ``event`` as one line (and ``fsync`` it when configured) and return its
        sequence number. Blocks the calling thread for the write.

        A write that fails (a full disk, a file-size limit, an I/O error) may have written part
        of the line. The log then cuts the file back to the end of its last complete event
        before ``append`` raises, so the next event starts on a clean line and no reader ever
        meets the partial one: the failed event is not appended, every acknowledged one stays
        readable, and the log accepts further appends. If the cut itself fails, the log refuses
        every further append until it is reopened (reopening cuts the partial line, which reads
        as a torn last line until then). The ``OSError`` raised keeps the write's ``errno`` and
        its message ends with which of the two happened: ``... the log was cut back to its last
        complete event and accepts appends`` or ``... the log refuses appends until it is
        reopened``.

        Raises:
            TypeError: ``event`` is not a session event.
            ValueError: the log is closed, or refuses appends after a failed one it could not
                cut back.
            OSError: writing (or ``fsync``) failed; the event was not appended (see above).
        """
        check_event(event)
        file = self._file
        if file is None:
            raise ValueError(f"append to a closed JsonlSessionLog ({self._path})")
        if self._broken:
            raise ValueError(
                f"append to a JsonlSessionLog whose failed append left a partial line it could "
                f"not cut off ({self._path}); reopen the log, which cuts it"
            )
        line = encode_event_line(event)
        end = self._end
        try:
            _write_all(file, line)
            if self._fsync:
                os.fsync(file.fileno())
        except OSError as exc:
            raise self._cut_back(file, end, exc) from exc
        except BaseException:
            self._cut_back(file, end, None)
            raise
        self._end = end + len(line)
        seq = self._next_seq
        self._next_seq = seq + 1
        return seq

    def _cut_back(self, file: io.FileIO, end: int, exc: OSError | None) -> OSError:
        """Cut the file back to ``end`` after a failed append; the error to raise for ``exc``."""
        what = f"{self._path}: {exc.strerror or exc}" if exc is not None else str(self._path)
        try:
            os.ftruncate(file.fileno(), end)
        except OSError as cut:
            self._broken = True
            return OSError(
                exc.errno if exc is not None else cut.errno,
                f"{what}; the event was not appended and its partial line could not be cut off "
                f"({cut.strerror or cut}): the log refuses appends until it is reopened",
            )
        return OSError(
            exc.errno if exc is not None else None,
            f"{what}; the event was not appended: the log was cut back to its last complete "
            "event and accepts appends",
        )

    def events(self) -> list[SessionEvent]:
        """Read every event back, in order, tolerating a torn last line.

        Raises:
            SessionLogCorruptError: a line other than a torn last one is not an event.
            ValueError: the log is closed (use :func:`read_session_log`).
        """
        file = self._file
        if file is None:
            raise ValueError(f"events() of a closed JsonlSessionLog ({self._path})")
        return _parse_log(_read_all(file), str(self._path))[0]

    def close(self) -> None:
        """Close the file, which releases the lock. Closing twice does nothing."""
        file = self._file
        self._file = None
        self._closed = True
        if file is not None:
            file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not self._closed:
            warnings.warn(
                f"unclosed JsonlSessionLog {str(self._path)!r}", ResourceWarning, stacklevel=2
            )
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"next_seq={self._next_seq}"
        return f"<JsonlSessionLog {str(self._path)!r} {state}>"


def read_session_log(path: str | os.PathLike[str]) -> list[SessionEvent]:
    """Read every event of a JSON Lines session log, in order, without writing or locking.

    Safe while a :class:`JsonlSessionLog` in another process is appending: a torn last line
    (an event being written right now, or left by a crash) is skipped, never cut.

    Safe on any file: a line JSON cannot be read from within Python's limits (nested deeper
    than the recursion limit, a number longer than ``int`` converts) is no event, so it is
    reported as corruption like any other such line, or skipped as a torn last line.

    Raises:
        FileNotFoundError: there is no such file.
        SessionLogCorruptError: a line other than a torn last one is not an event.
    """
    raw = Path(path).read_bytes()
    return _parse_log(raw, str(path))[0]


def encode_event_line(event: SessionEvent) -> bytes:
    """One event's line as written to a JSON Lines log (UTF-8, newline-terminated)."""
    line = json.dumps(
        event_to_wire(event), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    try:
        data = line.encode("utf-8")
    except UnicodeEncodeError:
        # lone surrogates can only occur inside JSON strings: their \u escape is lossless
        data = _SURROGATE.sub(_escape_surrogate, line).encode("utf-8")
    return data + b"\n"


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


def _lock(file: io.FileIO, path: Path) -> None:
    if fcntl is None:  # pragma: no cover - Windows
        raise NotImplementedError("JsonlSessionLog needs fcntl.flock (a POSIX system)")
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLogLockedError(str(path)) from None


def _read_all(file: io.FileIO) -> bytes:
    size = os.fstat(file.fileno()).st_size
    chunks: list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(file.fileno(), size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(file: io.FileIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = file.write(view)
        if written is None:  # pragma: no cover - only for non-blocking files
            continue
        view = view[written:]


def _fsync_directory(directory: Path) -> None:
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform that cannot open directories (Windows): nothing to sync
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def json_problem(exc: ValueError | RecursionError) -> str:
    """Why ``json.loads`` or :func:`session_event_from_json` refused a line, for an error."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if str(exc).startswith("Exceeds the limit"):
        return f"a number longer than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def _parse_log(raw: bytes, name: str) -> tuple[list[SessionEvent], int | None, bool]:
    """Parse a log's bytes: (events, offset to truncate a torn tail at or None, whether the
    last complete event lacks its newline).
    """
    events: list[SessionEvent] = []
    start = 0
    number = 0
    size = len(raw)
    while start < size:
        number += 1
        end = raw.find(b"\n", start)
        last = end == -1
        chunk = raw[start:] if last else raw[start:end]
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            if last:  # a write torn inside a multi-byte character
                return events, start, False
            raise SessionLogCorruptError(name, number, "not UTF-8 text") from exc
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            # not JSON, or JSON no event can be: nested deeper than the recursion limit, or a
            # number longer than int() converts (ValueError). Last, it reads as a torn write: no
            # proper prefix of an event line is JSON, and no event holds either.
            if last:
                return events, start, False
            raise SessionLogCorruptError(name, number, f"not JSON ({json_problem(exc)})") from exc
        events.append(_event_at(data, name, number))
        if last:
            return events, None, True
        start = end + 1
    return events, None, False
