"""Show tool calls: presenters on the tools, ToolPresenter over the session's events."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping

import attrs
import trio

from dsh_tools import (
    CancelController,
    DiffCallView,
    DiffResultView,
    FileDiff,
    GenericCallView,
    GenericResultView,
    MemorySessionLog,
    SessionEvent,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolOutput,
    ToolPresenter,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolRunContext,
    console_block,
    converter,
    define_tool,
    run_tool_calls,
)

files = {"/w/app.py": "def main():\n    print('hi')\n"}


@attrs.frozen
class Command:
    command: str


@attrs.frozen
class Write:
    path: str
    text: str


async def run(args: Command, context: ToolRunContext) -> ToolOutput:
    output = "".join(f"{path}\n" for path in sorted(files))
    return ToolOutput(content=[TextBlock(text=output)], meta={"exitCode": 0})


def show_run(args: Command, result: ToolResult) -> TerminalResultView:
    meta = result.meta
    code = meta.get("exitCode") if isinstance(meta, Mapping) else None
    output = "".join(b.text for b in result.content if isinstance(b, TextBlock))
    return TerminalResultView(output=output, exit_code=code if isinstance(code, int) else None)


async def write(args: Write, context: ToolRunContext) -> ToolOutput:
    old = files.get(args.path)
    files[args.path] = args.text
    return ToolOutput(content=[TextBlock(text="ok")], meta={"old": old, "new": args.text})


def show_write(args: Write, result: ToolResult) -> DiffResultView | None:
    meta = result.meta
    if result.is_error or not isinstance(meta, Mapping):
        return None
    old, new = str(meta["old"]).splitlines(True), str(meta["new"]).splitlines(True)
    matcher = difflib.SequenceMatcher(None, old, new)
    return DiffResultView(
        diffs=[
            FileDiff(
                path=args.path,
                old_text="".join(old[g[0][1] : g[-1][2]]),
                new_text="".join(new[g[0][3] : g[-1][4]]),
            )
            for g in matcher.get_grouped_opcodes(1)
        ]
    )


async def stat(args: object, context: ToolRunContext) -> str:
    return "2 files"


registry = ToolRegistry()
registry.register(
    define_tool(
        name="run",
        description="Run a command.",
        parameters=Command,
        execute=run,
        present_call=lambda args: TerminalCallView(title=args.command, cwd="/w"),
        present_result=show_run,
    )
)
registry.register(
    define_tool(
        name="write",
        description="Write a file.",
        parameters=Write,
        execute=write,
        present_call=lambda args: DiffCallView(
            title=f"Write {args.path}",
            diffs=[FileDiff(path=args.path, old_text=None, new_text=args.text)],
        ),
        present_result=show_write,
    )
)
registry.register(define_tool(name="stat", description="Stat.", parameters={}, execute=stat))


def show(view: object) -> str:
    """One line per view (a real UI draws cards)."""
    if isinstance(view, TerminalCallView):
        return f"terminal $ {view.title}"
    if isinstance(view, TerminalResultView):
        return f"terminal exit {view.exit_code}: {view.output!r}"
    if isinstance(view, DiffCallView | DiffResultView):
        return "diff " + "; ".join(f"{d.old_text!r} -> {d.new_text!r}" for d in view.diffs)
    if isinstance(view, GenericCallView):
        return f"generic {view.title} ({view.kind}) {json.dumps(converter.unstructure(view.raw_input))}"
    assert isinstance(view, GenericResultView)
    return "generic " + " ".join(b.text for b in view.content or () if isinstance(b, TextBlock))


def present(presenter: ToolPresenter, events: list[SessionEvent]) -> list[str]:
    lines: list[str] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            lines.append(f"{event.call_id} call   {show(presenter.present_call(event))}")
        elif isinstance(event, ToolResultEvent):
            lines.append(f"{event.call_id} result {show(presenter.present_result(event))}")
    return lines


async def main() -> None:
    session = MemorySessionLog()
    calls = [
        ToolCallRequest(call_id="c1", name="run", arguments='{"command": "ls"}'),
        ToolCallRequest(
            call_id="c2",
            name="write",
            arguments=json.dumps({"path": "/w/app.py", "text": "def main():\n    print('bye')\n"}),
        ),
        ToolCallRequest(call_id="c3", name="stat", arguments=""),
    ]
    await run_tool_calls(registry, calls, signal=CancelController().signal, session=session)

    live = present(ToolPresenter(registry), session.events())
    # a log on disk holds the same events as JSON lines; reading them back gives equal views
    lines = [json.dumps(converter.unstructure(e, SessionEvent)) for e in session.events()]  # pyright: ignore[reportArgumentType]
    replayed = [converter.structure(json.loads(line), SessionEvent) for line in lines]  # pyright: ignore[reportArgumentType]
    assert live == present(ToolPresenter(registry), replayed)  # pyright: ignore[reportUnknownArgumentType]
    print("\n".join(live))
    print(console_block("app.py\n"))


if __name__ == "__main__":
    trio.run(main)
