"""Hook lists: each dispatch snapshots its listeners when it starts, so a
listener added while a call runs is heard by that call's later hooks, never by a dispatch
already running. Also the attrs-built registration faces (``HookPoint``, ``ToolHooks``)."""

from __future__ import annotations

from typing import Any

from dsh_tools import (
    CancelController,
    Disposer,
    HookPoint,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolHooks,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
)
from support import execution_input, registry_with, request, run_calls, tool


def _call() -> ToolExecutionInput:
    return execution_input("t", signal=CancelController().signal)


def _registry_whose_body_runs(body: Any) -> ToolRegistry:
    return registry_with(tool("t", body, description="t"))


async def test_a_post_execute_listener_added_by_the_body_is_heard_by_the_same_call() -> None:
    heard: list[str] = []

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        heard.append(execution.call_id)
        return await next()

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        registry.hooks.post_execute.add(post)
        return "ok"

    registry = _registry_whose_body_runs(body)

    await registry.execute(_call())

    assert ["c1"] == heard


async def test_a_result_observer_added_by_the_body_sees_the_same_call_s_result() -> None:
    seen: list[ToolExecutionResult] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        registry.hooks.result.add(lambda _execution, result: seen.append(result))
        return "ok"

    registry = _registry_whose_body_runs(body)

    result = await registry.execute(_call())

    assert [result] == seen


async def test_a_pre_execute_listener_added_during_pre_execute_is_not_heard_by_that_dispatch() -> (
    None
):
    heard: list[str] = []

    async def late(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        heard.append(f"late {execution.call_id}")
        return await next()

    async def first(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        heard.append(f"first {execution.call_id}")
        if not heard[:-1]:
            registry.hooks.pre_execute.add(late)
        return await next()

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        return "ok"

    registry = _registry_whose_body_runs(body)
    registry.hooks.pre_execute.add(first)

    await registry.execute(_call())
    await registry.execute(_call())

    assert ["first c1", "first c1", "late c1"] == heard


async def test_a_post_execute_listener_removed_by_the_body_is_not_heard_by_the_same_call() -> None:
    heard: list[str] = []

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        heard.append(execution.call_id)
        return await next()

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        registration()
        return "ok"

    registry = _registry_whose_body_runs(body)
    registration = registry.hooks.post_execute.add(post)

    await registry.execute(_call())

    assert [] == heard


def test_each_registration_through_a_hook_point_is_its_own_disposer() -> None:
    registry = ToolRegistry()
    point: HookPoint[Any] = registry.hooks.change
    calls: list[str] = []

    first = point.add(lambda: calls.append("first"))
    point.add(lambda: calls.append("second"))
    first()
    registry.register(tool("t", description="t"))

    assert (["second"], True) == (calls, isinstance(first, Disposer) and first.disposed)


def test_a_scope_s_hooks_are_a_tool_hooks_whose_registrations_the_scope_owns() -> None:
    registry = ToolRegistry()
    agent = object()
    scope = registry.scope(agent)
    heard: list[str] = []

    registration = scope.hooks.change.add(lambda: heard.append("scoped"))
    scope.close()
    registry.register(tool("t", description="t"))

    assert (True, True, []) == (isinstance(scope.hooks, ToolHooks), registration.disposed, heard)


async def test_a_hook_is_heard_only_by_the_calls_it_applies_to_in_a_pool() -> None:
    # a listener of one agent makes the hook active but is not heard by another agent's calls
    # (nor by global calls); once every listener is removed, nothing is heard
    heard: list[str] = []

    def observe(execution: ToolExecution, result: ToolExecutionResult) -> None:
        heard.append(f"{execution.agent}:{execution.call_id}")

    registry = registry_with(tool("t", parallel=True))
    calls = [request("c1", "t"), request("c2", "t")]
    scope = registry.scope("alice")
    scope.hooks.result.add(observe)

    await run_calls(registry, *calls, agent="bob")
    await run_calls(registry, *calls)
    await run_calls(registry, *calls, agent="alice")
    scope.close()
    await run_calls(registry, *calls, agent="alice")

    assert ["alice:c1", "alice:c2"] == heard
