"""The scripted demo behind ``dsh-tools demo``: one agent turn through the real pipeline.

No model, no network, no API key: the "model" is a script of two assistant messages whose tool
calls run through a real :class:`~dsh_tools.ToolRegistry` (the demo's tools, with a guard, the
timeout policy and an ``execute`` wrapper that records the timeline: :mod:`.demo_tools`) and the
real scheduler, on trio's virtual clock by default, so the timeline is the same on every machine.

Batch 1 shows a rolling parallel pool (three reads and a slow fetch with a cap of 3), an
exclusive write as a barrier, a read of what it wrote, a call with invalid arguments, a call
denied by a guard, and a fetch that times out. Batch 2 is interrupted by the user mid-way: the
call in flight drains to ``ABORTED`` and the calls that never started get
``ABORTED_BEFORE_DISPATCH``.

With ``ask=True`` (``dsh-tools demo --ask``) the turn runs inside :func:`~dsh_tools.session_turn`
with a :class:`~dsh_tools.UserApproval` service: writes and commands need the user's ``y`` on the
terminal (:func:`~dsh_tools.console_answerer`), and a third batch runs two commands.

Three views show it: :mod:`.plain_demo` (``--plain`` and ``--ask``: an ASCII timeline),
:mod:`.live_demo` (the default: a live ``rich`` view) and :mod:`.defer_demo` (``--defer``: a
decision that waits, and the batch resumed from its log).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import attrs
import trio

from dsh_tools import (
    ApprovalAnswerer,
    CancelController,
    JsonlSessionLog,
    SessionEvent,
    SessionLog,
    SqliteSessionLog,
    TextBlock,
    TimelineRecorder,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolCallView,
    ToolExecutionResult,
    ToolPresenter,
    ToolResultEvent,
    ToolResultView,
    UserApproval,
    console_answerer,
    run_tool_calls,
    session_turn,
)

from .demo_tools import build_registry, sample_workspace

__all__ = [
    "BATCH_1",
    "BATCH_2",
    "BATCH_3",
    "INTERRUPT_AFTER",
    "MAX_PARALLEL",
    "STREAM_GAP",
    "DemoAgent",
    "DemoBatch",
    "default_log_path",
    "execution_text",
    "first_line",
    "open_demo_log",
    "open_file_log",
    "outcome",
    "run_demo",
]

MAX_PARALLEL: Final = 3
"""The demo's ``max_parallel_tool_calls``: small, so the rolling pool is visible."""

INTERRUPT_AFTER: Final = 1.0
"""Seconds into batch 2 when the "user" presses Esc."""

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
    stream: bool = False,
) -> list[DemoBatch]:
    """Run the scripted turn, appending its events to ``session``.

    Returns the batches with their timelines and views. Sleeps (virtual or real, depending on
    the clock ``trio.run`` was given) for about three seconds of clock time.

    Args:
        session: where the events go.
        ask: run the turn inside :func:`~dsh_tools.session_turn` with a
            :class:`~dsh_tools.UserApproval` service; writes and commands ask first, and a third
            batch runs two commands.
        answerer: who answers (with ``ask``); :func:`~dsh_tools.console_answerer` by default.
        recorder: records the bodies' timeline (e.g. one with an ``on_change`` callback for a
            live view); a fresh one by default.
        stream: batch 1 arrives as the scripted model streams it, one call every
            :data:`STREAM_GAP` seconds (a call stream given to ``run_tool_calls``: each call
            starts while the model still writes the rest).
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
        title: str,
        calls: tuple[ToolCallRequest, ...],
        step: int,
        interrupt_after: float | None,
        streamed: bool = False,
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
                _model_stream(calls) if streamed else calls,
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
            await run_batch(
                "batch 1 (streamed)" if stream else "batch 1", BATCH_1, 0, None, stream
            ),
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


STREAM_GAP: Final = 0.1
"""Seconds between two calls of the scripted model's stream (``run_demo(stream=True)``)."""


async def _model_stream(calls: tuple[ToolCallRequest, ...]) -> AsyncIterator[ToolCallRequest]:
    """The calls as a model streams them: one complete call every :data:`STREAM_GAP` s."""
    for index, call in enumerate(calls):
        await trio.sleep(STREAM_GAP if index else 0)
        yield call
    await trio.lowlevel.checkpoint()  # the stream's end (its finish event)


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


# --- reading a batch's results ----------------------------------------------------------


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


# --- the demo's session log -------------------------------------------------------------


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


def open_demo_log(log: Path | None) -> tuple[Path, JsonlSessionLog | SqliteSessionLog]:
    """Where a view of the demo writes: the log at ``log`` (``--log``), else a fresh SQLite file
    in the temporary folder; its path and the open log.
    """
    path = log if log is not None else default_log_path()
    return path, open_file_log(path)
