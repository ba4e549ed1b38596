"""PostgresLimiter on a real PostgreSQL cluster: keys, weighted classes and rates shared by
registries that each hold their own limiter (their own connection, as separate processes
would), by several real processes, across a SIGKILL of a holder and a restart of the database.

Waiting is observed, never timed: a call waits while its limiter's round trips grow and its
body has not started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import local_servers
import pytest
import trio

from dsh_tools import (
    CancelController,
    CancelSignal,
    RateLimit,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.postgres import PostgresLimiter
from support import request, texts

# a bound on every wait in this file, so that a bug fails the test instead of hanging it
_HANG = 60


class Gates:
    """Per call id: the event the body waits for before it returns, and whether it started."""

    def __init__(self) -> None:
        self.go: dict[str, trio.Event] = {}
        self.started: list[str] = []

    def open(self, call_id: str) -> None:
        self.go.setdefault(call_id, trio.Event()).set()


def registry_on(limiter: PostgresLimiter, gates: Gates, **limits: Any) -> ToolRegistry:
    registry = ToolRegistry(limiter=limiter, **limits)

    async def body(args: Any, context: ToolRunContext) -> str:
        gates.started.append(context.call_id)
        await gates.go.setdefault(context.call_id, trio.Event()).wait()
        return "done"

    for name, capacity_class, weight in [
        ("write", None, 1),
        ("train", "gpu", 2),
        ("ping", "api", 1),
    ]:
        registry.register(
            define_tool(
                name=name,
                description=name,
                parameters={"path": {"type": "string"}},
                execute=body,
                is_concurrency_safe=lambda _args: True,
                conflict_keys=(lambda args: [args["path"]]) if name == "write" else None,  # type: ignore[index]
                capacity_class=capacity_class,
                capacity_weight=weight,
            )
        )
    return registry


@pytest.fixture
def limiters(dsn: str) -> Iterator[Callable[[], PostgresLimiter]]:
    opened: list[PostgresLimiter] = []

    def open_one() -> PostgresLimiter:
        limiter = PostgresLimiter(dsn, poll_interval=0.01)
        opened.append(limiter)
        return limiter

    yield open_one
    for limiter in opened:
        limiter.close()


async def wait_until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` (round trips counted on worker threads, bodies started in other
    tasks: there is no one event to wait for)."""
    with trio.fail_after(_HANG):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.005)


def write(call_id: str, path: str) -> ToolCallRequest:
    return request(call_id, "write", json.dumps({"path": path}))


async def batch_of(
    registry: ToolRegistry, *calls: ToolCallRequest, signal: CancelSignal | None = None
) -> ToolBatch:
    return await run_tool_calls(registry, calls, signal=signal or CancelSignal.never())


async def test_a_key_held_through_one_limiter_keeps_the_others_call_waiting(
    limiters: Callable[[], PostgresLimiter],
) -> None:
    gates = Gates()
    one, other = limiters(), limiters()
    first, second = registry_on(one, gates), registry_on(other, gates)
    results: dict[str, ToolBatch] = {}

    async def run(name: str, registry: ToolRegistry, *calls: ToolCallRequest) -> None:
        results[name] = await batch_of(registry, *calls)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "first", first, write("x1", "a"))
        await wait_until(lambda: "x1" in gates.started)
        nursery.start_soon(run, "second", second, write("y1", "a"), write("y2", "b"))
        # y2 (another key) runs; y1 tries, and tries again, and waits
        await wait_until(lambda: "y2" in gates.started and other.round_trips >= 4)
        assert ["x1", "y2"] == gates.started
        gates.open("x1")
        await wait_until(lambda: "y1" in gates.started)
        gates.open("y1")
        gates.open("y2")

    assert ["done"] == texts(results["first"])
    assert ["done", "done"] == texts(results["second"])


async def test_one_round_trip_to_acquire_and_one_to_release_and_none_for_a_call_that_shares_nothing(
    dsn: str,
) -> None:
    gates = Gates()
    with PostgresLimiter(dsn) as limiter:
        registry = registry_on(limiter, gates)
        registry.register(
            define_tool(
                name="read",
                description="read",
                parameters={},
                execute=lambda _args, _context: "read",
                is_concurrency_safe=lambda _args: True,
            )
        )
        for call in ("c1", "c2"):
            gates.open(call)
        before = limiter.round_trips

        batch = await batch_of(registry, write("c1", "a"), request("r1", "read"), write("c2", "b"))

        assert ["done", "read", "done"] == texts(batch)
        assert 4 == limiter.round_trips - before


async def test_a_class_with_weights_holds_across_limiters(
    limiters: Callable[[], PostgresLimiter],
) -> None:
    gates = Gates()
    one, other = limiters(), limiters()
    first = registry_on(one, gates, capacity_limits={"gpu": 3})
    second = registry_on(other, gates, capacity_limits={"gpu": 3})
    train = request("x1", "train", '{"path": "m"}')

    async with trio.open_nursery() as nursery:
        nursery.start_soon(batch_of, first, train)
        await wait_until(lambda: "x1" in gates.started)
        # x1 holds 2 of the 3 slots: y1 (weight 2) waits
        nursery.start_soon(batch_of, second, request("y1", "train", '{"path": "n"}'))
        await wait_until(lambda: other.round_trips >= 3)
        assert ["x1"] == gates.started
        gates.open("x1")
        await wait_until(lambda: "y1" in gates.started)
        gates.open("y1")


async def test_a_rate_counts_the_starts_of_every_limiter_and_a_waiting_call_can_be_interrupted(
    limiters: Callable[[], PostgresLimiter],
) -> None:
    gates = Gates()
    one, other = limiters(), limiters()
    # a window far longer than the test: nothing leaves it while the test runs
    rate = {"api": RateLimit(3, per=3600.0)}
    first, second = (
        registry_on(one, gates, rate_limits=rate),
        registry_on(other, gates, rate_limits=rate),
    )
    for call in ("x1", "x2", "y1", "y2"):
        gates.open(call)
    controller = CancelController()
    results: list[ToolBatch] = []

    async def run_second() -> None:
        results.append(
            await batch_of(
                second,
                request("y1", "ping", '{"path": "p"}'),
                request("y2", "ping", '{"path": "p"}'),
                signal=controller.signal,
            )
        )

    ping = [request(f"x{i}", "ping", '{"path": "p"}') for i in (1, 2)]
    await batch_of(first, *ping)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_second)
        # one of y1 and y2 took the window's last start (both passed this process's own
        # count, so the database decides which), the other tries, and tries again, and waits
        await wait_until(lambda: len(gates.started) == 3 and other.round_trips >= 4)
        controller.cancel()

    assert sorted(["done", "Error: tool call aborted before dispatch"]) == sorted(texts(results[0]))
    assert 3 == len(gates.started)


_HOLDER = textwrap.dedent(
    """
    import sys, trio
    from dsh_tools import CancelSignal, ToolCallRequest, ToolRegistry, define_tool, run_tool_calls
    from dsh_tools.postgres import PostgresLimiter

    async def body(args, context):
        print("holding", flush=True)
        await trio.sleep_forever()

    async def main():
        registry = ToolRegistry(limiter=PostgresLimiter(sys.argv[1]))
        registry.register(define_tool(
            name="write", description="w", parameters={"path": {"type": "string"}},
            execute=body, conflict_keys=lambda args: [args["path"]],
        ))
        call = ToolCallRequest(call_id="k1", name="write", arguments='{"path": "a"}')
        await run_tool_calls(registry, [call], signal=CancelSignal.never())

    trio.run(main)
    """
)


@pytest.fixture
def holder(dsn: str) -> Iterator[subprocess.Popen[str]]:
    """A process that holds key "a" through its own limiter until it is killed."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, dsn], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert "holding" == process.stdout.readline().strip()
        yield process
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def test_a_holder_killed_with_sigkill_frees_its_key(
    holder: subprocess.Popen[str], limiters: Callable[[], PostgresLimiter]
) -> None:
    gates = Gates()
    gates.open("y1")
    limiter = limiters()
    registry = registry_on(limiter, gates)
    batch: list[ToolBatch] = []

    async def run() -> None:
        batch.append(await batch_of(registry, write("y1", "a")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await wait_until(lambda: limiter.round_trips >= 3)
        assert [] == gates.started  # the process about to be killed holds "a"
        os.kill(holder.pid, signal.SIGKILL)
        await wait_until(lambda: bool(batch))
    assert ["done"] == texts(batch[0])


_WORKER = textwrap.dedent(
    """
    import json, sys, time, trio
    from dsh_tools import CancelSignal, ToolCallRequest, ToolRegistry, define_tool, run_tool_calls
    from dsh_tools.postgres import PostgresLimiter

    name, dsn = sys.argv[1], sys.argv[2]
    spans = []

    async def body(args, context):
        started = time.monotonic_ns()
        await trio.sleep(0.005)
        spans.append({"call": name + context.call_id, "keys": args["keys"],
                      "weight": args["weight"], "start": started, "end": time.monotonic_ns()})
        return "done"

    async def main():
        limiter = PostgresLimiter(dsn, poll_interval=0.002)
        registry = ToolRegistry(limiter=limiter, capacity_limits={"disk": 2})
        for weight in (1, 2):
            registry.register(define_tool(
                name=f"w{weight}", description="w",
                parameters={"keys": {"type": "array", "items": {"type": "string"}, "required": True},
                            "weight": {"type": "integer", "required": True}},
                execute=body, is_concurrency_safe=lambda args: True,
                conflict_keys=lambda args: args["keys"], capacity_class="disk",
                capacity_weight=weight,
            ))
        calls = []
        for index in range(12):
            weight = 1 + (index % 3 == 0)
            keys = [["a"], ["b"], ["a", "b"], []][index % 4]
            calls.append(ToolCallRequest(call_id=f"c{index}", name=f"w{weight}",
                         arguments=json.dumps({"keys": keys, "weight": weight})))
        batch = await run_tool_calls(registry, calls, signal=CancelSignal.never(),
                                     max_parallel_tool_calls=12)
        assert all(r.content[0].text == "done" for r in batch.results), batch.results
        print(json.dumps({"spans": spans, "round_trips": limiter.round_trips}))

    trio.run(main)
    """
)


def test_three_processes_never_overlap_on_a_key_nor_overfill_a_class(dsn: str) -> None:
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, name, dsn], stdout=subprocess.PIPE, text=True
        )
        for name in ("p", "q", "r")
    ]
    spans: list[dict[str, Any]] = []
    for worker in workers:
        out, _ = worker.communicate(timeout=_HANG * 2)
        assert 0 == worker.returncode
        spans.extend(json.loads(out)["spans"])

    assert 36 == len(spans)
    for one in spans:
        for other in spans:
            if one is not other and set(one["keys"]) & set(other["keys"]):
                assert one["end"] <= other["start"] or other["end"] <= one["start"], (one, other)
    for one in spans:
        in_use = sum(
            other["weight"] for other in spans if other["start"] <= one["start"] < other["end"]
        )
        assert in_use <= 2, one


async def test_a_restarted_database_fails_the_waiting_call_clearly_and_later_calls_run() -> None:
    with local_servers.postgres_cluster() as own:
        gates = Gates()
        holder, waiter = (
            PostgresLimiter(own, poll_interval=0.01),
            PostgresLimiter(own, poll_interval=0.01),
        )
        try:
            first, second = registry_on(holder, gates), registry_on(waiter, gates)
            results: list[ToolBatch] = []

            async def run_waiting() -> None:
                results.append(await batch_of(second, write("y1", "a")))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(batch_of, first, write("x1", "a"))
                await wait_until(lambda: "x1" in gates.started)
                nursery.start_soon(run_waiting)
                await wait_until(lambda: waiter.round_trips >= 3)
                await trio.to_thread.run_sync(local_servers.restart_postgres, own)
                await wait_until(lambda: bool(results))
                gates.open("x1")  # still running: what it held went with the connection

            (text,) = texts(results[0])
            assert text.startswith(
                "Error: the shared limiter lost its PostgreSQL connection (postgresql"
            ), text
            assert "y1" not in gates.started  # the waiting body never ran unguarded
            gates.open("y2")
            again = await batch_of(second, write("y2", "a"))
            assert ["done"] == texts(again)
        finally:
            holder.close()
            waiter.close()
