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
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Final, TextIO

import attrs
import trio
import trio.testing

from ._content import HookContext, PluginSource, TextBlock
from ._define import define_tool
from ._execution import ToolExecution, ToolExecutionResult, ToolRunContext
from ._json import FrozenJsonObject
from ._registry import ToolRegistry
from ._scheduler import ToolBatch, ToolCallRequest, run_tool_calls
from ._session import JsonlSessionLog, SessionLog
from ._signal import CancelController
from ._timeline import TimelineRecorder
from ._timeout import install_timeout_policy

__all__ = ["DemoBatch", "build_registry", "main_demo", "run_demo"]

MAX_PARALLEL: Final = 3
"""The demo's ``max_parallel_tool_calls``: small, so the rolling pool is visible."""

INTERRUPT_AFTER: Final = 1.0
"""Seconds into batch 2 when the "user" presses Esc."""

COLUMNS_PER_SECOND: Final = 20


# --- the workspace and its tools ----------------------------------------------------------


@attrs.define(eq=False)
class Workspace:
    """An in-memory file tree; ``latency`` is how long reading each file takes (seconds)."""

    files: dict[str, str]
    latency: dict[str, float]


def _sample_workspace() -> Workspace:
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


def build_registry(workspace: Workspace) -> ToolRegistry:
    """The demo's registry: four tools over ``workspace``, a guard, the timeout policy."""
    registry = ToolRegistry()

    async def read_file(args: ReadFileArgs, context: ToolRunContext) -> str:
        await trio.sleep(workspace.latency.get(args.path, 0.2))
        try:
            return workspace.files[args.path]
        except KeyError:
            raise FileNotFoundError(f"no such file: {args.path}") from None

    async def write_file(args: WriteFileArgs, context: ToolRunContext) -> str:
        await trio.sleep(0.3)
        workspace.files[args.path] = args.content
        context.defer_context(
            HookContext(
                content=[TextBlock(text=f"{args.path} changed: re-read it before editing it.")],
                source=PluginSource(plugin="demo-workspace"),
            )
        )
        return f"wrote {len(args.content)} characters to {args.path}"

    async def search(args: SearchArgs, context: ToolRunContext) -> str:
        await trio.sleep(0.6)
        hits = [
            f"{path}:{number}: {line.strip()}"
            for path, text in sorted(workspace.files.items())
            for number, line in enumerate(text.splitlines(), start=1)
            if args.query in line
        ]
        return "\n".join(hits) if hits else f"no match for {args.query!r}"

    async def fetch_url(args: FetchArgs, context: ToolRunContext) -> str:
        # stands for a server that answers after 5 s; the 1 s timeout cancels it first
        await trio.sleep(5)
        return f"<html>{args.url}</html>"

    registry.register(
        define_tool(
            name="read_file",
            description="Read a file of the workspace.",
            parameters=ReadFileArgs,
            execute=read_file,
            is_concurrency_safe=_always,
        )
    )
    registry.register(
        define_tool(
            name="write_file",
            description="Replace the text of a file of the workspace.",
            parameters=WriteFileArgs,
            execute=write_file,
        )
    )
    registry.register(
        define_tool(
            name="search",
            description="Find the lines of the workspace that contain a text.",
            parameters=SearchArgs,
            execute=search,
            is_concurrency_safe=_always,
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


async def run_demo(
    session: SessionLog, recorder: TimelineRecorder | None = None
) -> list[DemoBatch]:
    """Run the scripted turn, appending its events to ``session``.

    Returns the two batches with their timelines. Sleeps (virtual or real, depending on the
    clock ``trio.run`` was given) for about three seconds of clock time. ``recorder`` (e.g. one
    with an ``on_change`` callback for a live view) records the bodies' timeline.
    """
    workspace = _sample_workspace()
    registry = build_registry(workspace)
    recorder = TimelineRecorder() if recorder is None else recorder
    recorder.install(registry)

    batches: list[DemoBatch] = []
    started = trio.current_time()
    batch = await run_tool_calls(
        registry,
        BATCH_1,
        signal=CancelController().signal,
        max_parallel_tool_calls=MAX_PARALLEL,
        session=session,
        turn=0,
        step=0,
    )
    batches.append(_demo_batch("batch 1", BATCH_1, batch, started, recorder))

    recorder.clear()
    interrupt = CancelController()
    started = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def user_presses_escape() -> None:
            await trio.sleep(INTERRUPT_AFTER)
            interrupt.cancel("the user interrupted the turn")

        nursery.start_soon(user_presses_escape)
        batch = await run_tool_calls(
            registry,
            BATCH_2,
            signal=interrupt.signal,
            max_parallel_tool_calls=MAX_PARALLEL,
            session=session,
            turn=0,
            step=1,
        )
        nursery.cancel_scope.cancel()
    batches.append(
        _demo_batch(
            f"batch 2 (the user interrupts at {INTERRUPT_AFTER:g}s)",
            BATCH_2,
            batch,
            started,
            recorder,
        )
    )
    return batches


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
    dispatch with no code) or ``error``."""
    if not result.is_error:
        return "ok"
    if result.error is not None:
        return result.error.code
    return "error" if dispatched else "denied"


def _text(result: ToolExecutionResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextBlock))


def _first_line(text: str, width: int = 72) -> str:
    line = text.splitlines()[0] if text else ""
    more = len(text.splitlines()) > 1 or len(line) > width
    return line[:width] + (" ..." if more else "")


def render_batch(demo: DemoBatch) -> str:
    """The ASCII timeline of one batch, then the results the model receives."""
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
    lines.append(f"  {'call':<4} {'tool':<10} |{''.join(axis).rstrip()}")
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
        lines.append(f"  {call.call_id:<4} {call.name:<10} |{bar}| {when:<16} {label}")
    lines.append("")
    lines.append("  what the model receives:")
    for call, result in zip(demo.calls, demo.batch.results, strict=True):
        label = outcome(result, call.call_id in demo.spans)
        lines.append(f"  {call.call_id:<4} {label:<24} {_first_line(_text(result))}")
    for context in demo.batch.contexts:
        text = " ".join(b.text for b in context.content if isinstance(b, TextBlock))
        source = getattr(context.source, "plugin", "user")
        lines.append(f"  context from {source}: {text}")
    return "\n".join(lines)


def _default_log_path() -> Path:
    handle, name = tempfile.mkstemp(prefix="dsh-tools-demo-", suffix=".jsonl")
    os.close(handle)
    return Path(name)


def main_demo(*, log: Path | None, real_time: bool, out: TextIO | None = None) -> int:
    """Run the demo and print it; return the process exit code."""
    stream = out if out is not None else sys.stdout
    path = log if log is not None else _default_log_path()
    session = JsonlSessionLog(path)
    first_seq = len(session.events())
    clock = None if real_time else trio.testing.MockClock(autojump_threshold=0)
    batches = trio.run(run_demo, session, clock=clock)
    print(
        "dsh-tools demo: a scripted agent turn through the registry, pipeline, timeout policy "
        f"and scheduler ({'real time' if real_time else 'virtual time'})",
        file=stream,
    )
    for demo in batches:
        print("", file=stream)
        print(render_batch(demo), file=stream)
    written = len(session.events()) - first_seq
    print("", file=stream)
    print(f"session log ({written} events): {path}", file=stream)
    return 0
