"""The README's minimal example: a whole agent loop with a scripted model, no network."""

from typing import Any

import trio

from dsh_tools import CancelController, ToolRegistry, run_tool_calls
from dsh_tools.providers.openai import OpenAITools

registry = ToolRegistry()


@registry.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model(messages: list[Any], tools: list[Any]) -> dict[str, Any]:
    """Stands in for a chat model: asks for `add`, then answers with its result."""
    if messages[-1]["role"] == "tool":
        return {"role": "assistant", "content": f"17 + 25 = {messages[-1]['content']}"}
    fn = {"name": "add", "arguments": '{"a": 17, "b": 25}'}
    return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": fn}]}


async def main() -> None:
    tools = OpenAITools(registry)
    messages: list[Any] = [{"role": "user", "content": "What is 17 + 25?"}]
    while True:
        message = model(messages, tools.params())  # your model API call goes here
        messages.append(message)
        calls = tools.calls(message)  # [] once the model answers
        if not calls:
            break
        batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
        messages.extend(tools.messages(calls, batch))  # one {"role": "tool", ...} per call
    print(message["content"])


trio.run(main)
