"""Type-level checks of ``define_tool``'s overloads and the options ``define_tool``, ``@tool`` and
``@registry.tool`` share, run by pyright (never collected by pytest).

Each ``assert_type`` proves that pyright infers the argument type of a callable passed to
``define_tool`` from ``parameters`` alone, with no annotation and no cast: the attrs class for
the class form, the frozen mapping for the spec form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, assert_type

import attrs
import trio

from dsh_tools import (
    FrozenJsonObject,
    GenericCallView,
    GenericResultView,
    JsonValue,
    SchemaSpec,
    ToolDecorator,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    ToolReturn,
    ToolRunContext,
    define_tool,
    tool,
)


@attrs.frozen(kw_only=True)
class ReadArgs:
    path: str
    mode: Literal["text", "bytes"] = "text"
    limit: int | None = None


async def read(args: ReadArgs, context: ToolRunContext) -> ToolReturn:
    await trio.lowlevel.checkpoint()
    return args.path


def class_form_infers_the_instance_type() -> ToolDefinition:
    return define_tool(
        name="read",
        description="Read a file.",
        parameters=ReadArgs,
        execute=read,
        timeout=5,
        is_concurrency_safe=lambda args: assert_type(args, ReadArgs).mode == "text",
        present_call=lambda args: GenericCallView(title=assert_type(args, ReadArgs).path),
        present_result=lambda args, result: GenericResultView(
            title=f"{assert_type(args, ReadArgs).path}: {assert_type(result, ToolResult).is_error}"
        ),
        present_progress=lambda args, event: GenericResultView(
            title=assert_type(args, ReadArgs).path
        ),
    )


def class_form_gives_field_types() -> ToolDefinition:
    return define_tool(
        name="read",
        description="Read a file.",
        parameters=ReadArgs,
        execute=read,
        is_concurrency_safe=lambda args: assert_type(args.limit, int | None) is None,
        present_call=lambda args: GenericCallView(
            title=assert_type(args.mode, Literal["text", "bytes"])
        ),
    )


SPEC: SchemaSpec = {"path": {"type": "string", "required": True}}


async def echo(args: Mapping[str, JsonValue], context: ToolRunContext) -> ToolReturn:
    await trio.lowlevel.checkpoint()
    return str(args["path"])


def spec_form_infers_the_frozen_mapping() -> ToolDefinition:
    return define_tool(
        name="echo",
        description="Echo a path.",
        parameters=SPEC,
        execute=echo,
        is_concurrency_safe=lambda args: assert_type(args, FrozenJsonObject).get("path") is None,
        present_call=lambda args: GenericCallView(title=str(assert_type(args, FrozenJsonObject))),
    )


def spec_form_accepts_an_inline_spec_literal() -> ToolDefinition:
    return define_tool(
        name="echo",
        description="Echo a path.",
        parameters={
            "path": {"type": "string", "required": True, "description": "A path."},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}},
            "env": {"type": "object", "default": {"LANG": "C", "PATH": ["/bin"]}},
        },
        execute=echo,
    )


def read_sync(args: ReadArgs, context: ToolRunContext) -> ToolReturn:
    return args.path


def class_form_accepts_a_plain_def_body() -> ToolDefinition:
    return define_tool(
        name="read",
        description="Read a file.",
        parameters=ReadArgs,
        execute=read_sync,
        abandon_on_cancel=True,
    )


def spec_form_accepts_a_sync_lambda_and_infers_the_frozen_mapping() -> ToolDefinition:
    return define_tool(
        name="echo",
        description="Echo.",
        parameters={"text": {"type": "string", "required": True}},
        execute=lambda args, context: str(assert_type(args, FrozenJsonObject).get("text")),
    )


# The options are keywords the checker knows: each ignore below must be needed (pyright reports
# an unnecessary one), so each line proves a mistake is caught before anything runs.


def an_option_that_does_not_exist_is_a_type_error() -> None:
    define_tool(name="e", description="d", parameters=SPEC, execute=echo, tmeout=5)  # pyright: ignore[reportCallIssue]


def an_option_of_the_wrong_type_is_a_type_error() -> None:
    define_tool(name="e", description="d", parameters=SPEC, execute=echo, timeout="5")  # pyright: ignore[reportCallIssue, reportArgumentType]


def typed(args: ReadArgs) -> bool:
    return args.mode == "text"


def a_classifier_of_the_class_form_is_a_type_error_in_the_spec_form() -> None:
    define_tool(  # pyright: ignore[reportCallIssue]
        name="e",
        description="d",
        parameters=SPEC,
        execute=echo,
        is_concurrency_safe=typed,  # pyright: ignore[reportArgumentType]
    )


def the_decorators_take_the_same_typed_options() -> tuple[ToolDecorator, ToolDecorator]:
    registry = ToolRegistry()
    return (
        tool(timeout=5, idempotent=True, transient_errors=["ConnectionError"]),
        registry.tool(name="r", capacity_class="disk", max_output_chars=100),
    )


def the_decorators_refuse_an_option_that_does_not_exist() -> None:
    tool(tmeout=5)  # pyright: ignore[reportCallIssue]
    ToolRegistry().tool(tmeout=5)  # pyright: ignore[reportCallIssue]
