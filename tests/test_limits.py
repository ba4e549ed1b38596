"""Conflict keys, capacity weights, rates and registry-wide limits, on trio's virtual clock.

Two calls that share a key never run at once (in a batch: the later call waits, model order
kept; across the batches of one registry); a call takes ``capacity_weight`` slots of its class;
a class's rate lets at most ``calls`` bodies start in any ``per`` seconds; a call interrupted
while it waits is ``ABORTED_BEFORE_DISPATCH``; a shared limiter is asked once per call that
shares something, and its failure is the call's error, never an unguarded run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    Allow,
    Approval,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    CancelController,
    CancelSignal,
    ContentBlock,
    ExecuteNext,
    LimitClaim,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    RateLimit,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.testing import check_batch
from support import request, texts

Spans = dict[str, tuple[float, float]]


def first_block_text(content: tuple[ContentBlock, ...]) -> str:
    block = content[0]
    assert isinstance(block, TextBlock)
    return block.text


def timed_tool(
    registry: ToolRegistry,
    name: str,
    spans: Spans,
    *,
    seconds: float = 1.0,
    parallel: bool = True,
    keys: Callable[[object], Iterable[str] | None] | None = None,
    capacity_class: str | None = None,
    weight: int = 1,
) -> None:
    """A tool whose body sleeps ``seconds`` (virtual) and notes when it ran, by call id."""

    async def body(args: object, context: ToolRunContext) -> str:
        started = trio.current_time()
        await trio.sleep(seconds)
        spans[context.call_id] = (started, trio.current_time())
        return f"{name} done"

    registry.register(
        define_tool(
            name=name,
            description=name,
            parameters={"path": {"type": "string"}},
            execute=body,
            is_concurrency_safe=lambda _args: parallel,
            conflict_keys=keys,
            capacity_class=capacity_class,
            capacity_weight=weight,
        )
    )


def by_path(args: object) -> list[str]:
    assert isinstance(args, dict)
    return [str(args["path"])]  # pyright: ignore[reportUnknownArgumentType]


def write(call_id: str, path: str, name: str = "write") -> ToolCallRequest:
    return request(call_id, name, json.dumps({"path": path}))


async def run(registry: ToolRegistry, *calls: ToolCallRequest, **options: Any) -> ToolBatch:
    """One batch; the scheduler's invariants checked on it (and on its log, when given)."""
    options.setdefault("signal", CancelSignal.never())
    batch = await run_tool_calls(registry, calls, **options)
    check_batch(calls, batch, options.get("session"))
    return batch


# --- keys -----------------------------------------------------------------------------------


async def test_writes_to_one_file_take_turns_in_model_order_and_other_files_overlap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path)

    batch = await run(
        registry, write("c1", "a"), write("c2", "b"), write("c3", "a"), write("c4", "a")
    )

    assert {"c1": (0, 1), "c2": (0, 1), "c3": (1, 2), "c4": (2, 3)} == spans
    assert ["write done"] * 4 == texts(batch)


async def test_a_key_holds_across_the_concurrent_batches_of_one_registry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, registry, write("x1", "a"), write("x2", "b"))
        await trio.sleep(0.5)
        nursery.start_soon(run, registry, write("y1", "a"), write("y2", "c"))

    assert {"x1": (0, 1), "x2": (0, 1), "y1": (1, 2), "y2": (0.5, 1.5)} == spans


async def test_another_registry_does_not_share_the_keys(
    autojump_clock: trio.testing.MockClock,
) -> None:
    spans: Spans = {}
    first, second = ToolRegistry(), ToolRegistry()
    timed_tool(first, "write", spans, keys=by_path)
    timed_tool(second, "write", spans, keys=by_path)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, first, write("x1", "a"))
        nursery.start_soon(run, second, write("y1", "a"))

    assert {"x1": (0, 1), "y1": (0, 1)} == spans


async def test_a_key_shared_by_an_exclusive_call_and_a_parallel_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # one batch: the exclusive call is a barrier anyway; another batch's parallel call with
    # its key waits for it, one with another key does not
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path)
    timed_tool(registry, "move", spans, keys=by_path, parallel=False, seconds=2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            run, registry, write("x1", "a"), write("x2", "a", "move"), write("x3", "a")
        )
        await trio.sleep(1.5)
        nursery.start_soon(run, registry, write("y1", "a"), write("y2", "b"))

    assert {
        "x1": (0, 1),
        "x2": (1, 3),
        "y1": (3, 4),  # the moved file's key was held by the exclusive call
        "y2": (1.5, 2.5),
        "x3": (4, 5),  # after y1: it asked later
    } == spans


async def test_no_keys_and_repeated_keys(autojump_clock: trio.testing.MockClock) -> None:
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(
        registry,
        "write",
        spans,
        keys=lambda args: None if args["path"] == "-" else [args["path"], args["path"]],  # type: ignore[index]
    )

    await run(registry, write("c1", "-"), write("c2", "-"), write("c3", "a"), write("c4", "a"))

    # None: no key; a key named twice is one key (the call does not wait for itself)
    assert {"c1": (0, 1), "c2": (0, 1), "c3": (0, 1), "c4": (1, 2)} == spans


@pytest.mark.parametrize(
    ("keys", "text"),
    [
        (
            lambda args: 1 / 0,  # type: ignore[misc]
            "Error: invalid arguments: conflict_keys failed: division by zero",
        ),
        (
            lambda args: "a",  # type: ignore[misc]
            "Error: invalid arguments: conflict_keys failed: conflict_keys must return a "
            "collection of keys, not the str 'a'",
        ),
        (
            lambda args: ["a", ""],  # type: ignore[misc]
            "Error: invalid arguments: conflict_keys failed: conflict_keys must return "
            "non-empty str keys, not ''",
        ),
        (
            lambda args: 7,  # type: ignore[misc]
            "Error: invalid arguments: conflict_keys failed: conflict_keys must return a "
            "collection of keys (str), not int",
        ),
    ],
)
async def test_keys_that_cannot_be_computed_are_the_calls_invalid_args_error(
    keys: Callable[[object], Iterable[str]], text: str
) -> None:
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=keys, seconds=0)
    session = MemorySessionLog()

    batch = await run(registry, write("c1", "a"), write("c2", "b"), session=session)

    assert [text, text] == texts(batch)
    assert {} == spans  # no body ran
    assert [result.error.code for result in batch.results if result.error] == [
        "INVALID_ARGS",
        "INVALID_ARGS",
    ]


async def test_keys_are_computed_from_valid_arguments_only() -> None:
    registry = ToolRegistry()
    seen: list[object] = []

    def keys(args: object) -> list[str]:
        seen.append(args)
        return ["k"]

    timed_tool(registry, "write", {}, keys=keys, seconds=0)

    batch = await run(registry, request("c1", "write", '{"path": 3}'))

    assert [] == seen
    assert texts(batch)[0].startswith("Error: invalid arguments")


async def test_keys_come_from_the_arguments_the_user_approved(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # the model asked for "a", the user changed it to "b": the call holds "b"
    async def ask(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Ask("edit?") if execution.call_id == "c2" else Allow()

    class Service:
        async def request(self, request: ApprovalRequest) -> Approval:
            await trio.lowlevel.checkpoint()
            return Approval(ApprovalOutcome.ALLOWED_ONCE, {"path": "b"})

    registry = ToolRegistry(approval=Service())
    registry.hooks.pre_execute.add(ask)
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path)

    batch = await run(registry, write("c1", "a"), write("c2", "a"), write("c3", "b"), agent="me")

    assert ["write done"] * 3 == texts(batch)
    assert {"c1": (0, 1), "c2": (0, 1), "c3": (1, 2)} == spans


# --- weights and registry-wide classes ---------------------------------------------------------


async def test_a_heavy_call_takes_more_of_a_batchs_class(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(registry, "heavy", spans, capacity_class="memory", weight=3)
    timed_tool(registry, "light", spans, capacity_class="memory")

    await run(
        registry,
        request("h1", "heavy"),
        request("l1", "light"),
        request("l2", "light"),
        request("h2", "heavy"),
        capacity_limits={"memory": 4},
    )

    # h1 (3) + l1 (1) fill the class; l2 waits and holds h2 back (model order)
    assert {"h1": (0, 1), "l1": (0, 1), "l2": (1, 2), "h2": (1, 2)} == spans


async def test_a_weight_above_the_limit_takes_the_whole_class(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry(capacity_limits={"memory": 2})
    spans: Spans = {}
    timed_tool(registry, "huge", spans, capacity_class="memory", weight=10)
    timed_tool(registry, "light", spans, capacity_class="memory")

    await run(registry, request("l1", "light"), request("h1", "huge"), request("l2", "light"))

    assert {"l1": (0, 1), "h1": (1, 2), "l2": (2, 3)} == spans


async def test_registry_classes_hold_across_batches_with_weights(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry(capacity_limits={"memory": 4})
    spans: Spans = {}
    timed_tool(registry, "heavy", spans, capacity_class="memory", weight=3)
    timed_tool(registry, "light", spans, capacity_class="memory")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, registry, request("x1", "heavy"), request("x2", "light"))
        await trio.sleep(0.25)
        nursery.start_soon(run, registry, request("y1", "light"), request("y2", "heavy"))

    assert {"x1": (0, 1), "x2": (0, 1), "y1": (1, 2), "y2": (1, 2)} == spans


async def test_a_call_waiting_for_a_key_does_not_hold_back_its_class(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry(capacity_limits={"disk": 3})
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path, capacity_class="disk")

    await run(registry, write("c1", "a"), write("c2", "a"), write("c3", "b"))

    assert {"c1": (0, 1), "c2": (1, 2), "c3": (0, 1)} == spans


# --- rates ----------------------------------------------------------------------------------


async def test_a_rate_lets_calls_start_at_most_calls_per_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry(rate_limits={"api": RateLimit(2, per=1.0)})
    spans: Spans = {}
    timed_tool(registry, "fetch", spans, capacity_class="api", seconds=0.1)

    await run(registry, *(request(f"c{i}", "fetch") for i in range(5)))

    assert [0, 0, 1, 1, 2] == [spans[f"c{i}"][0] for i in range(5)]


async def test_a_rate_holds_across_batches_and_a_token_returns_per_seconds_after_its_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry(rate_limits={"api": RateLimit(2, per=1.0)})
    spans: Spans = {}
    timed_tool(registry, "fetch", spans, capacity_class="api", seconds=0.1)

    await run(registry, request("x1", "fetch"))
    await trio.sleep(0.5)
    await run(registry, request("y1", "fetch"), request("y2", "fetch"), request("y3", "fetch"))

    # x1 at 0.0 and y1 at 0.6 took both tokens; y2 waits for x1's (back at 1.0), y3 for y1's
    assert {"x1": 0.0, "y1": 0.6, "y2": 1.0, "y3": 1.6} == {
        call: round(start, 6) for call, (start, _end) in spans.items()
    }


def test_rate_limit_values_are_checked() -> None:
    with pytest.raises(ValueError, match="RateLimit calls must be a positive int, not 0"):
        RateLimit(0, per=1.0)
    with pytest.raises(TypeError, match=r"RateLimit per must be a positive finite number"):
        RateLimit(1, per=True)
    with pytest.raises(ValueError, match=r"RateLimit per must be a positive finite number"):
        RateLimit(1, per=float("inf"))
    with pytest.raises(TypeError, match='rate_limits\\["api"\\] is a int, not a RateLimit'):
        ToolRegistry(rate_limits={"api": 10})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match='capacity_limits\\["x"\\] must be a positive int'):
        ToolRegistry(capacity_limits={"x": 0})
    with pytest.raises(TypeError, match="limiter must be a shared limiter"):
        ToolRegistry(limiter=object())  # type: ignore[arg-type]


# --- interrupts while waiting -----------------------------------------------------------------


@pytest.mark.parametrize("waiting_for", ["key", "token", "slot"])
async def test_an_interrupt_while_waiting_is_aborted_before_dispatch(
    autojump_clock: trio.testing.MockClock, waiting_for: str
) -> None:
    registry = ToolRegistry(
        capacity_limits={"slot": 1}, rate_limits={"token": RateLimit(1, per=10.0)}
    )
    spans: Spans = {}
    timed_tool(
        registry,
        "t",
        spans,
        keys=by_path if waiting_for == "key" else None,
        capacity_class=None if waiting_for == "key" else waiting_for,
        seconds=5,
    )
    controller = CancelController()
    session = MemorySessionLog()

    async def interrupt() -> None:
        await trio.sleep(1)
        controller.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt)
        batch = await run(
            registry,
            write("c1", "a", "t"),
            write("c2", "a", "t"),
            signal=controller.signal,
            session=session,
        )

    assert ["Error: tool call aborted", "Error: tool call aborted before dispatch"] == texts(batch)
    assert {} == spans
    # nothing is left held: a new batch runs at once (the token's window aside)
    if waiting_for != "token":
        await run(registry, write("c3", "a", "t"))
        assert (1.0, 6.0) == spans["c3"]


async def test_cancelling_the_callers_scope_while_a_call_waits_leaves_nothing_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path, seconds=5)
    session = MemorySessionLog()

    with trio.move_on_after(1):
        await run(registry, write("c1", "a"), write("c2", "a"), session=session)

    results = {
        event.call_id: first_block_text(event.content)
        for event in session.events()
        if isinstance(event, ToolResultEvent)
    }
    calls = [event.call_id for event in session.events() if isinstance(event, ToolCallEvent)]
    assert ["c1", "c2"] == calls
    assert {
        "c1": "Error: tool call aborted",
        "c2": "Error: tool call aborted before dispatch",
    } == results
    await run(registry, write("c3", "a"))
    assert (1.0, 6.0) == spans["c3"]


# --- a shared limiter ---------------------------------------------------------------------------


class RecordingLimiter:
    """A limiter that holds nothing itself: it notes what it is asked, and may fail."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.claims: list[LimitClaim] = []
        self.released = 0
        self.fail = fail

    async def acquire(self, claim: LimitClaim) -> Callable[[], Awaitable[None]]:
        await trio.lowlevel.checkpoint()
        self.claims.append(claim)
        if self.fail is not None:
            raise self.fail

        async def release() -> None:
            await trio.lowlevel.checkpoint()
            self.released += 1

        return release


async def test_a_shared_limiter_is_asked_once_per_call_that_shares_something() -> None:
    limiter = RecordingLimiter()
    registry = ToolRegistry(
        capacity_limits={"disk": 2}, rate_limits={"api": RateLimit(5, per=1.0)}, limiter=limiter
    )
    timed_tool(registry, "write", {}, keys=by_path, capacity_class="disk", weight=3, seconds=0)
    timed_tool(registry, "fetch", {}, capacity_class="api", seconds=0)
    timed_tool(registry, "read", {}, seconds=0)

    await run(registry, write("c1", "a"), request("c2", "fetch"), request("c3", "read"))

    # (the two bodies run at once: the order they ask in is trio's)
    assert sorted(
        [
            LimitClaim(keys=("a",), capacity_class="disk", weight=2, capacity_limit=2),
            LimitClaim(rate=RateLimit(5, per=1.0), rate_class="api"),
        ],
        key=repr,
    ) == sorted(limiter.claims, key=repr)
    assert 2 == limiter.released


async def test_a_shared_limiter_that_fails_is_the_waiting_calls_error_and_its_body_never_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = RecordingLimiter(fail=ConnectionError("the database went away"))
    registry = ToolRegistry(limiter=limiter)
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path)

    batch = await run(registry, write("c1", "a"), write("c2", "a"))

    assert ["Error: the database went away"] * 2 == texts(batch)
    assert {} == spans


# --- the property ---------------------------------------------------------------------------

# (tool, capacity class, weight): disk holds 3 slots, api starts at most 2 calls a second
_TOOLS = [("plain", None, 1), ("disk1", "disk", 1), ("disk3", "disk", 3), ("api", "api", 1)]
_DISK_SLOTS = 3
_API_RATE = RateLimit(2, per=1.0)


@attrs.frozen
class _Ran:
    call_id: str
    tool: str
    keys: tuple[str, ...]
    started: float
    ended: float


def _limited_registry(ran: list[_Ran]) -> ToolRegistry:
    registry = ToolRegistry(capacity_limits={"disk": _DISK_SLOTS}, rate_limits={"api": _API_RATE})
    for name, capacity_class, weight in _TOOLS:

        async def body(args: Any, context: ToolRunContext, name: str = name) -> str:
            started = trio.current_time()
            await trio.sleep(args["seconds"])
            ran.append(
                _Ran(context.call_id, name, tuple(args["keys"]), started, trio.current_time())
            )
            return "done"

        registry.register(
            define_tool(
                name=name,
                description=name,
                parameters={
                    "keys": {"type": "array", "items": {"type": "string"}, "required": True},
                    "seconds": {"type": "number", "required": True},
                    "parallel": {"type": "boolean", "required": True},
                },
                execute=body,
                is_concurrency_safe=lambda args: args["parallel"],  # type: ignore[index]
                conflict_keys=lambda args: args["keys"],  # type: ignore[index]
                capacity_class=capacity_class,
                capacity_weight=weight,
            )
        )
    return registry


_call_plans = st.lists(
    st.tuples(
        st.sampled_from([name for name, _, _ in _TOOLS]),
        st.lists(st.sampled_from("abc"), max_size=2),
        st.sampled_from([0.0, 0.5, 1.0, 2.0]),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


@settings(deadline=None)
@given(first=_call_plans, second=_call_plans, delay=st.sampled_from([0.0, 0.25, 1.0]))
def test_no_key_two_holders_no_class_over_its_slots_no_window_over_its_rate(
    first: list[tuple[str, list[str], float, bool]],
    second: list[tuple[str, list[str], float, bool]],
    delay: float,
) -> None:
    ran: list[_Ran] = []
    registry = _limited_registry(ran)

    def calls(prefix: str, plan: list[tuple[str, list[str], float, bool]]) -> list[ToolCallRequest]:
        return [
            request(
                f"{prefix}{index}",
                tool,
                json.dumps({"keys": keys, "seconds": seconds, "parallel": parallel}),
            )
            for index, (tool, keys, seconds, parallel) in enumerate(plan)
        ]

    async def main() -> None:
        # no deadlock: everything ends in bounded virtual time
        with trio.fail_after(1000):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, registry, *calls("x", first))
                await trio.sleep(delay)
                nursery.start_soon(run, registry, *calls("y", second))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    # every call ran once (run() checked one result per call, in model order)
    assert len(first) + len(second) == len(ran)
    for one in ran:
        for other in ran:
            if one is not other and set(one.keys) & set(other.keys):
                assert one.ended <= other.started or other.ended <= one.started, (one, other)
    weights = {name: weight for name, _, weight in _TOOLS}
    for moment in {one.started for one in ran}:
        in_disk = sum(
            min(weights[one.tool], _DISK_SLOTS)
            for one in ran
            if one.tool.startswith("disk") and one.started <= moment < one.ended
        )
        assert in_disk <= _DISK_SLOTS
        api_starts = [
            one for one in ran if one.tool == "api" and moment <= one.started < moment + 1.0
        ]
        assert len(api_starts) <= _API_RATE.calls


async def test_keys_hold_with_execute_wrappers_and_an_interrupt_reaches_the_waiting_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # a wrapper may replace a call's signal: the call waits and runs in scopes of its own
    registry = ToolRegistry()
    seen: list[str] = []

    async def wrapper(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        seen.append(execution.call_id)
        return await next()

    registry.hooks.execute.add(wrapper)
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path)
    controller = CancelController()

    async def interrupt() -> None:
        await trio.sleep(1.5)
        controller.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt)
        batch = await run(
            registry,
            write("c1", "a"),
            write("c2", "a"),
            write("c3", "a"),
            signal=controller.signal,
            session=MemorySessionLog(),
        )

    assert {"c1": (0, 1)} == spans
    assert [
        "write done",
        "Error: tool call aborted",
        "Error: tool call aborted before dispatch",
    ] == texts(batch)
    assert ["c1", "c2"] == seen  # the wrapper saw only the calls that got their key


async def test_a_single_execute_holds_the_keys_of_the_registrys_batches(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    spans: Spans = {}
    timed_tool(registry, "write", spans, keys=by_path)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, registry, write("x1", "a"))
        await trio.sleep(0.5)
        result = await registry.execute(
            ToolExecutionInput(
                call_id="e1", name="write", arguments={"path": "a"}, signal=CancelSignal.never()
            )
        )

    assert "write done" == first_block_text(result.content)
    assert {"x1": (0, 1), "e1": (1, 2)} == spans
