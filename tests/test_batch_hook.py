"""The ``batch`` hook: wrappers around a whole ``run_tool_calls`` batch, in the caller's task.
Every timeline runs on trio's virtual clock."""

from __future__ import annotations

import contextvars

import pytest
import trio
import trio.testing

from dsh_tools import (
    BatchEndEvent,
    BatchHook,
    BatchNext,
    BatchStartEvent,
    CancelSignal,
    MemorySessionLog,
    TextBlock,
    ToolBatch,
    ToolBatchInfo,
    ToolCallEvent,
    ToolDefinition,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    run_tool_calls,
)
from support import request, run_calls, spec_tool

CURRENT = contextvars.ContextVar[str]("current", default="-")


def sleeper(
    name: str, seconds: float, seen: list[tuple[str, str]], *, parallel: bool = True
) -> ToolDefinition:
    async def body(_args: object, context: ToolRunContext) -> str:
        seen.append((context.call_id, CURRENT.get()))
        await trio.sleep(seconds)
        return f"{name} done"

    return spec_tool(name, body, description=name, parallel=parallel)


def texts(batch: ToolBatch) -> list[str]:
    return [
        block.text
        for result in batch.results
        for block in result.content
        if isinstance(block, TextBlock)
    ]


def ok(text: str) -> ToolExecutionResult:
    return ToolExecutionResult(content=(TextBlock(text=text),), is_error=False)


async def test_listeners_wrap_the_batch_outermost_first_and_prepend_goes_outside() -> None:
    registry = ToolRegistry()
    log: list[str] = []
    registry.register(sleeper("a", 0, []))

    def listener(name: str) -> BatchHook:
        async def wrap(info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
            log.append(f"{name} in")
            batch = await next_()
            log.append(f"{name} out")
            return batch

        return wrap

    registry.hooks.batch.add(listener("first"))
    registry.hooks.batch.add(listener("second"))
    registry.hooks.batch.add(listener("outermost"), prepend=True)
    batch = await run_calls(registry, request("1", "a"))
    assert ["a done"] == texts(batch)
    assert [
        "outermost in",
        "first in",
        "second in",
        "second out",
        "first out",
        "outermost out",
    ] == log


async def test_a_listener_is_told_the_batch_it_wraps() -> None:
    registry = ToolRegistry()
    told: list[ToolBatchInfo] = []
    signal = CancelSignal.never()

    async def wrap(info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        told.append(info)
        return await next_()

    registry.hooks.batch.add(wrap)
    calls = [request("1", "a"), request("2", "b")]
    await run_tool_calls(registry, calls, signal=signal, agent="planner", turn=3, step=4)
    assert [
        ToolBatchInfo(agent="planner", calls=tuple(calls), turn=3, step=4, signal=signal)
    ] == told


async def test_a_contextvar_set_by_a_listener_is_seen_by_pool_and_barrier_bodies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    seen: list[tuple[str, str]] = []
    for name in ("a", "b"):
        registry.register(sleeper(name, 1, seen))
    registry.register(sleeper("x", 1, seen, parallel=False))

    async def wrap(info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        token = CURRENT.set("in the batch")
        try:
            return await next_()
        finally:
            CURRENT.reset(token)

    registry.hooks.batch.add(wrap)
    started = trio.current_time()
    await run_calls(registry, request("1", "a"), request("2", "b"), request("3", "x"))
    assert 2 == trio.current_time() - started  # the pool overlapped, then the barrier
    assert [("1", "in the batch"), ("2", "in the batch"), ("3", "in the batch")] == sorted(seen)
    assert "-" == CURRENT.get()


async def test_a_scoped_listener_hears_only_its_agents_batches_and_a_global_one_hears_all() -> None:
    registry = ToolRegistry()
    heard: list[tuple[str, object]] = []

    def listener(name: str) -> BatchHook:
        async def wrap(info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
            heard.append((name, info.agent))
            return await next_()

        return wrap

    planner = object()
    registry.hooks.batch.add(listener("global"))
    registry.scope(planner).hooks.batch.add(listener("planner's"))
    await run_calls(registry, agent=planner)
    await run_calls(registry, agent=object.__new__(object))
    await run_calls(registry)
    assert ["global", "planner's", "global", "global"] == [name for name, _agent in heard]
    assert planner is heard[1][1]


async def test_disposing_a_listener_or_closing_its_scope_removes_it() -> None:
    registry = ToolRegistry()
    heard: list[object] = []

    async def wrap(info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        heard.append(info.agent)
        return await next_()

    dispose = registry.hooks.batch.add(wrap)
    with registry.scope("scoped") as scope:
        scope.hooks.batch.add(wrap)
    dispose()
    await run_calls(registry, agent="scoped")
    assert [] == heard


async def test_a_listener_may_answer_the_batch_without_running_it() -> None:
    registry = ToolRegistry()
    seen: list[tuple[str, str]] = []
    registry.register(sleeper("a", 0, seen))
    session = MemorySessionLog()

    async def answer(info: ToolBatchInfo, _next: BatchNext) -> ToolBatch:
        return ToolBatch(results=tuple(ok(f"cached {c.call_id}") for c in info.calls), contexts=())

    registry.hooks.batch.add(answer)
    batch = await run_calls(registry, request("1", "a"), request("2", "a"), session=session)
    assert (["cached 1", "cached 2"], [], []) == (texts(batch), seen, list(session.events()))


@pytest.mark.parametrize(
    ("returned", "error", "message"),
    [
        ("not a batch", TypeError, "a batch hook listener returned str, not a ToolBatch"),
        (
            ToolBatch(results=(), contexts=()),
            ValueError,
            "a batch hook listener returned 0 results for 1 calls; "
            "a batch has exactly one result per call",
        ),
        (
            ToolBatch(results=["x"], contexts=()),  # pyright: ignore[reportArgumentType]
            TypeError,
            "a batch hook listener returned a ToolBatch whose results are not a tuple of "
            "ToolExecutionResult",
        ),
    ],
)
async def test_a_listener_that_returns_something_else_than_one_result_per_call_is_refused(
    returned: object, error: type[Exception], message: str
) -> None:
    registry = ToolRegistry()

    async def wrong(_info: ToolBatchInfo, _next: BatchNext) -> ToolBatch:
        return returned  # pyright: ignore[reportReturnType]

    registry.hooks.batch.add(wrong)
    with pytest.raises(error) as raised:
        await run_calls(registry, request("1", "a"))
    assert message == str(raised.value)


async def test_an_outer_listener_sees_what_an_inner_one_returned_instead() -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 0, []))
    outer_saw: list[list[str]] = []

    async def outer(_info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        batch = await next_()
        outer_saw.append(texts(batch))
        return batch

    async def replace(_info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        await next_()
        return ToolBatch(results=(ok("replaced"),), contexts=())

    registry.hooks.batch.add(outer)
    registry.hooks.batch.add(replace)
    batch = await run_calls(registry, request("1", "a"))
    assert (["replaced"], [["replaced"]]) == (texts(batch), outer_saw)


async def test_calling_next_twice_raises_and_the_batch_ran_once() -> None:
    registry = ToolRegistry()
    seen: list[tuple[str, str]] = []
    registry.register(sleeper("a", 0, seen))
    second: list[BaseException] = []

    async def twice(_info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        batch = await next_()
        try:
            await next_()
        except RuntimeError as exc:
            second.append(exc)
        return batch

    registry.hooks.batch.add(twice)
    batch = await run_calls(registry, request("1", "a"))
    assert (["a done"], [("1", "-")]) == (texts(batch), seen)
    assert ["a batch hook listener called next() twice; a batch runs once"] == [
        str(exc) for exc in second
    ]


async def test_a_raising_listener_propagates_after_the_batch_it_ran_has_finished(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 5, []))
    session = MemorySessionLog()
    finished_at: list[float] = []

    async def broken(_info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        await next_()
        finished_at.append(trio.current_time())
        raise LookupError("listener bug")

    registry.hooks.batch.add(broken)
    with pytest.raises(LookupError, match="listener bug"):
        await run_calls(registry, request("1", "a"), session=session)
    assert [5] == finished_at
    expected = [BatchStartEvent, ToolCallEvent, ToolResultEvent, BatchEndEvent]
    assert expected == [type(event) for event in session.events()]


async def test_a_listener_raising_before_next_runs_no_call() -> None:
    registry = ToolRegistry()
    seen: list[tuple[str, str]] = []
    registry.register(sleeper("a", 0, seen))

    async def refuse(_info: ToolBatchInfo, _next: BatchNext) -> ToolBatch:
        raise PermissionError("not now")

    registry.hooks.batch.add(refuse)
    with pytest.raises(PermissionError, match="not now"):
        await run_calls(registry, request("1", "a"))
    assert [] == seen


async def test_cancelling_the_callers_scope_while_a_listener_waits_runs_no_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    seen: list[tuple[str, str]] = []
    registry.register(sleeper("a", 0, seen))
    session = MemorySessionLog()

    async def slow(_info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        await trio.sleep(10)
        return await next_()

    registry.hooks.batch.add(slow)
    with trio.move_on_after(1) as scope:
        await run_calls(registry, request("1", "a"), session=session)
    assert (True, [], []) == (scope.cancelled_caught, seen, list(session.events()))


async def test_cancelling_the_callers_scope_inside_next_unwinds_every_body_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    registry.register(sleeper("a", 100, []))
    session = MemorySessionLog()
    outcome: list[str] = []

    async def wrap(_info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        try:
            return await next_()
        except BaseException:
            outcome.append(f"unwound at {trio.current_time()}")
            raise

    registry.hooks.batch.add(wrap)
    with trio.move_on_after(1):
        await run_calls(registry, request("1", "a"), session=session)
    assert ["unwound at 1.0"] == outcome
    results = [event for event in session.events() if isinstance(event, ToolResultEvent)]
    assert ["ABORTED"] == [event.error.code for event in results if event.error is not None]


@pytest.mark.parametrize("path", ["short-circuit", "raise", "next"])
async def test_run_tool_calls_is_a_checkpoint_on_every_path_with_a_listener(path: str) -> None:
    registry = ToolRegistry()

    async def listener(info: ToolBatchInfo, next_: BatchNext) -> ToolBatch:
        if path == "raise":
            raise LookupError("listener bug")
        if path == "short-circuit":
            return ToolBatch(results=(), contexts=())
        return await next_()

    registry.hooks.batch.add(listener)
    with trio.CancelScope() as scope:
        scope.cancel()
        await run_calls(registry)
    assert scope.cancelled_caught
