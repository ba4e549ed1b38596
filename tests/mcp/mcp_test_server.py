"""A real MCP server for the tests: ``python server.py`` serves over stdio (on trio),
``python server.py --http PORT`` over streamable HTTP on 127.0.0.1; the tests also import
``server`` to connect in-process.

``DSH_MCP_MARKER`` names a file the ``hang`` tool appends ``started`` and ``cancelled`` lines
to, so a test in another process can see what the handler saw.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pydantic
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent, ToolAnnotations

server = MCPServer("dsh-tools-test")

# what the in-process ``hang`` handler saw (the subprocess servers write the marker file)
events: list[str] = []


def _record(event: str) -> None:
    events.append(event)
    marker = os.environ.get("DSH_MCP_MARKER")
    if marker:
        with Path(marker).open("a", encoding="utf-8") as file:
            file.write(event + "\n")


class Host(pydantic.BaseModel):
    host: str
    port: int


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def configure(servers: list[Host]) -> str:
    """Configure a list of servers."""
    return ", ".join(f"{item.host}:{item.port}" for item in servers)


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and a one-pixel image."""
    return [
        TextContent(type="text", text="a red pixel"),
        ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
    ]


@server.tool()
def broken() -> str:
    """Always fails with a message for the model."""
    raise ToolError("disk full")


@server.tool()
async def hang(label: str) -> str:
    """Wait until cancelled."""
    _record(f"started {label}")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _record(f"cancelled {label}")
        raise
    return "unreachable"


@server.tool()
def die() -> str:
    """End the server process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and announce the change."""

    def extra() -> str:
        return f"I am {name}"

    server.add_tool(extra, name=name, description=f"added at run time: {name}")
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Remove the tool called ``name`` and announce the change."""
    server.remove_tool(name)
    await ctx.notify_tools_changed()
    return f"removed {name}"


@server.tool()
def explode() -> str:
    """Fails with an unexpected exception (the SDK hides its message from the client)."""
    raise ValueError("the fuse blew")


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def steps(count: int, ctx: Context) -> str:
    """Report ``count`` progress notifications, a little apart, then answer."""
    for step in range(1, count + 1):
        await anyio.sleep(0.01)
        await ctx.report_progress(step, count, f"step {step}")
    return f"{count} steps"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def flaky(label: str) -> str:
    """Hang on the first call with ``label`` (until the client gives up), answer on the next."""
    events.append(f"flaky {label}")
    if events.count(f"flaky {label}") == 1:
        await anyio.sleep_forever()
    return f"answered {label}"


def main(argv: list[str]) -> None:
    if argv[:1] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        anyio.run(server.run_stdio_async, backend="trio")


if __name__ == "__main__":
    main(sys.argv[1:])
