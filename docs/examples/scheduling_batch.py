"""Scheduling a batch: parallel reads around an exclusive write, on trio's virtual clock."""

from __future__ import annotations

import attrs
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    MemorySessionLog,
    TextBlock,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    converter,
    define_tool,
    dumps_json,
    run_tool_calls,
)


@attrs.frozen(kw_only=True)
class ReadArgs:
    path: str


@attrs.frozen(kw_only=True)
class WriteArgs:
    path: str
    text: str


def build_registry(files: dict[str, str]) -> ToolRegistry:
    async def read(args: ReadArgs, context: ToolRunContext) -> str:
        await trio.sleep(1)  # stands for I/O
        return files[args.path]

    async def write(args: WriteArgs, context: ToolRunContext) -> str:
        await trio.sleep(1)
        files[args.path] = args.text
        return f"wrote {args.path}"

    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="read",
            description="Read a file.",
            parameters=ReadArgs,
            execute=read,
            is_concurrency_safe=lambda args: True,  # reads may share a parallel pool
        )
    )
    # no classifier: every write is exclusive, a barrier that runs alone
    registry.register(
        define_tool(name="write", description="Write a file.", parameters=WriteArgs, execute=write)
    )
    return registry


async def main() -> None:
    registry = build_registry({"a.txt": "alpha", "b.txt": "beta"})
    session = MemorySessionLog()
    calls = [
        ToolCallRequest(call_id="c1", name="read", arguments='{"path": "a.txt"}'),
        ToolCallRequest(call_id="c2", name="read", arguments='{"path": "b.txt"}'),
        ToolCallRequest(call_id="c3", name="write", arguments='{"path": "a.txt", "text": "ALPHA"}'),
        ToolCallRequest(call_id="c4", name="read", arguments='{"path": "a.txt"}'),
    ]
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal, session=session)
    for call, result in zip(calls, batch.results, strict=True):
        text = " ".join(b.text for b in result.content if isinstance(b, TextBlock))
        print(f"{call.call_id}: {text}")
    # c1 and c2 ran together (0-1 s), c3 alone (1-2 s), then c4 (2-3 s)
    print(f"done at t={trio.current_time():g}s")
    for event in session.events():
        wire = converter.unstructure(event)
        if "batchId" in wire:
            wire["batchId"] = "..."  # a fresh UUID per batch
        print(dumps_json(wire))


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
