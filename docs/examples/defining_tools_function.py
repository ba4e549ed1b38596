"""Tools from plain functions: the schema comes from the signature, the descriptions from the
docstring, and the body gets typed values."""

from __future__ import annotations

import json
from typing import Literal

import trio

from dsh_tools import CancelSignal, TextBlock, ToolExecutionInput, ToolRegistry, ToolRunContext

registry = ToolRegistry()


@registry.tool
async def search(
    pattern: str,
    context: ToolRunContext,
    mode: Literal["files", "content"] = "content",
    limit: int | None = None,
) -> dict[str, object]:
    """Search the workspace for a regular expression.

    Args:
        pattern: The regular expression.
        mode: List matching files, or matching lines.
        limit: At most this many results.
    """
    await trio.lowlevel.checkpoint()  # a real tool would do I/O here
    hits = ["src/app.py:3", "src/db.py:41", "tests/test_app.py:7"][:limit]
    return {"pattern": pattern, "mode": mode, "hits": hits, "call": context.call_id}


@registry.tool(name="count_lines", is_concurrency_safe=lambda args: True)
def count(path: str) -> int:
    """Count the lines of a file.

    A plain ``def``: it runs in a worker thread.

    Args:
        path: The file.
    """
    return 3 if path.endswith(".py") else 0


async def main() -> None:
    for schema in registry.schemas():
        print(schema.name, "-", schema.description.splitlines()[0])
    print(json.dumps(registry.schemas()[0].parameters))
    calls = [
        ("search", {"pattern": "TODO", "limit": 2}),
        ("count_lines", {"path": "src/app.py"}),
        ("search", {"mode": "lines"}),
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
