"""install_tracing, checked with the OpenTelemetry SDK's in-memory exporter on virtual time."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from dsh_tools import (
    CancelController,
    CancelSignal,
    ContentBlock,
    ExecuteNext,
    ImageBlock,
    TextBlock,
    ToolDefinition,
    ToolDispatchExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    install_timeout_policy,
    run_tool_calls,
)
from dsh_tools.otel import BATCH_SPAN, OTHER_ERROR, install_tracing
from media_files import png
from support import request, run_calls, spec_tool, string_tool


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def sleeper(
    name: str, seconds: float, *, parallel: bool = True, provider: TracerProvider | None = None
) -> ToolDefinition:
    async def body(_args: object, _context: ToolRunContext) -> str:
        if provider is not None:
            with provider.get_tracer("tool").start_as_current_span(f"inside {name}"):
                await trio.sleep(seconds)
        else:
            await trio.sleep(seconds)
        return f"{name} done"

    return spec_tool(name, body, description=name, parallel=parallel)


async def explode(_args: object, _context: ToolRunContext) -> str:
    raise ValueError("boom")


def tool_spans(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, ...]:
    """The finished call spans (every span but the batches')."""
    return tuple(span for span in exporter.get_finished_spans() if span.name != BATCH_SPAN)


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


async def test_a_call_gets_one_span_with_the_gen_ai_attributes(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("wait", 0))
    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("call-1", "wait"))
    (span,) = tool_spans(exporter)
    assert "execute_tool wait" == span.name
    assert SpanKind.INTERNAL == span.kind
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "wait",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.type": "function",
    } == dict(span.attributes or {})
    assert StatusCode.UNSET == span.status.status_code


async def test_an_error_result_sets_error_status_and_its_code_as_error_type(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()

    async def body(_args: object, _context: ToolRunContext) -> str:
        return "unreachable"

    registry.register(string_tool("echo", body, description="echo"))
    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("e", "echo", '{"text": 1}'))
    (span,) = tool_spans(exporter)
    assert "INVALID_ARGS" == (span.attributes or {})["error.type"]
    assert StatusCode.ERROR == span.status.status_code
    assert 'invalid arguments: "text" must be a string' == span.status.description
    assert [
        (
            "exception",
            {
                "exception.message": 'invalid arguments: "text" must be a string',
                "exception.type": "ToolArgsError",
            },
        )
    ] == [(event.name, dict(event.attributes or {})) for event in span.events]


async def test_a_body_exception_without_a_code_is_recorded_as_other(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(define_tool(name="bad", description="bad", parameters={}, execute=explode))
    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("b", "bad"))
    (span,) = tool_spans(exporter)
    assert (OTHER_ERROR, "boom") == ((span.attributes or {})["error.type"], span.status.description)
    assert ["boom"] == [(event.attributes or {})["exception.message"] for event in span.events]


async def test_a_raising_body_records_its_own_exception_with_type_and_stack_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(define_tool(name="bad", description="bad", parameters={}, execute=explode))
    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("b", "bad"))
    (span,) = tool_spans(exporter)
    (event,) = span.events
    attributes = dict(event.attributes or {})
    assert ("exception", "ValueError", "boom") == (
        event.name,
        attributes.get("exception.type"),
        attributes.get("exception.message"),
    )
    assert 'raise ValueError("boom")' in str(attributes.get("exception.stacktrace"))


@pytest.mark.parametrize("level", [logging.WARNING, logging.DEBUG])
async def test_the_stack_trace_is_recorded_whatever_the_logger_prints(
    provider: TracerProvider, exporter: InMemorySpanExporter, level: int
) -> None:
    # at WARNING the pipeline's record prints one line and carries no traceback of its own:
    # the span still gets the exception and its stack
    logger = logging.getLogger("dsh_tools")
    before = logger.level
    logger.setLevel(level)
    try:
        registry = ToolRegistry()
        registry.register(
            define_tool(name="bad", description="bad", parameters={}, execute=explode)
        )
        install_tracing(registry, tracer_provider=provider)
        await run_calls(registry, request("b", "bad"))
    finally:
        logger.setLevel(before)
    (span,) = tool_spans(exporter)
    (event,) = span.events
    assert 'raise ValueError("boom")' in str((event.attributes or {}).get("exception.stacktrace"))


async def test_the_span_wraps_the_timeout_policy_and_sees_its_timeout_result(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    registry = ToolRegistry()

    async def body(_args: object, _context: ToolRunContext) -> str:
        await trio.sleep(10)
        return "late"

    registry.register(
        define_tool(name="slow", description="slow", parameters={}, execute=body, timeout=1)
    )
    install_timeout_policy(registry)
    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("s", "slow"))
    (span,) = tool_spans(exporter)
    assert "TOOL_TIMEOUT" == (span.attributes or {})["error.type"]


async def test_parallel_and_barrier_calls_nest_under_the_batch_span_under_the_callers_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    registry = ToolRegistry()
    for name, seconds in (("a", 3), ("b", 1), ("c", 2)):
        registry.register(sleeper(name, seconds, provider=provider))
    registry.register(sleeper("x", 1, parallel=False, provider=provider))
    install_tracing(registry, tracer_provider=provider)
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("agent turn") as turn:
        started = trio.current_time()
        await run_tool_calls(
            registry,
            [request("1", "a"), request("2", "b"), request("3", "c"), request("4", "x")],
            signal=CancelSignal.never(),
        )
        elapsed = trio.current_time() - started
    assert 4 == elapsed  # the pool of three overlapped (3 s), then the barrier (1 s)
    spans = by_name(exporter.get_finished_spans())
    turn_id = turn.get_span_context().span_id
    parents = {
        name: span.parent.span_id if span.parent is not None else None
        for name, span in spans.items()
    }
    ids = {name: span.context.span_id for name, span in spans.items() if span.context}
    expected: dict[str, int | None] = {"agent turn": None, BATCH_SPAN: turn_id}
    for name in ("a", "b", "c", "x"):
        expected[f"execute_tool {name}"] = ids[BATCH_SPAN]
        expected[f"inside {name}"] = ids[f"execute_tool {name}"]
    assert expected == parents


async def test_an_interrupted_batch_ends_every_started_span_as_aborted(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    registry = ToolRegistry()
    for name in ("a", "b"):
        registry.register(sleeper(name, 100))
    registry.register(sleeper("x", 1, parallel=False))
    install_tracing(registry, tracer_provider=provider)
    controller = CancelController()
    results: list[ToolExecutionResult] = []

    async def run() -> None:
        batch = await run_tool_calls(
            registry,
            [request("1", "a"), request("2", "b"), request("3", "x")],
            signal=controller.signal,
        )
        results.extend(batch.results)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        controller.cancel()
    assert ["ABORTED", "ABORTED", "ABORTED_BEFORE_DISPATCH"] == [
        result.error.code if result.error else None for result in results
    ]
    spans = by_name(tool_spans(exporter))
    assert {"execute_tool a": "ABORTED", "execute_tool b": "ABORTED"} == {
        name: (span.attributes or {})["error.type"] for name, span in spans.items()
    }
    assert all(StatusCode.ERROR == span.status.status_code for span in spans.values())


async def test_cancelling_the_callers_scope_still_ends_the_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 100))
    install_tracing(registry, tracer_provider=provider)
    with trio.move_on_after(1):
        await run_calls(registry, request("1", "a"))
    (span,) = tool_spans(exporter)
    assert ("Cancelled", StatusCode.ERROR) == (
        (span.attributes or {})["error.type"],
        span.status.status_code,
    )


async def test_disposing_the_tracing_stops_the_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 0))
    dispose = install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("1", "a"))
    dispose()
    await run_calls(registry, request("2", "a"))
    assert ["1"] == [
        (span.attributes or {})["gen_ai.tool.call.id"] for span in tool_spans(exporter)
    ]


async def test_a_raising_inner_wrapper_is_recorded_on_the_span_it_escapes(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 0))
    install_tracing(registry, tracer_provider=provider)

    async def broken(_execution: ToolDispatchExecution, _next: ExecuteNext) -> ToolExecutionResult:
        raise RuntimeError("wrapper bug")

    registry.hooks.execute.add(broken)
    batch = await run_calls(registry, request("1", "a"))
    assert batch.results[0].is_error
    (span,) = tool_spans(exporter)
    (event,) = span.events
    assert ("RuntimeError", "RuntimeError", "wrapper bug") == (
        (span.attributes or {})["error.type"],
        (event.attributes or {})["exception.type"],
        (event.attributes or {})["exception.message"],
    )


def parent_map(exporter: InMemorySpanExporter) -> dict[str, str | None]:
    """Each finished span's name -> its parent's name (span names are unique in these tests)."""
    spans = exporter.get_finished_spans()
    names = {span.context.span_id: span.name for span in spans if span.context is not None}
    return {
        span.name: names[span.parent.span_id] if span.parent is not None else None for span in spans
    }


async def test_a_batch_gets_one_span_with_its_call_count_and_error_count(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("wait", 0))
    registry.register(define_tool(name="bad", description="bad", parameters={}, execute=explode))
    install_tracing(registry, tracer_provider=provider)
    await run_tool_calls(
        registry,
        [request("1", "wait"), request("2", "bad"), request("3", "wait")],
        signal=CancelSignal.never(),
        agent="planner",
    )
    (span,) = [span for span in exporter.get_finished_spans() if span.name == BATCH_SPAN]
    assert SpanKind.INTERNAL == span.kind
    assert {
        "gen_ai.operation.name": "execute_tool_batch",
        "gen_ai.agent.name": "planner",
        "dsh_tools.batch.calls": 3,
        "dsh_tools.batch.errors": 1,
    } == dict(span.attributes or {})
    assert StatusCode.UNSET == span.status.status_code


async def test_a_batch_of_an_agent_that_is_not_a_str_names_no_agent(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, agent=object())
    (span,) = exporter.get_finished_spans()
    assert {
        "gen_ai.operation.name": "execute_tool_batch",
        "dsh_tools.batch.calls": 0,
        "dsh_tools.batch.errors": 0,
    } == dict(span.attributes or {})


async def test_every_call_of_two_batches_nests_under_its_own_batch_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c", "d"):
        registry.register(sleeper(name, 1))
    install_tracing(registry, tracer_provider=provider)
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("agent turn"):
        with tracer.start_as_current_span("step 1"):
            await run_tool_calls(
                registry, [request("1", "a"), request("2", "b")], signal=CancelSignal.never()
            )
        with tracer.start_as_current_span("step 2"):
            await run_tool_calls(
                registry, [request("3", "c"), request("4", "d")], signal=CancelSignal.never()
            )
    spans = exporter.get_finished_spans()
    batches = [span for span in spans if span.name == BATCH_SPAN]
    names = {span.context.span_id: span.name for span in spans if span.context is not None}
    batch_ids = [span.context.span_id for span in batches if span.context is not None]
    assert [("step 1"), ("step 2")] == [
        names[span.parent.span_id] for span in batches if span.parent is not None
    ]
    assert {
        "execute_tool a": batch_ids[0],
        "execute_tool b": batch_ids[0],
        "execute_tool c": batch_ids[1],
        "execute_tool d": batch_ids[1],
    } == {
        span.name: span.parent.span_id
        for span in spans
        if span.name.startswith("execute_tool ") and span.parent is not None
    }


async def test_an_interrupted_batchs_call_spans_nest_under_its_batch_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    registry = ToolRegistry()
    for name in ("a", "b"):
        registry.register(sleeper(name, 100))
    registry.register(sleeper("x", 1, parallel=False))
    install_tracing(registry, tracer_provider=provider)
    controller = CancelController()

    async def run() -> None:
        with provider.get_tracer("agent").start_as_current_span("agent turn"):
            await run_tool_calls(
                registry,
                [request("1", "a"), request("2", "b"), request("3", "x")],
                signal=controller.signal,
            )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        controller.cancel()
    assert {
        "agent turn": None,
        BATCH_SPAN: "agent turn",
        "execute_tool a": BATCH_SPAN,
        "execute_tool b": BATCH_SPAN,
    } == parent_map(exporter)
    (batch,) = [span for span in exporter.get_finished_spans() if span.name == BATCH_SPAN]
    assert (StatusCode.UNSET, 3) == (
        batch.status.status_code,
        (batch.attributes or {})["dsh_tools.batch.errors"],
    )


async def test_cancelling_the_callers_scope_ends_the_batch_span_as_cancelled(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 100))
    install_tracing(registry, tracer_provider=provider)
    with trio.move_on_after(1):
        await run_calls(registry, request("1", "a"))
    assert {BATCH_SPAN: None, "execute_tool a": BATCH_SPAN} == parent_map(exporter)
    (batch,) = [span for span in exporter.get_finished_spans() if span.name == BATCH_SPAN]
    assert ("Cancelled", StatusCode.ERROR) == (
        (batch.attributes or {})["error.type"],
        batch.status.status_code,
    )


async def test_a_scope_traces_only_its_own_agents_batches(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 0))
    install_tracing(registry.scope("traced"), tracer_provider=provider)
    await run_calls(registry, request("1", "a"), agent="other")
    await run_calls(registry, request("2", "a"), agent="traced")
    assert [("traced", "2")] == [
        (
            (batch.attributes or {})["gen_ai.agent.name"],
            (call_span.attributes or {})["gen_ai.tool.call.id"],
        )
        for batch in exporter.get_finished_spans()
        if batch.name == BATCH_SPAN
        for call_span in tool_spans(exporter)
    ]


async def test_disposing_the_tracing_stops_the_batch_spans_too(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 0))
    dispose = install_tracing(registry, tracer_provider=provider)
    dispose()
    await run_calls(registry, request("1", "a"))
    assert () == exporter.get_finished_spans()


async def test_each_emitted_progress_report_is_a_span_event(
    provider: TracerProvider, exporter: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    async def body(_args: object, context: ToolRunContext) -> str:
        context.report_progress(message="fetching", progress=1, total=2)
        await trio.sleep(1)
        context.report_progress(progress=2, total=2, output="done\n")
        return "ok"

    registry = ToolRegistry()
    registry.register(spec_tool("fetch", body))
    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("call-1", "fetch"))

    (span,) = tool_spans(exporter)
    expected = [
        (
            "tool.progress",
            {
                "gen_ai.tool.call.id": "call-1",
                "dsh_tools.progress.message": "fetching",
                "dsh_tools.progress.progress": 1,
                "dsh_tools.progress.total": 2,
            },
        ),
        (
            "tool.progress",
            {
                "gen_ai.tool.call.id": "call-1",
                "dsh_tools.progress.progress": 2,
                "dsh_tools.progress.total": 2,
                "dsh_tools.progress.output_chars": 5,
            },
        ),
    ]
    assert expected == [(event.name, dict(event.attributes or {})) for event in span.events]


async def test_disposing_the_tracing_stops_the_progress_events(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def body(_args: object, context: ToolRunContext) -> str:
        context.report_progress(message="working")
        return "ok"

    registry = ToolRegistry()
    registry.register(spec_tool("work", body))
    dispose = install_tracing(registry, tracer_provider=provider)
    heard = len(registry.hooks.progress._list.for_agent(None))  # pyright: ignore[reportPrivateUsage]
    dispose()
    await run_calls(registry, request("call-1", "work"))

    # the observer was the registry's own, and disposing removed it with the wrappers
    assert (1, ()) == (heard, registry.hooks.progress._list.for_agent(None))  # pyright: ignore[reportPrivateUsage]
    assert () == tool_spans(exporter)


async def test_a_result_with_pictures_records_their_kinds_and_sizes_never_their_bytes(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    image = png(4, 4)
    registry = ToolRegistry()

    @registry.tool
    def shot() -> list[ContentBlock]:
        """A screenshot and a linked photo."""
        return [
            TextBlock(text="here"),
            ImageBlock(media_type="image/png", data=image),
            ImageBlock(media_type="image/jpeg", url="https://a.example/p.jpg"),
        ]

    install_tracing(registry, tracer_provider=provider)
    await run_calls(registry, request("call-1", "shot"))
    (span,) = tool_spans(exporter)
    attributes = dict(span.attributes or {})
    assert ("image/png", "image/jpeg") == attributes["dsh_tools.result.media_types"]
    assert (len(image), 0) == attributes["dsh_tools.result.media_bytes"]
    recorded = repr(attributes) + repr([event.attributes for event in span.events])
    assert base64.b64encode(image).decode()[:16] not in recorded
