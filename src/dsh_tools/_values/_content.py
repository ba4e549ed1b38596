"""Content blocks, message sources and hook contexts: the values a tool result is made of.

All are frozen attrs value objects. Their wire shape (camelCase keys, a ``type`` or ``kind``
tag, absent optionals omitted) is owned by :data:`dsh_tools.converter`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeAlias, cast

import attrs

from ._json import JsonValue
from ._media import AudioBlock, FileBlock, ImageBlock


def unchecked_meta(value: object) -> JsonValue:
    """Accept any ``meta`` as given (plain ``dict`` / ``list`` data included); the pipeline
    checks and freezes it once, at final materialization.
    """
    return cast(JsonValue, value)


def content_blocks(
    value: Iterable[ContentBlock], name: str = "content"
) -> tuple[ContentBlock, ...]:
    """The converter of every field that holds content blocks: any sequence of them, as a
    tuple. A ``str`` is refused (naming the field) rather than split into characters.
    """
    if isinstance(value, str):
        raise TypeError(
            f"{name} must be a sequence of content blocks, not str; "
            "for text use [TextBlock(text=...)]"
        )
    return tuple(value)


__all__ = [
    "ContentBlock",
    "HookContext",
    "MessageSource",
    "PluginSource",
    "ReasoningBlock",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "UserSource",
    "content_blocks",
    "text_block",
    "unchecked_meta",
]


@attrs.frozen(kw_only=True)
class TextBlock:
    """Plain text (wire: ``{"type": "text", "text": ...}``)."""

    text: str


_set_text: Final = TextBlock.__dict__["text"].__set__


def text_block(text: str) -> TextBlock:
    """``TextBlock(text=text)`` without attrs' ``__init__``, for the pipeline's hot path
    (internal; ``TextBlock`` checks nothing, so the result is the same).
    """
    block = object.__new__(TextBlock)
    _set_text(block, text)
    return block


@attrs.frozen(kw_only=True)
class ReasoningBlock:
    """Model reasoning text (wire: ``{"type": "reasoning", "text": ...}``)."""

    text: str


@attrs.frozen(kw_only=True)
class ToolCallBlock:
    """A tool call as the model emitted it; ``arguments`` is the raw JSON text
    (wire: ``{"type": "tool-call", "id", "name", "arguments"}``).
    """

    id: str
    name: str
    arguments: str


@attrs.frozen(kw_only=True)
class ToolResultBlock:
    """The result of one tool call (wire: ``{"type": "tool-result", "toolCallId", "content",
    "isError"?}``).
    """

    tool_call_id: str
    content: tuple[ContentBlock, ...] = attrs.field(converter=content_blocks)
    is_error: bool | None = None


ContentBlock: TypeAlias = (
    TextBlock
    | ReasoningBlock
    | ToolCallBlock
    | ToolResultBlock
    | ImageBlock
    | AudioBlock
    | FileBlock
)
"""The content-block union. New block types join through :data:`dsh_tools.converter`
(``register_content_block``), keyed by a new ``type`` tag."""


@attrs.frozen(kw_only=True)
class UserSource:
    """The user wrote this context (wire: ``{"kind": "user"}``)."""


@attrs.frozen(kw_only=True)
class PluginSource:
    """A plugin or hook produced this context (wire: ``{"kind": "plugin", "plugin": ...}``)."""

    plugin: str


MessageSource: TypeAlias = UserSource | PluginSource
"""Who produced a :class:`HookContext`."""


@attrs.frozen(kw_only=True)
class HookContext:
    """A context message for the model, attached to a tool result.

    ``content`` reaches the model verbatim as a user-role message; ``meta`` is persisted with
    the session but hidden from the model. ``meta`` is not checked on construction: the
    pipeline checks it once, when the result carrying the context is materialized (or when
    :func:`~dsh_tools.inject_context` accepts it), and stores a frozen copy.

    ``meta=None`` means "no meta": JSON ``null`` cannot be carried as a meta value (a
    deviation from the original, where ``meta: null`` and an absent ``meta`` differ).
    """

    content: tuple[ContentBlock, ...] = attrs.field(converter=content_blocks)
    source: MessageSource
    meta: JsonValue = attrs.field(default=None, converter=unchecked_meta)
