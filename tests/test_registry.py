"""ToolRegistry registration, scopes, restrictions and views (no execution here)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import attrs
import pytest
import trio

from dsh_tools import (
    Disposer,
    PreExecuteNext,
    PreToolDecision,
    ToolCallRequest,
    ToolDefinition,
    ToolExecution,
    ToolExecutionMode,
    ToolRegistry,
    ToolRegistryStatistics,
    ToolRunContext,
    ToolSchema,
    define_tool,
)
from support import Agent, execution_input, ok_body, registry_with, tool


def _tool(name: str, **kwargs: Any) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"the {name} tool",
        parameters={"type": "object", "properties": {"x": {"type": "string"}}},
        execute=ok_body,
        **kwargs,
    )


def _always_safe(args: object) -> bool:
    return True


def _reads_are_safe(args: Any) -> bool:
    return bool(args["x"] == "read")


def _names(registry: ToolRegistry, agent: object = None) -> list[str]:
    return [schema.name for schema in registry.schemas(agent)]


# --- register ------------------------------------------------------------------------------


def test_register_makes_the_definition_visible_to_get() -> None:
    registry = ToolRegistry()
    tool = _tool("a")
    registry.register(tool)

    assert registry.get("a") is tool


def test_get_of_an_unknown_name_is_none() -> None:
    assert ToolRegistry().get("nope") is None


def test_registering_a_duplicate_global_name_points_to_scopes() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))

    with pytest.raises(ValueError) as caught:
        registry.register(_tool("a"))

    expected = (
        'tool "a" is already registered (for a per-agent variant, register through that '
        "agent's `registry.scope(agent)` instead)"
    )
    assert expected == str(caught.value)


def test_registering_a_duplicate_name_in_one_scope_names_the_scope() -> None:
    registry = ToolRegistry()
    scope = registry.scope(Agent())
    scope.register(_tool("a"))

    with pytest.raises(ValueError) as caught:
        scope.register(_tool("a"))

    expected = 'tool "a" is already registered in this scope'
    assert expected == str(caught.value)


def test_a_scoped_tool_with_a_global_name_is_not_a_duplicate() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    scoped = _tool("a")

    registry.scope(agent).register(scoped)

    assert registry.get("a", agent) is scoped


def test_register_rejects_a_definition_whose_timeout_was_forced_invalid() -> None:
    registry = ToolRegistry()
    tool = _tool("slow", timeout=1.0)
    object.__setattr__(tool, "timeout", float("inf"))

    with pytest.raises(ValueError) as caught:
        registry.register(tool)

    expected = 'tool "slow": timeout must be a positive finite number of seconds (got Infinity)'
    assert expected == str(caught.value)


def test_a_definition_with_a_negative_timeout_cannot_be_built() -> None:
    with pytest.raises(ValueError) as caught:
        _tool("slow", timeout=-1)

    expected = 'tool "slow": timeout must be a positive finite number of seconds (got -1)'
    assert expected == str(caught.value)


def test_define_tool_a_raw_definition_and_register_share_one_timeout_rule() -> None:
    messages: list[str] = []
    for build in (
        lambda: define_tool(
            name="slow", description="d", parameters={}, execute=ok_body, timeout=0
        ),
        lambda: _tool("slow", timeout=0),
    ):
        with pytest.raises(ValueError) as caught:
            build()
        messages.append(str(caught.value))

    expected = ['tool "slow": timeout must be a positive finite number of seconds (got 0)'] * 2
    assert expected == messages


def test_register_rejects_something_that_is_not_a_definition() -> None:
    with pytest.raises(TypeError):
        ToolRegistry().register("a")  # pyright: ignore[reportArgumentType]


def test_the_register_disposer_removes_the_tool() -> None:
    registry = ToolRegistry()
    dispose = registry.register(_tool("a"))

    dispose()

    assert registry.get("a") is None


def test_the_register_disposer_is_idempotent_and_spares_a_later_registration() -> None:
    registry = ToolRegistry()
    dispose = registry.register(_tool("a"))
    dispose()
    again = _tool("a")
    registry.register(again)

    dispose()

    assert registry.get("a") is again


def test_the_register_disposer_works_as_a_context_manager() -> None:
    registry = ToolRegistry()

    with registry.register(_tool("a")):
        inside = registry.get("a") is not None

    expected = (True, None)
    assert expected == (inside, registry.get("a"))


def test_register_emits_change_after_inserting() -> None:
    registry = ToolRegistry()
    seen: list[list[str]] = []
    registry.hooks.change.add(lambda: seen.append(_names(registry)))

    registry.register(_tool("a"))

    expected = [["a"]]
    assert expected == seen


def test_disposing_a_tool_emits_change() -> None:
    registry = ToolRegistry()
    dispose = registry.register(_tool("a"))
    seen: list[list[str]] = []
    registry.hooks.change.add(lambda: seen.append(_names(registry)))

    dispose()

    expected: list[list[str]] = [[]]
    assert expected == seen


def test_a_raising_change_listener_rolls_the_registration_back_and_propagates() -> None:
    registry = ToolRegistry()
    calls: list[str] = []

    def listener() -> None:
        calls.append("change")
        if len(calls) == 1:
            raise RuntimeError("refused")

    registry.hooks.change.add(listener)

    with pytest.raises(RuntimeError, match="refused"):
        registry.register(_tool("a"))

    # the rollback emits change again
    expected = (None, ["change", "change"])
    assert expected == (registry.get("a"), calls)


def test_scoped_change_listeners_hear_global_changes() -> None:
    registry = ToolRegistry()
    heard: list[str] = []
    registry.scope(Agent()).hooks.change.add(lambda: heard.append("scoped"))

    registry.register(_tool("a"))

    expected = ["scoped"]
    assert expected == heard


def test_adding_a_guard_does_not_emit_change() -> None:
    registry = ToolRegistry()
    heard: list[str] = []
    registry.hooks.change.add(lambda: heard.append("change"))

    registry.guard(lambda execution: None)

    expected = []
    assert expected == heard


# --- scopes --------------------------------------------------------------------------------


def test_scope_returns_the_same_object_for_the_same_agent_while_open() -> None:
    registry = ToolRegistry()
    agent = Agent()

    assert registry.scope(agent) is registry.scope(agent)


def test_scope_returns_a_fresh_object_after_close() -> None:
    registry = ToolRegistry()
    agent = Agent()
    first = registry.scope(agent)
    first.close()

    assert registry.scope(agent) is not first


def test_scopes_of_equal_but_distinct_agents_are_distinct() -> None:
    registry = ToolRegistry()

    assert registry.scope([]) is not registry.scope([])


def test_scope_of_none_is_refused() -> None:
    with pytest.raises(TypeError):
        ToolRegistry().scope(None)


def test_a_scoped_tool_is_invisible_to_other_agents_and_to_global_calls() -> None:
    registry = ToolRegistry()
    agent = Agent()
    registry.scope(agent).register(_tool("mine"))

    expected = (None, None)
    assert expected == (registry.get("mine"), registry.get("mine", Agent()))


def test_closing_a_scope_unwinds_everything_registered_through_it() -> None:
    registry = ToolRegistry()
    agent = Agent()
    scope = registry.scope(agent)
    scope.register(_tool("mine"))
    registry.register(_tool("g"))
    scope.restrict(deny=["g"])

    scope.close()

    expected = ["g"]
    assert expected == _names(registry, agent)


def test_closing_a_scope_unwinds_last_registration_first() -> None:
    registry = ToolRegistry()
    registry.register(_tool("g"))
    agent = Agent()
    scope = registry.scope(agent)
    scope.register(_tool("a"))
    scope.restrict(deny=["g"])
    seen: list[list[str]] = []
    registry.hooks.change.add(lambda: seen.append(_names(registry, agent)))

    scope.close()

    # the restriction (registered last) lifts first, then the tool goes
    expected = [["g", "a"], ["g"]]
    assert expected == seen


def test_a_scope_works_as_a_context_manager() -> None:
    registry = ToolRegistry()
    agent = Agent()

    with registry.scope(agent) as scope:
        scope.register(_tool("mine"))
        inside = _names(registry, agent)

    expected: tuple[list[str], list[str], bool] = (["mine"], [], True)
    assert expected == (inside, _names(registry, agent), scope.closed)


def test_a_closed_scope_refuses_registrations() -> None:
    registry = ToolRegistry()
    scope = registry.scope(Agent())
    scope.close()

    with pytest.raises(RuntimeError, match="closed"):
        scope.register(_tool("a"))


def test_disposing_a_scoped_registration_early_leaves_close_idempotent() -> None:
    registry = ToolRegistry()
    agent = Agent()
    scope = registry.scope(agent)
    dispose = scope.register(_tool("a"))
    dispose()
    registry.scope(agent)  # still the same scope
    again = scope.register(_tool("a"))

    scope.close()

    expected: tuple[bool, list[str]] = (True, [])
    assert expected == (again.disposed, _names(registry, agent))


def test_scope_close_raises_the_first_undo_error_after_undoing_everything() -> None:
    registry = ToolRegistry()
    agent = Agent()
    scope = registry.scope(agent)
    scope.register(_tool("a"))
    scope.register(_tool("b"))
    failures = iter([RuntimeError("first"), RuntimeError("second")])

    def listener() -> None:
        raise next(failures)

    registry.hooks.change.add(listener)

    with pytest.raises(RuntimeError, match="first"):
        scope.close()

    expected = []
    assert expected == _names(registry, agent)


# --- views ---------------------------------------------------------------------------------


def test_schemas_list_visible_tools_in_registration_order() -> None:
    registry = ToolRegistry()
    for name in ("b", "a", "c"):
        registry.register(_tool(name))

    expected = ["b", "a", "c"]
    assert expected == _names(registry)


def test_a_shadowing_scoped_tool_keeps_the_global_position() -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c"):
        registry.register(_tool(name))
    agent = Agent()
    scope = registry.scope(agent)
    scope.register(_tool("z"))
    shadow = attrs.evolve(_tool("b"), description="scoped b")
    scope.register(shadow)

    schemas = registry.schemas(agent)

    expected = (["a", "b", "c", "z"], "scoped b")
    assert expected == (
        [s.name for s in schemas],
        schemas[1].description,
    )


def test_schemas_carry_only_name_description_and_parameters() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a", timeout=5.0, is_concurrency_safe=_always_safe))

    assert [
        ToolSchema(
            name="a",
            description="the a tool",
            parameters={"type": "object", "properties": {"x": {"type": "string"}}},
        )
    ] == registry.schemas()


def test_schemas_are_fresh_detached_copies() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    first = registry.schemas()[0]
    first.parameters["properties"]["x"]["type"] = "number"

    expected = "string"
    assert expected == registry.schemas()[0].parameters["properties"]["x"]["type"]


def test_schema_parameters_are_plain_dicts() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))

    assert dict is type(registry.schemas()[0].parameters["properties"])


# --- restrictions --------------------------------------------------------------------------


def test_an_allow_restriction_hides_unlisted_global_tools() -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c"):
        registry.register(_tool(name))
    agent = Agent()

    registry.scope(agent).restrict(allow=["a", "c"])

    expected = (["a", "c"], ["a", "b", "c"])
    assert expected == (_names(registry, agent), _names(registry))


def test_a_restricted_away_global_reads_as_absent() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    registry.scope(agent).restrict(deny=["a"])

    assert None is registry.get("a", agent)


def test_an_empty_allow_hides_every_global_tool() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()

    registry.scope(agent).restrict(allow=[])

    expected = []
    assert expected == _names(registry, agent)


def test_restrictions_never_hide_the_scope_own_tools() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    scope = registry.scope(agent)
    scope.register(_tool("a"))
    scope.register(_tool("own"))

    scope.restrict(allow=[])

    expected = ["a", "own"]
    assert expected == _names(registry, agent)


def test_restrictions_intersect() -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c"):
        registry.register(_tool(name))
    agent = Agent()
    scope = registry.scope(agent)

    scope.restrict(allow=["a", "b"])
    scope.restrict(deny=["a"])

    expected = ["b"]
    assert expected == _names(registry, agent)


def test_restrictions_lift_independently() -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c"):
        registry.register(_tool(name))
    agent = Agent()
    scope = registry.scope(agent)
    lift_allow = scope.restrict(allow=["a", "b"])
    scope.restrict(deny=["a"])

    lift_allow()

    expected = ["b", "c"]
    assert expected == _names(registry, agent)


def test_a_deny_only_restriction_admits_globals_registered_later() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    registry.scope(agent).restrict(deny=["a"])

    registry.register(_tool("later"))

    expected = ["later"]
    assert expected == _names(registry, agent)


def test_an_allow_restriction_hides_globals_registered_later() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    registry.scope(agent).restrict(allow=["a"])

    registry.register(_tool("later"))

    expected = ["a"]
    assert expected == _names(registry, agent)


def test_restrict_copies_the_caller_lists() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    registry.register(_tool("b"))
    agent = Agent()
    allow = ["a"]
    registry.scope(agent).restrict(allow=allow)

    allow.append("b")

    expected = ["a"]
    assert expected == _names(registry, agent)


def test_restrict_emits_change_and_its_lifting_too() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    seen: list[list[str]] = []
    registry.hooks.change.add(lambda: seen.append(_names(registry, agent)))

    registry.scope(agent).restrict(deny=["a"])()

    expected = [[], ["a"]]
    assert expected == seen


def test_an_empty_restriction_is_a_loud_no_op() -> None:
    registry = ToolRegistry()

    with pytest.raises(ValueError) as caught:
        registry.scope(Agent()).restrict()

    expected = (
        "ToolScope.restrict() is a no-op: pass `allow` and/or `deny` (an empty filter is almost "
        "always a materialized-empty-config bug)"
    )
    assert expected == str(caught.value)


def test_restrict_names_an_unknown_global_tool_and_the_known_ones_sorted() -> None:
    registry = ToolRegistry()
    registry.register(_tool("zeta"))
    registry.register(_tool("alpha"))

    with pytest.raises(ValueError) as caught:
        registry.scope(Agent()).restrict(allow=["x"])

    expected = 'ToolScope.restrict() names unknown global tool "x"; known global tools: alpha, zeta'
    assert expected == str(caught.value)


def test_restrict_pluralizes_several_unknown_names() -> None:
    registry = ToolRegistry()

    with pytest.raises(ValueError) as caught:
        registry.scope(Agent()).restrict(allow=["x"], deny=["y"])

    expected = (
        'ToolScope.restrict() names unknown global tools "x", "y"; known global tools: (none)'
    )
    assert expected == str(caught.value)


def test_restrict_does_not_count_scope_local_names_as_known() -> None:
    registry = ToolRegistry()
    scope = registry.scope(Agent())
    scope.register(_tool("own"))

    with pytest.raises(ValueError, match='unknown global tool "own"'):
        scope.restrict(deny=["own"])


def test_restrict_rejects_a_bare_string() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))

    with pytest.raises(TypeError):
        registry.scope(Agent()).restrict(allow="a")


def test_a_restriction_rolled_back_by_a_change_listener_is_not_applied() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    failures = iter([RuntimeError("no")])

    def listener() -> None:
        error = next(failures, None)
        if error is not None:
            raise error

    registry.hooks.change.add(listener)

    with pytest.raises(RuntimeError):
        registry.scope(agent).restrict(deny=["a"])

    expected = ["a"]
    assert expected == _names(registry, agent)


# --- execution_mode ------------------------------------------------------------------------


def test_execution_mode_is_parallel_when_the_classifier_returns_true() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a", is_concurrency_safe=_always_safe))

    expected = ToolExecutionMode.PARALLEL
    assert expected == registry.execution_mode(execution_input("a"))


def test_execution_mode_passes_the_arguments_to_the_classifier() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a", is_concurrency_safe=_reads_are_safe))

    expected = (ToolExecutionMode.PARALLEL, ToolExecutionMode.EXCLUSIVE)
    assert expected == (
        registry.execution_mode(execution_input("a", arguments={"x": "read"})),
        registry.execution_mode(execution_input("a", arguments={"x": "write"})),
    )


def test_execution_mode_classifies_a_model_call_by_its_parsed_arguments() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a", is_concurrency_safe=_reads_are_safe))

    expected = (
        ToolExecutionMode.PARALLEL,
        ToolExecutionMode.EXCLUSIVE,
        ToolExecutionMode.EXCLUSIVE,
    )
    assert expected == (
        registry.execution_mode(ToolCallRequest(call_id="c1", name="a", arguments='{"x":"read"}')),
        registry.execution_mode(ToolCallRequest(call_id="c2", name="a", arguments='{"x":"write"}')),
        registry.execution_mode(ToolCallRequest(call_id="c3", name="a", arguments="not json")),
    )


def test_execution_mode_of_a_model_call_sees_the_given_agents_tools() -> None:
    registry = ToolRegistry()
    agent = Agent()
    registry.scope(agent).register(_tool("mine", is_concurrency_safe=_always_safe))
    call = ToolCallRequest(call_id="c1", name="mine", arguments="{}")

    expected = (ToolExecutionMode.PARALLEL, ToolExecutionMode.EXCLUSIVE)
    assert expected == (
        registry.execution_mode(call, agent=agent),
        registry.execution_mode(call),
    )


def test_execution_mode_of_an_unknown_tool_is_exclusive() -> None:
    expected = ToolExecutionMode.EXCLUSIVE
    assert expected == ToolRegistry().execution_mode(execution_input("nope"))


def test_execution_mode_without_a_classifier_is_exclusive() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))

    expected = ToolExecutionMode.EXCLUSIVE
    assert expected == registry.execution_mode(execution_input("a"))


def test_execution_mode_with_a_raising_classifier_is_exclusive() -> None:
    def classify(args: object) -> bool:
        raise RuntimeError("broken")

    registry = ToolRegistry()
    registry.register(_tool("a", is_concurrency_safe=classify))

    expected = ToolExecutionMode.EXCLUSIVE
    assert expected == registry.execution_mode(execution_input("a"))


@pytest.mark.parametrize("answer", ["yes", 1, [1], None])
def test_execution_mode_with_a_truthy_non_bool_is_exclusive(answer: object) -> None:
    registry = ToolRegistry()

    def classify(args: object) -> Any:
        return answer

    registry.register(_tool("a", is_concurrency_safe=classify))

    expected = ToolExecutionMode.EXCLUSIVE
    assert expected == registry.execution_mode(execution_input("a"))


def test_execution_mode_uses_the_tool_visible_to_the_call_agent() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))
    agent = Agent()
    registry.scope(agent).register(_tool("a", is_concurrency_safe=_always_safe))

    expected = (ToolExecutionMode.EXCLUSIVE, ToolExecutionMode.PARALLEL)
    assert expected == (
        registry.execution_mode(execution_input("a")),
        registry.execution_mode(execution_input("a", agent=agent)),
    )


def test_disposer_type_is_the_public_disposer() -> None:
    assert isinstance(ToolRegistry().register(_tool("a")), Disposer)


def test_registry_reads_its_approval_service() -> None:
    class Service:
        async def request(self, request: object) -> str:
            return "rejected"

    service = Service()

    assert service is ToolRegistry(approval=service).approval  # pyright: ignore[reportArgumentType]


def test_a_change_listener_that_also_fails_the_rollback_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()

    def listener() -> None:
        raise RuntimeError("always")

    registry.hooks.change.add(listener)

    with caplog.at_level(logging.WARNING, logger="dsh_tools"), pytest.raises(RuntimeError):
        registry.register(_tool("a"))

    expected = (None, ["tools/change listener failed during rollback: always"])
    assert expected == (registry.get("a"), [r.getMessage() for r in caplog.records])


def test_a_guard_must_be_callable() -> None:
    with pytest.raises(TypeError, match="a guard must be callable, not str"):
        ToolRegistry().guard("deny")  # pyright: ignore[reportArgumentType]


def test_a_hook_listener_must_be_callable() -> None:
    with pytest.raises(TypeError, match="a hook listener must be callable, not int"):
        ToolRegistry().hooks.result.add(3)  # pyright: ignore[reportArgumentType]


def test_restrict_rejects_non_str_names() -> None:
    registry = ToolRegistry()
    registry.register(_tool("a"))

    with pytest.raises(TypeError, match="deny must contain tool names"):
        registry.scope(Agent()).restrict(deny=[1])  # pyright: ignore[reportArgumentType]


def test_closing_a_scope_twice_is_harmless() -> None:
    registry = ToolRegistry()
    agent = Agent()
    scope = registry.scope(agent)
    scope.register(_tool("a"))
    scope.close()

    scope.close()

    expected: tuple[bool, list[str]] = (True, [])
    assert expected == (scope.closed, _names(registry, agent))


def test_a_scope_repr_shows_its_state() -> None:
    scope = ToolRegistry().scope("agent-1")
    scope.close()

    expected = "<ToolScope closed agent='agent-1'>"
    assert expected == repr(scope)


async def test_a_closed_scope_refuses_hooks_and_keeps_none_of_them() -> None:
    registry = ToolRegistry()
    agent = Agent()
    scope = registry.scope(agent)
    scope.close()
    heard: list[str] = []

    with pytest.raises(RuntimeError, match="closed"):
        scope.hooks.change.add(lambda: heard.append("change"))
    registry.register(_tool("a"))

    expected = []
    assert expected == heard


# --- statistics ---------------------------------------------------------------------------------


def test_registry_statistics_count_tools_scopes_guards_and_listeners() -> None:
    registry = ToolRegistry(thread_limit=3)
    registry.register(tool("a", ok_body))
    registry.register(tool("b", ok_body))
    scope = registry.scope(Agent())
    scope.register(tool("c", ok_body))
    registry.guard(lambda execution: None)
    scope.guard(lambda execution: None)
    remove = registry.hooks.result.add(lambda execution, result: None)
    scope.hooks.pre_execute.add(_allow_all)

    before = registry.statistics()
    remove()
    scope.close()

    assert (
        ToolRegistryStatistics(
            tools=2, scopes=1, guards=2, listeners=2, worker_threads=0, thread_limit=3
        )
        == before
    )
    assert (
        ToolRegistryStatistics(
            tools=2, scopes=0, guards=1, listeners=0, worker_threads=0, thread_limit=3
        )
        == registry.statistics()
    )


async def _allow_all(execution: ToolExecution, next_: PreExecuteNext) -> PreToolDecision:
    return await next_()


async def test_registry_statistics_count_sync_bodies_running_in_worker_threads() -> None:
    entered, release = threading.Event(), threading.Event()

    def blocking(args: object, context: ToolRunContext) -> str:
        entered.set()
        release.wait()
        return "done"

    registry = registry_with(tool("sync", blocking))
    seen: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(registry.execute, execution_input("sync", {}))
        await trio.to_thread.run_sync(entered.wait)
        seen.append(registry.statistics().worker_threads)
        release.set()
    seen.append(registry.statistics().worker_threads)

    assert [1, 0] == seen
