"""Render intents: how a UI may show a pending call and its result.

A tool's ``present_call(args)`` returns a call view, ``present_result(args, result)`` a result
view; both are pure and may return ``None`` to fall back to a generic presentation. The wire
shape tags views with ``card`` (``generic`` / ``terminal`` / ``diff``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from typing import Final, TypeAlias

import attrs

from dsh_tools._errors import JsonSnapshotError

from ._content import ContentBlock
from ._json import JsonValue, snapshot_json
from ._printable import printable

__all__ = [
    "DiffCallView",
    "DiffResultView",
    "FileDiff",
    "FileLocation",
    "GenericCallView",
    "GenericResultView",
    "TerminalCallView",
    "TerminalResultView",
    "ToolCallKind",
    "ToolCallView",
    "ToolResultView",
    "call_view_of",
    "generic_call_view",
    "unified_diff_lines",
]

logger: Final = logging.getLogger("dsh_tools")


def _optional_blocks(value: Iterable[ContentBlock] | None) -> tuple[ContentBlock, ...] | None:
    return None if value is None else tuple(value)


def _optional_locations(
    value: Iterable[FileLocation] | None,
) -> tuple[FileLocation, ...] | None:
    return None if value is None else tuple(value)


class ToolCallKind(enum.StrEnum):
    """What kind of thing a call does (drives icons and grouping in UIs)."""

    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    SEARCH = "search"
    EXECUTE = "execute"
    FETCH = "fetch"
    OTHER = "other"


def _positive_line(_instance: object, _attribute: object, value: int | None) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"line must be a 1-based positive int, not {value!r}")


@attrs.frozen(kw_only=True)
class FileLocation:
    """A file (and optionally a 1-based line) a call touches."""

    path: str
    line: int | None = attrs.field(default=None, validator=_positive_line)


@attrs.frozen(kw_only=True)
class FileDiff:
    """A change to one file; ``old_text=None`` means a new file (or no prior content)."""

    path: str
    old_text: str | None
    new_text: str


@attrs.frozen(kw_only=True)
class GenericCallView:
    """A generic pending-call card (wire ``card: "generic"``)."""

    title: str
    kind: ToolCallKind | None = None
    raw_input: JsonValue = attrs.field(default=None, converter=snapshot_json)
    content: tuple[ContentBlock, ...] | None = attrs.field(default=None, converter=_optional_blocks)
    locations: tuple[FileLocation, ...] | None = attrs.field(
        default=None, converter=_optional_locations
    )


@attrs.frozen(kw_only=True)
class TerminalCallView:
    """A shell command about to run (wire ``card: "terminal"``); ``title`` is the command."""

    title: str
    description: str | None = None
    cwd: str | None = None


@attrs.frozen(kw_only=True)
class DiffCallView:
    """A pending edit shown as diffs (wire ``card: "diff"``)."""

    title: str
    diffs: tuple[FileDiff, ...] = attrs.field(converter=tuple)
    locations: tuple[FileLocation, ...] | None = attrs.field(
        default=None, converter=_optional_locations
    )


ToolCallView: TypeAlias = GenericCallView | TerminalCallView | DiffCallView
"""What ``present_call`` returns: a closed union tagged by ``card`` on the wire."""


@attrs.frozen(kw_only=True)
class GenericResultView:
    """A generic result card; without ``content`` the raw result content is shown."""

    title: str | None = None
    content: tuple[ContentBlock, ...] | None = attrs.field(default=None, converter=_optional_blocks)


def _exit_xor_signal(instance: TerminalResultView, _attribute: object, _value: object) -> None:
    if instance.exit_code is not None and instance.signal is not None:
        raise ValueError("TerminalResultView takes exit_code or signal, not both")


@attrs.frozen(kw_only=True)
class TerminalResultView:
    """A finished shell command: its output and either an exit code or a signal name."""

    title: str | None = None
    output: str | None = None
    exit_code: int | None = None
    signal: str | None = attrs.field(default=None, validator=_exit_xor_signal)


@attrs.frozen(kw_only=True)
class DiffResultView:
    """A finished edit shown as diffs."""

    title: str | None = None
    diffs: tuple[FileDiff, ...] = attrs.field(default=(), converter=tuple)


ToolResultView: TypeAlias = GenericResultView | TerminalResultView | DiffResultView
"""What ``present_result`` returns: a closed union tagged by ``card`` on the wire."""


def generic_call_view(name: str, arguments: JsonValue) -> GenericCallView:
    """The fallback card of a call: its tool's name as the title, the arguments as raw input."""
    try:
        return GenericCallView(title=name, kind=ToolCallKind.OTHER, raw_input=arguments)
    except JsonSnapshotError:
        # raw text with a lone surrogate (parse_call_arguments keeps it as text): show it
        # with U+FFFD in its place rather than lose the card
        assert isinstance(arguments, str)
        text = arguments.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return GenericCallView(title=name, kind=ToolCallKind.OTHER, raw_input=text)


_CALL_VIEWS: Final = (GenericCallView, TerminalCallView, DiffCallView)


def call_view_of(
    present_call: Callable[[JsonValue], object] | None, name: str, arguments: JsonValue
) -> tuple[ToolCallView, Exception | None]:
    """The card of a call: what the tool's ``present_call`` returns, else the generic card.

    The one reading of a presenter's answer, for the presenter of events and for approval
    requests. ``None`` (or no presenter) falls back quietly; a raise, or a value that is not a
    call view, falls back and is returned as the error (the caller reports it).
    """
    if present_call is None:
        return generic_call_view(name, arguments), None
    try:
        view = present_call(arguments)  # a plug-in: its annotation says object
    except Exception as exc:
        return generic_call_view(name, arguments), exc
    if view is None:
        return generic_call_view(name, arguments), None
    if not isinstance(view, _CALL_VIEWS):
        error = TypeError(f"present_call returned {type(view).__name__}, not a ToolCallView")
        return generic_call_view(name, arguments), error
    return view, None


def unified_diff_lines(diff: FileDiff) -> list[str]:
    """``diff`` as the lines of a unified diff (``/dev/null`` for a new file), each made
    printable (internal: what the console answerer and ``dsh-tools replay`` show).
    """
    import difflib  # only a view that shows a diff needs it

    old = [] if diff.old_text is None else diff.old_text.splitlines(keepends=True)
    new = diff.new_text.splitlines(keepends=True)
    path = printable(diff.path, multiline=False)
    return [
        printable(line.rstrip("\n"))
        for line in difflib.unified_diff(
            old,
            new,
            fromfile="/dev/null" if diff.old_text is None else path,
            tofile=path,
            lineterm="",
        )
    ]
