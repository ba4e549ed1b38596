"""Guards: global then scoped, registration order, live iteration, deny only."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_tools import (
    Allow,
    Ask,
    Deny,
    Disposer,
    FrozenJsonObject,
    PreExecuteNext,
    PreToolDecision,
    TextBlock,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
)
from support import (
    NOTHING,
    Agent,
    error_result,
    execution_input,
    note_post_execute,
    noting_body,
    record_post_execute,
    registry_with,
    tool,
)

OK = ToolExecutionResult(content=(TextBlock(text="ok"),), is_error=False)


def _registry() -> tuple[ToolRegistry, list[str]]:
    ran: list[str] = []
    return registry_with(tool("t", noting_body(ran), description="t")), ran


def _input(agent: object = None) -> ToolExecutionInput:
    return execution_input("t", {"a": [1]}, call_id="c", agent=agent)


def _recording(order: list[str], label: str, reason: str | None = None) -> Any:
    def guard(execution: ToolExecution) -> str | None:
        order.append(label)
        return reason

    return guard


async def test_a_guard_reason_denies_the_call_and_skips_the_body() -> None:
    registry, ran = _registry()
    registry.guard(lambda execution: "blocked by policy")

    result = await registry.execute(_input())

    expected = (error_result("Error: blocked by policy"), NOTHING)
    assert expected == (result, ran)


async def test_a_guard_returning_none_lets_the_call_through() -> None:
    registry, ran = _registry()
    registry.guard(lambda execution: None)

    result = await registry.execute(_input())

    expected = (OK, ["body"])
    assert expected == (result, ran)


async def test_global_guards_run_before_scoped_ones_each_in_registration_order() -> None:
    registry, _ = _registry()
    agent = Agent()
    order: list[str] = []
    scope = registry.scope(agent)
    scope.guard(_recording(order, "scoped 1"))
    registry.guard(_recording(order, "global 1"))
    scope.guard(_recording(order, "scoped 2"))
    registry.guard(_recording(order, "global 2"))

    await registry.execute(_input(agent))

    expected = ["global 1", "global 2", "scoped 1", "scoped 2"]
    assert expected == order


async def test_the_first_reason_wins_and_later_guards_do_not_run() -> None:
    registry, _ = _registry()
    order: list[str] = []
    registry.guard(_recording(order, "first", "first reason"))
    registry.guard(_recording(order, "second", "second reason"))

    result = await registry.execute(_input())

    expected = (error_result("Error: first reason"), ["first"])
    assert expected == (result, order)


async def test_scoped_guards_do_not_run_for_other_agents() -> None:
    registry, ran = _registry()
    registry.scope(Agent()).guard(lambda execution: "not you")

    result = await registry.execute(_input(Agent()))

    expected = (OK, ["body"])
    assert expected == (result, ran)


async def test_guards_are_not_run_for_a_denial() -> None:
    registry, _ = _registry()
    order: list[str] = []
    registry.guard(_recording(order, "guard"))

    async def deny(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Deny("denied first")

    registry.hooks.pre_execute.add(deny)

    result = await registry.execute(_input())

    expected = (error_result("Error: denied first"), NOTHING)
    assert expected == (result, order)


async def test_guards_are_not_run_for_an_ask_that_is_denied() -> None:
    registry, _ = _registry()
    order: list[str] = []
    registry.guard(_recording(order, "guard"))

    async def ask(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Ask()

    registry.hooks.pre_execute.add(ask)

    await registry.execute(_input())

    expected = []
    assert expected == order


async def test_a_guard_receives_the_execution_with_frozen_arguments() -> None:
    registry, _ = _registry()
    seen: list[ToolExecution] = []

    def guard(execution: ToolExecution) -> None:
        seen.append(execution)

    registry.guard(guard)

    await registry.execute(_input())

    arguments = seen[0].arguments
    assert isinstance(arguments, FrozenJsonObject)
    expected = (1,)
    assert expected == arguments["a"]


async def test_a_raising_guard_is_a_final_error_that_skips_post_execute() -> None:
    registry, ran = _registry()
    posts: list[str] = []

    def guard(execution: ToolExecution) -> str | None:
        raise RuntimeError("guard crashed")

    registry.guard(guard)
    note_post_execute(registry, posts)

    result = await registry.execute(_input())

    expected = (error_result("Error: guard crashed"), NOTHING, NOTHING)
    assert expected == (result, ran, posts)


async def test_a_guard_denial_reaches_post_execute() -> None:
    registry, _ = _registry()
    registry.guard(lambda execution: "no")
    seen = record_post_execute(registry)

    await registry.execute(_input())

    assert [error_result("Error: no")] == seen


async def test_a_guard_registered_during_evaluation_runs_in_the_same_evaluation() -> None:
    registry, _ = _registry()
    order: list[str] = []

    def registering(execution: ToolExecution) -> None:
        order.append("first")
        if len(order) == 1:
            registry.guard(_recording(order, "added while running"))

    registry.guard(registering)

    await registry.execute(_input())

    expected = ["first", "added while running"]
    assert expected == order


async def test_a_guard_removed_during_evaluation_does_not_run_if_not_reached() -> None:
    registry, _ = _registry()
    order: list[str] = []
    disposers: list[Disposer] = []

    def remover(execution: ToolExecution) -> None:
        order.append("remover")
        disposers[0]()

    registry.guard(remover)
    disposers.append(registry.guard(_recording(order, "removed")))
    registry.guard(_recording(order, "kept"))

    await registry.execute(_input())

    expected = ["remover", "kept"]
    assert expected == order


async def test_a_replacement_for_the_last_guard_applies_from_the_next_call() -> None:
    registry, _ = _registry()
    order: list[str] = []
    disposers: list[Disposer] = []

    def replace_myself(execution: ToolExecution) -> None:
        order.append("original")
        disposers[0]()
        registry.guard(_recording(order, "replacement"))

    disposers.append(registry.guard(replace_myself))

    await registry.execute(_input())
    first_call = list(order)
    await registry.execute(_input())

    expected = (["original"], ["original", "replacement"])
    assert expected == (first_call, order)


async def test_disposing_one_of_two_identical_registrations_leaves_the_other() -> None:
    registry, _ = _registry()

    def guard(execution: ToolExecution) -> str:
        return "still here"

    registry.guard(guard)
    dispose = registry.guard(guard)
    dispose()

    expected = error_result("Error: still here")
    assert expected == await registry.execute(_input())


async def test_closing_the_scope_removes_its_guards() -> None:
    registry, ran = _registry()
    agent = Agent()
    scope = registry.scope(agent)
    scope.guard(lambda execution: "scoped no")
    scope.close()

    result = await registry.execute(_input(agent))

    expected = (OK, ["body"])
    assert expected == (result, ran)


async def test_no_listener_can_undo_a_guard_denial() -> None:
    registry, ran = _registry()
    registry.guard(lambda execution: "final")

    async def insist(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Allow()

    registry.hooks.pre_execute.add(insist)

    result = await registry.execute(_input())

    expected = (error_result("Error: final"), NOTHING)
    assert expected == (result, ran)


# --- guards are synchronous -------------------------------------------------------------------


async def _async_guard(execution: ToolExecution) -> str | None:
    return "denied later"


class _AsyncCallable:
    async def __call__(self, execution: ToolExecution) -> str | None:
        return None


def test_an_async_guard_is_refused_at_registration() -> None:
    registry, _ = _registry()

    with pytest.raises(TypeError, match=r"^guards are synchronous: _async_guard is an async"):
        registry.guard(_async_guard)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match=r"^guards are synchronous: _AsyncCallable is an async"):
        registry.scope(Agent()).guard(_AsyncCallable())  # pyright: ignore[reportArgumentType]


async def test_a_guard_that_returns_a_coroutine_is_an_error_and_never_a_denial_text() -> None:
    registry, ran = _registry()
    registry.guard(lambda execution: _async_guard(execution))  # pyright: ignore[reportArgumentType]

    result = await registry.execute(_input())

    expected = (
        error_result("Error: guards are synchronous: <lambda> returned an awaitable"),
        NOTHING,
    )
    assert expected == (result, ran)
