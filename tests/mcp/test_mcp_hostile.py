"""mount_mcp against a hostile server (``hostile_mcp_server.py``): one bad tool never sinks a
mount, a result that is not lossless JSON keeps its text, and a server's regular expression can
never block the event loop."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import mcp
import pytest
from hostile_mcp_server import HUGE, TERMINAL_TEXT, server

from dsh_tools import (
    CancelSignal,
    TextBlock,
    ToolCallRequest,
    ToolExecutionResult,
    ToolRegistry,
    run_tool_calls,
)
from dsh_tools.mcp import mount_mcp

SERVER = Path(__file__).with_name("hostile_mcp_server.py")
MOUNTED = ("huge_number", "backtrack", "lookaround", "terminal", "echo")


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


@pytest.mark.parametrize("length", [25, 60, 100_000])
async def test_a_catastrophic_pattern_is_matched_in_linear_time_on_the_loop(length: int) -> None:
    # ^(a+)+$ against "aaa...a!": Python's re backtracks 2**length steps holding the GIL (at
    # 60 characters, longer than the universe has existed), so this test can only end if the
    # server's pattern runs on a linear-time engine
    registry = ToolRegistry()
    async with mcp.Client(server) as client, mount_mcp(registry, client):
        batch = await run_tool_calls(
            registry,
            [call("backtrack", '{"s": "' + "a" * length + '!"}'), call("echo", call_id="c2")],
            signal=CancelSignal.never(),
        )
    (rejected,) = texts(batch.results[0])
    assert rejected.startswith('Error: invalid arguments: "s" \'aaa')
    assert rejected.endswith("a!' does not match '^(a+)+$'")
    assert ["echo: {}"] == texts(batch.results[1])


async def test_a_pattern_a_linear_matcher_cannot_run_is_left_to_the_server_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        async with mcp.Client(server) as client, mount_mcp(registry, client):
            batch = await run_tool_calls(
                registry, [call("lookaround", '{"user": "admin"}')], signal=CancelSignal.never()
            )
    assert ["lookaround: {'user': 'admin'}"] == texts(batch.results[0])
    assert [
        'MCP tool "lookaround": patterns RE2 cannot run (backreferences, lookaround) are left '
        'for the server to check: "^(?!admin)"'
    ] == [r.getMessage() for r in caplog.records if "RE2" in r.getMessage()]


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
