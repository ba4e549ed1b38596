"""Per-call cost of ``await registry.execute(...)`` against the floor of calling the body.

The floor is what a loop without the library would do for the same echo tool: validate the
arguments by hand and ``await body(args)``. Measured in the same run, same process, so the
ratios are what the targets judge (no hooks <= 3x the floor; timeout policy plus three
pass-through hooks <= 4x). Each variant runs ``rounds`` batches of ``calls`` calls; the best
batch's per-call time is reported (the least disturbed by other load on the machine).

The floor has no trio checkpoint at all (the echo body never awaits anything), while
``execute`` must be one (a schedule point costs several microseconds in trio), so the report
also gives the ratio to ``floor_with_checkpoint``: the floor plus one ``trio.lowlevel.checkpoint()``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from dsh_tools import (
    CancelController,
    CancelSignal,
    ExecuteNext,
    FrozenJsonObject,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    install_timeout_policy,
)

TARGET_NO_HOOKS = 3.0
TARGET_WITH_POLICY = 4.0


async def _echo(args: FrozenJsonObject, context: ToolRunContext) -> str:
    return str(args["text"])


def _echo_tool(timeout: float | None = 30.0) -> Any:
    return define_tool(
        name="echo",
        description="Echo the text back.",
        parameters={"text": {"type": "string", "required": True}},
        execute=_echo,
        timeout=timeout,
    )


async def _pass_pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
    return await next()


async def _pass_wrapper(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
    return await next()


async def _pass_post(
    execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
) -> PostToolDecision:
    return await next()


async def _time_batches(
    call: Callable[[], Awaitable[object]], calls: int, rounds: int
) -> list[float]:
    """Per-call nanoseconds of each round."""
    per_call: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        for _ in range(calls):
            await call()
        per_call.append((time.perf_counter_ns() - started) / calls)
    return per_call


async def _measure(calls: int, rounds: int) -> dict[str, list[float]]:
    arguments = {"text": "hello"}

    async def floor() -> object:
        # what a caller without the library does: check the arguments, call the body
        text = arguments.get("text")
        if not isinstance(text, str):
            raise TypeError('"text" must be a string')
        return await _echo(arguments, None)  # type: ignore[arg-type]

    async def floor_with_checkpoint() -> object:
        # the same, plus the one trio schedule point every public async call owes its caller
        result = await floor()
        await trio.lowlevel.checkpoint()
        return result

    # no policy: a tool without a timeout (the registry enforces a tool's timeout itself)
    plain = ToolRegistry()
    plain.register(_echo_tool(timeout=None))

    hooked = ToolRegistry()
    hooked.register(_echo_tool())
    install_timeout_policy(hooked)
    hooked.hooks.pre_execute.add(_pass_pre)
    hooked.hooks.execute.add(_pass_wrapper)
    hooked.hooks.post_execute.add(_pass_post)

    never = ToolExecutionInput(
        call_id="c", name="echo", arguments=arguments, signal=CancelSignal.never()
    )
    live = ToolExecutionInput(
        call_id="c", name="echo", arguments=arguments, signal=CancelController().signal
    )

    variants: dict[str, Callable[[], Awaitable[object]]] = {
        "floor": floor,
        "floor_with_checkpoint": floor_with_checkpoint,
        "no_hooks_never_signal": lambda: plain.execute(never),
        "no_hooks_live_signal": lambda: plain.execute(live),
        "policy_and_3_hooks_live_signal": lambda: hooked.execute(live),
    }
    results: dict[str, list[float]] = {name: [] for name in variants}
    # interleave the variants round by round so that load spikes hit them alike
    for _ in range(rounds):
        for name, call in variants.items():
            results[name].extend(await _time_batches(call, calls, 1))
    return results


def run(quick: bool) -> dict[str, object]:
    calls, rounds = (2_000, 5) if quick else (20_000, 9)
    samples = trio.run(_measure, calls, rounds)
    best = {name: min(values) for name, values in samples.items()}
    median = {name: statistics.median(values) for name, values in samples.items()}
    floor = best["floor"]
    checkpoint_floor = best["floor_with_checkpoint"]
    ratio = {name: best[name] / floor for name in best if name.startswith(("no_", "policy"))}
    ratio_to_checkpoint_floor = {name: best[name] / checkpoint_floor for name in ratio}
    no_hooks_worst = max(ratio["no_hooks_never_signal"], ratio["no_hooks_live_signal"])
    return {
        "calls_per_round": calls,
        "rounds": rounds,
        "best_ns_per_call": {name: round(value) for name, value in best.items()},
        "median_ns_per_call": {name: round(value) for name, value in median.items()},
        "ratio_to_floor": {name: round(value, 2) for name, value in ratio.items()},
        "ratio_to_floor_with_checkpoint": {
            name: round(value, 2) for name, value in ratio_to_checkpoint_floor.items()
        },
        "target_no_hooks_ratio": TARGET_NO_HOOKS,
        "target_no_hooks_met": no_hooks_worst <= TARGET_NO_HOOKS,
        "target_policy_and_hooks_ratio": TARGET_WITH_POLICY,
        "target_policy_and_hooks_met": ratio["policy_and_3_hooks_live_signal"]
        <= TARGET_WITH_POLICY,
    }
