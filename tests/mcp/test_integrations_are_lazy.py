"""The core never imports an integration's dependencies: importing ``dsh_tools`` (and running
a call through it) loads neither the MCP SDK, jsonschema, OpenTelemetry, pydantic, docstring-parser,
psycopg nor the Temporal SDK."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import trio
import dsh_tools

async def main():
    registry = dsh_tools.ToolRegistry()
    async def body(args, context):
        return "ok"
    registry.register(dsh_tools.define_tool(name="t", description="t", parameters={}, execute=body))
    await dsh_tools.run_tool_calls(
        registry,
        [dsh_tools.ToolCallRequest(call_id="1", name="t", arguments="{}")],
        signal=dsh_tools.CancelSignal.never(),
    )

trio.run(main)
print(sorted({name.split(".")[0] for name in sys.modules} & {"mcp", "jsonschema", "opentelemetry", "pydantic", "docstring_parser", "psycopg", "temporalio"}))
"""


def test_importing_and_using_the_core_loads_no_integration_dependency() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert "[]" == done.stdout.strip()
