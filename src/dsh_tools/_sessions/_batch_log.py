"""What one batch writes to its session log: ``batch/start``, ``tool/call``, ``tool/result``,
``context/message`` and ``batch/end`` events, and the balancing of a batch that failed.

The scheduler decides *when* each event is due (a call's ``tool/call`` when it starts, its
``tool/result`` when it commits, the contexts after the last result); :class:`BatchLog`
knows *how* to write them: the events' fields, the ``tool/result``'s pointer to its
``tool/call``, and that a log whose append failed is written to no more.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Final

from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._content import HookContext
from dsh_tools._values._execution import Approval, ToolExecutionResult

from ._events import (
    ApprovalDecidedEvent,
    BatchCallEvent,
    BatchEndEvent,
    BatchEndReason,
    BatchStartEvent,
    ContextMessageEvent,
    SessionEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
)
from ._log import SessionLog

__all__ = ["BatchLog"]

logger: Final = logging.getLogger("dsh_tools")


class BatchLog:
    """The session events of one batch of ``calls``, recorded with ``turn`` and ``step``.

    A resumed batch's log is primed with what the session holds already: the seq of each
    started call's last ``tool/call`` (``call_seqs``), the attempt of each call run again
    (``attempts``, by index; ``None`` for a fresh batch: every ``tool/call`` is attempt 1) and
    the batch's ``context/message`` events logged already (``logged_contexts``, in order).
    """

    __slots__ = (
        "_attempts",
        "_batch_id",
        "_call_seqs",
        "_calls",
        "_logged_contexts",
        "_session",
        "_step",
        "_turn",
        "failed",
        "started",
    )

    def __init__(
        self,
        session: SessionLog,
        calls: Sequence[ToolCallRequest],
        turn: int,
        step: int,
        batch_id: str,
        *,
        call_seqs: list[int] | None = None,
        attempts: dict[int, int] | None = None,
        logged_contexts: Sequence[HookContext] = (),
    ) -> None:
        self._session = session
        self._calls = calls
        self._turn = turn
        self._step = step
        self._batch_id = batch_id
        # the seq of each call's tool/call, for its tool/result's source_event_seqs
        self._call_seqs = [0] * len(calls) if call_seqs is None else call_seqs
        self._attempts = attempts
        self._logged_contexts = logged_contexts
        self.failed = False
        """An append raised: the batch is failing, and nothing more is written to the log."""
        self.started = call_seqs is not None
        """The batch's ``batch/start`` is in the log (a resumed batch's always is)."""

    @property
    def session(self) -> SessionLog:
        """The session log the batch appends to."""
        return self._session

    def _append(self, event: SessionEvent) -> int:
        try:
            return self._session.append(event)
        except BaseException:
            self.failed = True
            raise

    def events(self) -> list[SessionEvent]:
        """The session's events, read back (to find a suspended call's pending request)."""
        return self._session.events()

    def decided(self, request_id: str, decision: Approval, digest: str | None = None) -> None:
        """Append the ``approval/decided`` of a deferred request, decided on resume: its
        outcome, the digest of the arguments it allows, edited arguments and a note.
        """
        self._append(
            ApprovalDecidedEvent(
                id=request_id,
                outcome=decision.outcome,
                answered_by="resume",
                arguments_digest=digest,
                arguments=decision.arguments,
                note=decision.note,
            )
        )

    def start(self) -> None:
        """Append the batch's ``batch/start``: every call known now (a streamed batch's later
        calls follow as ``batch/call`` events), before any ``tool/call``.
        """
        self._append(
            BatchStartEvent(
                turn=self._turn, step=self._step, batch_id=self._batch_id, calls=tuple(self._calls)
            )
        )
        self.started = True

    def arrived(self, index: int) -> None:
        """Append the ``batch/call`` of the call that arrived at ``index`` (a streamed batch's
        call, after its ``batch/start``; ``calls`` is the lane's list, which has it already).
        """
        self._call_seqs.append(0)
        self._append(
            BatchCallEvent(
                turn=self._turn, step=self._step, batch_id=self._batch_id, call=self._calls[index]
            )
        )

    def call(self, index: int) -> None:
        """Append the ``tool/call`` of the call at ``index``."""
        call = self._calls[index]
        attempts = self._attempts
        self._call_seqs[index] = self._append(
            ToolCallEvent(
                turn=self._turn,
                step=self._step,
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
                attempt=1 if attempts is None else attempts.get(index, 1),
            )
        )

    def progress(
        self,
        call_id: str,
        message: str | None,
        progress: float | None,
        total: float | None,
        output: str | None,
    ) -> None:
        """Append a ``tool/progress`` of a running call (a body's report). Progress is for
        people, not for the batch: an append that fails is logged and the batch goes on (its
        next ``tool/result`` append meets the same log).
        """
        if self.failed:
            return
        try:
            self._session.append(
                ToolProgressEvent(
                    turn=self._turn,
                    step=self._step,
                    call_id=call_id,
                    message=message,
                    progress=progress,
                    total=total,
                    output=output,
                )
            )
        except Exception:
            logger.warning("could not record the progress of tool call %r", call_id, exc_info=True)

    def result(self, index: int, result: ToolExecutionResult) -> ToolResultEvent:
        """Append the ``tool/result`` of the call at ``index``, pointing at its ``tool/call``
        and carrying the result's additional contexts; return the event.
        """
        event = ToolResultEvent(
            turn=self._turn,
            step=self._step,
            call_id=self._calls[index].call_id,
            content=result.content,
            is_error=result.is_error,
            error=result.error,
            meta=result.meta,
            source_event_seqs=(self._call_seqs[index],),
            contexts=result.additional_contexts,
        )
        self._append(event)
        return event

    def contexts(self, contexts: Sequence[HookContext]) -> Sequence[HookContext]:
        """Append one ``context/message`` per batch context not logged yet, in FIFO order, and
        return the batch's contexts as the log then holds them.

        A fresh batch logs every one of ``contexts``. A resumed batch may have logged some
        before its process stopped, and ``contexts`` (rebuilt from the logged results and the
        calls run again) lacks the ones :func:`~dsh_tools.inject_context` added then: the
        logged ones are matched against ``contexts`` in order, by value (a logged one that
        matches none was injected, and stays where it is), and the rest of ``contexts``
        follows them. A context injected before the stop and equal to a result's own
        context stands for both.
        """
        logged = self._logged_contexts
        matched = 0
        for context in logged:
            if matched < len(contexts) and context == contexts[matched]:
                matched += 1
        for context in contexts[matched:]:
            self._append(
                ContextMessageEvent(
                    content=context.content, source=context.source, meta=context.meta
                )
            )
        return [*logged, *contexts[matched:]] if logged else contexts

    def end(self, reason: BatchEndReason) -> None:
        """Append the batch's ``batch/end``, after its results and contexts."""
        self._append(
            BatchEndEvent(turn=self._turn, step=self._step, batch_id=self._batch_id, reason=reason)
        )

    def balance(self, pending: Iterable[tuple[int, ToolExecutionResult]]) -> int:
        """After the batch failed: append the ``tool/result`` of each started call that has
        none (``pending``: index and result, in model order). Stops at the first append that
        fails (logged); returns how many were appended. Does nothing once an append failed.
        """
        if self.failed:
            return 0
        done = 0
        for index, result in pending:
            try:
                self.result(index, result)
            except Exception:
                logger.warning(
                    "could not balance tool/call %r after the batch failed",
                    self._calls[index].call_id,
                    exc_info=True,
                )
                break
            done += 1
        return done

    def end_after_failure(self, reason: BatchEndReason) -> None:
        """After the batch failed and was balanced: append its ``batch/end`` (best effort:
        not when an append failed already or the batch never started; a failure is logged).
        """
        if self.failed or not self.started:
            return
        try:
            self.end(reason)
        except Exception:
            logger.warning("could not end batch %s after it failed", self._batch_id, exc_info=True)
