"""The Anthropic adapter: the Messages API.

Pure functions over plain data; the ``anthropic`` package is never imported (pass SDK objects
as they are: they are read through ``model_dump()``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from typing import Final, cast

from dsh_tools import (
    JsonSnapshotError,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    ToolSchema,
    dumps_json,
    snapshot_json,
)

from ._anthropic_stream import ToolCallStream as ToolCallStream
from ._common import (
    JsonDict,
    SupportsModelDump,
    as_mapping,
    check_batch,
    checked_schemas,
    content_text,
    items_of,
    plain_json,
    require_str,
)
from ._media import anthropic_content, has_media

__all__ = ["AnthropicTools", "ToolCallStream", "tool_calls", "tool_messages", "tool_params"]

logger: Final = logging.getLogger("dsh_tools")


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
        One :class:`~dsh_tools.ToolCallRequest` per ``tool_use`` block, or ``[]`` for a
        message without one (the model's answer: the loop's normal end). Anthropic sends the
        input as a JSON object; ``arguments`` is its compact JSON text. An input that is not
        lossless JSON data (NaN, an integer beyond ±(2**53 - 1), a lone surrogate, a value
        of another type, a cycle, nesting deeper than :data:`~dsh_tools.MAX_DEPTH`) gives
        ``arguments`` that are not JSON (``<input is not JSON data: $.x: ...>``, also logged
        at warning level on logger ``dsh_tools``): that call gets its tool's
        invalid-arguments result and the other calls run.

    Raises:
        TypeError: the content or a block has the wrong shape, or a field the wrong type
            (``input`` must be a mapping).
        ValueError: a block lacks a field.
    """
    blocks = items_of(content, "content", "message", "an Anthropic message")
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
        calls.append(
            ToolCallRequest(
                call_id=require_str(block, "id", where),
                name=require_str(block, "name", where),
                arguments=_arguments(cast("Mapping[str, object]", tool_input), where),
            )
        )
    return calls


def _arguments(tool_input: Mapping[str, object], where: str) -> str:
    """The compact JSON text of a ``tool_use`` input, or, when the input is not lossless JSON
    data, a text that is not JSON at all (``<input is not JSON data: $.x: ...>``): that one call
    then gets its tool's invalid-arguments result, as an OpenAI call whose argument text does
    not parse does, while the message's other calls run (the API wants a ``tool_result`` for
    every ``tool_use``).
    """
    try:
        # the boundary's own check: bounded depth, cycles, NaN, unsafe integers, surrogates
        return dumps_json(snapshot_json(dict(tool_input)))
    except JsonSnapshotError as exc:
        logger.warning('%s: the "input" of a tool_use is not JSON data: %s', where, exc)
        return f"<input is not JSON data: {exc}>"


def tool_messages(calls: Sequence[ToolCallRequest], batch: ToolBatch) -> list[JsonDict]:
    """The one user message that carries ``batch`` back to the model.

    Its content is one ``{"type": "tool_result", "tool_use_id", "content", "is_error"}`` block
    per result, in model order (``is_error`` is written for error results only; ``content``
    is the result's text blocks joined by newlines, other blocks written as ``[<type> block]``,
    and left out when empty, since the API rejects empty text), then the content of each
    context of the batch (its text as one ``{"type": "text", "text"}`` block when not empty):
    Anthropic wants the results first in the message that follows the assistant's
    ``tool_use``.

    A result (or context) holding pictures or files carries them natively: its ``content`` is
    a list of blocks, each run of text one ``text`` block, an :class:`~dsh_tools.ImageBlock`
    an ``image`` block, a PDF or text :class:`~dsh_tools.FileBlock` a ``document`` block
    (base64, plain text, or by URL), in order. Anthropic takes no sound: an
    :class:`~dsh_tools.AudioBlock` is written as its description (``[audio/wav, 48 kB]``), as
    is a text document given by URL.

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
        content: str | list[JsonDict] = (
            anthropic_content(result.content)
            if has_media(result.content)
            else content_text(result.content)
        )
        if content:
            block["content"] = content
        if result.is_error:
            block["is_error"] = True
        blocks.append(block)
    for context in batch.contexts:
        blocks.extend(anthropic_content(context.content))
    return [{"role": "user", "content": blocks}]


class AnthropicTools:
    """The Anthropic side of one agent loop: the tools to offer, the calls to run, the replies,
    like :class:`~dsh_tools.providers.openai.OpenAITools` (the methods are this module's
    functions over ``registry.schemas(agent)``).

    Args:
        registry: the registry whose tools are offered.
        agent: whose view of the registry (its scope's tools and restrictions); ``None`` for the
            global tools.

    Example::

        tools = AnthropicTools(registry)
        message = await client.messages.create(model=..., messages=messages, tools=tools.params())
        calls = tools.calls(message)  # [] when the model answered
        batch = await run_tool_calls(registry, calls, signal=signal)
        messages += [{"role": "assistant", "content": message.content}, *tools.messages(calls, batch)]
    """

    __slots__ = ("_agent", "_registry")

    def __init__(self, registry: ToolRegistry, *, agent: object = None) -> None:
        """Offer ``registry``'s tools visible to ``agent``.

        Raises:
            TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`.
        """
        if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
        self._registry = registry
        self._agent = agent

    def params(self) -> list[JsonDict]:
        """The Messages API ``tools=[...]`` for the tools visible now (see :func:`tool_params`)."""
        return tool_params(self._registry.schemas(self._agent))

    def calls(
        self, content: Mapping[str, object] | SupportsModelDump | Sequence[object]
    ) -> list[ToolCallRequest]:
        """The ``tool_use`` blocks of an assistant message (``[]`` for an answer).

        Raises:
            TypeError: as :func:`tool_calls`.
            ValueError: as :func:`tool_calls`.
        """
        return tool_calls(content)

    def messages(self, calls: Sequence[ToolCallRequest], batch: ToolBatch) -> list[JsonDict]:
        """The user message carrying ``batch`` back (see :func:`tool_messages`)."""
        return tool_messages(calls, batch)

    def stream(self, events: AsyncIterable[object] | Iterable[object]) -> ToolCallStream:
        """The calls of a streamed message as they arrive (see :class:`ToolCallStream`)."""
        return ToolCallStream(events)
