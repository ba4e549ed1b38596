"""Tool definitions: what the registry holds, and the model-facing schema it shows.

A raw :class:`ToolDefinition` validates nothing: its ``execute`` receives the frozen,
unvalidated arguments. ``define_tool`` (in :mod:`dsh_tools._define`) builds one that validates
and types its arguments first.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from ._content import ContentBlock
from ._execution import ToolResult, ToolRunContext
from ._json import FrozenJsonObject, JsonValue, snapshot_json
from ._presentation import ToolCallView, ToolResultView

__all__ = [
    "JsonSchema",
    "ToolBody",
    "ToolDefinition",
    "ToolOutput",
    "ToolReturn",
    "ToolSchema",
]

JsonSchema: TypeAlias = dict[str, Any]
"""A JSON Schema document as plain, mutable JSON data (what provider APIs expect)."""


def _snapshot_optional(value: object) -> JsonValue:
    return None if value is None else snapshot_json(value)


@attrs.frozen(kw_only=True)
class ToolOutput:
    """A body's return value with private ``meta`` (persisted on the result, hidden from the
    model). A body may instead return a sequence of content blocks, or a ``str``."""

    content: tuple[ContentBlock, ...] = attrs.field(converter=tuple)
    meta: JsonValue = attrs.field(default=None, converter=_snapshot_optional)


ToolReturn: TypeAlias = Sequence[ContentBlock] | ToolOutput | str
"""What a tool body may return: content blocks, a :class:`ToolOutput`, or a ``str`` (one
:class:`~dsh_tools.TextBlock`)."""

ToolBody: TypeAlias = Callable[[Any, ToolRunContext], Awaitable[ToolReturn]]
"""A raw body: ``async (arguments, context) -> ToolReturn``."""


@attrs.frozen(kw_only=True)
class ToolSchema:
    """The model-facing part of a tool: name, description and a JSON Schema of its parameters.

    ``parameters`` is a fresh plain ``dict`` each time the registry hands one out.
    """

    name: str
    description: str
    parameters: JsonSchema


def _freeze_parameters(value: Mapping[str, object]) -> FrozenJsonObject:
    if not isinstance(value, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"parameters must be a JSON Schema mapping, not {type(value).__name__}")
    frozen = snapshot_json(value)
    assert isinstance(frozen, FrozenJsonObject)
    return frozen


def _check_timeout(instance: ToolDefinition, _attribute: object, value: float | None) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)  # pyright: ignore[reportUnnecessaryIsInstance]
        or not math.isfinite(value)
        or value <= 0
    ):
        raise TypeError(
            f'tool "{instance.name}" timeout must be a positive finite number of seconds'
        )


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """A registered tool: its schema, its body, and host-only metadata.

    Attributes:
        name: the name the model calls.
        description: what the model reads about the tool.
        parameters: the JSON Schema of the arguments (frozen at construction).
        execute: ``async (arguments, context) -> ToolReturn``. It must observe or forward
            ``context.signal`` and return only once its own work has stopped.
        timeout: cooperative budget in seconds, applied by the timeout policy; never shown to
            the model.
        is_concurrency_safe: ``(arguments) -> bool``; only ``True`` lets a call join a parallel
            pool. Never shown to the model.
        present_call / present_result: pure render-intent presenters for UIs.
    """

    name: str
    description: str
    parameters: FrozenJsonObject = attrs.field(converter=_freeze_parameters)
    execute: ToolBody = attrs.field(repr=False)
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)
    is_concurrency_safe: Callable[[Any], bool] | None = attrs.field(default=None, repr=False)
    present_call: Callable[[Any], ToolCallView | None] | None = attrs.field(
        default=None, repr=False
    )
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = attrs.field(
        default=None, repr=False
    )
