"""The parallel-dispatch benchmark behind ``dsh-tools bench`` (and ``benchmarks/``).

What it measures, each against a floor built from plain trio:

- ``overhead``: per-call cost of :func:`~dsh_tools.run_tool_calls` over N parallel-safe no-op
  calls (cap = N) of a ``define_tool`` tool with an attrs parameter class, against a **bare
  nursery** (one task per call that awaits the same body with pre-parsed arguments: trio's own
  floor) and a **hand-rolled loop** (one task per call doing ``json.loads`` + hand validation
  of the argument dict, then the body: what people write without a library), for N = 1, 100,
  1,000, 10,000. Ratios above 1 are what the registry, the pipeline and the scheduler cost.
- ``overlap``: 100 calls of a tool that sleeps 10 ms (real clock) with cap 100 and cap 10: wall
  time, the overlap factor (summed sleep / wall time; 100 is perfect with cap 100), and the most
  bodies that really ran at once (one extra run under a :class:`~dsh_tools.TimelineRecorder`).
- ``barriers``: a mixed batch (groups of four parallel calls, each group followed by an
  exclusive call, every body sleeping 10 ms): wall time against the ideal (one 10 ms slot per
  pool and per barrier).
- ``streaming``: turn time on trio's virtual clock (exact) when a scripted model streams 8
  calls over 2 s: collect the whole message then run the list, against the call stream (calls
  start while the model talks), against the ideal (the latest arrival plus its tool), for tools
  of 1 s each and for a long first tool (2 s) and quick others (0.25 s).
- ``memory``: peak traced memory (``tracemalloc``) per in-flight call with N calls in flight at
  once, through the scheduler, through the hand-rolled loop, and for bare sleeping tasks.

No ``rich`` here: :mod:`dsh_tools.cli.bench_view` draws the table.
"""

from __future__ import annotations

import functools
import gc
import json
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, cast

import attrs
import trio
import trio.testing

from dsh_tools import (
    CancelSignal,
    TimelineRecorder,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)

__all__ = [
    "FULL",
    "NOISE_LIMIT",
    "QUICK",
    "SIZES",
    "BenchConfig",
    "main_bench_json",
    "run",
    "steps",
]

SIZES: Final = (1, 100, 1000, 10000)
"""The batch sizes of the overhead measurement."""


@attrs.frozen(kw_only=True)
class BenchConfig:
    """How much work each measurement does.

    Attributes:
        sizes: the batch sizes N of the overhead measurement.
        work: calls per timed round of the overhead measurement (at least one batch).
        rounds: timed rounds per measurement (the overhead reports the fastest round and
            the spread; wall-time measurements the median).
        in_flight: calls in flight at once for the memory measurement.
    """

    sizes: tuple[int, ...] = SIZES
    work: int = 20000
    rounds: int = 7
    in_flight: int = 10000

    @property
    def quick(self) -> bool:
        """Whether this is less work than :data:`FULL`."""
        return self != FULL


FULL: Final = BenchConfig()
"""The full benchmark (about a minute on a laptop)."""

QUICK: Final = BenchConfig(work=2000, rounds=3, in_flight=2000)
"""``--quick``: the same measurements with fewer rounds (a few seconds)."""

Progress = Callable[[str], object]
"""Told the label of each measurement as it finishes."""


@attrs.frozen(kw_only=True)
class Args:
    path: str


async def _noop(args: Args, context: ToolRunContext) -> str:
    return "ok"  # noqa: ASYNC910 - the benchmark measures everything around the body


async def _bare_body(path: str) -> str:
    return "ok"  # noqa: ASYNC910 - the same no-op body, without a context


def _calls(n: int, name: str = "noop") -> list[ToolCallRequest]:
    return [
        ToolCallRequest(call_id=f"c{i}", name=name, arguments='{"path": "a.txt"}') for i in range(n)
    ]


def _one_tool_registry(
    name: str,
    description: str,
    execute: Callable[[Args, ToolRunContext], Awaitable[str]],
    parallel: Callable[[Args], bool] = lambda _args: True,
) -> ToolRegistry:
    """A registry of one tool over :class:`Args`; every call may join a pool unless
    ``parallel`` says otherwise.
    """
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name=name,
            description=description,
            parameters=Args,
            execute=execute,
            is_concurrency_safe=parallel,
        )
    )
    return registry


def _noop_registry() -> ToolRegistry:
    return _one_tool_registry("noop", "does nothing", _noop)


async def bare_nursery(batch: list[ToolCallRequest]) -> None:
    """Trio's floor: one task per call awaiting the body with arguments parsed up front."""
    results: list[object] = [None] * len(batch)

    async def run_one(index: int) -> None:
        results[index] = await _bare_body("a.txt")

    async with trio.open_nursery() as nursery:
        for index in range(len(batch)):
            nursery.start_soon(run_one, index)


async def hand_rolled(batch: list[ToolCallRequest]) -> None:
    """What a loop without a library does: ``json.loads``, check the dict by hand, call."""
    results: list[object] = [None] * len(batch)

    async def run_one(index: int, call: ToolCallRequest) -> None:
        try:
            arguments: object = json.loads(call.arguments) if call.arguments else {}
        except ValueError as exc:
            results[index] = f"Error: invalid JSON: {exc}"
            return  # noqa: ASYNC910 - a task body; start_soon was its schedule point
        path = (
            cast("dict[str, object]", arguments).get("path")
            if isinstance(arguments, dict)
            else None
        )
        if not isinstance(path, str):
            results[index] = 'Error: invalid arguments: "path" must be a string'
            return  # noqa: ASYNC910 - as above
        results[index] = await _bare_body(path)

    async with trio.open_nursery() as nursery:
        for index, call in enumerate(batch):
            nursery.start_soon(run_one, index, call)


NOISE_LIMIT: Final = 0.25
"""A system whose slowest round is more than this much slower than its fastest makes the
ratios of its size untrustworthy (the report says so)."""


def _per_call_cpu_us(
    runners: dict[str, Callable[[list[ToolCallRequest]], Awaitable[object]]],
    n: int,
    *,
    repeats: int,
    rounds: int,
) -> dict[str, list[float]]:
    """CPU time per call (µs) of each runner, one sample per round: ``repeats`` batches of
    ``n`` calls. The runners alternate within every round, so a slow patch of a shared machine
    hits them all.
    """

    async def measure() -> dict[str, list[float]]:
        batch = _calls(n)
        samples: dict[str, list[float]] = {name: [] for name in runners}
        for runner in runners.values():
            await runner(batch)  # warm up
        for _ in range(rounds):
            for name, runner in runners.items():
                gc.collect()
                started = time.process_time_ns()
                for _ in range(repeats):
                    await runner(batch)
                samples[name].append((time.process_time_ns() - started) / 1000 / (repeats * n))
        return samples  # noqa: ASYNC910 - every runner awaited a batch above

    return trio.run(measure)


def _spread(samples: list[float]) -> dict[str, float]:
    return {
        "min": round(min(samples), 3),
        "median": round(statistics.median(samples), 3),
        "max": round(max(samples), 3),
    }


def overhead(config: BenchConfig, progress: Progress) -> dict[str, Any]:
    """CPU time per call against the two floors. Each ``*_us_per_call`` is the fastest round
    (the least disturbed by the rest of the machine) and the ratios divide those; the
    ``spread`` gives min / median / max over the rounds, and ``noisy`` says that some system's
    rounds differ by more than :data:`NOISE_LIMIT`, so the ratios of that size are not to be
    trusted.
    """
    registry = _noop_registry()
    signal = CancelSignal.never()

    async def scheduled(batch: list[ToolCallRequest]) -> object:
        return await run_tool_calls(
            registry, batch, signal=signal, max_parallel_tool_calls=max(len(batch), 1)
        )

    runners: dict[str, Callable[[list[ToolCallRequest]], Awaitable[object]]] = {
        "scheduler": scheduled,
        "bare_nursery": bare_nursery,
        "hand_rolled": hand_rolled,
    }
    rows: dict[str, dict[str, Any]] = {}
    for n in config.sizes:
        repeats = max(config.work // n, 1)
        samples = _per_call_cpu_us(runners, n, repeats=repeats, rounds=config.rounds)
        fastest = {name: min(values) for name, values in samples.items()}
        noisy = any(max(values) > (1 + NOISE_LIMIT) * min(values) for values in samples.values())
        rows[str(n)] = {
            "scheduler_us_per_call": round(fastest["scheduler"], 3),
            "bare_nursery_us_per_call": round(fastest["bare_nursery"], 3),
            "hand_rolled_us_per_call": round(fastest["hand_rolled"], 3),
            "ratio_to_bare": round(fastest["scheduler"] / fastest["bare_nursery"], 2),
            "ratio_to_hand_rolled": round(fastest["scheduler"] / fastest["hand_rolled"], 2),
            "spread": {name: _spread(values) for name, values in samples.items()},
            "noisy": noisy,
        }
        progress(f"overhead N={n}")
    return {"per_n": rows, "clock": "CPU time (process_time)", "noise_limit": NOISE_LIMIT}


def _sleepy_registry(classify: Callable[[str], bool]) -> ToolRegistry:
    async def nap(args: Args, context: ToolRunContext) -> str:
        await trio.sleep(0.010)
        return "ok"

    return _one_tool_registry("nap", "sleeps 10 ms", nap, lambda args: classify(args.path))


def _wall_ms(
    registry: ToolRegistry, batch: list[ToolCallRequest], cap: int, *, rounds: int
) -> float:
    async def measure() -> float:
        samples: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter_ns()
            await run_tool_calls(
                registry, batch, signal=CancelSignal.never(), max_parallel_tool_calls=cap
            )
            samples.append((time.perf_counter_ns() - started) / 1e6)
        return statistics.median(samples)  # noqa: ASYNC910 - rounds >= 1, each awaits a batch

    return trio.run(measure)


def _peak_in_flight(registry: ToolRegistry, batch: list[ToolCallRequest], cap: int) -> int:
    """One more run with a :class:`~dsh_tools.TimelineRecorder` (wall clock): the most bodies
    that really ran at once. Kept out of the timed rounds.
    """
    recorder = TimelineRecorder(clock=time.perf_counter)
    remove = recorder.install(registry)
    try:
        trio.run(
            functools.partial(
                run_tool_calls,
                registry,
                batch,
                signal=CancelSignal.never(),
                max_parallel_tool_calls=cap,
            )
        )
    finally:
        remove()
    return recorder.peak_running()


def overlap(config: BenchConfig, progress: Progress) -> dict[str, Any]:
    rounds = config.rounds
    registry = _sleepy_registry(lambda _path: True)
    batch = _calls(100, "nap")
    rows: dict[str, dict[str, float]] = {}
    for cap in (100, 10):
        wall = _wall_ms(registry, batch, cap, rounds=rounds)
        ideal = 10.0 * -(-100 // cap)
        rows[f"cap_{cap}"] = {
            "wall_ms": round(wall, 2),
            "ideal_ms": ideal,
            "overlap": round(1000 / wall, 1),  # 100 calls x 10 ms of sleep, over the wall time
            "ratio_to_ideal": round(wall / ideal, 2),
            "peak_in_flight": _peak_in_flight(registry, batch, cap),
        }
        progress(f"overlap cap={cap}")
    return rows


def barriers(config: BenchConfig, progress: Progress) -> dict[str, Any]:
    rounds = config.rounds
    registry = _sleepy_registry(lambda path: path != "x")
    groups = 5
    batch = [
        ToolCallRequest(
            call_id=f"g{g}c{i}", name="nap", arguments='{"path": "%s"}' % ("x" if i == 4 else "p")
        )
        for g in range(groups)
        for i in range(5)
    ]
    wall = _wall_ms(registry, batch, 10, rounds=rounds)
    ideal = 10.0 * 2 * groups  # each group: one pool slot, then one barrier
    peak = _peak_in_flight(registry, batch, 10)
    progress("barriers")
    return {
        "calls": len(batch),
        "shape": "5 x (4 parallel, then 1 exclusive), 10 ms each, cap 10",
        "wall_ms": round(wall, 2),
        "ideal_ms": ideal,
        "ratio_to_ideal": round(wall / ideal, 2),
        "peak_in_flight": peak,
    }


def _streaming_turn(first: float, others: float, *, streamed: bool) -> float:
    """One turn on the virtual clock: 8 parallel calls, call k complete at k * 0.25 s, the
    message over at 2 s; the first call's tool takes ``first``, the others ``others``.
    """

    async def nap(args: Args, context: ToolRunContext) -> str:
        await trio.sleep(first if context.call_id == "s0" else others)
        return "ok"

    registry = _one_tool_registry("nap", "sleeps", nap)

    async def model() -> AsyncIterator[ToolCallRequest]:
        for index in range(8):
            await trio.sleep(0.25 if index else 0)  # the first call is complete at once
            yield ToolCallRequest(call_id=f"s{index}", name="nap", arguments='{"path": "p"}')
        await trio.sleep(0.25)

    async def turn() -> float:
        begin = trio.current_time()
        if streamed:
            await run_tool_calls(registry, model(), signal=CancelSignal.never())
        else:
            calls = [call async for call in model()]
            await run_tool_calls(registry, calls, signal=CancelSignal.never())
        return trio.current_time() - begin

    return trio.run(turn, clock=trio.testing.MockClock(autojump_threshold=0))


def streaming(config: BenchConfig, progress: Progress) -> dict[str, Any]:
    rows: dict[str, dict[str, float]] = {}
    for label, first, others in (("even", 1.0, 1.0), ("long_first", 2.0, 0.25)):
        arrivals = [index * 0.25 for index in range(8)]
        ideal = max(2.0, first, *(arrival + others for arrival in arrivals[1:]))
        collected = _streaming_turn(first, others, streamed=False)
        streamed = _streaming_turn(first, others, streamed=True)
        rows[label] = {
            "collect_then_run_s": round(collected, 6),
            "streamed_s": round(streamed, 6),
            "ideal_s": round(ideal, 6),
            "speedup": round(collected / streamed, 3),
        }
    progress("streaming")
    return rows


def _in_flight_peak_bytes(n: int, *, scheduled: bool) -> int:
    gate = trio.Event()
    started = 0

    async def wait_for_all(args: Args, context: ToolRunContext) -> str:
        nonlocal started
        started += 1
        if started == n:
            gate.set()
        await gate.wait()
        return "ok"

    registry = _one_tool_registry("noop", "waits until every call is in flight", wait_for_all)
    batch = _calls(n)

    async def hand_waiting(batch: list[ToolCallRequest]) -> None:
        async def run_one(call: ToolCallRequest) -> None:
            arguments = json.loads(call.arguments)
            await wait_for_all(Args(path=arguments["path"]), None)  # type: ignore[arg-type]

        async with trio.open_nursery() as nursery:
            for call in batch:
                nursery.start_soon(run_one, call)

    async def measure() -> int:
        gc.collect()
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        if scheduled:
            await run_tool_calls(
                registry, batch, signal=CancelSignal.never(), max_parallel_tool_calls=n
            )
        else:
            await hand_waiting(batch)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak - base

    return trio.run(measure)


def _bare_task_peak_bytes(n: int) -> int:
    async def measure() -> int:
        all_started = trio.Event()
        started = 0

        async def sleeper() -> None:
            nonlocal started
            started += 1
            if started == n:
                all_started.set()
            await trio.sleep_forever()

        gc.collect()
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(sleeper)
            await all_started.wait()
            peak = tracemalloc.get_traced_memory()[1]
            nursery.cancel_scope.cancel()
        tracemalloc.stop()
        return peak - base

    return trio.run(measure)


def memory(config: BenchConfig, progress: Progress) -> dict[str, Any]:
    n = config.in_flight
    scheduled = _in_flight_peak_bytes(n, scheduled=True) / n
    hand = _in_flight_peak_bytes(n, scheduled=False) / n
    bare = _bare_task_peak_bytes(n) / n
    progress("memory")
    return {
        "in_flight_calls": n,
        "scheduler_bytes_per_call": round(scheduled),
        "hand_rolled_bytes_per_call": round(hand),
        "bare_task_bytes": round(bare),
        "added_bytes_per_call": round(scheduled - hand),
        "ratio_to_hand_rolled": round(scheduled / hand, 2),
    }


def steps(config: BenchConfig) -> int:
    """How many times :func:`run` calls its ``progress`` callback."""
    return len(config.sizes) + 2 + 1 + 1 + 1


def _ignore(_label: str) -> None:
    return None


def run(config: BenchConfig = FULL, *, progress: Progress = _ignore) -> dict[str, Any]:
    """Run every measurement; return one JSON-serializable report.

    Blocks (it calls ``trio.run`` per measurement): run it outside trio, or in a worker thread.
    """
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": config.quick,
        "overhead": overhead(config, progress),
        "overlap": overlap(config, progress),
        "barriers": barriers(config, progress),
        "streaming": streaming(config, progress),
        "memory": memory(config, progress),
    }


def main_bench_json(*, quick: bool) -> int:
    """``dsh-tools bench --json``: print the report as one JSON document."""
    json.dump(run(QUICK if quick else FULL), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
