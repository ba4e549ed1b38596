"""A tool that draws a chart, and the picture reaching the model through each provider.

The ``chart`` tool renders a bar chart as a PNG (made with the standard library: no network,
no imaging package) and returns it with a caption. Run it offline to see the message each
provider gets (``pip install dsh-tools``)::

    python examples/chart_agent.py

or let a model ask for the chart and describe it (``pip install 'dsh-tools[openai,anthropic]'``)::

    OPENAI_API_KEY=... python examples/chart_agent.py --openai "Chart 3, 7, 2 and 9."
    OPENAI_API_KEY=... python examples/chart_agent.py --responses "Chart 3, 7, 2 and 9."
    ANTHROPIC_API_KEY=... python examples/chart_agent.py --anthropic "Chart 3, 7, 2 and 9."

``OPENAI_MODEL`` / ``ANTHROPIC_MODEL`` pick the models.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zlib
from typing import Any

import trio

from dsh_tools import (
    CancelController,
    ContentBlock,
    ImageBlock,
    TextBlock,
    ToolCallRequest,
    ToolRegistry,
    run_tool_calls,
)
from dsh_tools.providers import anthropic as anthropic_adapter
from dsh_tools.providers import openai as openai_adapter

DEFAULT_PROMPT = "Chart the numbers 3, 7, 2 and 9, then tell me which bar is tallest."
WIDTH, HEIGHT = 320, 200


def render_bar_chart(values: list[float], width: int = WIDTH, height: int = HEIGHT) -> bytes:
    """A bar chart of ``values`` as PNG bytes: dark bars on white, one per value."""
    top = max([*values, 1e-9])
    slot = width // max(len(values), 1)
    rows: list[bytes] = []
    for y in range(height):
        row = bytearray(b"\x00")  # PNG filter: none
        for x in range(width):
            index = min(x // slot, len(values) - 1) if values else 0
            bar = values[index] / top * (height - 10) if values else 0
            inside = x % slot >= slot // 6 and height - y <= bar
            row += b"\x2a\x4d\x8c" if inside else b"\xff\xff\xff"
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + chunk(b"IEND", b"")
    )


def build_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def chart(values: list[float], title: str = "chart") -> list[ContentBlock]:
        """Draw a bar chart of the values; the model sees the picture."""
        if not values:
            return [TextBlock(text="nothing to chart: give at least one value")]
        picture = ImageBlock(media_type="image/png", data=render_bar_chart(values))
        return [TextBlock(text=f"{title}: {len(values)} bars, tallest {max(values):g}"), picture]

    return registry


def _elided(value: Any) -> Any:
    """``value`` with long base64 strings cut, for printing."""
    if isinstance(value, dict):
        return {key: _elided(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_elided(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, str) and len(value) > 60:
        return value[:40] + f"...({len(value)} chars)"
    return value


async def show_shapes() -> None:
    """Run one chart call and print what each provider's adapter sends back."""
    registry = build_registry()
    calls = [ToolCallRequest(call_id="call_1", name="chart", arguments='{"values": [3, 7, 2, 9]}')]
    batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
    caption, picture = batch.results[0].content
    text = caption.text if isinstance(caption, TextBlock) else ""
    media_type = picture.media_type if isinstance(picture, ImageBlock) else "no"
    print(f"the tool returned {text!r} and a {media_type} picture")
    for name, messages in (
        ("Anthropic", anthropic_adapter.tool_messages(calls, batch)),
        ("OpenAI Responses", openai_adapter.responses_tool_messages(calls, batch)),
        ("OpenAI Chat Completions", openai_adapter.tool_messages(calls, batch)),
    ):
        print(f"{name}:")
        for message in messages:
            print("  " + json.dumps(_elided(message)))


async def chat_loop(client: Any, prompt: str, *, model: str) -> str:
    """A Chat Completions loop: the chart reaches the model in a user message."""
    registry = build_registry()
    tools: list[Any] = openai_adapter.tool_params(registry.schemas())
    messages: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(5):
        completion = await client.chat.completions.create(
            model=model, messages=messages, tools=tools
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        calls = openai_adapter.tool_calls(message)
        batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
        messages.extend(openai_adapter.tool_messages(calls, batch))
    raise RuntimeError("no answer after 5 turns")


async def responses_loop(client: Any, prompt: str, *, model: str) -> str:
    """A Responses API loop: the chart is an ``input_image`` in the tool's output."""
    registry = build_registry()
    tools: list[Any] = openai_adapter.responses_tool_params(registry.schemas())
    items: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(5):
        response = await client.responses.create(model=model, input=items, tools=tools)
        calls = openai_adapter.responses_tool_calls(response)
        if not calls:
            return str(response.output_text)
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
        items.extend(openai_adapter.responses_tool_messages(calls, batch))
    raise RuntimeError("no answer after 5 turns")


async def anthropic_loop(client: Any, prompt: str, *, model: str) -> str:
    """An Anthropic loop: the chart is an ``image`` block in the ``tool_result``."""
    registry = build_registry()
    tools: list[Any] = anthropic_adapter.tool_params(registry.schemas())
    messages: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(5):
        response = await client.messages.create(
            model=model, max_tokens=1024, messages=messages, tools=tools
        )
        calls = anthropic_adapter.tool_calls(response)
        if not calls:
            return "".join(block.text for block in response.content if block.type == "text")
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in response.content],
            }
        )
        batch = await run_tool_calls(registry, calls, signal=CancelController().signal)
        messages.extend(anthropic_adapter.tool_messages(calls, batch))
    raise RuntimeError("no answer after 5 turns")


async def main(argv: list[str]) -> None:
    if not argv:
        await show_shapes()
        return
    flag, prompt = argv[0], " ".join(argv[1:]) or DEFAULT_PROMPT
    if flag == "--anthropic":
        from anthropic import AsyncAnthropic

        model = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")
        print(await anthropic_loop(AsyncAnthropic(), prompt, model=model))
        return
    from openai import AsyncOpenAI

    model = os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
    loop = responses_loop if flag == "--responses" else chat_loop
    print(await loop(AsyncOpenAI(), prompt, model=model))


if __name__ == "__main__":
    trio.run(main, sys.argv[1:])
