"""``Ask`` decisions and the approval service."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from dsh_tools import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalSetupWarning,
    Ask,
    CancelController,
    CancelSignal,
    GenericCallView,
    PreExecuteNext,
    PreToolDecision,
    TextBlock,
    ToolCallKind,
    ToolErrorInfo,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    snapshot_json,
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


class Service:
    """An approval service that answers with a fixed outcome and records its requests."""

    def __init__(self, answer: object, on_request: Any = None) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []
        self.on_request = on_request

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.requests.append(request)
        if self.on_request is not None:
            self.on_request()
        return self.answer  # pyright: ignore[reportReturnType]


def _setup(
    service: object = None, reason: str | None = None
) -> tuple[ToolRegistry, list[str], list[str]]:
    """A registry whose one pre_execute listener asks, with a recording body and guard."""
    ran: list[str] = []
    guards: list[str] = []

    async def ask(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Ask(reason)

    def guard(execution: ToolExecution) -> None:
        guards.append("guard")

    registry = registry_with(
        tool("rm", noting_body(ran, "done"), description="remove"),
        approval=service,  # pyright: ignore[reportArgumentType]
    )
    registry.hooks.pre_execute.add(ask)
    registry.guard(guard)
    return registry, ran, guards


def _input(agent: object = None, signal: CancelSignal | None = None) -> ToolExecutionInput:
    return execution_input("rm", call_id="call-7", signal=signal, agent=agent)


async def test_ask_without_a_service_denies_with_the_default_text() -> None:
    registry, ran, _ = _setup()

    # the original's text for the model, and (beyond it) a warning for the developer
    with pytest.warns(ApprovalSetupWarning, match="the registry has no approval service"):
        result = await registry.execute(_input(Agent()))

    expected = (error_result('Error: tool "rm" requires approval (not yet supported)'), NOTHING)
    assert expected == (result, ran)


async def test_ask_without_a_service_denies_with_the_ask_reason_when_given() -> None:
    registry, _, _ = _setup(reason="deletes files")

    expected = error_result("Error: deletes files")
    with pytest.warns(ApprovalSetupWarning):
        assert expected == await registry.execute(_input(Agent()))


async def test_ask_without_a_service_keeps_an_empty_reason_as_given() -> None:
    registry, _, _ = _setup(reason="")

    expected = error_result("Error: ")
    with pytest.warns(ApprovalSetupWarning):
        assert expected == await registry.execute(_input(Agent()))


async def test_ask_for_a_call_without_agent_denies_without_consulting_the_service() -> None:
    service = Service(ApprovalOutcome.ALLOWED_ONCE)
    registry, _, _ = _setup(service)

    result = await registry.execute(_input())

    expected = (
        error_result(
            'Error: tool "rm" requires approval, but the call has no agent to route it through'
        ),
        NOTHING,
    )
    assert expected == (result, service.requests)


async def test_the_request_carries_agent_tool_call_signal_and_reason() -> None:
    service = Service(ApprovalOutcome.REJECTED)
    registry, _, _ = _setup(service, reason="deletes files")
    agent = Agent()
    signal = CancelController().signal

    await registry.execute(_input(agent, signal))

    expected = ApprovalRequest(
        agent=agent,
        tool_name="rm",
        call_id="call-7",
        signal=signal,
        reason="deletes files",
        arguments=snapshot_json({}),
        view=GenericCallView(title="rm", kind=ToolCallKind.OTHER, raw_input={}),
    )
    assert [expected] == service.requests


async def test_the_request_reason_is_absent_when_ask_gave_none() -> None:
    service = Service(ApprovalOutcome.REJECTED)
    registry, _, _ = _setup(service)

    await registry.execute(_input(Agent()))

    assert service.requests[0].reason is None


async def test_allowed_once_runs_the_guards_and_the_body() -> None:
    service = Service(ApprovalOutcome.ALLOWED_ONCE)
    registry, ran, guards = _setup(service)

    result = await registry.execute(_input(Agent()))

    expected = (ToolExecutionResult(content=(TextBlock(text="done"),), is_error=False), ["body"])
    assert expected == (result, ran)
    expected = ["guard"]
    assert expected == guards


async def test_allowed_once_as_a_plain_string_is_accepted() -> None:
    service = Service("allowed-once")
    registry, ran, _ = _setup(service)

    await registry.execute(_input(Agent()))

    expected = ["body"]
    assert expected == ran


async def test_a_guard_still_denies_after_allowed_once() -> None:
    service = Service(ApprovalOutcome.ALLOWED_ONCE)
    registry, ran, _ = _setup(service)
    registry.guard(lambda execution: "guarded")

    result = await registry.execute(_input(Agent()))

    expected = (error_result("Error: guarded"), NOTHING)
    assert expected == (result, ran)


async def test_rejected_denies_with_the_user_text() -> None:
    registry, ran, guards = _setup(Service(ApprovalOutcome.REJECTED))

    result = await registry.execute(_input(Agent()))

    expected = (error_result('Error: the user rejected tool "rm"'), NOTHING, NOTHING)
    assert expected == (result, ran, guards)


async def test_cancelled_denies_when_the_caller_is_still_running() -> None:
    registry, ran, _ = _setup(Service(ApprovalOutcome.CANCELLED))

    result = await registry.execute(_input(Agent()))

    expected = (error_result('Error: approval for tool "rm" was cancelled'), NOTHING)
    assert expected == (result, ran)


async def test_cancelled_with_a_cancelled_caller_is_aborted_before_dispatch() -> None:
    controller = CancelController()
    registry, ran, _ = _setup(Service(ApprovalOutcome.CANCELLED, on_request=controller.cancel))
    seen = record_post_execute(registry)

    result = await registry.execute(_input(Agent(), controller.signal))

    aborted = error_result(
        "Error: tool call aborted before dispatch",
        ToolErrorInfo(name="AbortError", code="ABORTED_BEFORE_DISPATCH"),
    )
    # a post-result: post_execute sees it
    expected = (aborted, [aborted], NOTHING)
    assert expected == (result, seen, ran)


async def test_rejected_with_a_cancelled_caller_stays_a_denial() -> None:
    controller = CancelController()
    registry, _, _ = _setup(Service(ApprovalOutcome.REJECTED, on_request=controller.cancel))

    result = await registry.execute(_input(Agent(), controller.signal))

    expected = error_result('Error: the user rejected tool "rm"')
    assert expected == result


async def test_unavailable_denies_with_the_no_channel_text() -> None:
    registry, _, _ = _setup(Service(ApprovalOutcome.UNAVAILABLE))

    result = await registry.execute(_input(Agent()))

    expected = error_result(
        'Error: tool "rm" requires approval, but no approval channel is available'
    )
    assert expected == result


@pytest.mark.parametrize(
    ("answer", "shown"), [("yolo", '"yolo"'), (None, "None"), (True, "True"), (3, "3")]
)
async def test_an_impossible_outcome_is_a_finalerror_result(answer: object, shown: str) -> None:
    registry, ran, _ = _setup(Service(answer))
    posts: list[str] = []

    note_post_execute(registry, posts)

    result = await registry.execute(_input(Agent()))

    expected = (
        error_result(f"Error: unreachable variant in ApprovalOutcome: {shown}"),
        NOTHING,
        NOTHING,
    )
    assert expected == (result, ran, posts)


async def test_a_raising_service_is_a_finalerror_result() -> None:
    class Broken:
        async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
            raise RuntimeError("approval.request() outside an open turn: no turn")

    registry, ran, _ = _setup(Broken())

    result = await registry.execute(_input(Agent()))

    expected = (error_result("Error: approval.request() outside an open turn: no turn"), NOTHING)
    assert expected == (result, ran)


async def test_a_service_that_waits_for_the_signal_reports_cancelled() -> None:
    controller = CancelController()

    class Waiting:
        async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
            await request.signal.wait()
            return ApprovalOutcome.CANCELLED

    registry, ran, _ = _setup(Waiting())

    async def cancel_soon() -> None:
        controller.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_soon)
        result = await registry.execute(_input(Agent(), controller.signal))

    expected = (
        error_result(
            "Error: tool call aborted before dispatch",
            ToolErrorInfo(name="AbortError", code="ABORTED_BEFORE_DISPATCH"),
        ),
        NOTHING,
    )
    assert expected == (result, ran)
