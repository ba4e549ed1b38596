"""The turn and approval session events on the wire: tags, camelCase keys, absent optionals
omitted, and a round trip through a JSON Lines log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_tools import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalOutcome,
    ApprovalPolicyEvent,
    JsonlSessionLog,
    SessionEvent,
    TurnEndEvent,
    TurnStartEvent,
    converter,
)
from dsh_tools._session import event_from_wire

WIRE: list[tuple[SessionEvent, dict[str, object]]] = [
    (TurnStartEvent(turn=1), {"type": "turn/start", "turn": 1}),
    (
        TurnStartEvent(turn=2, trigger={"kind": "user", "text": "hi"}),
        {"type": "turn/start", "turn": 2, "trigger": {"kind": "user", "text": "hi"}},
    ),
    (TurnEndEvent(turn=1), {"type": "turn/end", "turn": 1, "reason": {"kind": "completed"}}),
    (
        TurnEndEvent(turn=4, kind="aborted"),
        {"type": "turn/end", "turn": 4, "reason": {"kind": "aborted"}},
    ),
    (
        ApprovalAskedEvent(id="a1", tool_name="write"),
        {"type": "approval/asked", "id": "a1", "toolName": "write"},
    ),
    (
        ApprovalAskedEvent(id="a1", tool_name="write", call_id="c1", reason="writes"),
        {
            "type": "approval/asked",
            "id": "a1",
            "toolName": "write",
            "callId": "c1",
            "reason": "writes",
        },
    ),
    (
        ApprovalDecidedEvent(id="a1", outcome=ApprovalOutcome.ALLOWED_ONCE),
        {"type": "approval/decided", "id": "a1", "outcome": "allowed-once"},
    ),
    (ApprovalPolicyEvent(policy="never"), {"type": "approval/policy", "policy": "never"}),
]


@pytest.mark.parametrize(("event", "wire"), WIRE)
def test_the_event_has_the_originals_wire_shape(
    event: SessionEvent, wire: dict[str, object]
) -> None:
    assert wire == converter.unstructure(event, SessionEvent)
    assert event == event_from_wire(wire)


def _close(log: JsonlSessionLog) -> None:
    # logs gain close() (and a lock) on another branch; close when there is one
    close: object = getattr(log, "close", None)
    if callable(close):
        close()


def test_the_events_round_trip_through_a_jsonl_log(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    events = [event for event, _ in WIRE]
    log = JsonlSessionLog(path)
    try:
        seqs = [log.append(event) for event in events]
    finally:
        _close(log)

    reopened = JsonlSessionLog(path)
    try:
        assert events == reopened.events()
    finally:
        _close(reopened)
    assert list(range(len(events))) == seqs
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [wire for _, wire in WIRE] == [json.loads(line) for line in lines]


@pytest.mark.parametrize(
    "wire",
    [
        {"type": "turn/end", "turn": 1},
        {"type": "turn/end", "turn": 1, "reason": "completed"},
        {"type": "turn/end", "turn": 1, "reason": {"kind": "completed", "x": 1}},
        {"type": "turn/end", "turn": "1", "reason": {"kind": "completed"}},
        {"type": "turn/end", "turn": 1, "reason": {"kind": ""}},
        {"type": "turn/end", "turn": 1, "reason": {"kind": "completed"}, "extra": 0},
        {"type": "turn/start", "turn": -1},
        {"type": "approval/asked", "id": "a1"},
        {"type": "approval/asked", "id": "", "toolName": "w"},
        {"type": "approval/decided", "id": "a1", "outcome": "yolo"},
        {"type": "approval/policy", "policy": "always"},
        {"type": "approval/policy", "policy": "never", "by": "user"},
    ],
)
def test_a_malformed_event_is_a_value_error(wire: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        event_from_wire(wire)


def test_the_turn_end_reason_kind_is_named_in_the_error() -> None:
    with pytest.raises(
        ValueError, match='TurnEndEvent "reason" must be an object with exactly a "kind"'
    ):
        event_from_wire({"type": "turn/end", "turn": 1, "reason": {}})
