"""Cancelling the caller's scope at every instant of a batch, not only at the stages.

The stage-by-stage matrix (``test_cancellation.py``) blocks a call at a known point and
cancels there. A cancel can also land inside trio's own machinery: in ``nursery.start`` while
a pool opens, or while a task waits under a shield. Two sweeps reach those instants:

- forced: ``dsh_tools.testing.explore_cancellations`` cancels right before the k-th task step
  of the batch, through its signal and through the caller's scope, for every k (every
  scheduling point the batch has, in any task);
- random: seeded, bounded runs on the real clock, each cancelled after a random few
  microseconds.

Every run must end (it either returns one result per call or raises ``trio.Cancelled``) with
the session log balanced. A run that hangs would block forever under a shield, where no
trio deadline reaches it, so each sweep runs ``trio.run`` in a worker thread that the test
joins with a bound.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Awaitable, Callable
from typing import Final

import pytest
import trio

from dsh_tools import (
    CancelController,
    CancelSignal,
    ExecuteNext,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    RateLimit,
    SessionLog,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.testing import check_batch, explore_cancellations
from support import request, spec_tool

# how long one whole sweep may take before the test calls it a hang (a healthy sweep takes a
# fraction of this on a loaded CI machine)
_SWEEP_BOUND: Final = 120.0


async def _checkpointing_body(args: object, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()
    return "ok"


def _sync_body(args: object, context: ToolRunContext) -> str:
    return "ok"


async def _pass_through(
    _execution: ToolDispatchExecution, next_: ExecuteNext
) -> ToolExecutionResult:
    return await next_()


async def _allow_after_checkpoint(
    _execution: ToolExecution, next_: PreExecuteNext
) -> PreToolDecision:
    await trio.lowlevel.checkpoint()
    return await next_()


def _registry(*, wrapper: bool = False, policy: bool = False, limits: bool = False) -> ToolRegistry:
    # limits: "k" calls share one key and a one-slot class with a rate, held across the runs
    # of a sweep (one registry): a cancel that left anything held would hang the next run
    registry = (
        ToolRegistry(capacity_limits={"api": 1}, rate_limits={"api": RateLimit(2, per=0.0002)})
        if limits
        else ToolRegistry()
    )
    registry.register(
        define_tool(
            name="k",
            description="a call that holds a key, a slot and a token",
            parameters={},
            execute=_checkpointing_body,
            is_concurrency_safe=lambda _args: True,
            conflict_keys=lambda _args: ["the same file"],
            capacity_class="api",
        )
    )
    registry.register(spec_tool("p", _checkpointing_body, parallel=True))
    registry.register(spec_tool("x", _checkpointing_body))
    registry.register(
        define_tool(
            name="s",
            description="a sync body",
            parameters={},
            execute=_sync_body,
            is_concurrency_safe=lambda _args: True,
        )
    )
    if wrapper:
        registry.hooks.execute.add(_pass_through)
    if policy:
        registry.hooks.pre_execute.add(_allow_after_checkpoint)
    return registry


def _calls(*names: str) -> tuple[ToolCallRequest, ...]:
    return tuple(request(f"c{index}", name) for index, name in enumerate(names, 1))


# (name, registry options, tool names of the batch)
_SHAPES: Final[tuple[tuple[str, dict[str, bool], tuple[str, ...]], ...]] = (
    ("one parallel call", {}, ("p",)),
    ("a rolling pool", {}, ("p", "p", "p")),
    ("a pool, a barrier, a pool", {}, ("p", "p", "x", "p")),
    ("execute wrappers", {"wrapper": True}, ("p", "p", "x")),
    ("pre_execute policies", {"policy": True}, ("p", "x", "p")),
    ("sync bodies", {}, ("s", "s", "x")),
    ("keys, slots and rates", {"limits": True}, ("k", "k", "x", "k", "p")),
)


def _assert_balanced(log: SessionLog) -> None:
    events = log.events()
    calls = [event.call_id for event in events if isinstance(event, ToolCallEvent)]
    results = [event.call_id for event in events if isinstance(event, ToolResultEvent)]
    assert calls == results  # every tool/call answered once, in model order


async def _one_run(
    registry: ToolRegistry,
    calls: tuple[ToolCallRequest, ...],
    cancel: Callable[[trio.CancelScope], Awaitable[None]],
) -> None:
    """Run the batch with a live signal while ``cancel`` may cancel the caller's scope."""
    log = MemorySessionLog()
    batch = None
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel, scope)
            batch = await run_tool_calls(
                registry, calls, signal=CancelController().signal, session=log
            )
            nursery.cancel_scope.cancel()
    _assert_balanced(log)
    if batch is not None:
        check_batch(calls, batch, log)


def _bounded(sweep: Callable[[list[str]], Awaitable[None]]) -> None:
    """Run ``sweep`` in its own ``trio.run`` in a worker thread; fail if it does not end."""
    progress: list[str] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            trio.run(sweep, progress)
        except BaseException as exc:  # handed to the test's thread
            failure.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(_SWEEP_BOUND)
    if thread.is_alive():
        pytest.fail(f"the batch hung; last run started: {progress[-1] if progress else None}")
    if failure:
        raise failure[0]


@pytest.mark.parametrize(("shape", "options", "names"), _SHAPES, ids=[s[0] for s in _SHAPES])
def test_a_cancel_before_any_task_step_of_a_batch_ends_it_balanced(
    shape: str, options: dict[str, bool], names: tuple[str, ...]
) -> None:
    registry = _registry(**options)
    calls = _calls(*names)

    async def scenario(signal: CancelSignal) -> ToolBatch:
        return await run_tool_calls(registry, calls, signal=signal, session=MemorySessionLog())

    # every task step of the batch, cancelled through its signal and through the caller's scope
    exploration = explore_cancellations(scenario)
    assert exploration.ok, f"{shape}: {exploration}"
    assert exploration.points > 4 * len(names)


# runs per shape; each is cancelled after a random real delay of at most _MAX_DELAY seconds
_RANDOM_RUNS: Final = 400
_MAX_DELAY: Final = 0.0003


@pytest.mark.parametrize(("shape", "options", "names"), _SHAPES, ids=[s[0] for s in _SHAPES])
def test_a_cancel_at_a_random_real_instant_ends_the_batch_balanced(
    shape: str, options: dict[str, bool], names: tuple[str, ...]
) -> None:
    registry = _registry(**options)
    calls = _calls(*names)
    rng = random.Random(f"instants/{shape}")  # seeded: the same delays on every run

    async def sweep(progress: list[str]) -> None:
        for run in range(_RANDOM_RUNS):
            delay = rng.uniform(0, _MAX_DELAY)
            progress.append(f"{shape}: run {run}, cancel after {delay * 1e6:.1f} us")

            async def cancel_later(scope: trio.CancelScope, delay: float = delay) -> None:
                await trio.sleep(delay)
                scope.cancel()

            await _one_run(registry, calls, cancel_later)

    _bounded(sweep)
