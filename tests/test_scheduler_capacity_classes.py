"""Capacity classes: ``ToolDefinition.capacity_class`` and ``run_tool_calls(..., capacity_limits=...)``.

Inside a parallel pool a call also needs a free slot of its class, and calls still start in
model order (a call waiting for its class holds back the calls behind it). Pinned timelines on
virtual time, the validation errors, and a property over random classes and limits."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    CancelSignal,
    Deny,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    TimelineRecorder,
    ToolBatch,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.testing import check_batch, scripted_tool, sleep
from dsh_tools.testing.strategies import BatchPlan, tool_batches
from support import request


def spans(recorder: TimelineRecorder) -> dict[str, tuple[float, float | None]]:
    return {span.call_id: (span.started, span.finished) for span in recorder.spans}


async def test_three_network_calls_limited_to_one_run_one_after_another_in_model_order(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("fetch", sleep(1), capacity_class="network").register(registry)
    scripted_tool("read", sleep(1)).register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)
    calls = [request(f"c{i}", "fetch" if i % 2 else "read") for i in range(1, 7)]
    # c1 fetch, c2 read, c3 fetch, c4 read, c5 fetch, c6 read

    await run_tool_calls(
        registry, calls, signal=CancelSignal.never(), capacity_limits={"network": 1}
    )

    expected = {
        "c1": (0.0, 1.0),
        "c2": (0.0, 1.0),
        "c3": (1.0, 2.0),  # waits for c1's network slot ...
        "c4": (1.0, 2.0),  # ... and holds c4 back: model order
        "c5": (2.0, 3.0),
        "c6": (2.0, 3.0),
    }
    assert expected == spans(recorder)
    assert 3.0 == trio.current_time()


async def test_without_limits_the_same_batch_runs_at_once(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("fetch", sleep(1), capacity_class="network").register(registry)
    scripted_tool("read", sleep(1)).register(registry)
    calls = [request(f"c{i}", "fetch" if i % 2 else "read") for i in range(1, 7)]

    await run_tool_calls(registry, calls, signal=CancelSignal.never())

    assert 1.0 == trio.current_time()


async def test_a_class_limit_works_with_the_overall_cap_and_unlisted_classes_are_free(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("shell", sleep(1), capacity_class="shell").register(registry)
    scripted_tool("gpu", sleep(1), capacity_class="gpu").register(
        registry
    )  # not listed: no class limit
    recorder = TimelineRecorder()
    recorder.install(registry)
    calls = [
        request("s1", "shell"),
        request("g1", "gpu"),
        request("g2", "gpu"),
        request("s2", "shell"),
        request("g3", "gpu"),
    ]

    await run_tool_calls(
        registry,
        calls,
        signal=CancelSignal.never(),
        max_parallel_tool_calls=4,
        capacity_limits={"shell": 1, "network": 4},
    )

    expected = {
        "s1": (0.0, 1.0),
        "g1": (0.0, 1.0),
        "g2": (0.0, 1.0),
        "s2": (1.0, 2.0),  # waits for the one shell slot (the overall cap, 4, has room)
        "g3": (1.0, 2.0),  # held back behind s2: calls start in model order
    }
    assert expected == spans(recorder)


async def test_a_call_denied_before_dispatch_takes_no_class_slot(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    async def deny_c2(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        if execution.call_id == "c2":
            return Deny("not this one")
        return await next()

    registry.hooks.pre_execute.add(deny_c2)
    scripted_tool("fetch", sleep(1), capacity_class="network").register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)
    calls = [request("c1", "fetch"), request("c2", "fetch"), request("c3", "fetch")]

    batch = await run_tool_calls(
        registry, calls, signal=CancelSignal.never(), capacity_limits={"network": 2}
    )

    # had the denied c2 taken the second network slot, c3 would have waited for c1
    assert {"c1": (0.0, 1.0), "c3": (0.0, 1.0)} == spans(recorder)
    assert "Error: not this one" == batch.results[1].content[0].text  # type: ignore[union-attr]


async def test_an_exclusive_call_of_a_class_is_still_a_barrier(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("fetch", sleep(1), capacity_class="network").register(registry)
    scripted_tool("post", sleep(1), capacity_class="network", parallel=False).register(registry)
    recorder = TimelineRecorder()
    recorder.install(registry)
    calls = [request("c1", "fetch"), request("c2", "post"), request("c3", "fetch")]

    await run_tool_calls(
        registry, calls, signal=CancelSignal.never(), capacity_limits={"network": 5}
    )

    assert {"c1": (0.0, 1.0), "c2": (1.0, 2.0), "c3": (2.0, 3.0)} == spans(recorder)


@attrs.frozen(kw_only=True)
class FetchArgs:
    url: str


async def fetch(args: FetchArgs, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()
    return args.url


def test_define_tool_passes_the_capacity_class_on() -> None:
    tool = define_tool(
        name="fetch", description="d", parameters=FetchArgs, execute=fetch, capacity_class="network"
    )
    assert "network" == tool.capacity_class
    assert (
        define_tool(name="f", description="d", parameters=FetchArgs, execute=fetch).capacity_class
        is None
    )


@pytest.mark.parametrize("capacity_class", ["", 3])
def test_a_capacity_class_must_be_a_non_empty_str(capacity_class: object) -> None:
    with pytest.raises(TypeError, match='tool "f": capacity_class must be a non-empty str or None'):
        ToolDefinition(
            name="f",
            description="d",
            parameters={},
            execute=fetch,
            capacity_class=capacity_class,  # type: ignore[arg-type]
        )


@pytest.mark.parametrize(
    ("limits", "error", "message"),
    [
        ({"network": 0}, ValueError, 'capacity_limits["network"] must be a positive int, not 0'),
        (
            {"network": True},
            TypeError,
            'capacity_limits["network"] must be a positive int, not True',
        ),
        ({"network": 1.5}, TypeError, 'capacity_limits["network"] must be a positive int, not 1.5'),
        ({3: 1}, TypeError, "capacity_limits must map class names (str) to positive integers: 3"),
        (
            [("network", 1)],
            TypeError,
            "capacity_limits must map class names (str) to positive integers, not list",
        ),
    ],
)
async def test_bad_capacity_limits_are_refused_before_any_call_starts(
    registry: ToolRegistry, limits: object, error: type[Exception], message: str
) -> None:
    tool = scripted_tool("fetch", capacity_class="network")
    tool.register(registry)
    with pytest.raises(error) as raised:
        await run_tool_calls(
            registry,
            [request("c1", "fetch")],
            signal=CancelSignal.never(),
            capacity_limits=limits,  # type: ignore[arg-type]
        )
    assert str(raised.value).startswith(message)
    assert () == tool.runs


@settings(max_examples=50, deadline=None)
@given(
    plan=tool_batches(capacity_classes=("network", "shell"), failures=False),
    cap=st.integers(1, 4),
    limits=st.fixed_dictionaries({"network": st.integers(1, 3), "shell": st.integers(1, 2)}),
)
def test_classes_never_exceed_their_limit_and_calls_start_in_model_order(
    plan: BatchPlan, cap: int, limits: dict[str, int]
) -> None:
    session = MemorySessionLog()
    registry = ToolRegistry()
    tools = plan.build(registry)

    async def main() -> ToolBatch:
        return await run_tool_calls(
            registry,
            plan.requests,
            signal=CancelSignal.never(),
            max_parallel_tool_calls=cap,
            session=session,
            capacity_limits=limits,
        )

    batch = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_batch(plan.requests, batch, session, tools=tools)
    runs = [(tool.capacity_class, run) for tool in tools for run in tool.runs]
    for pool, run in runs:
        if pool is None:
            continue
        running = [
            other
            for other_pool, other in runs
            if other_pool == pool and other.started <= run.started < (other.ended or 0)
        ]
        assert len(running) <= limits[pool]
    starts = [run.started for tool in tools for run in tool.runs]  # tools are in model order
    assert sorted(starts) == starts
