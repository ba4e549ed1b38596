"""The scheduler: run one model response's batch of tool calls as barriers and rolling pools.

Timeline of one batch (``P`` parallel-safe, ``X`` exclusive, one second each, cap 2)::

    time (s)  0    1    2    3    4
    P1        [====]                    pool 1: at most 2 bodies at once; P3 takes the
    P2        [====]                    first free slot (rolling, not fixed windows)
    P3             [====]
    X4                  [====]          barrier: alone, after pool 1 has drained
    P5                       [====]     pool 2
    P6                       [====]

:func:`run_tool_calls` checks its arguments (``_entry``), builds the batch's lane (``_lane``:
which call may start now, the commits in model order) and runs it inside the ``batch`` hook
listeners and its log bracket (``_bracket``). Capacity classes are ``_capacity``'s, the
nursery the bodies run in ``_bodies``', the batch a body reaches (``inject_context``)
``_active``'s, a batch finished from its log ``_resumed``'s.

Structured concurrency: every body runs in a nursery owned by :func:`run_tool_calls`, so no
body outlives the batch. If the scheduler itself fails (a session append raises, a classifier
raises), the pool's nursery is cancelled and every started body is awaited before the error
propagates; a cancellation of the caller's own trio scope propagates as ``trio.Cancelled``
after every body has unwound.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from typing import Final, cast

import trio

from dsh_tools._pipeline._approval_setup import check_approval_setup
from dsh_tools._pipeline._hooks import BatchHook, BatchNext
from dsh_tools._pipeline._registry import ToolRegistry, pipeline_host
from dsh_tools._sessions._batch_log import BatchLog
from dsh_tools._sessions._log import SessionLog
from dsh_tools._values._batch import ToolBatch, ToolBatchInfo, ToolCallRequest
from dsh_tools._values._execution import ToolExecutionResult
from dsh_tools._values._signal import CancelSignal

from ._bracket import run_batch
from ._capacity import capacity_of
from ._entry import check_calls, check_limits, check_runner, check_signal, check_trio
from ._lane import Batch

__all__ = ["DEFAULT_MAX_PARALLEL_TOOL_CALLS", "run_tool_calls"]

DEFAULT_MAX_PARALLEL_TOOL_CALLS: Final = 10


async def run_tool_calls(
    registry: ToolRegistry,
    calls: Iterable[ToolCallRequest] | AsyncIterable[ToolCallRequest],
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
    check_trio("run_tool_calls")
    cap, limits = check_limits(max_parallel_tool_calls, capacity_limits)
    check_signal(signal)
    check_runner(registry, session, turn, step)
    check_approval_setup(pipeline_host(registry), agent)
    stream: AsyncIterator[object] | None = None
    requests: Sequence[ToolCallRequest]
    if isinstance(calls, AsyncIterable):
        # a call stream: the calls join the batch as they arrive (the list grows)
        stream = cast("AsyncIterable[object]", calls).__aiter__()
        requests = []
    else:
        requests = check_calls(calls)
    # one id per batch, also without a session log: it is half of every idempotency key
    batch_id = str(uuid.uuid4())
    batch = Batch(
        registry=registry,
        calls=requests,
        signal=signal,
        agent=agent,
        cap=cap,
        # an empty batch has nothing to resume: it writes no events, not even its bracket (a
        # stream may bring calls: its bracket is written)
        log=None
        if session is None or not (requests or stream is not None)
        else BatchLog(session, requests, turn, step, batch_id),
        capacity=capacity_of(limits),
        turn=turn,
        step=step,
        batch_id=batch_id,
        stream_done=stream is None,
    )
    listeners = batch.host.hooks.batch.for_agent(agent)
    if not listeners:
        return await run_batch(batch, stream)
    return await _run_wrapped(batch, stream, listeners)


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


async def _run_wrapped(
    batch: Batch, stream: AsyncIterator[object] | None, listeners: tuple[BatchHook, ...]
) -> ToolBatch:
    """Run ``batch`` inside its ``batch`` listeners (the first outermost), in this task."""
    # a checkpoint on every path, also when a listener returns without running the batch
    await trio.lowlevel.checkpoint()
    # a streamed batch's listeners see the calls known when it starts (none)
    info = ToolBatchInfo(
        agent=batch.agent,
        calls=tuple(batch.calls),
        turn=batch.turn,
        step=batch.step,
        signal=batch.signal,
    )

    def link(index: int) -> BatchNext:
        called = False

        async def next_(*_args: object, **_kwargs: object) -> ToolBatch:
            # arguments given to next() are ignored, as for the other hooks
            nonlocal called
            if called:
                raise RuntimeError("a batch hook listener called next() twice; a batch runs once")
            called = True
            if index == len(listeners):
                return await run_batch(batch, stream)
            # counted now: a streamed batch's calls are all known once it ran
            return _checked(await listeners[index](info, link(index + 1)), len(batch.calls))

        return next_

    return await link(0)()
