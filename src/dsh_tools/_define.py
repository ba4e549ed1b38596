"""``define_tool``: a :class:`~dsh_tools.ToolDefinition` whose arguments are validated and typed.

Two forms, chosen by ``parameters``:

- a :data:`~dsh_tools.SchemaSpec`: the body receives the frozen argument mapping;
- an attrs class: the spec is derived from its fields, and the validated arguments are
  structured by cattrs into an instance, so the body (and the classifier and presenters) are
  typed by the class with no casts.

Both forms validate with the same compiled spec, so a violation reads the same either way.
"""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar, overload

import attrs
import trio
from attrs import AttrsInstance

from ._attrs_schema import derive_attrs_schema
from ._converter import converter
from ._definition import (
    ToolDefinition,
    ToolReturn,
    check_definition_fields,
    check_timeout,
    is_async_body,
)
from ._errors import ToolArgsError
from ._execution import ToolResult, ToolRunContext
from ._json import CHECKED_BY, FrozenJsonObject, snapshot_json
from ._presentation import ToolCallView, ToolResultView
from ._schema import SchemaSpec, compile_spec, schema_spec_to_json_schema

__all__ = ["define_tool"]

A = TypeVar("A", bound=AttrsInstance)


@overload
def define_tool(
    *,
    name: str,
    description: str,
    parameters: type[A],
    execute: Callable[[A, ToolRunContext], Awaitable[ToolReturn] | ToolReturn],
    timeout: float | None = None,
    abandon_on_cancel: bool = False,
    is_concurrency_safe: Callable[[A], bool] | None = None,
    pool: str | None = None,
    idempotent: bool = False,
    present_call: Callable[[A], ToolCallView | None] | None = None,
    present_result: Callable[[A, ToolResult], ToolResultView | None] | None = None,
) -> ToolDefinition: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    parameters: SchemaSpec,
    execute: Callable[[FrozenJsonObject, ToolRunContext], Awaitable[ToolReturn] | ToolReturn],
    timeout: float | None = None,
    abandon_on_cancel: bool = False,
    is_concurrency_safe: Callable[[FrozenJsonObject], bool] | None = None,
    pool: str | None = None,
    idempotent: bool = False,
    present_call: Callable[[FrozenJsonObject], ToolCallView | None] | None = None,
    present_result: Callable[[FrozenJsonObject, ToolResult], ToolResultView | None] | None = None,
) -> ToolDefinition: ...


def define_tool(
    *,
    name: str,
    description: str,
    parameters: SchemaSpec | type[AttrsInstance],
    execute: Callable[[typing.Any, ToolRunContext], Awaitable[ToolReturn] | ToolReturn],
    timeout: float | None = None,
    abandon_on_cancel: bool = False,
    is_concurrency_safe: Callable[[typing.Any], bool] | None = None,
    pool: str | None = None,
    idempotent: bool = False,
    present_call: Callable[[typing.Any], ToolCallView | None] | None = None,
    present_result: Callable[[typing.Any, ToolResult], ToolResultView | None] | None = None,
) -> ToolDefinition:
    """Define a tool whose arguments are validated (and typed) before its body runs.

    The definition's ``parameters`` is the JSON Schema of the spec
    (:func:`~dsh_tools.schema_spec_to_json_schema`). Its wrapped callables behave as follows:

    - ``execute`` validates the arguments; on any violation it raises
      :class:`~dsh_tools.ToolArgsError` with every violation (the registry turns it into the
      error result ``Error: invalid arguments: ...``), otherwise it awaits the author's body
      with the frozen mapping (spec form) or the structured instance (class form) and returns
      what the body returns (content blocks, a :class:`~dsh_tools.ToolOutput` or a ``str``).
      It is a checkpoint on every path: the body's own, or one before raising. A plain
      ``def`` body gives a plain ``def`` ``execute`` (validation and body run together in a
      worker thread, see ``abandon_on_cancel``); an ``async def`` body (or an object whose
      ``__call__`` is one) gives an ``async def`` one.
    - ``is_concurrency_safe`` returns ``False`` for invalid arguments without calling the
      author's classifier.
    - ``present_call`` / ``present_result`` return ``None`` for invalid arguments without
      calling the author's presenter, so replaying an old or foreign log never crashes a UI. An
      exception raised by the author's presenter itself is not caught.

    Callables the author did not supply stay ``None`` on the definition.

    Args:
        name: the name the model calls.
        description: what the model reads about the tool.
        parameters: a :data:`~dsh_tools.SchemaSpec`, or an attrs class whose fields describe
            the arguments (see the "Defining tools" docs page for the supported field types).
        execute: ``async (arguments, context) -> ToolReturn``, or a plain function with the
            same arguments that the registry runs in a worker thread (it should poll
            ``context.signal.cancelled``).
        timeout: the cooperative budget in seconds applied by the timeout policy.
        abandon_on_cancel: for a plain ``def`` body: when the call is cancelled, report
            ``Error: tool call aborted (its worker thread was abandoned and may still be
            running)`` at once instead of waiting for the thread to return.
        is_concurrency_safe: ``(arguments) -> bool``; ``True`` lets a call join a parallel pool.
        pool: the capacity class of the tool's calls (``run_tool_calls(..., pool_limits=...)``
            limits how many of a class run at once inside a parallel pool).
        idempotent: running the body twice with the same arguments is harmless
            (``resume_tool_calls`` may run an interrupted call again).
        present_call: ``(arguments) -> ToolCallView | None``.
        present_result: ``(arguments, ToolResult) -> ToolResultView | None``.

    Returns:
        A :class:`~dsh_tools.ToolDefinition` ready for ``registry.register``.

    Raises:
        ValueError: ``timeout`` is not a positive finite number (``bool`` is not a number):
            ``tool "<name>": timeout must be a positive finite number of seconds (got 0)``,
            the one rule every definition follows; or the spec has an unknown ``type``
            (``unreachable variant in validateArgs: "weird"``), is cyclic, or is nested too
            deeply.
        TypeError: ``parameters`` is neither a spec nor an attrs class, the spec is malformed in
            shape or cannot be read, the attrs class has a field type the DSL cannot express,
            ``abandon_on_cancel`` is not a ``bool``, or ``pool`` is not a non-empty ``str``;
            ``name`` is not a non-empty ``str``, ``description`` is not a ``str``, ``execute``
            is not callable, or ``is_concurrency_safe``/``present_call``/``present_result`` is
            neither ``None`` nor callable.
    """
    check_definition_fields(
        name,
        description,
        execute,
        {
            "is_concurrency_safe": is_concurrency_safe,
            "present_call": present_call,
            "present_result": present_result,
        },
    )
    check_timeout(name, timeout)

    if isinstance(parameters, type):
        if not attrs.has(parameters):
            raise TypeError(
                f"define_tool({name}): parameters must be a schema spec or an attrs class, "
                f"not {parameters.__qualname__}"
            )
        derived = derive_attrs_schema(parameters)
        spec = derived.spec
        shape = derived.shape
        cls = parameters

        def convert(args: object) -> object:
            # The library's one converter is strict (exact JSON types, no unknown keys); the
            # shaper hands it only declared keys, with ints for integral floats, so validated
            # arguments always structure.
            return converter.structure(shape(typing.cast("Mapping[str, object]", args)), cls)

    elif isinstance(parameters, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        spec = parameters
        convert = _freeze
    else:
        raise TypeError(
            f"define_tool({name}): parameters must be a schema spec or an attrs class, "
            f"not {type(parameters).__name__}"
        )

    validate = compile_spec(spec)
    validated_execute: Callable[[typing.Any, ToolRunContext], Awaitable[ToolReturn] | ToolReturn]
    if is_async_body(execute):
        body = typing.cast("Callable[[object, ToolRunContext], Awaitable[ToolReturn]]", execute)

        # the spec form hands a frozen value to the body as it is
        as_is = convert is _freeze

        async def validated_execute_async(args: object, context: ToolRunContext) -> ToolReturn:
            # the pipeline's arguments were validated by this tool's classifier, usually
            if (
                type(args) is not FrozenJsonObject
                or getattr(args, CHECKED_BY, None) is not validate
            ):
                violations = validate(args)
                if violations:
                    await trio.lowlevel.checkpoint()
                    raise ToolArgsError(violations)
            elif as_is:
                return await body(args, context)
            return await body(convert(args), context)

        validated_execute = validated_execute_async
    else:
        sync_body = typing.cast("Callable[[object, ToolRunContext], ToolReturn]", execute)

        def validated_execute_sync(args: object, context: ToolRunContext) -> ToolReturn:
            violations = validate(args)
            if violations:
                raise ToolArgsError(violations)
            return sync_body(convert(args), context)

        validated_execute = validated_execute_sync

    return ToolDefinition(
        name=name,
        description=description,
        parameters=schema_spec_to_json_schema(spec),
        execute=validated_execute,
        timeout=timeout,
        abandon_on_cancel=abandon_on_cancel,
        is_concurrency_safe=None
        if is_concurrency_safe is None
        else _soft_classifier(validate, convert, is_concurrency_safe),
        pool=pool,
        idempotent=idempotent,
        present_call=None
        if present_call is None
        else _soft_call_presenter(validate, convert, present_call),
        present_result=None
        if present_result is None
        else _soft_result_presenter(validate, convert, present_result),
    )


def _freeze(args: object) -> object:
    # The registry hands bodies snapshotted arguments already; a direct caller may not.
    return args if type(args) is FrozenJsonObject else snapshot_json(args)


_Validate = Callable[[object], list[str]]
_Convert = Callable[[object], object]


def _soft_classifier(
    validate: _Validate, convert: _Convert, author: Callable[[typing.Any], bool]
) -> Callable[[object], bool]:
    as_is = convert is _freeze

    def is_concurrency_safe(args: object) -> bool:
        if validate(args):
            return False
        return author(args if as_is and type(args) is FrozenJsonObject else convert(args))

    return is_concurrency_safe


def _soft_call_presenter(
    validate: _Validate, convert: _Convert, author: Callable[[typing.Any], ToolCallView | None]
) -> Callable[[object], ToolCallView | None]:
    def present_call(args: object) -> ToolCallView | None:
        if validate(args):
            return None
        return author(convert(args))

    return present_call


def _soft_result_presenter(
    validate: _Validate,
    convert: _Convert,
    author: Callable[[typing.Any, ToolResult], ToolResultView | None],
) -> Callable[[object, ToolResult], ToolResultView | None]:
    def present_result(args: object, result: ToolResult) -> ToolResultView | None:
        if validate(args):
            return None
        return author(convert(args), result)

    return present_result
