"""An agent loop: an Anthropic model calling dsh-tools tools.

Run it (``pip install 'dsh-tools[anthropic]'``)::

    ANTHROPIC_API_KEY=... python examples/anthropic_agent.py "What is (17 + 25) * 3?"

``ANTHROPIC_MODEL`` picks the model (default ``claude-sonnet-5``) and ``ANTHROPIC_BASE_URL``
the server.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import attrs
import trio
from anthropic import AsyncAnthropic

from dsh_tools import CancelController, ToolRegistry, ToolRunContext, define_tool, run_tool_calls
from dsh_tools.providers import anthropic as adapter

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


def client_from_env() -> AsyncAnthropic:
    """The client the environment describes: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``."""
    return AsyncAnthropic(
        api_key=os.environ.get("ANTHROPIC_API_KEY"), base_url=os.environ.get("ANTHROPIC_BASE_URL")
    )


async def run_agent(
    client: AsyncAnthropic,
    registry: ToolRegistry,
    prompt: str,
    *,
    model: str,
    controller: CancelController,
    max_turns: int = 10,
) -> str:
    """Ask the model, run the tool calls it makes, send the results back, until it answers."""
    tools: list[Any] = adapter.tool_params(registry.schemas())
    messages: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        response = await client.messages.create(
            model=model, max_tokens=1024, system=SYSTEM, messages=messages, tools=tools
        )
        if response.stop_reason != "tool_use":
            return "".join(block.text for block in response.content if block.type == "text")
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in response.content],
            }
        )
        calls = adapter.tool_calls(response)
        batch = await run_tool_calls(registry, calls, signal=controller.signal)
        [reply] = adapter.tool_messages(calls, batch)  # one user message: results, then contexts
        for call, block in zip(calls, reply["content"], strict=False):
            print(f"  {call.name}({call.arguments}) -> {block.get('content', '')}")
        messages.append(reply)
    raise RuntimeError(f"no answer after {max_turns} turns")


async def main(prompt: str = DEFAULT_PROMPT, client: AsyncAnthropic | None = None) -> str:
    answer = await run_agent(
        client or client_from_env(),
        build_registry(),
        prompt,
        model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5"),
        controller=CancelController(),
    )
    print(answer)
    return answer


if __name__ == "__main__":
    trio.run(main, " ".join(sys.argv[1:]) or DEFAULT_PROMPT)
