"""mount_mcp against the real test server in another process: over stdio, and over streamable
HTTP on 127.0.0.1 (the way to reach tools on another machine).

These tests talk to a real process, so they run on trio's real clock; every wait is bounded
(``trio.fail_after``) and polls a marker file the server writes, never a fixed sleep.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp
import pytest
import trio

from dsh_tools import (
    CancelController,
    CancelSignal,
    TextBlock,
    ToolCallRequest,
    ToolErrorInfo,
    ToolExecutionResult,
    ToolRegistry,
    run_tool_calls,
)
from dsh_tools.mcp import mount_mcp

SERVER = Path(__file__).with_name("mcp_test_server.py")
BOUND = 30.0  # seconds: a generous bound for a process on a loaded 2-core machine
POLL = 0.02


async def lines(marker: Path) -> list[str]:
    path = trio.Path(marker)
    return (await path.read_text()).splitlines() if await path.exists() else []


async def wait_for_line(marker: Path, line: str) -> None:
    # another process writes the file: there is no event to wait on, so poll (bounded)
    with trio.fail_after(BOUND):
        while line not in await lines(marker):  # noqa: ASYNC110
            await trio.sleep(POLL)


def stdio_client(marker: Path) -> mcp.Client:
    return mcp.Client(
        mcp.StdioServerParameters(
            command=sys.executable, args=[str(SERVER)], env={"DSH_MCP_MARKER": str(marker)}
        )
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def http_server(marker: Path) -> AsyncGenerator[str]:
    """Start the test server over streamable HTTP in a subprocess; yield its URL; always
    terminate it."""
    port = free_port()
    env = {**os.environ, "DSH_MCP_MARKER": str(marker)}
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(BOUND):
            while True:  # readiness: the port accepts a connection
                assert process.poll() is None, "the HTTP server exited during startup"
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    await trio.sleep(POLL)
                    continue
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        with trio.move_on_after(BOUND) as waited:
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()


@asynccontextmanager
async def connected(transport: str, marker: Path) -> AsyncGenerator[mcp.Client]:
    if transport == "stdio":
        async with stdio_client(marker) as client:
            yield client
    else:
        async with http_server(marker) as url, mcp.Client(url) as client:
            yield client


def text_of(result: ToolExecutionResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextBlock))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_mounted_call_reaches_the_server_in_another_process(
    transport: str, tmp_path: Path
) -> None:
    registry = ToolRegistry()
    with trio.fail_after(BOUND):
        async with (
            connected(transport, tmp_path / "marker") as client,
            mount_mcp(registry, client),
        ):
            batch = await run_tool_calls(
                registry,
                [
                    ToolCallRequest(call_id="1", name="add", arguments='{"a": 20, "b": 22}'),
                    ToolCallRequest(call_id="2", name="add", arguments='{"a": 1, "b": 1}'),
                    ToolCallRequest(call_id="3", name="configure", arguments='{"servers": 1}'),
                ],
                signal=CancelSignal.never(),
            )
    assert [
        "42",
        "2",
        'Error: invalid arguments: "servers" must be an array',
    ] == [text_of(result) for result in batch.results]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancelling_a_batch_sends_the_cancel_notification_the_server_handler_sees(
    transport: str, tmp_path: Path
) -> None:
    registry = ToolRegistry()
    marker = tmp_path / "marker"
    controller = CancelController()
    results: list[ToolExecutionResult] = []
    async with connected(transport, marker) as client, mount_mcp(registry, client):

        async def run() -> None:
            batch = await run_tool_calls(
                registry,
                [ToolCallRequest(call_id="h", name="hang", arguments='{"label": "remote"}')],
                signal=controller.signal,
            )
            results.extend(batch.results)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await wait_for_line(marker, "started remote")
            controller.cancel()
        await wait_for_line(marker, "cancelled remote")
    assert [ToolErrorInfo(name="AbortError", code="ABORTED")] == [r.error for r in results]


async def test_a_server_that_dies_mid_call_gives_an_error_result_not_a_hung_batch(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry()
    with trio.fail_after(BOUND):
        async with stdio_client(tmp_path / "marker") as client, mount_mcp(registry, client):
            batch = await run_tool_calls(
                registry,
                [ToolCallRequest(call_id="d", name="die", arguments="{}")],
                signal=CancelSignal.never(),
            )
    (result,) = batch.results
    assert result.is_error
    assert ToolErrorInfo(name="McpConnectionError", code="MCP_CONNECTION") == result.error
    assert text_of(result).startswith('Error: MCP tool "die" failed: ')


async def test_an_http_server_that_dies_mid_call_ends_the_client_block_without_a_hang(
    tmp_path: Path,
) -> None:
    # mcp 2.3's streamable HTTP client lets the broken POST's RemoteProtocolError escape its
    # own task group (python-sdk issue 3522): the whole `async with Client` block ends with
    # it, so no result is returned; this pins that nothing hangs meanwhile
    registry = ToolRegistry()
    returned: list[object] = []
    with trio.fail_after(BOUND), pytest.raises(BaseExceptionGroup) as raised:
        async with connected("http", tmp_path / "marker") as client, mount_mcp(registry, client):
            returned.append(
                await run_tool_calls(
                    registry,
                    [ToolCallRequest(call_id="d", name="die", arguments="{}")],
                    signal=CancelSignal.never(),
                )
            )
    assert raised.group_contains(Exception, match="Server disconnected without sending a response")
    assert [] == returned
    assert [] == registry.schemas()
