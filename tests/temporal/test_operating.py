"""What an operator sees of a worker: its log lines, its OpenTelemetry metrics, and one trace
from the agent's span through the session workflow to the worker's tool calls (against the
real Temporal dev server and PostgreSQL).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path

import psycopg
import pytest
import trio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from psycopg import sql
from psycopg.conninfo import make_conninfo
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor

from dsh_tools import CancelSignal, ToolRegistry, ToolRunContext, define_tool
from dsh_tools.otel import install_tracing
from dsh_tools.temporal import (
    LineFormatter,
    TemporalBatchRunner,
    TemporalClient,
    open_temporal_client,
    serve_worker,
)
from dsh_tools.temporal._runner import WORKER_LOST
from support import ROOT, first_text, request


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    async def echo(args: object, context: ToolRunContext) -> str:
        return f"echo {context.call_id}"

    async def fail(args: object, context: ToolRunContext) -> str:
        raise ValueError("no such row")

    for name, body in (("echo", echo), ("fail", fail)):
        registry.register(
            define_tool(
                name=name,
                description=name,
                parameters={},
                execute=body,
                is_concurrency_safe=lambda _args: True,
            )
        )
    return registry


# --- the log ------------------------------------------------------------------------------------


def _record(message: str, exc: BaseException | None = None, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "dsh_tools.temporal",
        logging.WARNING,
        __file__,
        1,
        "%s",
        (message,),
        None if exc is None else (type(exc), exc, exc.__traceback__),
    )
    record.dsh_event = message.split()[0]
    record.dsh_fields = fields
    return record


def _raised(text: str) -> BaseException:
    try:
        raise ConnectionError(text)
    except ConnectionError as exc:
        return exc


def test_the_text_format_is_one_line_per_event_and_a_failures_traceback_once() -> None:
    formatter = LineFormatter()
    first = formatter.format(_record("batch.database session='s'", _raised("refused\nmore")))
    again = formatter.format(_record("batch.database session='s'", _raised("refused again")))

    head, *trace = first.splitlines()
    assert head.endswith(
        " WARNING dsh_tools.temporal batch.database session='s' error='ConnectionError: refused'"
    ), head
    assert "Traceback (most recent call last):" == trace[0]
    assert trace[-2:] == ["ConnectionError: refused", "more"]
    # the same failure at the same place: one line, no traceback
    assert 1 == len(again.splitlines())
    assert again.endswith("error='ConnectionError: refused again'")


def test_the_json_format_carries_the_events_fields() -> None:
    formatter = LineFormatter("json")
    line = formatter.format(
        _record("batch.end session='s'", session="s", reason="completed", calls=3)
    )
    assert 1 == len(line.splitlines())
    data = json.loads(line)
    assert {
        "level": "WARNING",
        "logger": "dsh_tools.temporal",
        "event": "batch.end",
        "session": "s",
        "reason": "completed",
        "calls": 3,
        "message": "batch.end session='s'",
    } == {key: value for key, value in data.items() if key != "time"}
    assert data["time"].endswith("Z")


def test_a_formatter_style_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="style must be 'text' or 'json', not 'xml'"):
        LineFormatter("xml")


# --- metrics and traces ---------------------------------------------------------------------------


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
async def client(
    temporal_address: str, tracer_provider: TracerProvider
) -> AsyncGenerator[TemporalClient]:
    async with open_temporal_client(temporal_address, tracer_provider=tracer_provider) as client:
        yield client


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, object], float]]]:
    """Each metric's points: (attributes, value or histogram count)."""
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[tuple[dict[str, object], float]]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    count = value if value is not None else getattr(point, "count", 0)
                    points.setdefault(metric.name, []).append(
                        (dict(point.attributes or {}), float(count))
                    )
    return points


async def test_a_worker_counts_batches_and_calls_by_code_and_times_its_appends(
    client: TemporalClient, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    reader = InMemoryMetricReader()
    queue = f"q-{uuid.uuid4()}"
    caplog.set_level(logging.INFO, logger="dsh_tools.temporal")
    async with trio.open_nursery() as nursery:
        await nursery.start(
            functools.partial(
                serve_worker,
                client,
                queue,
                _registry(),
                dsn,
                meter_provider=MeterProvider(metric_readers=[reader]),
            )
        )
        runner = TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=5)
        with trio.fail_after(60):
            for session in ("a", "b"):
                await runner.run(
                    [request("c1", "echo"), request("c2", "fail"), request("c3", "missing")],
                    session_id=f"s-{session}-{uuid.uuid4()}",
                    signal=CancelSignal.never(),
                )
        nursery.cancel_scope.cancel()
    runner.close()

    points = _points(reader)
    assert [({"outcome": "ran", "reason": "completed"}, 2.0)] == points["dsh_tools.worker.batches"]
    assert {"ok": 2.0, "error": 2.0, "UNKNOWN_TOOL": 2.0} == {
        str(attributes["code"]): value for attributes, value in points["dsh_tools.worker.calls"]
    }
    # per batch: batch/start, three tool/calls... at least the start, 3 results and the end
    [(_, appends)] = points["dsh_tools.worker.append.duration"]
    assert appends >= 2 * 5
    events = [record.getMessage().split()[0] for record in caplog.records]
    assert ["worker.serving", "batch.end", "batch.end", "worker.drain", "worker.stopped"] == [
        event for event in events if event.startswith(("worker.", "batch."))
    ]


def _by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {span.context.span_id: span for span in spans if span.context is not None}


async def test_one_trace_holds_the_agents_span_the_workflow_and_the_workers_tool_calls(
    client: TemporalClient,
    dsn: str,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    registry = _registry()
    install_tracing(registry, tracer_provider=tracer_provider)
    queue = f"q-{uuid.uuid4()}"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, registry, dsn)
        runner = TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=5)
        tracer = tracer_provider.get_tracer("agent")
        with trio.fail_after(60), tracer.start_as_current_span("agent turn") as turn:
            await runner.run(
                [request("c1", "echo")],
                session_id=f"s-{uuid.uuid4()}",
                signal=CancelSignal.never(),
            )
        nursery.cancel_scope.cancel()
    runner.close()

    spans = exporter.get_finished_spans()
    call = next(span for span in spans if span.name == "execute_tool echo")
    # from the tool call up its parents: the worker's activity, the workflow, the agent's turn
    chain: list[str] = []
    by_id = _by_id(spans)
    current: ReadableSpan | None = call
    while current is not None:
        chain.append(current.name)
        parent = current.parent
        current = None if parent is None else by_id.get(parent.span_id)
    assert chain[-1] == "agent turn", chain
    assert any(name.startswith("RunActivity:dsh-tools-batch") for name in chain), chain
    assert {turn.get_span_context().trace_id} == {
        span.context.trace_id for span in spans if span.context is not None
    }


# --- connections and failover -------------------------------------------------------------------


async def test_a_worker_and_a_runner_under_a_connection_cap_run_every_batch_first_time(
    client: TemporalClient, dsn: str
) -> None:
    # a role allowed 4 connections; 12 sessions' batches at once, each holding its session's
    # lock for a while: the worker's 2 pooled connections and the runner's 1 serve them all,
    # and no attempt fails for want of a connection
    role = f"capped_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        name = sql.Identifier(role)
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 4").format(name))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA dsh TO {}").format(name))
        admin.execute(
            sql.SQL("GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA dsh TO {}").format(name)
        )
        admin.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA dsh TO {}").format(name))
    capped = make_conninfo(dsn, user=role)
    registry = ToolRegistry()

    async def slow(args: object, context: ToolRunContext) -> str:
        await trio.sleep(0.05)
        return f"done {context.call_id}"

    registry.register(define_tool(name="slow", description="slow", parameters={}, execute=slow))
    reader = InMemoryMetricReader()
    queue = f"q-{uuid.uuid4()}"
    texts: list[str] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(
            functools.partial(
                serve_worker,
                client,
                queue,
                registry,
                capped,
                max_concurrent_batches=16,
                max_connections=2,
                meter_provider=MeterProvider(metric_readers=[reader]),
            )
        )
        with TemporalBatchRunner(client, queue, conninfo=capped, pool_size=1) as runner:

            async def one(index: int) -> None:
                batch = await runner.run(
                    [request(f"c{index}", "slow")],
                    session_id=f"s-{index}-{uuid.uuid4()}",
                    signal=CancelSignal.never(),
                )
                texts.append(first_text(batch.results[0]))

            with trio.fail_after(120):
                async with trio.open_nursery() as agents:
                    for index in range(12):
                        agents.start_soon(one, index)
        nursery.cancel_scope.cancel()
    assert sorted(f"done c{index}" for index in range(12)) == sorted(texts)
    batches = _points(reader)["dsh_tools.worker.batches"]
    assert [({"outcome": "ran", "reason": "completed"}, 12.0)] == batches


def _doomed_worker(address: str, queue: str, dsn: str) -> subprocess.Popen[bytes]:
    """``dsh-tools worker`` serving the failover example's tools (their starts recorded)."""
    command = [sys.executable, "-m", "dsh_tools", "worker", "--temporal", address]
    command += ["--task-queue", queue, "--postgres", dsn]
    command += ["--registry", "temporal_failover:registry"]
    return subprocess.Popen(
        command,
        env=os.environ | {"FAILOVER_WORKER": "doomed", "PYTHONPATH": str(ROOT / "examples")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_the_runner_hands_a_dead_workers_batch_on_without_waiting_for_heartbeats(
    client: TemporalClient,
    temporal_address: str,
    dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the heartbeat timeout is a minute: only the runner's watch of the session's lock can
    # move the batch off the killed worker before the test's deadline
    starts = tmp_path / "starts.txt"
    monkeypatch.setenv("FAILOVER_STARTS", str(starts))
    monkeypatch.setenv("FAILOVER_WORKER", "here")
    queue = f"q-{uuid.uuid4()}"
    session = f"s-{uuid.uuid4()}"
    examples = str(ROOT / "examples")
    worker = _doomed_worker(temporal_address, queue, dsn)
    sys.path.insert(0, examples)
    try:
        import temporal_failover
    finally:
        sys.path.remove(examples)
    batch = None
    try:
        with TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=60) as runner:
            async with trio.open_nursery() as nursery:

                async def kill_then_serve() -> None:
                    while not starts.exists():  # noqa: ASYNC110 (a file another process writes)
                        await trio.sleep(0.01)
                    worker.send_signal(signal.SIGKILL)
                    await nursery.start(
                        serve_worker, client, queue, temporal_failover.registry(), dsn
                    )

                nursery.start_soon(kill_then_serve)
                with trio.fail_after(40):
                    batch = await runner.run(
                        [request("c4", "crawl", '{"site": "s"}')],
                        session_id=session,
                        signal=CancelSignal.never(),
                    )
                nursery.cancel_scope.cancel()
    finally:
        worker.kill()
        worker.wait()
    assert batch is not None
    assert ["crawled s on attempt 2"] == [first_text(result) for result in batch.results]
    assert ["doomed", "here"] == [line.split()[0] for line in starts.read_text().splitlines()]

    async def failures(sdk: Client) -> list[str]:
        history = await sdk.get_workflow_handle(f"dsh-tools-session/{session}").fetch_history()
        return [
            event.activity_task_started_event_attributes.last_failure.application_failure_info.type
            for event in history.events
            if event.HasField("activity_task_started_event_attributes")
        ]

    # the attempt that ran on the killed worker ended as the runner failed it
    assert [WORKER_LOST] == await client.run(failures)


def test_the_worker_commands_log_takes_warnings_finalizer_and_thread_errors_as_records() -> None:
    program = """
import gc, threading, warnings
from dsh_tools.cli.worker import _configure_logging
_configure_logging("json", "info")
warnings.warn("a library's warning")
class Finalized:
    def __del__(self):
        raise ValueError("from a finalizer")
Finalized()
gc.collect()
thread = threading.Thread(target=lambda: 1 / 0, name="doomed")
thread.start()
thread.join()
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    try:
        lines = [json.loads(line) for line in done.stderr.splitlines()]
    except json.JSONDecodeError:
        pytest.fail(f"a line of the log is not JSON:\n{done.stderr}")
    assert [
        ("py.warnings", None),
        ("dsh_tools", "ValueError: from a finalizer"),
        ("dsh_tools", "ZeroDivisionError: division by zero"),
    ] == [(line["logger"], line.get("error")) for line in lines]
    assert "thread doomed" in lines[2]["message"]
    # each failure's traceback once, inside its one JSON line
    assert all("traceback" in line for line in lines[1:])


async def test_a_client_traces_only_when_a_tracer_provider_is_installed(
    temporal_address: str, tracer_provider: TracerProvider
) -> None:
    # the API's default provider records nothing: the interceptor would only cost
    async with open_temporal_client(temporal_address) as plain:
        assert [] == plain.client.config()["interceptors"]
    async with open_temporal_client(temporal_address, tracer_provider=tracer_provider) as traced:
        [interceptor] = traced.client.config()["interceptors"]
    assert isinstance(interceptor, TracingInterceptor)


async def test_a_worker_that_only_lost_its_database_connection_keeps_its_batch(
    client: TemporalClient, dsn: str
) -> None:
    # the worker's connection is cut while a 2 s body runs: the session's lock is gone and its
    # batch open (orphaned, as after a death) for the rest of the body, but the worker keeps
    # heartbeating, so the runner's watch leaves it alone; the worker takes the session again
    # at its next append, and the body ran once
    starts: list[int] = []
    running = trio.Event()
    registry = ToolRegistry()

    async def slow(args: object, context: ToolRunContext) -> str:
        starts.append(context.attempt)
        running.set()
        await trio.sleep(2)
        return f"done on attempt {context.attempt}"

    registry.register(
        define_tool(name="slow", description="slow", parameters={}, execute=slow, idempotent=True)
    )
    queue = f"q-{uuid.uuid4()}"
    session = f"s-{uuid.uuid4()}"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, registry, dsn)
        with TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=1) as runner:

            async def cut_the_workers_connection() -> None:
                await running.wait()
                with psycopg.connect(dsn, autocommit=True) as admin:
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = 'dsh-tools worker' AND pid IN "
                        "(SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)"
                    )

            nursery.start_soon(cut_the_workers_connection)
            with trio.fail_after(60):
                batch = await runner.run(
                    [request("c1", "slow")], session_id=session, signal=CancelSignal.never()
                )
        nursery.cancel_scope.cancel()
    assert ["done on attempt 1"] == [first_text(result) for result in batch.results]
    assert [1] == starts

    async def failures(sdk: Client) -> list[str]:
        history = await sdk.get_workflow_handle(f"dsh-tools-session/{session}").fetch_history()
        return [
            event.activity_task_started_event_attributes.last_failure.application_failure_info.type
            for event in history.events
            if event.HasField("activity_task_started_event_attributes")
        ]

    assert [""] == await client.run(failures)  # one attempt, which nothing failed
