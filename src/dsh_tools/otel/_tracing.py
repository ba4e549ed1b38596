"""OpenTelemetry spans for tool calls, following the GenAI semantic conventions.

One ``execute`` wrapper, added first (outermost), opens a span per dispatched call as the
current span of the task that runs it. trio gives every task a copy of its parent's
``contextvars`` at spawn time, and OpenTelemetry keeps the current span in a contextvar, so:

- a call run on the caller's own task (a barrier) nests under the caller's current span;
- a call run in a pool's nursery task starts from the context the scheduler's lane (the
  caller's task) had when it spawned the task, so it nests under the same span, and no
  parallel sibling can become its parent.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Final

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from dsh_tools import (
    Disposer,
    ExecuteNext,
    TextBlock,
    ToolDispatchExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolScope,
)

__all__ = ["OTHER_ERROR", "install_tracing"]

OTHER_ERROR: Final = "_OTHER"
"""``error.type`` of an error result that carries no error code (the semantic conventions'
fallback value)."""

_OPERATION: Final = "execute_tool"


class _Call:
    """The span of the call running in this task, and whether its exception was recorded."""

    __slots__ = ("recorded", "span")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.recorded = False


_CURRENT: Final = ContextVar[_Call | None]("dsh_tools_otel_call", default=None)


class _ExceptionBridge(logging.Handler):
    """Records on the call's span the exception the pipeline logs for a raising tool body.

    The pipeline turns a body's exception into an error result before any wrapper sees it, but
    logs it first (logger ``dsh_tools``, with ``exc_info``), in the task that runs the body,
    inside the ``execute`` wrappers: so the call's span is the one in ``_CURRENT`` there.
    """

    def emit(self, record: logging.LogRecord) -> None:
        call = _CURRENT.get()
        if call is None or call.recorded or record.exc_info is None:
            return
        exc = record.exc_info[1]
        if isinstance(exc, Exception):
            call.recorded = True
            call.span.record_exception(exc)


_BRIDGE: Final = _ExceptionBridge()
_bridge_users = 0


def _attach_bridge() -> None:
    global _bridge_users
    if _bridge_users == 0:
        logging.getLogger("dsh_tools").addHandler(_BRIDGE)
    _bridge_users += 1


def _detach_bridge() -> None:
    global _bridge_users
    _bridge_users -= 1
    if _bridge_users == 0:
        logging.getLogger("dsh_tools").removeHandler(_BRIDGE)


def _error_text(result: ToolExecutionResult) -> str:
    text = "".join(block.text for block in result.content if isinstance(block, TextBlock))
    return text.removeprefix("Error: ")


def install_tracing(
    registry: ToolRegistry | ToolScope, *, tracer_provider: trace.TracerProvider | None = None
) -> Disposer:
    """Trace every tool call that ``registry`` dispatches.

    Each call gets one span named ``execute_tool <name>`` (kind ``INTERNAL``), a child of the
    span that is current where the call runs, with the GenAI semantic-convention attributes
    ``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``
    and ``gen_ai.tool.type = "function"``. An error result sets the span's status to
    ``ERROR`` (description: the error text), ``error.type`` to the result's error code
    (:data:`OTHER_ERROR` when it has none), and adds an ``exception`` event: the body's own
    exception (type, message, stack trace) when the pipeline logged one (logger
    ``dsh_tools`` at its default level), else the error's name (when known) and message.
    A call stopped by cancelling the caller's own trio scope
    ends its span with status ``ERROR`` and ``error.type = "Cancelled"`` before the
    cancellation propagates.

    Calls that never reach dispatch (denied by a policy or a guard, or cancelled before
    dispatch) get no span: no tool ran.

    Args:
        registry: the registry whose calls to trace.
        tracer_provider: where spans go; the global provider when ``None``.

    Returns:
        A :class:`~dsh_tools.Disposer` that removes the wrapper.

    Raises:
        TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry` (or a
            :class:`~dsh_tools.ToolScope`, whose wrapper traces only its agent's calls), or
            ``tracer_provider`` is not an OpenTelemetry ``TracerProvider``.
    """
    if not isinstance(registry, ToolRegistry | ToolScope):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"install_tracing() takes a ToolRegistry or a ToolScope, not {type(registry).__name__}"
        )
    if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            "install_tracing() tracer_provider must be an OpenTelemetry TracerProvider, "
            f"not {type(tracer_provider).__name__}"
        )
    tracer = trace.get_tracer("dsh_tools", tracer_provider=tracer_provider)

    async def trace_call(
        execution: ToolDispatchExecution, next_: ExecuteNext
    ) -> ToolExecutionResult:
        span = tracer.start_span(
            f"{_OPERATION} {execution.name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": _OPERATION,
                "gen_ai.tool.name": execution.name,
                "gen_ai.tool.call.id": execution.call_id,
                "gen_ai.tool.type": "function",
            },
        )
        call = _Call(span)
        token = _CURRENT.set(call)
        try:
            with trace.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                result = await next_()
        except BaseException as exc:
            # trio.Cancelled of the caller's scope, or an inner wrapper that raised
            if isinstance(exc, Exception):
                span.record_exception(exc)
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            span.end()
            raise
        finally:
            _CURRENT.reset(token)
        if result.is_error:
            error = result.error
            text = _error_text(result)
            span.set_attribute("error.type", error.code if error is not None else OTHER_ERROR)
            span.set_status(Status(StatusCode.ERROR, text))
            if not call.recorded:
                attributes = {"exception.message": text}
                if error is not None:
                    attributes["exception.type"] = error.name
                span.add_event("exception", attributes)
        span.end()
        return result

    remove_wrapper = registry.hooks.execute.add(trace_call, prepend=True)
    _attach_bridge()

    def dispose() -> None:
        remove_wrapper()
        _detach_bridge()

    return Disposer(dispose)
