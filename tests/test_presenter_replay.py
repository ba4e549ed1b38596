"""The same events give the same views live (as the scheduler appends them) and on replay of
the JSON Lines session log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from dsh_tools import (
    CancelController,
    DiffCallView,
    DiffResultView,
    FileDiff,
    FileLocation,
    GenericCallView,
    GenericResultView,
    JsonlSessionLog,
    SessionEvent,
    SessionLog,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallEvent,
    ToolCallKind,
    ToolCallRequest,
    ToolCallView,
    ToolOutput,
    ToolPresenter,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolResultView,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)

View = ToolCallView | ToolResultView


@attrs.frozen
class RunArgs:
    command: str


@attrs.frozen
class PathArgs:
    path: str


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    async def run(args: RunArgs, context: ToolRunContext) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        return ToolOutput(content=[TextBlock(text="a\nb\n")], meta={"exitCode": 0})

    def run_result(args: RunArgs, result: ToolResult) -> ToolResultView:
        meta: Any = result.meta
        return TerminalResultView(
            output="".join(b.text for b in result.content if isinstance(b, TextBlock)),
            exit_code=meta["exitCode"],
        )

    async def write(args: PathArgs, context: ToolRunContext) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        return ToolOutput(content=[TextBlock(text="ok")], meta={"old": "x\n", "new": "y\n"})

    def write_result(args: PathArgs, result: ToolResult) -> ToolResultView:
        meta: Any = result.meta
        return DiffResultView(
            diffs=[FileDiff(path=args.path, old_text=meta["old"], new_text=meta["new"])]
        )

    async def read(args: PathArgs, context: ToolRunContext) -> str:
        await trio.lowlevel.checkpoint()
        return "text"

    registry.register(
        define_tool(
            name="run",
            description="run",
            parameters=RunArgs,
            execute=run,
            present_call=lambda args: TerminalCallView(title=args.command, cwd="/w"),
            present_result=run_result,
        )
    )
    registry.register(
        define_tool(
            name="write",
            description="write",
            parameters=PathArgs,
            execute=write,
            present_call=lambda args: DiffCallView(
                title=f"Write {args.path}",
                diffs=[FileDiff(path=args.path, old_text=None, new_text="")],
            ),
            present_result=write_result,
        )
    )
    registry.register(
        define_tool(
            name="read",
            description="read",
            parameters=PathArgs,
            execute=read,
            present_call=lambda args: GenericCallView(
                title=f"Read {args.path}",
                kind=ToolCallKind.READ,
                locations=[FileLocation(path=args.path)],
            ),
            present_result=lambda args, result: GenericResultView(title=f"Read {args.path}"),
        )
    )
    return registry


CALLS = [
    ToolCallRequest(call_id="c1", name="run", arguments='{"command": "ls"}'),
    ToolCallRequest(call_id="c2", name="write", arguments='{"path": "/w/a.txt"}'),
    ToolCallRequest(call_id="c3", name="read", arguments='{"path": "/w/a.txt"}'),
    ToolCallRequest(call_id="c4", name="read", arguments='{"path": '),
    ToolCallRequest(call_id="c5", name="nope", arguments=""),
]


@attrs.define
class PresentingLog:
    """A SessionLog that presents every tool event as it is appended (a live UI)."""

    inner: SessionLog
    presenter: ToolPresenter
    views: list[View] = attrs.field(factory=lambda: list[View]())

    def append(self, event: SessionEvent, /) -> int:
        seq = self.inner.append(event)
        self.views.extend(_present(self.presenter, [event]))
        return seq

    def events(self) -> list[SessionEvent]:
        return self.inner.events()


def _present(presenter: ToolPresenter, events: list[SessionEvent]) -> list[View]:
    views: list[View] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            views.append(presenter.present_call(event))
        elif isinstance(event, ToolResultEvent):
            views.append(presenter.present_result(event))
    return views


def _close(log: JsonlSessionLog) -> None:
    # logs gain close() (and a lock) on another branch; close when there is one
    close: object = getattr(log, "close", None)
    if callable(close):
        close()


async def test_live_views_equal_the_views_of_a_replayed_log(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    registry = _registry()
    log = JsonlSessionLog(path)
    live = PresentingLog(log, ToolPresenter(registry))
    try:
        await run_tool_calls(registry, CALLS, signal=CancelController().signal, session=live)
    finally:
        _close(log)

    replayed_log = JsonlSessionLog(path)
    try:
        replay = _present(ToolPresenter(registry), replayed_log.events())
    finally:
        _close(replayed_log)

    assert live.views == replay
    expected_results: list[View] = [
        TerminalResultView(output="a\nb\n", exit_code=0),
        DiffResultView(diffs=[FileDiff(path="/w/a.txt", old_text="x\n", new_text="y\n")]),
        GenericResultView(title="Read /w/a.txt", content=[TextBlock(text="text")]),
    ]
    assert 10 == len(replay)
    assert TerminalCallView(title="ls", cwd="/w") == replay[0]
    assert expected_results == [replay[1], replay[3], replay[5]]
    assert (
        GenericCallView(title="read", kind=ToolCallKind.OTHER, raw_input='{"path": ') == replay[6]
    )
    assert GenericCallView(title="nope", kind=ToolCallKind.OTHER, raw_input={}) == replay[8]
