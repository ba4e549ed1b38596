"""What one batch writes to its session log: ``tool/call``, ``tool/result`` and
``context/message`` events, and the balancing of a batch that failed.

The scheduler decides *when* each event is due (a call's ``tool/call`` when it starts, its
``tool/result`` when it commits, the contexts after the last result); :class:`BatchLog`
knows *how* to write them: the events' fields, the ``tool/result``'s pointer to its
``tool/call``, and that a log whose append failed is written to no more.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from ._batch import ToolCallRequest
from ._content import HookContext
from ._execution import ToolExecutionResult
from ._session import ContextMessageEvent, SessionEvent, SessionLog, ToolCallEvent, ToolResultEvent

__all__ = ["BatchLog"]

logger: Final = logging.getLogger("dsh_tools")


class BatchLog:
    """The session events of one batch of ``calls``, recorded with ``turn`` and ``step``."""

    __slots__ = ("_call_seqs", "_calls", "_session", "_step", "_turn", "failed")

    def __init__(
        self, session: SessionLog, calls: tuple[ToolCallRequest, ...], turn: int, step: int
    ) -> None:
        self._session = session
        self._calls = calls
        self._turn = turn
        self._step = step
        # the seq of each call's tool/call, for its tool/result's source_event_seqs
        self._call_seqs = [0] * len(calls)
        self.failed = False
        """An append raised: the batch is failing, and nothing more is written to the log."""

    def _append(self, event: SessionEvent) -> int:
        try:
            return self._session.append(event)
        except BaseException:
            self.failed = True
            raise

    def call(self, index: int) -> None:
        """Append the ``tool/call`` of the call at ``index``."""
        call = self._calls[index]
        self._call_seqs[index] = self._append(
            ToolCallEvent(
                turn=self._turn,
                step=self._step,
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
            )
        )

    def result(self, index: int, result: ToolExecutionResult) -> None:
        """Append the ``tool/result`` of the call at ``index``, pointing at its ``tool/call``."""
        self._append(
            ToolResultEvent(
                turn=self._turn,
                step=self._step,
                call_id=self._calls[index].call_id,
                content=result.content,
                is_error=result.is_error,
                error=result.error,
                meta=result.meta,
                source_event_seqs=(self._call_seqs[index],),
            )
        )

    def contexts(self, contexts: Iterable[HookContext]) -> None:
        """Append one ``context/message`` per batch context, in FIFO order."""
        for context in contexts:
            self._append(
                ContextMessageEvent(
                    content=context.content, source=context.source, meta=context.meta
                )
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
