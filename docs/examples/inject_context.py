"""A tool body that injects a context message into the running batch."""

from __future__ import annotations

from typing import Any

import trio

from dsh_tools import (
    CancelSignal,
    HookContext,
    MemorySessionLog,
    PluginSource,
    TextBlock,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    inject_context,
    run_tool_calls,
)


async def open_ticket(args: Any, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()
    inject_context(
        HookContext(
            content=(TextBlock(text=f"Ticket {args['id']} is assigned to you now."),),
            source=PluginSource(plugin="tickets"),
            meta={"ticket": args["id"]},  # persisted, hidden from the model
        )
    )
    return f"ticket {args['id']} opened"


async def main() -> None:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="open_ticket",
            description="Open a ticket.",
            parameters={"id": {"type": "integer", "required": True}},
            execute=open_ticket,
        )
    )
    session = MemorySessionLog()
    batch = await run_tool_calls(
        registry,
        [ToolCallRequest(call_id="c1", name="open_ticket", arguments='{"id": 7}')],
        signal=CancelSignal.never(),
        session=session,
    )
    print(batch.results[0].content[0].text)  # pyright: ignore[reportAttributeAccessIssue]
    print(batch.contexts[0].content[0].text)  # pyright: ignore[reportAttributeAccessIssue]
    print([type(event).__name__ for event in session.events()])


if __name__ == "__main__":
    trio.run(main)
