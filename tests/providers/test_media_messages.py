"""Pictures, sound and files in each provider's messages: the exact shapes, each checked
against the SDK's own request types, and whole loops through the real SDK clients.
"""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import anthropic.types
import openai
import openai.types.chat
import openai.types.responses
import pytest
import trio
import trio.testing
from provider_tools import (
    JsonDict,
    ScriptedEndpoint,
    anthropic_answer,
    anthropic_tool_uses,
    chat_answer,
    chat_tool_calls,
    responses_output,
    round_trip,
)

from dsh_tools import (
    AudioBlock,
    CancelController,
    ContentBlock,
    FileBlock,
    HookContext,
    ImageBlock,
    PluginSource,
    TextBlock,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    inject_context,
    run_tool_calls,
)
from dsh_tools._values._media import describe_media, format_size
from dsh_tools.providers import anthropic as anthropic_adapter
from dsh_tools.providers import openai as openai_adapter
from media_files import pdf, png, wav

PNG = png(32, 24)
PDF = pdf()
WAV = wav()
CSV = b"month,sales\njan,3\n"
PHOTO = "https://images.example/photo.jpg"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{b64(data)}"


def media_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def chart(title: str) -> list[ContentBlock]:
        """A chart with its caption."""
        return [TextBlock(text=title), ImageBlock(media_type="image/png", data=PNG)]

    @registry.tool
    def report() -> list[ContentBlock]:
        """A PDF report and its data."""
        return [
            FileBlock(media_type="application/pdf", data=PDF, name="q3.pdf"),
            FileBlock(media_type="text/csv", data=CSV, name="q3.csv"),
        ]

    @registry.tool
    def sound() -> AudioBlock:
        """A recording."""
        return AudioBlock(media_type="audio/wav", data=WAV)

    @registry.tool
    def photo() -> ImageBlock:
        """A photo on the web."""
        return ImageBlock(media_type="image/jpeg", url=PHOTO)

    @registry.tool
    def glance() -> str:
        """Looks, and shows the user's screen to the model."""
        inject_context(
            HookContext(
                content=[
                    TextBlock(text="the screen:"),
                    ImageBlock(media_type="image/png", data=PNG),
                ],
                source=PluginSource(plugin="screen"),
            )
        )
        return "looked"

    return registry


CALLS = [
    ToolCallRequest(call_id="c1", name="chart", arguments='{"title": "sales"}'),
    ToolCallRequest(call_id="c2", name="report", arguments="{}"),
    ToolCallRequest(call_id="c3", name="sound", arguments="{}"),
    ToolCallRequest(call_id="c4", name="photo", arguments="{}"),
    ToolCallRequest(call_id="c5", name="glance", arguments="{}"),
]


async def media_batch() -> ToolBatch:
    return await run_tool_calls(media_registry(), CALLS, signal=CancelController().signal)


def describe_png() -> str:
    return describe_media(ImageBlock(media_type="image/png", data=PNG))


def describe_wav() -> str:
    return describe_media(AudioBlock(media_type="audio/wav", data=WAV))


# --- Anthropic ------------------------------------------------------------------------------


async def test_anthropic_carries_images_and_documents_in_tool_results() -> None:
    (message,) = anthropic_adapter.tool_messages(CALLS, await media_batch())

    assert round_trip(anthropic.types.MessageParam, message) == message
    png_source = {"type": "base64", "media_type": "image/png", "data": b64(PNG)}
    assert {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": [
                    {"type": "text", "text": "sales"},
                    {"type": "image", "source": png_source},
                ],
            },
            {
                "type": "tool_result",
                "tool_use_id": "c2",
                "content": [
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": b64(PDF),
                        },
                        "title": "q3.pdf",
                    },
                    {
                        "type": "document",
                        "source": {
                            "type": "text",
                            "media_type": "text/plain",
                            "data": CSV.decode(),
                        },
                        "title": "q3.csv",
                    },
                ],
            },
            {
                "type": "tool_result",
                "tool_use_id": "c3",
                "content": [{"type": "text", "text": describe_wav()}],
            },
            {
                "type": "tool_result",
                "tool_use_id": "c4",
                "content": [{"type": "image", "source": {"type": "url", "url": PHOTO}}],
            },
            {"type": "tool_result", "tool_use_id": "c5", "content": "looked"},
            {"type": "text", "text": "the screen:"},
            {"type": "image", "source": png_source},
        ],
    } == message


# --- OpenAI Responses -----------------------------------------------------------------------


async def test_responses_carries_input_images_and_files_in_function_call_outputs() -> None:
    items = openai_adapter.responses_tool_messages(CALLS, await media_batch())

    for item in items:
        assert round_trip(openai.types.responses.ResponseInputItemParam, item) == item
    assert [
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "sales"},
                {"type": "input_image", "image_url": data_url("image/png", PNG), "detail": "auto"},
            ],
        },
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [
                {
                    "type": "input_file",
                    "filename": "q3.pdf",
                    "file_data": data_url("application/pdf", PDF),
                },
                {
                    "type": "input_file",
                    "filename": "q3.csv",
                    "file_data": data_url("text/csv", CSV),
                },
            ],
        },
        {
            "type": "function_call_output",
            "call_id": "c3",
            "output": [{"type": "input_text", "text": describe_wav()}],
        },
        {
            "type": "function_call_output",
            "call_id": "c4",
            "output": [{"type": "input_image", "image_url": PHOTO, "detail": "auto"}],
        },
        {"type": "function_call_output", "call_id": "c5", "output": "looked"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "the screen:"},
                {"type": "input_image", "image_url": data_url("image/png", PNG), "detail": "auto"},
            ],
        },
    ] == items


# --- OpenAI Chat Completions ----------------------------------------------------------------


def chat_message_type(message: JsonDict) -> object:
    # the message's own type, not the union of all: pydantic reads an ``Iterable`` field lazily,
    # and a union member tried first would use up the parts it then dumps
    return {
        "tool": openai.types.chat.ChatCompletionToolMessageParam,
        "user": openai.types.chat.ChatCompletionUserMessageParam,
    }[message["role"]]


async def test_chat_sends_placeholders_in_tool_messages_and_the_media_in_one_user_message() -> None:
    messages = openai_adapter.tool_messages(CALLS, await media_batch())

    for message in messages:
        assert round_trip(chat_message_type(message), message) == message
    report_text = "\n".join(
        [f"[application/pdf q3.pdf, {format_size(len(PDF))}]", f"[text/csv q3.csv, {len(CSV)} B]"]
    )
    assert [
        {"role": "tool", "tool_call_id": "c1", "content": f"sales\n{describe_png()}"},
        {"role": "tool", "tool_call_id": "c2", "content": report_text},
        {"role": "tool", "tool_call_id": "c3", "content": describe_wav()},
        {"role": "tool", "tool_call_id": "c4", "content": f"[image/jpeg, {PHOTO}]"},
        {"role": "tool", "tool_call_id": "c5", "content": "looked"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached to the result of chart (call c1):"},
                {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
                {"type": "text", "text": "Attached to the result of report (call c2):"},
                {
                    "type": "file",
                    "file": {"filename": "q3.pdf", "file_data": data_url("application/pdf", PDF)},
                },
                {
                    "type": "file",
                    "file": {"filename": "q3.csv", "file_data": data_url("text/csv", CSV)},
                },
                {"type": "text", "text": "Attached to the result of sound (call c3):"},
                {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
                {"type": "text", "text": "Attached to the result of photo (call c4):"},
                {"type": "image_url", "image_url": {"url": PHOTO}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "the screen:"},
                {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
            ],
        },
    ] == messages


async def test_chat_with_media_drop_sends_the_placeholders_only() -> None:
    batch = await media_batch()
    messages = openai_adapter.tool_messages(CALLS, batch, media="drop")

    assert [m for m in openai_adapter.tool_messages(CALLS, batch) if m["role"] == "tool"] == [
        m for m in messages if m["role"] == "tool"
    ]
    assert {"role": "user", "content": f"the screen:\n{describe_png()}"} == messages[-1]
    assert len(messages) == len(CALLS) + 1


async def test_a_text_only_batch_is_sent_as_before() -> None:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    calls = [ToolCallRequest(call_id="e", name="echo", arguments='{"text": "hi"}')]
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    assert [{"role": "tool", "tool_call_id": "e", "content": "hi"}] == openai_adapter.tool_messages(
        calls, batch
    )
    assert [
        {"type": "function_call_output", "call_id": "e", "output": "hi"}
    ] == openai_adapter.responses_tool_messages(calls, batch)
    assert [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "e", "content": "hi"}]}
    ] == anthropic_adapter.tool_messages(calls, batch)


async def test_an_unknown_media_mode_is_a_value_error() -> None:
    batch = await media_batch()
    with pytest.raises(ValueError, match='media must be "user_message" or "drop", not \'inline\''):
        openai_adapter.tool_messages(CALLS, batch, media="inline")  # pyright: ignore[reportArgumentType]


# --- whole loops through the SDKs -----------------------------------------------------------


def screenshot_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def screenshot() -> ImageBlock:
        """A screenshot of the app."""
        return ImageBlock(media_type="image/png", data=PNG)

    return registry


def _client(endpoint: ScriptedEndpoint) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="test-key",
        base_url="http://model.test/v1",
        http_client=endpoint.http_client(),
        max_retries=0,
    )


async def test_a_chat_loop_sends_the_screenshot_to_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = screenshot_registry()

    def turn2(body: JsonDict) -> JsonDict:
        tool, user = body["messages"][-2:]
        assert tool == {"role": "tool", "tool_call_id": "s1", "content": describe_png()}
        assert user["content"][1] == {
            "type": "image_url",
            "image_url": {"url": data_url("image/png", PNG)},
        }
        return chat_answer("a red square")

    endpoint = ScriptedEndpoint([lambda _: chat_tool_calls(("s1", "screenshot", "{}")), turn2])
    client = _client(endpoint)
    messages: list[Any] = [{"role": "user", "content": "what is on screen?"}]
    tools: Any = openai_adapter.tool_params(registry.schemas())
    completion = await client.chat.completions.create(model="m", messages=messages, tools=tools)
    message = completion.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    calls = openai_adapter.tool_calls(message)
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    messages.extend(openai_adapter.tool_messages(calls, batch))
    answer = await client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert [] == endpoint.failures
    assert "a red square" == answer.choices[0].message.content


async def test_a_responses_loop_sends_the_screenshot_to_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = screenshot_registry()
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "s1",
        "name": "screenshot",
        "arguments": "{}",
        "status": "completed",
    }

    def turn2(body: JsonDict) -> JsonDict:
        assert body["input"][-1] == {
            "type": "function_call_output",
            "call_id": "s1",
            "output": [
                {"type": "input_image", "image_url": data_url("image/png", PNG), "detail": "auto"}
            ],
        }
        return responses_output([])

    endpoint = ScriptedEndpoint([lambda _: responses_output([call]), turn2])
    client = _client(endpoint)
    items: list[Any] = [{"role": "user", "content": "what is on screen?"}]
    tools: Any = openai_adapter.responses_tool_params(registry.schemas())
    response = await client.responses.create(model="m", input=items, tools=tools)
    items.extend(item.model_dump(exclude_none=True) for item in response.output)
    calls = openai_adapter.responses_tool_calls(response)
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    items.extend(openai_adapter.responses_tool_messages(calls, batch))
    await client.responses.create(model="m", input=items, tools=tools)
    assert [] == endpoint.failures
    assert 2 == len(endpoint.requests)


async def test_an_anthropic_loop_sends_the_screenshot_to_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = screenshot_registry()

    def turn2(body: JsonDict) -> JsonDict:
        assert body["messages"][-1]["content"] == [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
                    }
                ],
            }
        ]
        return anthropic_answer("a red square")

    endpoint = ScriptedEndpoint(
        [lambda _: anthropic_tool_uses(("toolu_1", "screenshot", {})), turn2]
    )
    client = anthropic.AsyncAnthropic(
        api_key="test-key",
        base_url="http://model.test",
        http_client=endpoint.http_client(),
        max_retries=0,
    )
    messages: list[Any] = [{"role": "user", "content": "what is on screen?"}]
    tools: Any = anthropic_adapter.tool_params(registry.schemas())
    response = await client.messages.create(
        model="m", max_tokens=100, messages=messages, tools=tools
    )
    messages.append(
        {
            "role": "assistant",
            "content": [b.model_dump(exclude_none=True) for b in response.content],
        }
    )
    calls = anthropic_adapter.tool_calls(response)
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    messages.extend(anthropic_adapter.tool_messages(calls, batch))
    await client.messages.create(model="m", max_tokens=100, messages=messages, tools=tools)
    assert [] == endpoint.failures
