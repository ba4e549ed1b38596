"""OpenTelemetry spans for tool calls, following the GenAI semantic conventions.

One ``batch`` wrapper opens a span per :func:`~dsh_tools.run_tool_calls` batch as the current
span of the caller's task, around the whole batch. One ``execute`` wrapper, added first
(outermost), opens a span per dispatched call as the current span of the task that runs it. trio gives every task a copy of its parent's
``contextvars`` at spawn time, and OpenTelemetry keeps the current span in a contextvar, so:

- a call run on the caller's own task (a barrier) nests under the batch span;
- a call run in a pool's nursery task starts from the context the scheduler's lane (the
  caller's task) had when it spawned the task, so it nests under the same batch span, and no
  parallel sibling can become its parent.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Final, cast

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from dsh_tools import (
    AudioBlock,
    BatchNext,
    Disposer,
    ExecuteNext,
    FileBlock,
    ImageBlock,
    TextBlock,
    ToolBatch,
    ToolBatchInfo,
    ToolDispatchExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolScope,
)
from dsh_tools._for_integrations import block_payload

__all__ = ["BATCH_SPAN", "OTHER_ERROR", "install_tracing"]

OTHER_ERROR: Final = "_OTHER"
"""``error.type`` of an error result that carries no error code (the semantic conventions'
fallback value)."""

_OPERATION: Final = "execute_tool"

BATCH_SPAN: Final = "execute_tool_batch"
"""The name, and ``gen_ai.operation.name``, of a batch's span. The GenAI semantic conventions
define no operation for a batch of tool calls; this name keeps a batch from being counted as a
tool execution."""


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
    logs it first (logger ``dsh_tools``, the exception on the record), in the task that runs the body,
    inside the ``execute`` wrappers: so the call's span is the one in ``_CURRENT`` there.
    """

    def emit(self, record: logging.LogRecord) -> None:
        call = _CURRENT.get()
        if call is None or call.recorded:
            return
        # the pipeline's own record carries the exception whether or not it prints a traceback
        exc = getattr(record, "dsh_tools_exception", None)
        if exc is None and record.exc_info is not None:
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


def _progress_event(
    call_id: str,
    message: str | None,
    progress: float | None,
    total: float | None,
    output: str | None,
) -> None:
    """A ``tool.progress`` event on the span of the call that reported (heard in its task)."""
    call = _CURRENT.get()
    if call is None:
        return
    attributes: dict[str, str | float] = {"gen_ai.tool.call.id": call_id}
    if message is not None:
        attributes["dsh_tools.progress.message"] = message
    if progress is not None:
        attributes["dsh_tools.progress.progress"] = progress
    if total is not None:
        attributes["dsh_tools.progress.total"] = total
    if output is not None:
        attributes["dsh_tools.progress.output_chars"] = len(output)
    call.span.add_event("tool.progress", attributes)


def _leaf_types(exc: BaseException) -> set[str]:
    if isinstance(exc, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", exc)
        return {name for inner in group.exceptions for name in _leaf_types(inner)}
    return {type(exc).__qualname__}


def _error_type(exc: BaseException) -> str:
    """The class name of ``exc``, or of every exception in it when it is a group of one kind
    (a caller-scope cancellation can leave a pool's nursery as a group of ``Cancelled``).
    """
    names = _leaf_types(exc)
    return names.pop() if len(names) == 1 else type(exc).__qualname__


def _error_text(result: ToolExecutionResult) -> str:
    text = "".join(block.text for block in result.content if isinstance(block, TextBlock))
    return text.removeprefix("Error: ")


def _record_media(span: trace.Span, result: ToolExecutionResult) -> None:
    """The kinds and sizes of a result's pictures, sound and files, never their bytes."""
    media = [
        block for block in result.content if isinstance(block, ImageBlock | AudioBlock | FileBlock)
    ]
    if media:
        span.set_attribute("dsh_tools.result.media_types", [block.media_type for block in media])
        span.set_attribute(
            "dsh_tools.result.media_bytes",
            [len(block_payload(block) or b"") for block in media],
        )


def install_tracing(
    registry: ToolRegistry | ToolScope, *, tracer_provider: trace.TracerProvider | None = None
) -> Disposer:
    """Trace every tool batch that ``registry`` runs and every tool call that it dispatches.

    Each :func:`~dsh_tools.run_tool_calls` batch gets one span named :data:`BATCH_SPAN`
    (kind ``INTERNAL``), a child of the span current in the caller's task, with
    ``gen_ai.operation.name = "execute_tool_batch"``, ``dsh_tools.batch.calls`` (the number of
    calls), ``dsh_tools.batch.errors`` (how many results are errors), and ``gen_ai.agent.name``
    when the batch's ``agent`` is a ``str``. Error results leave its status unset (they are
    answers to the model); an exception out of the batch (the caller's scope cancelled, the
    scheduler failed) sets status ``ERROR`` and ``error.type`` to the exception's class name
    (``Cancelled`` for a cancellation).
    Every call span of the batch is its child, pool calls as well as barrier calls.

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

    A result holding pictures, sound or files adds ``dsh_tools.result.media_types`` (their
    media types, in order) and ``dsh_tools.result.media_bytes`` (their sizes in bytes; ``0``
    for one given by an ``https:`` URL): kinds and sizes, never the bytes.

    Each progress report the call's body emits (``context.report_progress``, after
    coalescing) adds a ``tool.progress`` event to its span, with ``dsh_tools.progress.message``
    / ``.progress`` / ``.total`` and ``.output_chars`` (the length of its output chunk, never
    the output itself) when present.

    Calls that never reach dispatch (denied by a policy or a guard, or cancelled before
    dispatch) get no span: no tool ran.

    Args:
        registry: the registry whose calls to trace.
        tracer_provider: where spans go; the global provider when ``None``.

    Returns:
        A :class:`~dsh_tools.Disposer` that removes both wrappers and the progress observer.

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
        _record_media(span, result)
        span.end()
        return result

    async def trace_batch(info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": BATCH_SPAN,
            "dsh_tools.batch.calls": len(info.calls),
        }
        if isinstance(info.agent, str):
            attributes["gen_ai.agent.name"] = info.agent
        with tracer.start_as_current_span(
            BATCH_SPAN,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                batch = await next_()
            except BaseException as exc:
                # trio.Cancelled of the caller's scope, or the scheduler itself failed
                if isinstance(exc, Exception):
                    span.record_exception(exc)
                error_type = _error_type(exc)
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, error_type))
                raise
            span.set_attribute(
                "dsh_tools.batch.errors", sum(1 for result in batch.results if result.is_error)
            )
        return batch

    remove_wrapper = registry.hooks.execute.add(trace_call, prepend=True)
    remove_batch_wrapper = registry.hooks.batch.add(trace_batch, prepend=True)
    remove_progress = registry.hooks.progress.add(_progress_event)
    _attach_bridge()

    def dispose() -> None:
        remove_progress()
        remove_batch_wrapper()
        remove_wrapper()
        _detach_bridge()

    return Disposer(dispose)
