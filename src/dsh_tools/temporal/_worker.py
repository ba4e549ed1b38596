"""The worker: Temporal's activities for tool batches, run on the worker's trio loop."""

from __future__ import annotations

import asyncio
import functools
import logging
from datetime import timedelta

import psycopg
import temporalio.client
import trio
from opentelemetry import metrics
from psycopg_pool import ConnectionPool
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from dsh_tools import ToolRegistry
from dsh_tools._for_integrations import check_int, check_seconds
from dsh_tools.postgres import check_database

from ._activity import BatchActivity
from ._client import TemporalClient
from ._observe import WorkerMetrics, say
from ._workflow import SessionWorkflow

__all__ = ["STICKY_TIMEOUT", "serve_worker"]

STICKY_TIMEOUT = 1.0
"""Seconds a session's workflow task waits for the worker that has the workflow cached (the
SDK's default is 10 s): short, so a dead worker delays its sessions' next step by this much
only. The session workflow is small, so a worker that missed it replays it cheaply."""


async def serve_worker(
    client: TemporalClient,
    task_queue: str,
    registry: ToolRegistry,
    conninfo: str,
    *,
    schema: str = "dsh",
    synchronous_commit: bool = True,
    max_concurrent_batches: int = 100,
    max_connections: int | None = None,
    max_concurrent_workflow_tasks: int = 100,
    drain_timeout: float = 30.0,
    sticky_timeout: float = STICKY_TIMEOUT,
    heartbeat_throttle: float = 0.25,
    meter_provider: metrics.MeterProvider | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve tool batches from ``task_queue`` until cancelled: the session workflows and the
    batch activity, whose batches run on this trio loop against each session's
    :class:`~dsh_tools.postgres.PostgresSessionLog` in ``conninfo``.

    Args:
        client: from :func:`open_temporal_client`; the worker runs on its asyncio thread.
        task_queue: the Temporal task queue the agents' :class:`TemporalBatchRunner` uses.
        registry: the tools (every worker of a task queue must register the same ones).
        conninfo: the PostgreSQL database of the session logs.
        schema: its schema (see :func:`~dsh_tools.postgres.create_schema`).
        synchronous_commit: see :class:`~dsh_tools.postgres.PostgresSessionLog`.
        max_concurrent_batches: the most batches this worker runs at once.
        max_connections: the most connections to the session logs' database this worker
            holds (a ``psycopg_pool.ConnectionPool``, opened with one and grown on demand). A
            running batch holds one (its session's
            lock is on it), so fewer connections than ``max_concurrent_batches`` makes the
            batches past it wait up to 30 s for one (then the attempt fails and Temporal
            retries it). ``None``: ``max_concurrent_batches``.
        max_concurrent_workflow_tasks: the most session workflow tasks (small, quick) it
            runs at once.
        drain_timeout: when cancelled, how long (seconds) the batches in progress may take to
            finish before the worker stops.
        sticky_timeout: how long (seconds) a session's workflow task waits for the worker that
            has the session cached before any worker takes it (Temporal's default is 10):
            after a worker died, its sessions' next steps wait this long.
        heartbeat_throttle: the longest (seconds) the SDK holds a batch's heartbeats back
            before it sends one (at most 0.8 x the batch's ``heartbeat_timeout``, which the
            runner sets). A batch heartbeats every quarter of its timeout; the runner's watch
            tells a dead worker from one that only lost its database connection by whether
            those heartbeats reach Temporal, so keep this short.
        meter_provider: where the worker's OpenTelemetry metrics go (``dsh_tools.worker.*``:
            batches, calls by result code, failovers, append latency); the global provider by
            default.
        task_status: ``started()`` once the worker's run has begun on the asyncio thread
            (its pollers start right after).

    Raises ``ConnectionError`` or ``ValueError`` before it serves anything when the session
    logs' database cannot be reached or holds no usable schema
    (:func:`~dsh_tools.postgres.check_database`).

    Cancelling it stops the worker: it takes no new batch and waits up to ``drain_timeout``
    for the batches in progress. A batch still running then is left as a crash leaves it: its
    log is closed first (nothing more is written), then its calls are cancelled, and the
    attempt fails so that Temporal retries it at once on another worker, which finishes it
    from the log: an interrupted idempotent call runs again, any other interrupted call gets
    ``TOOL_INTERRUPTED``, the calls that never started run there.

    It logs what it does and waits for on the ``dsh_tools.temporal`` logger, one record per
    event.
    """
    check_int("max_concurrent_batches", max_concurrent_batches)
    connections = max_concurrent_batches if max_connections is None else max_connections
    check_int("max_connections", connections)
    check_int("max_concurrent_workflow_tasks", max_concurrent_workflow_tasks)
    check_seconds("drain_timeout", drain_timeout, zero=True)
    check_seconds("sticky_timeout", sticky_timeout)
    check_seconds("heartbeat_throttle", heartbeat_throttle)
    # the session logs' database before anything is served (a wrong address, a missing
    # schema): an error now, not batches retried until their timeout
    await trio.to_thread.run_sync(functools.partial(check_database, conninfo, schema=schema))
    token = trio.lowlevel.current_trio_token()
    pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=connections,
        # a connection the server dropped fails the log's first statement, which is bounded
        # (a check before use would wait on a stalled server unbounded): the log takes the
        # pool's next one
        kwargs={"autocommit": True, "application_name": "dsh-tools worker", "connect_timeout": 5},
        open=False,
    )
    batches = BatchActivity(
        registry,
        conninfo,
        schema,
        synchronous_commit,
        token,
        WorkerMetrics(meter_provider),
        pool,
    )

    async def run(sdk_client: temporalio.client.Client) -> None:
        worker = Worker(
            sdk_client,
            task_queue=task_queue,
            workflows=[SessionWorkflow],
            activities=[batches.run_batch],
            max_concurrent_activities=max_concurrent_batches,
            max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
            max_heartbeat_throttle_interval=timedelta(seconds=heartbeat_throttle),
            default_heartbeat_throttle_interval=timedelta(seconds=heartbeat_throttle),
            # the session workflow is this package's own, small and deterministic (it imports
            # only the standard library and temporalio): the sandbox's per-task cost buys
            # nothing here
            workflow_runner=UnsandboxedWorkflowRunner(),
            graceful_shutdown_timeout=timedelta(seconds=drain_timeout),
            # a session's workflow task waits this long for the worker that cached it before
            # any worker takes it: after a worker died, this delays the end of its batch
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_timeout),
        )
        running = asyncio.ensure_future(worker.run())
        started()
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            # shutdown() stops the pollers and waits for run() to end: cancelling run()
            # itself would leave the SDK's poll tasks failing unobserved
            say(
                logging.INFO,
                "worker.drain",
                task_queue=task_queue,
                batches=batches.running,
                seconds=drain_timeout,
                why="stopping: no new batch; waiting for the batches in progress",
            )
            await worker.shutdown()
            say(logging.INFO, "worker.stopped", task_queue=task_queue)
            raise

    ready = trio.Event()

    def started() -> None:
        token.run_sync_soon(ready.set)

    try:
        await trio.to_thread.run_sync(pool.open)
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                await client.run(run)

            nursery.start_soon(serve)
            await ready.wait()
            say(
                logging.INFO,
                "worker.serving",
                task_queue=task_queue,
                max_concurrent_batches=max_concurrent_batches,
                drain_timeout=drain_timeout,
            )
            task_status.started()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(functools.partial(pool.close, timeout=5.0))
