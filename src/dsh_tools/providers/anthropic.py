"""The Anthropic adapter: the Messages API.

Pure functions over plain data; the ``anthropic`` package is never imported (pass SDK objects
as they are: they are read through ``model_dump()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from dsh_tools import ToolBatch, ToolCallRequest, ToolSchema, dumps_json

from ._common import (
    JsonDict,
    SupportsModelDump,
    as_list,
    as_mapping,
    check_batch,
    checked_schemas,
    content_text,
    context_texts,
    plain_json,
    require_str,
)

__all__ = ["tool_calls", "tool_messages", "tool_params"]


def tool_params(schemas: Iterable[ToolSchema]) -> list[JsonDict]:
    """The Messages API ``tools=[...]`` entries for ``schemas``:
    ``{"name", "description", "input_schema"}`` as plain JSON data, in order.

    Raises:
        TypeError: an element is not a :class:`~dsh_tools.ToolSchema`, or its name is not a
            non-empty ``str`` or its description not a ``str``.
    """
    return [
        {
            "name": schema.name,
            "description": schema.description,
            "input_schema": plain_json(schema.parameters),
        }
        for schema in checked_schemas(schemas)
    ]


def tool_calls(
    content: Mapping[str, object] | SupportsModelDump | Sequence[object],
) -> list[ToolCallRequest]:
    """The ``tool_use`` blocks of an assistant message, in model order.

    Args:
        content: the ``Message`` (SDK object or ``dict``) or its ``content`` list; blocks of
            other types (text, thinking, server tool use) are skipped.

    Returns:
        One :class:`~dsh_tools.ToolCallRequest` per ``tool_use`` block. Anthropic sends the
        input as a JSON object; ``arguments`` is its compact JSON text.

    Raises:
        TypeError: the content or a block has the wrong shape, or a field the wrong type
            (``input`` must be a JSON object).
        ValueError: there is no ``tool_use`` block (check ``stop_reason == "tool_use"``
            first: a message without one is the model's answer), or a block lacks a field.
    """
    if isinstance(content, Sequence) and not isinstance(content, str | bytes):
        blocks = as_list(content, "the content")
    else:
        blocks = as_list(
            as_mapping(content, "an Anthropic message").get("content"), 'message "content"'
        )
    calls: list[ToolCallRequest] = []
    for index, item in enumerate(blocks):
        where = f"content[{index}]"
        block = as_mapping(item, where)
        if block.get("type") != "tool_use":
            continue
        if "input" not in block:
            raise ValueError(f'{where} has no "input"')
        tool_input = block["input"]
        if not isinstance(tool_input, Mapping):
            raise TypeError(
                f'{where}."input" must be a JSON object, not {type(tool_input).__name__}'
            )
        try:
            arguments = dumps_json(plain_json(cast("Mapping[str, object]", tool_input)))
        except (TypeError, ValueError) as exc:
            raise TypeError(f'{where}."input" is not JSON data: {exc}') from exc
        calls.append(
            ToolCallRequest(
                call_id=require_str(block, "id", where),
                name=require_str(block, "name", where),
                arguments=arguments,
            )
        )
    if not calls:
        raise ValueError(
            'the message has no "tool_use" block (it is the model\'s answer: check '
            'stop_reason == "tool_use" before asking for tool calls)'
        )
    return calls


def tool_messages(calls: Sequence[ToolCallRequest], batch: ToolBatch) -> list[JsonDict]:
    """The one user message that carries ``batch`` back to the model.

    Its content is one ``{"type": "tool_result", "tool_use_id", "content", "is_error"}`` block
    per result, in model order (``is_error`` is written for error results only; ``content``
    is the result's text blocks joined by newlines, every other block written as
    ``[<type> block]``, and left out when empty, since the API rejects empty text), then one
    ``{"type": "text", "text"}`` block per non-empty context of the batch: Anthropic wants the
    results first in the message that follows the assistant's ``tool_use``.

    Args:
        calls: the calls the batch ran, in the order given to ``run_tool_calls``.
        batch: what ``run_tool_calls`` returned.

    Returns:
        A list holding the one message (``{"role": "user", "content": [...]}``).

    Raises:
        TypeError: ``batch`` is not a :class:`~dsh_tools.ToolBatch` or a call is not a
            :class:`~dsh_tools.ToolCallRequest`.
        ValueError: ``calls`` and ``batch.results`` differ in length.
    """
    blocks: list[JsonDict] = []
    for call, result in check_batch(calls, batch):
        block: JsonDict = {"type": "tool_result", "tool_use_id": call.call_id}
        text = content_text(result.content)
        if text:
            block["content"] = text
        if result.is_error:
            block["is_error"] = True
        blocks.append(block)
    blocks.extend({"type": "text", "text": text} for text in context_texts(batch.contexts) if text)
    return [{"role": "user", "content": blocks}]
