"""Tools from an MCP server: the same file is the server (``--serve``) and the agent step that
launches it over stdio and mounts its tools."""

from __future__ import annotations

import sys

import anyio
import mcp
import trio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from dsh_tools import CancelSignal, TextBlock, ToolCallRequest, ToolRegistry, run_tool_calls
from dsh_tools.mcp import mount_mcp

server = MCPServer("notes")
notes = {"todo": "buy milk, call Ada", "ideas": "a trio-native agent"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def read_note(name: str) -> str:
    """Read a note by name."""
    return notes[name]


@server.tool()
async def append_note(name: str, text: str) -> str:
    """Append text to a note."""
    notes[name] = f"{notes.get(name, '')}{text}"
    return f"{name} now has {len(notes[name])} characters"


async def agent_step(client: mcp.Client) -> list[str]:
    """One model response's tool calls against the server's tools, prefixed ``notes_``."""
    registry = ToolRegistry()
    async with mount_mcp(registry, client, prefix="notes_"):
        print([schema.name for schema in registry.schemas()])
        batch = await run_tool_calls(
            registry,
            [
                ToolCallRequest(call_id="1", name="notes_read_note", arguments='{"name": "todo"}'),
                ToolCallRequest(call_id="2", name="notes_read_note", arguments='{"name": 7}'),
                ToolCallRequest(
                    call_id="3",
                    name="notes_append_note",
                    arguments='{"name": "todo", "text": ", fix bike"}',
                ),
            ],
            signal=CancelSignal.never(),
        )
    return [
        "".join(block.text for block in result.content if isinstance(block, TextBlock))
        for result in batch.results
    ]


async def main() -> None:
    launch = mcp.StdioServerParameters(command=sys.executable, args=[__file__, "--serve"])
    async with mcp.Client(launch) as client:
        for line in await agent_step(client):
            print(line)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        anyio.run(server.run_stdio_async, backend="trio")
    else:
        trio.run(main)
