"""Durable session events: what the scheduler records about one batch of tool calls.

A batch appends, in this order, a ``tool/call`` event when a call starts, a ``tool/result``
event when it commits (its ``source_event_seqs`` point at the ``tool/call``), and after every
result of the batch one ``context/message`` event per context. A :class:`SessionLog` stores
them and numbers them from 0 in append order.

Appends are synchronous on purpose: the scheduler appends on its one lane, in model order,
and a synchronous ``append`` cannot interleave with another lane step or be cancelled halfway
(a half-appended event would be worse than a late one). :class:`JsonlSessionLog` therefore
blocks the trio thread for one small ``write`` + ``flush`` per event (plus an ``fsync`` when
asked for), as a logging handler would.

The wire shape is the original's: camelCase keys, a ``type`` tag (``tool/call``,
``tool/result``, ``context/message``), absent optionals omitted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, cast, runtime_checkable

import attrs
import cattrs

from ._content import ContentBlock, MessageSource
from ._converter import converter, register_wire_class
from ._errors import ToolErrorInfo
from ._execution import ApprovalOutcome
from ._json import JsonValue, snapshot_json

__all__ = [
    "ApprovalAskedEvent",
    "ApprovalDecidedEvent",
    "ApprovalPolicyEvent",
    "ContextMessageEvent",
    "JsonlSessionLog",
    "MemorySessionLog",
    "SessionEvent",
    "SessionLog",
    "SessionLogCorruptError",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]


def _snapshot_optional(value: object) -> JsonValue:
    return None if value is None else snapshot_json(value)


def _seqs(value: object) -> tuple[int, ...]:
    return tuple(value)  # type: ignore[arg-type]


@attrs.frozen(kw_only=True)
class ToolCallEvent:
    """A call started (wire ``tool/call``): the call exactly as the model emitted it.

    ``arguments`` is the raw JSON text, never the parsed value, so the log replays what the
    model said even when it was not valid JSON.
    """

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class ToolResultEvent:
    """A call committed (wire ``tool/result``): the final result the model receives.

    ``source_event_seqs`` holds the sequence number of the call's ``tool/call`` event.
    Contexts are not part of it: they follow as ``context/message`` events.
    """

    turn: int
    step: int
    call_id: str
    content: tuple[ContentBlock, ...] = attrs.field(converter=tuple)
    is_error: bool
    error: ToolErrorInfo | None = None
    meta: JsonValue = attrs.field(default=None, converter=_snapshot_optional)
    source_event_seqs: tuple[int, ...] = attrs.field(default=(), converter=_seqs)


@attrs.frozen(kw_only=True)
class ContextMessageEvent:
    """A context message for the model (wire ``context/message``), appended after every result
    of the batch it belongs to."""

    content: tuple[ContentBlock, ...] = attrs.field(converter=tuple)
    source: MessageSource
    meta: JsonValue = attrs.field(default=None, converter=_snapshot_optional)


# --- turns and approvals (appended by session_turn and UserApproval) ----------------------

_nonempty_str = attrs.validators.and_(
    attrs.validators.instance_of(str), attrs.validators.min_len(1)
)


def _turn_number(_instance: object, _attribute: object, value: int) -> None:
    if type(value) is not int or value < 0:
        raise ValueError(f"turn must be a non-negative int, not {value!r}")


@attrs.frozen(kw_only=True)
class TurnStartEvent:
    """A turn of the agent began (wire ``turn/start``).

    ``trigger`` is what started it, as opaque JSON (absent when not recorded).
    """

    turn: int = attrs.field(validator=_turn_number)
    trigger: JsonValue = attrs.field(default=None, converter=_snapshot_optional)


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


@attrs.frozen(kw_only=True)
class ApprovalDecidedEvent:
    """The approval service decided the request ``id`` (wire ``approval/decided``)."""

    id: str = attrs.field(validator=_nonempty_str)
    outcome: ApprovalOutcome = attrs.field(converter=ApprovalOutcome)


def _check_policy(_instance: object, _attribute: object, value: object) -> None:
    if value not in ("ask", "never") or type(value) is not str:
        raise ValueError('approval policy must be one of "ask" or "never"')


@attrs.frozen(kw_only=True)
class ApprovalPolicyEvent:
    """The approval policy changed (wire ``approval/policy``); the last one logged is in effect."""

    policy: Literal["ask", "never"] = attrs.field(validator=_check_policy)


SessionEvent: TypeAlias = (
    ToolCallEvent
    | ToolResultEvent
    | ContextMessageEvent
    | TurnStartEvent
    | TurnEndEvent
    | ApprovalAskedEvent
    | ApprovalDecidedEvent
    | ApprovalPolicyEvent
)
"""Every event the library appends: the scheduler's, a turn's bounds, approval audit events."""


@runtime_checkable
class SessionLog(Protocol):
    """Where the scheduler records a batch. Both methods are synchronous (see the module
    docs for why)."""

    def append(self, event: SessionEvent, /) -> int:
        """Store ``event`` durably and return its sequence number (0-based, append order)."""
        ...

    def events(self) -> list[SessionEvent]:
        """Every stored event, in append order (a fresh list)."""
        ...


class SessionLogCorruptError(ValueError):
    """A session log holds a line that is not an event (other than a torn last line).

    ``path`` and ``line`` (1-based) name it; the message says what is wrong.
    """

    path: str
    line: int

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}, line {line}: {reason}")
        self.path = path
        self.line = line


# --- wire shape ---------------------------------------------------------------------------

for _cls, _tag in (
    (ToolCallEvent, "tool/call"),
    (ToolResultEvent, "tool/result"),
    (ContextMessageEvent, "context/message"),
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


def event_from_wire(data: object) -> SessionEvent:
    """Read one event back from its wire JSON.

    Raises:
        ValueError: ``data`` is not the wire shape of an event; the message lists every
            problem with its path.
    """
    try:
        event: object = converter.structure(data, SessionEvent)  # pyright: ignore[reportArgumentType, reportUnknownVariableType]
    except (ValueError, TypeError) as exc:
        raise ValueError(_describe_error(exc)) from exc
    except cattrs.BaseValidationError as exc:
        raise ValueError("; ".join(cattrs.transform_error(exc))) from exc
    return cast("SessionEvent", event)


def _describe_error(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


# --- logs ---------------------------------------------------------------------------------


@attrs.define(eq=False)
class MemorySessionLog:
    """A :class:`SessionLog` in memory (tests, demos, short-lived agents)."""

    _events: list[SessionEvent] = attrs.field(factory=lambda: list[SessionEvent](), init=False)

    def append(self, event: SessionEvent, /) -> int:
        """Store ``event``; return its sequence number."""
        self._events.append(event)
        return len(self._events) - 1

    def events(self) -> list[SessionEvent]:
        """A fresh list of every stored event, in append order."""
        return list(self._events)


class JsonlSessionLog:
    """A :class:`SessionLog` in an append-only JSON Lines file: one event per line.

    Args:
        path: the file. It is created on the first append; an existing file is continued
            (its events keep their sequence numbers, new ones follow).
        fsync: also ``os.fsync`` after every event, so an appended event survives a power
            loss, not just a crash of this process. Every event is flushed to the operating
            system either way.

    Durability rules. Each event is written as one line with a single ``write`` and flushed
    before ``append`` returns, so an event whose ``append`` returned is never lost by a crash
    of the process. A crash in the middle of a write leaves a torn last line (no newline, not
    parseable): reading tolerates it, and opening the file for more appends cuts it off
    first, so the next event starts on a fresh line. A last line that parses but lost only
    its newline is a complete event and is kept. Any other line that is not an event is
    corruption, reported as :class:`SessionLogCorruptError` with its line number, never
    skipped silently.

    One writer at a time: the log keeps its sequence counter in memory.
    """

    __slots__ = ("_fsync", "_needs_newline", "_next_seq", "_path")

    _path: Path
    _fsync: bool
    _next_seq: int
    _needs_newline: bool

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self._path = Path(path)
        self._fsync = fsync
        events, good_end, needs_newline = _read_log(self._path)
        self._next_seq = len(events)
        self._needs_newline = needs_newline
        if good_end is not None:
            # a torn tail from an earlier crash: cut it off so the next event starts clean
            with self._path.open("r+b") as file:
                file.truncate(good_end)

    @property
    def path(self) -> Path:
        """The file this log appends to."""
        return self._path

    def append(self, event: SessionEvent, /) -> int:
        """Write ``event`` as one line, flush it (and ``fsync`` when configured), and return
        its sequence number. Blocks the calling thread for the write."""
        line = json.dumps(
            event_to_wire(event), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
        data = (line + "\n").encode("utf-8")
        if self._needs_newline:
            data = b"\n" + data
        created = self._fsync and not self._path.exists()
        with self._path.open("ab") as file:
            file.write(data)
            file.flush()
            if self._fsync:
                os.fsync(file.fileno())
        if created:
            _fsync_directory(self._path.parent)  # makes the new file's name durable too
        self._needs_newline = False
        seq = self._next_seq
        self._next_seq = seq + 1
        return seq

    def events(self) -> list[SessionEvent]:
        """Read every event back, in order, tolerating a torn last line.

        Raises:
            SessionLogCorruptError: a line other than a torn last one is not an event.
        """
        return _read_log(self._path)[0]

    def __repr__(self) -> str:
        return f"<JsonlSessionLog {str(self._path)!r} next_seq={self._next_seq}>"


def _fsync_directory(directory: Path) -> None:
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform that cannot open directories (Windows): nothing to sync
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _read_log(path: Path) -> tuple[list[SessionEvent], int | None, bool]:
    """Parse the file: (events, offset to truncate a torn tail at or None, whether the last
    complete event lacks its newline)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], None, False
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
            data = json.loads(chunk.decode("utf-8"))
            event = event_from_wire(data)
        except ValueError as exc:
            if last:
                return events, start, False
            raise SessionLogCorruptError(str(path), number, _reason(exc)) from exc
        events.append(event)
        if last:
            return events, None, True
        start = end + 1
    return events, None, False


def _reason(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg})"
    return f"not a session event ({exc})"
