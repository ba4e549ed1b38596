"""The worker: Temporal's activities for tool batches, run on the worker's trio loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Sequence
from datetime import timedelta

import temporalio.client
import trio
from temporalio import activity
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    SessionEvent,
    ToolCallRequest,
    ToolRegistry,
    resume_tool_calls,
    run_tool_calls,
)
from dsh_tools._for_integrations import SessionReader, check_int, check_seconds, logged_batch
from dsh_tools.postgres import PostgresSessionLog, check_database

from ._client import TemporalClient
from ._workflow import BATCH_ACTIVITY, BatchOutcome, BatchRequest, SessionWorkflow

__all__ = ["STICKY_TIMEOUT", "last_batch", "serve_worker"]

STICKY_TIMEOUT = 1.0
"""Seconds a session's workflow task waits for the worker that has the workflow cached (the
SDK's default is 10 s): short, so a dead worker delays its sessions' next step by this much
only. The session workflow is small, so a worker that missed it replays it cheaply."""


def last_batch(
    events: Sequence[SessionEvent], calls: Sequence[ToolCallRequest], turn: int, step: int
) -> tuple[BatchStartEvent, BatchEndEvent | None] | None:
    """The session's last batch if it is the batch of ``calls`` at ``turn``/``step`` (its
    ``batch/start``, and its last ``batch/end`` or ``None``), else ``None``.

    A worker finishes each session's batches one at a time, so a batch that an earlier attempt
    of the same activity started is the session's last one.
    """
    record = SessionReader(events).last_batch()
    if record is None:
        return None
    start = record.start
    if (start.turn, start.step, record.calls) != (turn, step, tuple(calls)):
        return None
    return start, record.end


def _unanswered(events: Sequence[SessionEvent]) -> bool:
    """Whether the session's last batch ended with a call that has no ``tool/result``
    (``resume_tool_calls`` finishes such a batch).
    """
    record = SessionReader(events).last_batch()
    return (
        record is not None
        and record.end is not None
        and record.end.reason in ("aborted", "failed")
        and logged_batch(record) is None
    )


class _BatchActivity:
    """The activity, bound to the worker's registry, database and trio loop."""

    def __init__(
        self,
        registry: ToolRegistry,
        conninfo: str,
        schema: str,
        synchronous_commit: bool,
        token: trio.lowlevel.TrioToken,
        executor: concurrent.futures.Executor,
    ) -> None:
        self._executor = executor
        self._registry = registry
        self._conninfo = conninfo
        self._schema = schema
        self._synchronous_commit = synchronous_commit
        self._token = token

    @activity.defn(name=BATCH_ACTIVITY)
    async def run_batch(self, request: BatchRequest) -> BatchOutcome:
        """Run (or finish) the batch on the trio loop, heartbeating until it has ended.

        Cancelled because the agent's signal fired: the batch's signal fires, and the batch
        ends ``"aborted"`` with every call answered before this returns. Cancelled for another
        reason (this attempt timed out, the worker is stopping): the batch is left running;
        the next attempt, on any worker, waits for its log (``SessionLogLockedError`` is
        retried) and finishes or returns it.
        """
        loop = asyncio.get_running_loop()
        controller = CancelController()
        attempt = activity.info().attempt

        async def batch() -> BatchOutcome:
            return await self._run_on_trio(request, controller, attempt)

        def on_trio() -> BatchOutcome:
            return trio.from_thread.run(batch, trio_token=self._token)

        # trio.from_thread.run blocks its thread until the batch ends: an executor thread,
        # so this loop keeps heartbeating
        finished = loop.run_in_executor(self._executor, on_trio)
        interval = max(request.heartbeat_timeout / 4, 0.05)
        while True:
            activity.heartbeat()
            try:
                return await asyncio.wait_for(asyncio.shield(finished), interval)
            except TimeoutError:
                continue
            except asyncio.CancelledError:
                details = activity.cancellation_details()
                if details is None or not details.cancel_requested:
                    # Temporal gave up on this attempt (its heartbeats came too late) or the
                    # worker is stopping: the batch goes on here while it can, and whoever
                    # runs it next finds it in the log
                    raise
                # the agent interrupted the batch: it still ends with every call answered
                self._token.run_sync_soon(controller.cancel)
                return await finished

    async def _run_on_trio(
        self, request: BatchRequest, controller: CancelController, attempt: int
    ) -> BatchOutcome:
        calls = tuple(
            ToolCallRequest(call_id=call.call_id, name=call.name, arguments=call.arguments)
            for call in request.calls
        )
        # the connection is opened off the loop; every append then blocks it for one round trip
        log = await trio.to_thread.run_sync(
            functools.partial(
                PostgresSessionLog,
                self._conninfo,
                request.session_id,
                schema=self._schema,
                synchronous_commit=self._synchronous_commit,
                # a result the worker holds is stored once the database is back (a restart),
                # not dropped for the next attempt to call "may have run"
                append_retry=request.batch_timeout,
            )
        )
        since = request.from_seq
        try:
            # the log from where this batch starts (the workflow knows: after the session's
            # last batch), off the loop the worker's batches share
            events = await trio.to_thread.run_sync(log.events_since, since)
            found = last_batch(events, calls, request.turn, request.step)
            if found is not None and found[1] is not None and _unanswered(events):
                # a worker drained (or stopped) mid-batch: its batch ended with calls that
                # never started, and no result for them; they run here
                found = (found[0], None)
            done = found  # a batch that ended already (a retried attempt) is only reported
            if found is None:
                await run_tool_calls(
                    self._registry,
                    calls,
                    signal=controller.signal,
                    max_parallel_tool_calls=request.max_parallel_tool_calls,
                    session=log,
                    turn=request.turn,
                    step=request.step,
                    capacity_limits=request.capacity_limits,
                )
            elif found[1] is None or found[1].reason == "suspended":
                await resume_tool_calls(
                    self._registry,
                    log,
                    signal=controller.signal,
                    max_parallel_tool_calls=request.max_parallel_tool_calls,
                    capacity_limits=request.capacity_limits,
                )
            if done is None or done[1] is None or done[1].reason == "suspended":
                events = await trio.to_thread.run_sync(log.events_since, since)
                done = last_batch(events, calls, request.turn, request.step)
        finally:
            log.close()
        if done is None or done[1] is None:
            raise RuntimeError(
                f"session {request.session_id!r}: the batch left no batch/end in the log"
            )
        first = next(index for index, event in enumerate(events) if event == done[0])
        return BatchOutcome(
            batch_id=done[0].batch_id,
            reason=done[1].reason,
            attempt=attempt,
            first_seq=since + first,
            next_seq=since + len(events),
        )


async def serve_worker(
    client: TemporalClient,
    task_queue: str,
    registry: ToolRegistry,
    conninfo: str,
    *,
    schema: str = "dsh",
    synchronous_commit: bool = True,
    max_concurrent_batches: int = 100,
    drain_timeout: float = 30.0,
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
        drain_timeout: when cancelled, how long (seconds) the batches in progress may take to
            finish before the worker stops.
        task_status: ``started()`` once the worker's run has begun on the asyncio thread
            (its pollers start right after).

    Raises ``ConnectionError`` or ``ValueError`` before it serves anything when the session
    logs' database cannot be reached or holds no usable schema
    (:func:`~dsh_tools.postgres.check_database`).

    Cancelling it stops the worker: it takes no new batch and waits up to ``drain_timeout``
    for the batches in progress. A batch still running then is cancelled with the trio run
    around it (its running calls end ``ABORTED``, as on any interrupt; the calls that never
    started have no result), and Temporal's retry, on another worker, finishes it: the calls
    that never started run there.
    """
    check_int("max_concurrent_batches", max_concurrent_batches)
    check_seconds("drain_timeout", drain_timeout, zero=True)
    # the session logs' database before anything is served (a wrong address, a missing
    # schema): an error now, not batches retried until their timeout
    await trio.to_thread.run_sync(functools.partial(check_database, conninfo, schema=schema))
    token = trio.lowlevel.current_trio_token()
    executor = concurrent.futures.ThreadPoolExecutor(
        max_concurrent_batches, thread_name_prefix="dsh-tools batch"
    )
    batches = _BatchActivity(registry, conninfo, schema, synchronous_commit, token, executor)
    restrictions = SandboxRestrictions.default.with_passthrough_modules("dsh_tools")

    async def run(sdk_client: temporalio.client.Client) -> None:
        worker = Worker(
            sdk_client,
            task_queue=task_queue,
            workflows=[SessionWorkflow],
            activities=[batches.run_batch],
            max_concurrent_activities=max_concurrent_batches,
            workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
            graceful_shutdown_timeout=timedelta(seconds=drain_timeout),
            # a session's workflow task waits this long for the worker that cached it before
            # any worker takes it: after a worker died, this delays the end of its batch
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=STICKY_TIMEOUT),
        )
        running = asyncio.ensure_future(worker.run())
        started()
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            # shutdown() stops the pollers and waits for run() to end: cancelling run()
            # itself would leave the SDK's poll tasks failing unobserved
            await worker.shutdown()
            raise

    ready = trio.Event()

    def started() -> None:
        token.run_sync_soon(ready.set)

    try:
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                await client.run(run)

            nursery.start_soon(serve)
            await ready.wait()
            task_status.started()
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
