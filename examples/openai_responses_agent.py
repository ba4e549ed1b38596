"""An agent loop on the OpenAI Responses API: tools from plain functions, strict mode.

Run it (``pip install 'dsh-tools[openai]'``)::

    OPENAI_API_KEY=... python examples/openai_responses_agent.py "What is (17 + 25) * 3?"

``OPENAI_MODEL`` picks the model (default ``gpt-4.1-mini``) and ``OPENAI_BASE_URL`` the server.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import trio
from openai import AsyncOpenAI

from dsh_tools import CancelController, ToolRegistry, run_tool_calls
from dsh_tools.providers.openai import OpenAITools

DEFAULT_PROMPT = "What is (17 + 25) * 3?"
INSTRUCTIONS = "Use the tools for every arithmetic step, then answer in one short sentence."


def build_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(is_concurrency_safe=lambda args: True)  # pure: calls may run together
    async def add(a: float, b: float) -> float:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b

    @registry.tool(is_concurrency_safe=lambda args: True)
    async def multiply(a: float, b: float, round_to: int | None = None) -> float:
        """Multiply two numbers.

        Args:
            a: The first number.
            b: The second number.
            round_to: Round the product to this many decimals.
        """
        product = a * b
        return product if round_to is None else round(product, round_to)

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
    """Ask the model, run the calls it makes, send the outputs back, until it answers."""
    tools = OpenAITools(registry, strict=True)
    items: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        offered: list[Any] = tools.responses_params()  # plain dicts in the SDK's shape
        response = await client.responses.create(
            model=model, instructions=INSTRUCTIONS, input=items, tools=offered
        )
        calls = tools.responses_calls(response)  # a null for round_to reads as absent
        if not calls:
            return response.output_text
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        batch = await run_tool_calls(registry, calls, signal=controller.signal)
        outputs = tools.responses_messages(calls, batch)  # the outputs first, in model order
        for call, output in zip(calls, outputs, strict=False):
            print(f"  {call.name}({call.arguments}) -> {output['output']}")
        items.extend(outputs)
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
