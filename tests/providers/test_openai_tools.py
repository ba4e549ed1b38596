"""``OpenAITools``: one object per loop that keeps the schemas it sent, so strict mode needs
them only once; checked against the openai SDK's own types."""

from __future__ import annotations

import openai.types.chat as chat_types
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import FunctionToolParam, Response
from openai.types.responses.response_input_param import FunctionCallOutput
from provider_tools import responses_output, round_trip

from dsh_tools import (
    CancelController,
    ToolCallRequest,
    ToolRegistry,
    run_tool_calls,
)
from dsh_tools.providers import openai as adapter
from dsh_tools.providers.openai import OpenAITools


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def search(query: str, limit: int | None = None) -> str:
        """Search the notes."""
        return f"{query}:{limit}"

    return registry


def _message(*calls: tuple[str, str, str]) -> ChatCompletionMessage:
    return ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ],
        }
    )


def test_params_are_the_function_forms_params_for_the_registrys_schemas() -> None:
    registry = _registry()

    assert (
        adapter.tool_params(registry.schemas(), strict=True),
        adapter.responses_tool_params(registry.schemas(), strict=True),
    ) == (
        OpenAITools(registry, strict=True).params(),
        OpenAITools(registry, strict=True).responses_params(),
    )


def test_params_validate_against_the_sdk_types() -> None:
    tools = OpenAITools(_registry(), strict=True)

    assert tools.params() == [
        round_trip(chat_types.ChatCompletionToolParam, p) for p in tools.params()
    ]
    assert tools.responses_params() == [
        round_trip(FunctionToolParam, p) for p in tools.responses_params()
    ]


def test_strict_calls_drop_the_nulls_of_optional_properties_with_the_schemas_sent() -> None:
    tools = OpenAITools(_registry(), strict=True)
    tools.params()

    assert [ToolCallRequest(call_id="c1", name="search", arguments='{"query":"q"}')] == tools.calls(
        _message(("c1", "search", '{"query": "q", "limit": null}'))
    )


def test_calls_before_params_use_the_registrys_current_schemas() -> None:
    tools = OpenAITools(_registry(), strict=True)

    assert [ToolCallRequest(call_id="c1", name="search", arguments='{"query":"q"}')] == tools.calls(
        _message(("c1", "search", '{"query": "q", "limit": null}'))
    )


def test_without_strict_mode_a_null_stays_for_validation_to_report() -> None:
    tools = OpenAITools(_registry())
    tools.params()

    assert [
        ToolCallRequest(call_id="c1", name="search", arguments='{"query": "q", "limit": null}')
    ] == tools.calls(_message(("c1", "search", '{"query": "q", "limit": null}')))


def test_a_message_or_response_without_calls_has_none() -> None:
    tools = OpenAITools(_registry(), strict=True)

    assert ([], []) == (
        tools.calls(ChatCompletionMessage(role="assistant", content="done")),
        tools.responses_calls(
            Response.model_validate(
                responses_output(
                    [
                        {
                            "type": "message",
                            "id": "m1",
                            "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": "done", "annotations": []}],
                        }
                    ]
                )
            )
        ),
    )


def test_only_the_agents_tools_are_offered() -> None:
    registry = _registry()
    agent = object()
    scope = registry.scope(agent)

    scope.restrict(allow=[])

    assert ([], ["search"]) == (
        OpenAITools(registry, agent=agent).params(),
        [p["function"]["name"] for p in OpenAITools(registry).params()],
    )


async def test_responses_calls_and_messages_carry_a_batch_back() -> None:
    registry = _registry()
    tools = OpenAITools(registry, strict=True)
    tools.responses_params()
    response = Response.model_validate(
        responses_output(
            [
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "search",
                    "arguments": '{"query": "q", "limit": null}',
                }
            ]
        )
    )

    calls = tools.responses_calls(response)
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    items = tools.responses_messages(calls, batch)

    assert [{"type": "function_call_output", "call_id": "c1", "output": "q:None"}] == items
    assert items == [round_trip(FunctionCallOutput, item) for item in items]


async def test_messages_are_the_chat_tool_messages() -> None:
    registry = _registry()
    tools = OpenAITools(registry)
    calls = tools.calls(_message(("c1", "search", '{"query": "q", "limit": 2}')))
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)

    messages = tools.messages(calls, batch)

    assert [{"role": "tool", "tool_call_id": "c1", "content": "q:2"}] == messages
    assert messages == [round_trip(chat_types.ChatCompletionToolMessageParam, m) for m in messages]
