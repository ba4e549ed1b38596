"""A timeline of tool bodies: when each call's ``execute`` chain started and finished, and
what it returned.

:class:`TimelineRecorder` is an outermost ``execute`` wrapper: a span covers every wrapper
(the timeout policy included) and the body, which is when a call occupies a slot of the
scheduler's pool. Calls settled before dispatch (invalid arguments, a denial, a cancellation
noticed before dispatch) have no span. Times come from trio's clock by default, so they are
virtual under ``MockClock`` and real otherwise; pass ``clock=time.perf_counter`` for wall time
even on a virtual clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import final

import attrs
import trio

from dsh_tools._pipeline._hooks import ExecuteNext
from dsh_tools._pipeline._registry import ToolRegistry, ToolScope
from dsh_tools._values._disposer import Disposer
from dsh_tools._values._execution import ToolDispatchExecution, ToolExecutionResult

__all__ = ["TimelineRecorder", "TimelineSpan"]


@final
@attrs.frozen(kw_only=True)
class TimelineSpan:
    """One call's ``execute`` chain on the timeline.

    Attributes:
        call_id: the call.
        name: the tool name the call used.
        started: clock time the chain was entered.
        finished: clock time it returned, or ``None`` while it runs.
        code: ``"ok"``, the result's error code, ``"error"`` (an error result without a code),
            ``"raised"`` (a wrapper raised; the pipeline turns that into an error result) or
            ``"cancelled"`` (the caller's trio scope was cancelled); ``None`` while it runs.
            It is the chain's result, before ``post_execute``.
    """

    call_id: str
    name: str
    started: float
    finished: float | None = None
    code: str | None = None

    @property
    def running(self) -> bool:
        """Whether the chain has not returned yet."""
        return self.finished is None

    @property
    def duration(self) -> float | None:
        """``finished - started``, or ``None`` while it runs."""
        return None if self.finished is None else self.finished - self.started


def _code(result: ToolExecutionResult) -> str:
    if not result.is_error:
        return "ok"
    return result.error.code if result.error is not None else "error"


@final
class TimelineRecorder:
    """Records a :class:`TimelineSpan` per dispatched call.

    Args:
        clock: where times come from (default ``trio.current_time``).
        on_change: called with the span each time one starts or finishes (synchronously, on
            the trio thread; an exception it raises propagates into the call's ``execute``
            chain, so keep it simple). A live view redraws from it.

    Example::

        recorder = TimelineRecorder()
        recorder.install(registry)
        batch = await run_tool_calls(registry, calls, signal=signal)
        for span in recorder.spans:
            print(span.call_id, span.started, span.finished, span.code)
    """

    __slots__ = ("_clock", "_on_change", "_spans")

    def __init__(
        self,
        *,
        clock: Callable[[], float] = trio.current_time,
        on_change: Callable[[TimelineSpan], object] | None = None,
    ) -> None:
        self._clock = clock
        self._on_change = on_change
        self._spans: list[TimelineSpan] = []

    def install(self, target: ToolRegistry | ToolScope) -> Disposer:
        """Add the recording wrapper to ``target``'s ``execute`` hooks, outermost (prepended),
        so that a span covers every other wrapper. Returns its disposer.
        """
        return target.hooks.execute.add(self._wrapper, prepend=True)

    async def _wrapper(
        self, execution: ToolDispatchExecution, next: ExecuteNext
    ) -> ToolExecutionResult:
        index = len(self._spans)
        self._update(
            index,
            TimelineSpan(call_id=execution.call_id, name=execution.name, started=self._clock()),
        )
        code = "raised"
        try:
            result = await next()
        except trio.Cancelled:
            code = "cancelled"
            raise
        else:
            code = _code(result)
            return result
        finally:
            self._update(index, attrs.evolve(self._spans[index], finished=self._clock(), code=code))

    def _update(self, index: int, span: TimelineSpan) -> None:
        if index == len(self._spans):
            self._spans.append(span)
        else:
            self._spans[index] = span
        if self._on_change is not None:
            self._on_change(span)

    @property
    def spans(self) -> tuple[TimelineSpan, ...]:
        """Every span recorded since the last :meth:`clear`, in start order."""
        return tuple(self._spans)

    @property
    def running(self) -> tuple[TimelineSpan, ...]:
        """The spans whose chain has not returned yet."""
        return tuple(span for span in self._spans if span.running)

    def span(self, call_id: str) -> TimelineSpan | None:
        """The latest span of ``call_id``, or ``None``."""
        for span in reversed(self._spans):
            if span.call_id == call_id:
                return span
        return None

    def peak_running(self) -> int:
        """The most chains that ran at the same time (a span ending exactly when another
        starts does not overlap it).
        """
        edges = sorted(
            [(span.started, 1) for span in self._spans]
            + [(span.finished, -1) for span in self._spans if span.finished is not None]
        )
        peak = running = 0
        for _time, step in edges:
            running += step
            peak = max(peak, running)
        return peak

    def clear(self) -> None:
        """Forget every span (between batches).

        Raises:
            RuntimeError: a call is still running.
        """
        running = [span for span in self._spans if span.running]
        if running:
            raise RuntimeError("clear() while calls are running")
        self._spans.clear()

    def __repr__(self) -> str:
        return f"<TimelineRecorder spans={len(self._spans)} running={len(self.running)}>"
