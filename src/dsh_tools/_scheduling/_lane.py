"""The lane: which call of a batch may start now, and the commits in model order.

Everything except the bodies (and the ``execute`` wrappers around them) runs on the lane, one
call at a time, in model order: the ``tool/call`` append and ``pre_execute`` / approval /
guards when a call starts (:meth:`Batch._start`); ``post_execute`` / ``result`` observers / the
``tool/result`` append when it commits (:meth:`Batch._commit_ready`). Consecutive parallel
calls form a rolling pool (:meth:`Batch._fill_pool` decides, call by call, whether the next one
may join it now); an exclusive call is a barrier (:meth:`Batch._run_barrier`). The log bracket
around a batch is ``_bracket``'s, capacity accounting ``_capacity``'s, the nursery the bodies
run in ``_bodies``'.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Final

import attrs
import trio

from dsh_tools._pipeline._call import (
    ALLOWED,
    PENDING,
    REPLAYED,
    SUSPENDED,
    CallEnv,
    PipelineHost,
    PreparedCall,
)
from dsh_tools._pipeline._complete import complete, complete_now
from dsh_tools._pipeline._held import dispatch_holding, queue_claim
from dsh_tools._pipeline._open import apply_policies, open_call
from dsh_tools._pipeline._registry import ToolRegistry, pipeline_host
from dsh_tools._pipeline._results import ABORTED_BEFORE_DISPATCH
from dsh_tools._sessions._batch_log import BatchLog
from dsh_tools._values._arguments import parse_call_arguments
from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._content import HookContext
from dsh_tools._values._definition import runs_in_parallel
from dsh_tools._values._execution import RunBatch, ToolExecutionResult
from dsh_tools._values._json import JsonValue
from dsh_tools._values._signal import CancelSignal, linked_cancel_scope

from ._bodies import linked_bodies, lone_as_itself, start_body
from ._capacity import Capacity

__all__ = ["Batch"]

_READY: Final = 1
_NEVER: Final = CancelSignal.never()
# the most starts, or commits, the lane makes between two schedule points
_STEPS_PER_CHECKPOINT: Final = 64


@attrs.define(eq=False, slots=True)
class Batch:
    """The lane's state for one batch. Everything here is touched only by the lane task;
    dispatch tasks report back through ``settled`` and ``lot``.
    """

    registry: ToolRegistry
    # the batch's calls, in model order (a streamed batch's list grows as they arrive)
    calls: Sequence[ToolCallRequest]
    signal: CancelSignal
    agent: object | None
    cap: int
    # the session events (None: no session log) and the capacity classes (None: no limits)
    log: BatchLog | None
    capacity: Capacity | None
    turn: int
    step: int
    batch_id: str
    # a resumed batch: the attempt of each call run again, by call id (None: a fresh batch)
    attempts: dict[str, int] | None = None
    # the next call's parsed arguments, kept from its classification for its start
    next_index: int = -1
    next_arguments: object = None
    # per call, O(1) each: the prepared call until it commits, whether it is ready to commit,
    # its result
    prepared: list[PreparedCall | None] = attrs.field(init=False)
    ready: bytearray = attrs.field(init=False)
    results: list[ToolExecutionResult | None] = attrs.field(init=False)
    contexts: list[HookContext] = attrs.field(init=False, factory=lambda: list[HookContext]())
    host: PipelineHost = attrs.field(init=False)
    env: CallEnv = attrs.field(init=False)
    started: int = 0
    committed: int = 0
    in_flight: int = 0
    pool_closed: bool = False
    active: bool = True
    since_checkpoint: int = 0
    # the pool's settled calls (appended by body tasks) and where the lane waits for them
    settled: deque[int] = attrs.field(init=False, factory=lambda: deque[int]())
    lot: trio.lowlevel.ParkingLot = attrs.field(init=False, factory=trio.lowlevel.ParkingLot)
    parked: bool = False
    # a streamed batch: no call arrives any more (exhausted, stopped or failed); a listed
    # batch's calls are all there from the start
    stream_done: bool = True
    # what the call stream raised (the batch then starts no further call)
    stream_error: BaseException | None = None
    reporter: Callable[[int], None] = attrs.field(init=False)
    # the calls whose approval was deferred (committed with a placeholder, no tool/result),
    # with their arguments
    suspended: list[tuple[int, JsonValue]] = attrs.field(
        init=False, factory=lambda: list[tuple[int, JsonValue]]()
    )

    def __attrs_post_init__(self) -> None:
        n = len(self.calls)
        self.host = pipeline_host(self.registry)
        log = self.log
        self.env = CallEnv(
            self.host,
            self.signal,
            self.agent,
            None,
            RunBatch(self.batch_id, self.attempts, None if log is None else log.progress),
        )
        self.prepared = [None] * n
        self.ready = bytearray(n)
        self.results = [None] * n
        self.reporter = _reporter(self)

    def uncommitted(self) -> Iterator[tuple[int, ToolExecutionResult]]:
        """Each started call without its ``tool/result``, with the result that balances it:
        how its body was interrupted, or ``ABORTED_BEFORE_DISPATCH`` when it never ran.
        """
        # a suspended call waits for nothing once its batch failed: its body never ran
        for index, _ in self.suspended:
            yield index, ABORTED_BEFORE_DISPATCH
        self.suspended.clear()
        for index in range(self.committed, self.started):
            prepared = self.prepared[index]
            yield (
                index,
                (ABORTED_BEFORE_DISPATCH if prepared is None else prepared.interrupted_result()),
            )

    def inject(self, context: HookContext) -> None:
        if not self.active:
            raise RuntimeError("inject_context() called outside an active batch")
        self.contexts.append(context)

    async def run_lane(self) -> None:  # noqa: ASYNC910 (the bracket checkpoints first)
        """Start every call, barrier by barrier and pool by pool, until the last one has
        started (a streamed batch: and no call arrives any more) or the signal fired; every
        started call has committed when it returns.
        """
        calls = self.calls
        while not self.signal.cancelled:
            if self.started < len(calls):
                if self.stream_error is not None:
                    break  # the stream failed: no further call starts
                if self._is_parallel(self.started):
                    await lone_as_itself(self._run_pool())
                else:
                    await self._run_barrier()
            elif self.stream_done:
                break
            else:
                await self._await_arrival()

    async def _await_arrival(self) -> None:
        """Wait until a call arrives, the stream ends, or the signal fires (nothing is in
        flight: every started call has committed).
        """
        with linked_cancel_scope(self.signal):
            self.parked = True
            try:
                await self.lot.park()
            finally:
                self.parked = False

    def wake(self) -> None:
        """Wake the lane if it waits (for a settled call, or for a call to arrive)."""
        if self.parked:
            self.parked = False
            self.lot.unpark()

    def _is_parallel(self, index: int) -> bool:
        """Classify the call; its arguments, parsed and frozen here, wait for its start."""
        call = self.calls[index]
        if self.next_index != index:
            self.next_arguments = parse_call_arguments(call.arguments)
            self.next_index = index
        return runs_in_parallel(self.host.lookup(call.name, self.agent), self.next_arguments)

    def _start(self, index: int) -> PreparedCall:
        """Start the call at ``index`` (on the lane, after a cancel point): append its
        ``tool/call``, then run its stages 0-1 (and 5-6 when no ``pre_execute`` listener hears
        it) on the arguments its classification parsed. Await the policies a ``pre_execute``
        listener makes pending next.
        """
        call = self.calls[index]
        if self.log is not None:
            self.log.call(index)
        self.started = index + 1
        if self.next_index == index:
            arguments = self.next_arguments
            self.next_index = -1
            self.next_arguments = None
        else:
            arguments = parse_call_arguments(call.arguments)
        prepared = self.prepared[index] = open_call(self.env, call, arguments)
        return prepared

    async def _commit_ready(self) -> None:  # noqa: ASYNC910 (the lane yields per group)
        """Commit every call at the cursor that is ready, in model order: its complete stages,
        its ``tool/result``, its contexts into the batch FIFO (on the lane).
        """
        while self.committed < self.started and self.ready[self.committed] == _READY:
            index = self.committed
            prepared = self.prepared[index]
            assert prepared is not None
            result = complete_now(prepared)
            if result is None:
                result = await complete(prepared)
            self.results[index] = result
            # a suspended call's placeholder is not logged, nor is a result replayed from the
            # log of a resumed batch
            stage = prepared.stage
            if stage == SUSPENDED:
                self.suspended.append((index, prepared.arguments))
            elif self.log is not None and stage != REPLAYED:
                self.log.result(index, result)
            self.prepared[index] = None
            self.contexts.extend(result.additional_contexts)
            self.committed = index + 1
            # the lane yields once per commit group, not per commit: a group is whatever
            # committed since the lane last waited, capped so it never runs unboundedly
            self.since_checkpoint += 1
            if self.since_checkpoint >= _STEPS_PER_CHECKPOINT:
                self.since_checkpoint = 0
                await trio.lowlevel.cancel_shielded_checkpoint()

    async def _run_barrier(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        index = self.started
        prepared = self._start(index)
        if prepared.stage == PENDING:
            await apply_policies(prepared)
        if prepared.stage == ALLOWED:
            await dispatch_holding(prepared, self.host.lookup(self.calls[index].name, self.agent))
        self.ready[index] = _READY
        await self._commit_ready()

    async def _run_pool(self) -> None:
        # bodies append their index to ``settled`` and unpark the lane, which parks only when
        # nothing is settled
        settled = self.settled
        failure: Exception | None = None
        self.pool_closed = False
        pool_done = trio.Event()
        async with trio.open_nursery() as nursery:
            try:
                # one cancel scope linked to the batch signal for the whole pool (not one per
                # call): bodies without execute wrappers run in a nursery inside it
                bodies: trio.Nursery | None = None
                if self.signal is not _NEVER:
                    bodies = await nursery.start(linked_bodies, self.signal, pool_done, nursery)
                # the group's first call starts without re-classification
                await self._fill_pool(nursery, bodies, first=True)
                while True:
                    await self._fill_pool(nursery, bodies, first=False)
                    if not self.in_flight:
                        break
                    if not settled:
                        self.parked = True
                        try:
                            await self.lot.park()
                        finally:
                            self.parked = False
                        self.since_checkpoint = 0
                    # every result that is ready, then one commit group
                    while settled:
                        self.in_flight -= 1
                        index = settled.popleft()
                        if self.capacity is not None:
                            self.capacity.release(index)
                        self.ready[index] = _READY
                    await self._commit_ready()
            except Exception as exc:
                # the scheduler itself failed: cancel and await every started body before
                # the error leaves, and raise it as itself rather than in an ExceptionGroup
                failure = exc
                nursery.cancel_scope.cancel()
            finally:
                pool_done.set()
        settled.clear()
        if failure is not None:
            raise failure

    async def _fill_pool(  # noqa: ASYNC910 (a cancel point at entry; none may start after)
        self, nursery: trio.Nursery, bodies: trio.Nursery | None, *, first: bool
    ) -> None:
        """Start calls while the pool may take them (``first``: the group's first call, which
        starts without re-classification), in this one coroutine.
        """
        # a fill starts no call once the caller's scope is cancelled
        await trio.lowlevel.checkpoint_if_cancelled()
        calls = self.calls
        n = len(calls)
        signal = self.signal
        lookup = self.host.lookup
        wrappers = self.host.hooks.execute
        limited = self.host.gate.limits_classes
        while True:
            index = self.started
            if first:
                first = False
                tool = lookup(calls[index].name, self.agent)
            elif (
                self.pool_closed
                or self.in_flight >= self.cap
                or index >= n
                or (signal is not _NEVER and signal.cancelled)
            ):
                break
            else:
                # _is_parallel, inline: classify the call on the arguments _start will take
                call = calls[index]
                arguments = self.next_arguments = parse_call_arguments(call.arguments)
                self.next_index = index
                tool = lookup(call.name, self.agent)
                if not runs_in_parallel(tool, arguments):
                    # re-classified: a call that is no longer parallel closes the pool (it
                    # becomes the next barrier)
                    self.pool_closed = True
                    break
            capacity = self.capacity
            capacity_class = None
            if capacity is not None:
                capacity_class = capacity.limited_class(tool)
                # the model-order start rule: a call waiting for its class holds back the rest
                if capacity_class is not None and capacity.full(capacity_class, tool):
                    break
            prepared = self._start(index)
            if prepared.stage == PENDING:
                await apply_policies(prepared)
            # what the registry holds for it: queued now, in model order, awaited in its task
            # (the common case, a tool without keys or limited class, asks nothing: inline)
            ticket = None
            if prepared.stage == ALLOWED and (
                tool is not None
                and (tool.conflict_keys is not None or (limited and tool.capacity_class))
            ):
                ticket = queue_claim(prepared, tool)
            if prepared.stage == ALLOWED:
                self.in_flight += 1
                if capacity is not None and capacity_class is not None:
                    capacity.take(index, capacity_class, tool)
                start_body(
                    prepared,
                    index,
                    self.reporter,
                    ticket,
                    nursery,
                    bodies,
                    wrappers.active and bool(wrappers.for_agent(self.agent)),
                )
                # a large pool's bodies run while it is still filling (as each start of the
                # original awaits): the calls started so far hold a task and a frame each only
                # until their body has run, not until the last call has started. It is also
                # where a cancellation of the caller's scope stops the filling: between two
                # of the lane's awaits nothing else runs, so only the lane itself could have
                # cancelled it since (a guard cancelling a scope, say), and a sync start is no
                # cancel point of its own (saving a coroutine per call)
                self.since_checkpoint += 1
                if self.since_checkpoint >= _STEPS_PER_CHECKPOINT:
                    self.since_checkpoint = 0
                    await trio.lowlevel.checkpoint()
            else:
                self.ready[index] = _READY
                await self._commit_ready()

    def skip_unstarted(self) -> None:
        """Give every call that never started a balanced synthetic ``tool/call`` +
        ``tool/result`` pair and the canonical ``ABORTED_BEFORE_DISPATCH`` result, without
        running any registry stage for it.
        """
        if self.started == len(self.calls):
            return
        aborted = ABORTED_BEFORE_DISPATCH
        for index in range(self.started, len(self.calls)):
            if self.log is not None:
                self.log.call(index)
                self.log.result(index, aborted)
            self.results[index] = aborted
        self.started = self.committed = len(self.calls)


def _reporter(batch: Batch) -> Callable[[int], None]:
    """What a pool's body task calls once its call's outcome is recorded."""
    settled = batch.settled

    def report(index: int) -> None:
        settled.append(index)
        if batch.parked:
            # once: the bodies that report before the lane runs again need not wake it
            batch.parked = False
            batch.lot.unpark()

    return report
