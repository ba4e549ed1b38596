"""A batch killed mid-run with SIGKILL, then finished from its SQLite log by another process."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from dsh_tools import (
    CancelSignal,
    SchemaSpec,
    SqliteSessionLog,
    TextBlock,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    resume_tool_calls,
    run_tool_calls,
)

CALLS = [
    ToolCallRequest(call_id="c1", name="fetch", arguments='{"url": "https://example.com"}'),
    ToolCallRequest(call_id="c2", name="send_email", arguments='{"to": "ops@example.com"}'),
    ToolCallRequest(call_id="c3", name="write_file", arguments='{"path": "notes.txt"}'),
]


def build_registry(work_seconds: float) -> ToolRegistry:
    """Three tools; each body takes ``work_seconds``, and says when it starts."""

    async def fetch(args: Any, context: ToolRunContext) -> str:
        print(f"started {context.call_id}", flush=True)
        await trio.sleep(work_seconds)
        return f"fetched {args['url']} (attempt {context.attempt})"

    async def send_email(args: Any, context: ToolRunContext) -> str:
        print(f"started {context.call_id}", flush=True)
        await trio.sleep(work_seconds)
        return f"sent to {args['to']}"

    async def write_file(args: Any, context: ToolRunContext) -> str:
        print(f"started {context.call_id}", flush=True)
        await trio.sleep(work_seconds)
        return f"wrote {args['path']}"

    url: SchemaSpec = {"url": {"type": "string", "required": True}}
    to: SchemaSpec = {"to": {"type": "string", "required": True}}
    path: SchemaSpec = {"path": {"type": "string", "required": True}}
    registry = ToolRegistry()
    # fetching twice is harmless: after a crash, an interrupted fetch runs again
    registry.register(
        define_tool(
            name="fetch",
            description="Fetch a page.",
            parameters=url,
            execute=fetch,
            is_concurrency_safe=lambda _args: True,
            idempotent=True,
        )
    )
    # an email sent twice is not: an interrupted one gets TOOL_INTERRUPTED instead
    registry.register(
        define_tool(
            name="send_email",
            description="Send an email.",
            parameters=to,
            execute=send_email,
            is_concurrency_safe=lambda _args: True,
        )
    )
    registry.register(
        define_tool(
            name="write_file", description="Write a file.", parameters=path, execute=write_file
        )
    )
    return registry


async def run_batch(log_path: str) -> None:
    """The agent process: run the batch into the log (this one is killed while it runs)."""
    with SqliteSessionLog(log_path) as log:
        await run_tool_calls(build_registry(60), CALLS, signal=CancelSignal.never(), session=log)


def run_and_kill(log_path: Path) -> None:
    """Start the agent process and SIGKILL it once both parallel bodies have started."""
    with subprocess.Popen(
        [sys.executable, __file__, str(log_path)], stdout=subprocess.PIPE, text=True
    ) as agent:
        assert agent.stdout is not None
        started = sorted(agent.stdout.readline().strip() for _ in range(2))
        agent.send_signal(signal.SIGKILL)
        agent.wait(timeout=30)
    print(f"agent killed after: {', '.join(started)}")


async def resume(log_path: Path) -> None:
    """A new process: finish the batch in the same log."""
    with SqliteSessionLog(log_path) as log:
        batch = await resume_tool_calls(build_registry(0), log, signal=CancelSignal.never())
    assert batch is not None
    for call, result in zip(CALLS, batch.results, strict=True):
        text = " ".join(b.text for b in result.content if isinstance(b, TextBlock))
        print(f"{call.call_id}: {text}")


def main(log_path: Path) -> None:
    run_and_kill(log_path)
    trio.run(resume, log_path)


if __name__ == "__main__":
    trio.run(run_batch, sys.argv[1])
