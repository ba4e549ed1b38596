"""Per-call cost of a tool mounted with ``mount_mcp``, against a direct ``client.call_tool``.

Both talk to the same ``MCPServer`` over the SDK's in-process transport (no process, no
socket), so the difference is what the mount adds: the registry's pipeline, ``jsonschema``
validation of the arguments, and mapping the MCP result onto a tool result. The in-process
round trip itself (pydantic models on both sides) dominates both. Each variant runs ``rounds``
batches of ``calls`` calls; the best batch's per-call time is reported.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import mcp
import trio
from mcp.server.mcpserver import MCPServer

from dsh_tools import CancelSignal, ToolExecutionInput, ToolRegistry
from dsh_tools.mcp import mount_mcp


def _server() -> MCPServer:
    server = MCPServer("bench")

    @server.tool()
    async def add(a: int, b: int) -> int:  # async: a sync tool would add a worker-thread hop
        """Add two integers."""
        return a + b

    return server


async def _best_per_call_us(
    call: Callable[[], Awaitable[object]], calls: int, rounds: int
) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter_ns()
        for _ in range(calls):
            await call()
        best = min(best, (time.perf_counter_ns() - started) / calls / 1000)
    return best


async def _measure(calls: int, rounds: int) -> dict[str, float]:
    registry = ToolRegistry()
    arguments = {"a": 2, "b": 3}
    request = ToolExecutionInput(
        call_id="bench", name="add", arguments=arguments, signal=CancelSignal.never()
    )
    async with mcp.Client(_server()) as client, mount_mcp(registry, client):

        async def direct() -> object:
            return await client.call_tool("add", arguments)

        async def mounted() -> object:
            result = await registry.execute(request)
            assert not result.is_error
            return result

        await _best_per_call_us(direct, 20, 1)  # warm-up
        await _best_per_call_us(mounted, 20, 1)
        direct_us = await _best_per_call_us(direct, calls, rounds)
        mounted_us = await _best_per_call_us(mounted, calls, rounds)
    return {
        "direct_call_tool_us": round(direct_us, 1),
        "mounted_execute_us": round(mounted_us, 1),
        "overhead_us": round(mounted_us - direct_us, 1),
        "ratio": round(mounted_us / direct_us, 3),
    }


def run(quick: bool) -> dict[str, object]:
    calls, rounds = (100, 3) if quick else (1000, 5)
    result: dict[str, object] = {"calls": calls, "rounds": rounds}
    result.update(trio.run(_measure, calls, rounds))
    return result
