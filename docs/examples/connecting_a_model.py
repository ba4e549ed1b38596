"""Connecting a model: one batch in OpenAI's and Anthropic's shapes (no SDK, no network)."""

from __future__ import annotations

import json

import attrs
import trio

from dsh_tools import CancelController, ToolRegistry, ToolRunContext, define_tool, run_tool_calls
from dsh_tools.providers import anthropic, openai


@attrs.frozen(kw_only=True)
class SearchArgs:
    query: str
    limit: int | None = None  # optional: absent means "no limit"


async def search(args: SearchArgs, context: ToolRunContext) -> str:
    hits = ["trio.run", "trio.sleep", "trio.open_nursery"]
    return ", ".join(hits[: args.limit])


def build_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="search",
            description="Search the trio docs.",
            parameters=SearchArgs,
            execute=search,
            is_concurrency_safe=lambda args: True,
        )
    )
    return registry


# what a strict-mode OpenAI model sends: every property, null for "absent"
ASSISTANT_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"query": "trio", "limit": null}'},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "search", "arguments": '{"query": 42, "limit": 1}'},
        },
    ],
}


async def main() -> None:
    registry = build_registry()
    schemas = registry.schemas()
    [tool] = openai.tool_params(schemas, strict=True)
    print(json.dumps(tool["function"]["parameters"]))
    calls = openai.tool_calls(ASSISTANT_MESSAGE, strict_schemas=schemas)
    print([call.arguments for call in calls])
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    for message in openai.tool_messages(calls, batch):
        print(json.dumps(message))
    # the same batch as Anthropic receives it: one user message, is_error on the failure
    print(json.dumps(anthropic.tool_messages(calls, batch)))


if __name__ == "__main__":
    trio.run(main)
