"""A tool defined with an attrs class: the schema is derived from the fields, and the body
receives a typed instance."""

from __future__ import annotations

import json
from typing import Literal

import attrs
import trio

from dsh_tools import (
    CancelSignal,
    GenericCallView,
    TextBlock,
    ToolExecutionInput,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    define_tool,
)


@attrs.frozen(kw_only=True)
class Replacement:
    old: str = attrs.field(metadata={"description": "Exact text to find."})
    new: str
    count: int | None = None  # optional: absent means "every occurrence"


@attrs.frozen(kw_only=True)
class EditArgs:
    path: str = attrs.field(metadata={"description": "The file to edit."})
    edits: tuple[Replacement, ...]
    mode: Literal["apply", "preview"] = "preview"


async def edit(args: EditArgs, context: ToolRunContext) -> ToolReturn:
    await trio.lowlevel.checkpoint()
    first = args.edits[0]
    return f"{args.mode}: {len(args.edits)} edit(s) to {args.path}, first {first.old!r} -> {first.new!r}"


edit_tool = define_tool(
    name="edit",
    description="Replace text in a file.",
    parameters=EditArgs,
    execute=edit,
    is_concurrency_safe=lambda args: args.mode == "preview",
    present_call=lambda args: GenericCallView(title=f"Edit {args.path}"),
)


async def main() -> None:
    registry = ToolRegistry()
    registry.register(edit_tool)
    print(json.dumps(registry.schemas()[0].parameters, indent=2))
    calls: list[object] = [
        {"path": "README.md", "edits": [{"old": "trio", "new": "Trio", "count": 1}]},
        {"path": "README.md", "edits": [{"new": "x"}, {"old": "a", "new": 1}], "mode": "yolo"},
    ]
    for number, arguments in enumerate(calls, start=1):
        result = await registry.execute(
            ToolExecutionInput(
                call_id=f"call-{number}",
                name="edit",
                arguments=arguments,
                signal=CancelSignal.never(),
            )
        )
        for block in result.content:
            if isinstance(block, TextBlock):
                print(f"{'error' if result.is_error else 'ok'}: {block.text}")


if __name__ == "__main__":
    trio.run(main)
