"""Tracing tool calls with OpenTelemetry: one span per call, under one span per batch, under
the agent's own span."""

from __future__ import annotations

import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dsh_tools import (
    CancelSignal,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.otel import install_tracing


async def lookup(args: object, context: ToolRunContext) -> str:
    await trio.sleep(0.1)  # stands for I/O
    return "42"


async def fail(args: object, context: ToolRunContext) -> str:
    raise RuntimeError("the service is down")


def build_registry(provider: TracerProvider) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="lookup",
            description="Look something up.",
            parameters={},
            execute=lookup,
            is_concurrency_safe=lambda args: True,
        )
    )
    registry.register(define_tool(name="fetch", description="Fetch.", parameters={}, execute=fail))
    install_tracing(registry, tracer_provider=provider)
    return registry


async def traced_turn(exporter: SpanExporter) -> None:
    provider = TracerProvider()  # in an application: one provider with an OTLP exporter
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = build_registry(provider)
    with provider.get_tracer("my-agent").start_as_current_span("agent turn"):
        await run_tool_calls(
            registry,
            [
                ToolCallRequest(call_id="call-1", name="lookup", arguments="{}"),
                ToolCallRequest(call_id="call-2", name="lookup", arguments="{}"),
                ToolCallRequest(call_id="call-3", name="fetch", arguments="{}"),
            ],
            signal=CancelSignal.never(),
        )


def describe(span: ReadableSpan, names: dict[int, str]) -> str:
    attributes = span.attributes or {}
    parent = names.get(span.parent.span_id, "?") if span.parent else "-"
    error = attributes.get("error.type")
    suffix = f" error.type={error}" if error else ""
    return f"{span.name} (parent: {parent}) {span.status.status_code.name}{suffix}"


async def main() -> None:
    exporter = InMemorySpanExporter()
    await traced_turn(exporter)
    spans = exporter.get_finished_spans()
    names = {span.context.span_id: span.name for span in spans if span.context}
    for span in sorted(spans, key=lambda span: span.name):
        print(describe(span, names))


if __name__ == "__main__":
    trio.run(main)
