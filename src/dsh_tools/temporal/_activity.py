"""The batch activity: one attempt of a tool batch, run on the worker's trio loop against the
session's PostgreSQL log.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Sequence
from typing import Any

import outcome
import psycopg
import trio
from psycopg_pool import ConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    SessionEvent,
    SessionLogLockedError,
    ToolCallRequest,
    ToolRegistry,
    resume_tool_calls,
    run_tool_calls,
)
from dsh_tools._for_integrations import SessionReader, logged_batch
from dsh_tools.postgres import PostgresSessionLog

from ._observe import WorkerMetrics, say
from ._workflow import BATCH_ACTIVITY, BatchOutcome, BatchRequest

__all__ = ["WORKER_STOPPED", "Attempt", "BatchActivity", "last_batch"]

WORKER_STOPPED = "WorkerStopped"
"""The error type of an attempt its worker left when its drain ran out (retried at once)."""


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


class _TimedLog(PostgresSessionLog):
    """The session log, each append's latency recorded (``dsh_tools.worker.append.duration``)."""

    __slots__ = ("_metrics",)

    def __init__(self, metrics: WorkerMetrics, /, *args: Any, **kwargs: Any) -> None:
        self._metrics = metrics
        super().__init__(*args, **kwargs)

    def _store(self, seq: int, line: bytes) -> None:
        began = time.perf_counter()
        try:
            super()._store(seq, line)
        finally:
            self._metrics.append_duration.record(time.perf_counter() - began)


class Attempt:
    """One attempt's batch on the trio loop, which a worker whose drain ran out leaves as a
    crash would (:meth:`leave`).
    """

    __slots__ = ("_log", "left", "scope")

    def __init__(self) -> None:
        self._log: PostgresSessionLog | None = None
        self.scope = trio.CancelScope()
        self.left = False
        """:meth:`leave` was called."""

    def hold(self, log: PostgresSessionLog) -> None:
        """The attempt's log, open (:meth:`leave` closes it)."""
        self._log = log

    def leave(self) -> None:
        """Stop the batch and write nothing more to its log (on the trio thread): the log is
        closed first (its session's lock goes), then the batch is cancelled, so the calls
        that were running have no result and the batch no ``batch/end``, as after a crash.
        The next attempt finishes it: an interrupted idempotent call runs again, any other
        interrupted call gets ``TOOL_INTERRUPTED``, the calls that never started run there.
        """
        self.left = True
        if self._log is not None:
            self._log.close()
        self.scope.cancel()


def _retrieve(future: asyncio.Future[BatchOutcome]) -> None:
    # a batch left to the next attempt ends with an error nobody awaits any more
    if not future.cancelled():
        future.exception()


class BatchActivity:
    """The activity, bound to the worker's registry, database and trio loop."""

    def __init__(
        self,
        registry: ToolRegistry,
        conninfo: str,
        schema: str,
        synchronous_commit: bool,
        token: trio.lowlevel.TrioToken,
        metrics: WorkerMetrics | None = None,
        pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] | None = None,
    ) -> None:
        self._metrics = WorkerMetrics() if metrics is None else metrics
        self._pool = pool
        self._registry = registry
        self._conninfo = conninfo
        self._schema = schema
        self._synchronous_commit = synchronous_commit
        self._token = token
        self.running = 0
        """Attempts in progress on this worker."""

    @activity.defn(name=BATCH_ACTIVITY)
    async def run_batch(self, request: BatchRequest) -> BatchOutcome:
        """Run (or finish) the batch on the trio loop, heartbeating until it has ended.

        Cancelled because the agent's signal fired: the batch's signal fires, and the batch
        ends ``"aborted"`` with every call answered before this returns. Cancelled because
        the worker is stopping and its drain ran out: the batch is left as a crash leaves it
        (:meth:`Attempt.leave`) and the attempt fails, so Temporal retries it at once on
        another worker. Cancelled for another reason (Temporal gave up on this attempt): the
        batch is left running; the next attempt, on any worker, waits for its log
        (``SessionLogLockedError`` is retried) and finishes or returns it.
        """
        loop = asyncio.get_running_loop()
        controller = CancelController()
        info = activity.info()
        attempt = Attempt()

        finished: asyncio.Future[BatchOutcome] = loop.create_future()
        finished.add_done_callback(_retrieve)

        def deliver(result: outcome.Outcome[BatchOutcome]) -> None:
            if finished.done():
                return
            if isinstance(result, outcome.Value):
                finished.set_result(result.value)
            elif isinstance(result, outcome.Error):
                error = result.error
                if isinstance(error, trio.Cancelled):
                    error = RuntimeError("the worker's trio loop stopped")
                finished.set_exception(error)

        async def batch() -> None:
            result = await outcome.acapture(
                self._run_on_trio, request, controller, info.attempt, attempt
            )
            with contextlib.suppress(RuntimeError):  # the asyncio loop has stopped
                loop.call_soon_threadsafe(deliver, result)

        # the batch runs as a task of the worker's trio loop, its outcome handed back to this
        # loop, which keeps heartbeating meanwhile; the context (the activity's trace span)
        # goes with it
        context = contextvars.copy_context()
        self._token.run_sync_soon(
            functools.partial(trio.lowlevel.spawn_system_task, batch, context=context)
        )
        interval = max(request.heartbeat_timeout / 4, 0.05)
        self.running += 1
        try:
            while True:
                try:
                    return await asyncio.wait_for(asyncio.shield(finished), interval)
                except TimeoutError:
                    # the first a quarter of the timeout in: a quick batch sends none (the
                    # heartbeat timeout counts from the attempt's start)
                    activity.heartbeat()
                    continue
                except asyncio.CancelledError:
                    details = activity.cancellation_details()
                    if details is not None and details.worker_shutdown:
                        self._token.run_sync_soon(attempt.leave)
                        say(
                            logging.WARNING,
                            "batch.left",
                            session=request.session_id,
                            attempt=info.attempt,
                            why="the worker is stopping and its drain timeout passed",
                        )
                        self._metrics.batches.add(1, {"outcome": "left"})
                        raise ApplicationError(
                            f"session {request.session_id!r}: the worker stopped before the "
                            "batch ended (its drain timeout passed); the next attempt finishes it",
                            type=WORKER_STOPPED,
                        ) from None
                    if details is None or not details.cancel_requested:
                        # Temporal gave up on this attempt (its heartbeats came too late): the
                        # batch goes on here while it can, and whoever runs it next finds it
                        say(
                            logging.WARNING,
                            "batch.abandoned",
                            session=request.session_id,
                            attempt=info.attempt,
                            why="Temporal gave this attempt up (heartbeats late?); it goes on "
                            "here, and the next attempt waits for its log",
                        )
                        raise
                    # the agent interrupted the batch: it still ends with every call answered
                    say(logging.INFO, "batch.interrupt", session=request.session_id)
                    self._token.run_sync_soon(controller.cancel)
                    return await finished
        finally:
            self.running -= 1

    async def _run_on_trio(
        self,
        request: BatchRequest,
        controller: CancelController,
        attempt: int,
        held: Attempt | None = None,
    ) -> BatchOutcome:
        held = Attempt() if held is None else held
        began = time.monotonic()
        session = request.session_id
        try:
            ended, how = await self._attempt(request, controller, attempt, held)
        except BaseException as exc:
            if held.left:
                raise RuntimeError(
                    f"session {session!r}: left to the next attempt (the worker stopped)"
                ) from None
            if isinstance(exc, SessionLogLockedError):
                say(
                    logging.WARNING,
                    "batch.wait",
                    session=session,
                    attempt=attempt,
                    why="its log is locked by another writer (an earlier attempt still "
                    "running, or its database connection not yet closed); Temporal retries",
                )
            elif isinstance(exc, psycopg.OperationalError | TimeoutError):
                say(
                    logging.WARNING,
                    "batch.database",
                    exc_info=exc,
                    session=session,
                    attempt=attempt,
                    why="the session logs' database did not answer; Temporal retries",
                )
            elif isinstance(exc, Exception):
                say(logging.ERROR, "batch.failed", exc_info=exc, session=session, attempt=attempt)
            if isinstance(exc, Exception):
                self._metrics.batches.add(1, {"outcome": "failed"})
            raise
        self._metrics.batches.add(1, {"outcome": how, "reason": ended.reason})
        if how == "resumed":
            self._metrics.failovers.add(1)
        say(
            logging.INFO,
            "batch.end",
            session=session,
            batch=ended.batch_id,
            reason=ended.reason,
            how=how,
            attempt=attempt,
            calls=len(request.calls),
            seconds=round(time.monotonic() - began, 3),
        )
        return ended

    async def _attempt(
        self, request: BatchRequest, controller: CancelController, attempt: int, held: Attempt
    ) -> tuple[BatchOutcome, str]:
        """Run, resume or report the batch; how (``"ran"``, ``"resumed"``, ``"reported"``)."""
        calls = tuple(
            ToolCallRequest(call_id=call.call_id, name=call.name, arguments=call.arguments)
            for call in request.calls
        )
        # the connection is opened off the loop; every append then blocks it for one round trip
        log = await trio.to_thread.run_sync(
            functools.partial(
                _TimedLog,
                self._metrics,
                self._conninfo,
                request.session_id,
                schema=self._schema,
                synchronous_commit=self._synchronous_commit,
                # a result the worker holds is stored once the database is back (a restart),
                # not dropped for the next attempt to call "may have run"
                append_retry=request.batch_timeout,
                pool=self._pool,
            )
        )
        held.hold(log)
        since = request.from_seq
        how = "reported"
        events: list[SessionEvent] = []
        done: tuple[BatchStartEvent, BatchEndEvent | None] | None = None
        try:
            with held.scope:
                # the log from where this batch starts (the workflow knows: after the session's
                # last batch), off the loop the worker's batches share
                events = await trio.to_thread.run_sync(log.events_since, since)
                found = last_batch(events, calls, request.turn, request.step)
                if found is not None and found[1] is not None and _unanswered(events):
                    # the trio run around the batch was cancelled (its worker stopped without
                    # leaving it): it ended with calls that have no result; they run here
                    found = (found[0], None)
                done = found  # a batch that ended already (a retried attempt) is only reported
                if found is None:
                    how = "ran"
                    say(
                        logging.DEBUG,
                        "batch.start",
                        session=request.session_id,
                        calls=len(calls),
                        attempt=attempt,
                    )
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
                    how = "resumed"
                    say(
                        logging.INFO,
                        "batch.resume",
                        session=request.session_id,
                        batch=found[0].batch_id,
                        attempt=attempt,
                        why="an earlier attempt left it open (its worker died or stopped)",
                    )
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
        if held.left:
            raise RuntimeError("left")  # replaced by the caller's message
        end = None if done is None else done[1]
        if done is None or end is None:
            raise RuntimeError(
                f"session {request.session_id!r}: the batch left no batch/end in the log"
            )
        first = next(index for index, event in enumerate(events) if event == done[0])
        if how != "reported":
            self._metrics.count_results(events[first:])
        return (
            BatchOutcome(
                batch_id=done[0].batch_id,
                reason=end.reason,
                attempt=attempt,
                first_seq=since + first,
                next_seq=since + len(events),
            ),
            how,
        )
