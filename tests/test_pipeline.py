"""The execution pipeline: stage order, which failure goes where, exact result shapes."""

from __future__ import annotations

import logging
import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    Accept,
    Allow,
    Block,
    CancelController,
    CancelSignal,
    Deny,
    ExecuteNext,
    HarnessError,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    TextBlock,
    ToolDefinition,
    ToolDispatchExecution,
    ToolErrorInfo,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
)
from dsh_tools._pipeline._complete import complete
from dsh_tools._pipeline._execute import dispatch
from dsh_tools._pipeline._open import prepare
from dsh_tools._pipeline._registry import pipeline_host
from dsh_tools._pipeline._results import (
    ABORTED_BEFORE_DISPATCH as CANONICAL_ABORTED_BEFORE_DISPATCH,
)
from expected import ABORTED_BEFORE_DISPATCH
from support import (
    Agent,
    error_result,
    execution_input,
    first_text,
    note_post_execute,
    plugin_context,
    plugin_label,
    record_post_execute,
    registry_with,
    tool,
)


def _text(text: str) -> tuple[TextBlock, ...]:
    return (TextBlock(text=text),)


class Recorder:
    """A result observer that keeps what it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[ToolExecution, ToolExecutionResult]] = []

    def __call__(self, execution: ToolExecution, result: ToolExecutionResult) -> None:
        self.seen.append((execution, result))


def _input(
    name: str = "echo",
    arguments: object = None,
    *,
    signal: CancelSignal | None = None,
    agent: object = None,
) -> ToolExecutionInput:
    arguments = {"text": "hi"} if arguments is None else arguments
    return execution_input(name, arguments, call_id="call-1", signal=signal, agent=agent)


def _registry(body: Any = None, name: str = "echo") -> tuple[ToolRegistry, list[Any]]:
    """A registry with one tool whose body records its calls (and echoes ``text``)."""
    calls: list[Any] = []

    async def echo(args: Any, context: ToolRunContext) -> ToolReturn:
        calls.append((args, context))
        return str(args["text"])

    definition = tool(
        name, echo if body is None else body, description="echo", parameters={"type": "object"}
    )
    return registry_with(definition), calls


# --- the happy path and the body's return shapes ----------------------------------------------


async def test_a_str_body_result_becomes_one_text_block() -> None:
    registry, _ = _registry()

    result = await registry.execute(_input())

    assert ToolExecutionResult(content=_text("hi"), is_error=False) == result


async def test_a_tool_output_keeps_its_meta() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        return ToolOutput(content=[TextBlock(text="a")], meta={"lines": 3})

    registry, _ = _registry(body)

    result = await registry.execute(_input())

    assert ToolExecutionResult(content=_text("a"), is_error=False, meta={"lines": 3}) == result


async def test_a_list_of_blocks_is_the_content() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        return [TextBlock(text="a"), TextBlock(text="b")]

    registry, _ = _registry(body)

    result = await registry.execute(_input())

    assert (TextBlock(text="a"), TextBlock(text="b")) == result.content


async def test_the_body_receives_the_frozen_argument_snapshot() -> None:
    registry, calls = _registry()
    arguments = {"text": "hi", "list": [1, 2]}

    await registry.execute(_input(arguments=arguments))

    args = calls[0][0]
    expected = ({"text": "hi", "list": (1, 2)}, False)
    assert expected == (args, args is arguments)


async def test_the_body_receives_the_caller_signal_when_no_wrapper_replaced_it() -> None:
    registry, calls = _registry()
    signal = CancelController().signal

    await registry.execute(_input(signal=signal))

    assert signal is calls[0][1].signal


async def test_the_result_is_frozen() -> None:
    registry, _ = _registry()

    result = await registry.execute(_input())

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        result.is_error = True  # pyright: ignore[reportAttributeAccessIssue]


# --- failures that become results ------------------------------------------------------------


async def test_a_raising_body_becomes_an_error_result_without_error_info() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        raise ValueError("boom")

    registry, _ = _registry(body)

    assert error_result("Error: boom") == await registry.execute(_input())


async def test_a_harness_error_from_the_body_keeps_its_name_and_code() -> None:
    class QuotaError(HarnessError):
        pass

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        raise QuotaError("over quota", "QUOTA")

    registry, _ = _registry(body)

    assert error_result("Error: over quota", ToolErrorInfo(name="QuotaError", code="QUOTA")) == (
        await registry.execute(_input())
    )


async def test_an_exception_group_from_the_body_becomes_an_error_result() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        async def fail() -> None:
            raise KeyError("k")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail)
        return "unreachable"

    registry, _ = _registry(body)

    result = await registry.execute(_input())

    assert (
        error_result(
            "Error: ExceptionGroup \"Exceptions from Trio nursery\" with 1 sub-exception: KeyError: 'k'"
        )
        == result
    )


async def test_a_base_exception_from_the_body_is_never_turned_into_a_result() -> None:
    class Stop(BaseException):
        pass

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        raise Stop

    registry, _ = _registry(body)
    recorder = Recorder()
    registry.hooks.result.add(recorder)

    with pytest.raises(Stop):
        await registry.execute(_input())
    expected = []
    assert expected == recorder.seen


async def test_an_input_that_is_not_a_tool_execution_input_is_a_typeerror_result() -> None:
    with pytest.raises(TypeError, match=r"^execute\(\) takes a ToolExecutionInput, not dict$"):
        await ToolRegistry().execute({"name": "x"})  # pyright: ignore[reportArgumentType]


async def test_an_unknown_tool_is_an_error_result_that_reaches_post_execute() -> None:
    registry, _ = _registry()
    seen = record_post_execute(registry)

    result = await registry.execute(_input("nope"))

    expected = error_result(
        'Error: unknown tool "nope"', ToolErrorInfo(name="ToolNotFoundError", code="UNKNOWN_TOOL")
    )
    assert ([expected], expected) == (seen, result)


# --- stage 0 and 1 ----------------------------------------------------------------------------


async def test_non_json_arguments_give_the_argument_error_and_a_none_arguments_execution() -> None:
    registry, calls = _registry()
    recorder = Recorder()
    registry.hooks.result.add(recorder)

    result = await registry.execute(_input(arguments={"x": {1, 2}}))

    expected = error_result("Error: tool execution arguments must be losslessly JSON-serializable")
    assert (expected, [], None, 1) == (
        result,
        calls,
        recorder.seen[0][0].arguments,
        len(recorder.seen),
    )


async def test_an_argument_failure_skips_pre_execute_and_post_execute() -> None:
    registry, _ = _registry()
    ran: list[str] = []

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        ran.append("pre")
        return await next()

    registry.hooks.pre_execute.add(pre)
    note_post_execute(registry, ran)

    await registry.execute(_input(arguments=float("nan")))

    expected = []
    assert expected == ran


async def test_an_argument_failure_wins_over_a_cancelled_signal() -> None:
    registry, _ = _registry()
    controller = CancelController()
    controller.cancel()

    result = await registry.execute(_input(arguments=b"bytes", signal=controller.signal))

    assert (
        error_result("Error: tool execution arguments must be losslessly JSON-serializable")
        == result
    )


async def test_a_pre_cancelled_call_skips_every_policy_and_is_aborted_before_dispatch() -> None:
    registry, calls = _registry()
    ran: list[str] = []

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        ran.append("pre")
        return await next()

    registry.hooks.pre_execute.add(pre)
    registry.guard(lambda execution: ran.append("guard"))
    recorder = Recorder()
    registry.hooks.result.add(recorder)
    controller = CancelController()
    controller.cancel()

    result = await registry.execute(_input(signal=controller.signal))

    assert (ABORTED_BEFORE_DISPATCH, [], [], 1, controller.signal) == (
        result,
        ran,
        calls,
        len(recorder.seen),
        recorder.seen[0][0].signal,
    )


async def test_execute_is_a_checkpoint_on_the_pre_cancelled_path() -> None:
    registry, _ = _registry()
    controller = CancelController()
    controller.cancel()

    with trio.testing.assert_checkpoints():
        await registry.execute(_input(signal=controller.signal))


async def test_execute_is_a_checkpoint_on_the_argument_failure_path() -> None:
    registry, _ = _registry()

    with trio.testing.assert_checkpoints():
        await registry.execute(_input(arguments=b"bytes"))


async def test_execute_is_a_checkpoint_when_nothing_in_the_call_awaits() -> None:
    registry, _ = _registry()

    with trio.testing.assert_checkpoints():
        await registry.execute(_input())


# --- stage 2: pre_execute ---------------------------------------------------------------------


async def test_pre_execute_listeners_run_outermost_first_in_registration_order() -> None:
    registry, _ = _registry()
    order: list[str] = []

    def listener(label: str) -> Any:
        async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
            order.append(f"{label} in")
            decision = await next()
            order.append(f"{label} out")
            return decision

        return pre

    registry.hooks.pre_execute.add(listener("a"))
    registry.hooks.pre_execute.add(listener("b"))
    registry.hooks.pre_execute.add(listener("first"), prepend=True)

    await registry.execute(_input())

    expected = ["first in", "a in", "b in", "b out", "a out", "first out"]
    assert expected == order


async def test_a_pre_execute_listener_that_does_not_call_next_short_circuits() -> None:
    registry, calls = _registry()
    inner: list[str] = []

    async def deny(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Deny("not today")

    async def never(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        inner.append("ran")
        return Allow()

    registry.hooks.pre_execute.add(deny)
    registry.hooks.pre_execute.add(never)

    result = await registry.execute(_input())

    assert (error_result("Error: not today"), [], []) == (result, inner, calls)


async def test_arguments_passed_to_pre_execute_next_are_ignored() -> None:
    registry, _ = _registry()
    seen: list[ToolExecution] = []

    async def outer(execution: ToolExecution, next: Any) -> PreToolDecision:
        return await next("ignored", extra=1)

    async def inner(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        seen.append(execution)
        return await next()

    registry.hooks.pre_execute.add(outer)
    registry.hooks.pre_execute.add(inner)

    result = await registry.execute(_input())

    expected = (False, "call-1")
    assert expected == (result.is_error, seen[0].call_id)


async def test_pre_execute_runs_for_unknown_tools() -> None:
    registry, _ = _registry()
    names: list[str] = []

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        names.append(execution.name)
        return await next()

    registry.hooks.pre_execute.add(pre)

    await registry.execute(_input("nope"))

    expected = ["nope"]
    assert expected == names


async def test_a_raising_pre_execute_listener_is_a_final_error_that_skips_post_execute() -> None:
    registry, calls = _registry()
    posts: list[str] = []

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        raise HarnessError("policy down", "POLICY")

    registry.hooks.pre_execute.add(pre)
    note_post_execute(registry, posts)

    result = await registry.execute(_input())

    assert (
        error_result("Error: policy down", ToolErrorInfo(name="HarnessError", code="POLICY")),
        [],
        [],
    ) == (result, posts, calls)


async def test_a_pre_execute_failure_wins_over_a_concurrent_cancellation() -> None:
    registry, _ = _registry()
    controller = CancelController()

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        controller.cancel()
        raise RuntimeError("broken policy")

    registry.hooks.pre_execute.add(pre)

    result = await registry.execute(_input(signal=controller.signal))

    assert error_result("Error: broken policy") == result


async def test_a_pre_execute_listener_returning_no_decision_is_a_finalerror_result() -> None:
    registry, calls = _registry()

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> Any:
        return "allow"

    registry.hooks.pre_execute.add(pre)

    result = await registry.execute(_input())

    assert (
        error_result('Error: tools/pre-execute returned "allow", not Allow, Deny or Ask'),
        [],
    ) == (
        result,
        calls,
    )


async def test_a_denial_reaches_post_execute_and_skips_the_body() -> None:
    registry, calls = _registry()

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Deny("no writes")

    registry.hooks.pre_execute.add(pre)
    seen = record_post_execute(registry)

    result = await registry.execute(_input())

    assert ([error_result("Error: no writes")], error_result("Error: no writes"), []) == (
        seen,
        result,
        calls,
    )


async def test_a_denial_wins_over_a_concurrent_cancellation() -> None:
    registry, _ = _registry()
    controller = CancelController()

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        controller.cancel()
        return Deny("no")

    registry.hooks.pre_execute.add(pre)

    assert error_result("Error: no") == await registry.execute(_input(signal=controller.signal))


# --- stage 7: execute wrappers ----------------------------------------------------------------


async def test_wrappers_share_one_dispatch_execution_with_the_call_token() -> None:
    registry, calls = _registry()
    seen: list[ToolDispatchExecution] = []
    tokens: list[object] = []

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        tokens.append(execution.token)
        return await next()

    def wrapper() -> Any:
        async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
            seen.append(execution)
            return await next()

        return wrap

    registry.hooks.pre_execute.add(pre)
    registry.hooks.execute.add(wrapper())
    registry.hooks.execute.add(wrapper())

    await registry.execute(_input())

    expected = (True, True)
    assert expected == (
        seen[0] is seen[1],
        seen[0].token is tokens[0] is calls[0][1].token,
    )


async def test_a_wrapper_that_does_not_call_next_skips_the_body() -> None:
    registry, calls = _registry()

    async def cached(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        return ToolExecutionResult(content=_text("cached"), is_error=False)

    registry.hooks.execute.add(cached)

    result = await registry.execute(_input())

    assert (ToolExecutionResult(content=_text("cached"), is_error=False), []) == (result, calls)


async def test_a_wrapper_sees_a_raising_body_as_an_error_result() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        raise ValueError("bad")

    registry, _ = _registry(body)
    seen: list[ToolExecutionResult] = []

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        result = await next()
        seen.append(result)
        return result

    registry.hooks.execute.add(wrap)

    await registry.execute(_input())

    assert [error_result("Error: bad")] == seen


async def test_a_raising_wrapper_is_a_final_error_that_drops_deferred_contexts() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(plugin_context("deferred"))
        return "ok"

    registry, _ = _registry(body)
    posts: list[str] = []

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        await next()
        raise RuntimeError("wrapper broke")

    registry.hooks.execute.add(wrap)
    note_post_execute(registry, posts)

    result = await registry.execute(_input())

    assert (error_result("Error: wrapper broke"), []) == (result, posts)


async def test_a_wrapper_signal_replacement_reaches_the_body_fused_and_is_restored() -> None:
    registry, calls = _registry()
    caller = CancelController().signal
    replacement = CancelController().signal
    after: list[CancelSignal] = []

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        execution.signal = replacement
        result = await next()
        after.append(execution.signal)
        execution.signal = caller
        return result

    registry.hooks.execute.add(wrap)

    await registry.execute(_input(signal=caller))

    body_signal = calls[0][1].signal
    assert (False, False, [replacement]) == (
        body_signal is caller,
        body_signal is replacement,
        after,
    )


async def test_a_wrapper_signal_already_cancelled_gives_aborted_before_dispatch() -> None:
    registry, calls = _registry()
    controller = CancelController()
    controller.cancel("wrapper")

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        upstream = execution.signal
        execution.signal = controller.signal
        try:
            return await next()
        finally:
            execution.signal = upstream

    registry.hooks.execute.add(wrap)

    result = await registry.execute(_input())

    expected: tuple[ToolExecutionResult, list[Any]] = (ABORTED_BEFORE_DISPATCH, [])
    assert expected == (result, calls)


async def test_a_wrapper_may_call_next_twice_to_retry() -> None:
    attempts: list[int] = []

    async def flaky(args: Any, context: ToolRunContext) -> ToolReturn:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise RuntimeError("transient")
        return "second time"

    registry, _ = _registry(flaky)

    async def retry(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        result = await next()
        return await next() if result.is_error else result

    registry.hooks.execute.add(retry)

    result = await registry.execute(_input())

    assert (ToolExecutionResult(content=_text("second time"), is_error=False), [0, 1]) == (
        result,
        attempts,
    )


# --- contexts ---------------------------------------------------------------------------------


async def test_contexts_are_deferred_then_wrapper_then_post_execute() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(plugin_context("deferred 1"))
        context.defer_context(plugin_context("deferred 2"))
        return "ok"

    registry, _ = _registry(body)

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        result = await next()
        return attrs.evolve(result, additional_contexts=(plugin_context("wrapper"),))

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        return Accept(additional_contexts=[plugin_context("post")])

    registry.hooks.execute.add(wrap)
    registry.hooks.post_execute.add(post)

    result = await registry.execute(_input())

    expected = ["deferred 1", "deferred 2", "wrapper", "post"]
    assert expected == [plugin_label(context) for context in result.additional_contexts]


async def test_deferred_contexts_are_kept_on_an_error_result() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(plugin_context("deferred"))
        raise RuntimeError("failed after deferring")

    registry, _ = _registry(body)

    result = await registry.execute(_input())

    assert (
        ToolExecutionResult(
            content=_text("Error: failed after deferring"),
            is_error=True,
            additional_contexts=(plugin_context("deferred"),),
        )
        == result
    )


# --- stage 8: post_execute --------------------------------------------------------------------


async def test_accept_with_empty_content_still_replaces_the_content() -> None:
    registry, _ = _registry()

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        return Accept(content=())

    registry.hooks.post_execute.add(post)

    assert ToolExecutionResult(content=(), is_error=False) == await registry.execute(_input())


async def test_accept_keeps_the_prior_error_and_meta() -> None:
    class Broken(HarnessError):
        pass

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        raise Broken("x", "BROKEN")

    registry, _ = _registry(body)

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        return Accept(content=[TextBlock(text="Error: rewritten")])

    registry.hooks.post_execute.add(post)

    assert error_result("Error: rewritten", ToolErrorInfo(name="Broken", code="BROKEN")) == (
        await registry.execute(_input())
    )


async def test_block_drops_prior_contexts_error_and_meta() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(plugin_context("deferred"))
        return ToolOutput(content=[TextBlock(text="secret")], meta={"m": 1})

    registry, _ = _registry(body)

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        return Block(
            feedback=[TextBlock(text="redacted")], additional_contexts=[plugin_context("b")]
        )

    registry.hooks.post_execute.add(post)

    assert ToolExecutionResult(
        content=_text("redacted"), is_error=True, additional_contexts=(plugin_context("b"),)
    ) == await registry.execute(_input())


async def test_post_execute_runs_outermost_first_and_the_outer_decision_wins() -> None:
    registry, _ = _registry()

    async def outer(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        inner_decision = await next()
        assert isinstance(inner_decision, Block)
        return Accept(content=[TextBlock(text="outer overrides")])

    async def inner(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        return Block(feedback=[TextBlock(text="inner")])

    registry.hooks.post_execute.add(outer)
    registry.hooks.post_execute.add(inner)

    assert ToolExecutionResult(content=_text("outer overrides"), is_error=False) == (
        await registry.execute(_input())
    )


async def test_a_raising_post_execute_listener_is_a_final_error_without_contexts() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(plugin_context("deferred"))
        return "ok"

    registry, _ = _registry(body)

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        raise RuntimeError("post broke")

    registry.hooks.post_execute.add(post)

    assert error_result("Error: post broke") == await registry.execute(_input())


async def test_a_post_execute_listener_returning_no_decision_is_a_finalerror_result() -> None:
    registry, _ = _registry()

    async def post(execution: ToolExecution, result: ToolExecutionResult, next: Any) -> Any:
        return None

    registry.hooks.post_execute.add(post)

    assert error_result("Error: tools/post-execute returned None, not Accept or Block") == (
        await registry.execute(_input())
    )


# --- stage 9: final materialization -----------------------------------------------------------

INVALID_RESULT = error_result("Error: tool result must be losslessly JSON-serializable")


@pytest.mark.parametrize(
    "returned",
    [None, {"nan": math.nan}, [TextBlock(text="ok"), "not a block"]],
)
async def test_a_body_returning_something_that_is_not_content_is_an_invalid_result(
    returned: object,
) -> None:
    async def body(args: Any, context: ToolRunContext) -> Any:
        return returned

    registry, _ = _registry(body)

    expected = INVALID_RESULT
    assert expected == await registry.execute(_input())


async def test_a_block_with_a_non_str_text_is_an_invalid_result() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        return [TextBlock(text=5)]  # pyright: ignore[reportArgumentType]

    registry, _ = _registry(body)

    expected = INVALID_RESULT
    assert expected == await registry.execute(_input())


async def test_an_invalid_result_drops_its_contexts() -> None:
    async def body(args: Any, context: ToolRunContext) -> Any:
        context.defer_context(plugin_context("deferred"))
        return None

    registry, _ = _registry(body)

    expected = INVALID_RESULT
    assert expected == await registry.execute(_input())


async def test_a_wrapper_returning_something_that_is_not_a_result_is_an_invalid_result() -> None:
    registry, _ = _registry()

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> Any:
        await next()
        return "not a result"

    registry.hooks.execute.add(wrap)

    expected = INVALID_RESULT
    assert expected == await registry.execute(_input())


async def test_post_execute_sees_non_content_before_materialization_rejects_it() -> None:
    async def body(args: Any, context: ToolRunContext) -> Any:
        return None

    registry, _ = _registry(body)
    seen: list[tuple[object, ...]] = []

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        seen.append(result.content)
        return Accept(content=[TextBlock(text="repaired")])

    registry.hooks.post_execute.add(post)

    result = await registry.execute(_input())

    assert ([(None,)], ToolExecutionResult(content=_text("repaired"), is_error=False)) == (
        seen,
        result,
    )


# --- stage 10: result observers ---------------------------------------------------------------


async def test_execute_returns_the_very_object_the_observers_saw() -> None:
    registry, _ = _registry()
    recorder = Recorder()
    registry.hooks.result.add(recorder)

    result = await registry.execute(_input())

    assert result is recorder.seen[0][1]


async def test_observers_see_the_execution_with_the_call_identity() -> None:
    registry, calls = _registry()
    recorder = Recorder()
    registry.hooks.result.add(recorder)
    agent = Agent()

    await registry.execute(_input(agent=agent))

    execution = recorder.seen[0][0]
    assert ("call-1", "echo", {"text": "hi"}, agent, calls[0][1].token) == (
        execution.call_id,
        execution.name,
        execution.arguments,
        execution.agent,
        execution.token,
    )


async def test_a_raising_observer_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry, _ = _registry()

    def broken(execution: ToolExecution, result: ToolExecutionResult) -> None:
        raise RuntimeError("observer down")

    recorder = Recorder()
    registry.hooks.result.add(broken)
    registry.hooks.result.add(recorder)

    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        result = await registry.execute(_input())

    expected = (
        ['tool "echo" (call-1): tools/result observer failed: observer down'],
        1,
        False,
    )
    assert expected == (
        [r.getMessage() for r in caplog.records],
        len(recorder.seen),
        result.is_error,
    )


async def test_an_async_observer_is_reported_as_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry, _ = _registry()

    async def observer(execution: ToolExecution, result: ToolExecutionResult) -> None:
        return None

    registry.hooks.result.add(observer)

    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        await registry.execute(_input())

    expected = [
        'tool "echo" (call-1): tools/result observer failed: result observers are synchronous: '
        "it returned an awaitable"
    ]
    assert expected == [r.getMessage() for r in caplog.records]


# --- scope filtering --------------------------------------------------------------------------


async def test_scoped_hooks_hear_only_calls_of_their_agent() -> None:
    registry, _ = _registry()
    agent = Agent()
    heard: list[object] = []

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        heard.append(execution.agent)
        return await next()

    registry.scope(agent).hooks.pre_execute.add(pre)

    await registry.execute(_input())
    await registry.execute(_input(agent=Agent()))
    await registry.execute(_input(agent=agent))

    assert [agent] == heard


async def test_scoped_observers_hear_only_calls_of_their_agent() -> None:
    registry, _ = _registry()
    agent = Agent()
    recorder = Recorder()
    registry.scope(agent).hooks.result.add(recorder)

    await registry.execute(_input())
    await registry.execute(_input(agent=agent))

    assert [agent] == [execution.agent for execution, _ in recorder.seen]


async def test_global_and_scoped_listeners_run_in_one_registration_order() -> None:
    registry, _ = _registry()
    agent = Agent()
    order: list[str] = []

    def listener(label: str) -> Any:
        async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
            order.append(label)
            return await next()

        return pre

    registry.hooks.pre_execute.add(listener("global 1"))
    registry.scope(agent).hooks.pre_execute.add(listener("scoped"))
    registry.hooks.pre_execute.add(listener("global 2"))

    await registry.execute(_input(agent=agent))

    expected = ["global 1", "scoped", "global 2"]
    assert expected == order


async def test_each_agent_hears_the_global_listeners_and_its_own_as_they_change() -> None:
    registry, _ = _registry()
    first, second = Agent(), Agent()
    order: list[str] = []

    def listener(label: str) -> Any:
        async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
            order.append(label)
            return await next()

        return pre

    registry.scope(first).hooks.pre_execute.add(listener("first's"))
    second_own = registry.scope(second).hooks.pre_execute.add(listener("second's"))
    await registry.execute(_input(agent=first))
    await registry.execute(_input(agent=second))
    registry.hooks.pre_execute.add(listener("global"), prepend=True)
    second_own()
    await registry.execute(_input(agent=first))
    await registry.execute(_input(agent=second))

    expected = ["first's", "second's", "global", "first's", "global"]
    assert expected == order


async def test_closing_a_scope_removes_its_hooks() -> None:
    registry, _ = _registry()
    agent = Agent()
    recorder = Recorder()
    scope = registry.scope(agent)
    scope.hooks.result.add(recorder)
    scope.close()

    await registry.execute(_input(agent=agent))

    expected = []
    assert expected == recorder.seen


async def test_a_scoped_tool_runs_for_its_agent() -> None:
    registry, _ = _registry()
    agent = Agent()

    async def mine(args: Any, context: ToolRunContext) -> ToolReturn:
        return "scoped echo"

    registry.scope(agent).register(
        ToolDefinition(name="echo", description="mine", parameters={}, execute=mine)
    )

    expected = ("hi", "scoped echo")
    assert expected == (
        first_text(await registry.execute(_input())),
        first_text(await registry.execute(_input(agent=agent))),
    )


async def test_a_hook_disposer_removes_only_its_registration() -> None:
    registry, _ = _registry()
    recorder = Recorder()
    registry.hooks.result.add(recorder)
    dispose = registry.hooks.result.add(recorder)

    dispose()
    await registry.execute(_input())

    expected = 1
    assert expected == len(recorder.seen)


# --- the stage API ----------------------------------------------------------------------------


async def test_the_stages_compose_to_execute() -> None:
    registry, _ = _registry()

    prepared = await prepare(pipeline_host(registry), _input())
    needed = prepared.needs_dispatch
    await dispatch(prepared)
    result = await complete(prepared)

    assert (True, ToolExecutionResult(content=_text("hi"), is_error=False)) == (needed, result)


async def test_a_denied_call_needs_no_dispatch() -> None:
    registry, _ = _registry()
    registry.guard(lambda execution: "no")

    prepared = await prepare(pipeline_host(registry), _input())

    assert (False, error_result("Error: no")) == (
        prepared.needs_dispatch,
        await complete(prepared),
    )


async def test_completing_an_allowed_call_without_dispatch_is_aborted_before_dispatch() -> None:
    registry, calls = _registry()

    prepared = await prepare(pipeline_host(registry), _input())

    expected: tuple[ToolExecutionResult, list[Any]] = (ABORTED_BEFORE_DISPATCH, [])
    assert expected == (await complete(prepared), calls)


async def test_dispatch_refuses_to_run_twice() -> None:
    registry, _ = _registry()
    prepared = await prepare(pipeline_host(registry), _input())
    await dispatch(prepared)

    with pytest.raises(RuntimeError):
        await dispatch(prepared)


def test_the_canonical_aborted_before_dispatch_result() -> None:
    expected = ABORTED_BEFORE_DISPATCH
    assert expected == CANONICAL_ABORTED_BEFORE_DISPATCH


# --- signal fusion -------------------------------------------------------------


async def test_cancelling_the_caller_cancels_the_fused_body_signal_but_not_the_replacement() -> (
    None
):
    caller = CancelController()
    replacement = CancelController()
    states: list[tuple[bool, bool]] = []

    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        caller.cancel("caller")
        states.append((context.signal.cancelled, replacement.signal.cancelled))
        return "ok"

    registry, _ = _registry(body)

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        upstream = execution.signal
        execution.signal = replacement.signal
        try:
            return await next()
        finally:
            execution.signal = upstream

    registry.hooks.execute.add(wrap)

    await registry.execute(_input(signal=caller.signal))

    expected = [(True, False)]
    assert expected == states


async def test_the_wrapper_reason_wins_when_both_signals_are_already_cancelled() -> None:
    caller = CancelController()
    replacement = CancelController()
    reasons: list[object] = []

    async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        upstream = execution.signal
        caller.cancel("caller reason")
        replacement.cancel("wrapper reason")
        execution.signal = replacement.signal
        try:
            return await next()
        finally:
            execution.signal = upstream

    async def inner(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        result = await next()
        reasons.append(execution.signal.reason)
        return result

    registry, _ = _registry()
    registry.hooks.execute.add(wrap)
    registry.hooks.execute.add(inner)

    await registry.execute(_input(signal=caller.signal))

    expected = ["wrapper reason"]
    assert expected == reasons


async def test_execute_wrappers_run_outermost_first_and_prepend_goes_outside() -> None:
    registry, _ = _registry()
    order: list[str] = []

    def wrapper(label: str) -> Any:
        async def wrap(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
            order.append(label)
            return await next()

        return wrap

    registry.hooks.execute.add(wrapper("a"))
    registry.hooks.execute.add(wrapper("b"))
    registry.hooks.execute.add(wrapper("outermost"), prepend=True)

    await registry.execute(_input())

    expected = ["outermost", "a", "b"]
    assert expected == order


async def test_post_execute_prepend_goes_outside() -> None:
    registry, _ = _registry()
    order: list[str] = []

    def listener(label: str) -> Any:
        async def post(
            execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
        ) -> PostToolDecision:
            order.append(label)
            return await next()

        return post

    registry.hooks.post_execute.add(listener("a"))
    registry.hooks.post_execute.add(listener("outermost"), prepend=True)

    await registry.execute(_input())

    expected = ["outermost", "a"]
    assert expected == order


async def test_execution_mode_accepts_the_prepared_execution() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        return "ok"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(
            name="echo",
            description="d",
            parameters={},
            execute=body,
            is_concurrency_safe=_frozen_text_is_hi,
        )
    )

    prepared = await prepare(pipeline_host(registry), _input())

    expected = "parallel"
    assert expected == registry.execution_mode(prepared.execution()).kind


def _frozen_text_is_hi(args: Any) -> bool:
    return bool(args["text"] == "hi")
