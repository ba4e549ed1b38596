"""The OpenAI adapter's shapes, checked against the openai SDK's own request types."""

from __future__ import annotations

import json
from typing import Any, cast

import attrs
import jsonschema
import openai.types.chat as chat_types
import pytest
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import FunctionToolParam, ResponseFunctionToolCall
from openai.types.responses.response_input_param import FunctionCallOutput
from provider_tools import round_trip

from dsh_tools import (
    HookContext,
    ReasoningBlock,
    TextBlock,
    ToolBatch,
    ToolCallRequest,
    ToolExecutionResult,
    ToolRunContext,
    ToolSchema,
    UserSource,
    define_tool,
    snapshot_json,
    thaw_json,
)
from dsh_tools.providers import openai as adapter

SEARCH = ToolSchema(
    name="search",
    description="Search the notes.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
)


def test_tool_params_have_the_chat_completions_function_tool_shape() -> None:
    expected = [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the notes.",
                "parameters": SEARCH.parameters,
            },
        }
    ]
    assert expected == adapter.tool_params([SEARCH])


def test_tool_params_validate_against_the_sdk_tool_param_type() -> None:
    for strict in (False, True):
        params = adapter.tool_params([SEARCH], strict=strict)
        assert params == [round_trip(chat_types.ChatCompletionToolParam, p) for p in params]


def test_responses_tool_params_validate_against_the_sdk_function_tool_param() -> None:
    for strict in (False, True):
        params = adapter.responses_tool_params([SEARCH], strict=strict)
        assert params == [round_trip(FunctionToolParam, p) for p in params]
        assert [strict] == [p["strict"] for p in params]


def test_frozen_parameters_come_out_as_plain_json_data() -> None:
    frozen = snapshot_json({"type": "object", "properties": {"tags": {"type": "array"}}})
    schema = ToolSchema(name="t", description="", parameters=frozen)  # pyright: ignore[reportArgumentType]
    [param] = adapter.tool_params([schema])
    parameters: dict[str, Any] = param["function"]["parameters"]
    properties: dict[str, Any] = parameters["properties"]
    assert (dict, dict) == (type(parameters), type(properties))
    assert json.loads(json.dumps(param)) == param


def test_tool_params_reject_something_that_is_not_a_tool_schema() -> None:
    with pytest.raises(TypeError, match=r"schemas\[0\] must be a ToolSchema, not dict"):
        adapter.tool_params([{"name": "x"}])  # pyright: ignore[reportArgumentType]


def test_tool_calls_read_a_plain_chat_message_in_model_order() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "b", "arguments": '{"x":1}'}},
        ],
    }
    expected = [
        ToolCallRequest(call_id="c1", name="a", arguments="{}"),
        ToolCallRequest(call_id="c2", name="b", arguments='{"x":1}'),
    ]
    assert expected == adapter.tool_calls(message)


def test_tool_calls_read_an_sdk_message_object() -> None:
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "[1"}}
            ],
        }
    )
    assert [ToolCallRequest(call_id="c1", name="a", arguments="[1")] == adapter.tool_calls(message)


BAD_MESSAGES: list[tuple[Any, type[Exception], str]] = [
    ({"tool_calls": "c1"}, TypeError, 'message "tool_calls" must be a list, not str'),
    ({"tool_calls": [3]}, TypeError, r"expected tool_calls\[0\] as a mapping"),
    ({"tool_calls": [{"id": "c1"}]}, ValueError, r'tool_calls\[0\] has no "function"'),
    (
        {"tool_calls": [{"id": "c1", "type": "custom", "custom": {}}]},
        ValueError,
        r"tool_calls\[0\] has type 'custom': only \"function\" tool calls are supported",
    ),
    (
        {"tool_calls": [{"function": {"name": "a", "arguments": "{}"}}]},
        ValueError,
        r'tool_calls\[0\] has no "id"',
    ),
    (
        {"tool_calls": [{"id": "c1", "function": {"name": "a", "arguments": {"x": 1}}}]},
        TypeError,
        r'tool_calls\[0\]\.function\."arguments" must be a string, not dict',
    ),
    (
        {"tool_calls": [{"id": 7, "function": {"name": "a", "arguments": "{}"}}]},
        TypeError,
        r'tool_calls\[0\]\."id" must be a string, not int',
    ),
]


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": "hi"},
        {"role": "assistant", "tool_calls": None},
        {"role": "assistant", "tool_calls": []},
        ChatCompletionMessage(role="assistant", content="The answer is 42."),
    ],
)
def test_a_message_without_tool_calls_has_none_to_run(
    message: dict[str, object] | ChatCompletionMessage,
) -> None:
    assert [] == adapter.tool_calls(message)


@pytest.mark.parametrize(("message", "error", "match"), BAD_MESSAGES)
def test_tool_calls_name_what_is_wrong_with_a_bad_message(
    message: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        adapter.tool_calls(message)


def test_tool_calls_point_from_a_whole_completion_to_its_message() -> None:
    completion: dict[str, Any] = {"choices": [{"message": {"tool_calls": []}}]}
    with pytest.raises(TypeError, match=r"pass completion\.choices\[0\]\.message"):
        adapter.tool_calls(completion)


def test_tool_calls_reject_something_that_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="expected a chat message as a mapping or an SDK object"):
        adapter.tool_calls("hello")  # pyright: ignore[reportArgumentType]


def error_result(text: str) -> ToolExecutionResult:
    return ToolExecutionResult(content=(TextBlock(text=text),), is_error=True)


def ok_result(*blocks: TextBlock | ReasoningBlock) -> ToolExecutionResult:
    return ToolExecutionResult(content=blocks, is_error=False)


CALLS = [
    ToolCallRequest(call_id="c1", name="a", arguments="{}"),
    ToolCallRequest(call_id="c2", name="b", arguments="{}"),
]
BATCH = ToolBatch(
    results=(
        ok_result(TextBlock(text="one"), ReasoningBlock(text="hidden"), TextBlock(text="two")),
        error_result("Error: invalid arguments: missing x"),
    ),
    contexts=(HookContext(content=(TextBlock(text="remember the tests"),), source=UserSource()),),
)


def test_tool_messages_carry_results_in_model_order_then_the_contexts() -> None:
    expected = [
        {"role": "tool", "tool_call_id": "c1", "content": "one\n[reasoning block]\ntwo"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: invalid arguments: missing x"},
        {"role": "user", "content": "remember the tests"},
    ]
    assert expected == adapter.tool_messages(CALLS, BATCH)


def test_tool_messages_validate_against_the_sdk_message_types() -> None:
    *tool_messages, context = adapter.tool_messages(CALLS, BATCH)
    assert tool_messages == [
        round_trip(chat_types.ChatCompletionToolMessageParam, m) for m in tool_messages
    ]
    assert context == round_trip(chat_types.ChatCompletionUserMessageParam, context)


def test_responses_tool_messages_are_function_call_outputs_then_the_contexts() -> None:
    expected = [
        {"type": "function_call_output", "call_id": "c1", "output": "one\n[reasoning block]\ntwo"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": "Error: invalid arguments: missing x",
        },
        {"role": "user", "content": "remember the tests"},
    ]
    items = adapter.responses_tool_messages(CALLS, BATCH)
    assert expected == items
    assert items[:2] == [round_trip(FunctionCallOutput, item) for item in items[:2]]


def test_tool_messages_refuse_calls_that_do_not_match_the_batch() -> None:
    with pytest.raises(ValueError, match="1 calls but the batch has 2 results"):
        adapter.tool_messages(CALLS[:1], BATCH)
    with pytest.raises(TypeError, match="batch must be a ToolBatch, not list"):
        adapter.tool_messages(CALLS, [])  # pyright: ignore[reportArgumentType]


def test_responses_tool_calls_pick_the_function_call_items_of_a_response() -> None:
    items: list[Any] = [
        {"type": "reasoning", "id": "r1", "summary": []},
        ResponseFunctionToolCall(
            type="function_call", call_id="call_1", name="a", arguments="{}", id="fc_1"
        ),
        {"type": "function_call", "call_id": "call_2", "name": "b", "arguments": '{"x":2}'},
    ]
    expected = [
        ToolCallRequest(call_id="call_1", name="a", arguments="{}"),
        ToolCallRequest(call_id="call_2", name="b", arguments='{"x":2}'),
    ]
    assert expected == adapter.responses_tool_calls(items)
    assert expected == adapter.responses_tool_calls({"output": items})


def test_a_response_without_function_calls_has_none_to_run() -> None:
    assert [] == adapter.responses_tool_calls(
        {"output": [{"type": "message", "role": "assistant"}]}
    )


def test_responses_tool_calls_name_a_bad_function_call_item() -> None:
    with pytest.raises(TypeError, match=r'output\[0\]\."arguments" must be a string, not dict'):
        adapter.responses_tool_calls(
            [{"type": "function_call", "call_id": "c", "name": "a", "arguments": {}}]
        )


# --- strict mode ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Inner:
    depth: int
    label: str | None = None


@attrs.frozen(kw_only=True)
class FindArgs:
    query: str
    limit: int = 10
    inner: Inner | None = None
    items: list[Inner] = attrs.field(factory=list[Inner])


async def _find(args: FindArgs, context: ToolRunContext) -> str:
    return repr(args)


FIND = define_tool(name="find", description="Find.", parameters=FindArgs, execute=_find)
FIND_SCHEMA = ToolSchema(name="find", description="Find.", parameters=thaw_json(FIND.parameters))


def walk_objects(schema: object) -> list[dict[str, Any]]:
    """Every object schema inside ``schema`` (properties, items, anyOf branches)."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        node: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
        if "properties" in node:
            found.append(node)
        for value in node.values():
            found.extend(walk_objects(value))
    elif isinstance(schema, list):
        for value in cast("list[object]", schema):
            found.extend(walk_objects(value))
    return found


def test_strict_schemas_require_every_property_and_close_every_object() -> None:
    [param] = adapter.tool_params([FIND_SCHEMA], strict=True)
    assert param["function"]["strict"] is True
    objects = walk_objects(param["function"]["parameters"])
    assert 3 == len(objects)  # the root, inner, and the object of each item
    for node in objects:
        assert list(node["properties"]) == node["required"]
        assert node["additionalProperties"] is False


def test_strict_schemas_make_only_the_optional_properties_nullable() -> None:
    [param] = adapter.tool_params([FIND_SCHEMA], strict=True)
    properties = param["function"]["parameters"]["properties"]
    assert {"type": "string"} == properties["query"]
    assert {"type": ["integer", "null"], "default": 10} == properties["limit"]
    assert ["object", "null"] == properties["inner"]["type"]
    assert {"type": "integer"} == properties["inner"]["properties"]["depth"]
    assert {"type": ["string", "null"]} == properties["inner"]["properties"]["label"]
    assert ["array", "null"] == properties["items"]["type"]


def test_strict_schemas_leave_the_original_schema_unchanged() -> None:
    before = json.dumps(FIND_SCHEMA.parameters)
    adapter.tool_params([FIND_SCHEMA], strict=True)
    assert before == json.dumps(FIND_SCHEMA.parameters)


def test_strict_mode_refuses_an_open_ended_object_naming_its_path() -> None:
    schema = ToolSchema(
        name="meta",
        description="",
        parameters={"type": "object", "properties": {"extra": {"type": "object"}}},
    )
    with pytest.raises(ValueError, match=r'tool "meta": .* the object at \$\.properties\.extra'):
        adapter.tool_params([schema], strict=True)
    assert [] != adapter.tool_params([schema])  # fine without strict mode


def test_strict_schema_nullability_handles_enums_refs_and_unions() -> None:
    schema = ToolSchema(
        name="t",
        description="",
        parameters={
            "type": "object",
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
            "properties": {
                "color": {"type": "string", "enum": ["red", "green"]},
                "point": {"$ref": "#/$defs/Point"},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "maybe": {"type": ["string", "null"]},
            },
        },
    )
    [param] = adapter.tool_params([schema], strict=True)
    parameters = param["function"]["parameters"]
    properties = parameters["properties"]
    assert {"type": ["string", "null"], "enum": ["red", "green", None]} == properties["color"]
    assert {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]} == properties["point"]
    assert [{"type": "string"}, {"type": "integer"}, {"type": "null"}] == properties["either"][
        "anyOf"
    ]
    assert {"type": ["string", "null"]} == properties["maybe"]
    point = parameters["$defs"]["Point"]
    assert {"x": {"type": ["number", "null"]}} == point["properties"]
    assert point["additionalProperties"] is False
    # a null for each optional property is valid under the strict schema
    jsonschema.validate(
        {"color": None, "point": {"x": None}, "either": None, "maybe": None}, parameters
    )


STRICT_ARGS = {
    "query": "q",
    "limit": None,
    "inner": {"depth": 1, "label": None},
    "items": [{"depth": 2, "label": None}, {"depth": 3, "label": "x"}],
}


def test_a_strict_mode_models_arguments_fail_the_original_schema() -> None:
    # the problem strict_schemas solves: null for an optional property is not "absent"
    [param] = adapter.tool_params([FIND_SCHEMA], strict=True)
    jsonschema.validate(STRICT_ARGS, param["function"]["parameters"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(STRICT_ARGS, FIND_SCHEMA.parameters)


def test_tool_calls_drop_nulls_for_optional_properties_at_every_level() -> None:
    message = {
        "tool_calls": [
            {"id": "c1", "function": {"name": "find", "arguments": json.dumps(STRICT_ARGS)}}
        ]
    }
    [call] = adapter.tool_calls(message, strict_schemas=[FIND_SCHEMA])
    expected = {
        "query": "q",
        "inner": {"depth": 1},
        "items": [{"depth": 2}, {"depth": 3, "label": "x"}],
    }
    assert expected == json.loads(call.arguments)
    jsonschema.validate(json.loads(call.arguments), FIND_SCHEMA.parameters)


async def test_the_restored_arguments_reach_the_tool_as_absent() -> None:
    from dsh_tools import CancelController, ToolRegistry, run_tool_calls

    registry = ToolRegistry()
    registry.register(FIND)
    message = {
        "tool_calls": [
            {"id": "c1", "function": {"name": "find", "arguments": json.dumps(STRICT_ARGS)}}
        ]
    }
    calls = adapter.tool_calls(message, strict_schemas=registry.schemas())
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    [result] = batch.results
    assert result.is_error is False
    expected = repr(
        FindArgs(query="q", inner=Inner(depth=1), items=[Inner(depth=2), Inner(depth=3, label="x")])
    )
    assert (TextBlock(text=expected),) == result.content


def test_tool_calls_keep_nulls_the_original_schema_allows_and_required_ones() -> None:
    schema = ToolSchema(
        name="t",
        description="",
        parameters={
            "type": "object",
            "properties": {"maybe": {"type": ["string", "null"]}, "must": {"type": "string"}},
            "required": ["must"],
        },
    )
    text = '{"maybe": null, "must": null}'
    message = {"tool_calls": [{"id": "c", "function": {"name": "t", "arguments": text}}]}
    [call] = adapter.tool_calls(message, strict_schemas=[schema])
    assert text == call.arguments  # untouched text: nothing was dropped


def test_tool_calls_leave_other_tools_and_non_object_arguments_alone() -> None:
    message = {
        "tool_calls": [
            {"id": "c1", "function": {"name": "other", "arguments": '{"limit": null}'}},
            {"id": "c2", "function": {"name": "find", "arguments": "not json"}},
            {"id": "c3", "function": {"name": "find", "arguments": "[null]"}},
        ]
    }
    calls = adapter.tool_calls(message, strict_schemas=[FIND_SCHEMA])
    assert ['{"limit": null}', "not json", "[null]"] == [c.arguments for c in calls]


def test_responses_tool_calls_drop_optional_nulls_too() -> None:
    items = [
        {
            "type": "function_call",
            "call_id": "c",
            "name": "find",
            "arguments": '{"query":"q","limit":null}',
        }
    ]
    [call] = adapter.responses_tool_calls(items, strict_schemas=[FIND_SCHEMA])
    assert '{"query":"q"}' == call.arguments


def test_tool_calls_follow_local_refs_when_dropping_nulls() -> None:
    schema = ToolSchema(
        name="t",
        description="",
        parameters={
            "type": "object",
            "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}},
            "properties": {
                "p": {"$ref": "#/$defs/P"},
                "q": {"$ref": "#/$defs/P"},
                "broken": {"$ref": "#/$defs/Missing"},
                "free": {"type": "object"},
            },
            "required": ["q"],
        },
    )
    arguments = '{"p": null, "q": {"x": null}, "broken": null, "free": {"a": null}, "extra": null}'
    message = {"tool_calls": [{"id": "c", "function": {"name": "t", "arguments": arguments}}]}
    [call] = adapter.tool_calls(message, strict_schemas=[schema])
    # p's null is dropped through the ref, and q's inner x; an unresolvable ref is a schema that
    # does not allow null (dropped too); inside an object without properties, and for a key the
    # schema does not name, nulls are left as sent
    expected = {"q": {}, "free": {"a": None}, "extra": None}
    assert expected == json.loads(call.arguments)


def test_a_block_type_the_converter_does_not_know_is_named_by_its_class() -> None:
    @attrs.frozen
    class ImageBlock:
        url: str

    batch = ToolBatch(
        results=(ToolExecutionResult(content=(ImageBlock(url="u"),), is_error=False),),  # pyright: ignore[reportArgumentType]
        contexts=(),
    )
    [message] = adapter.tool_messages(CALLS[:1], batch)
    assert "[ImageBlock block]" == message["content"]
