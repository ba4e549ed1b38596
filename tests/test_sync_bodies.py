"""Sync tool bodies: a plain ``def`` body runs in a worker thread through the
registry's one ``trio.CapacityLimiter``; cancellation reports ``ABORTED`` only once the thread
has returned, unless the definition abandons it; a call still waiting for a thread slot never
started.

Threads are coordinated with ``threading.Event`` handshakes, never sleeps.
"""

from __future__ import annotations

import functools
import gc
import threading
import warnings
from typing import Any, cast

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    CancelSignal,
    TextBlock,
    ToolCallRequest,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    define_tool,
    install_timeout_policy,
    run_tool_calls,
)
from dsh_tools._pipeline._registry import pipeline_host
from expected import ABORTED, ABORTED_BEFORE_DISPATCH
from support import execution_input, first_text, registry_with, string_tool, tool

ABANDONED = ToolExecutionResult(
    content=(
        TextBlock(
            text="Error: tool call aborted (its worker thread was abandoned and may still be running)"
        ),
    ),
    is_error=True,
    error=ToolErrorInfo(name="AbortError", code="ABORTED"),
)


def _input(
    name: str, signal: CancelSignal | None = None, arguments: object = None
) -> ToolExecutionInput:
    return execution_input(name, arguments, call_id=f"{name}-1", signal=signal)


class Gate:
    """A body that reports entering, then blocks its thread until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.threads: list[int] = []

    def body(self, args: Any, context: ToolRunContext) -> ToolReturn:
        self.threads.append(threading.get_ident())
        self.entered.set()
        self.release.wait()
        self.finished.set()
        return "done"


async def test_a_plain_def_body_runs_in_a_worker_thread_and_its_result_is_used() -> None:
    seen: list[int] = []

    def body(args: Any, context: ToolRunContext) -> ToolReturn:
        seen.append(threading.get_ident())
        return [TextBlock(text=f"hello {args['who']}")]

    registry = ToolRegistry()
    registry.register(ToolDefinition(name="t", description="d", parameters={}, execute=body))

    result = await registry.execute(_input("t", arguments={"who": "you"}))

    assert ("hello you", 1, False) == (
        first_text(result),
        len(seen),
        seen[0] == threading.get_ident(),
    )


async def test_a_lambda_body_runs_once_and_its_text_is_the_result() -> None:
    calls: list[object] = []
    registry = registry_with(tool("t", lambda args, context: calls.append(args) or "x"))

    result = await registry.execute(_input("t"))

    assert (ToolExecutionResult(content=(TextBlock(text="x"),), is_error=False), 1) == (
        result,
        len(calls),
    )


class AsyncCallable:
    def __init__(self) -> None:
        self.threads: list[int] = []

    async def __call__(self, args: Any, context: ToolRunContext) -> ToolReturn:
        self.threads.append(threading.get_ident())
        await trio.lowlevel.checkpoint()
        return "async"


async def _async_body(prefix: str, args: Any, context: ToolRunContext) -> ToolReturn:
    await trio.lowlevel.checkpoint()
    return prefix + "partial"


async def test_an_object_with_an_async_call_and_a_partial_run_on_the_trio_thread() -> None:
    callable_body = AsyncCallable()
    registry = ToolRegistry()
    registry.register(
        ToolDefinition(name="a", description="d", parameters={}, execute=callable_body)
    )
    registry.register(
        ToolDefinition(
            name="p",
            description="d",
            parameters={},
            execute=functools.partial(_async_body, "a "),
        )
    )

    texts = [first_text(await registry.execute(_input(name))) for name in ("a", "p")]

    assert (["async", "a partial"], [threading.get_ident()]) == (texts, callable_body.threads)


async def test_define_tool_validates_before_a_sync_body_and_runs_it_in_a_thread() -> None:
    seen: list[tuple[str, bool]] = []

    def body(args: Any, context: ToolRunContext) -> ToolReturn:
        seen.append((args["path"], threading.get_ident() == trio_thread))
        return "read"

    trio_thread = threading.get_ident()
    registry = registry_with(string_tool("read", body, field="path"))

    results = [
        first_text(await registry.execute(_input("read", arguments=arguments)))
        for arguments in ({"path": "a.txt"}, {"path": 3})
    ]

    assert (["read", 'Error: invalid arguments: "path" must be a string'], [("a.txt", False)]) == (
        results,
        seen,
    )


async def test_a_sync_body_returning_a_coroutine_is_told_to_be_async_def() -> None:
    async def forgot_await() -> str:
        return "never"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="t", description="d", parameters={}, execute=lambda args, context: forgot_await()
        )
    )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await registry.execute(_input("t"))
        gc.collect()

    expected = (
        'Error: tool "t": its body is a plain function that returned an awaitable '
        "(coroutine); declare it `async def`"
    )
    assert (expected, True, []) == (
        first_text(result),
        result.is_error,
        [str(w.message) for w in caught],
    )


async def test_a_cancelled_sync_body_is_reported_only_after_its_thread_returns() -> None:
    gate = Gate()
    controller = CancelController()
    registry = ToolRegistry()
    registry.register(ToolDefinition(name="t", description="d", parameters={}, execute=gate.body))
    results: list[ToolExecutionResult] = []

    async def call() -> None:
        results.append(await registry.execute(_input("t", controller.signal)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.to_thread.run_sync(gate.entered.wait)
        controller.cancel()
        await trio.testing.wait_all_tasks_blocked()
        before_release = list(results)
        gate.release.set()

    assert ([], [ABORTED], True) == (before_release, results, gate.finished.is_set())


async def test_an_abandoned_sync_body_is_reported_at_once_with_the_honest_text() -> None:
    gate = Gate()
    controller = CancelController()
    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="t", description="d", parameters={}, execute=gate.body, abandon_on_cancel=True
        )
    )
    try:
        async with trio.open_nursery() as nursery:

            async def cancel_when_entered() -> None:
                await trio.to_thread.run_sync(gate.entered.wait)
                controller.cancel()

            nursery.start_soon(cancel_when_entered)
            result = await registry.execute(_input("t", controller.signal))
        still_running = not gate.finished.is_set()
    finally:
        gate.release.set()
    await trio.to_thread.run_sync(gate.finished.wait)

    assert (ABANDONED, True) == (result, still_running)


async def test_an_abandoned_sync_body_in_a_batch_gets_the_honest_text_too() -> None:
    gate = Gate()
    controller = CancelController()
    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="t",
            description="d",
            parameters={},
            execute=gate.body,
            abandon_on_cancel=True,
            is_concurrency_safe=lambda _args: True,
        )
    )
    calls = [ToolCallRequest(call_id="c1", name="t", arguments="{}")]
    try:
        async with trio.open_nursery() as nursery:

            async def cancel_when_entered() -> None:
                await trio.to_thread.run_sync(gate.entered.wait)
                controller.cancel()

            nursery.start_soon(cancel_when_entered)
            batch = await run_tool_calls(registry, calls, signal=controller.signal)
        still_running = not gate.finished.is_set()
    finally:
        gate.release.set()
    await trio.to_thread.run_sync(gate.finished.wait)

    assert ((ABANDONED,), True) == (batch.results, still_running)


@pytest.mark.parametrize("live", [False, True], ids=["never signal", "live signal"])
async def test_a_sync_body_raising_system_exit_in_a_pool_leaves_the_batch_as_itself(
    live: bool,
) -> None:
    def fatal(args: Any, context: ToolRunContext) -> ToolReturn:
        if context.call_id == "c0":
            raise SystemExit(4)
        return "fine"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="t",
            description="d",
            parameters={},
            execute=fatal,
            is_concurrency_safe=lambda _args: True,
        )
    )
    calls = [ToolCallRequest(call_id=f"c{i}", name="t", arguments="{}") for i in range(2)]
    signal = CancelController().signal if live else CancelSignal.never()

    with pytest.raises(SystemExit) as caught:
        await run_tool_calls(registry, calls, signal=signal)

    assert (SystemExit, 4) == (type(caught.value), caught.value.code)


async def test_a_call_cancelled_while_waiting_for_a_thread_slot_never_started() -> None:
    first, second = Gate(), Gate()
    registry = ToolRegistry(thread_limit=1)
    registry.register(ToolDefinition(name="a", description="d", parameters={}, execute=first.body))
    registry.register(ToolDefinition(name="b", description="d", parameters={}, execute=second.body))
    controller = CancelController()
    results: dict[str, ToolExecutionResult] = {}

    async def call(name: str, signal: CancelSignal) -> None:
        results[name] = await registry.execute(_input(name, signal))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "a", CancelSignal.never())
        await trio.to_thread.run_sync(first.entered.wait)
        nursery.start_soon(call, "b", controller.signal)
        await trio.testing.wait_all_tasks_blocked()
        waiting = pipeline_host(registry).thread_limiter.statistics().tasks_waiting
        controller.cancel()
        await trio.testing.wait_all_tasks_blocked()
        b_result = results.get("b")
        first.release.set()

    assert (1, ABORTED_BEFORE_DISPATCH, "done", False) == (
        waiting,
        b_result,
        first_text(results["a"]),
        second.entered.is_set(),
    )


async def test_the_registry_runs_at_most_thread_limit_sync_bodies_at_once() -> None:
    lock = threading.Lock()
    entered: list[str] = []
    two_entered = threading.Event()
    release = threading.Event()

    def body(args: Any, context: ToolRunContext) -> ToolReturn:
        with lock:
            entered.append(context.name)
            if len(entered) == 2:
                two_entered.set()
        release.wait()
        return "done"

    registry = ToolRegistry(thread_limit=2)
    for index in range(3):
        registry.register(
            ToolDefinition(name=f"t{index}", description="d", parameters={}, execute=body)
        )
    results: list[ToolExecutionResult] = []

    async def call(name: str) -> None:
        results.append(await registry.execute(_input(name)))

    async with trio.open_nursery() as nursery:
        for index in range(3):
            nursery.start_soon(call, f"t{index}")
        await trio.to_thread.run_sync(two_entered.wait)
        await trio.testing.wait_all_tasks_blocked()
        stats = pipeline_host(registry).thread_limiter.statistics()
        with lock:
            entered_while_full = len(entered)
        release.set()

    assert (2, 1, 2, ["done"] * 3) == (
        stats.borrowed_tokens,
        stats.tasks_waiting,
        entered_while_full,
        [first_text(result) for result in results],
    )


@pytest.mark.parametrize(
    ("limit", "error", "message"),
    [
        (0, ValueError, "thread_limit must be a positive int, not 0"),
        (True, TypeError, "thread_limit must be a positive int, not True"),
        (2.0, TypeError, "thread_limit must be a positive int, not 2.0"),
    ],
)
def test_the_thread_limit_must_be_a_positive_int(
    limit: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        ToolRegistry(thread_limit=cast(int, limit))

    assert message == str(caught.value)


def test_abandon_on_cancel_must_be_a_bool_and_defaults_to_false() -> None:
    tool = define_tool(name="t", description="d", parameters={}, execute=lambda a, c: "x")

    with pytest.raises(TypeError) as caught:
        attrs.evolve(tool, abandon_on_cancel=cast(bool, 1))

    assert (False, "abandon_on_cancel must be a bool, not int") == (
        tool.abandon_on_cancel,
        str(caught.value),
    )


async def test_a_sync_body_over_its_timeout_on_virtual_time_is_reported_after_its_thread(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = Gate()
    registry = ToolRegistry()
    install_timeout_policy(registry)
    registry.register(
        ToolDefinition(name="t", description="d", parameters={}, execute=gate.body, timeout=5)
    )
    results: list[tuple[float, ToolExecutionResult]] = []

    async def call() -> None:
        result = await registry.execute(_input("t"))
        results.append((trio.current_time(), result))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.to_thread.run_sync(gate.entered.wait)
        await trio.sleep(60)  # virtual: the 5 s deadline passes while the thread still runs
        pending_at_60 = list(results)
        gate.release.set()

    ((finished_at, result),) = results
    assert ([], True, "Error: tool call timed out after 5000ms") == (
        pending_at_60,
        finished_at >= 60,
        first_text(result),
    )
