"""A whole agent that resumes from its session log alone: kill it anywhere, run it again, and it
ends with the conversation an uninterrupted run would have had.

The loop records every message it sends or receives as a ``MessageEvent`` and runs its batches
on the same log. On start it finishes a batch a crash left open, reads the conversation back
(``conversation``, with each batch's results shaped by the adapter), and goes on from the turn
the log says is next (``next_turn``). The model here is scripted (no network, no key), in the
OpenAI Chat Completions or the Anthropic message shapes::

    python examples/resumable_agent.py agent.jsonl            # OpenAI shapes
    python examples/resumable_agent.py agent.jsonl anthropic  # Anthropic shapes

Run it, kill it (Ctrl-C, ``kill -9``) at any moment, run it again: it finishes the same way.
Swap ``scripted_model`` for a real client call to use it with a model.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from dsh_tools import (
    CancelController,
    JsonlSessionLog,
    MessageEvent,
    SessionLog,
    ToolRegistry,
    conversation,
    next_turn,
    resume_tool_calls,
    run_tool_calls,
)
from dsh_tools.providers import anthropic as anthropic_adapter
from dsh_tools.providers import openai as openai_adapter

QUESTION = "What is (2 + 3) + 7, and is it sunny in Oslo?"
Message = dict[str, Any]


def build_registry() -> ToolRegistry:
    registry = ToolRegistry()

    # idempotent: a call a crash interrupted runs again on resume, with the same result
    @registry.tool(idempotent=True, is_concurrency_safe=lambda args: True)
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        await trio.sleep(0.01)
        return a + b

    @registry.tool(idempotent=True, is_concurrency_safe=lambda args: True)
    async def weather(city: str) -> str:
        """The weather in a city."""
        await trio.sleep(0.01)
        return f"sunny in {city}"

    return registry


def _openai_calls(*calls: tuple[str, str, str]) -> Message:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ],
    }


def _anthropic_calls(*calls: tuple[str, str, dict[str, Any]]) -> Message:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls],
    }


SCRIPTS: dict[str, list[Message]] = {
    "openai": [
        _openai_calls(("c1", "add", '{"a": 2, "b": 3}'), ("c2", "weather", '{"city": "Oslo"}')),
        _openai_calls(("c3", "add", '{"a": 5, "b": 7}')),
        {"role": "assistant", "content": "12, and it is sunny in Oslo."},
    ],
    "anthropic": [
        _anthropic_calls(("t1", "add", {"a": 2, "b": 3}), ("t2", "weather", {"city": "Oslo"})),
        _anthropic_calls(("t3", "add", {"a": 5, "b": 7})),
        {"role": "assistant", "content": [{"type": "text", "text": "12, and sunny in Oslo."}]},
    ],
}


def scripted_model(shape: str) -> Callable[[list[Message]], Message]:
    """A model that answers the k-th request with its k-th scripted reply."""

    def reply(messages: list[Message]) -> Message:
        asked = sum(1 for message in messages if message.get("role") == "assistant")
        return SCRIPTS[shape][asked]

    return reply


async def run_agent(session: SessionLog, shape: str = "openai") -> list[Message]:
    """Run (or go on with) the agent's conversation on ``session``; return it once answered."""
    adapter = anthropic_adapter if shape == "anthropic" else openai_adapter
    model = scripted_model(shape)
    registry = build_registry()
    signal = CancelController().signal
    # a batch a crash left open is finished first (its idempotent calls run again)
    await resume_tool_calls(registry, session, signal=signal)
    messages = conversation(session, tool_messages=adapter.tool_messages)
    turn = next_turn(session)
    if not messages:
        first = {"role": "user", "content": QUESTION}
        session.append(MessageEvent(turn=turn, role="user", message=first))
        messages.append(first)
    while True:
        last = messages[-1]
        calls = adapter.tool_calls(last) if last["role"] == "assistant" else []
        if calls:  # an assistant message whose batch has not run (or a crash came before it)
            batch = await run_tool_calls(registry, calls, signal=signal, session=session, turn=turn)
            messages.extend(adapter.tool_messages(calls, batch))
            turn += 1
            continue
        if last["role"] == "assistant":
            return messages  # the answer
        reply = model(messages)  # a real loop calls its model here
        session.append(MessageEvent(turn=turn, role="assistant", message=reply))
        messages.append(reply)


async def main(path: str, shape: str = "openai") -> None:
    with JsonlSessionLog(Path(path)) as session:
        messages = await run_agent(session, shape)
    print(messages[-1])


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "openai")
