"""A hostile MCP server for the tests: it lists and answers what a well-behaved server never
would. ``python hostile_mcp_server.py`` serves over stdio (on trio); the tests also import
``server`` to connect in-process.

Each tool is one attack on ``mount_mcp``:

- ``""``: a tool with an empty name (invalid: it must be skipped, the rest mount);
- ``deep_schema``: an input schema nested deeper than the JSON boundary allows (211 levels;
  skipped too);
- ``huge_number``: valid text content with ``structuredContent`` that is not lossless JSON (an
  integer beyond 2**53);
- ``backtrack``: an input schema whose ``pattern`` backtracks catastrophically (``^(a+)+$``);
- ``lookaround``: a ``pattern`` with a lookahead, which a linear-time matcher cannot run (the
  mount warns and leaves it to the server);
- ``terminal``: text content full of terminal escape sequences and markup (data for the model:
  it passes through unchanged);
- ``echo``: a well-behaved tool, to show the rest still mount and run.

Over stdio the server leaves ``deep_schema`` out: the SDK's JSON parser refuses a message that
deep before ``mount_mcp`` sees it (it logs the error and drops the response, and the listing
request then waits forever).
"""

from __future__ import annotations

import sys
from typing import Any, Final

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

TERMINAL_TEXT: Final = "\x1b]0;PWNED\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07[/bold]"
"""What the ``terminal`` tool returns."""

HUGE: Final = 2**60
"""The integer in the ``huge_number`` tool's structured content."""


def _deep_schema(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


TOOLS: Final = [
    types.Tool(name="", description="no name", input_schema={"type": "object"}),
    types.Tool(name="deep_schema", description="too deep", input_schema=_deep_schema(105)),
    types.Tool(name="huge_number", input_schema={"type": "object"}),
    types.Tool(
        name="backtrack",
        input_schema={
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        },
    ),
    types.Tool(
        name="lookaround",
        input_schema={
            "type": "object",
            "properties": {"user": {"type": "string", "pattern": "^(?!admin)"}},
        },
    ),
    types.Tool(name="terminal", input_schema={"type": "object"}),
    types.Tool(
        name="echo",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    ),
]


over_stdio = False


async def list_tools(
    _ctx: ServerRequestContext[object], _params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [tool for tool in TOOLS if not (over_stdio and tool.name == "deep_schema")]
    return types.ListToolsResult(tools=tools)


async def call_tool(
    _ctx: ServerRequestContext[object], params: types.CallToolRequestParams
) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "huge_number":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="a number too big for JSON readers")],
            structured_content={"n": HUGE},
        )
    if params.name == "terminal":
        return types.CallToolResult(content=[types.TextContent(type="text", text=TERMINAL_TEXT)])
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{params.name}: {arguments}")]
    )


server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    global over_stdio
    over_stdio = True

    async def serve() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve, backend="trio")


if __name__ == "__main__":
    main()
    sys.exit(0)
