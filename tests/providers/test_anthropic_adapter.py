"""The Anthropic adapter's shapes, checked against the anthropic SDK's own request types."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
from anthropic.types import Message, MessageParam, ToolParam, ToolResultBlockParam
from provider_tools import round_trip

from dsh_tools import (
    CancelSignal,
    HookContext,
    TextBlock,
    ToolBatch,
    ToolCallBlock,
    ToolCallRequest,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    ToolSchema,
    UserSource,
    define_tool,
    run_tool_calls,
    snapshot_json,
)
from dsh_tools.providers import anthropic as adapter
from support import outcome_code

SEARCH = ToolSchema(
    name="search",
    description="Search the notes.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)


def test_tool_params_have_the_messages_api_shape_and_validate_against_tool_param() -> None:
    expected = [
        {"name": "search", "description": "Search the notes.", "input_schema": SEARCH.parameters}
    ]
    params = adapter.tool_params([SEARCH])
    assert expected == params
    assert params == [round_trip(ToolParam, p) for p in params]


def test_frozen_parameters_come_out_as_plain_json_data() -> None:
    frozen = snapshot_json({"type": "object", "properties": {"tags": {"type": "array"}}})
    schema = ToolSchema(name="t", description="", parameters=frozen)  # pyright: ignore[reportArgumentType]
    [param] = adapter.tool_params([schema])
    input_schema: dict[str, Any] = param["input_schema"]
    tags: dict[str, Any] = input_schema["properties"]["tags"]
    assert (dict, dict) == (type(input_schema), type(tags))
    assert json.loads(json.dumps(param)) == param


def test_tool_calls_serialize_each_tool_use_input_to_json_text_in_model_order() -> None:
    content: list[Any] = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "ünï"}},
        {"type": "tool_use", "id": "toolu_2", "name": "search", "input": {}},
    ]
    expected = [
        ToolCallRequest(call_id="toolu_1", name="search", arguments='{"query":"ünï"}'),
        ToolCallRequest(call_id="toolu_2", name="search", arguments="{}"),
    ]
    assert expected == adapter.tool_calls(content)


def test_tool_calls_read_an_sdk_message_and_its_content_list() -> None:
    message = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "s", "input": {"a": [1]}}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    expected = [ToolCallRequest(call_id="toolu_1", name="s", arguments='{"a":[1]}')]
    assert expected == adapter.tool_calls(message)
    assert expected == adapter.tool_calls(message.content)


BAD_CONTENT: list[tuple[Any, type[Exception], str]] = [
    ({"content": "text"}, TypeError, 'message "content" must be a list, not str'),
    (
        [{"type": "tool_use", "id": "t", "name": "s"}],
        ValueError,
        r'content\[0\] has no "input"',
    ),
    (
        [{"type": "tool_use", "id": "t", "name": "s", "input": "{}"}],
        TypeError,
        r'content\[0\]\."input" must be a JSON object, not str',
    ),
    (
        [{"type": "tool_use", "name": "s", "input": {}}],
        ValueError,
        r'content\[0\] has no "id"',
    ),
    ([None], TypeError, r"expected content\[0\] as a mapping"),
]


@pytest.mark.parametrize(("content", "error", "match"), BAD_CONTENT)
def test_tool_calls_name_what_is_wrong_with_bad_content(
    content: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        adapter.tool_calls(content)  # pyright: ignore[reportArgumentType]


CALLS = [
    ToolCallRequest(call_id="toolu_1", name="a", arguments="{}"),
    ToolCallRequest(call_id="toolu_2", name="b", arguments="{}"),
    ToolCallRequest(call_id="toolu_3", name="c", arguments="{}"),
]
BATCH = ToolBatch(
    results=(
        ToolExecutionResult(
            content=(TextBlock(text="ok"), ToolCallBlock(id="x", name="y", arguments="{}")),
            is_error=False,
        ),
        ToolExecutionResult(content=(TextBlock(text="Error: tool call aborted"),), is_error=True),
        ToolExecutionResult(content=(), is_error=False),
    ),
    contexts=(
        HookContext(content=(TextBlock(text="note one"),), source=UserSource()),
        HookContext(content=(), source=UserSource()),
        HookContext(content=(TextBlock(text="note two"),), source=UserSource()),
    ),
)


def test_tool_messages_are_one_user_message_of_results_then_context_text() -> None:
    expected = [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "ok\n[tool-call block]",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "Error: tool call aborted",
                    "is_error": True,
                },
                {"type": "tool_result", "tool_use_id": "toolu_3"},
                {"type": "text", "text": "note one"},
                {"type": "text", "text": "note two"},
            ],
        }
    ]
    assert expected == adapter.tool_messages(CALLS, BATCH)


def test_tool_messages_validate_against_the_sdk_types() -> None:
    [message] = adapter.tool_messages(CALLS, BATCH)
    assert message == round_trip(MessageParam, message)
    results = [block for block in message["content"] if block["type"] == "tool_result"]
    assert results == [round_trip(ToolResultBlockParam, block) for block in results]


def test_tool_messages_refuse_calls_that_do_not_match_the_batch() -> None:
    with pytest.raises(ValueError, match="2 calls but the batch has 3 results"):
        adapter.tool_messages(CALLS[:2], BATCH)
    with pytest.raises(TypeError, match=r"calls\[1\] must be a ToolCallRequest, not str"):
        adapter.tool_messages([CALLS[0], "c", CALLS[2]], BATCH)  # pyright: ignore[reportArgumentType]


def test_tool_params_reject_something_that_is_not_a_tool_schema() -> None:
    with pytest.raises(TypeError, match=r"schemas\[1\] must be a ToolSchema, not str"):
        adapter.tool_params([SEARCH, "search"])  # pyright: ignore[reportArgumentType]


def deep_input(levels: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def cyclic_input() -> dict[str, object]:
    value: dict[str, object] = {}
    value["self"] = value
    return value


NOT_LOSSLESS = [
    pytest.param({"x": float("nan")}, "$.x: nan is not a finite number", id="nan"),
    pytest.param({"n": 2**60}, "$.n: integer 1152921504606846976 is outside", id="big-int"),
    pytest.param({"s": "\ud800"}, "$.s: string contains a lone surrogate", id="surrogate"),
    pytest.param({"b": b"x"}, "$.b: a value of type bytes is not JSON data", id="bytes"),
    pytest.param(deep_input(900), "nesting deeper than 200 levels", id="900-deep"),
    pytest.param(cyclic_input(), "circular reference", id="cyclic"),
]


@pytest.mark.parametrize(("tool_input", "reason"), NOT_LOSSLESS)
def test_a_tool_use_whose_input_is_not_lossless_json_becomes_a_call_with_invalid_arguments(
    tool_input: dict[str, object], reason: str
) -> None:
    calls = adapter.tool_calls(
        [
            {"type": "tool_use", "id": "t1", "name": "s", "input": {"query": "a"}},
            {"type": "tool_use", "id": "t2", "name": "s", "input": tool_input},
            {"type": "tool_use", "id": "t3", "name": "s", "input": {"query": "c"}},
        ]
    )

    assert ["t1", "t2", "t3"] == [call.call_id for call in calls]
    assert ['{"query":"a"}', '{"query":"c"}'] == [calls[0].arguments, calls[2].arguments]
    assert calls[1].arguments.startswith("<input is not JSON data: ")
    assert reason in calls[1].arguments
    with pytest.raises(ValueError):
        json.loads(calls[1].arguments)  # never JSON: the tool's validation reports it


async def test_the_call_with_bad_input_gets_an_invalid_arguments_result_and_the_rest_run() -> None:
    ran: list[str] = []

    async def search(args: SearchArgs, context: ToolRunContext) -> str:
        await trio.lowlevel.checkpoint()
        ran.append(args.query)
        return "found"

    registry = ToolRegistry()
    registry.register(define_tool(name="s", description="d", parameters=SearchArgs, execute=search))
    calls = adapter.tool_calls(
        [
            {"type": "tool_use", "id": "t1", "name": "s", "input": {"query": "a"}},
            {"type": "tool_use", "id": "t2", "name": "s", "input": cyclic_input()},
            {"type": "tool_use", "id": "t3", "name": "s", "input": {"query": "c"}},
        ]
    )
    batch = await run_tool_calls(registry, calls, signal=CancelSignal.never())
    message = adapter.tool_messages(calls, batch)

    assert ["a", "c"] == ran
    assert [
        {"type": "tool_result", "tool_use_id": "t1", "content": "found"},
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": 'Error: invalid arguments: "arguments" must be an object',
            "is_error": True,
        },
        {"type": "tool_result", "tool_use_id": "t3", "content": "found"},
    ] == message[0]["content"]
    assert "INVALID_ARGS" == outcome_code(batch.results[1])


@attrs.frozen
class SearchArgs:
    query: str
