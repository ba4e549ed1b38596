"""The "Tools from MCP servers" page's example runs and prints what the page shows, both
in-process and over stdio (the example launches itself as the server)."""

from __future__ import annotations

import mcp
import pytest
import trio

from support import load_example

PRINTED = [
    "['notes_read_note', 'notes_append_note']",
    "buy milk, call Ada",
    'Error: invalid arguments: "name" must be a string',
    "todo now has 28 characters",
]


async def test_the_example_agent_step_runs_against_the_server_in_process() -> None:
    example = load_example("docs/mcp.md", "Tools from an MCP server: the same file")
    example.notes["todo"] = "buy milk, call Ada"
    async with mcp.Client(example.server) as client:
        lines = await example.agent_step(client)
    assert PRINTED[1:] == lines


async def test_the_example_launches_itself_over_stdio_and_prints_what_the_page_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with trio.fail_after(30):
        await load_example("docs/mcp.md", "Tools from an MCP server: the same file").main()
    assert PRINTED == capsys.readouterr().out.splitlines()
