"""dsh_tools.testing: scripted tools run their steps and record their runs on virtual time."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    CancelSignal,
    HookContext,
    MemorySessionLog,
    TextBlock,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    UserSource,
    run_tool_calls,
)
from dsh_tools.testing import (
    ScriptedRun,
    check_batch,
    checkpoint,
    fail,
    hang,
    inject,
    returns,
    scripted_tool,
    shielded,
    sleep,
)
from support import request


def text(result: ToolExecutionResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextBlock))


async def execute(registry: ToolRegistry, name: str, signal: CancelSignal) -> ToolExecutionResult:
    return await registry.execute(
        ToolExecutionInput(call_id="c1", name=name, arguments={}, signal=signal)
    )


async def test_a_scripted_tool_sleeps_then_returns_its_text_and_records_the_run(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    tool = scripted_tool("slow", sleep(2), checkpoint(), returns("slow done"))
    tool.register(registry)

    result = await execute(registry, "slow", CancelSignal.never())

    assert "slow done" == text(result)
    assert (ScriptedRun(call_id="c1", started=0.0, ended=2.0, ending="returned"),) == tool.runs


async def test_without_returns_the_body_answers_done_and_its_call_id(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("quick").register(registry)

    assert "done c1" == text(await execute(registry, "quick", CancelSignal.never()))


async def test_a_failing_step_becomes_an_error_result_and_a_failed_run(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    tool = scripted_tool("broken", sleep(1), fail(ValueError("disk full")))
    tool.register(registry)

    result = await execute(registry, "broken", CancelSignal.never())

    assert ("Error: disk full", True) == (text(result), result.is_error)
    assert ("c1",) == tool.ended("failed")
    assert 1.0 == tool.runs[0].ended


async def test_a_hanging_body_is_recorded_as_cancelled_at_the_moment_of_the_interrupt(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    tool = scripted_tool("stuck", hang())
    tool.register(registry)
    controller = CancelController(deadline=1.5)

    result = await execute(registry, "stuck", controller.signal)

    assert result.error is not None
    assert "ABORTED" == result.error.code
    assert (ScriptedRun(call_id="c1", started=0.0, ended=1.5, ending="cancelled"),) == tool.runs


async def test_a_shielded_step_finishes_before_the_cancellation_lands(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    tool = scripted_tool("careful", shielded(3), sleep(10))
    tool.register(registry)
    controller = CancelController(deadline=1)

    await execute(registry, "careful", controller.signal)

    assert (ScriptedRun(call_id="c1", started=0.0, ended=3.0, ending="cancelled"),) == tool.runs


async def test_parallel_tools_overlap_and_exclusive_ones_run_alone(
    registry: ToolRegistry,
    session_log: MemorySessionLog,
    autojump_clock: trio.testing.MockClock,
) -> None:
    reader = scripted_tool("read", sleep(1))
    writer = scripted_tool("write", sleep(1), parallel=False)
    reader.register(registry)
    writer.register(registry)
    calls = [
        request("a", "read"),
        request("b", "read"),
        request("c", "write"),
        request("d", "read"),
    ]

    await run_tool_calls(registry, calls, signal=CancelSignal.never(), session=session_log)

    expected = [("a", 0.0, 1.0), ("b", 0.0, 1.0), ("d", 2.0, 3.0)]
    assert expected == sorted((r.call_id, r.started, r.ended) for r in reader.runs)
    assert [("c", 1.0, 2.0)] == [(r.call_id, r.started, r.ended) for r in writer.runs]
    assert 10 == len(session_log.events())  # 4 calls, 4 results and the bracket


def test_returns_must_be_the_last_step() -> None:
    with pytest.raises(ValueError, match=r"returns\(\) must be the last step of 'x'"):
        scripted_tool("x", returns("early"), sleep(1))


def test_a_step_that_is_not_a_step_is_refused() -> None:
    with pytest.raises(TypeError, match=r"step 0 of 'x' is not a step: 1\.5"):
        scripted_tool("x", 1.5)  # type: ignore[arg-type]


def test_sleep_refuses_a_negative_duration() -> None:
    with pytest.raises(ValueError, match="seconds must be a number of seconds >= 0, not -1"):
        sleep(-1)


def test_fail_refuses_what_is_not_an_exception() -> None:
    with pytest.raises(TypeError, match="fail\\(\\) takes an Exception"):
        fail(42)  # type: ignore[arg-type]


async def test_an_exception_class_is_raised_afresh_for_every_run(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    scripted_tool("broken", fail(KeyError)).register(registry)

    first = await execute(registry, "broken", CancelSignal.never())
    second = await execute(registry, "broken", CancelSignal.never())

    assert ["Error: KeyError", "Error: KeyError"] == [text(first), text(second)]


def test_the_plugin_fixtures_are_fresh_per_test(
    registry: ToolRegistry, session_log: MemorySessionLog
) -> None:
    assert ([], []) == (registry.schemas(), session_log.events())


async def test_an_inject_step_puts_its_context_into_the_running_batch(
    registry: ToolRegistry,
    session_log: MemorySessionLog,
    autojump_clock: trio.testing.MockClock,
) -> None:
    note = HookContext(content=(TextBlock(text="remember this"),), source=UserSource())
    scripted_tool("noting", sleep(1), inject(note)).register(registry)

    batch = await run_tool_calls(
        registry, [request("a", "noting")], signal=CancelSignal.never(), session=session_log
    )

    assert (note,) == batch.contexts
    check_batch([request("a", "noting")], batch, session_log)


async def test_an_inject_step_outside_a_batch_fails_the_call(
    registry: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    note = HookContext(content=(TextBlock(text="x"),), source=UserSource())
    scripted_tool("noting", inject(note)).register(registry)

    result = await execute(registry, "noting", CancelSignal.never())

    assert "Error: inject_context() called outside an active batch" == text(result)
