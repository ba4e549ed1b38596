"""A tool defined with a schema spec: the body receives the frozen argument mapping."""

from __future__ import annotations

import trio

from dsh_tools import (
    CancelSignal,
    FrozenJsonObject,
    TextBlock,
    ToolExecutionInput,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    define_tool,
)


async def grep(args: FrozenJsonObject, context: ToolRunContext) -> ToolReturn:
    await trio.lowlevel.checkpoint()
    limit = args.get("max_results", 10)
    return f"searching {args.get('path', '.')} for {args['pattern']!r} (at most {limit})"


grep_tool = define_tool(
    name="grep",
    description="Search files for a regular expression.",
    parameters={
        "pattern": {"type": "string", "required": True, "description": "A regular expression."},
        "path": {"type": "string", "default": "."},
        "max_results": {"type": "integer", "description": "Stop after this many matches."},
        "mode": {"type": "string", "enum": ["content", "files"]},
    },
    execute=grep,
    is_concurrency_safe=lambda args: True,  # read-only: may join a parallel pool
)


async def main() -> None:
    registry = ToolRegistry()
    registry.register(grep_tool)
    calls: list[object] = [
        {"pattern": "def execute", "max_results": 5},
        {"max_results": 2.5, "mode": "lines"},
        '{"pattern": ',  # model JSON that failed to parse reaches the tool as a string
    ]
    for number, arguments in enumerate(calls, start=1):
        result = await registry.execute(
            ToolExecutionInput(
                call_id=f"call-{number}",
                name="grep",
                arguments=arguments,
                signal=CancelSignal.never(),
            )
        )
        for block in result.content:
            if isinstance(block, TextBlock):
                print(f"{'error' if result.is_error else 'ok'}: {block.text}")


if __name__ == "__main__":
    trio.run(main)
