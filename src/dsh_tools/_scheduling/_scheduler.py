"""The scheduler: run one model response's batch of tool calls as barriers and rolling pools.

Timeline of one batch (``P`` parallel-safe, ``X`` exclusive, one second each, cap 2)::

    time (s)  0    1    2    3    4
    P1        [====]                    pool 1: at most 2 bodies at once; P3 takes the
    P2        [====]                    first free slot (rolling, not fixed windows)
    P3             [====]
    X4                  [====]          barrier: alone, after pool 1 has drained
    P5                       [====]     pool 2
    P6                       [====]

Everything except the bodies (and the ``execute`` wrappers around them) runs on one *lane*,
one call at a time, in model order: the ``tool/call`` append and ``pre_execute`` / approval /
guards when a call starts; ``post_execute`` / ``result`` observers / the ``tool/result`` append
when it commits. A call commits only after every earlier call has, so a fast later call waits
for a slow earlier one. Calls settled before dispatch (denied by a policy or a guard, or failed
in a policy) never occupy pool capacity.

Structured concurrency: every body runs in a nursery owned by :func:`run_tool_calls`, so no
body outlives the batch. If the scheduler itself fails (a session append raises, a classifier
raises), the pool's nursery is cancelled and every started body is awaited before the error
propagates; a cancellation of the caller's own trio scope propagates as ``trio.Cancelled``
after every body has unwound.
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Final, cast

import attrs
import trio

from dsh_tools._pipeline._approval_setup import check_approval_setup
from dsh_tools._pipeline._call import (
    ALLOWED,
    PENDING,
    REPLAYED,
    SUSPENDED,
    CallEnv,
    PipelineHost,
    PreparedCall,
    open_call,
    resume_suspended,
)
from dsh_tools._pipeline._hooks import BatchHook, BatchNext
from dsh_tools._pipeline._registry import ToolRegistry, pipeline_host
from dsh_tools._pipeline._results import ABORTED_BEFORE_DISPATCH, INTERRUPTED, freeze_context
from dsh_tools._sessions._batch_log import BatchLog
from dsh_tools._sessions._grants import pending_requests
from dsh_tools._sessions._session import SessionLog
from dsh_tools._values._arguments import parse_call_arguments
from dsh_tools._values._batch import (
    SuspendedCall,
    ToolBatch,
    ToolBatchInfo,
    ToolBatchStatistics,
    ToolCallRequest,
)
from dsh_tools._values._checks import check_int
from dsh_tools._values._content import HookContext
from dsh_tools._values._definition import ToolDefinition, runs_in_parallel
from dsh_tools._values._execution import ApprovalOutcome, RunBatch, ToolExecutionResult
from dsh_tools._values._json import JsonValue
from dsh_tools._values._presentation import call_view_of
from dsh_tools._values._signal import CancelSignal, linked_cancel_scope

# ToolBatch, ToolBatchInfo and ToolCallRequest live in _batch (below _hooks); importing them
# from here keeps working
__all__ = [
    "DEFAULT_MAX_PARALLEL_TOOL_CALLS",
    "ResumedBatch",
    "capacity_of",
    "batch_statistics",
    "check_entry",
    "check_capacity_limits",
    "current_turn",
    "inject_context",
    "run_tool_calls",
]

DEFAULT_MAX_PARALLEL_TOOL_CALLS: Final = 10

logger: Final = logging.getLogger("dsh_tools")


_CAPACITY_LIMITS_TYPE: Final = "capacity_limits must map class names (str) to positive integers"


def check_capacity_limits(value: object) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{_CAPACITY_LIMITS_TYPE}, not {type(value).__name__}")
    limits: dict[str, int] = {}
    for name, limit in cast("Mapping[object, object]", value).items():
        if type(name) is not str or not name:
            raise TypeError(f"{_CAPACITY_LIMITS_TYPE}: {name!r} is not a class name")
        limits[name] = check_int(f'capacity_limits["{name}"]', limit)
    return limits


def capacity_of(limits: dict[str, int]) -> _Capacity | None:
    """The capacity classes of a batch with ``limits`` (checked), ``None`` without limits."""
    return _Capacity(limits) if limits else None


def check_entry(registry: object, session: object, turn: object, step: object) -> None:
    if not isinstance(registry, ToolRegistry):
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
    if session is not None and not (
        callable(getattr(session, "append", None)) and callable(getattr(session, "events", None))
    ):
        raise TypeError(
            f"session must be a SessionLog (with append and events) or None, "
            f"not {type(session).__name__}"
        )
    check_int("turn", turn, least=0)
    check_int("step", step, least=0)


async def run_tool_calls(
    registry: ToolRegistry,
    calls: Iterable[ToolCallRequest],
    *,
    signal: CancelSignal,
    agent: object | None = None,
    max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    session: SessionLog | None = None,
    turn: int = 0,
    step: int = 0,
    capacity_limits: Mapping[str, int] | None = None,
) -> ToolBatch:
    """Run one model response's tool calls and return one result per call, in model order.

    Consecutive calls that the registry classifies as parallel (lazily: a call is classified
    right before it would start) form a rolling pool of at most ``max_parallel_tool_calls``
    bodies; an exclusive call is a barrier that runs alone. Policies, observers and session
    appends run one call at a time in model order; only ``execute`` wrappers and bodies
    overlap.

    Args:
        registry: the registry whose pipeline runs each call.
        calls: the calls of one assistant message, in model order.
        signal: the step's cancel signal, shared by every call. Once it fires, no further call
            starts, bodies in flight drain (a body the interrupt reached gives ``ABORTED``; one that
            had settled keeps its outcome), and every call
            that never started gets an ``ABORTED_BEFORE_DISPATCH`` result.
        agent: the agent the calls belong to (routes them to its registry scope).
        max_parallel_tool_calls: the most bodies in flight at once (a positive ``int``; ``1``
            runs every call serially).
        session: where to append durable events: ``batch/start`` (every call, with a fresh
            batch id), ``tool/call`` when a call starts, ``tool/result`` when it commits (with
            the result's contexts), one ``context/message`` per batch context, then
            ``batch/end`` (``completed``; ``aborted`` once ``signal`` fired or the caller's
            scope was cancelled; ``failed`` when the scheduler itself raised). An empty batch
            appends nothing. :func:`~dsh_tools.resume_tool_calls` finishes a batch whose
            process stopped from these events.
        turn: recorded on the events.
        step: recorded on the events.
        capacity_limits: capacity classes, e.g. ``{"network": 2, "shell": 1}``: inside a parallel
            pool, a call of a tool whose ``capacity_class`` is listed also needs a free slot of
            that class. Calls still start in model order: a call waiting for its class holds
            back the calls behind it, so the order and the results stay deterministic. Classes
            not listed are limited only by ``max_parallel_tool_calls``.

    Returns:
        The results (exactly one per call, in model order) and the batch's contexts.

    Raises:
        TypeError: ``max_parallel_tool_calls`` is not an ``int`` (``bool`` is not accepted), a
            call is not a :class:`ToolCallRequest`, ``signal`` is not a :class:`CancelSignal`,
            ``registry`` is not a :class:`ToolRegistry`, ``session`` is not a
            :class:`SessionLog`, or ``turn``/``step`` is not an ``int`` (nor a ``bool``).
        ValueError: ``max_parallel_tool_calls`` is less than 1, or a ``capacity_limits`` value is,
            or ``turn``/``step`` is negative. (A ``capacity_limits`` that is not a mapping of
            ``str`` to ``int`` is a ``TypeError``.)
        trio.Cancelled: the caller's own trio scope was cancelled; raised after every started
            body has unwound.

    Tool, policy and body failures become results and never raise. An exception from the
    scheduler itself (a session append, a classifier) propagates after every started body has
    been cancelled and awaited.

    ``batch`` hook listeners (``registry.hooks.batch``, and the agent's scope's) wrap the whole
    batch in this task, the first registered outermost. A listener's exception propagates
    (after the batch, if its ``next()`` ran it: no body outlives this call). A listener may
    return without calling ``next()``: then no call runs and nothing is appended to
    ``session``. What a listener returns must be a :class:`ToolBatch` with one
    ``ToolExecutionResult`` per call, else ``TypeError``/``ValueError``; calling ``next()``
    twice raises ``RuntimeError``.

    This is a checkpoint on every path.
    """
    cap = check_int("max_parallel_tool_calls", max_parallel_tool_calls)
    limits = check_capacity_limits(capacity_limits)
    if not isinstance(signal, CancelSignal):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"signal must be a CancelSignal, not {type(signal).__name__}")
    check_entry(registry, session, turn, step)
    check_approval_setup(pipeline_host(registry), agent)
    requests = tuple(calls)
    for index, call in enumerate(requests):
        if not isinstance(call, ToolCallRequest):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"calls[{index}] must be a ToolCallRequest, not {type(call).__name__}")
    # one id per batch, also without a session log: it is half of every idempotency key
    batch_id = str(uuid.uuid4())
    batch = _Batch(
        registry=registry,
        calls=requests,
        signal=signal,
        agent=agent,
        cap=cap,
        # an empty batch has nothing to resume: it writes no events, not even its bracket
        log=None
        if session is None or not requests
        else BatchLog(session, requests, turn, step, batch_id),
        capacity=capacity_of(limits),
        turn=turn,
        step=step,
        batch_id=batch_id,
    )
    listeners = batch.host.hooks.batch.for_agent(agent)
    if not listeners:
        return await batch.run()
    return await _run_wrapped(batch, listeners)


def _checked(value: object, count: int) -> ToolBatch:
    """``value`` if it is a :class:`ToolBatch` with one result per call, else a clear error."""
    if type(value) is not ToolBatch:
        raise TypeError(f"a batch hook listener returned {type(value).__name__}, not a ToolBatch")
    results = cast("object", value.results)  # attrs does not check a ToolBatch's fields
    if not isinstance(results, tuple) or not all(
        type(result) is ToolExecutionResult for result in cast("tuple[object, ...]", results)
    ):
        raise TypeError(
            "a batch hook listener returned a ToolBatch whose results are not a tuple of "
            "ToolExecutionResult"
        )
    if len(value.results) != count:
        raise ValueError(
            f"a batch hook listener returned {len(value.results)} results for {count} calls; "
            "a batch has exactly one result per call"
        )
    return value


async def _run_wrapped(batch: _Batch, listeners: tuple[BatchHook, ...]) -> ToolBatch:
    """Run ``batch`` inside its ``batch`` listeners (the first outermost), in this task."""
    # a checkpoint on every path, also when a listener returns without running the batch
    await trio.lowlevel.checkpoint()
    info = ToolBatchInfo(
        agent=batch.agent, calls=batch.calls, turn=batch.turn, step=batch.step, signal=batch.signal
    )
    count = len(batch.calls)

    def link(index: int) -> BatchNext:
        called = False

        async def next_(*_args: object, **_kwargs: object) -> ToolBatch:
            # arguments given to next() are ignored, as for the other hooks
            nonlocal called
            if called:
                raise RuntimeError("a batch hook listener called next() twice; a batch runs once")
            called = True
            if index == len(listeners):
                return await batch.run()
            return _checked(await listeners[index](info, link(index + 1)), count)

        return next_

    return await link(0)()


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = cast("BaseExceptionGroup[BaseException]", exc).exceptions[0]
    return exc


def _lone(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception a nursery's ``group`` stands for, or ``None`` to raise the group.

    Only cancellations: the first (the caller's scope was cancelled; trio gathers one per
    cancelled task). One exception that is neither a cancellation nor a group (a body's
    ``KeyboardInterrupt`` or ``SystemExit``): that exception. A group a body raised itself is
    never unwrapped.
    """
    _, other = group.split(trio.Cancelled)
    if other is None:
        return _first_leaf(group)
    (first, *rest) = group.exceptions
    if not rest and not isinstance(first, (trio.Cancelled, BaseExceptionGroup)):
        return first
    return None


async def _lone_as_itself(pool: Awaitable[None]) -> None:
    """Await ``pool``; what leaves its nursery leaves as ``run_tool_calls`` documents it
    (:func:`_lone`).
    """
    try:
        await pool
    except BaseExceptionGroup as group:
        lone = _lone(group)
        if lone is None:
            raise
    else:
        return
    raise lone  # outside the except block: the group does not become its __context__


class _Capacity:
    """A batch's capacity classes: the limit of each class, the bodies of each class in flight,
    and the class of each dispatched call until it reports back.
    """

    __slots__ = ("_class_of", "_in_flight", "_limits")

    def __init__(self, limits: dict[str, int]) -> None:
        self._limits = limits
        self._in_flight = dict.fromkeys(limits, 0)
        self._class_of: dict[int, str] = {}

    def limited_class(self, tool: ToolDefinition | None) -> str | None:
        """The tool's capacity class, if the batch limits it."""
        name = None if tool is None else tool.capacity_class
        return name if name is not None and name in self._limits else None

    def full(self, name: str) -> bool:
        return self._in_flight[name] >= self._limits[name]

    def take(self, index: int, name: str) -> None:
        self._class_of[index] = name
        self._in_flight[name] += 1

    def release(self, index: int) -> None:
        name = self._class_of.pop(index, None)
        if name is not None:
            self._in_flight[name] -= 1


_READY: Final = 1
_NEVER: Final = CancelSignal.never()
# the most starts, or commits, the lane makes between two schedule points
_STEPS_PER_CHECKPOINT: Final = 64


@attrs.define(eq=False, slots=True)
class _Batch:
    """The lane's state for one batch. Everything here is touched only by the lane task;
    dispatch tasks report back through ``settled`` and ``lot``.
    """

    registry: ToolRegistry
    calls: tuple[ToolCallRequest, ...]
    signal: CancelSignal
    agent: object | None
    cap: int
    # the session events (None: no session log) and the capacity classes (None: no limits)
    log: BatchLog | None
    capacity: _Capacity | None
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

    async def run(self) -> ToolBatch:
        token = _ACTIVE_BATCH.set(self)
        try:
            return await self._run()
        except BaseException as exc:
            # caller-scope cancellation, or the scheduler itself failed: every tool/call we
            # appended still gets its tool/result (synchronously: no checkpoint needed), then
            # the batch its batch/end
            self.active = False
            log = self.log
            if log is not None:
                self.committed += log.balance(self._uncommitted())
                log.end_after_failure("aborted" if isinstance(exc, trio.Cancelled) else "failed")
            raise
        finally:
            self.active = False
            _ACTIVE_BATCH.reset(token)

    def _uncommitted(self) -> Iterator[tuple[int, ToolExecutionResult]]:
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

    async def _run(self) -> ToolBatch:
        # a checkpoint on every path, also when no call runs (empty or pre-cancelled batch)
        await trio.lowlevel.checkpoint()
        log = self.log
        if log is not None and not log.started:
            log.start()
        n = len(self.calls)
        while self.started < n and not self.signal.cancelled:
            if self._is_parallel(self.started):
                await _lone_as_itself(self._run_pool())
            else:
                await self._run_barrier()
        return self._close()

    def _close(self) -> ToolBatch:
        """Give every call that never started its result, then append the batch's contexts and
        its ``batch/end``; the batch.
        """
        n = len(self.calls)
        self._skip_unstarted()
        self.active = False
        log = self.log
        suspended = self._suspended_calls()
        if log is not None:
            if suspended:
                # the contexts wait for the batch's real end: resumed, they follow every result
                log.end("suspended")
            else:
                log.contexts(self.contexts)
                log.end("aborted" if self.signal.cancelled else "completed")
        results = tuple(self.results)
        assert self.committed == n  # every call has its result
        return ToolBatch(
            results=results,  # pyright: ignore[reportArgumentType]
            contexts=tuple(self.contexts),
            suspended=suspended,
        )

    def _suspended_calls(self) -> tuple[SuspendedCall, ...]:
        """What a person needs to decide each suspended call (its pending request's id is
        read back from the session log).
        """
        if not self.suspended:
            return ()
        log = self.log
        requests: dict[str, str] = {}
        if log is not None:
            for request in pending_requests(log.events()).values():
                if request.call_id is not None:
                    requests[request.call_id] = request.id
        suspended: list[SuspendedCall] = []
        for index, arguments in sorted(self.suspended, key=lambda item: item[0]):
            call = self.calls[index]
            tool = self.host.lookup(call.name, self.agent)
            view, _ = call_view_of(
                None if tool is None else tool.present_call, call.name, arguments
            )
            suspended.append(
                SuspendedCall(
                    call_id=call.call_id,
                    tool_name=call.name,
                    arguments=arguments,
                    view=view,
                    request_id=requests.get(call.call_id),
                )
            )
        return tuple(suspended)

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
            result = prepared.complete_now()
            if result is None:
                result = await prepared.complete()
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
            await prepared.apply_policies()
        if prepared.stage == ALLOWED:
            await prepared.dispatch()
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
                    bodies = await nursery.start(_linked_bodies, self.signal, pool_done, nursery)
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
        while True:
            index = self.started
            if first:
                first = False
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
                if not runs_in_parallel(lookup(call.name, self.agent), arguments):
                    # re-classified: a call that is no longer parallel closes the pool (it
                    # becomes the next barrier)
                    self.pool_closed = True
                    break
            capacity = self.capacity
            capacity_class = None
            if capacity is not None:
                tool = self.host.lookup(self.calls[index].name, self.agent)
                capacity_class = capacity.limited_class(tool)
                # the model-order start rule: a call waiting for its class holds back the rest
                if capacity_class is not None and capacity.full(capacity_class):
                    break
            prepared = self._start(index)
            if prepared.stage == PENDING:
                await prepared.apply_policies()
            if prepared.stage == ALLOWED:
                self.in_flight += 1
                if capacity is not None and capacity_class is not None:
                    capacity.take(index, capacity_class)
                if not (wrappers.active and wrappers.for_agent(self.agent)):
                    # inside the pool's scope linked to the batch signal (none for a signal that
                    # never fires): the body needs no scope of its own
                    (nursery if bodies is None else bodies).start_soon(
                        prepared.dispatch, self.reporter, index, name=_BODY_TASK
                    )
                else:
                    # a wrapper may replace the call's signal: the body gets a scope of its own
                    nursery.start_soon(_dispatch, prepared, index, self, name=_BODY_TASK)
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

    def _skip_unstarted(self) -> None:
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


@attrs.define(eq=False, slots=True)
class ResumedBatch(_Batch):
    """A batch finished from its session log after its process stopped, or after it was
    suspended (``resume_tool_calls``).

    The caller primes it with :meth:`prime`: the committed prefix (results as logged, their
    contexts in the FIFO). Each call in ``[committed, dangling)`` had its ``tool/call`` logged:
    one in ``logged`` has its ``tool/result`` too (a call after a suspended one) and is taken
    as logged; one in ``deferred`` waits for its deferred approval (the request id, the
    decision or ``None``, and whether the decision is new: then its ``approval/decided`` is
    appended) and continues from the decision; one in ``interrupted`` commits
    ``TOOL_INTERRUPTED`` (pointing at its logged ``tool/call``, no stage runs); the others run
    again through the pipeline with their next attempt. Calls from ``dangling`` on start as
    in a fresh batch. The lane, the pools and the barriers are the fresh batch's own.
    """

    dangling: int = 0
    interrupted: frozenset[int] = frozenset()
    logged: dict[int, ToolExecutionResult] = attrs.field(
        factory=lambda: dict[int, ToolExecutionResult]()
    )
    deferred: dict[int, tuple[str, ApprovalOutcome | None, bool]] = attrs.field(
        factory=lambda: dict[int, tuple[str, ApprovalOutcome | None, bool]]()
    )

    def prime(self, results: list[ToolExecutionResult]) -> None:
        """Take the committed prefix: ``results`` as logged, in model order."""
        count = len(results)
        self.results[:count] = results
        self.committed = self.started = count
        for result in results:
            self.contexts.extend(result.additional_contexts)

    def _take_arguments(self, index: int) -> object:
        self.started = index + 1
        if self.next_index == index:
            arguments = self.next_arguments
            self.next_index = -1
            self.next_arguments = None
            return arguments
        return parse_call_arguments(self.calls[index].arguments)

    def _start(self, index: int) -> PreparedCall:
        call = self.calls[index]
        if index in self.logged:
            self._take_arguments(index)
            prepared = PreparedCall(self.env, call, None).replay(self.logged[index])
        elif index in self.deferred:
            arguments = self._take_arguments(index)
            request_id, outcome, new = self.deferred[index]
            if new:
                # a resumed batch always has its log; a new decision always has an outcome
                assert self.log is not None
                assert outcome is not None
                self.log.decided(request_id, outcome)
            prepared = resume_suspended(self.env, call, arguments, outcome)
        elif index in self.interrupted:
            self._take_arguments(index)
            prepared = PreparedCall(self.env, call, None).final_result(INTERRUPTED)
        else:
            return super()._start(index)
        self.prepared[index] = prepared
        return prepared

    def _uncommitted(self) -> Iterator[tuple[int, ToolExecutionResult]]:
        for index, result in super()._uncommitted():
            if index not in self.logged:
                yield index, (INTERRUPTED if index in self.interrupted else result)
        # the dangling calls not started again also have a tool/call without its tool/result
        for index in range(self.started, self.dangling):
            if index not in self.logged:
                yield index, (ABORTED_BEFORE_DISPATCH if index in self.deferred else INTERRUPTED)

    def _skip_unstarted(self) -> None:
        # a dangling call that did not start again (the signal fired) may have run before the
        # process stopped: TOOL_INTERRUPTED, pointing at its logged tool/call; a logged one
        # keeps its result, a deferred one stays suspended
        for index in range(self.started, self.dangling):
            call = self.calls[index]
            if index in self.logged:
                self.results[index] = self.logged[index]
            elif index in self.deferred:
                prepared = resume_suspended(
                    self.env, call, parse_call_arguments(call.arguments), None
                )
                self.results[index] = prepared.complete_now()
                self.suspended.append((index, prepared.arguments))
            else:
                if self.log is not None:
                    self.log.result(index, INTERRUPTED)
                self.results[index] = INTERRUPTED
        if self.started < self.dangling:
            self.started = self.committed = self.dangling
        super()._skip_unstarted()


# the name of every pool's body tasks in trio's task tree: one shared string (trio would format
# one per task from the function's module and qualname)
_BODY_TASK: Final = "dsh_tools.run_tool_calls: tool body"


async def _dispatch(prepared: PreparedCall, index: int, batch: _Batch) -> None:
    await prepared.dispatch()
    batch.reporter(index)


def _reporter(batch: _Batch) -> Callable[[int], None]:
    """What a pool's body task calls once its call's outcome is recorded."""
    settled = batch.settled

    def report(index: int) -> None:
        settled.append(index)
        if batch.parked:
            # once: the bodies that report before the lane runs again need not wake it
            batch.parked = False
            batch.lot.unpark()

    return report


async def _linked_bodies(  # noqa: ASYNC910 (leaving the bodies' nursery is a checkpoint)
    signal: CancelSignal,
    pool_done: trio.Event,
    pool: trio.Nursery,
    task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Host a pool's bodies in one cancel scope linked to ``signal`` until the pool is done.

    The wait is shielded so that the nursery stays open for the lane after the signal fires
    (the lane sets ``pool_done`` on every path, so a cancelled batch still ends). It happens
    only once ``pool.start`` has adopted this task: when the caller's scope is cancelled while
    ``start`` waits, trio leaves the task under ``start`` (``started()`` does not move it), and
    ``start`` waits for it to exit, so it must not wait for the lane, which is still inside
    ``start``.
    """
    with linked_cancel_scope(signal):
        lone = None
        try:
            async with trio.open_nursery() as bodies:
                task_status.started(bodies)
                if trio.lowlevel.current_task().parent_nursery is not pool:
                    return  # nothing was started in ``bodies``: the lane never received it
                with trio.CancelScope(shield=True):
                    await pool_done.wait()
        except BaseExceptionGroup as group:
            # unwrapped here, inside the linked scope (which absorbs its own cancellation), so
            # that the pool's nursery does not nest this nursery's group in its own
            lone = _lone(group)
            if lone is None:
                raise
        if lone is not None:
            raise lone


_ACTIVE_BATCH: Final = contextvars.ContextVar[_Batch | None]("dsh_tools_active_batch", default=None)


def batch_statistics() -> ToolBatchStatistics:
    """How far the batch running in the current task has got: its calls, how many started,
    how many committed, how many bodies of its current pool are in flight.

    Call it from a tool body, an ``execute`` wrapper or a hook while :func:`run_tool_calls`
    runs (found like :func:`inject_context`'s batch). Not a checkpoint.

    Raises:
        RuntimeError: no batch is running in this task.
    """
    batch = _ACTIVE_BATCH.get()
    if batch is None or not batch.active:
        raise RuntimeError("batch_statistics() called outside an active batch")
    return ToolBatchStatistics(
        calls=len(batch.calls),
        started=batch.started,
        committed=batch.committed,
        in_flight=batch.in_flight,
    )


def current_turn() -> int | None:
    """The turn of the batch running in the current task, or ``None`` outside a batch
    (internal: the call budget counts per turn).
    """
    batch = _ACTIVE_BATCH.get()
    if batch is None or not batch.active:
        return None
    return batch.turn


def inject_context(context: HookContext) -> None:
    """Put ``context`` into the context FIFO of the batch running in the current task.

    Call it from a tool body, an ``execute`` wrapper or a hook while :func:`run_tool_calls` runs
    (the batch is found through a ``contextvars`` value that ``run_tool_calls`` sets, and that
    trio passes on to the tasks and worker threads it starts). The context joins the FIFO at
    call time: before the contexts of every call that commits later, after those of calls
    committed already. Its ``context/message`` event, like every context's, is appended after
    every ``tool/result`` of the batch. Not a checkpoint.

    Args:
        context: the context; checked and frozen now (its ``meta`` must be lossless JSON).

    Raises:
        TypeError: ``context`` is not a :class:`~dsh_tools.HookContext`, or is not lossless JSON:
            ``agent context must be losslessly JSON-serializable``.
        RuntimeError: no batch is running in this task:
            ``inject_context() called outside an active batch``.
    """
    batch = _ACTIVE_BATCH.get()
    if batch is None or not batch.active:
        raise RuntimeError("inject_context() called outside an active batch")
    if not isinstance(context, HookContext):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"inject_context() takes a HookContext, not {type(context).__name__}")
    try:
        frozen = freeze_context(context)
    except Exception as exc:
        logger.warning("inject_context(): context rejected: %s", exc)
        raise TypeError("agent context must be losslessly JSON-serializable") from exc
    batch.inject(frozen)
