r"""``dsh-tools replay LOG``: a session log (JSON Lines or SQLite) shown the way a UI showed it live.

Every ``tool/call`` and ``tool/result`` goes through a :class:`~dsh_tools.ToolPresenter`, so a
call appears as its tool's own card (a terminal, a diff, a read with its file locations) and
its result as the result card; contexts, turns and approval requests appear in log order.
Presenters are pure functions of the events, so a replay shows what the live run showed.

The presenter needs the tools' definitions: the registry named by ``--registry MODULE:NAME``.
Without one, every call gets the presenter's generic card (its tool name and arguments), as do
calls of tools the named registry does not know: a log says nothing about which tools wrote it,
so replay never guesses.

A log is input like any other (it may come from another machine, or an attacker): every text
it holds is shown, never interpreted. Views are built from ``rich`` ``Text`` objects, never from
markup strings, so ``[/bold]`` in a call id or a result prints as itself, and every text passes
through :func:`~dsh_tools._values._printable.printable` first, so control characters (``ESC ]0;``
retitling the terminal, ``ESC [2J`` clearing it, ``ESC ]52;`` writing the clipboard) and lone
surrogates are shown as visible escapes (``\x1b]0;``) and never reach the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text

from dsh_tools import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalPolicyEvent,
    ApprovalRevokedEvent,
    AudioBlock,
    BatchCallEvent,
    BatchEndEvent,
    BatchStartEvent,
    ContextMessageEvent,
    DiffCallView,
    DiffResultView,
    FileBlock,
    FileDiff,
    GenericResultView,
    ImageBlock,
    MessageEvent,
    SessionEvent,
    SqliteSessionLog,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallEvent,
    ToolCallView,
    ToolPresenter,
    ToolProgressEvent,
    ToolRegistry,
    ToolResultEvent,
    ToolResultView,
    TurnEndEvent,
    TurnStartEvent,
    dumps_json,
    progress_text,
    read_session_log,
    thaw_json,
)
from dsh_tools._for_integrations import describe_media, printable, unified_diff_lines
from dsh_tools.cli._loading import load_registry

__all__ = ["main_replay", "render_event"]


_SQLITE_HEADER: Final = b"SQLite format 3\x00"


def _read_log(path: Path, session: str) -> list[SessionEvent]:
    """The events of the log at ``path``: a SQLite file (by its header) or JSON Lines."""
    with path.open("rb") as file:
        header = file.read(len(_SQLITE_HEADER))
    if header == _SQLITE_HEADER:
        return SqliteSessionLog.read(path, session)
    return read_session_log(path)


def _texts(content: Iterable[object] | None) -> str:
    """The text of ``content``, a picture, sound or file as its description
    (``[image/png 640x480, 12 kB]``).
    """
    return "\n".join(
        b.text if isinstance(b, TextBlock) else describe_media(b)
        for b in content or ()
        if isinstance(b, TextBlock | ImageBlock | AudioBlock | FileBlock)
    )


def _line(text: str) -> str:
    """Text from the log, safe to show on one line (a call id, a name, a title), cut to
    :data:`MAX_LINE_CHARS` characters.
    """
    if len(text) > MAX_LINE_CHARS:
        cut = len(text) - MAX_LINE_CHARS
        return f"{printable(text[:MAX_LINE_CHARS], multiline=False)} ... {cut} more characters"
    return printable(text, multiline=False)


MAX_LINES = 12
"""Text from the log longer than this many lines is cut (the log keeps all of it)."""

MAX_LINE_CHARS = 400
"""A shown line longer than this is cut too."""


def _shown(text: str, style: str = "") -> Text:
    """Text from the log as a ``Text`` (never markup), newlines kept, controls made visible,
    cut to :data:`MAX_LINES` lines of :data:`MAX_LINE_CHARS` characters with a count of the
    rest. Only what is shown is escaped and laid out, so a log line of many megabytes costs a
    scan, not a layout of all of it.
    """
    text = text.replace("\r\n", "\n").rstrip("\n")
    lines = text.split("\n", MAX_LINES)
    more_lines = 0
    if len(lines) > MAX_LINES:
        more_lines = lines.pop().count("\n") + 1
    shown = Text(style=style)
    for number, line in enumerate(lines):
        if number:
            shown.append("\n")
        shown.append(printable(line[:MAX_LINE_CHARS]))
        if len(line) > MAX_LINE_CHARS:
            shown.append(f" ... {len(line) - MAX_LINE_CHARS} more characters", "dim")
    if more_lines:
        shown.append(f"\n... {more_lines} more lines", "dim")
    return shown


def _diff(diff: FileDiff) -> Syntax:
    text = "\n".join(unified_diff_lines(diff))
    return Syntax(text, "diff", theme="ansi_dark", background_color="default")


def _call_card(event: ToolCallEvent, view: ToolCallView) -> Panel:
    parts: list[RenderableType] = []
    if isinstance(view, TerminalCallView):
        parts.append(Text.assemble(("$ ", "bold"), (_line(view.title), "bold")))
        if view.description:
            parts.append(_shown(view.description, "dim"))
        if view.cwd:
            parts.append(Text(f"in {_line(view.cwd)}", "dim"))
        kind = "execute"
    elif isinstance(view, DiffCallView):
        parts.extend(_diff(diff) for diff in view.diffs)
        kind = "edit"
    else:
        kind = str(view.kind or "other")
        for location in view.locations or ():
            line = "" if location.line is None else f":{location.line}"
            parts.append(Text(f"@ {_line(location.path)}{line}", "cyan"))
        if view.raw_input is not None:
            raw = dumps_json(thaw_json(view.raw_input))
            parts.append(_shown(raw, "dim"))
        if view.content:
            parts.append(_shown(_texts(view.content)))
    title = Text.assemble((_line(event.call_id), "bold"), f" {_line(kind)}: {_line(view.title)}")
    return Panel(
        Group(*parts) if parts else _shown(f"{event.name} {event.arguments}", "dim"),
        title=title,
        title_align="left",
        border_style="blue",
    )


def _status(event: ToolResultEvent) -> tuple[str, str]:
    if not event.is_error:
        return "ok", "green"
    if event.error is not None:
        return _line(event.error.code), "red"
    return "error", "red"


def _result_card(event: ToolResultEvent, view: ToolResultView) -> Panel:
    status, style = _status(event)
    parts: list[RenderableType] = []
    if isinstance(view, TerminalResultView):
        if view.output:
            parts.append(_shown(view.output))
        if view.exit_code is not None:
            parts.append(Text(f"exit {view.exit_code}", "green" if view.exit_code == 0 else "red"))
        if view.signal is not None:
            parts.append(Text(f"signal {_line(str(view.signal))}", "red"))
    elif isinstance(view, DiffResultView):
        parts.extend(_diff(diff) for diff in view.diffs)
    elif isinstance(view, GenericResultView):  # pyright: ignore[reportUnnecessaryIsInstance]
        parts.append(_shown(_texts(view.content)))
    title = Text.assemble((_line(event.call_id), "bold"), " ", (status, style))
    if view.title:
        title.append(f" {_line(view.title)}")
    return Panel(Group(*parts), title=title, title_align="left", border_style=style)


def render_event(presenter: ToolPresenter, event: SessionEvent) -> RenderableType:
    """One event as the console shows it."""
    if isinstance(event, ToolCallEvent):
        return _call_card(event, presenter.present_call(event))
    if isinstance(event, ToolResultEvent):
        # ``surface_op``: a replacement such as pruning is not a new result
        surface_op: object = getattr(event, "surface_op", None)
        if surface_op not in (None, "append"):
            return Text(
                f"  {_line(event.call_id)}: result replaced ({_line(str(surface_op))})", "dim"
            )
        return _result_card(event, presenter.present_result(event))
    if isinstance(event, ToolProgressEvent):
        return Text.assemble(
            (f"  {_line(event.call_id)} ", "bold"), (_line(progress_text(event)), "yellow")
        )
    if isinstance(event, ContextMessageEvent):
        source = getattr(event.source, "plugin", "user")
        return Text.assemble(
            ("context ", "bold magenta"),
            (f"from {_line(str(source))}: ", "magenta"),
            _shown(_texts(event.content)),
        )
    if isinstance(event, TurnStartEvent):
        return Rule(Text(f"turn {event.turn}"), style="bold")
    if isinstance(event, TurnEndEvent):
        return Rule(Text(f"end of turn {event.turn} ({_line(event.kind)})"), style="dim")
    if isinstance(event, ApprovalAskedEvent):
        reason = f": {_line(event.reason)}" if event.reason else ""
        call = f" ({_line(event.call_id)})" if event.call_id else ""
        return Text.assemble(
            ("? ", "bold yellow"), f"approval asked for {_line(event.tool_name)}{call}{reason}"
        )
    if isinstance(event, ApprovalDecidedEvent):
        style = "green" if event.outcome in ("allowed-once", "allowed-session") else "red"
        by = f" (by {_line(event.answered_by)})" if event.answered_by else ""
        return Text.assemble(("  ", ""), ("approval " + _line(str(event.outcome)) + by, style))
    if isinstance(event, ApprovalRevokedEvent):
        whose = f" of {_line(event.agent)}" if event.agent else ""
        return Text(f"approval grant revoked: {_line(event.tool_name)}{whose}", "yellow")
    if isinstance(event, ApprovalPolicyEvent):
        return Text(f"approval policy: {_line(str(event.policy))}", "yellow")
    if isinstance(event, BatchStartEvent):
        calls = ", ".join(_line(call.call_id) for call in event.calls)
        return Text(f"batch {_line(event.batch_id)}: {calls}", "dim")
    if isinstance(event, BatchCallEvent):
        return Text(f"batch {_line(event.batch_id)}: + {_line(event.call.call_id)}", "dim")
    if isinstance(event, BatchEndEvent):
        return Text(f"end of batch {_line(event.batch_id)} ({_line(event.reason)})", "dim")
    if isinstance(event, MessageEvent):  # pyright: ignore[reportUnnecessaryIsInstance]
        text = dumps_json(event.message)
        if len(text) > 300:
            text = text[:297] + "..."
        return Text.assemble((f"{_line(event.role)}: ", "bold cyan"), _shown(text))
    return Text(_line(repr(event)), "dim")  # an event type added later


def _print_error(text: str) -> None:
    Console(stderr=True).print(text, markup=False, highlight=False)


def main_replay(
    path: Path,
    *,
    registry: str | None = None,
    session: str = "default",
    console: Console | None = None,
    err: Callable[[str], object] | None = None,
) -> int:
    """Show the session log at ``path`` (JSON Lines, or session ``session`` of a SQLite log);
    return the process exit code.
    """
    console = console if console is not None else Console()
    sink = err if err is not None else _print_error

    def report(text: str) -> None:
        sink(printable(text))  # error texts quote the log (a path, a line, a presenter's text)

    try:
        events = _read_log(path, session)
        tools = ToolRegistry() if registry is None else load_registry(registry)
    except (OSError, ValueError, TypeError, LookupError, ImportError, AttributeError) as exc:
        report(f"dsh-tools replay: {exc}")
        return 1
    problems: list[str] = []
    presenter = ToolPresenter(
        tools, on_error=lambda exc, call_id: problems.append(f"{call_id}: {exc}")
    )
    console.print(
        Text.assemble((_line(str(path)), "bold"), f": {len(events)} events"), highlight=False
    )
    for event in events:
        console.print(render_event(presenter, event), highlight=False)
    for problem in problems:
        report(f"presenter error (fell back to a generic card): {problem}")
    return 0
