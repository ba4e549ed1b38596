"""``dsh-tools demo``: the scripted turn of :mod:`.demo` as a live ``rich`` view.

It runs in real time (about three seconds) and redraws as the registry reports: one panel per
batch with a progress bar, the pool filling and draining (``max_parallel_tool_calls`` slots),
the exclusive call running alone as a barrier, the fetch that times out, and the user's
interrupt in batch 2. Batch 1 arrives as the scripted model streams it: each call starts while
the model still writes the next. The view learns everything through public hooks: a
:class:`~dsh_tools.TimelineRecorder` for the bodies and the session log for the results.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Final

import attrs
import trio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from dsh_tools import (
    BatchCallEvent,
    CancelSignal,
    SessionEvent,
    SessionLog,
    TimelineRecorder,
    TimelineSpan,
    ToolCallEvent,
    ToolCallRequest,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolProgressEvent,
    ToolResultEvent,
    parse_call_arguments,
    progress_text,
)
from dsh_tools._for_integrations import printable

from .demo import (
    BATCH_1,
    BATCH_2,
    INTERRUPT_AFTER,
    MAX_PARALLEL,
    execution_text,
    first_line,
    open_demo_log,
    outcome,
    run_demo,
)
from .demo_tools import build_registry, sample_workspace

__all__ = ["DemoView", "main_live_demo", "model_receives"]

COLUMNS_PER_SECOND: Final = 12
TIMELINE_SECONDS: Final = 3.0

_STYLES: Final = {
    "ok": "green",
    "running": "bold yellow",
    "waiting": "dim",
    "streaming": "dim italic",
    "TOOL_TIMEOUT": "magenta",
    "ABORTED": "bold red",
    "ABORTED_BEFORE_DISPATCH": "red",
    "INVALID_ARGS": "red",
    "denied": "red",
    "error": "red",
}
_LABELS: Final = {
    "TOOL_TIMEOUT": "timed out",
    "ABORTED": "aborted",
    "ABORTED_BEFORE_DISPATCH": "not started",
    "INVALID_ARGS": "bad args",
}


@attrs.define(eq=False)
class _Call:
    request: ToolCallRequest
    parallel: bool
    started: float | None = None  # time.monotonic() when its body's chain started
    finished: float | None = None
    code: str | None = None  # the committed result's label
    progress: str | None = None  # the last tool/progress of the running body, as one line
    arrived: bool = True  # the model has finished writing it (a streamed batch's calls arrive)


@attrs.define(eq=False)
class _Batch:
    title: str
    calls: list[_Call]
    opened: float | None = None  # monotonic time of its first tool/call
    interrupted: bool = False


def _classify(calls: tuple[ToolCallRequest, ...]) -> list[_Call]:
    registry = build_registry(sample_workspace())
    return [
        _Call(
            request=call,
            parallel=registry.execution_mode(
                ToolExecutionInput(
                    call_id=call.call_id,
                    name=call.name,
                    arguments=parse_call_arguments(call.arguments),
                    signal=CancelSignal.never(),
                )
            ).kind
            == "parallel",
        )
        for call in calls
    ]


class DemoView:
    """The live view's state, fed from the trio thread and drawn from rich's refresh thread."""

    def __init__(self, *, streamed: bool = False) -> None:
        """An empty view: no batch, no call (``streamed``: batch 1's calls arrive one by one
        while the scripted model writes them).
        """
        self._lock = threading.Lock()
        first = _classify(BATCH_1)
        for call in first:
            call.arrived = not streamed
        self.batches = [
            _Batch(
                title="batch 1: each call starts while the model still writes the next"
                if streamed
                else "batch 1",
                calls=first,
            ),
            _Batch(
                title=f"batch 2: the user presses Esc at {INTERRUPT_AFTER:g}s",
                calls=_classify(BATCH_2),
            ),
        ]
        self._by_id = {call.request.call_id: (b, call) for b in self.batches for call in b.calls}

    # --- fed by the demo (trio thread) ---------------------------------------------------

    def on_span(self, span: TimelineSpan) -> None:
        """Record a call's body starting or finishing."""
        with self._lock:
            _batch, call = self._by_id[span.call_id]
            if span.finished is None:
                call.started = time.monotonic()
            else:
                call.finished = time.monotonic()

    def on_event(self, event: SessionEvent) -> None:
        """Record a session event (a call started, a result committed)."""
        with self._lock:
            if isinstance(event, BatchCallEvent):
                _batch, arrived = self._by_id[event.call.call_id]
                arrived.arrived = True
            elif isinstance(event, ToolCallEvent):
                batch, _call = self._by_id[event.call_id]
                if batch.opened is None:
                    batch.opened = time.monotonic()
            elif isinstance(event, ToolProgressEvent):
                _batch, call = self._by_id[event.call_id]
                call.progress = progress_text(event)
            elif isinstance(event, ToolResultEvent):
                batch, call = self._by_id[event.call_id]
                if not event.is_error:
                    call.code = "ok"
                elif event.error is not None:
                    call.code = event.error.code
                else:
                    call.code = "error" if call.started is not None else "denied"
                if call.code in ("ABORTED", "ABORTED_BEFORE_DISPATCH"):
                    batch.interrupted = True

    # --- drawn by rich -------------------------------------------------------------------

    def render(self) -> RenderableType:
        """The view as it is now."""
        with self._lock:
            now = time.monotonic()
            panels = [self._panel(batch, now) for batch in self.batches if batch.opened]
        if not panels:
            return Text("starting the scripted turn ...", style="dim")
        return Group(*panels)

    def _panel(self, batch: _Batch, now: float) -> Panel:
        assert batch.opened is not None
        done = sum(call.code is not None for call in batch.calls)
        in_flight = [c for c in batch.calls if c.started is not None and c.finished is None]
        slots = Text("pool ")
        for slot in range(MAX_PARALLEL):
            slots.append("■ " if slot < len(in_flight) else "□ ", style="yellow")
        slots.append(f"{len(in_flight)}/{MAX_PARALLEL} in flight")
        barrier = next((c for c in in_flight if not c.parallel), None)
        if barrier is not None:
            slots.append("   barrier: ", style="bold")
            who = f"{barrier.request.call_id} {barrier.request.name}"
            slots.append(f"{_line(who)} runs alone", "cyan")
        header = Table.grid(padding=(0, 2))
        header.add_row(
            ProgressBar(total=len(batch.calls), completed=done, width=30),
            Text(f"{done}/{len(batch.calls)} results"),
            slots,
        )
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("call", no_wrap=True)
        table.add_column("tool", no_wrap=True)
        table.add_column("mode", no_wrap=True)
        axis = "".join(
            f"{int(second)}s".ljust(COLUMNS_PER_SECOND) for second in range(int(TIMELINE_SECONDS))
        )
        table.add_column(axis, no_wrap=True)
        table.add_column("status", no_wrap=True)
        for call in batch.calls:
            table.add_row(
                Text(_line(call.request.call_id)),
                Text(_line(call.request.name)),
                Text("pool" if call.parallel else "barrier", "dim" if call.parallel else "cyan"),
                self._bar(batch.opened, call, now),
                self._status(call),
            )
        parts: list[RenderableType] = [header, table]
        if batch.interrupted:
            parts.append(
                Text.assemble(
                    ("Esc ", "bold red"),
                    "the user interrupted the turn: the call in flight drains to ABORTED, "
                    "the calls that never started get ABORTED_BEFORE_DISPATCH",
                )
            )
        return Panel(Group(*parts), title=f"[bold]{batch.title}[/bold]", title_align="left")

    def _bar(self, opened: float, call: _Call, now: float) -> Text:
        width = int(TIMELINE_SECONDS * COLUMNS_PER_SECOND)
        bar = Text(" " * width)
        if call.started is None:
            return bar
        start = min(int((call.started - opened) * COLUMNS_PER_SECOND), width - 1)
        end_time = call.finished if call.finished is not None else now
        stop = min(max(int((end_time - opened) * COLUMNS_PER_SECOND), start + 1), width)
        style = _STYLES.get(call.code or "running", "red")
        bar = Text(" " * start)
        bar.append("█" * (stop - start), style=style)
        bar.append(" " * (width - stop))
        return bar

    def _status(self, call: _Call) -> Text:
        if call.code is None and not call.arrived:
            return Text("the model is still writing it", _STYLES["streaming"])
        if call.code is None:
            state = "running" if call.started is not None else "waiting"
            if state == "running" and call.progress is not None:
                return Text(_line(f"running: {call.progress}"), _STYLES[state])
            return Text(state, _STYLES[state])
        label = _LABELS.get(call.code, call.code)
        return Text(_line(label), _STYLES.get(call.code, "red"))


def _line(text: str) -> str:
    return printable(text, multiline=False)


def model_receives(call: ToolCallRequest, result: ToolExecutionResult, *, dispatched: bool) -> Text:
    """One line of the summary: the call id, its outcome, the first line of its text (tool text
    is shown as written, never read as markup, its control characters visible).
    """
    label = outcome(result, dispatched)
    return Text.assemble(
        f"  {_line(call.call_id):<4} ",
        (f"{_line(label):<24}", _STYLES.get(label, "red")),
        f" {_line(first_line(execution_text(result)))}",
    )


@attrs.define(eq=False)
class _ObservedSession:
    """A session log that tells the view about every event it stores."""

    inner: SessionLog
    view: DemoView

    def append(self, event: SessionEvent, /) -> int:
        seq = self.inner.append(event)
        self.view.on_event(event)
        return seq

    def events(self) -> list[SessionEvent]:
        return self.inner.events()


@contextlib.contextmanager
def _interrupts_deferred() -> Generator[None]:
    """Hold a Ctrl-C (SIGINT) pressed inside the block until it ends, then raise it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[bool] = []
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: pressed.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pressed:
            raise KeyboardInterrupt


def main_live_demo(*, log: Path | None, console: Console | None = None) -> int:
    """Run the demo in real time under a live view; then print what the model received."""
    console = console if console is not None else Console()
    path, session = open_demo_log(log)
    with session:
        first_seq = len(session.events())
        view = DemoView(streamed=True)
        recorder = TimelineRecorder(on_change=view.on_span)
        console.print(
            "[bold]dsh-tools demo[/bold]: a scripted agent turn through the registry, pipeline, "
            "timeout policy and scheduler (real time)"
        )
        live = Live(get_renderable=view.render, console=console, refresh_per_second=15)
        try:
            # rich's start and stop are not safe against a KeyboardInterrupt landing halfway
            # (a hidden cursor, a render hook half pushed): Ctrl-C waits until each is done
            with _interrupts_deferred():
                live.start(refresh=True)
            batches = trio.run(
                functools.partial(
                    run_demo, _ObservedSession(session, view), recorder=recorder, stream=True
                )
            )
        finally:
            with _interrupts_deferred():
                live.stop()  # the refresh thread ends, the cursor comes back
        console.print()
        for demo in batches:
            console.print(f"[bold]{demo.title}[/bold]: what the model receives")
            for call, result in zip(demo.calls, demo.batch.results, strict=True):
                console.print(
                    model_receives(call, result, dispatched=call.call_id in demo.spans),
                    highlight=False,
                    no_wrap=True,
                    overflow="ellipsis",
                )
        written = len(session.events()) - first_seq
    console.print(Text(f"session log ({written} events): {_line(str(path))}"), highlight=False)
    sys.stdout.flush()
    return 0
