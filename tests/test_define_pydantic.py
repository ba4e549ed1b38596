"""``define_tool(parameters=SomeBaseModel)``: pydantic validates, its JSON Schema is the
parameters, and the body gets the model instance."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Literal

import pydantic
import pytest

from dsh_tools import (
    CancelSignal,
    ToolArgsError,
    ToolDefinition,
    ToolRunContext,
    define_tool,
    snapshot_json,
    thaw_json,
)
from dsh_tools._values._execution import new_execution_token


class Edit(pydantic.BaseModel):
    old: str = pydantic.Field(description="Exact text to find.")
    new: str


class EditArgs(pydantic.BaseModel):
    path: str
    edits: list[Edit]
    mode: Literal["apply", "preview"] = "preview"


def _context() -> ToolRunContext:
    return ToolRunContext(
        token=new_execution_token(),
        call_id="call-1",
        name="tool",
        arguments=None,
        signal=CancelSignal.never(),
    )


async def _run(definition: ToolDefinition, arguments: object) -> object:
    returned = definition.execute(snapshot_json(arguments), _context())
    assert inspect.isawaitable(returned)
    return await returned


def _edit_tool(
    seen: list[EditArgs] | None = None,
    is_concurrency_safe: Callable[[EditArgs], bool] | None = None,
) -> ToolDefinition:
    async def body(args: EditArgs, context: ToolRunContext) -> str:
        if seen is not None:
            seen.append(args)
        return "ok"

    return define_tool(
        name="edit",
        description="d",
        parameters=EditArgs,
        execute=body,
        is_concurrency_safe=is_concurrency_safe,
    )


def test_the_parameters_are_the_models_json_schema() -> None:
    assert EditArgs.model_json_schema() == thaw_json(_edit_tool().parameters)


async def test_the_body_receives_the_validated_model_instance() -> None:
    seen: list[EditArgs] = []

    await _run(_edit_tool(seen), {"path": "a.py", "edits": [{"old": "x", "new": "y"}]})

    assert [EditArgs(path="a.py", edits=[Edit(old="x", new="y")])] == seen


async def test_pydantic_violations_become_tool_args_errors_with_paths() -> None:
    seen: list[EditArgs] = []

    with pytest.raises(ToolArgsError) as caught:
        await _run(_edit_tool(seen), {"edits": [{"new": 1}], "mode": "x"})

    assert (
        [
            '"path": Field required',
            '"edits[0].old": Field required',
            '"edits[0].new": Input should be a valid string',
            "\"mode\": Input should be 'apply' or 'preview'",
        ],
        [],
    ) == (list(caught.value.violations), seen)


def test_the_classifier_sees_the_instance_and_invalid_arguments_are_exclusive() -> None:
    definition = _edit_tool(is_concurrency_safe=lambda args: args.mode == "preview")
    classify = definition.is_concurrency_safe
    assert classify is not None

    assert [True, False, False] == [
        classify(snapshot_json({"path": "a", "edits": []})),
        classify(snapshot_json({"path": "a", "edits": [], "mode": "apply"})),
        classify(snapshot_json({"edits": []})),
    ]
