"""Parameters from a dataclass, a TypedDict and a pydantic model (``pip install pydantic``)."""

from __future__ import annotations

import dataclasses
from typing import NotRequired, TypedDict

import pydantic
import trio

from dsh_tools import (
    CancelSignal,
    TextBlock,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)


@dataclasses.dataclass(frozen=True)
class MoveArgs:
    source: str = dataclasses.field(metadata={"description": "The file to move."})
    target: str
    overwrite: bool = False


class TagArgs(TypedDict):
    path: str
    tags: list[str]
    note: NotRequired[str]


class RenameArgs(pydantic.BaseModel):
    path: str
    new_name: str = pydantic.Field(min_length=1, description="The new file name.")


async def move(args: MoveArgs, context: ToolRunContext) -> str:
    return f"moved {args.source} to {args.target} (overwrite={args.overwrite})"


async def tag(args: TagArgs, context: ToolRunContext) -> dict[str, object]:
    return {"path": args["path"], "tags": args["tags"], "note": args.get("note")}


async def rename(args: RenameArgs, context: ToolRunContext) -> str:
    return f"renamed {args.path} to {args.new_name}"


registry = ToolRegistry()
registry.register(
    define_tool(name="move", description="Move a file.", parameters=MoveArgs, execute=move)
)
registry.register(
    define_tool(name="tag", description="Tag a file.", parameters=TagArgs, execute=tag)
)
registry.register(
    define_tool(name="rename", description="Rename a file.", parameters=RenameArgs, execute=rename)
)


async def main() -> None:
    calls = [
        ("move", {"source": "a.txt", "target": "b.txt"}),
        ("tag", {"path": "b.txt", "tags": ["draft"]}),
        ("rename", {"path": "b.txt", "new_name": "c.txt"}),
        ("rename", {"path": "b.txt", "new_name": ""}),
    ]
    for number, (name, arguments) in enumerate(calls, start=1):
        result = await registry.execute(
            ToolExecutionInput(
                call_id=f"call-{number}",
                name=name,
                arguments=arguments,
                signal=CancelSignal.never(),
            )
        )
        for block in result.content:
            if isinstance(block, TextBlock):
                print(f"{'error' if result.is_error else 'ok'}: {block.text}")


if __name__ == "__main__":
    trio.run(main)
