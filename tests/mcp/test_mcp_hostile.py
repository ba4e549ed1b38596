"""mount_mcp against a hostile server (``hostile_mcp_server.py``): one bad tool never sinks a
mount, a result that is not lossless JSON keeps its text, and a server's schema can never block
the event loop past the batch's deadline."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import mcp
import pytest
import trio
import trio.testing
from hostile_mcp_server import HUGE, TERMINAL_TEXT, server

from dsh_tools import (
    CancelController,
    CancelSignal,
    TextBlock,
    ToolCallRequest,
    ToolExecutionResult,
    ToolRegistry,
    run_tool_calls,
)
from dsh_tools.mcp import mount_mcp

SERVER = Path(__file__).with_name("hostile_mcp_server.py")
MOUNTED = ("huge_number", "backtrack", "terminal", "echo")


def call(name: str, arguments: str = "{}", call_id: str = "c1") -> ToolCallRequest:
    return ToolCallRequest(call_id=call_id, name=name, arguments=arguments)


def texts(result: ToolExecutionResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextBlock)]


async def test_tools_with_an_empty_name_or_an_unusable_schema_are_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        async with mcp.Client(server) as client, mount_mcp(registry, client) as mounted:
            assert MOUNTED == mounted.tool_names
            batch = await run_tool_calls(
                registry, [call("echo", '{"text": "hi"}')], signal=CancelSignal.never()
            )
    assert ["echo: {'text': 'hi'}"] == texts(batch.results[0])
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert 2 == len(skipped)
    assert skipped[0].startswith("MCP tool '' skipped: ")
    assert skipped[1].startswith("MCP tool 'deep_schema' skipped: ")


async def test_structured_content_that_is_not_lossless_json_is_dropped_and_the_text_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        async with mcp.Client(server) as client, mount_mcp(registry, client):
            batch = await run_tool_calls(
                registry, [call("huge_number")], signal=CancelSignal.never()
            )
    (result,) = batch.results
    assert (False, None) == (result.is_error, result.meta)
    assert ["a number too big for JSON readers"] == texts(result)
    assert any(
        "structured content dropped" in r.getMessage() and str(HUGE) in r.getMessage()
        for r in caplog.records
    )


async def test_tool_text_full_of_escape_sequences_reaches_the_model_unchanged() -> None:
    registry = ToolRegistry()
    async with mcp.Client(server) as client, mount_mcp(registry, client):
        batch = await run_tool_calls(registry, [call("terminal")], signal=CancelSignal.never())
    assert [TERMINAL_TEXT] == texts(batch.results[0])


async def test_a_catastrophic_pattern_never_blocks_the_loop_past_the_batchs_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = ToolRegistry()
    async with mcp.Client(server) as client, mount_mcp(registry, client):
        started = trio.current_time()
        interrupt = CancelController(deadline=started + 0.5)
        # matching this against ^(a+)+$ backtracks for seconds: validated on the loop, the
        # deadline could only be seen after it; in a worker thread the call aborts on time
        batch = await run_tool_calls(
            registry,
            [call("backtrack", '{"s": "' + "a" * 25 + '!"}'), call("echo", call_id="c2")],
            signal=interrupt.signal,
        )
        assert 0.5 == pytest.approx(trio.current_time() - started)
    assert ["ABORTED", "ABORTED_BEFORE_DISPATCH"] == [
        result.error.code if result.error else "ok" for result in batch.results
    ]


async def test_a_pattern_that_matches_quickly_is_still_validated() -> None:
    registry = ToolRegistry()
    async with mcp.Client(server) as client, mount_mcp(registry, client):
        batch = await run_tool_calls(
            registry,
            [call("backtrack", '{"s": "b"}'), call("backtrack", '{"s": "aaa"}', "c2")],
            signal=CancelSignal.never(),
        )
    assert [
        ["Error: invalid arguments: \"s\" 'b' does not match '^(a+)+$'"],
        ["backtrack: {'s': 'aaa'}"],
    ] == [texts(result) for result in batch.results]


async def test_the_hostile_server_in_another_process_mounts_its_good_tools() -> None:
    params = mcp.StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    registry = ToolRegistry()
    async with mcp.Client(params) as client, mount_mcp(registry, client) as mounted:
        assert MOUNTED == mounted.tool_names
        batch = await run_tool_calls(
            registry,
            [call("huge_number"), call("terminal", call_id="c2")],
            signal=CancelSignal.never(),
        )
    assert [["a number too big for JSON readers"], [TERMINAL_TEXT]] == [
        texts(result) for result in batch.results
    ]
