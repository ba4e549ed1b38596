"""The demo's workspace and its five tools: what ``dsh-tools demo`` and ``dsh-tools acp`` run.

Tools work on an in-memory workspace and sleep to stand for I/O. Every tool presents itself
(:class:`~dsh_tools.ToolPresenter` turns the session's events into the cards a UI would draw):
reads and searches as generic cards with their file locations, the write as a diff whose result
hunks :mod:`difflib` computes from the before and after text, and ``run_command`` (a tiny shell
over the workspace) as a terminal card with its exit code.
"""

from __future__ import annotations

import difflib
import shlex
from typing import Final

import attrs
import trio

from dsh_tools import (
    Ask,
    DiffCallView,
    DiffResultView,
    FileDiff,
    FileLocation,
    FrozenJsonObject,
    GenericCallView,
    HookContext,
    PluginSource,
    PreExecuteNext,
    PreToolDecision,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallKind,
    ToolCallView,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ToolResultView,
    ToolRunContext,
    UserApproval,
    define_tool,
    install_timeout_policy,
)

__all__ = [
    "WORKSPACE_ROOT",
    "Workspace",
    "build_registry",
    "demo_registry",
    "hunks",
    "sample_workspace",
]

WORKSPACE_ROOT: Final = "/workspace"
"""Where the demo's in-memory workspace pretends to live (paths on cards are absolute)."""


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


def _by_path(args: ReadFileArgs | WriteFileArgs) -> list[str]:
    # a file is one resource: a read never overlaps a write of the same file, whichever
    # batch (or, with a shared limiter, process) each belongs to
    return [args.path]


def demo_registry() -> ToolRegistry:
    """The demo's registry over a fresh sample workspace: what draws the demo's own cards when
    its log is replayed (``dsh-tools replay --registry dsh_tools.cli.demo_tools:demo_registry LOG``).
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
            conflict_keys=_by_path,
            present_call=_present_read,
        )
    )
    registry.register(
        define_tool(
            name="write_file",
            description="Replace the text of a file of the workspace.",
            parameters=WriteFileArgs,
            execute=write_file,
            conflict_keys=_by_path,
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
