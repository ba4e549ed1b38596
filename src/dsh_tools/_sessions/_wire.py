"""The wire format of session events, and the one place where stored text becomes events.

The wire shape is the original's: camelCase keys, a ``type`` tag (``tool/call``,
``tool/result``, ``context/message``, ``batch/start``, ``batch/end``, ...), absent optionals
omitted; a log stores each event as one line of it (:func:`encode_event_line`). Reading back,
a line or row that is not text, not JSON or not an event is a :class:`SessionLogCorruptError`
naming where it is (:func:`event_at`, :func:`events_from_rows`, :func:`parse_lines`), here
and nowhere else.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sys
from collections.abc import Iterable
from typing import Any, Final, cast

import cattrs

from dsh_tools._errors import SessionLogCorruptError, SessionLogIntegrityError
from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._converter import (
    converter,
    register_wire_class,
    wire_error_messages,
)

from ._events import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalPolicyEvent,
    ApprovalRevokedEvent,
    BatchCallEvent,
    BatchEndEvent,
    BatchEndReason,
    BatchStartEvent,
    ContextMessageEvent,
    MessageEvent,
    SessionEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)

__all__ = [
    "encode_event_line",
    "event_at",
    "event_to_wire",
    "events_from_rows",
    "json_problem",
    "parse_lines",
    "readable_line",
    "MacChain",
    "event_line",
    "session_event_from_json",
]


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
    (BatchCallEvent, "batch/call"),
    (BatchEndEvent, "batch/end"),
    (TurnStartEvent, "turn/start"),
    (TurnEndEvent, "turn/end"),
    (ApprovalAskedEvent, "approval/asked"),
    (ApprovalDecidedEvent, "approval/decided"),
    (ApprovalPolicyEvent, "approval/policy"),
    (ApprovalRevokedEvent, "approval/revoked"),
    (MessageEvent, "message"),
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


def event_line(event: SessionEvent) -> bytes:
    """One event's line as a log stores it: its wire JSON, compact, UTF-8, no newline."""
    line = json.dumps(
        event_to_wire(event), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        # lone surrogates can only occur inside JSON strings: their \u escape is lossless
        return _SURROGATE.sub(_escape_surrogate, line).encode("utf-8")


def encode_event_line(event: SessionEvent) -> bytes:
    """One event's line as written to a JSON Lines log (UTF-8, newline-terminated)."""
    return event_line(event) + b"\n"


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


# --- the chain of a keyed log ---------------------------------------------------------------

# what sealing adds to an event's line: its MAC as the line's last key
_MAC_HEAD: Final = b',"mac":"'
_MAC_TAIL: Final = b'"}'
_SEALED_EXTRA: Final = len(_MAC_HEAD) + 64 + len(_MAC_TAIL)


class MacChain:
    """The HMAC chain of a log kept with an ``integrity_key`` (internal).

    Event ``n`` is stored as its line with ``"mac"`` added as the last key:
    ``HMAC-SHA256(key, mac(n-1) + line)`` in hex, where ``line`` is the event's own line
    (UTF-8, no newline) and ``mac(-1)`` is empty. The MAC is checked against the stored line
    itself (its bytes up to the ``"mac"`` key), so nothing is serialized twice, and any change
    of a byte, a removal, a reordering or an insertion breaks the chain at that event.
    """

    __slots__ = ("key", "mac")

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.mac = b""  # the last event's MAC (none yet)

    def seal(self, line: bytes) -> tuple[bytes, bytes]:
        """``line`` with its MAC added, and the MAC (the chain moves on only once the sealed
        line is stored: the caller sets :attr:`mac`).
        """
        mac = hmac.new(self.key, self.mac + line, hashlib.sha256).digest()
        return line[:-1] + _MAC_HEAD + mac.hex().encode("ascii") + _MAC_TAIL, mac

    def open(self, sealed: bytes, name: str, seq: int) -> bytes:
        """The event line ``sealed`` carries, once its MAC is the chain's next; moves on.

        Raises:
            SessionLogIntegrityError: no MAC, or not the one the key and the chain give.
        """
        line = _unsealed(sealed)
        if line is None:
            raise SessionLogIntegrityError(name, seq, "the event carries no MAC")
        expected = hmac.new(self.key, self.mac + line, hashlib.sha256).digest()
        if not hmac.compare_digest(expected.hex().encode("ascii"), sealed[-66:-2]):
            raise SessionLogIntegrityError(
                name,
                seq,
                "its MAC does not match (the event, or one before it, was changed, removed, "
                "reordered or forged, or the key is not the log's)",
            )
        self.mac = expected
        return line


_HEX: Final = re.compile(rb"[0-9a-f]{64}")


def _unsealed(sealed: bytes) -> bytes | None:
    """The line inside ``sealed`` (its ``"mac"`` key taken off), or ``None`` when it has none."""
    if len(sealed) <= _SEALED_EXTRA or not sealed.endswith(_MAC_TAIL):
        return None
    at = len(sealed) - _SEALED_EXTRA
    if sealed[at : at + len(_MAC_HEAD)] != _MAC_HEAD:
        return None
    if _HEX.fullmatch(sealed, at + len(_MAC_HEAD), len(sealed) - len(_MAC_TAIL)) is None:
        return None
    return sealed[:at] + b"}"


_SEAL: Final = re.compile(rb',"mac":"[0-9a-f]{64}"\}')


def _sealed_then_more(chunk: bytes) -> bool:
    """Whether ``chunk`` holds the end of a sealed line with bytes after it (what no torn
    write of a keyed log leaves).
    """
    found = _SEAL.search(chunk)
    return found is not None and found.end() < len(chunk)


def readable_line(line: bytes, chain: MacChain | None, name: str, seq: int) -> bytes:
    """The event line to parse of a stored ``line``: verified and unsealed with ``chain``;
    without one, a sealed line is read with its MAC taken off, unchecked (a keyed log can be
    read without its key, and then nothing is verified).
    """
    if chain is not None:
        return chain.open(line, name, seq)
    unsealed = _unsealed(line) if line.endswith(_MAC_TAIL) else None
    return line if unsealed is None else unsealed


def events_from_rows(
    rows: Iterable[tuple[object, ...]],
    name: str,
    chain: MacChain | None = None,
    first: int = 0,
) -> list[SessionEvent]:
    """The events of a database log's rows ``(seq, JSONL line)``, read in ``seq`` order
    from sequence number ``first`` (internal: the SQLite and PostgreSQL logs). A line may
    come as the ``bytes`` it is stored as (decoded here, strictly: the error never quotes
    them). With ``chain`` (a keyed log, read from the start), every row is verified in order;
    :attr:`MacChain.mac` is then the last row's.

    Raises:
        SessionLogCorruptError: a gap in the sequence numbers, or a row that is not text, not
            JSON or not a session event (``name`` and the 1-based row number say where).
        SessionLogIntegrityError: with ``chain``, a gap or a row the chain does not vouch for.
    """
    events: list[SessionEvent] = []
    for number, (seq, text) in enumerate(rows, start=first + 1):
        if seq != number - 1:
            if chain is not None:
                raise SessionLogIntegrityError(
                    name, number - 1, f"the event is missing (the next stored is {seq})"
                )
            raise SessionLogCorruptError(name, number, f"sequence number {seq}, not {number - 1}")
        if isinstance(text, str):
            raw = text.encode("utf-8", "surrogatepass")
        elif isinstance(text, bytes):  # a row's text as stored: UTF-8, or corruption
            raw = text
            try:
                text.decode("utf-8")
            except UnicodeDecodeError:
                raise SessionLogCorruptError(name, number, "not UTF-8 text") from None
        else:
            raise SessionLogCorruptError(name, number, "not text")
        line = readable_line(raw, chain, name, number - 1)
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise SessionLogCorruptError(name, number, f"not JSON ({json_problem(exc)})") from exc
        events.append(event_at(data, name, number))
    return events


def event_at(data: object, name: str, number: int) -> SessionEvent:
    """The event a log's line or row ``number`` holds (``data``: its JSON)."""
    try:
        return session_event_from_json(data)
    except (ValueError, RecursionError) as exc:
        raise SessionLogCorruptError(
            name, number, f"not a session event ({json_problem(exc)})"
        ) from exc


def json_problem(exc: ValueError | RecursionError) -> str:
    """Why ``json.loads`` or :func:`session_event_from_json` refused a line, for an error."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if str(exc).startswith("Exceeds the limit"):
        return f"a number longer than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def parse_lines(
    raw: bytes, name: str, chain: MacChain | None = None
) -> tuple[list[SessionEvent], int | None, bool]:
    """Parse a log's bytes: (events, offset to truncate a torn tail at or None, whether the
    last complete event lacks its newline). With ``chain`` (a keyed log), every complete line
    is verified in order (a torn last line is a crash's, not tampering: no proper prefix of an
    event's line is JSON, so it is told apart before its MAC is looked at).

    Raises:
        SessionLogCorruptError: a line other than a torn last one is not an event.
        SessionLogIntegrityError: with ``chain``, a complete line the chain does not vouch for.
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
        if chain is not None and not last:
            # a complete line of a keyed log: the chain first, so that any change is tampering
            chunk = chain.open(chunk, name, number - 1)
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
                if chain is not None and _sealed_then_more(chunk):
                    # a write torn partway never holds a whole sealed line and more: something
                    # was written after an event's end (its newline changed, say)
                    raise SessionLogIntegrityError(
                        name, number - 1, "bytes follow the end of its sealed line"
                    ) from exc
                return events, start, False
            raise SessionLogCorruptError(name, number, f"not JSON ({json_problem(exc)})") from exc
        if (last and chain is not None) or (chain is None and chunk.endswith(_MAC_TAIL)):
            # the last line is whole (it is JSON): now its MAC; unkeyed, a sealed line is read
            # without its MAC
            line = readable_line(chunk, chain, name, number - 1)
            if line is not chunk:
                data = json.loads(line)
        events.append(event_at(data, name, number))
        if last:
            return events, None, True
        start = end + 1
    return events, None, False
