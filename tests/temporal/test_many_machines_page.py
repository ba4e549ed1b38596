"""The two code blocks of docs/many-machines.md that need servers (Sybil skips them there) run
here, as written, against the tests' real PostgreSQL cluster and Temporal dev server: only the
page's example addresses are replaced by the throwaway servers'."""

from __future__ import annotations

import ast
import uuid

import trio

from dsh_tools import CancelSignal, ToolBatch, ToolRegistry, define_tool, run_tool_calls
from dsh_tools.postgres import PostgresSessionLog
from dsh_tools.temporal import open_temporal_client, serve_worker
from support import example_source, first_text, request

PAGE = "docs/many-machines.md"
EXAMPLE_DSN = "postgresql://agent@db.internal/sessions"
EXAMPLE_TEMPORAL = "temporal.internal:7233"


async def _run_block(source: str, names: dict[str, object]) -> dict[str, object]:
    """Run a page's block the way a reader's trio program would (top-level ``await``)."""
    code = compile(source, PAGE, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = dict(names)
    awaitable = eval(code, namespace)  # the docs page's own code
    if awaitable is not None:
        await awaitable
    return namespace


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    async def echo(args: object, context: object) -> str:
        return "echoed"

    registry.register(define_tool(name="echo", description="echo", parameters={}, execute=echo))
    return registry


async def test_the_postgres_block_runs_a_batch_into_the_log(dsn: str) -> None:
    source = example_source(PAGE, "create_schema(").replace(EXAMPLE_DSN, dsn)
    session_id = f"docs-{uuid.uuid4()}"
    source = source.replace('"session-42"', repr(session_id))
    namespace = await _run_block(
        source,
        {
            "run_tool_calls": run_tool_calls,
            "registry": _registry(),
            "calls": [request("c1", "echo")],
            "signal": CancelSignal.never(),
        },
    )
    batch = namespace["batch"]
    assert isinstance(batch, ToolBatch)
    assert "echoed" == first_text(batch.results[0])
    kinds = [type(event).__name__ for event in PostgresSessionLog.read(dsn, session_id)]
    assert ["BatchStartEvent", "ToolCallEvent", "ToolResultEvent", "BatchEndEvent"] == kinds


async def test_the_agent_side_block_runs_a_batch_on_a_worker(
    temporal_address: str, dsn: str
) -> None:
    source = (
        example_source(PAGE, "TemporalBatchRunner(")
        .replace(EXAMPLE_DSN, dsn)
        .replace(EXAMPLE_TEMPORAL, temporal_address)
    )
    session_id = f"docs-{uuid.uuid4()}"
    queue = f"docs-{uuid.uuid4()}"
    source = source.replace('"session-42"', repr(session_id)).replace('"tools"', repr(queue))
    async with open_temporal_client(temporal_address) as client, trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, _registry(), dsn)
        namespace = await _run_block(
            source, {"calls": [request("c1", "echo")], "signal": CancelSignal.never()}
        )
        nursery.cancel_scope.cancel()
    batch = namespace["batch"]
    assert isinstance(batch, ToolBatch)
    assert "echoed" == first_text(batch.results[0])
