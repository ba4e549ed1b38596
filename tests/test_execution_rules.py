"""The rules of the per-call values: the token is minted only by the registry and never leaves
the process; the view ``execute`` wrappers share refuses every assignment but a new ``signal``."""

from __future__ import annotations

import copy
import pickle

import attrs
import pytest

from dsh_tools import (
    CancelController,
    CancelSignal,
    ExecuteNext,
    ToolDefinition,
    ToolDispatchExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolExecutionToken,
    ToolRegistry,
    ToolRunContext,
)


async def _captured() -> tuple[ToolExecutionToken, ToolDispatchExecution]:
    """A real token and a real dispatch view, from one call through a registry."""
    seen: list[ToolDispatchExecution] = []

    async def body(_arguments: object, context: ToolRunContext) -> str:
        return "ok"

    async def wrapper(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        seen.append(execution)
        return await next()

    registry = ToolRegistry()
    registry.register(ToolDefinition(name="t", description="t", parameters={}, execute=body))
    registry.hooks.execute.add(wrapper)
    await registry.execute(
        ToolExecutionInput(call_id="c", name="t", arguments={}, signal=CancelSignal.never())
    )
    return seen[0].token, seen[0]


def test_a_token_has_no_public_constructor() -> None:
    with pytest.raises(TypeError, match="ToolExecutionToken has no public constructor"):
        ToolExecutionToken()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
async def test_a_token_refuses_to_be_pickled(protocol: int) -> None:
    token, _ = await _captured()

    with pytest.raises(TypeError, match="a ToolExecutionToken cannot be serialized"):
        pickle.dumps(token, protocol=protocol)


async def test_a_token_copies_as_itself() -> None:
    token, _ = await _captured()

    assert (token, token) == (copy.copy(token), copy.deepcopy(token))
    assert copy.copy(token) is token


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("token", None),
        ("call_id", "other"),
        ("name", "other"),
        ("arguments", {"a": 1}),
        ("agent", object()),
        ("parent", None),
    ],
)
async def test_the_dispatch_view_refuses_every_assignment_but_signal(
    field: str, value: object
) -> None:
    _, execution = await _captured()
    before = attrs.asdict(execution, recurse=False)

    with pytest.raises(attrs.exceptions.FrozenAttributeError):
        setattr(execution, field, value)

    assert before == attrs.asdict(execution, recurse=False)


async def test_the_dispatch_view_never_takes_none_for_its_signal() -> None:
    _, execution = await _captured()
    signal = execution.signal

    with pytest.raises(TypeError, match="never with None"):
        execution.signal = None  # type: ignore[assignment]

    assert signal is execution.signal


async def test_the_dispatch_view_takes_only_a_cancel_signal_for_its_signal() -> None:
    _, execution = await _captured()

    with pytest.raises(TypeError, match="signal must be a CancelSignal, not int"):
        execution.signal = 42  # type: ignore[assignment]


async def test_the_dispatch_view_takes_another_cancel_signal() -> None:
    _, execution = await _captured()
    replacement = CancelController().signal

    execution.signal = replacement

    assert replacement is execution.signal
