"""A hostile corpus of session logs: every text a log can carry, filled with what attacks a
terminal or a markup parser.

A log file is input like any other: it may come from another machine, an old version, or an
attacker. Each text below goes into every string field of every event kind, so a reader or a
viewer that shows one field without care is caught.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from dsh_tools import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalOutcome,
    ContextMessageEvent,
    JsonlSessionLog,
    PluginSource,
    SessionEvent,
    TextBlock,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)

HOSTILE_TEXTS: Final = {
    "markup-close": "[/bold]",
    "markup": "[red]red?[/red] [link=https://example.invalid]click[/link] [/]",
    "retitle": "\x1b]0;PWNED\x07",
    "clear-screen": "\x1b[2J\x1b[H",
    "clipboard": "\x1b]52;c;cHduZWQ=\x07",
    "one-byte-csi": "\x9b31mred",
    "device-control": "\x1bP+q544e\x1b\\",
    "carriage-return": "shown\rHIDDEN",
    "bidi-override": "report\u202etxt.exe",
    "lone-surrogates": "\ud800 and \udcff",
}
"""Texts that must reach a screen as text: each name is one attack."""

ESCAPES: Final = ("\x1b", "\x9b", "\x07", "\r", "\u202e", "\ud800")
"""Characters from the corpus that no viewer may pass to a terminal as they are."""


def hostile_events(text: str, *, tag: str = "") -> list[SessionEvent]:
    """One turn whose every string field (ids, names, arguments, results, error codes,
    contexts, approvals, surface ops) holds ``text``."""
    call_id = f"{tag}{text}"
    # JSON values (meta, trigger) never hold lone surrogates: the boundary refuses them
    data = None if _has_surrogate(text) else {"text": text}
    return [
        TurnStartEvent(turn=0, trigger=data),
        ApprovalAskedEvent(id=f"a{tag}", tool_name=text, call_id=call_id, reason=text),
        ApprovalDecidedEvent(id=f"a{tag}", outcome=ApprovalOutcome.ALLOWED_ONCE),
        ToolCallEvent(turn=0, step=0, call_id=call_id, name=text, arguments=text),
        ToolResultEvent(
            turn=0,
            step=0,
            call_id=call_id,
            content=(TextBlock(text=f"{text}\n{text}"),),
            is_error=True,
            error=ToolErrorInfo(name=text, code=text),
        ),
        ToolCallEvent(
            turn=0, step=0, call_id=f"{call_id}-2", name=text, arguments=f'{{"x":"{text}"}}'
        ),
        ToolResultEvent(
            turn=0,
            step=0,
            call_id=f"{call_id}-2",
            content=(TextBlock(text=text),),
            is_error=False,
            meta=data,
        ),
        ToolResultEvent(
            turn=0,
            step=0,
            call_id=call_id,
            content=(TextBlock(text=text),),
            is_error=False,
            surface_op=text,
        ),
        ContextMessageEvent(content=(TextBlock(text=text),), source=PluginSource(plugin=text)),
        TurnEndEvent(turn=0, kind=text),
    ]


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def all_hostile_events() -> list[SessionEvent]:
    """:func:`hostile_events` for every text of the corpus, one after the other."""
    return [
        event
        for index, text in enumerate(HOSTILE_TEXTS.values())
        for event in hostile_events(text, tag=f"{index}:")
    ]


def write_log(path: Path, events: list[SessionEvent]) -> Path:
    """``events`` as a JSON Lines session log at ``path``."""
    with JsonlSessionLog(path) as log:
        for event in events:
            log.append(event)
    return path
