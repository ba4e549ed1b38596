"""Ask the user before a call runs: UserApproval, answerers, the policy, the audit trail."""

from __future__ import annotations

import trio

from dsh_tools import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalPolicyEvent,
    ApprovalRequest,
    Ask,
    CancelController,
    FrozenJsonObject,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    TextBlock,
    ToolCallRequest,
    ToolExecution,
    ToolRegistry,
    ToolRunContext,
    UserApproval,
    define_tool,
    run_tool_calls,
    session_turn,
)


class Agent:
    """Whatever object stands for the agent: approval routes requests by identity."""


async def write(args: FrozenJsonObject, context: ToolRunContext) -> str:
    return f"wrote {args['path']}"


async def ask_before_writing(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
    if execution.name == "write":
        return Ask(reason="changes a file")
    return await next()


async def ui_prompt(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
    """Stands for a dialog (or console_answerer() on a terminal): allows notes, rejects the rest."""
    await trio.lowlevel.checkpoint()
    if request.call_id == "c1":
        return ApprovalOutcome.ALLOWED_ONCE
    return ApprovalOutcome.REJECTED


async def main() -> None:
    session = MemorySessionLog()
    approval = UserApproval(session)
    registry = ToolRegistry(approval=approval)
    registry.register(
        define_tool(
            name="write",
            description="Write a file.",
            parameters={"path": {"type": "string", "required": True}},
            execute=write,
        )
    )
    registry.hooks.pre_execute.add(ask_before_writing)
    agent = Agent()
    approval.scope(agent).answerers.add(ui_prompt)  # heard only for this agent's requests

    def calls(*ids: str) -> list[ToolCallRequest]:
        return [
            ToolCallRequest(call_id=i, name="write", arguments='{"path": "notes.md"}') for i in ids
        ]

    async with session_turn(session, 1):  # approval answers only inside an open turn
        batch = await run_tool_calls(
            registry,
            calls("c1", "c2"),
            signal=CancelController().signal,
            agent=agent,
            session=session,
        )
        approval.set_policy("never")  # rejects without asking anyone
        batch2 = await run_tool_calls(
            registry, calls("c3"), signal=CancelController().signal, agent=agent, session=session
        )

    for call_id, result in zip(("c1", "c2", "c3"), (*batch.results, *batch2.results), strict=True):
        text = " ".join(b.text for b in result.content if isinstance(b, TextBlock))
        print(f"{call_id}: {text}")
    print(f"policy now: {approval.policy}")
    for event in session.events():
        if isinstance(event, ApprovalAskedEvent):
            print(f"asked    {event.call_id} {event.tool_name}: {event.reason}")
        elif isinstance(event, ApprovalDecidedEvent):
            print(f"decided  {event.outcome}")
        elif isinstance(event, ApprovalPolicyEvent):
            print(f"policy   {event.policy}")


if __name__ == "__main__":
    trio.run(main)
