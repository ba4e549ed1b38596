"""The Temporal side: one workflow per agent session, one activity per tool batch.

Workflow code must be deterministic (Temporal replays it), so it only orders batches and
carries small values: the calls of a batch in, the batch's id and end reason out. Tool content
(arguments aside) never travels through Temporal (its payloads are capped at 2 MB): the
workers write it to the session's :class:`~dsh_tools.postgres.PostgresSessionLog`, and the
agent reads the batch back from there.

This module imports only the standard library and ``temporalio``. The workers run it without
Temporal's sandbox (it is this package's own): keep it deterministic, with no I/O, clock or
randomness of its own.
"""

import asyncio
from dataclasses import dataclass, replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

__all__ = [
    "BATCH_ACTIVITY",
    "BatchCall",
    "BatchOutcome",
    "BatchRequest",
    "SessionWorkflow",
]

BATCH_ACTIVITY = "dsh-tools-batch"
"""The activity type of one tool batch."""


@dataclass(frozen=True)
class BatchCall:
    """One call of a batch, as the model emitted it."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class BatchRequest:
    """What a worker needs to run (or finish) one batch."""

    session_id: str
    calls: list[BatchCall]
    turn: int
    step: int
    max_parallel_tool_calls: int
    capacity_limits: dict[str, int] | None
    heartbeat_timeout: float
    batch_timeout: float
    from_seq: int = 0
    """Where the worker reads the session log from: the sequence number after the session's
    last batch (set by the workflow), so a batch costs the same at event 50,000 as at 50."""


@dataclass(frozen=True)
class BatchOutcome:
    """How a batch ended: its id in the session log and its ``batch/end`` reason."""

    batch_id: str
    reason: str
    attempt: int
    """The activity attempt that finished it (1: the first worker; more: it was resumed)."""
    first_seq: int = 0
    """The sequence number of the batch's ``batch/start`` (the agent reads from there)."""
    next_seq: int = 0
    """The sequence number after the batch's last event (the next batch reads from there)."""


@workflow.defn(name="dsh-tools-session")
class SessionWorkflow:
    """One agent session: runs its batches one at a time, each as a heartbeating activity that
    Temporal retries on another worker when the worker running it dies.
    """

    @workflow.init
    def __init__(self, session_id: str, next_seq: int = 0) -> None:
        self._turn = asyncio.Lock()
        self._current: workflow.ActivityHandle[BatchOutcome] | None = None
        self._closing = False
        # where the session's next batch starts in its log (0: not known, read it whole)
        self._next_seq = next_seq

    @workflow.run
    async def run(self, session_id: str, next_seq: int = 0) -> None:
        """Live until closed, continuing as new when the history grows long (carrying where
        the next batch starts in the log).
        """
        await workflow.wait_condition(
            lambda: self._closing or workflow.info().is_continue_as_new_suggested()
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        if not self._closing:
            workflow.continue_as_new(args=[session_id, self._next_seq])

    @workflow.update(name="run_batch")
    async def run_batch(self, request: BatchRequest) -> BatchOutcome:
        """Run one batch (after the session's earlier ones) and return how it ended."""
        async with self._turn:
            request = replace(request, from_seq=self._next_seq)
            handle = workflow.start_activity(
                BATCH_ACTIVITY,
                request,
                result_type=BatchOutcome,
                start_to_close_timeout=timedelta(seconds=request.batch_timeout),
                heartbeat_timeout=timedelta(seconds=request.heartbeat_timeout),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=200),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=5),
                    # a batch its worker refuses (arguments, a corrupt log) fails the same on
                    # every worker; a locked log or a lost connection is worth another try
                    non_retryable_error_types=["TypeError", "ValueError", "SessionLogCorruptError"],
                ),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            self._current = handle
            try:
                outcome = await handle
            finally:
                self._current = None
            self._next_seq = max(self._next_seq, outcome.next_seq)
            return outcome

    @workflow.signal(name="cancel_batch")
    def cancel_batch(self) -> None:
        """Interrupt the batch in progress (its worker fires the batch's signal)."""
        if self._current is not None:
            self._current.cancel()

    @workflow.signal(name="close")
    def close(self) -> None:
        """End the session's workflow once its batches are done."""
        self._closing = True
