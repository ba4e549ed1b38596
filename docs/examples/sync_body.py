"""A plain ``def`` tool body: it runs in a worker thread, so blocking code is fine."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import trio

from dsh_tools import (
    CancelSignal,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)


def checksum(args: Any, context: ToolRunContext) -> str:
    # blocking work: hashlib (a real tool would read a file); never on the trio thread
    on_trio_thread = threading.current_thread() is threading.main_thread()
    digest = hashlib.sha256(str(args["text"]).encode()).hexdigest()[:12]
    return f"{digest} (on the trio thread: {on_trio_thread})"


async def main() -> None:
    registry = ToolRegistry(thread_limit=4)  # at most 4 sync bodies at once
    registry.register(
        define_tool(
            name="checksum",
            description="Checksum a text.",
            parameters={"text": {"type": "string", "required": True}},
            execute=checksum,
        )
    )
    batch = await run_tool_calls(
        registry,
        [
            ToolCallRequest(call_id="c1", name="checksum", arguments='{"text": "hello"}'),
            ToolCallRequest(call_id="c2", name="checksum", arguments='{"text": 5}'),
        ],
        signal=CancelSignal.never(),
    )
    for result in batch.results:
        print(result.content[0].text)  # pyright: ignore[reportAttributeAccessIssue]


if __name__ == "__main__":
    trio.run(main)
