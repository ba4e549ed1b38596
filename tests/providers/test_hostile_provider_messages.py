"""A hostile corpus of provider messages through both adapters: whatever a model (or a proxy
in front of it) sends, ``tool_calls`` either names what is wrong with the message's shape
(``TypeError`` / ``ValueError``) or returns calls that a batch answers one result each, and
``tool_messages`` carries every result back as JSON data. Never ``RecursionError``, never a
whole message lost to one bad call."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from dsh_tools import (
    CancelSignal,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    ToolSchema,
    define_tool,
    run_tool_calls,
)
from dsh_tools.providers import anthropic, openai


def deep_object(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"q": value}
    return value


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["q"] = [value]
    return value


ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07[/bold]\ud800"

# what a model can put in one call's argument text (OpenAI sends text, never parsed)
ARGUMENT_TEXTS = {
    "deep-array": "[" * 100_000 + "]" * 100_000,
    "deep-object": '{"q":' * 100_000 + "1" + "}" * 100_000,
    "torn-deep": "[" * 100_000,
    "5000-digits": '{"q": ' + "9" * 5000 + "}",
    "float-overflow": '{"q": 1e999}',
    "nan": '{"q": NaN}',
    "unsafe-int": '{"q": 9007199254740993}',
    "minus-zero": '{"q": -0.0}',
    "lone-surrogate-escape": '{"q": "\\ud800"}',
    "lone-surrogate": '{"q": "\ud800"}',
    "escapes": json.dumps({"q": ESCAPES}),
    "not-json": "q=1",
    "array": "[1, 2]",
    "empty": "",
    "nul": '{"q": "\x00"}',
}

# what a model can put in one tool_use block's input (Anthropic sends a parsed object)
INPUTS: dict[str, Any] = {
    "900-deep": deep_object(900),
    "100000-deep": deep_object(100_000),
    "cyclic": cyclic(),
    "nan": {"q": float("nan")},
    "inf": {"q": float("inf")},
    "unsafe-int": {"q": 2**53},
    "5000-digits": {"q": 10**5000},
    "minus-zero": {"q": -0.0},
    "bytes": {"q": b"x"},
    "set": {"q": {1}},
    "int-key": {1: "q"},
    "lone-surrogate": {"q": "\ud800"},
    "surrogate-key": {"\udc80": "q"},
    "escapes": {"q": ESCAPES},
}


async def echo(args: object, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()
    return "ok"


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(
        define_tool(name="t", description="d", parameters={"q": {"type": "string"}}, execute=echo)
    )
    return tools


async def answered(calls: list[ToolCallRequest]) -> list[str]:
    """Run ``calls`` as one batch: one result each, and its code (``ok`` for a success)."""
    batch = await run_tool_calls(registry(), calls, signal=CancelSignal.never())
    assert len(calls) == len(batch.results)
    return [r.error.code if r.error else ("error" if r.is_error else "ok") for r in batch.results]


def good_openai_call(call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "t", "arguments": '{"q": "fine"}'},
    }


@pytest.mark.parametrize("text", ARGUMENT_TEXTS.values(), ids=ARGUMENT_TEXTS.keys())
@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
async def test_one_hostile_openai_call_is_answered_and_its_neighbours_run(
    text: str, strict: bool
) -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            good_openai_call("a"),
            {"id": "b", "type": "function", "function": {"name": "t", "arguments": text}},
            good_openai_call("c"),
        ],
    }
    schemas = [ToolSchema(name="t", description="d", parameters={"type": "object"})]

    calls = openai.tool_calls(message, strict_schemas=schemas if strict else None)
    codes = await answered(calls)

    assert ("ok", "ok") == (codes[0], codes[2])
    batch = await run_tool_calls(registry(), calls, signal=CancelSignal.never())
    messages = openai.tool_messages(calls, batch)
    assert ["a", "b", "c"] == [m["tool_call_id"] for m in messages]
    json.dumps(messages)


@pytest.mark.parametrize("tool_input", INPUTS.values(), ids=INPUTS.keys())
async def test_one_hostile_anthropic_tool_use_is_answered_and_its_neighbours_run(
    tool_input: Any,
) -> None:
    content = [
        {"type": "tool_use", "id": "a", "name": "t", "input": {"q": "fine"}},
        {"type": "tool_use", "id": "b", "name": "t", "input": tool_input},
        {"type": "tool_use", "id": "c", "name": "t", "input": {"q": "fine"}},
    ]

    calls = anthropic.tool_calls(content)
    codes = await answered(calls)

    assert ["a", "b", "c"] == [call.call_id for call in calls]
    assert ("ok", "ok") == (codes[0], codes[2])
    batch = await run_tool_calls(registry(), calls, signal=CancelSignal.never())
    (message,) = anthropic.tool_messages(calls, batch)
    assert ["a", "b", "c"] == [block["tool_use_id"] for block in message["content"]]
    json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")


NOT_MESSAGES: list[Any] = [None, 42, "text"]

BAD_ANTHROPIC_SHAPES: list[Any] = [
    {"content": None},
    {"content": "text"},
    {"content": [None]},
    {"content": [{"type": "tool_use", "id": 1, "name": "t", "input": {}}]},
    {"content": [{"type": "tool_use", "id": "a", "name": None, "input": {}}]},
    {"content": [{"type": "tool_use", "id": "a", "name": "t", "input": [1]}]},
    {"content": [{"type": "tool_use", "id": "a", "name": "t"}]},
]

BAD_OPENAI_SHAPES: list[Any] = [
    {"role": "assistant", "tool_calls": "x"},
    {"role": "assistant", "tool_calls": [{"id": "a", "type": "custom"}]},
    {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t", "arguments": {}}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "t", "arguments": "{}"}}]},
    {"role": "assistant", "tool_calls": [{"id": "a", "function": "t"}]},
]

_CASES: list[tuple[Any, Any]] = [
    *[(adapter, message) for message in NOT_MESSAGES for adapter in (anthropic, openai)],
    *[(anthropic, message) for message in BAD_ANTHROPIC_SHAPES],
    *[(openai, message) for message in BAD_OPENAI_SHAPES],
]


@pytest.mark.parametrize(("adapter", "message"), _CASES)
def test_a_message_of_the_wrong_shape_is_a_type_or_value_error_naming_it(
    adapter: Any, message: Any
) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        adapter.tool_calls(message)
    assert str(caught.value)


@pytest.mark.parametrize(
    ("adapter", "message"),
    [(anthropic, {"content": []}), (openai, {"role": "assistant", "content": "done"})],
)
def test_a_message_without_tool_calls_is_the_loop_s_normal_end(adapter: Any, message: Any) -> None:
    assert [] == adapter.tool_calls(message)
