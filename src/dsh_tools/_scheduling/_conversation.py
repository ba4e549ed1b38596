"""A whole conversation read back from its session log: the messages a loop recorded, the tool
results its batches logged, and the turn that comes next.

A loop that appends each message it sends or receives as a :class:`MessageEvent` (and runs its
batches on the same log) needs nothing else to resume after a crash: :func:`conversation`
gives the messages, in log order, with each finished batch's tool results shaped by the
provider adapter's ``tool_messages`` where the batch ended, and :func:`next_turn` the turn to
go on with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dsh_tools._sessions._events import (
    BatchEndEvent,
    ContextMessageEvent,
    MessageEvent,
    ToolResultEvent,
)
from dsh_tools._sessions._log import SessionLog, check_session_log
from dsh_tools._sessions._reader import BatchRecord, SessionReader
from dsh_tools._values._batch import ToolBatch, ToolCallRequest
from dsh_tools._values._content import HookContext
from dsh_tools._values._json import thaw_json

from ._resume import logged_result

__all__ = ["ToolMessages", "conversation", "logged_batch", "next_turn"]

ToolMessages = Callable[[Sequence[ToolCallRequest], ToolBatch], list[dict[str, Any]]]
"""An adapter's ``tool_messages(calls, batch)``: the messages that carry a batch back."""


def next_turn(session: SessionLog) -> int:
    """The turn a loop goes on with: one past the highest turn any event of the log names (a
    message, a turn's bounds, a batch), ``0`` for a log without one.

    Raises:
        TypeError: ``session`` is not a session log.
    """
    log = check_session_log(session)
    assert log is not None
    highest = -1
    for event in log.events():
        turn = getattr(event, "turn", None)
        if isinstance(turn, int) and turn > highest:
            highest = turn
    return highest + 1


def conversation(
    session: SessionLog, *, tool_messages: ToolMessages | None = None
) -> list[dict[str, Any]]:
    """The conversation the log holds: every :class:`~dsh_tools.MessageEvent`'s message, in
    log order (plain ``dict`` data, ready to send), and, with ``tool_messages`` (an adapter's
    ``tool_messages``, such as :func:`dsh_tools.providers.openai.tool_messages`), each finished
    batch's results as that adapter shapes them, placed where the batch ended.

    A batch still open (its process died mid-batch) or suspended contributes nothing: finish it
    first (:func:`~dsh_tools.resume_tool_calls`), then read the conversation.

    Raises:
        TypeError: ``session`` is not a session log.
    """
    log = check_session_log(session)
    assert log is not None
    events = log.events()
    reader = SessionReader(events)
    messages: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, MessageEvent):
            messages.append(thaw_json(event.message))
        elif (
            tool_messages is not None
            and isinstance(event, BatchEndEvent)
            and event.reason != "suspended"
        ):
            finished = _finished(reader, event.batch_id)
            if finished is not None:
                calls, batch = finished
                messages.extend(tool_messages(calls, batch))
    return messages


def _finished(
    reader: SessionReader, batch_id: str
) -> tuple[tuple[ToolCallRequest, ...], ToolBatch] | None:
    """The calls and results of batch ``batch_id`` when it has ended with a result per call."""
    record = reader.batch(batch_id)
    if record is None or record.end is None or record.end.reason == "suspended":
        return None
    batch = logged_batch(record)
    return None if batch is None or not record.calls else (record.calls, batch)


def logged_batch(record: BatchRecord) -> ToolBatch | None:
    """The batch ``record`` as the log holds it: one result per call of its ``batch/start``
    in model order (each call's last), and its contexts; ``None`` when a call has no result.
    """
    results: dict[str, ToolResultEvent] = {}
    contexts: list[HookContext] = []
    for _, event in record.events:
        if isinstance(event, ToolResultEvent):
            results[event.call_id] = event
        elif isinstance(event, ContextMessageEvent):
            contexts.append(
                HookContext(content=event.content, source=event.source, meta=event.meta)
            )
    if any(call.call_id not in results for call in record.calls):
        return None
    return ToolBatch(
        results=tuple(logged_result(results[call.call_id]) for call in record.calls),
        contexts=tuple(contexts),
    )
