"""The OpenAI adapter: Chat Completions and the Responses API.

Pure functions over plain data; the ``openai`` package is never imported (pass SDK objects as
they are: they are read through ``model_dump()``).

OpenAI's tool messages have no error flag: an error result reaches the model only through its
text, which dsh-tools always writes as ``Error: ...`` (for example ``Error: invalid arguments:
...`` or ``Error: tool call aborted``). ``is_error`` itself cannot be sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import cast, final

from dsh_tools import (
    ContentBlock,
    FrozenJsonObject,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    ToolSchema,
    dumps_json,
    parse_call_arguments,
    thaw_json,
)

from ._common import (
    JsonDict,
    SupportsModelDump,
    as_list,
    as_mapping,
    check_batch,
    checked_schemas,
    content_text,
    items_of,
    plain_json,
    require_str,
)
from ._media import (
    MediaMode,
    chat_media_parts,
    chat_user_content,
    check_media_mode,
    has_media,
    media_heading,
    responses_content,
)
from ._openai_stream import ResponsesToolCallStream as ResponsesToolCallStream
from ._openai_stream import ToolCallStream as ToolCallStream
from ._strict import drop_optional_nulls, strict_schema

__all__ = [
    "OpenAITools",
    "ResponsesToolCallStream",
    "ToolCallStream",
    "responses_tool_calls",
    "responses_tool_messages",
    "responses_tool_params",
    "tool_calls",
    "tool_messages",
    "tool_params",
]


def _parameters(schema: ToolSchema, strict: bool) -> JsonDict:
    if strict:
        return strict_schema(schema.parameters, schema.name)
    return plain_json(schema.parameters)


def tool_params(schemas: Iterable[ToolSchema], *, strict: bool = False) -> list[JsonDict]:
    r"""The Chat Completions ``tools=[...]`` entries for ``schemas``.

    Each entry is ``{"type": "function", "function": {"name", "description", "parameters"}}``
    as plain JSON data. With ``strict=True`` the function also says ``"strict": true`` and its
    parameters are a strict-mode copy: every object lists all its properties as ``required``,
    each originally optional property may also be ``null``, and every object says
    ``"additionalProperties": false``. Pass the same ``schemas`` to
    ``tool_calls(..., strict_schemas=...)`` so those ``null``\ s read as absent again.

    Args:
        schemas: the tools to offer, usually ``registry.schemas(agent)``.
        strict: emit strict-mode schemas.

    Returns:
        One entry per schema, in order.

    Raises:
        TypeError: an element is not a :class:`~dsh_tools.ToolSchema`, or its name is not a
            non-empty ``str`` or its description not a ``str``.
        ValueError: with ``strict=True``, a schema has an object that strict mode cannot express
            (one without ``properties``, or with ``additionalProperties`` other than ``false``).
    """
    params: list[JsonDict] = []
    for schema in checked_schemas(schemas):
        function: JsonDict = {
            "name": schema.name,
            "description": schema.description,
            "parameters": _parameters(schema, strict),
        }
        if strict:
            function["strict"] = True
        params.append({"type": "function", "function": function})
    return params


def responses_tool_params(schemas: Iterable[ToolSchema], *, strict: bool = False) -> list[JsonDict]:
    """The Responses API ``tools=[...]`` entries for ``schemas``.

    Each entry is ``{"type": "function", "name", "description", "parameters", "strict"}``;
    ``"strict"`` is always written (the Responses API makes a missing flag strict), and with
    ``strict=True`` the parameters are the strict-mode copy described in :func:`tool_params`.

    Raises:
        TypeError: as :func:`tool_params`.
        ValueError: as :func:`tool_params`.
    """
    return [
        {
            "type": "function",
            "name": schema.name,
            "description": schema.description,
            "parameters": _parameters(schema, strict),
            "strict": strict,
        }
        for schema in checked_schemas(schemas)
    ]


def _restore(
    call: ToolCallRequest, strict_schemas: Mapping[str, Mapping[str, object]] | None
) -> ToolCallRequest:
    if strict_schemas is None or call.name not in strict_schemas:
        return call
    schema = strict_schemas[call.name]
    parsed = parse_call_arguments(call.arguments)
    if not isinstance(parsed, FrozenJsonObject):
        # not an object, or not lossless JSON: the pipeline reports it as sent
        return call
    arguments = cast("dict[str, object]", thaw_json(parsed))
    restored = drop_optional_nulls(arguments, schema, schema)
    if restored is arguments:
        return call
    return ToolCallRequest(call_id=call.call_id, name=call.name, arguments=dumps_json(restored))


def _strict_map(
    strict_schemas: Iterable[ToolSchema] | None,
) -> dict[str, Mapping[str, object]] | None:
    if strict_schemas is None:
        return None
    return {
        schema.name: plain_json(schema.parameters) for schema in checked_schemas(strict_schemas)
    }


def tool_calls(
    message: Mapping[str, object] | SupportsModelDump,
    *,
    strict_schemas: Iterable[ToolSchema] | None = None,
) -> list[ToolCallRequest]:
    """The tool calls of a Chat Completions assistant message, in model order.

    Args:
        message: ``completion.choices[0].message``, as the SDK object or a plain ``dict``.
        strict_schemas: the schemas that were sent with ``tool_params(..., strict=True)`` (the
            originals, not the strict copies). For a call to one of them, a ``null`` for a
            property its schema leaves optional (and does not itself allow to be ``null``) is
            dropped, at every nesting level, so validation sees the property absent.

    Returns:
        One :class:`~dsh_tools.ToolCallRequest` per ``function`` tool call; ``arguments`` is
        the model's JSON text as sent (re-serialized only when a ``null`` was dropped). ``[]``
        for a message without tool calls: the model's answer, the loop's normal end.

    Raises:
        TypeError: ``message`` is not a mapping or SDK object (or is the whole completion), or
            a field has the wrong type (for example ``arguments`` that is not a string).
        ValueError: a tool call lacks a field or is not a ``function`` call.
    """
    data = as_mapping(message, "a chat message")
    if "choices" in data:
        raise TypeError(
            "expected a chat message, got a whole completion: pass completion.choices[0].message"
        )
    raw = data.get("tool_calls")
    if raw is None:
        return []  # the model answered: the loop's normal end
    restore = _strict_map(strict_schemas)
    calls: list[ToolCallRequest] = []
    for index, item in enumerate(as_list(raw, 'message "tool_calls"')):
        where = f"tool_calls[{index}]"
        entry = as_mapping(item, where)
        kind = entry.get("type", "function")
        if kind != "function":
            raise ValueError(f'{where} has type {kind!r}: only "function" tool calls are supported')
        function = entry.get("function")
        if function is None:
            raise ValueError(f'{where} has no "function"')
        function = as_mapping(function, f"{where}.function")
        call = ToolCallRequest(
            call_id=require_str(entry, "id", where),
            name=require_str(function, "name", f"{where}.function"),
            arguments=require_str(function, "arguments", f"{where}.function"),
        )
        calls.append(_restore(call, restore))
    return calls


def tool_messages(
    calls: Sequence[ToolCallRequest],
    batch: ToolBatch,
    *,
    media: MediaMode = "user_message",
) -> list[JsonDict]:
    """The Chat Completions messages that carry ``batch`` back to the model.

    First one ``{"role": "tool", "tool_call_id", "content"}`` per result, in model order (append
    them right after the assistant message that made the calls), then one
    ``{"role": "user", "content"}`` per context of the batch, in order. ``content`` is the
    result's text blocks joined by newlines, a picture, sound or file written as its
    description (``[image/png 640x480, 12 kB]``), any other block as ``[<type> block]``.

    OpenAI has no error flag on a tool message: an error result is told apart only by its text
    (``Error: ...``).

    A tool message takes text only. With ``media="user_message"`` (the default), the pictures
    (``image_url``), sound (``input_audio``: WAV and MP3) and files (``file``) of the results
    travel in one ``user`` message right after the tool messages, each result's introduced by
    a text part ``Attached to the result of <tool> (call <id>):``; a context holding them is
    a user message of text and media parts. With ``media="drop"`` only the descriptions are
    sent. What Chat cannot take (other sound, a file by URL) stays its description.

    Args:
        calls: the calls the batch ran, in the order given to ``run_tool_calls``.
        batch: what ``run_tool_calls`` returned.
        media: ``"user_message"`` or ``"drop"``.

    Raises:
        TypeError: ``batch`` is not a :class:`~dsh_tools.ToolBatch` or a call is not a
            :class:`~dsh_tools.ToolCallRequest`.
        ValueError: ``calls`` and ``batch.results`` differ in length, or ``media`` is
            another value.
    """
    media = check_media_mode(media)
    pairs = check_batch(calls, batch)
    messages: list[JsonDict] = [
        {"role": "tool", "tool_call_id": call.call_id, "content": content_text(result.content)}
        for call, result in pairs
    ]
    if media == "user_message":
        parts: list[JsonDict] = []
        for call, result in pairs:
            if has_media(result.content):
                parts.append({"type": "text", "text": media_heading(call)})
                parts.extend(chat_media_parts(result.content))
        if parts:
            messages.append({"role": "user", "content": parts})
    messages.extend(
        {"role": "user", "content": chat_user_content(context.content, media)}
        for context in batch.contexts
    )
    return messages


def responses_tool_calls(
    response: Mapping[str, object] | SupportsModelDump | Sequence[object],
    *,
    strict_schemas: Iterable[ToolSchema] | None = None,
) -> list[ToolCallRequest]:
    """The ``function_call`` items of a Responses API output, in model order.

    Args:
        response: the ``Response`` (SDK object or ``dict``) or its ``output`` list; items of
            other types (messages, reasoning) are skipped.
        strict_schemas: as in :func:`tool_calls`.

    Returns:
        One :class:`~dsh_tools.ToolCallRequest` per ``function_call`` item, with its
        ``call_id`` (the id that ``function_call_output`` must answer). ``[]`` for an output
        without one: the model's answer, the loop's normal end.

    Raises:
        TypeError: the output or an item has the wrong shape or a field the wrong type.
        ValueError: a ``function_call`` item lacks a field.
    """
    output = items_of(response, "output", "response", "a Responses API response")
    restore = _strict_map(strict_schemas)
    calls: list[ToolCallRequest] = []
    for index, item in enumerate(output):
        where = f"output[{index}]"
        entry = as_mapping(item, where)
        if entry.get("type") != "function_call":
            continue
        call = ToolCallRequest(
            call_id=require_str(entry, "call_id", where),
            name=require_str(entry, "name", where),
            arguments=require_str(entry, "arguments", where),
        )
        calls.append(_restore(call, restore))
    return calls


def responses_tool_messages(calls: Sequence[ToolCallRequest], batch: ToolBatch) -> list[JsonDict]:
    """The Responses API input items that carry ``batch`` back to the model.

    One ``{"type": "function_call_output", "call_id", "output"}`` per result, in model order,
    then one ``{"role": "user", "content"}`` message per context. The text is built as in
    :func:`tool_messages`; as there, an error result is told apart only by its ``Error: ...``
    text.

    A result holding pictures or files carries them natively: its ``output`` is a list of
    ``input_text`` (each run of text), ``input_image`` (an image's URL, or its bytes as a
    ``data:`` URL) and ``input_file`` (``file_url``, or ``file_data`` with a ``filename``)
    items, in order; a context holding them likewise. The Responses API takes no sound in a
    tool's output: an :class:`~dsh_tools.AudioBlock` is written as its description.

    Raises:
        TypeError: as :func:`tool_messages`.
        ValueError: as :func:`tool_messages`.
    """
    items: list[JsonDict] = [
        {
            "type": "function_call_output",
            "call_id": call.call_id,
            "output": _responses_text_or_items(result.content),
        }
        for call, result in check_batch(calls, batch)
    ]
    items.extend(
        {"role": "user", "content": _responses_text_or_items(context.content)}
        for context in batch.contexts
    )
    return items


def _responses_text_or_items(content: Sequence[ContentBlock]) -> str | list[JsonDict]:
    return responses_content(content) if has_media(content) else content_text(content)


@final
class OpenAITools:
    """The OpenAI side of one agent loop: the tools to offer, the calls to run, the replies.

    It keeps the schemas it last sent (``params()`` / ``responses_params()``), so that in strict
    mode the calls the model answers with are read against them: a ``null`` the model sent for
    an optional property is dropped again, with no second list of schemas to pass. Without
    strict mode the methods are the function forms of this module over
    ``registry.schemas(agent)``.

    Args:
        registry: the registry whose tools are offered.
        agent: whose view of the registry (its scope's tools and restrictions); ``None`` for the
            global tools.
        strict: offer strict-mode schemas (see :func:`tool_params`).

    Example::

        tools = OpenAITools(registry, strict=True)
        response = await client.responses.create(model=..., input=items, tools=tools.responses_params())
        calls = tools.responses_calls(response)  # [] when the model answered
        batch = await run_tool_calls(registry, calls, signal=signal)
        items += tools.responses_messages(calls, batch)
    """

    __slots__ = ("_agent", "_registry", "_sent", "_strict")

    def __init__(
        self, registry: ToolRegistry, *, agent: object = None, strict: bool = False
    ) -> None:
        """Offer ``registry``'s tools visible to ``agent``.

        Raises:
            TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`, or ``strict``
                is not a ``bool``.
        """
        if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
        if type(strict) is not bool:
            raise TypeError(f"strict must be a bool, not {type(strict).__name__}")
        self._registry = registry
        self._agent = agent
        self._strict = strict
        self._sent: list[ToolSchema] | None = None

    @property
    def strict(self) -> bool:
        """Whether strict-mode schemas are offered."""
        return self._strict

    def _schemas(self) -> list[ToolSchema]:
        self._sent = schemas = self._registry.schemas(self._agent)
        return schemas

    def _strict_schemas(self) -> list[ToolSchema] | None:
        if not self._strict:
            return None
        # before any params(): what params() would send now
        return self._registry.schemas(self._agent) if self._sent is None else self._sent

    def params(self) -> list[JsonDict]:
        """The Chat Completions ``tools=[...]`` for the tools visible now (kept as sent).

        Raises:
            ValueError: as :func:`tool_params` in strict mode.
        """
        return tool_params(self._schemas(), strict=self._strict)

    def responses_params(self) -> list[JsonDict]:
        """The Responses API ``tools=[...]`` for the tools visible now (kept as sent).

        Raises:
            ValueError: as :func:`responses_tool_params` in strict mode.
        """
        return responses_tool_params(self._schemas(), strict=self._strict)

    def calls(self, message: Mapping[str, object] | SupportsModelDump) -> list[ToolCallRequest]:
        """The tool calls of a Chat Completions assistant message (``[]`` for an answer).

        Raises:
            TypeError: as :func:`tool_calls`.
            ValueError: as :func:`tool_calls`.
        """
        return tool_calls(message, strict_schemas=self._strict_schemas())

    def responses_calls(
        self, response: Mapping[str, object] | SupportsModelDump | Sequence[object]
    ) -> list[ToolCallRequest]:
        """The ``function_call`` items of a Responses API output (``[]`` for an answer).

        Raises:
            TypeError: as :func:`responses_tool_calls`.
            ValueError: as :func:`responses_tool_calls`.
        """
        return responses_tool_calls(response, strict_schemas=self._strict_schemas())

    def messages(
        self,
        calls: Sequence[ToolCallRequest],
        batch: ToolBatch,
        *,
        media: MediaMode = "user_message",
    ) -> list[JsonDict]:
        """The Chat Completions messages for ``batch`` (see :func:`tool_messages`)."""
        return tool_messages(calls, batch, media=media)

    def responses_messages(
        self, calls: Sequence[ToolCallRequest], batch: ToolBatch
    ) -> list[JsonDict]:
        """The Responses API input items for ``batch`` (see :func:`responses_tool_messages`)."""
        return responses_tool_messages(calls, batch)
