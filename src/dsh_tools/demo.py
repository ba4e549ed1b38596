"""The scripted demo behind ``dsh-tools demo``: one agent turn through the real pipeline.

No model, no network, no API key: the "model" is a script of two assistant messages whose tool
calls run through a real :class:`~dsh_tools.ToolRegistry` (with a guard, the timeout policy and
an ``execute`` wrapper that records the timeline) and the real scheduler. Tools work on an
in-memory workspace and sleep to stand for I/O, on trio's virtual clock by default, so the
timeline is the same on every machine.

Batch 1 shows a rolling parallel pool (three reads and a slow fetch with a cap of 3), an
exclusive write as a barrier, a read of what it wrote, a call with invalid arguments, a call
denied by a guard, and a fetch that times out. Batch 2 is interrupted by the user mid-way: the
call in flight drains to ``ABORTED`` and the calls that never started get
``ABORTED_BEFORE_DISPATCH``.

Every tool presents itself (:class:`~dsh_tools.ToolPresenter` turns the session's events into
the cards a UI would draw): reads and searches as generic cards with their file locations, the
write as a diff whose result hunks :mod:`difflib` computes from the before and after text, and
``run_command`` (a tiny shell over the workspace) as a terminal card with its exit code.

With ``ask=True`` (``dsh-tools demo --ask``) the turn runs inside :func:`session_turn` with a
:class:`UserApproval` service: writes and commands need the user's ``y`` on the terminal
(:func:`console_answerer`), and a third batch runs two commands.
"""

from __future__ import annotations

import difflib
import functools
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Final, TextIO

import attrs
import trio
import trio.testing

from ._pipeline._answerers import ApprovalAnswerer
from ._pipeline._approval import UserApproval, session_turn
from ._pipeline._define import define_tool
from ._pipeline._hooks import PreExecuteNext
from ._pipeline._registry import ToolRegistry
from ._policies._console_answerer import console_answerer
from ._policies._presenter import ToolPresenter
from ._policies._timeline import TimelineRecorder
from ._policies._timeout import install_timeout_policy
from ._scheduling._scheduler import run_tool_calls
from ._sessions._session import (
    JsonlSessionLog,
    SessionEvent,
    SessionLog,
    ToolCallEvent,
    ToolResultEvent,
)
from ._sessions._sqlite import SqliteSessionLog
from ._values._batch import ToolBatch, ToolCallRequest
from ._values._content import HookContext, PluginSource, TextBlock
from ._values._definition import ToolOutput
from ._values._execution import (
    Ask,
    PreToolDecision,
    ToolExecution,
    ToolExecutionResult,
    ToolResult,
    ToolRunContext,
)
from ._values._json import FrozenJsonObject
from ._values._presentation import (
    DiffCallView,
    DiffResultView,
    FileDiff,
    FileLocation,
    GenericCallView,
    TerminalCallView,
    TerminalResultView,
    ToolCallKind,
    ToolCallView,
    ToolResultView,
)
from ._values._printable import printable
from ._values._signal import CancelController

__all__ = [
    "DemoAgent",
    "DemoBatch",
    "build_registry",
    "default_log_path",
    "open_file_log",
    "demo_registry",
    "execution_text",
    "first_line",
    "hunks",
    "main_demo",
    "run_demo",
    "sample_workspace",
]

MAX_PARALLEL: Final = 3
"""The demo's ``max_parallel_tool_calls``: small, so the rolling pool is visible."""

INTERRUPT_AFTER: Final = 1.0
"""Seconds into batch 2 when the "user" presses Esc."""

COLUMNS_PER_SECOND: Final = 20

WORKSPACE_ROOT: Final = "/workspace"
"""Where the demo's in-memory workspace pretends to live (paths on cards are absolute)."""


# --- the workspace and its tools ----------------------------------------------------------


@attrs.define(eq=False)
class Workspace:
    """An in-memory file tree; ``latency`` is how long reading each file takes (seconds)."""

    files: dict[str, str]
    latency: dict[str, float]


def sample_workspace() -> Workspace:
    """Build a fresh copy of the demo's workspace (internal: shared with the CLI and ACP demos)."""
    return Workspace(
        files={
            "README.md": "# demo-app\nA tiny app to show dsh-tools.\n",
            "src/app.py": "def main():\n    # TODO: handle errors\n    print('hello')\n",
            "docs/design.md": "Design notes.\nTODO: write the scheduler page.\n",
            "logs/build.log": "step 1 ok\n" * 200,
        },
        latency={"README.md": 0.4, "src/app.py": 0.8, "logs/build.log": 2.5},
    )


@attrs.frozen(kw_only=True)
class ReadFileArgs:
    path: str = attrs.field(metadata={"description": "path inside the workspace"})


@attrs.frozen(kw_only=True)
class WriteFileArgs:
    path: str = attrs.field(metadata={"description": "path inside the workspace"})
    content: str = attrs.field(metadata={"description": "the new text of the file"})


@attrs.frozen(kw_only=True)
class SearchArgs:
    query: str = attrs.field(metadata={"description": "text to look for"})


@attrs.frozen(kw_only=True)
class FetchArgs:
    url: str = attrs.field(metadata={"description": "the URL to fetch"})


@attrs.frozen(kw_only=True)
class RunCommandArgs:
    command: str = attrs.field(
        metadata={"description": "a command line: ls, cat PATH, wc -l PATH or grep TEXT"}
    )


def _absolute(path: str) -> str:
    return f"{WORKSPACE_ROOT}/{path}"


def hunks(path: str, old: str | None, new: str, *, context: int = 1) -> tuple[FileDiff, ...]:
    """The changed regions of ``path`` as diffs, each with ``context`` unchanged lines around
    it (computed by :class:`difflib.SequenceMatcher`); a new file is one whole-file diff.
    """
    if old is None:
        return (FileDiff(path=path, old_text=None, new_text=new),)
    before = old.splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return tuple(
        FileDiff(
            path=path,
            old_text="".join(before[group[0][1] : group[-1][2]]),
            new_text="".join(after[group[0][3] : group[-1][4]]),
        )
        for group in matcher.get_grouped_opcodes(context)
    )


# --- presenters (pure functions of the arguments and the result) ---------------------------


def _result_text(result: ToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextBlock))


def _present_read(args: ReadFileArgs) -> ToolCallView:
    return GenericCallView(
        title=f"Read {args.path}",
        kind=ToolCallKind.READ,
        locations=[FileLocation(path=_absolute(args.path))],
    )


def _present_search(args: SearchArgs) -> ToolCallView:
    return GenericCallView(title=f"Search for {args.query!r}", kind=ToolCallKind.SEARCH)


def _present_fetch(args: FetchArgs) -> ToolCallView:
    return GenericCallView(title=f"Fetch {args.url}", kind=ToolCallKind.FETCH)


def _present_write(args: WriteFileArgs) -> ToolCallView:
    path = _absolute(args.path)
    return DiffCallView(
        title=f"Write {args.path}",
        diffs=[FileDiff(path=path, old_text=None, new_text=args.content)],
        locations=[FileLocation(path=path)],
    )


def _present_write_result(args: WriteFileArgs, result: ToolResult) -> ToolResultView | None:
    meta = result.meta
    if result.is_error or not isinstance(meta, FrozenJsonObject):
        return None
    old = meta.get("oldText")
    new = meta.get("newText")
    if not isinstance(new, str) or not (old is None or isinstance(old, str)):
        return None
    return DiffResultView(title=f"Wrote {args.path}", diffs=hunks(_absolute(args.path), old, new))


def _present_command(args: RunCommandArgs) -> ToolCallView:
    return TerminalCallView(title=args.command, cwd=WORKSPACE_ROOT)


def _present_command_result(args: RunCommandArgs, result: ToolResult) -> ToolResultView | None:
    meta = result.meta
    code = meta.get("exitCode") if isinstance(meta, FrozenJsonObject) else None
    if type(code) is not int:
        return None
    return TerminalResultView(output=_result_text(result), exit_code=code)


def _always(_args: object) -> bool:
    return True


def _deny_writes_outside(execution: ToolExecution) -> str | None:
    args = execution.arguments
    if execution.name != "write_file" or not isinstance(args, FrozenJsonObject):
        return None
    path = args.get("path")
    if isinstance(path, str) and (path.startswith("/") or ".." in path.split("/")):
        return f"write_file may only write inside the workspace, not {path}"
    return None


def _shell(workspace: Workspace, command: str) -> tuple[str, int]:
    """A very small shell over the workspace: (output, exit code)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"sh: {exc}\n", 2
    files = workspace.files
    match words:
        case ["ls"]:
            return "".join(f"{path}\n" for path in sorted(files)), 0
        case ["cat", path] if path in files:
            return files[path], 0
        case ["wc", "-l", path] if path in files:
            return f"{len(files[path].splitlines())} {path}\n", 0
        case ["cat" | "wc", *_]:
            return f"{words[0]}: {words[-1]}: No such file or directory\n", 1
        case ["grep", text]:
            hits = [
                f"{path}:{line}\n"
                for path, body in sorted(files.items())
                for line in body.splitlines()
                if text in line
            ]
            return "".join(hits), 0 if hits else 1
        case [name, *_]:
            return f"sh: {name}: command not found\n", 127
        case _:
            return "", 0


_ASKS: Final = {"write_file": "changes the workspace", "run_command": "runs a command"}


async def _ask_before_changes(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
    reason = _ASKS.get(execution.name)
    if reason is not None:
        return Ask(reason=reason)  # noqa: ASYNC910 - the scheduler checkpoints around hooks
    return await next()


def demo_registry() -> ToolRegistry:
    """The demo's registry over a fresh sample workspace: what draws the demo's own cards when
    its log is replayed (``dsh-tools replay --registry dsh_tools.demo:demo_registry LOG``).
    """
    return build_registry(sample_workspace())


def build_registry(workspace: Workspace, *, approval: UserApproval | None = None) -> ToolRegistry:
    """The demo's registry: five tools over ``workspace`` (``search`` reports its progress), a
    guard, the timeout policy (installed from the start; installing it again is a no-op).

    With ``approval``, writes and commands ask the user first (a ``pre_execute`` ``Ask``).
    """
    registry = ToolRegistry(approval=approval)
    if approval is not None:
        registry.hooks.pre_execute.add(_ask_before_changes)

    async def read_file(args: ReadFileArgs, context: ToolRunContext) -> str:
        await trio.sleep(workspace.latency.get(args.path, 0.2))
        try:
            return workspace.files[args.path]
        except KeyError:
            raise FileNotFoundError(f"no such file: {args.path}") from None

    async def write_file(args: WriteFileArgs, context: ToolRunContext) -> ToolOutput:
        await trio.sleep(0.3)
        old = workspace.files.get(args.path)
        workspace.files[args.path] = args.content
        context.defer_context(
            HookContext(
                content=[TextBlock(text=f"{args.path} changed: re-read it before editing it.")],
                source=PluginSource(plugin="demo-workspace"),
            )
        )
        return ToolOutput(
            content=[TextBlock(text=f"wrote {len(args.content)} characters to {args.path}")],
            meta={"oldText": old, "newText": args.content},
        )

    async def search(args: SearchArgs, context: ToolRunContext) -> str:
        # a slow scan, one file at a time, that says how far it got (tool/progress events)
        files = sorted(workspace.files.items())
        hits: list[str] = []
        for done, (path, text) in enumerate(files, start=1):
            await trio.sleep(0.6 / len(files))
            hits.extend(
                f"{path}:{number}: {line.strip()}"
                for number, line in enumerate(text.splitlines(), start=1)
                if args.query in line
            )
            context.report_progress(message=f"searched {path}", progress=done, total=len(files))
        await trio.lowlevel.checkpoint()  # an empty workspace is searched at once
        return "\n".join(hits) if hits else f"no match for {args.query!r}"

    async def fetch_url(args: FetchArgs, context: ToolRunContext) -> str:
        # stands for a server that answers after 5 s; the 1 s timeout cancels it first
        await trio.sleep(5)
        return f"<html>{args.url}</html>"

    async def run_command(args: RunCommandArgs, context: ToolRunContext) -> ToolOutput:
        await trio.sleep(0.1)
        output, code = _shell(workspace, args.command)
        return ToolOutput(content=[TextBlock(text=output)], meta={"exitCode": code})

    registry.register(
        define_tool(
            name="read_file",
            description="Read a file of the workspace.",
            parameters=ReadFileArgs,
            execute=read_file,
            is_concurrency_safe=_always,
            present_call=_present_read,
        )
    )
    registry.register(
        define_tool(
            name="write_file",
            description="Replace the text of a file of the workspace.",
            parameters=WriteFileArgs,
            execute=write_file,
            present_call=_present_write,
            present_result=_present_write_result,
        )
    )
    registry.register(
        define_tool(
            name="search",
            description="Find the lines of the workspace that contain a text.",
            parameters=SearchArgs,
            execute=search,
            is_concurrency_safe=_always,
            present_call=_present_search,
        )
    )
    registry.register(
        define_tool(
            name="fetch_url",
            description="Fetch a web page.",
            parameters=FetchArgs,
            execute=fetch_url,
            timeout=1.0,
            is_concurrency_safe=_always,
            present_call=_present_fetch,
        )
    )
    registry.register(
        define_tool(
            name="run_command",
            description="Run a command in the workspace: ls, cat PATH, wc -l PATH, grep TEXT.",
            parameters=RunCommandArgs,
            execute=run_command,
            present_call=_present_command,
            present_result=_present_command_result,
        )
    )
    registry.guard(_deny_writes_outside)
    install_timeout_policy(registry)
    return registry


# --- the script ---------------------------------------------------------------------------

BATCH_1: Final = (
    ToolCallRequest(call_id="c1", name="read_file", arguments='{"path": "README.md"}'),
    ToolCallRequest(call_id="c2", name="read_file", arguments='{"path": "src/app.py"}'),
    ToolCallRequest(call_id="c3", name="search", arguments='{"query": "TODO"}'),
    ToolCallRequest(call_id="c4", name="fetch_url", arguments='{"url": "https://example.com/"}'),
    ToolCallRequest(
        call_id="c5",
        name="write_file",
        arguments='{"path": "NOTES.md", "content": "TODO: error handling in src/app.py"}',
    ),
    ToolCallRequest(call_id="c6", name="read_file", arguments='{"path": "NOTES.md"}'),
    ToolCallRequest(call_id="c7", name="read_file", arguments='{"path": 42}'),
    ToolCallRequest(
        call_id="c8", name="write_file", arguments='{"path": "/etc/passwd", "content": "x"}'
    ),
)

BATCH_2: Final = (
    ToolCallRequest(call_id="d1", name="search", arguments='{"query": "step 1"}'),
    ToolCallRequest(call_id="d2", name="read_file", arguments='{"path": "logs/build.log"}'),
    ToolCallRequest(
        call_id="d3", name="write_file", arguments='{"path": "src/app.py", "content": ""}'
    ),
    ToolCallRequest(call_id="d4", name="read_file", arguments='{"path": "README.md"}'),
)


BATCH_3: Final = (
    ToolCallRequest(call_id="e1", name="run_command", arguments='{"command": "grep TODO"}'),
    ToolCallRequest(
        call_id="e2",
        name="write_file",
        arguments=json.dumps(
            {
                "path": "src/app.py",
                "content": "def main():\n    try:\n        print('hello')\n"
                "    except OSError as exc:\n        print(exc)\n",
            }
        ),
    ),
    ToolCallRequest(call_id="e3", name="run_command", arguments='{"command": "wc -l src/app.py"}'),
)
"""Only with ``ask=True``: a command, an edit of an existing file, a command; each asked for."""


@attrs.frozen(kw_only=True)
class DemoBatch:
    """One batch of the demo: its calls, what came back, and when each body ran."""

    title: str
    calls: tuple[ToolCallRequest, ...]
    batch: ToolBatch
    duration: float
    spans: dict[str, tuple[float, float]]
    """Per call id, when its ``execute`` chain (wrappers + body) started and ended, relative
    to the batch's start. Calls settled before dispatch have no span."""
    views: dict[str, tuple[ToolCallView, ToolResultView]] = attrs.field(
        factory=lambda: dict[str, tuple[ToolCallView, ToolResultView]]()
    )
    """Per call id, the call and result views a UI shows (from the batch's session events)."""


class DemoAgent:
    """The agent the demo's calls belong to (approval routes requests by agent)."""

    def __repr__(self) -> str:
        """A short, stable name for logs."""
        return "<demo agent>"


async def run_demo(
    session: SessionLog,
    *,
    ask: bool = False,
    answerer: ApprovalAnswerer | None = None,
    recorder: TimelineRecorder | None = None,
) -> list[DemoBatch]:
    """Run the scripted turn, appending its events to ``session``.

    Returns the batches with their timelines and views. Sleeps (virtual or real, depending on
    the clock ``trio.run`` was given) for about three seconds of clock time.

    Args:
        session: where the events go.
        ask: run the turn inside :func:`session_turn` with a :class:`UserApproval` service;
            writes and commands ask first, and a third batch runs two commands.
        answerer: who answers (with ``ask``); :func:`console_answerer` by default.
        recorder: records the bodies' timeline (e.g. one with an ``on_change`` callback for a
            live view); a fresh one by default.
    """
    workspace = sample_workspace()
    approval = None
    if ask:
        approval = UserApproval(session)
        approval.answerers.add(answerer if answerer is not None else console_answerer())
    registry = build_registry(workspace, approval=approval)
    presenter = ToolPresenter(registry)
    agent = DemoAgent()
    recorder = TimelineRecorder() if recorder is None else recorder
    recorder.install(registry)

    async def run_batch(
        title: str, calls: tuple[ToolCallRequest, ...], step: int, interrupt_after: float | None
    ) -> DemoBatch:
        recorder.clear()
        first = len(session.events())
        interrupt = CancelController()
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            if interrupt_after is not None:

                async def user_presses_escape() -> None:
                    await trio.sleep(interrupt_after)
                    interrupt.cancel("the user interrupted the turn")

                nursery.start_soon(user_presses_escape)
            batch = await run_tool_calls(
                registry,
                calls,
                signal=interrupt.signal,
                agent=agent,
                max_parallel_tool_calls=MAX_PARALLEL,
                session=session,
                turn=0,
                step=step,
            )
            nursery.cancel_scope.cancel()
        demo = _demo_batch(title, calls, batch, started, recorder)
        return attrs.evolve(demo, views=_views(presenter, session.events()[first:]))

    async def run_all() -> list[DemoBatch]:
        batches = [
            await run_batch("batch 1", BATCH_1, 0, None),
            await run_batch(
                f"batch 2 (the user interrupts at {INTERRUPT_AFTER:g}s)",
                BATCH_2,
                1,
                INTERRUPT_AFTER,
            ),
        ]
        if ask:
            batches.append(await run_batch("batch 3 (each call asked for)", BATCH_3, 2, None))
        return batches

    if not ask:
        return await run_all()
    async with session_turn(session, 0):
        return await run_all()


def _views(
    presenter: ToolPresenter, events: list[SessionEvent]
) -> dict[str, tuple[ToolCallView, ToolResultView]]:
    calls: dict[str, ToolCallView] = {}
    views: dict[str, tuple[ToolCallView, ToolResultView]] = {}
    for event in events:
        if isinstance(event, ToolCallEvent):
            calls[event.call_id] = presenter.present_call(event)
        elif isinstance(event, ToolResultEvent):
            views[event.call_id] = (calls[event.call_id], presenter.present_result(event))
    return views


def _demo_batch(
    title: str,
    calls: tuple[ToolCallRequest, ...],
    batch: ToolBatch,
    started: float,
    recorder: TimelineRecorder,
) -> DemoBatch:
    return DemoBatch(
        title=title,
        calls=calls,
        batch=batch,
        duration=trio.current_time() - started,
        spans={
            span.call_id: (span.started - started, span.finished - started)
            for span in recorder.spans
            if span.finished is not None
        },
    )


# --- rendering ----------------------------------------------------------------------------


def outcome(result: ToolExecutionResult, dispatched: bool) -> str:
    """A short label for a result: ``ok``, its error code, ``denied`` (refused before
    dispatch with no code) or ``error``.
    """
    if not result.is_error:
        return "ok"
    if result.error is not None:
        return result.error.code
    return "error" if dispatched else "denied"


def execution_text(result: ToolExecutionResult) -> str:
    """Join the text blocks of ``result`` (internal: shared with the live demo)."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextBlock))


def first_line(text: str, width: int = 72) -> str:
    """Shorten ``text`` to its first line, at most ``width`` characters (internal)."""
    line = text.splitlines()[0] if text else ""
    more = len(text.splitlines()) > 1 or len(line) > width
    return line[:width] + (" ..." if more else "")


def _line(text: str) -> str:
    # tool text (ids, names, results, contexts) is shown on one line, never interpreted
    return printable(text, multiline=False)


def render_batch(demo: DemoBatch) -> str:
    """The ASCII timeline of one batch, then the results the model receives.

    Text that came from a tool or the model is shown with its control characters visible.
    """
    end = max((b for _a, b in demo.spans.values()), default=0.0)
    width = max(round(end * COLUMNS_PER_SECOND) + 1, COLUMNS_PER_SECOND)
    lines = [
        f"== {demo.title}: {len(demo.calls)} tool calls, max_parallel_tool_calls={MAX_PARALLEL}, "
        f"done after {demo.duration:.2f}s =="
    ]
    axis = [" "] * (width + 1)
    for tick in range(0, width + 1, COLUMNS_PER_SECOND // 2):
        label = f"{tick / COLUMNS_PER_SECOND:g}s"
        axis[tick : tick + len(label)] = list(label)
    names = max((len(_line(call.name)) for call in demo.calls), default=0)
    tool = max(names, 10)
    lines.append(f"  {'call':<4} {'tool':<{tool}} |{''.join(axis).rstrip()}")
    for call, result in zip(demo.calls, demo.batch.results, strict=True):
        span = demo.spans.get(call.call_id)
        label = outcome(result, span is not None)
        if span is None:
            bar = " " * width
            when = "not dispatched"
        else:
            start = round(span[0] * COLUMNS_PER_SECOND)
            stop = max(round(span[1] * COLUMNS_PER_SECOND), start + 1)
            bar = " " * start + "=" * (stop - start) + " " * max(width - stop, 0)
            when = f"{span[0]:.2f}s - {span[1]:.2f}s"
        lines.append(
            f"  {_line(call.call_id):<4} {_line(call.name):<{tool}} |{bar}| {when:<16} {label}"
        )
    lines.append("")
    lines.append("  what the model receives:")
    for call, result in zip(demo.calls, demo.batch.results, strict=True):
        label = outcome(result, call.call_id in demo.spans)
        text = _line(first_line(execution_text(result)))
        lines.append(f"  {_line(call.call_id):<4} {_line(label):<24} {text}")
    for context in demo.batch.contexts:
        text = " ".join(b.text for b in context.content if isinstance(b, TextBlock))
        source = str(getattr(context.source, "plugin", "user"))
        lines.append(f"  context from {_line(source)}: {_line(text)}")
    if demo.views:
        lines.append("")
        lines.append("  what a UI shows (call card -> result card):")
        for call in demo.calls:
            views = demo.views.get(call.call_id)
            if views is not None:
                lines.append(
                    f"  {_line(call.call_id):<4} {_line(describe_call_view(views[0]))} -> "
                    f"{_line(describe_result_view(views[1]))}"
                )
    return "\n".join(lines)


def describe_call_view(view: ToolCallView) -> str:
    """One line for a call card."""
    if isinstance(view, TerminalCallView):
        return f"terminal $ {view.title}" + ("" if view.cwd is None else f" (in {view.cwd})")
    if isinstance(view, DiffCallView):
        return f"diff [{view.title}]"
    where = "" if not view.locations else " @ " + ", ".join(loc.path for loc in view.locations)
    return f"{view.kind or 'other'} [{view.title}]{where}"


def describe_result_view(view: ToolResultView) -> str:
    """One line for a result card."""
    if isinstance(view, TerminalResultView):
        status = f"exit {view.exit_code}" if view.signal is None else f"signal {view.signal}"
        return f"terminal {status}, {len((view.output or '').splitlines())} lines of output"
    if isinstance(view, DiffResultView):
        changed = sum(len((diff.new_text or "").splitlines()) for diff in view.diffs)
        return f"diff: {len(view.diffs)} hunk(s), {changed} new line(s)"
    text = " ".join(b.text for b in view.content or () if isinstance(b, TextBlock))
    return f"generic: {first_line(text, 48)}"


def default_log_path() -> Path:
    """A fresh path in the temporary folder for the demo's session log (a SQLite file)."""
    folder = tempfile.mkdtemp(prefix="dsh-tools-demo-")
    return Path(folder) / "session.db"


def open_file_log(path: Path) -> JsonlSessionLog | SqliteSessionLog:
    """The session log at ``path``: JSON Lines for a ``.jsonl`` file, else SQLite (the
    embedded default), session ``"default"``.
    """
    if path.suffix == ".jsonl":
        return JsonlSessionLog(path)
    return SqliteSessionLog(path)


def main_demo(
    *, log: Path | None, real_time: bool, out: TextIO | None = None, ask: bool = False
) -> int:
    """Run the demo and print it; return the process exit code.

    With ``ask``, writes and commands ask on the terminal first (``y`` allows one call).
    """
    stream = out if out is not None else sys.stdout
    path = log if log is not None else default_log_path()
    clock = None if real_time else trio.testing.MockClock(autojump_threshold=0)
    print(
        "dsh-tools demo: a scripted agent turn through the registry, pipeline, timeout policy "
        f"and scheduler ({'real time' if real_time else 'virtual time'})",
        file=stream,
        flush=True,
    )
    with open_file_log(path) as session:
        first_seq = len(session.events())
        batches = trio.run(functools.partial(run_demo, session, ask=ask), clock=clock)
        written = len(session.events()) - first_seq
    for demo in batches:
        print("", file=stream)
        print(render_batch(demo), file=stream)
    print("", file=stream)
    print(f"session log ({written} events): {path}", file=stream)
    return 0
