"""Policy around tool calls: ask before writing, guard the workspace, redact, observe."""

from __future__ import annotations

import trio

from dsh_tools import (
    Accept,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    CancelSignal,
    FrozenJsonObject,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    SchemaProp,
    TextBlock,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)

files = {"notes.txt": "token=hunter2"}


async def read_file(args: FrozenJsonObject, context: ToolRunContext) -> str:
    return files[str(args["path"])]


async def write_file(args: FrozenJsonObject, context: ToolRunContext) -> str:
    files[str(args["path"])] = str(args["text"])
    return f"wrote {args['path']}"


class ConsoleApproval:
    """Stands for a UI prompt: allows writes to notes, rejects the rest."""

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        print(f"approval asked for {request.tool_name}: {request.reason}")
        if request.call_id == "c2":
            return ApprovalOutcome.ALLOWED_ONCE
        return ApprovalOutcome.REJECTED


async def ask_before_writing(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
    if execution.name == "write_file":
        return Ask("writes to disk")
    return await next()


def stay_in_workspace(execution: ToolExecution) -> str | None:
    arguments = execution.arguments
    if isinstance(arguments, FrozenJsonObject) and str(arguments.get("path", "")).startswith("/"):
        return "absolute paths are outside the workspace"
    return None


async def redact_secrets(
    execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
) -> PostToolDecision:
    decision = await next()
    texts = [block.text for block in result.content if isinstance(block, TextBlock)]
    if any("hunter2" in text for text in texts):
        return Accept(content=[TextBlock(text="[redacted]")])
    return decision


def log_result(execution: ToolExecution, result: ToolExecutionResult) -> None:
    text = " ".join(block.text for block in result.content if isinstance(block, TextBlock))
    print(f"{execution.call_id} {execution.name}: {text}")


def build_registry() -> ToolRegistry:
    registry = ToolRegistry(approval=ConsoleApproval())
    path: SchemaProp = {"type": "string", "required": True}
    registry.register(
        define_tool(
            name="read_file",
            description="Read a file.",
            parameters={"path": path},
            execute=read_file,
        )
    )
    registry.register(
        define_tool(
            name="write_file",
            description="Write a file.",
            parameters={"path": path, "text": {"type": "string", "required": True}},
            execute=write_file,
        )
    )
    registry.hooks.pre_execute.add(ask_before_writing)
    registry.guard(stay_in_workspace)
    registry.hooks.post_execute.add(redact_secrets)
    registry.hooks.result.add(log_result)
    return registry


async def main() -> None:
    registry = build_registry()
    agent = object()  # any object identifies an agent; approval needs one
    calls = [
        ("c1", "read_file", {"path": "notes.txt"}),
        ("c2", "write_file", {"path": "todo.txt", "text": "ship it"}),
        ("c3", "write_file", {"path": "/etc/passwd", "text": "x"}),
        ("c4", "read_file", {"path": "/etc/passwd"}),
        ("c5", "delete_file", {"path": "todo.txt"}),
    ]
    for call_id, name, arguments in calls:
        await registry.execute(
            ToolExecutionInput(
                call_id=call_id,
                name=name,
                arguments=arguments,
                signal=CancelSignal.never(),
                agent=agent,
            )
        )


if __name__ == "__main__":
    trio.run(main)
