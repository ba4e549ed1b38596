"""``AnthropicTools``: the Anthropic loop's one object, like ``OpenAITools``; checked against the
anthropic SDK's own types."""

from __future__ import annotations

import pytest
import trio
from anthropic.types import Message, MessageParam, RawMessageStreamEvent, ToolParam
from provider_tools import round_trip

from dsh_tools import CancelController, ToolRegistry, run_tool_calls, tool
from dsh_tools.providers import anthropic as adapter
from dsh_tools.providers.anthropic import AnthropicTools


class Agent:
    name = "writer"


def _registry(agent: Agent) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def search(query: str) -> str:
        """Search the notes."""
        return f"found {query}"

    async def publish(title: str) -> str:
        """Publish a note."""
        return f"published {title}"

    registry.scope(agent).register(tool(publish))

    return registry


def _message() -> Message:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": "tu_1", "name": "search", "input": {"query": "trio"}},
            ],
        }
    )


def test_params_are_the_function_forms_for_the_agents_view_and_validate() -> None:
    agent = Agent()
    registry = _registry(agent)

    assert adapter.tool_params(registry.schemas()) == AnthropicTools(registry).params()
    scoped = AnthropicTools(registry, agent=agent).params()
    assert adapter.tool_params(registry.schemas(agent)) == scoped
    assert ["publish", "search"] == sorted(str(p["name"]) for p in scoped)
    assert scoped == [round_trip(ToolParam, p) for p in scoped]


async def test_a_loop_turn_through_the_object_gives_a_message_the_sdk_accepts() -> None:
    registry = _registry(Agent())
    tools = AnthropicTools(registry)
    message = _message()

    calls = tools.calls(message)
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    (reply,) = tools.messages(calls, batch)

    assert [("tu_1", "search", '{"query":"trio"}')] == [
        (c.call_id, c.name, c.arguments) for c in calls
    ]
    assert reply == round_trip(MessageParam, reply)
    assert reply["content"] == [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": "found trio"}
    ]


async def test_stream_yields_the_calls_of_a_streamed_message() -> None:
    events: list[dict[str, object]] = [
        {"type": "message_start", "message": {**_message().model_dump(), "content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "tu_1", "name": "search", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "trio"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    sdk_events = [round_trip(RawMessageStreamEvent, e) for e in events]
    received = [call async for call in AnthropicTools(_registry(Agent())).stream(sdk_events)]
    assert [("tu_1", "search")] == [(c.call_id, c.name) for c in received]
    await trio.lowlevel.checkpoint()


def test_a_registry_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match="registry must be a ToolRegistry, not dict"):
        AnthropicTools({})  # pyright: ignore[reportArgumentType]
