"""An agent loop: an OpenAI chat model (or any OpenAI-compatible server) calling dsh-tools tools.

Run it (``pip install 'dsh-tools[openai]'``)::

    OPENAI_API_KEY=... python examples/openai_agent.py "What is (17 + 25) * 3?"

``OPENAI_MODEL`` picks the model (default ``gpt-4.1-mini``) and ``OPENAI_BASE_URL`` the server,
so the same loop runs against a local OpenAI-compatible server too.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import attrs
import trio
from openai import AsyncOpenAI

from dsh_tools import CancelController, ToolRegistry, ToolRunContext, define_tool, run_tool_calls
from dsh_tools.providers import openai as adapter

DEFAULT_PROMPT = "What is (17 + 25) * 3?"
SYSTEM = "Use the tools for every arithmetic step, then answer in one short sentence."


@attrs.frozen(kw_only=True)
class Operands:
    a: float
    b: float


def build_registry() -> ToolRegistry:
    async def add(args: Operands, context: ToolRunContext) -> str:
        return f"{args.a + args.b:g}"

    async def multiply(args: Operands, context: ToolRunContext) -> str:
        return f"{args.a * args.b:g}"

    registry = ToolRegistry()
    for name, body in (("add", add), ("multiply", multiply)):
        registry.register(
            define_tool(
                name=name,
                description=f"{name.capitalize()} two numbers.",
                parameters=Operands,
                execute=body,
                is_concurrency_safe=lambda args: True,  # pure: calls may run together
            )
        )
    return registry


def client_from_env() -> AsyncOpenAI:
    """The client the environment describes: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``."""
    return AsyncOpenAI(
        api_key=os.environ.get("OPENAI_API_KEY"), base_url=os.environ.get("OPENAI_BASE_URL")
    )


async def run_agent(
    client: AsyncOpenAI,
    registry: ToolRegistry,
    prompt: str,
    *,
    model: str,
    controller: CancelController,
    max_turns: int = 10,
) -> str:
    """Ask the model, run the tool calls it makes, send the results back, until it answers."""
    tools: list[Any] = adapter.tool_params(registry.schemas())
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": prompt},
    ]
    for _ in range(max_turns):
        completion = await client.chat.completions.create(
            model=model, messages=messages, tools=tools
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        calls = adapter.tool_calls(message)
        batch = await run_tool_calls(registry, calls, signal=controller.signal)
        replies = adapter.tool_messages(calls, batch)  # the results first, in model order
        for call, reply in zip(calls, replies, strict=False):
            print(f"  {call.name}({call.arguments}) -> {reply['content']}")
        messages.extend(replies)
    raise RuntimeError(f"no answer after {max_turns} turns")


async def main(prompt: str = DEFAULT_PROMPT, client: AsyncOpenAI | None = None) -> str:
    answer = await run_agent(
        client or client_from_env(),
        build_registry(),
        prompt,
        model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
        controller=CancelController(),
    )
    print(answer)
    return answer


if __name__ == "__main__":
    trio.run(main, " ".join(sys.argv[1:]) or DEFAULT_PROMPT)
