"""Provider call streams: each yields a call the moment its arguments are complete, before it
pulls the next event, agrees with the non-streaming adapter on the assembled message, and
reports a cut-off or malformed stream naming the event. Events are the SDKs' own types
(validated through their pydantic models), as a stream really gives them."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pydantic
import pytest
import trio
from anthropic.types import RawMessageStreamEvent
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from dsh_tools import ToolCallRequest
from dsh_tools.providers import anthropic as anthropic_adapter
from dsh_tools.providers import openai as openai_adapter

RESPONSES = pydantic.TypeAdapter(ResponseStreamEvent)
ANTHROPIC = pydantic.TypeAdapter(RawMessageStreamEvent)

Call = tuple[str, str, dict[str, Any]]


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(max(cut, 0), len(text)) for cut in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)] or [""]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> Any:
    return ChatCompletionChunk.model_validate(
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def _chat_events(text: str, calls: list[Call], cuts: list[int]) -> list[Any]:
    events: list[Any] = [
        _chunk({"role": "assistant", "content": part}) for part in _split(text, cuts) if part
    ]
    for index, (call_id, name, arguments) in enumerate(calls):
        first, *rest = _split(json.dumps(arguments), cuts)
        events.append(
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": first},
                        }
                    ]
                }
            )
        )
        events.extend(
            _chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in rest
        )
    events.append(_chunk({}, "tool_calls" if calls else "stop"))
    events.append(
        ChatCompletionChunk.model_validate(
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [],
            }
        )
    )
    return events


def _responses_events(text: str, calls: list[Call], cuts: list[int]) -> list[Any]:
    seq = iter(range(10_000))
    events: list[Any] = [
        RESPONSES.validate_python(
            {
                "type": "response.output_text.delta",
                "delta": part,
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "sequence_number": next(seq),
                "logprobs": [],
            }
        )
        for part in _split(text, cuts)
        if part
    ]
    for index, (call_id, name, arguments) in enumerate(calls, start=1):
        item = {
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(arguments),
            "id": f"fc_{index}",
            "status": "completed",
        }
        for part in _split(item["arguments"], cuts):
            events.append(
                RESPONSES.validate_python(
                    {
                        "type": "response.function_call_arguments.delta",
                        "delta": part,
                        "item_id": item["id"],
                        "output_index": index,
                        "sequence_number": next(seq),
                    }
                )
            )
        events.append(
            RESPONSES.validate_python(
                {
                    "type": "response.output_item.done",
                    "output_index": index,
                    "sequence_number": next(seq),
                    "item": item,
                }
            )
        )
    events.append(
        RESPONSES.validate_python(
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": {
                    "id": "r",
                    "object": "response",
                    "created_at": 0,
                    "model": "m",
                    "output": [],
                    "parallel_tool_calls": True,
                    "tool_choice": "auto",
                    "tools": [],
                    "status": "completed",
                },
            }
        )
    )
    return events


def _anthropic_events(text: str, calls: list[Call], cuts: list[int]) -> list[Any]:
    raw: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "x",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        }
    ]
    block = 0
    if text:
        raw.append(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
        raw.extend(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": part},
            }
            for part in _split(text, cuts)
            if part
        )
        raw.append({"type": "content_block_stop", "index": 0})
        block = 1
    for offset, (call_id, name, arguments) in enumerate(calls):
        index = block + offset
        raw.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            }
        )
        raw.extend(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": part},
            }
            for part in _split(json.dumps(arguments), cuts)
        )
        raw.append({"type": "content_block_stop", "index": index})
    raw.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
    )
    raw.append({"type": "message_stop"})
    return [ANTHROPIC.validate_python(event) for event in raw]


PROVIDERS: dict[
    str, tuple[Callable[..., list[Any]], Callable[..., Any], Callable[[Any], list[ToolCallRequest]]]
] = {
    "chat": (_chat_events, openai_adapter.ToolCallStream, openai_adapter.tool_calls),
    "responses": (
        _responses_events,
        openai_adapter.ResponsesToolCallStream,
        openai_adapter.responses_tool_calls,
    ),
    "anthropic": (
        _anthropic_events,
        anthropic_adapter.ToolCallStream,
        anthropic_adapter.tool_calls,
    ),
}

_json = st.dictionaries(
    st.sampled_from(["path", "q", "n", "ok"]),
    st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none()),
    max_size=3,
)
_calls = st.lists(st.tuples(st.sampled_from(["read", "grep", "run"]), _json), max_size=4).map(
    lambda items: [(f"call_{i}", name, args) for i, (name, args) in enumerate(items)]
)


class _Source:
    """An async event source that counts how many events were pulled."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.pulled = 0
        self.closed = False

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        await trio.lowlevel.checkpoint()
        if self.pulled >= len(self.events):
            raise StopAsyncIteration
        self.pulled += 1
        return self.events[self.pulled - 1]

    async def aclose(self) -> None:
        self.closed = True


def _expected(calls: list[Call], kind: str) -> list[ToolCallRequest]:
    def arguments(value: dict[str, Any]) -> str:
        if kind == "anthropic":  # the adapter's compact JSON of the input
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return json.dumps(value)

    return [ToolCallRequest(call_id=c, name=n, arguments=arguments(a)) for c, n, a in calls]


async def _read(stream: Any) -> list[ToolCallRequest]:
    return [call async for call in stream]


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
@given(text=st.text(max_size=12), calls=_calls, cuts=st.lists(st.integers(0, 30), max_size=4))
def test_any_split_of_the_arguments_gives_the_calls_and_message_of_the_whole_reply(
    kind: str, text: str, calls: list[Call], cuts: list[int]
) -> None:
    build, stream_class, tool_calls = PROVIDERS[kind]
    stream = stream_class(build(text, calls, cuts))

    streamed = trio.run(_read, stream)

    assert (_expected(calls, kind), _expected(calls, kind), text) == (
        streamed,
        tool_calls(stream.message),
        stream.text,
    )


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_each_call_is_yielded_before_the_next_event_is_pulled(kind: str) -> None:
    build, stream_class, _ = PROVIDERS[kind]
    calls: list[Call] = [("a", "read", {"path": "x"}), ("b", "run", {"n": 1})]
    events = build("", calls, [3])
    source = _Source(events)

    async def main() -> list[int]:
        pulls: list[int] = []
        async for _ in stream_class(source):
            pulls.append(source.pulled)
        return pulls

    pulls = trio.run(main)

    # a call completes at a known event: the stream pulled no further than that event
    completing = [
        index + 1
        for index, event in enumerate(events)
        if _completes_a_call(kind, event, events[: index + 1])
    ]
    assert completing[: len(calls)] == pulls


def _completes_a_call(kind: str, event: Any, seen: list[Any]) -> bool:
    data: dict[str, Any] = event.model_dump()
    if kind == "responses":
        return data["type"] == "response.output_item.done"
    if kind == "anthropic":
        return data["type"] == "content_block_stop"
    # chat: the chunk where the next call begins, or the finish
    choices: list[dict[str, Any]] = data["choices"]
    if not choices:
        return False

    def ids(choice: dict[str, Any]) -> list[Any]:
        fragments: list[dict[str, Any]] = choice["delta"].get("tool_calls") or []
        return [fragment["id"] for fragment in fragments if fragment["id"]]

    begins = bool(ids(choices[0]))
    started_before = any(
        ids(choice) for earlier in seen[:-1] for choice in earlier.model_dump()["choices"]
    )
    return (begins and started_before) or choices[0]["finish_reason"] is not None


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_a_stream_cut_off_before_its_final_event_is_a_value_error(kind: str) -> None:
    build, stream_class, _ = PROVIDERS[kind]
    events = build("hi", [("a", "read", {"path": "x"})], [])
    cut = events[:-2] if kind == "chat" else events[:-1]  # chat: drop the finish and usage

    with pytest.raises(ValueError, match=r"without its .* event: it was cut off"):
        trio.run(_read, stream_class(cut))


def test_a_chat_fragment_for_a_call_that_never_began_or_has_ended_names_its_chunk() -> None:
    never = [_chunk({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]})]
    ended = [
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "a",
                        "type": "function",
                        "function": {"name": "t", "arguments": "{}"},
                    }
                ]
            }
        ),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "b",
                        "type": "function",
                        "function": {"name": "t", "arguments": "{}"},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "x"}}]}),
    ]

    with pytest.raises(ValueError, match=r"stream event 0 .*tool call 1, which never began"):
        trio.run(_read, openai_adapter.ToolCallStream(never))
    with pytest.raises(ValueError, match=r"stream event 2 .*tool call 0, which is complete"):
        trio.run(_read, openai_adapter.ToolCallStream(ended))


def test_an_anthropic_input_that_is_not_json_is_passed_on_as_sent() -> None:
    events = _anthropic_events("", [("a", "read", {})], [])
    for index, event in enumerate(events):
        data = event.model_dump()
        if data["type"] == "content_block_delta":
            events[index] = ANTHROPIC.validate_python(
                {**data, "delta": {"type": "input_json_delta", "partial_json": '{"path": '}}
            )

    (call,) = trio.run(_read, anthropic_adapter.ToolCallStream(events))

    assert '{"path": ' == call.arguments


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_the_message_is_known_only_once_exhausted_and_closing_reaches_the_source(kind: str) -> None:
    build, stream_class, _ = PROVIDERS[kind]
    source = _Source(build("", [("a", "read", {}), ("b", "read", {})], []))
    stream = stream_class(source)

    async def main() -> None:
        await stream.__anext__()
        with pytest.raises(RuntimeError, match="known once the stream is exhausted"):
            _ = stream.message
        await stream.aclose()

    trio.run(main)

    assert source.closed


def test_a_plain_list_of_dict_events_works_too() -> None:
    raw: list[dict[str, Any]] = [
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "a",
                                "function": {"name": "t", "arguments": "{}"},
                            }
                        ]
                    },
                    "finish_reason": None,
                }
            ]
        },
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ]
    events: Iterator[dict[str, Any]] = iter(raw)

    calls = trio.run(_read, openai_adapter.ToolCallStream(events))

    assert [ToolCallRequest(call_id="a", name="t", arguments="{}")] == calls
