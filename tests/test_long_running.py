"""Long-running tools: timeouts the registry enforces itself, idle timeouts, progress reports.

Everything runs on trio's virtual clock.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    MemorySessionLog,
    TextBlock,
    ToolCallEvent,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionResult,
    ToolProgressEvent,
    ToolRegistry,
    ToolResultEvent,
    ToolReturn,
    ToolRunContext,
    converter,
    define_tool,
    install_timeout_policy,
    session_event_from_json,
)
from dsh_tools import (
    tool as function_tool,
)
from dsh_tools._values._execution import new_execution_token
from support import execution_input, registry_with, request, run_calls, tool


def _timeout(text: str) -> ToolExecutionResult:
    return ToolExecutionResult(
        content=(TextBlock(text=f"Error: {text}"),),
        is_error=True,
        error=ToolErrorInfo(name="ToolTimeoutError", code="TOOL_TIMEOUT"),
    )


def _ok(text: str = "done") -> ToolExecutionResult:
    return ToolExecutionResult(content=(TextBlock(text=text),), is_error=False)


async def _sleepy(args: Any, context: ToolRunContext) -> ToolReturn:
    await trio.sleep(1)
    return "done"


# --- timeouts with no wiring --------------------------------------------------------------------


async def test_a_define_tool_timeout_is_enforced_without_installing_a_policy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    registry.register(
        define_tool(name="t", description="d", parameters={}, execute=_sleepy, timeout=0.2)
    )

    result = await registry.execute(execution_input("t"))

    assert (_timeout("tool call timed out after 200ms"), 0.2) == (
        result,
        pytest.approx(trio.current_time()),
    )


async def test_the_registry_default_timeout_applies_to_a_tool_without_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry(default_timeout=0.5)
    registry.register(tool("t", _sleepy))

    result = await registry.execute(execution_input("t"))

    assert _timeout("tool call timed out after 500ms") == result


async def test_a_tool_timeout_wins_over_the_registry_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry(default_timeout=0.5)
    registry.register(tool("t", _sleepy, timeout=0.25))

    assert _timeout("tool call timed out after 250ms") == await registry.execute(
        execution_input("t")
    )


async def test_installing_the_timeout_policy_twice_does_not_stack(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = registry_with(tool("t", _sleepy, timeout=0.1))
    first = install_timeout_policy(registry)
    install_timeout_policy(registry)

    result = await registry.execute(execution_input("t"))

    assert (0, _timeout("tool call timed out after 100ms")) == (
        registry.statistics().listeners,
        result,
    )
    first()


async def test_disposing_the_built_in_policy_leaves_the_body_the_callers_signal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[object] = []
    controller = CancelController()

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        seen.append(context.signal)
        await trio.sleep(1)
        return "done"

    registry = registry_with(tool("t", body, timeout=0.1))
    install_timeout_policy(registry)()

    result = await registry.execute(execution_input("t", signal=controller.signal))

    assert ([controller.signal], _ok()) == (seen, result)


def test_a_negative_default_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="default_timeout must be a positive finite number"):
        ToolRegistry(default_timeout=-1)


@pytest.mark.parametrize("value", [math.inf, math.nan, 0])
def test_a_non_finite_or_zero_default_timeout_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="default_timeout"):
        ToolRegistry(default_timeout=value)


def test_a_default_timeout_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(TypeError, match="default_timeout must be a positive finite number of sec"):
        ToolRegistry(default_timeout=True)


@pytest.mark.parametrize("value", [-0.1, math.inf, math.nan])
def test_a_bad_progress_interval_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="progress_interval must be a finite number"):
        ToolRegistry(progress_interval=value)


@pytest.mark.parametrize("value", [-1, 0, math.inf, math.nan])
def test_a_bad_idle_timeout_is_refused_at_definition(value: float) -> None:
    with pytest.raises(ValueError, match='tool "t": idle_timeout must be a positive finite'):
        define_tool(name="t", description="d", parameters={}, execute=_sleepy, idle_timeout=value)


# --- idle timeouts ------------------------------------------------------------------------------


async def test_a_body_that_makes_no_progress_for_its_idle_timeout_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    registry.register(
        define_tool(name="t", description="d", parameters={}, execute=_sleepy, idle_timeout=0.3)
    )

    result = await registry.execute(execution_input("t"))

    assert (_timeout("tool call made no progress for 300ms"), 0.3) == (
        result,
        pytest.approx(trio.current_time()),
    )


async def test_each_progress_report_resets_the_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def steady(args: Any, context: ToolRunContext) -> ToolReturn:
        for step in range(10):
            await trio.sleep(0.2)
            context.report_progress(progress=step)
        return "done"

    registry = ToolRegistry()
    registry.register(
        define_tool(name="t", description="d", parameters={}, execute=steady, idle_timeout=0.3)
    )

    result = await registry.execute(execution_input("t"))

    assert (_ok(), 2.0) == (result, pytest.approx(trio.current_time()))


async def test_a_body_that_stops_reporting_times_out_idle_after_its_last_report(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def stalls(args: Any, context: ToolRunContext) -> ToolReturn:
        await trio.sleep(0.2)
        context.report_progress(message="halfway")
        await trio.sleep(10)
        return "done"

    registry = ToolRegistry()
    registry.register(
        define_tool(name="t", description="d", parameters={}, execute=stalls, idle_timeout=0.3)
    )

    result = await registry.execute(execution_input("t"))

    assert (_timeout("tool call made no progress for 300ms"), 0.5) == (
        result,
        pytest.approx(trio.current_time()),
    )


# --- progress -----------------------------------------------------------------------------------


def _progress_events(log: MemorySessionLog) -> list[ToolProgressEvent]:
    return [event for event in log.events() if isinstance(event, ToolProgressEvent)]


async def test_progress_reports_are_logged_between_the_call_and_its_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.report_progress(message="fetching", progress=1, total=2)
        await trio.sleep(0.5)
        context.report_progress(message="parsing", progress=2, total=2)
        return "done"

    log = MemorySessionLog()
    await run_calls(registry_with(tool("t", body)), request("c", "t"), session=log)

    kinds = [type(event).__name__ for event in log.events()[1:-1]]
    expected = (
        ["ToolCallEvent", "ToolProgressEvent", "ToolProgressEvent", "ToolResultEvent"],
        [
            ToolProgressEvent(turn=0, step=0, call_id="c", message="fetching", progress=1, total=2),
            ToolProgressEvent(turn=0, step=0, call_id="c", message="parsing", progress=2, total=2),
        ],
    )
    assert expected == (kinds, _progress_events(log))


async def test_progress_observers_belong_to_their_registry_and_scope(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.report_progress(message="half", progress=1, total=2)
        await trio.sleep(0.5)
        return "done"

    heard: list[tuple[str, str, str | None]] = []
    observed, other = registry_with(tool("t", body)), registry_with(tool("t", body))

    def observer(name: str) -> Any:
        def hear(call_id: str, message: str | None, *_rest: object) -> None:
            heard.append((name, call_id, message))

        return hear

    observed.hooks.progress.add(observer("registry"))
    observed.scope("alice").hooks.progress.add(observer("alice's scope"))
    await run_calls(observed, request("c1", "t"), agent="alice")
    await run_calls(observed, request("c2", "t"), agent="bob")
    await run_calls(other, request("c3", "t"))

    assert [
        ("registry", "c1", "half"),
        ("alice's scope", "c1", "half"),
        ("registry", "c2", "half"),
    ] == heard


async def test_reports_within_the_interval_are_coalesced_and_the_last_is_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        for step in range(1, 101):
            context.report_progress(progress=step, total=100, output=f"{step},")
            await trio.sleep(0.01)
        return "done"

    log = MemorySessionLog()
    registry = ToolRegistry(progress_interval=0.25)
    registry.register(tool("t", body))
    await run_calls(registry, request("c", "t"), session=log)

    events = _progress_events(log)
    joined = "".join(event.output or "" for event in events)
    expected = (5, 100, "".join(f"{step}," for step in range(1, 101)))
    assert expected == (len(events), events[-1].progress, joined)


async def test_progress_is_never_in_the_result_the_model_reads(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.report_progress(message="secret progress", output="terminal text")
        return "done"

    batch = await run_calls(registry_with(tool("t", body)), request("c", "t"))

    assert (_ok(),) == batch.results


async def test_a_sync_body_reports_progress_from_its_worker_thread(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.report_progress(message="from a thread", progress=3)
        return "done"

    log = MemorySessionLog()
    await run_calls(registry_with(tool("t", body)), request("c", "t"), session=log)

    expected = [ToolProgressEvent(turn=0, step=0, call_id="c", message="from a thread", progress=3)]
    assert expected == _progress_events(log)


async def test_a_function_tool_reports_progress_through_its_context(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @function_tool
    async def crawl(pages: int, context: ToolRunContext) -> str:
        """Crawl some pages."""
        for page in range(pages):
            context.report_progress(message=f"page {page + 1}", progress=page + 1, total=pages)
            await trio.sleep(1)
        return "crawled"

    log = MemorySessionLog()
    await run_calls(registry_with(crawl), request("c", "crawl", '{"pages": 3}'), session=log)

    expected = [f"page {n}" for n in (1, 2, 3)]
    assert expected == [event.message for event in _progress_events(log)]


async def test_the_progress_event_round_trips_through_its_wire_shape() -> None:
    event = ToolProgressEvent(
        turn=1, step=2, call_id="c", message="m", progress=1.5, total=3, output="x\n"
    )

    wire = converter.unstructure(event)

    expected = (
        {
            "type": "tool/progress",
            "turn": 1,
            "step": 2,
            "callId": "c",
            "message": "m",
            "progress": 1.5,
            "total": 3,
            "output": "x\n",
        },
        event,
    )
    assert expected == (wire, session_event_from_json(wire))


async def test_a_progress_event_without_details_omits_them_on_the_wire() -> None:
    expected = {"type": "tool/progress", "turn": 0, "step": 0, "callId": "c"}
    assert expected == converter.unstructure(ToolProgressEvent(turn=0, step=0, call_id="c"))


# --- bad progress ---------------------------------------------------------------------------------


async def _report_error(**report: object) -> str:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.report_progress(**report)  # pyright: ignore[reportArgumentType]
        return "done"

    batch = await run_calls(registry_with(tool("t", body)), request("c", "t"))
    text = batch.results[0].content[0]
    assert isinstance(text, TextBlock)
    return text.text


@pytest.mark.parametrize(
    ("report", "text"),
    [
        ({"progress": "half"}, "Error: progress must be a number or None, not str"),
        ({"total": True}, "Error: total must be a number or None, not bool"),
        ({"progress": math.nan}, "Error: progress must be a finite number >= 0, not nan"),
        ({"progress": -1}, "Error: progress must be a finite number >= 0, not -1"),
        ({"total": math.inf}, "Error: total must be a finite number >= 0, not inf"),
        ({"message": 3}, "Error: message must be a str or None, not int"),
        ({"output": b"x"}, "Error: output must be a str or None, not bytes"),
        (
            {"progress": 2**53},
            "Error: progress must be at most 9007199254740991 (what JSON carries exactly), "
            "not an int of 16 digits",
        ),
        (
            {"total": 10**400},
            "Error: total must be at most 9007199254740991 (what JSON carries exactly), "
            "not an int of 401 digits",
        ),
        (
            {"progress": 10**5000},
            "Error: progress must be at most 9007199254740991 (what JSON carries exactly), "
            "not an int of thousands of digits",
        ),
    ],
)
async def test_a_bad_progress_report_raises_in_the_body(
    autojump_clock: trio.testing.MockClock, report: dict[str, object], text: str
) -> None:
    assert text == await _report_error(**report)


def test_report_progress_on_a_context_no_registry_made_is_refused() -> None:
    context = ToolRunContext(
        token=new_execution_token(),
        call_id="c",
        name="t",
        arguments=None,
        signal=CancelController().signal,
    )

    with pytest.raises(RuntimeError, match="report_progress\\(\\) is for a running tool body"):
        context.report_progress(message="hello")


async def test_report_progress_after_the_call_ended_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    kept: list[ToolRunContext] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        kept.append(context)
        return "done"

    log = MemorySessionLog()
    await run_calls(registry_with(tool("t", body)), request("c", "t"), session=log)

    with pytest.raises(RuntimeError, match="report_progress\\(\\) after the call ended"):
        kept[0].report_progress(message="late")
    assert [] == _progress_events(log)


async def test_report_progress_after_a_reporting_call_ended_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    kept: list[ToolRunContext] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        kept.append(context)
        context.report_progress(message="working")
        return "done"

    log = MemorySessionLog()
    await run_calls(registry_with(tool("t", body)), request("c", "t"), session=log)

    with pytest.raises(RuntimeError, match="after the call ended"):
        kept[0].report_progress(message="late")
    assert 1 == len(_progress_events(log))


async def test_a_failing_progress_append_does_not_fail_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class NoProgressLog(MemorySessionLog):
        def append(self, event: Any, /) -> int:
            if isinstance(event, ToolProgressEvent):
                raise OSError("disk full")
            return super().append(event)

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.report_progress(message="working")
        return "done"

    log = NoProgressLog()
    batch = await run_calls(registry_with(tool("t", body)), request("c", "t"), session=log)

    events = log.events()
    assert ((_ok(),), ToolCallEvent, ToolResultEvent) == (
        batch.results,
        type(events[1]),
        type(events[2]),
    )


def test_a_definition_keeps_its_long_running_options() -> None:
    definition = define_tool(
        name="t",
        description="d",
        parameters={},
        execute=_sleepy,
        idle_timeout=2,
        max_output_chars=100,
        transient_errors=["RateLimited"],
    )

    expected = (2, 100, frozenset({"RateLimited"}))
    assert expected == (
        definition.idle_timeout,
        definition.max_output_chars,
        definition.transient_errors,
    )


def test_a_bare_str_of_transient_errors_is_refused() -> None:
    with pytest.raises(TypeError, match="transient_errors must be a collection of error names"):
        ToolDefinition(
            name="t", description="d", parameters={}, execute=_sleepy, transient_errors="x"
        )


async def test_timeouts_apply_inside_a_parallel_pool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def quick(args: Any, context: ToolRunContext) -> ToolReturn:
        await trio.sleep(0.1)
        return "quick"

    registry = ToolRegistry()
    registry.register(tool("slow", _sleepy, parallel=True, timeout=0.3))
    registry.register(tool("quick", quick, parallel=True))

    batch = await run_calls(registry, request("a", "slow"), request("b", "quick"))

    assert ((_timeout("tool call timed out after 300ms"), _ok("quick")), 0.3) == (
        batch.results,
        pytest.approx(trio.current_time()),
    )


async def test_a_sync_body_times_out_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def stalls(args: Any, context: ToolRunContext) -> ToolReturn:
        context.report_progress(message="started")
        # waits on the trio thread; the call's cancellation reaches it there
        trio.from_thread.run(trio.sleep, 10)
        return "done"

    registry = ToolRegistry()
    registry.register(
        define_tool(name="t", description="d", parameters={}, execute=stalls, idle_timeout=0.2)
    )

    result = await registry.execute(execution_input("t"))

    assert (_timeout("tool call made no progress for 200ms"), 0.2) == (
        result,
        pytest.approx(trio.current_time()),
    )


async def test_a_retried_body_counts_its_attempts_in_its_context(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from dsh_tools import HarnessError, install_retry_policy

    attempts: list[int] = []

    async def flaky(args: Any, context: ToolRunContext) -> ToolReturn:
        attempts.append(context.attempt)
        context.report_progress(message=f"attempt {context.attempt}")
        if context.attempt < 3:
            raise HarnessError("busy", "BUSY")
        return "done"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="t",
            description="d",
            parameters={},
            execute=flaky,
            idempotent=True,
            transient_errors=["BUSY"],
        )
    )
    install_retry_policy(registry, backoff=(1,))
    log = MemorySessionLog()

    batch = await run_calls(registry, request("c", "t"), session=log)

    messages = [event.message for event in _progress_events(log)]
    expected = ([1, 2, 3], (_ok(),), ["attempt 1", "attempt 2", "attempt 3"])
    assert expected == (attempts, batch.results, messages)


async def test_a_batch_cut_after_a_progress_event_resumes_with_the_next_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from dsh_tools import resume_tool_calls

    attempts: list[int] = []

    async def build(args: Any, context: ToolRunContext) -> ToolReturn:
        attempts.append(context.attempt)
        context.report_progress(message="compiling")
        await trio.sleep(1)
        return "built"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(name="build", description="d", parameters={}, execute=build, idempotent=True)
    )
    full = MemorySessionLog()
    await run_calls(registry, request("c", "build"), session=full)
    # the process stopped after the progress event: no tool/result, no batch/end
    cut = MemorySessionLog()
    for event in full.events()[:3]:
        cut.append(event)

    resumed = await resume_tool_calls(registry, cut, signal=CancelController().signal)

    assert resumed is not None
    kinds = [type(event).__name__ for event in cut.events()]
    expected = (
        [1, 2],
        (_ok("built"),),
        [
            "BatchStartEvent",
            "ToolCallEvent",
            "ToolProgressEvent",
            "ToolCallEvent",
            "ToolProgressEvent",
            "ToolResultEvent",
            "BatchEndEvent",
        ],
    )
    assert expected == (attempts, resumed.results, kinds)
