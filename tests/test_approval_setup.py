"""Approval wiring: ``ask_before``, and the misconfigurations a batch sees when it is set up
(``ApprovalSetupWarning``), not only in text the model reads."""

from __future__ import annotations

import warnings

import pytest
import trio

from dsh_tools import (
    ApprovalOutcome,
    ApprovalSetupWarning,
    Ask,
    CancelSignal,
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
    ask_before,
    define_tool,
    resume_tool_calls,
    run_tool_calls,
    session_turn,
)
from support import answering, approval_service, run_in_turn

NEVER = CancelSignal.never()
CALL = ToolCallRequest(call_id="c1", name="write", arguments='{"path": "a"}')


async def _write(args: FrozenJsonObject, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()
    return f"wrote {args['path']}"


def _registry(approval: UserApproval | None = None) -> ToolRegistry:
    registry = ToolRegistry(approval=approval)
    registry.register(
        define_tool(
            name="write",
            description="Write.",
            parameters={"path": {"type": "string", "required": True}},
            execute=_write,
        )
    )
    return registry


ALLOW = answering(ApprovalOutcome.ALLOWED_ONCE)


async def test_approval_works_in_five_lines() -> None:
    session = MemorySessionLog()
    approval = UserApproval(session)
    approval.answerers.add(ALLOW)
    registry = _registry(approval)
    registry.hooks.pre_execute.add(ask_before("write"))

    async with session_turn(session, 1):
        batch = await run_tool_calls(registry, [CALL], signal=NEVER, agent="main", session=session)

    assert [TextBlock(text="wrote a")] == list(batch.results[0].content)


async def test_ask_before_leaves_other_tools_to_the_rest_of_the_waterfall() -> None:
    policy = ask_before("write", reason="changes files")
    seen: list[str] = []

    async def rest() -> PreToolDecision:
        await trio.lowlevel.checkpoint()
        seen.append("next")
        return Ask(reason="from next")

    class Execution:
        def __init__(self, name: str) -> None:
            self.name = name

    asked = await policy(Execution("write"), rest)  # pyright: ignore[reportArgumentType]
    other = await policy(Execution("read"), rest)  # pyright: ignore[reportArgumentType]

    assert (Ask(reason="changes files"), Ask(reason="from next"), ["next"]) == (
        asked,
        other,
        seen,
    )


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "ask_before() needs at least one tool name"),
        (("",), {}, "a tool name must be a non-empty str, not ''"),
        (("write",), {"reason": 3}, "reason must be a str or None, not int"),
    ],
)
def test_ask_before_checks_its_arguments(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ask_before(*args, **kwargs)  # pyright: ignore[reportArgumentType]


async def test_an_ask_policy_on_a_registry_without_an_approval_service_warns_at_setup() -> None:
    registry = _registry()
    registry.hooks.pre_execute.add(ask_before("write"))

    with pytest.warns(ApprovalSetupWarning) as record:
        batch = await run_tool_calls(registry, [CALL], signal=NEVER, agent="main")

    # at setup, then once more when the call asks
    expected = [
        "ask_before('write') asks for approval, but the registry has no approval service: "
        "every such call is denied; pass ToolRegistry(approval=UserApproval(session))",
        'a pre_execute listener asked for approval of tool "write", but the registry has no '
        "approval service: the call is denied; pass ToolRegistry(approval=...)",
    ]
    assert expected == [str(warning.message) for warning in record]
    assert batch.results[0].is_error


async def test_a_batch_without_an_agent_on_a_registry_that_asks_warns_at_setup() -> None:
    registry = _registry(approval_service(ALLOW))
    registry.hooks.pre_execute.add(ask_before("write"))

    with pytest.warns(ApprovalSetupWarning, match="no agent to route a request through"):
        await run_tool_calls(registry, [], signal=NEVER)


async def test_an_answerer_scoped_to_another_agent_object_warns_at_setup() -> None:
    approval = approval_service()

    class Agent:
        pass

    approval.scope(Agent()).answerers.add(ALLOW)  # a fresh object: never the running agent
    registry = _registry(approval)
    registry.hooks.pre_execute.add(ask_before("write"))
    agent = Agent()

    with pytest.warns(ApprovalSetupWarning, match="no approval answerer hears agent"):
        await run_tool_calls(registry, [], signal=NEVER, agent=agent)


async def test_resume_warns_about_the_same_misconfiguration() -> None:
    registry = _registry()
    registry.hooks.pre_execute.add(ask_before("write"))

    with pytest.warns(ApprovalSetupWarning, match="no approval service"):
        assert await resume_tool_calls(registry, MemorySessionLog(), signal=NEVER) is None


async def test_a_well_wired_batch_does_not_warn() -> None:
    approval = approval_service()
    agent = object()
    approval.scope(agent).answerers.add(ALLOW)
    registry = _registry(approval)
    registry.hooks.pre_execute.add(ask_before("write"))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await run_in_turn(registry, [CALL], session=approval.session, agent=agent)


async def test_the_never_policy_needs_no_answerer() -> None:
    registry = _registry(approval_service(policy="never"))
    registry.hooks.pre_execute.add(ask_before("write"))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await run_tool_calls(registry, [], signal=NEVER, agent="main")


async def test_an_opaque_ask_on_a_registry_without_approval_warns_when_it_asks() -> None:
    registry = _registry()

    async def policy(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        await trio.lowlevel.checkpoint()
        return Ask()

    registry.hooks.pre_execute.add(policy)

    with pytest.warns(ApprovalSetupWarning, match='approval of tool "write", but the registry'):
        batch = await run_tool_calls(registry, [CALL], signal=NEVER, agent="main")

    expected = 'Error: tool "write" requires approval (not yet supported)'
    assert [TextBlock(text=expected)] == list(batch.results[0].content)


async def test_an_opaque_policy_without_any_answerer_is_not_warned_about_at_setup() -> None:
    # the library cannot know that this listener asks, and no answerer was meant for anyone
    registry = _registry(approval_service())

    async def budget(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return await next()

    registry.hooks.pre_execute.add(budget)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await run_tool_calls(registry, [], signal=NEVER, agent="main")
        await run_tool_calls(registry, [], signal=NEVER)


async def test_an_opaque_policy_whose_answerers_all_listen_to_other_agents_warns_at_setup() -> None:
    # no ask_before policy: what the library sees is an answerer meant for another agent only
    approval = approval_service()
    approval.scope("helper").answerers.add(ALLOW)
    registry = _registry(approval)

    async def policy(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return await next()

    registry.hooks.pre_execute.add(policy)

    with pytest.warns(ApprovalSetupWarning, match="no approval answerer hears agent 'main'"):
        await run_tool_calls(registry, [], signal=NEVER, agent="main")
    with warnings.catch_warnings():  # the agent its answerer hears: nothing to say
        warnings.simplefilter("error")
        await run_tool_calls(registry, [], signal=NEVER, agent="helper")
