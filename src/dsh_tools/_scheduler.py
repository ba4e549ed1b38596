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
import json
import logging
import math
from collections.abc import Awaitable, Iterable
from typing import Final

import attrs
import trio

from ._content import HookContext
from ._execution import ToolExecutionInput, ToolExecutionResult
from ._pipeline import (
    PreparedCall,
    aborted_before_dispatch_result,
    aborted_result,
    freeze_context,
)
from ._registry import ToolRegistry
from ._session import ContextMessageEvent, SessionLog, ToolCallEvent, ToolResultEvent
from ._signal import CancelSignal

__all__ = ["ToolBatch", "ToolCallRequest", "inject_context", "parse_arguments", "run_tool_calls"]

DEFAULT_MAX_PARALLEL_TOOL_CALLS: Final = 10

logger: Final = logging.getLogger("dsh_tools")


def _str(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a str, not {type(value).__name__}")


def _model_text(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"arguments must be the model's JSON text (str); got {type(value).__name__}"
        )


@attrs.frozen(kw_only=True)
class ToolCallRequest:
    """One tool call as the model emitted it.

    ``arguments`` is the raw JSON text; the scheduler parses it (``""`` means ``{}``, text that
    is not valid JSON is passed on as the string itself, so the tool's validation reports it).

    Raises:
        TypeError: a field is not a ``str``; for parsed arguments:
            ``arguments must be the model's JSON text (str); got dict``.
    """

    call_id: str = attrs.field(validator=_str)
    name: str = attrs.field(validator=_str)
    arguments: str = attrs.field(validator=_model_text)


@attrs.frozen(kw_only=True)
class ToolBatch:
    """What one batch produced.

    Attributes:
        results: one final result per call, in model order.
        contexts: the batch's context FIFO: every result's ``additional_contexts``, in model
            order, accepted as each call committed.
    """

    results: tuple[ToolExecutionResult, ...]
    contexts: tuple[HookContext, ...]


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# one decoder for every call: ``json.loads`` with a keyword builds a new decoder each time
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def parse_arguments(text: str) -> object:
    """Parse a call's raw argument text the way the original loop does.

    ``""`` gives ``{}``; text that is not strict JSON (including ``NaN`` / ``Infinity``, which
    Python's ``json`` would otherwise accept, and nesting too deep for the parser) gives the
    text itself.
    """
    if text == "":
        return {}
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):
        return text


def _check_cap(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("max_parallel_tool_calls must be a positive integer")
    if value < 1:
        raise ValueError("max_parallel_tool_calls must be a positive integer")
    return value


def _check_entry(registry: object, session: object, turn: object, step: object) -> None:
    if not isinstance(registry, ToolRegistry):
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
    if session is not None and not (
        callable(getattr(session, "append", None)) and callable(getattr(session, "events", None))
    ):
        raise TypeError(
            f"session must be a SessionLog (with append and events) or None, "
            f"not {type(session).__name__}"
        )
    for name, value in (("turn", turn), ("step", step)):
        if type(value) is not int:
            raise TypeError(f"{name} must be a non-negative int, not {value!r}")
        if value < 0:
            raise ValueError(f"{name} must be a non-negative int, not {value!r}")


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
            starts, bodies in flight drain (their successes become ``ABORTED``), and every call
            that never started gets an ``ABORTED_BEFORE_DISPATCH`` result.
        agent: the agent the calls belong to (routes them to its registry scope).
        max_parallel_tool_calls: the most bodies in flight at once (a positive ``int``; ``1``
            runs every call serially).
        session: where to append durable events: ``tool/call`` when a call starts,
            ``tool/result`` when it commits, then one ``context/message`` per batch context.
        turn: recorded on the events.
        step: recorded on the events.

    Returns:
        The results (exactly one per call, in model order) and the batch's contexts.

    Raises:
        TypeError: ``max_parallel_tool_calls`` is not an ``int`` (``bool`` is not accepted), a
            call is not a :class:`ToolCallRequest`, ``signal`` is not a :class:`CancelSignal`,
            ``registry`` is not a :class:`ToolRegistry`, ``session`` is not a
            :class:`SessionLog`, or ``turn``/``step`` is not an ``int`` (nor a ``bool``).
        ValueError: ``max_parallel_tool_calls`` is less than 1, or ``turn``/``step`` is
            negative.
        trio.Cancelled: the caller's own trio scope was cancelled; raised after every started
            body has unwound.

    Tool, policy and body failures become results and never raise. An exception from the
    scheduler itself (a session append, a classifier) propagates after every started body has
    been cancelled and awaited.

    This is a checkpoint on every path.
    """
    cap = _check_cap(max_parallel_tool_calls)
    if not isinstance(signal, CancelSignal):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"signal must be a CancelSignal, not {type(signal).__name__}")
    _check_entry(registry, session, turn, step)
    requests = tuple(calls)
    for index, call in enumerate(requests):
        if not isinstance(call, ToolCallRequest):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"calls[{index}] must be a ToolCallRequest, not {type(call).__name__}")
    batch = _Batch(
        registry=registry,
        calls=requests,
        signal=signal,
        agent=agent,
        cap=cap,
        session=session,
        turn=turn,
        step=step,
    )
    return await batch.run()


async def _lone_as_itself(pool: Awaitable[None]) -> None:
    """Await ``pool``; a lone exception from its nursery (a body's ``KeyboardInterrupt`` or
    ``SystemExit``) leaves as itself, not inside a ``BaseExceptionGroup``."""
    try:
        await pool
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1 or isinstance(
            group.exceptions[0], (trio.Cancelled, BaseExceptionGroup)
        ):
            raise
        lone = group.exceptions[0]
    else:
        return
    raise lone  # outside the except block: the group does not become its __context__


_WAITING: Final = 0
_READY: Final = 1


@attrs.define(eq=False, slots=True)
class _Batch:
    """The lane's state for one batch. Everything here is touched only by the lane task;
    dispatch tasks report back through a memory channel."""

    registry: ToolRegistry
    calls: tuple[ToolCallRequest, ...]
    signal: CancelSignal
    agent: object | None
    cap: int
    session: SessionLog | None
    turn: int
    step: int
    # per call, O(1) each: the input (built when first classified), the prepared call until it
    # commits, whether it is ready to commit, its tool/call seq, its result
    inputs: list[ToolExecutionInput | None] = attrs.field(init=False)
    prepared: list[PreparedCall | None] = attrs.field(init=False)
    ready: bytearray = attrs.field(init=False)
    call_seqs: list[int] = attrs.field(init=False)
    results: list[ToolExecutionResult | None] = attrs.field(init=False)
    contexts: list[HookContext] = attrs.field(init=False, factory=lambda: list[HookContext]())
    started: int = 0
    committed: int = 0
    in_flight: int = 0
    pool_closed: bool = False
    active: bool = True
    append_failed: bool = False

    def __attrs_post_init__(self) -> None:
        n = len(self.calls)
        self.inputs = [None] * n
        self.prepared = [None] * n
        self.ready = bytearray(n)
        self.call_seqs = [0] * n if self.session is not None else []
        self.results = [None] * n

    async def run(self) -> ToolBatch:
        token = _ACTIVE_BATCH.set(self)
        try:
            return await self._run()
        except BaseException:
            # caller-scope cancellation, or the scheduler itself failed: every tool/call we
            # appended still gets its tool/result (synchronously: no checkpoint needed)
            self.active = False
            if not self.append_failed:
                self._balance()
            raise
        finally:
            self.active = False
            _ACTIVE_BATCH.reset(token)

    def _append(self, event: ToolCallEvent | ToolResultEvent | ContextMessageEvent) -> int:
        assert self.session is not None
        try:
            return self.session.append(event)
        except BaseException:
            self.append_failed = True
            raise

    def _balance(self) -> None:
        """Append ``tool/result`` for every started call without one: ``ABORTED`` when its body
        ran, else ``ABORTED_BEFORE_DISPATCH``. Unstarted calls had no ``tool/call``."""
        if self.session is None:
            return
        for index in range(self.committed, self.started):
            prepared = self.prepared[index]
            invoked = prepared is not None and prepared.body_invoked
            result = aborted_result() if invoked else aborted_before_dispatch_result()
            try:
                self._append_result(index, result)
            except Exception:
                logger.warning(
                    "could not balance tool/call %r after the batch failed",
                    self.calls[index].call_id,
                    exc_info=True,
                )
                return
            self.committed = index + 1

    def _append_result(self, index: int, result: ToolExecutionResult) -> None:
        self._append(
            ToolResultEvent(
                turn=self.turn,
                step=self.step,
                call_id=self.calls[index].call_id,
                content=result.content,
                is_error=result.is_error,
                error=result.error,
                meta=result.meta,
                source_event_seqs=(self.call_seqs[index],),
            )
        )

    def inject(self, context: HookContext) -> None:
        if not self.active:
            raise RuntimeError("inject_context() called outside an active batch")
        self.contexts.append(context)

    async def _run(self) -> ToolBatch:
        # a checkpoint on every path, also when no call runs (empty or pre-cancelled batch)
        await trio.lowlevel.checkpoint()
        n = len(self.calls)
        while self.started < n and not self.signal.cancelled:
            if self._is_parallel(self.started):
                await _lone_as_itself(self._run_pool())
            else:
                await self._run_barrier()
        self._skip_unstarted()
        self.active = False
        if self.session is not None:
            for context in self.contexts:
                self._append(
                    ContextMessageEvent(
                        content=context.content, source=context.source, meta=context.meta
                    )
                )
        results = tuple(self.results)
        assert all(result is not None for result in results)
        return ToolBatch(
            results=results,  # pyright: ignore[reportArgumentType]
            contexts=tuple(self.contexts),
        )

    def _input(self, index: int) -> ToolExecutionInput:
        built = self.inputs[index]
        if built is None:
            call = self.calls[index]
            built = self.inputs[index] = ToolExecutionInput(
                call_id=call.call_id,
                name=call.name,
                arguments=parse_arguments(call.arguments),
                signal=self.signal,
                agent=self.agent,
            )
        return built

    def _is_parallel(self, index: int) -> bool:
        return self.registry.execution_mode(self._input(index)).kind == "parallel"

    async def _start(self, index: int) -> PreparedCall:
        """Append the call's ``tool/call`` and run its prepare stages (on the lane)."""
        call = self.calls[index]
        if self.session is not None:
            self.call_seqs[index] = self._append(
                ToolCallEvent(
                    turn=self.turn,
                    step=self.step,
                    call_id=call.call_id,
                    name=call.name,
                    arguments=call.arguments,
                )
            )
        self.started = index + 1
        call_input = self._input(index)
        self.inputs[index] = None
        prepared = await self.registry._prepare(call_input)
        self.prepared[index] = prepared
        return prepared

    def _may_commit(self) -> bool:
        return self.committed < self.started and self.ready[self.committed] == _READY

    async def _commit_next(self) -> None:
        """Commit the call at the cursor: its complete stages, its ``tool/result``, its
        contexts into the batch FIFO (on the lane)."""
        index = self.committed
        prepared = self.prepared[index]
        assert prepared is not None
        result = await prepared.complete()
        self.results[index] = result
        if self.session is not None:
            self._append_result(index, result)
        self.prepared[index] = None
        self.contexts.extend(result.additional_contexts)
        self.committed = index + 1

    async def _run_barrier(self) -> None:
        index = self.started
        prepared = await self._start(index)
        if prepared.needs_dispatch:
            await prepared.dispatch()
        self.ready[index] = _READY
        while self._may_commit():
            await self._commit_next()

    async def _run_pool(self) -> None:
        send, receive = trio.open_memory_channel[int](math.inf)
        failure: Exception | None = None
        self.pool_closed = False
        with send, receive:
            async with trio.open_nursery() as nursery:
                try:
                    # the group's first call starts without re-classification
                    await self._start_in_pool(nursery, send)
                    while True:
                        while self._may_refill():
                            await self._start_in_pool(nursery, send)
                        if not self.in_flight:
                            break
                        index = await receive.receive()
                        self.in_flight -= 1
                        self.ready[index] = _READY
                        while self._may_commit():
                            await self._commit_next()
                except Exception as exc:
                    # the scheduler itself failed: cancel and await every started body before
                    # the error leaves, and raise it as itself rather than in an ExceptionGroup
                    failure = exc
                    nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure

    def _may_refill(self) -> bool:
        """Whether the pool starts the next call now. Re-classifies it first: a call that is
        no longer parallel closes the pool (it becomes the next barrier)."""
        if (
            self.pool_closed
            or self.in_flight >= self.cap
            or self.started >= len(self.calls)
            or self.signal.cancelled
        ):
            return False
        if not self._is_parallel(self.started):
            self.pool_closed = True
            return False
        return True

    async def _start_in_pool(
        self, nursery: trio.Nursery, send: trio.MemorySendChannel[int]
    ) -> None:
        index = self.started
        prepared = await self._start(index)
        if prepared.needs_dispatch:
            self.in_flight += 1
            nursery.start_soon(_dispatch, prepared, index, send)
        else:
            self.ready[index] = _READY
        while self._may_commit():
            await self._commit_next()

    def _skip_unstarted(self) -> None:
        """Give every call that never started a balanced synthetic ``tool/call`` +
        ``tool/result`` pair and the canonical ``ABORTED_BEFORE_DISPATCH`` result, without
        running any registry stage for it."""
        if self.started == len(self.calls):
            return
        aborted = aborted_before_dispatch_result()
        for index in range(self.started, len(self.calls)):
            call = self.calls[index]
            if self.session is not None:
                seq = self._append(
                    ToolCallEvent(
                        turn=self.turn,
                        step=self.step,
                        call_id=call.call_id,
                        name=call.name,
                        arguments=call.arguments,
                    )
                )
                self._append(
                    ToolResultEvent(
                        turn=self.turn,
                        step=self.step,
                        call_id=call.call_id,
                        content=aborted.content,
                        is_error=aborted.is_error,
                        error=aborted.error,
                        meta=aborted.meta,
                        source_event_seqs=(seq,),
                    )
                )
            self.results[index] = aborted
        self.started = self.committed = len(self.calls)


async def _dispatch(prepared: PreparedCall, index: int, send: trio.MemorySendChannel[int]) -> None:
    await prepared.dispatch()
    send.send_nowait(index)


_ACTIVE_BATCH: Final = contextvars.ContextVar[_Batch | None]("dsh_tools_active_batch", default=None)


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
