"""``dsh-tools demo --plain`` (and ``--ask``): the scripted turn of :mod:`.demo`, printed as an
ASCII timeline per batch, then the results the model receives and the cards a UI shows.

Text that came from a tool or the model is shown with its control characters visible.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Final, TextIO

import trio
import trio.testing

from dsh_tools import (
    DiffCallView,
    DiffResultView,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallView,
    ToolResultView,
)
from dsh_tools._for_integrations import printable

from .demo import (
    MAX_PARALLEL,
    DemoBatch,
    execution_text,
    first_line,
    open_demo_log,
    outcome,
    run_demo,
)

__all__ = [
    "COLUMNS_PER_SECOND",
    "describe_call_view",
    "describe_result_view",
    "main_demo",
    "render_batch",
]

COLUMNS_PER_SECOND: Final = 20


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


def main_demo(
    *, log: Path | None, real_time: bool, out: TextIO | None = None, ask: bool = False
) -> int:
    """Run the demo and print it; return the process exit code.

    With ``ask``, writes and commands ask on the terminal first (``y`` allows one call).
    """
    stream = out if out is not None else sys.stdout
    clock = None if real_time else trio.testing.MockClock(autojump_threshold=0)
    print(
        "dsh-tools demo: a scripted agent turn through the registry, pipeline, timeout policy "
        f"and scheduler ({'real time' if real_time else 'virtual time'})",
        file=stream,
        flush=True,
    )
    path, session = open_demo_log(log)
    with session:
        first_seq = len(session.events())
        batches = trio.run(functools.partial(run_demo, session, ask=ask), clock=clock)
        written = len(session.events()) - first_seq
    for demo in batches:
        print("", file=stream)
        print(render_batch(demo), file=stream)
    print("", file=stream)
    print(f"session log ({written} events): {path}", file=stream)
    return 0
