"""The agent side: hand a batch to the workers through Temporal, read its results back from
PostgreSQL.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import outcome
import psycopg
import trio
from psycopg_pool import ConnectionPool, PoolTimeout
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, RPCError, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from dsh_tools import (
    CancelSignal,
    SessionEvent,
    ToolBatch,
    ToolCallRequest,
    ToolResultEvent,
)
from dsh_tools._for_integrations import (
    SessionReader,
    check_calls,
    check_int,
    check_limits,
    check_seconds,
    check_signal,
    logged_batch,
)
from dsh_tools.postgres._log import check_session_id, describe_conninfo, read_on, session_state

from ._client import TemporalClient
from ._workflow import BATCH_ACTIVITY, BatchCall, BatchOutcome, BatchRequest, SessionWorkflow

__all__ = ["WORKER_LOST", "TemporalBatchRunner", "batch_from_log"]

WORKER_LOST = "WorkerLost"
"""The error type of an attempt the runner failed because its worker let the session go."""

_WATCH_AFTER = 0.2
"""Seconds a batch runs before the runner starts watching its worker (most end sooner)."""

_GRACE = 0.3
"""Seconds, at least, an orphaned batch's attempt stays silent before the runner fails it."""


class TemporalBatchRunner:
    """Runs an agent's tool batches on the workers of a Temporal task queue.

    Args:
        client: from :func:`open_temporal_client`.
        task_queue: the task queue the workers (``dsh-tools worker``) serve.
        conninfo: the PostgreSQL database the workers write the session logs to; the results
            are read back from it (they never travel through Temporal). ``""`` (the default):
            libpq's defaults, i.e. the ``PGHOST`` / ``PGDATABASE`` / ... environment
            variables.
        schema: its schema.
        heartbeat_timeout: how long a worker may stay silent before Temporal gives its batch
            to another worker (seconds; the worker heartbeats four times as often). A
            failover takes about this long plus the retry's backoff.
        batch_timeout: the longest one attempt of a batch may run (seconds).
        pool_size: the most connections the runner holds to the database for reading
            results back (a ``psycopg_pool.ConnectionPool``, opened on the first read; each
            connection is checked before use). :meth:`close` closes it.
        read_retry: how long (seconds) reading a finished batch back keeps trying when the
            database refuses or drops the connection (a connection cap, a restart), before the
            error is raised.
        watch_interval: how often (seconds) the runner looks, while a batch runs, whether
            the session's batch is open in the log with no worker holding the session's lock
            (one query; it starts after the batch has run 0.2 s). A worker that dies lets the
            lock go at once (its connection closes): seen so, and the attempt sending no
            heartbeat for 3/8 of ``heartbeat_timeout`` (0.3 s at least), the runner fails that
            attempt in Temporal, which retries it at once on another worker instead of after
            ``heartbeat_timeout`` and Temporal's timer rounding (about 1 s instead of 2-3 s
            with a 1 s timeout). A worker that only lost its connection (a database restart)
            keeps heartbeating and keeps its batch. ``None``: heartbeats only.

    Raises:
        TypeError: ``task_queue`` or ``conninfo`` is not a ``str``, a timeout not a number.
        ValueError: a timeout is not positive, or ``task_queue`` is empty.
    """

    __slots__ = (
        "_batch_timeout",
        "_client",
        "_conninfo",
        "_heartbeat_timeout",
        "_pool",
        "_pool_size",
        "_read_retry",
        "_schema",
        "_task_queue",
        "_watch_interval",
    )

    def __init__(
        self,
        client: TemporalClient,
        task_queue: str,
        *,
        conninfo: str = "",
        schema: str = "dsh",
        heartbeat_timeout: float = 10.0,
        batch_timeout: float = 3600.0,
        pool_size: int = 4,
        read_retry: float = 30.0,
        watch_interval: float | None = 0.1,
    ) -> None:
        if not isinstance(client, TemporalClient):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"client must be a TemporalClient (open_temporal_client), not {type(client).__name__}"
            )
        for name, value in (("task_queue", task_queue), ("conninfo", conninfo), ("schema", schema)):
            if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        if not task_queue:
            raise ValueError("task_queue must be a non-empty str")
        self._client = client
        self._task_queue = task_queue
        self._conninfo = conninfo
        self._schema = schema
        self._heartbeat_timeout = check_seconds("heartbeat_timeout", heartbeat_timeout)
        self._batch_timeout = check_seconds("batch_timeout", batch_timeout)
        self._pool_size = check_int("pool_size", pool_size)
        self._read_retry = check_seconds("read_retry", read_retry)
        self._watch_interval = (
            None if watch_interval is None else check_seconds("watch_interval", watch_interval)
        )
        self._pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] | None = None

    def close(self) -> None:
        """Close the connections the runner holds for reading results (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> TemporalBatchRunner:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _connections(self) -> ConnectionPool[psycopg.Connection[tuple[object, ...]]]:
        pool = self._pool
        if pool is None:
            pool = self._pool = ConnectionPool(
                self._conninfo,
                min_size=1,
                max_size=self._pool_size,
                kwargs={"autocommit": True, "application_name": "dsh-tools runner"},
                check=ConnectionPool.check_connection,
                timeout=min(self._read_retry, 10.0),
                open=True,
            )
        return pool

    def _read_once(self, session_id: str, since: int) -> list[SessionEvent]:
        """The session's events from ``since``, on a pooled connection (on a worker thread)."""
        with self._connections().connection() as connection:
            return read_on(
                connection,
                session_id,
                schema=self._schema,
                place=describe_conninfo(self._conninfo),
                since=since,
            )

    async def _read(self, session_id: str, since: int) -> list[SessionEvent]:
        """:meth:`_read_once`, tried again while the database refuses or drops connections."""
        deadline = trio.current_time() + self._read_retry
        pause = 0.05
        while True:
            try:
                return await trio.to_thread.run_sync(self._read_once, session_id, since)
            except (psycopg.OperationalError, PoolTimeout):
                if trio.current_time() + pause > deadline:
                    raise
            await trio.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _state(self, session_id: str, wait: float) -> str:
        # a pool busy reading other batches makes the question wait no longer than ``wait``
        with self._connections().connection(timeout=wait) as connection:
            return session_state(connection, self._schema, session_id)

    async def _watch_worker(self, session_id: str, workflow_id: str, interval: float) -> None:
        """While the batch runs: when the session's batch is open and no worker holds the
        session, and the running attempt sends no heartbeat for a while, fail it so that
        Temporal retries it now. A worker that is alive but lost its database connection (a
        restart) keeps heartbeating, and takes the session again at its next append: its
        attempt is left alone. Once failed, an attempt is failed again only after a worker
        held the session again (the retry's worker may take a moment to take it).
        """
        await trio.sleep(_WATCH_AFTER)
        # a live worker's heartbeats reach Temporal every quarter of the timeout (the
        # worker's throttle is shorter): half as long again without one means none is coming
        silence = max(_GRACE, self._heartbeat_timeout / 4 * 1.5)
        armed = True
        while True:
            state = await self._ask(session_id, interval)
            if state == "held":
                armed = True
            elif state == "orphaned" and armed:
                before = await self._client.run(
                    lambda client: _running_attempt(client, workflow_id)
                )
                await trio.sleep(silence)
                if before is not None and await self._ask(session_id, interval) == "orphaned":
                    after = await self._client.run(
                        lambda client: _running_attempt(client, workflow_id)
                    )
                    if after is not None and after == before:  # no heartbeat since
                        armed = False
                        await self._client.run(functools.partial(_fail_attempt, attempt=after))
            await trio.sleep(interval)

    async def _ask(self, session_id: str, wait: float) -> str:
        try:
            return await trio.to_thread.run_sync(self._state, session_id, wait)
        except (psycopg.Error, PoolTimeout):
            # the database is away: heartbeats still find a dead worker
            return "unknown"  # noqa: ASYNC910 (the thread it waited for raised)

    async def run(
        self,
        calls: Iterable[ToolCallRequest],
        *,
        session_id: str,
        signal: CancelSignal,
        max_parallel_tool_calls: int = 10,
        turn: int = 0,
        step: int = 0,
        capacity_limits: Mapping[str, int] | None = None,
    ) -> ToolBatch:
        """Run one model response's tool calls on a worker and return one result per call, in
        model order: what :func:`~dsh_tools.run_tool_calls` returns for the same calls, with
        the session's log (``session_id``, in PostgreSQL) written by the worker.

        The session's workflow (id ``dsh-tools-session/<session_id>``) is started on first use;
        its batches run one at a time. If the worker running the batch dies, Temporal gives the
        batch to another worker once ``heartbeat_timeout`` passes, and that worker finishes it
        from the log (:func:`~dsh_tools.resume_tool_calls`: committed calls are not run again,
        an interrupted idempotent call runs again, any other interrupted call gets
        ``TOOL_INTERRUPTED``).

        When ``signal`` fires, the worker fires the batch's signal: the batch ends as
        ``run_tool_calls`` ends on an interrupt, and its results are returned.

        A checkpoint. Cancelling the calling trio task stops waiting (the batch goes on on its
        worker; the next ``run`` of the session waits for it).

        Raises:
            TypeError / ValueError: as :func:`~dsh_tools.run_tool_calls` for bad arguments;
                ``session_id`` must be a non-empty ``str`` a session log can key (no lone
                surrogate, no NUL).
            temporalio.client.WorkflowUpdateFailedError: the batch failed on every attempt
                Temporal made (or its ``batch_timeout`` passed).
        """
        check_session_id(session_id)  # here, before a workflow starts for it
        # checked here, as run_tool_calls checks them: a batch its worker refuses would be
        # retried until batch_timeout
        _, limits = check_limits(max_parallel_tool_calls, capacity_limits)
        check_signal(signal)
        check_int("turn", turn, least=0)
        check_int("step", step, least=0)
        requests = check_calls(calls)
        if not requests:
            await trio.lowlevel.checkpoint()
            return ToolBatch(results=(), contexts=())
        request = BatchRequest(
            session_id=session_id,
            calls=[
                BatchCall(call_id=c.call_id, name=c.name, arguments=c.arguments) for c in requests
            ],
            turn=turn,
            step=step,
            max_parallel_tool_calls=max_parallel_tool_calls,
            capacity_limits=limits or None,
            heartbeat_timeout=self._heartbeat_timeout,
            batch_timeout=self._batch_timeout,
        )
        workflow_id = f"dsh-tools-session/{session_id}"
        task_queue = self._task_queue

        async def start_and_run(client: Client) -> BatchOutcome:
            start = WithStartWorkflowOperation(
                SessionWorkflow.run,
                session_id,
                id=workflow_id,
                task_queue=task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            # one of the SDK's overloads has an untyped parameter: the method reads as unknown
            outcome: object = await client.execute_update_with_start_workflow(  # pyright: ignore[reportUnknownMemberType]
                "run_batch", request, start_workflow_operation=start, result_type=BatchOutcome
            )
            assert isinstance(outcome, BatchOutcome)
            return outcome

        async def interrupt(client: Client) -> None:
            await client.get_workflow_handle(workflow_id).signal(SessionWorkflow.cancel_batch)

        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                await signal.wait()
                await self._client.run(interrupt)

            nursery.start_soon(watch)
            if self._watch_interval is not None:
                nursery.start_soon(
                    self._watch_worker, session_id, workflow_id, self._watch_interval
                )
            # captured, so that a failed update leaves as itself (the documented
            # WorkflowUpdateFailedError), not inside the nursery's ExceptionGroup
            ran = await outcome.acapture(self._client.run, start_and_run)
            nursery.cancel_scope.cancel()
        done = ran.unwrap()
        # the batch's own events: from its batch/start, whatever the session's length
        events = await self._read(session_id, done.first_seq)
        return batch_from_log(events, done.batch_id)

    async def close_session(self, session_id: str) -> None:
        """End the session's workflow once its batches are done (its log stays). A checkpoint."""

        async def close(client: Client) -> None:
            await client.get_workflow_handle(f"dsh-tools-session/{session_id}").signal(
                SessionWorkflow.close
            )

        await self._client.run(close)


@dataclass(frozen=True)
class _Attempt:
    """A running batch attempt as Temporal sees it."""

    workflow_id: str
    run_id: str
    activity_id: str
    attempt: int
    last_heartbeat: datetime | None


async def _running_attempt(client: Client, workflow_id: str) -> _Attempt | None:
    """The session's running batch attempt and its last heartbeat, or ``None``."""
    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return None  # noqa: ASYNC910 - asyncio code: it awaited the describe
    for pending in description.raw_description.pending_activities:
        if (
            pending.activity_type.name == BATCH_ACTIVITY
            and pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        ):
            heartbeat = (
                pending.last_heartbeat_time.ToDatetime()
                if pending.HasField("last_heartbeat_time")
                else None
            )
            return _Attempt(
                workflow_id, description.run_id, pending.activity_id, pending.attempt, heartbeat
            )
    return None


async def _fail_attempt(client: Client, attempt: _Attempt) -> None:
    """Fail the session's running batch attempt (its worker is gone), so Temporal retries it
    at once. An attempt that ended meanwhile is left alone (Temporal refuses the failure).
    """
    try:
        await client.get_async_activity_handle(
            workflow_id=attempt.workflow_id, run_id=attempt.run_id, activity_id=attempt.activity_id
        ).fail(
            ApplicationError(
                "the worker running the batch let its session go without ending it, and "
                "stopped heartbeating (it died)",
                type=WORKER_LOST,
                # at once: the dead worker holds nothing any more
                next_retry_delay=timedelta(milliseconds=10),
            )
        )
    except RPCError:
        return  # noqa: ASYNC910 - asyncio code: it ended, or moved on: nothing to fail


def batch_from_log(events: Sequence[SessionEvent], batch_id: str) -> ToolBatch:
    """The batch ``batch_id`` of a session log as a :class:`~dsh_tools.ToolBatch`: one result
    per call of its ``batch/start`` in model order, and its contexts.

    Raises:
        LookupError: the log holds no finished batch ``batch_id`` (or not a result per call).
    """
    record = SessionReader(events).batch(batch_id)
    if record is None:
        raise LookupError(f"the session log holds no batch {batch_id}")
    reason = None if record.end is None else record.end.reason
    if reason == "suspended":
        raise LookupError(
            f"batch {batch_id} is suspended: a deferred approval waits for its decision "
            "(resume_tool_calls(..., approvals=...) on a machine that reads the session log)"
        )
    batch = None if reason is None else logged_batch(record)
    if batch is None:
        answered = {e.call_id for _, e in record.events if isinstance(e, ToolResultEvent)}
        missing = [call.call_id for call in record.calls if call.call_id not in answered]
        raise LookupError(
            f"batch {batch_id} is not finished in the session log (calls without a result: "
            f"{missing})"
        )
    return batch
