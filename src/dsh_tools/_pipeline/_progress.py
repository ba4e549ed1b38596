"""Progress of a running tool body, and the registry's timeout settings.

A body calls ``context.report_progress(...)`` (sync, non-blocking). The call's
:class:`ProgressState` coalesces reports to at most one emitted per ``progress_interval``
seconds of trio's clock: a report inside the interval replaces the pending one (its output
chunk is appended to the pending chunks, never dropped), and the pending report is emitted by
the next report after the interval or when the body ends, before the call's result. No timer
task: a coalesced report costs a clock read and a few attribute writes.

The same state resets the call's idle deadline (``ToolDefinition.idle_timeout``) on every
report, coalesced or not.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Final, TypeAlias

import trio

from dsh_tools._values._execution import RunBatch
from dsh_tools._values._signal import CancelController

from ._hooks import ProgressObserver

__all__ = [
    "ProgressSink",
    "ProgressState",
    "TimeoutSettings",
]

logger: Final = logging.getLogger("dsh_tools")

ProgressSink: TypeAlias = Callable[[str, str | None, float | None, float | None, str | None], None]
"""``(call_id, message, progress, total, output)``: where a batch records a progress event."""


class TimeoutSettings:
    """What a registry decides about timeouts and progress for every call (internal, one per
    registry, read by the pipeline through its host).

    Attributes:
        enforced: whether the registry's timeout policy is installed (it is from the start;
            disposing ``install_timeout_policy``'s disposer clears it).
        default_timeout: the timeout of a tool whose definition has none.
        progress_interval: the least time between two emitted progress events of one call.
        watched: whether any call may need a deadline: ``enforced`` and a default timeout, or
            any tool with a ``timeout`` / ``idle_timeout`` ever registered. With nothing
            watched, a call pays one attribute read.
    """

    __slots__ = ("default_timeout", "enforced", "progress_interval", "watched")

    def __init__(self, default_timeout: float | None, progress_interval: float) -> None:
        self.enforced = True
        self.default_timeout = default_timeout
        self.progress_interval = progress_interval
        self.watched = default_timeout is not None


class ProgressState:
    """The progress of one call's body: coalescing, the pending report, the idle deadline.

    Created on the trio thread, on the first report (or at the body's start, for a tool with
    an idle timeout); a report from a sync body's worker thread hops onto the trio thread.
    """

    __slots__ = (
        "_call_id",
        "_chunks",
        "_interval",
        "_message",
        "_next_at",
        "_now",
        "_observers",
        "_pending",
        "_progress",
        "_sink",
        "_thread",
        "_total",
        "batch",
        "ended",
        "idle",
        "idle_timeout",
        "runs",
    )

    def __init__(
        self,
        call_id: str,
        batch: RunBatch | None,
        interval: float,
        observers: tuple[ProgressObserver, ...] = (),
    ) -> None:
        self._call_id = call_id
        # the registry's progress observers that hear this call (read when the state is made)
        self._observers = observers
        self.batch = batch
        """The batch the call belongs to (``None``: run by ``registry.execute``)."""
        self._sink: ProgressSink | None = None if batch is None else batch.progress
        self._interval = interval
        self._next_at = -math.inf
        # the clock read per report, held bound (trio's clock: virtual in tests)
        self._now = trio.lowlevel.current_clock().current_time
        self._thread = threading.get_ident()
        # the report not emitted yet: whether there is one, its fields, its output chunks
        self._pending = False
        self._message: str | None = None
        self._progress: float | None = None
        self._total: float | None = None
        self._chunks: list[str] | None = None
        self.ended = False
        """The body has ended: a later report is a programming error."""
        self.idle: CancelController | None = None
        """The idle deadline of the running attempt (``None``: no idle timeout)."""
        self.idle_timeout = 0.0
        self.runs = 1
        """How many times the body has been started within this call (a retry runs it
        again)."""

    def report_progress(
        self,
        message: str | None,
        progress: float | None,
        total: float | None,
        output: str | None,
        /,
    ) -> ProgressState:
        """Take one report (its values checked by the caller); returns itself, the receiver
        of the next reports.
        """
        if threading.get_ident() != self._thread:
            # a sync body in a worker thread: the state belongs to the trio thread
            return trio.from_thread.run_sync(self.report_progress, message, progress, total, output)
        if self.ended:
            raise RuntimeError(
                "report_progress() after the call ended: a tool body reports progress only "
                "while it runs"
            )
        now = self._now()
        idle = self.idle
        if idle is not None:
            idle.set_deadline(now + self.idle_timeout)
        if now < self._next_at:
            # coalesced: the last report's fields are kept, output chunks are joined later
            self._pending = True
            self._message = message
            self._progress = progress
            self._total = total
            if output is not None:
                chunks = self._chunks
                if chunks is None:
                    self._chunks = [output]
                else:
                    chunks.append(output)
            return self
        chunks = self._chunks
        if chunks is not None:
            if output is not None:
                chunks.append(output)
            output = "".join(chunks)
            self._chunks = None
        self._pending = False
        self._next_at = now + self._interval
        self._emit(message, progress, total, output)
        return self

    def end(self) -> None:
        """The body has ended: emit the pending report, if any; later reports are refused."""
        self.ended = True
        if not self._pending:
            return
        self._pending = False
        chunks = self._chunks
        self._chunks = None
        self._emit(
            self._message,
            self._progress,
            self._total,
            None if chunks is None else "".join(chunks),
        )

    def _emit(
        self,
        message: str | None,
        progress: float | None,
        total: float | None,
        output: str | None,
    ) -> None:
        sink = self._sink
        if sink is not None:
            sink(self._call_id, message, progress, total, output)
        for observer in self._observers:
            try:
                observer(self._call_id, message, progress, total, output)
            except Exception:
                logger.exception("a progress observer failed")
