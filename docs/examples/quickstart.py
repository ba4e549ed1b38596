"""Quickstart: define a tool, register it, and execute one call the way an agent loop would."""

from __future__ import annotations

import attrs
import trio

from dsh_tools import (
    CancelSignal,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    converter,
    define_tool,
    dumps_json,
)


@attrs.frozen(kw_only=True)
class GreetArgs:
    name: str = attrs.field(metadata={"description": "Who to greet."})
    excited: bool = False


async def greet(args: GreetArgs, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()  # a real tool would do I/O here
    return f"Hello, {args.name}{'!' if args.excited else '.'}"


async def main() -> None:
    registry = ToolRegistry()
    registry.register(
        define_tool(name="greet", description="Greet someone.", parameters=GreetArgs, execute=greet)
    )
    print(dumps_json(converter.unstructure(registry.schemas()[0])))

    for arguments in ({"name": "Ada", "excited": True}, {"name": 42}):
        result = await registry.execute(
            ToolExecutionInput(
                call_id="call-1", name="greet", arguments=arguments, signal=CancelSignal.never()
            )
        )
        print(dumps_json(converter.unstructure(result)))


if __name__ == "__main__":
    trio.run(main)
