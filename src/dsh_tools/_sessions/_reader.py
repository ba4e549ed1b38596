"""One reader of a session log: every question the library asks of a log's events is answered
here, the same way for every caller (resume and recovery, the Temporal runner and worker,
approval, the scheduler).

**The bracket rule.** A batch owns the events from its ``batch/start`` to its last
``batch/end`` (to the end of the log while it has none, while that last one says
``"suspended"``, or while it says ``"aborted"`` or ``"failed"`` and a call of the batch has no
``tool/result``: a resume continues it). Inside that range, a batch started later (by one of
the batch's tool bodies, or by another task on the same log) owns, until its own last
``batch/end``, its ``batch/start`` and ``batch/end``, the ``tool/call`` and ``tool/result``
events of the calls it lists, and the ``context/message`` events (a batch appends its contexts
right before its ``batch/end``). A call event whose call id several open batches list belongs to
the most recent of them. A streamed batch's calls are its ``batch/start``'s and then its
``batch/call`` events' (each names its batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from dsh_tools._values._batch import ToolCallRequest

from ._events import (
    ApprovalAskedEvent,
    ApprovalPolicy,
    ApprovalPolicyEvent,
    BatchCallEvent,
    BatchEndEvent,
    BatchStartEvent,
    ContextMessageEvent,
    SessionEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._grants import grants_in, pending_requests

__all__ = ["BatchRecord", "SessionReader"]


@attrs.frozen
class BatchRecord:
    """What a log holds of one batch, by the bracket rule.

    Attributes:
        start: its ``batch/start``.
        begin: the sequence number of its ``batch/start``.
        events: the events it owns after its ``batch/start``, with their sequence numbers, in
            log order (its own ``batch/end`` events included).
        end: its last ``batch/end`` (``None``: it has none).
    """

    start: BatchStartEvent
    begin: int
    events: tuple[tuple[int, SessionEvent], ...]
    end: BatchEndEvent | None

    @property
    def calls(self) -> tuple[ToolCallRequest, ...]:
        """The batch's calls in model order: its ``batch/start``'s, then one per ``batch/call``
        (a streamed batch's calls that arrived after it started).
        """
        arrived = tuple(event.call for _, event in self.events if isinstance(event, BatchCallEvent))
        return self.start.calls + arrived if arrived else self.start.calls

    @property
    def is_open(self) -> bool:
        """Whether the batch is not finished: no ``batch/end``, the last one ``"suspended"``,
        or an ``"aborted"`` / ``"failed"`` one while a call of the batch has no
        ``tool/result`` (an interrupt, Ctrl-C or a failure stopped it before those calls
        started: a resume finishes it as it finishes a killed one).
        """
        end = self.end
        if end is None or end.reason == "suspended":
            return True
        if end.reason == "completed":
            return False
        answered = {event.call_id for _, event in self.events if isinstance(event, ToolResultEvent)}
        return any(call.call_id not in answered for call in self.calls)


class SessionReader:
    """The answers a session log's events give (``events``: the log's, in order; read once).

    Not a checkpoint, and never writes: build one from ``log.events()`` where a question is
    asked, as every caller does.
    """

    __slots__ = ("_events", "_last_end")

    def __init__(self, events: Sequence[SessionEvent]) -> None:
        self._events = events
        # the index of each batch's last batch/end
        self._last_end: dict[str, int] = {}
        for index, event in enumerate(events):
            if isinstance(event, BatchEndEvent):
                self._last_end[event.batch_id] = index

    # --- batches ---------------------------------------------------------------------------

    def open_batch(self) -> BatchRecord | None:
        """The session's last open batch (its ``batch/end`` missing, or its last one
        ``"suspended"``), or ``None`` when every batch has ended.
        """
        events = self._events
        for index in range(len(events) - 1, -1, -1):
            event = events[index]
            if isinstance(event, BatchStartEvent):
                record = self._record(index)
                if record.is_open:
                    return record
        return None

    def last_batch(self) -> BatchRecord | None:
        """The batch the log started last, ended or not; ``None`` without any."""
        events = self._events
        for index in range(len(events) - 1, -1, -1):
            if isinstance(events[index], BatchStartEvent):
                return self._record(index)
        return None

    def batch(self, batch_id: str) -> BatchRecord | None:
        """The batch ``batch_id`` (its last ``batch/start``), or ``None``."""
        events = self._events
        for index in range(len(events) - 1, -1, -1):
            event = events[index]
            if isinstance(event, BatchStartEvent) and event.batch_id == batch_id:
                return self._record(index)
        return None

    def _record(self, begin: int) -> BatchRecord:
        """The batch whose ``batch/start`` is at ``begin``, by the bracket rule."""
        events = self._events
        start = events[begin]
        assert isinstance(start, BatchStartEvent)
        last = self._last_end.get(start.batch_id)
        end = None if last is None or last < begin else events[last]
        assert end is None or isinstance(end, BatchEndEvent)
        if end is None or end.reason == "suspended":
            return self._owned(start, begin, len(events) - 1, end)
        assert last is not None
        record = self._owned(start, begin, last, end)
        if record.is_open:
            # interrupted before some of its calls started: a resume continues it, so it owns
            # what follows, as a suspended batch does
            return self._owned(start, begin, len(events) - 1, end)
        return record

    def _owned(
        self, start: BatchStartEvent, begin: int, stop: int, end: BatchEndEvent | None
    ) -> BatchRecord:
        """The events ``start``'s batch owns up to ``stop``, by the bracket rule."""
        events = self._events
        # the batches started inside this one's range and still open at a given point: the
        # index of their last batch/end, and their call ids (most recent last)
        others: list[tuple[str, int, set[str]]] = []
        owned: list[tuple[int, SessionEvent]] = []
        for seq in range(begin + 1, stop + 1):
            event = events[seq]
            if others:
                others = [other for other in others if other[1] >= seq]
            if isinstance(event, BatchStartEvent):
                if event.batch_id != start.batch_id:
                    others.append(
                        (
                            event.batch_id,
                            self._last_end.get(event.batch_id, len(events)),
                            {call.call_id for call in event.calls},
                        )
                    )
                continue
            if isinstance(event, BatchEndEvent | BatchCallEvent):
                if event.batch_id == start.batch_id:
                    owned.append((seq, event))
                elif isinstance(event, BatchCallEvent):
                    for batch_id, _, call_ids in others:
                        if batch_id == event.batch_id:
                            call_ids.add(event.call.call_id)
                continue
            if others:
                if isinstance(event, ContextMessageEvent):
                    continue  # the contexts of the batch open inside this one
                if isinstance(event, ToolCallEvent | ToolResultEvent) and any(
                    event.call_id in call_ids for _, _, call_ids in others
                ):
                    continue  # a call of a batch open inside this one
            owned.append((seq, event))
        return BatchRecord(start=start, begin=begin, events=tuple(owned), end=end)

    # --- approval ------------------------------------------------------------------------------

    def pending_requests(self) -> dict[str, ApprovalAskedEvent]:
        """The approval requests still waiting for a decision, by request id."""
        return pending_requests(self._events)

    def grants(self) -> frozenset[tuple[str | None, str]]:
        """The session grants that stand: ``(agent name, tool name)`` pairs."""
        return grants_in(self._events)

    def policy(self, default: ApprovalPolicy) -> ApprovalPolicy:
        """The approval policy in effect: the last ``approval/policy`` event's, else
        ``default``.
        """
        for event in reversed(self._events):
            if isinstance(event, ApprovalPolicyEvent):
                return event.policy
        return default

    def open_turn(self) -> TurnStartEvent | TurnEndEvent | None:
        """The last ``turn/start`` or ``turn/end`` event (a turn is open when it is a
        ``turn/start``), or ``None`` when the log has no turn.
        """
        for event in reversed(self._events):
            if isinstance(event, TurnStartEvent | TurnEndEvent):
                return event
        return None
