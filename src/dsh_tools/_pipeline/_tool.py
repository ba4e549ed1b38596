"""``@tool``: a tool from a plain function, its schema from the signature and its descriptions
from the docstring.

The decorator synthesizes an attrs class with one field per parameter (annotation, default and
docstring description) and hands it to ``define_tool``, so a function tool is validated,
structured and described by the one path of the class form; the function is then called with
the instance's fields as keyword arguments.
"""

from __future__ import annotations

import copy
import enum
import inspect
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Final, Unpack, overload

import attrs

from dsh_tools._values._definition import (
    ToolDefinition,
    ToolOptions,
    ToolReturn,
    check_option_names,
    is_async_body,
)
from dsh_tools._values._execution import ToolRunContext

from ._define import build_definition

__all__ = ["ToolDecorator", "ToolFunction", "tool", "tool_decorator"]

ToolFunction: typing.TypeAlias = Callable[..., Awaitable[object] | object]
"""A function that ``@tool`` turns into a definition: ``def`` or ``async def``, every parameter
annotated."""

ToolDecorator: typing.TypeAlias = Callable[[ToolFunction], ToolDefinition]
"""What ``@tool(...)`` with options returns: a decorator that makes the definition."""


@overload
def tool(fn: ToolFunction, /) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions[Any]],
) -> ToolDecorator: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions[Any]],
) -> ToolDefinition | ToolDecorator:
    """Make a :class:`~dsh_tools.ToolDefinition` from a function: ``@tool`` or ``@tool(...)``.

    The function (``def`` or ``async def``) annotates every parameter. Each parameter is a
    property of the schema, typed as an attrs-class field would be (``str``, ``int``,
    ``float``, ``bool``, ``Literal`` of strings, ``Enum`` with string values, attrs classes,
    dataclasses and ``TypedDict`` classes, ``list[X]`` / ``tuple[X, ...]`` / ``Sequence[X]``,
    ``X | None``); a parameter with a default, or annotated ``X | None``, is optional. A
    parameter annotated :class:`~dsh_tools.ToolRunContext` receives the call's context and is
    not part of the schema.

    The docstring (Google, NumPy or Sphinx style, read by ``docstring-parser``) gives the
    description (its text before the parameter sections) and each property's description.

    The body receives validated, typed values as keyword arguments; an absent optional
    parameter gets the function's default (``None`` for ``X | None`` without one), a copy of it
    when it is mutable (a ``list``, a ``dict``, ...), so no call sees what another did to it. A
    plain ``def`` runs in a worker thread, as any sync body. The function returns what a body
    returns (text, content blocks, any JSON value); a function that returns ``None`` succeeds
    with the JSON text ``null``.

    Args:
        fn: the function, when used as ``@tool`` without parentheses.
        name: the tool's name; the function's ``__name__`` by default.
        description: the tool's description; the docstring's by default.
        **options: the tool's :class:`~dsh_tools.ToolOptions`, as for
            :func:`~dsh_tools.define_tool`; the classifier and the presenters receive an
            object whose attributes are the validated parameters.

    Returns:
        The definition (``@tool``), or a decorator that makes it (``@tool(...)``).

    Raises:
        TypeError: an option that is not one of :class:`~dsh_tools.ToolOptions` (at once);
            at decoration time: ``fn`` is not callable; a parameter has no annotation, an
            annotation the schema cannot express, or is ``*args`` / ``**kwargs`` /
            positional-only (each message names the parameter); or as
            :func:`~dsh_tools.define_tool` raises for the options.
        ValueError: as :func:`~dsh_tools.define_tool` raises for the options.
    """
    decorate = tool_decorator("tool", name, description, options)
    return decorate if fn is None else decorate(fn)


def tool_decorator(
    function: str, name: str | None, description: str | None, options: ToolOptions[Any]
) -> ToolDecorator:
    """What ``@tool(...)`` returns (``function`` names the decorator, for the error of an
    unknown option, raised here): a decorator that makes the definition of a function.
    """
    check_option_names(function, options)

    def decorate(fn: ToolFunction) -> ToolDefinition:
        return _function_tool(fn, name, description, options)

    return decorate


def _function_tool(
    fn: ToolFunction, name: str | None, description: str | None, options: ToolOptions[Any]
) -> ToolDefinition:
    """The definition ``@tool`` makes of ``fn`` (see :func:`tool`)."""
    if not callable(fn):
        raise TypeError(f"@tool takes a function, not {type(fn).__name__}")
    label = getattr(fn, "__name__", None) or type(fn).__name__
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except NameError as exc:
        raise TypeError(
            f"@tool {label}: cannot resolve its annotations ({exc}); "
            "define the classes it names at module level"
        ) from exc
    doc = _parse_docstring(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    passed: list[str] = []  # what the generated body passes, in the signature's order
    # mutable defaults, by parameter: each call that gets one gets a copy of it
    copied: dict[str, object] = {}
    for parameter in signature.parameters.values():
        shown = parameter.name
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            shown = "*" + shown
        elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
            shown = "**" + shown
        if shown != parameter.name:
            raise TypeError(
                f'@tool {label}: parameter "{shown}" is variadic; '
                "a tool's arguments are named properties"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f'@tool {label}: parameter "{shown}" is positional-only; '
                "a tool's arguments are passed by name"
            )
        annotation = hints.get(parameter.name, inspect.Parameter.empty)
        if annotation is inspect.Parameter.empty:
            raise TypeError(f'@tool {label}: parameter "{shown}" has no annotation')
        value = "context" if annotation is ToolRunContext else f"args.{parameter.name}"
        if annotation is not ToolRunContext and _mutable(parameter.default):
            copied[parameter.name] = parameter.default
            value = f"(_copy({value}) if {value} is _default_{parameter.name} else {value})"
        keyword = parameter.kind is inspect.Parameter.KEYWORD_ONLY
        passed.append(f"{parameter.name}={value}" if keyword else value)
        if annotation is ToolRunContext:
            continue
        metadata: dict[str, str] = {}
        if parameter.name in doc.params:
            metadata["description"] = doc.params[parameter.name]
        fields[parameter.name] = attrs.field(
            type=annotation,
            default=attrs.NOTHING
            if parameter.default is inspect.Parameter.empty
            else parameter.default,
            metadata=metadata,
            alias=parameter.name,
        )
    # Not frozen: each instance is built for one reader (the classifier, a presenter, the body
    # below, which passes its fields on) and reaches the function only as those values, so
    # freezing would guard nothing; a frozen class's __init__ sets each field through
    # object.__setattr__, which made a function tool cost more per call than the attrs form.
    arguments_class = attrs.make_class(
        getattr(fn, "__name__", "tool") + "_arguments",
        fields,
        frozen=False,
        slots=True,
        kw_only=True,
    )
    try:
        definition = build_definition(
            getattr(fn, "__name__", "") if name is None else name,
            doc.description if description is None else description,
            arguments_class,
            _body(fn, passed, copied, may_return_none=_may_return_none(hints)),
            options,
            awaited=is_async_body(fn),
        )
    except TypeError as exc:
        # the derivation names a field as ``<class>.<field>: ...``; here it is a parameter
        prefix = arguments_class.__qualname__ + "."
        text = str(exc)
        if not text.startswith(prefix):
            raise
        parameter, _, detail = text[len(prefix) :].partition(": ")
        raise TypeError(f'@tool {label}: parameter "{parameter}": {detail}') from None
    return definition


def _body(
    fn: ToolFunction, passed: list[str], copied: dict[str, object], *, may_return_none: bool
) -> Callable[[Any, ToolRunContext], Awaitable[ToolReturn] | ToolReturn]:
    """``(instance, context) -> fn(instance.a, ..., context, ..., k=instance.k)``: ``passed``
    holds each parameter's value in the signature's order, keyword-only ones as ``name=value``;
    ``copied`` the mutable defaults, each passed as a copy of itself.

    Generated, as attrs generates ``__init__``: reading each field by name and passing it
    positionally (keyword-only parameters by keyword) costs as little as a hand-written body
    reading the attrs instance; a keyword call would make the interpreter match each name.
    ``fn`` is a default argument, a local to the body rather than a global lookup. For a
    function whose annotation says it returns something other than ``None``, it is a plain
    function even for an ``async def`` ``fn``: it returns ``fn``'s coroutine, which the
    definition's ``execute`` awaits itself (``awaited=``), so no frame sits between them. For a
    function that may return ``None`` (no return annotation, or one that admits ``None``), the
    body turns ``None`` into the JSON text ``null`` (an ``async def`` body then awaits ``fn``).
    """
    call = f"fn({', '.join(passed)})"
    defaults = "".join(f", _default_{name}=_default_{name}" for name in copied)
    head = f"(args, context, fn=fn, _copy=_copy{defaults}):\n"
    if not may_return_none:
        source = f"def call{head}    return {call}\n"
    else:
        awaited = "await " if is_async_body(fn) else ""
        source = (
            f"{'async ' if awaited else ''}def call{head}"
            f"    returned = {awaited}{call}\n"
            '    return "null" if returned is None else returned\n'
        )
    namespace: dict[str, Any] = {"fn": fn, "_copy": copy.deepcopy}
    namespace.update({f"_default_{name}": value for name, value in copied.items()})
    # parameter names are identifiers (the signature guarantees it): nothing else is formatted in
    exec(compile(source, f"<@tool {getattr(fn, '__name__', 'function')}>", "exec"), namespace)
    return namespace["call"]


# defaults no call can change: passed as they are
_IMMUTABLE: Final = (type(None), bool, int, float, complex, str, bytes, enum.Enum)


def _mutable(default: object) -> bool:
    return default is not inspect.Parameter.empty and not isinstance(default, _IMMUTABLE)


def _may_return_none(hints: dict[str, Any]) -> bool:
    """Whether the function's return annotation admits ``None`` (or it has none)."""
    if "return" not in hints:
        return True
    returned = hints["return"]
    if returned is None or returned is type(None) or returned is Any or returned is object:
        return True
    if typing.get_origin(returned) in (typing.Union, types.UnionType):
        return any(_may_return_none({"return": arm}) for arm in typing.get_args(returned))
    return False


@attrs.frozen
class _Doc:
    description: str
    params: dict[str, str]


def _parse_docstring(text: str) -> _Doc:
    if not text:
        return _Doc(description="", params={})
    # imported here: only tools defined from functions need it
    import docstring_parser

    parsed = docstring_parser.parse(text)
    return _Doc(
        description=(parsed.description or "").strip(),
        params={
            param.arg_name: param.description.strip()
            for param in parsed.params
            if param.description
        },
    )
