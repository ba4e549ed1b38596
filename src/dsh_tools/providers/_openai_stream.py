"""OpenAI call streams: Chat Completions stream chunks and Responses API stream events."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping
from typing import Any

from dsh_tools import ToolCallRequest, ToolSchema

from ._common import JsonDict, as_list, as_mapping, require_str
from ._stream import CallStream

__all__ = ["ResponsesToolCallStream", "ToolCallStream"]


class _OpenAIStream(CallStream):
    """What both OpenAI streams share: the strict-mode restoration of a call's arguments."""

    def __init__(
        self,
        events: AsyncIterable[object] | Iterable[object],
        *,
        strict_schemas: Iterable[ToolSchema] | None = None,
    ) -> None:
        super().__init__(events)
        from .openai import _restore, _strict_map  # pyright: ignore[reportPrivateUsage]

        self._restore = _restore
        self._strict = _strict_map(strict_schemas)
        self._begin()

    def _begin(self) -> None:
        """Set up the stream's own state (called once, by ``__init__``)."""

    def _emit_call(self, call: ToolCallRequest) -> None:
        self._emit(self._restore(call, self._strict))


class ToolCallStream(_OpenAIStream):
    r"""The tool calls of a Chat Completions stream (``stream=True``), each yielded the moment
    its arguments are complete: when the next tool call begins, or when the choice finishes.

    Args:
        chunks: the stream's chunks (``ChatCompletionChunk`` objects or ``dict``\ s), async or
            plain iterable. A chunk with ``choices: []`` (the usage chunk) is accepted.
        strict_schemas: as for :func:`tool_calls`: the schemas sent with ``strict=True``.

    After exhaustion, :attr:`message` is the assembled assistant message (what
    :func:`tool_calls` takes) and :attr:`text` the model's text.

    Raises (while iterating):
        ValueError: the stream ended without a ``finish_reason`` (cut off), or a fragment is for
            an index that never began, or for an earlier call once the next began; each names
            the chunk.
        TypeError: a chunk or field has the wrong shape.
    """

    _final = "finish_reason"

    def __init__(
        self,
        chunks: AsyncIterable[object] | Iterable[object],
        *,
        strict_schemas: Iterable[ToolSchema] | None = None,
    ) -> None:
        super().__init__(chunks, strict_schemas=strict_schemas)
        # per tool-call index: [id, name, argument fragments]
        self._calls: list[tuple[str, str, list[str]]] = []
        self._emitted = 0
        self._role = "assistant"

    def _feed(self, event: Any, where: str) -> None:
        if self._finished:
            return  # the usage chunk after the finish, or anything else after it
        for choice_value in as_list(event.get("choices", []), f'{where} "choices"'):
            choice = as_mapping(choice_value, f"{where} choice")
            delta = as_mapping(choice.get("delta") or {}, f"{where} delta")
            content = delta.get("content")
            if isinstance(content, str):
                self._text.append(content)
            for fragment_value in as_list(delta.get("tool_calls") or [], f"{where} tool_calls"):
                self._fragment(as_mapping(fragment_value, f"{where} tool call"), where)
            if choice.get("finish_reason") is not None:
                self._finished = True
                self._complete_up_to(len(self._calls))

    def _fragment(self, fragment: Mapping[str, object], where: str) -> None:
        index = fragment.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f'{where}: a tool call fragment needs an int "index", not {index!r}')
        function = as_mapping(fragment.get("function") or {}, f"{where} function")
        if index == len(self._calls):  # a new call begins: every earlier one is complete
            call_id = require_str(fragment, "id", f"{where} tool call {index}")
            name = require_str(function, "name", f"{where} tool call {index}.function")
            self._complete_up_to(index)
            self._calls.append((call_id, name, []))
        elif index != len(self._calls) - 1:
            state = "never began" if index > len(self._calls) else "is complete: the next began"
            raise ValueError(f"{where}: a fragment of tool call {index}, which {state}")
        arguments = function.get("arguments")
        if arguments is not None:
            if not isinstance(arguments, str):
                raise TypeError(
                    f"{where}: arguments must be a string, not {type(arguments).__name__}"
                )
            self._calls[index][2].append(arguments)

    def _complete_up_to(self, end: int) -> None:
        while self._emitted < end:
            call_id, name, parts = self._calls[self._emitted]
            call = ToolCallRequest(call_id=call_id, name=name, arguments="".join(parts))
            self._emit_call(call)
            self._emitted += 1

    def _assembled(self) -> JsonDict:
        message: JsonDict = {"role": self._role, "content": "".join(self._text) or None}
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": "".join(parts)},
                }
                for call_id, name, parts in self._calls
            ]
        return message


class ResponsesToolCallStream(_OpenAIStream):
    r"""The ``function_call`` items of a Responses API stream (``stream=True``), each yielded
    at its ``response.output_item.done``.

    Args:
        events: the stream's events (SDK objects or ``dict``\ s), async or plain iterable.
        strict_schemas: as for :func:`responses_tool_calls`.

    After exhaustion, :attr:`message` is ``{"output": [...]}``, the output items in order (what
    :func:`responses_tool_calls` takes), and :attr:`text` the model's output text.

    Raises (while iterating):
        ValueError: the stream ended without ``response.completed`` (cut off), or an item is
            incomplete; each names the event.
        TypeError: an event or field has the wrong shape.
    """

    _final = "response.completed"

    def _begin(self) -> None:
        self._items: list[JsonDict] = []

    def _feed(self, event: Any, where: str) -> None:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            delta = event.get("delta")
            if isinstance(delta, str):
                self._text.append(delta)
        elif kind == "response.output_item.done":
            item = dict(as_mapping(event.get("item"), f"{where} item"))
            self._items.append(item)
            if item.get("type") == "function_call":
                call = ToolCallRequest(
                    call_id=require_str(item, "call_id", f"{where} item"),
                    name=require_str(item, "name", f"{where} item"),
                    arguments=require_str(item, "arguments", f"{where} item"),
                )
                self._emit_call(call)
        elif kind in ("response.completed", "response.incomplete"):
            self._finished = True
        elif kind in ("response.failed", "error"):
            raise ValueError(f"{where}: the model's response failed: {dict(event)!r}")

    def _assembled(self) -> JsonDict:
        return {"output": list(self._items)}
