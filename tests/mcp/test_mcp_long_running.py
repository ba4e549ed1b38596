"""mount_mcp's long-running options against the real test server: timeouts, idle timeouts
reset by the server's progress notifications, trusted idempotency hints, the server's error
text, and a stdio server's stderr in the ``dsh_tools.mcp`` logger."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator
from pathlib import Path

import mcp
import mcp_test_server
import pytest
import trio

from dsh_tools import (
    MemorySessionLog,
    TextBlock,
    ToolCallRequest,
    ToolProgressEvent,
    ToolRegistry,
    install_retry_policy,
)
from dsh_tools.mcp import mount_mcp, open_stdio_client
from support import run_calls

SERVER = Path(__file__).with_name("mcp_test_server.py")


@pytest.fixture
async def client() -> AsyncGenerator[mcp.Client]:
    mcp_test_server.events.clear()
    async with mcp.Client(mcp_test_server.server) as connected:
        yield connected


def _call(name: str, arguments: str) -> ToolCallRequest:
    return ToolCallRequest(call_id="c1", name=name, arguments=arguments)


def _text(registry_result: object) -> str:
    content = getattr(registry_result, "content", ())
    return "".join(block.text for block in content if isinstance(block, TextBlock))


async def test_a_mounted_tool_gets_the_mounts_timeout(client: mcp.Client) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client, timeout=0.2):
        batch = await run_calls(registry, _call("hang", '{"label": "t"}'))

    assert "Error: tool call timed out after 200ms" == _text(batch.results[0])


async def test_server_progress_notifications_become_progress_events(client: mcp.Client) -> None:
    registry = ToolRegistry(progress_interval=0)
    log = MemorySessionLog()
    async with mount_mcp(registry, client, idle_timeout=5):
        batch = await run_calls(registry, _call("steps", '{"count": 3}'), session=log)

    progress = [event for event in log.events() if isinstance(event, ToolProgressEvent)]
    expected = (
        "3 steps",
        [("step 1", 1, 3), ("step 2", 2, 3), ("step 3", 3, 3)],
    )
    assert expected == (
        _text(batch.results[0]),
        [(event.message, event.progress, event.total) for event in progress],
    )


async def test_a_server_that_sends_no_progress_times_out_idle(client: mcp.Client) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client, idle_timeout=0.2):
        batch = await run_calls(registry, _call("hang", '{"label": "idle"}'))

    assert "Error: tool call made no progress for 200ms" == _text(batch.results[0])


async def test_the_idempotent_hint_counts_only_when_trusted(client: mcp.Client) -> None:
    untrusting = ToolRegistry()
    trusting = ToolRegistry()
    async with mount_mcp(untrusting, client), mount_mcp(trusting, client, trust_hints=True):
        hinted = (untrusting.get("steps"), trusting.get("steps"), trusting.get("add"))
        flags = tuple(tool is not None and tool.idempotent for tool in hinted)

    assert (False, True, False) == flags


async def test_a_trusted_idempotent_tool_is_retried_after_a_timeout(client: mcp.Client) -> None:
    registry = ToolRegistry()
    install_retry_policy(registry, attempts=2, backoff=(0,))
    async with mount_mcp(registry, client, timeout=0.2, trust_hints=True):
        batch = await run_calls(registry, _call("flaky", '{"label": "r"}'))

    # the first attempt hung until its timeout; the retry reached the server and answered
    expected = ("answered r", ["flaky r", "flaky r"])
    assert expected == (_text(batch.results[0]), mcp_test_server.events)


async def test_a_tool_errors_own_text_reaches_the_model(client: mcp.Client) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        batch = await run_calls(registry, _call("broken", "{}"), _call_2("explode"))

    assert [
        "Error: Error executing tool broken: disk full",
        "Error: Error executing tool explode",
    ] == [_text(result) for result in batch.results]


def _call_2(name: str) -> ToolCallRequest:
    return ToolCallRequest(call_id="c2", name=name, arguments="{}")


@pytest.mark.parametrize("value", [0, -1, float("inf"), float("nan")])
async def test_a_bad_mount_timeout_is_refused_before_anything_is_sent(
    client: mcp.Client, value: float
) -> None:
    with pytest.raises(ValueError, match="timeout must be a positive finite number"):
        async with mount_mcp(ToolRegistry(), client, timeout=value):
            pass


async def test_a_non_bool_trust_hints_is_refused(client: mcp.Client) -> None:
    with pytest.raises(TypeError, match="trust_hints must be a bool"):
        async with mount_mcp(ToolRegistry(), client, trust_hints=1):  # pyright: ignore[reportArgumentType]
            pass


async def test_a_stdio_servers_stderr_goes_to_the_dsh_tools_mcp_logger(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="dsh_tools.mcp")
    registry = ToolRegistry()
    parameters = mcp.StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    with trio.fail_after(30):
        async with open_stdio_client(parameters) as client, mount_mcp(registry, client):
            batch = await run_calls(registry, _call("explode", "{}"))

    logged = [r.getMessage() for r in caplog.records if r.name == "dsh_tools.mcp"]
    assert (
        "Error: Error executing tool explode",
        True,
        "",
    ) == (
        _text(batch.results[0]),
        any("the fuse blew" in line for line in logged),
        capfd.readouterr().err,
    )


async def test_open_stdio_client_refuses_what_is_not_stdio_parameters() -> None:
    with pytest.raises(TypeError, match=r"takes mcp\.StdioServerParameters"):
        async with open_stdio_client("python server.py"):  # pyright: ignore[reportArgumentType]
            pass
