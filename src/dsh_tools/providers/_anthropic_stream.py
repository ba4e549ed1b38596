"""The Anthropic call stream: Messages API stream events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Iterable
from typing import Any

from dsh_tools import ToolCallRequest

from ._common import JsonDict, as_mapping, require_str
from ._stream import CallStream

__all__ = ["ToolCallStream"]


class ToolCallStream(CallStream):
    r"""The ``tool_use`` blocks of a Messages stream (``stream=True``), each yielded at its
    ``content_block_stop``.

    Args:
        events: the stream's events (``RawMessageStreamEvent`` objects or ``dict``\ s), async
            or plain iterable.

    ``arguments`` is the compact JSON text of the block's input, as :func:`tool_calls` gives it
    (input JSON that does not parse is passed on as the text the model sent, so that the call
    gets its tool's invalid-arguments result). After exhaustion, :attr:`message` is the
    assembled message (``{"role": "assistant", "content": [...]}``, ``tool_use`` blocks with the
    parsed ``input``; what :func:`tool_calls` takes) and :attr:`text` the model's text.

    Raises (while iterating):
        ValueError: the stream ended without ``message_stop`` (cut off), or a delta or stop is
            for a block that never started; each names the event.
        TypeError: an event or field has the wrong shape.
    """

    _final = "message_stop"

    def __init__(self, events: AsyncIterable[object] | Iterable[object]) -> None:
        super().__init__(events)
        # per content block index: the block, and its input JSON fragments (tool_use)
        self._blocks: dict[int, tuple[JsonDict, list[str]]] = {}

    def _feed(self, event: Any, where: str) -> None:
        kind = event.get("type")
        if kind == "content_block_start":
            index = self._index(event, where)
            block = dict(as_mapping(event.get("content_block"), f"{where} content_block"))
            self._blocks[index] = (block, [])
        elif kind == "content_block_delta":
            block, parts = self._block(event, where)
            delta = as_mapping(event.get("delta"), f"{where} delta")
            if delta.get("type") == "text_delta":
                text = require_str(delta, "text", f"{where} delta")
                self._text.append(text)
                block["text"] = str(block.get("text") or "") + text
            elif delta.get("type") == "input_json_delta":
                parts.append(require_str(delta, "partial_json", f"{where} delta"))
        elif kind == "content_block_stop":
            block, parts = self._block(event, where)
            if block.get("type") == "tool_use":
                self._emit(self._tool_call(block, parts, where))
        elif kind == "message_stop":
            self._finished = True
        elif kind == "error":
            raise ValueError(f"{where}: the model's stream failed: {dict(event)!r}")

    def _index(self, event: Any, where: str) -> int:
        index = event.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f'{where}: needs an int "index", not {index!r}')
        return index

    def _block(self, event: Any, where: str) -> tuple[JsonDict, list[str]]:
        index = self._index(event, where)
        if index not in self._blocks:
            raise ValueError(f"{where}: content block {index} never started")
        return self._blocks[index]

    def _tool_call(self, block: JsonDict, parts: list[str], where: str) -> ToolCallRequest:
        from .anthropic import _arguments  # pyright: ignore[reportPrivateUsage]

        text = "".join(parts)
        arguments = text
        try:
            parsed: object = json.loads(text) if text else block.get("input") or {}
        except ValueError:
            parsed = None  # passed on as sent: the pipeline reports it
        if isinstance(parsed, dict):
            block["input"] = parsed
            arguments = _arguments(parsed, where)  # pyright: ignore[reportUnknownArgumentType]
        return ToolCallRequest(
            call_id=require_str(block, "id", f"{where} tool_use"),
            name=require_str(block, "name", f"{where} tool_use"),
            arguments=arguments,
        )

    def _assembled(self) -> JsonDict:
        return {
            "role": "assistant",
            "content": [block for _, (block, _parts) in sorted(self._blocks.items())],
        }
