"""``define_tool``: a :class:`~dsh_tools.ToolDefinition` whose arguments are validated and typed.

Two forms, chosen by ``parameters``:

- a :data:`~dsh_tools.SchemaSpec`: the body receives the frozen argument mapping;
- a class (attrs, dataclass or ``TypedDict``): the spec is derived from its fields, and the
  validated arguments are structured by cattrs into an instance, so the body (and the
  classifier and presenters) are typed by the class with no casts;
- a pydantic ``BaseModel`` (when its author has pydantic installed; never imported here):
  pydantic validates and builds the instance, and the model's JSON Schema is the parameters.

Both forms validate with the same compiled spec, so a violation reads the same either way.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar, Unpack, overload

import attrs
import cattrs
import trio

from dsh_tools._errors import ToolArgsError
from dsh_tools._values._attrs_schema import derive_attrs_schema, is_argument_class
from dsh_tools._values._converter import cattrs_generated, converter
from dsh_tools._values._definition import (
    READS_ARGUMENTS,
    ToolBody,
    ToolDefinition,
    ToolOptions,
    ToolReturn,
    check_option_names,
    is_async_body,
    register_checked_body,
)
from dsh_tools._values._execution import ToolRunContext
from dsh_tools._values._json import CHECKED_BY, FrozenJsonObject, snapshot_json
from dsh_tools._values._schema import SchemaSpec, compile_spec, schema_spec_to_json_schema

__all__ = ["build_definition", "define_tool"]

A = TypeVar("A")

_Validate: typing.TypeAlias = Callable[[object], list[str]]
_Convert: typing.TypeAlias = Callable[[object], object]
# what a form of parameters gives a definition: its JSON Schema, validator, conversion and
# validating execute
_Parts: typing.TypeAlias = tuple[
    Mapping[str, object],
    _Validate,
    _Convert,
    Callable[[typing.Any, ToolRunContext], Awaitable[ToolReturn] | ToolReturn],
]


@overload
def define_tool(
    *,
    name: str,
    description: str,
    parameters: type[A],
    execute: Callable[[A, ToolRunContext], object],
    **options: Unpack[ToolOptions[A]],
) -> ToolDefinition: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    parameters: SchemaSpec,
    execute: Callable[[FrozenJsonObject, ToolRunContext], object],
    **options: Unpack[ToolOptions[FrozenJsonObject]],
) -> ToolDefinition: ...


def define_tool(
    *,
    name: str,
    description: str,
    parameters: SchemaSpec | type,
    execute: Callable[[typing.Any, ToolRunContext], object],
    **options: Unpack[ToolOptions[typing.Any]],
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
    - ``present_call`` / ``present_result`` / ``present_progress`` return ``None`` for invalid
      arguments without calling the author's presenter, so replaying an old or foreign log
      never crashes a UI. An exception raised by the author's presenter itself is not caught.

    Callables the author did not supply stay ``None`` on the definition.

    Args:
        name: the name the model calls.
        description: what the model reads about the tool.
        parameters: a :data:`~dsh_tools.SchemaSpec`, or an attrs class, a dataclass or a
            ``TypedDict`` whose fields describe the arguments (see the "Defining tools" docs
            page for the supported field types), or a pydantic ``BaseModel`` (pydantic's
            messages, prefixed with the path: ``"edits[0].old": Field required``).
        execute: ``async (arguments, context) -> ToolReturn``, or a plain function with the
            same arguments that the registry runs in a worker thread (it should poll
            ``context.signal.cancelled``). Beyond a ``ToolReturn`` it may return JSON data or
            an attrs / dataclass instance, which the model reads as compact JSON text (hence
            the ``object`` return type).
        **options: the tool's :class:`~dsh_tools.ToolOptions` (``timeout``,
            ``is_concurrency_safe``, ``idempotent``, ...); the classifier and the presenters
            receive the arguments as ``execute`` does.

    Returns:
        A :class:`~dsh_tools.ToolDefinition` ready for ``registry.register``.

    Raises:
        ValueError: ``timeout`` or ``idle_timeout`` is not finite or not above zero:
            ``tool "<name>": timeout must be a positive finite number of seconds (got 0)``,
            the one rule every definition follows; ``max_output_chars`` is not a positive
            ``int``; or the spec has an unknown ``type`` (``unreachable variant in
            validateArgs: "weird"``), is cyclic, or is nested too deeply. The tool's own fields
            and options are checked before its parameters.
        TypeError: an option that is not one of :class:`~dsh_tools.ToolOptions`, or one of
            the wrong type (a timeout that is not a number, ``bool`` included, says so in the
            same words); ``name`` is not a non-empty ``str``, ``description`` is not a ``str``,
            ``execute`` is not callable; ``parameters`` is neither a spec nor a supported
            class, the spec is malformed in shape or cannot be read, or the class has a field
            type the DSL cannot express.
    """
    check_option_names("define_tool", options)
    return build_definition(name, description, parameters, execute, options)


def build_definition(
    name: str,
    description: str,
    parameters: SchemaSpec | type,
    execute: Callable[[typing.Any, ToolRunContext], object],
    options: ToolOptions[typing.Any],
    *,
    awaited: bool | None = None,
) -> ToolDefinition:
    """:func:`define_tool`, for the package: ``awaited`` says whether ``execute``'s result is
    awaited (``None``: whether ``execute`` is an async body). ``@tool`` passes a plain function
    that returns the author's coroutine, so the author's body is awaited with no frame between.
    """
    # the definition as given: the one set of rules checks every field and option, before the
    # parameters are compiled
    given = ToolDefinition(
        name=name,
        description=description,
        parameters={},
        execute=typing.cast("ToolBody", execute),  # a draft: only checked, never run
        **options,
    )
    model = _pydantic_model(parameters)
    if model is not None:
        json_schema, validate, convert, validated_execute = _model_parts(model, execute, awaited)
    else:
        json_schema, validate, convert, validated_execute = _spec_parts(
            name, parameters, execute, awaited
        )
    return attrs.evolve(
        given,
        parameters=json_schema,
        execute=validated_execute,
        **_soft_readers(given, validate, convert),
    )


def _spec_parts(
    name: str,
    parameters: SchemaSpec | type,
    execute: Callable[[typing.Any, ToolRunContext], object],
    awaited: bool | None,
) -> _Parts:
    """A schema spec's or an argument class's JSON Schema, validator, conversion and validating
    ``execute``.
    """
    if isinstance(parameters, type):
        if not is_argument_class(parameters):
            raise TypeError(
                f"define_tool({name}): {_PARAMETERS_KINDS}, not {parameters.__qualname__}"
            )
        derived = derive_attrs_schema(parameters)
        spec = derived.spec
        shape = derived.shape
        cls: type[object] = parameters
        hooks: list[Callable[[object, type[object]], object] | None] = []

        def convert(args: object) -> object:
            # The library's one converter is strict (exact JSON types, no unknown keys); the
            # shaper hands it only declared keys, with ints for integral floats, so validated
            # arguments always structure. Its hook for the class is looked up once, at the
            # first call (not at definition: hooks the converter gains meanwhile still count),
            # instead of dispatching on every call. A class of scalars whose hook is the one
            # cattrs generates (no hook of the user's) is called directly: cattrs' hook would
            # pass each checked value through and call it the same way.
            if not hooks:
                hook = converter.get_structure_hook(cls)
                hooks.append(None if derived.direct and cattrs_generated(hook) else hook)
            data = shape(typing.cast("Mapping[str, object]", args))
            hook = hooks[0]
            if hook is not None:
                return hook(data, cls)
            try:
                return cls(**data)
            except Exception as exc:  # as cattrs reports a class whose __init__ raised
                # (cattrs types it as a bare ExceptionGroup, of two arguments)
                error = cattrs.ClassValidationError(
                    f"While structuring {cls.__name__}",
                    [exc],
                    cls,  # pyright: ignore[reportCallIssue]
                )
                raise error from None

    elif isinstance(parameters, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        spec = parameters
        convert = _freeze
    else:
        raise TypeError(
            f"define_tool({name}): {_PARAMETERS_KINDS}, not {type(parameters).__name__}"
        )

    validate = compile_spec(spec)
    validated_execute: Callable[[typing.Any, ToolRunContext], Awaitable[ToolReturn] | ToolReturn]
    if is_async_body(execute) if awaited is None else awaited:
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
        # the pipeline runs ``body`` itself for arguments ``validate`` marked (one frame less)
        register_checked_body(
            validated_execute_async,
            awaited=True,
            validate=validate,
            body=body,
            convert=None if as_is else convert,
        )
    else:
        sync_body = typing.cast("Callable[[object, ToolRunContext], ToolReturn]", execute)

        def validated_execute_sync(args: object, context: ToolRunContext) -> ToolReturn:
            violations = validate(args)
            if violations:
                raise ToolArgsError(violations)
            return sync_body(convert(args), context)

        validated_execute = validated_execute_sync
        register_checked_body(validated_execute_sync, awaited=False, validate=validate)
    return schema_spec_to_json_schema(spec), validate, convert, validated_execute


_PARAMETERS_KINDS = (
    "parameters must be a schema spec, an attrs class, a dataclass, a TypedDict or a pydantic model"
)


# --- pydantic models --------------------------------------------------------------------------


def _pydantic_model(parameters: object) -> type | None:
    """``parameters`` if it is a pydantic ``BaseModel`` subclass. pydantic is never imported
    here: a model class exists only once its author imported pydantic.
    """
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(parameters, type):
        return None
    base: type = pydantic.BaseModel
    return parameters if issubclass(parameters, base) else None


_Parse = Callable[[object], "tuple[object, list[str]]"]


def _model_parser(model: type) -> _Parse:
    validate_python: Callable[[object], object] = getattr(model, "model_validate")  # noqa: B009 (pydantic is not imported)
    validation_error: type[Exception] = sys.modules["pydantic"].ValidationError

    def parse(args: object) -> tuple[object, list[str]]:
        try:
            return validate_python(args), []
        except validation_error as exc:
            errors: Callable[[], list[dict[str, object]]] = getattr(exc, "errors")  # noqa: B009
            return None, [_model_violation(error) for error in errors()]

    return parse


def _model_violation(error: Mapping[str, object]) -> str:
    path = ""
    for part in typing.cast("tuple[str | int, ...]", error.get("loc", ())):
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return f'"{path or "arguments"}": {error.get("msg", "")}'


def _model_parts(
    model: type,
    execute: Callable[[typing.Any, ToolRunContext], object],
    awaited: bool | None,
) -> _Parts:
    """:func:`_spec_parts` for a pydantic model: pydantic validates and builds the instance,
    and the model's JSON Schema is the parameters.
    """
    parse = _model_parser(model)
    schema_of: Callable[[], dict[str, object]] = getattr(model, "model_json_schema")  # noqa: B009
    json_schema = schema_of()

    def validate(args: object) -> list[str]:
        return parse(args)[1]

    def convert(args: object) -> object:
        return parse(args)[0]

    validated_execute: Callable[[typing.Any, ToolRunContext], Awaitable[ToolReturn] | ToolReturn]
    if is_async_body(execute) if awaited is None else awaited:
        body = typing.cast("Callable[[object, ToolRunContext], Awaitable[ToolReturn]]", execute)

        async def validated_execute_async(args: object, context: ToolRunContext) -> ToolReturn:
            instance, violations = parse(args)
            if violations:
                await trio.lowlevel.checkpoint()
                raise ToolArgsError(violations)
            return await body(instance, context)

        validated_execute = validated_execute_async
        register_checked_body(validated_execute_async, awaited=True, validate=validate)
    else:
        sync_body = typing.cast("Callable[[object, ToolRunContext], ToolReturn]", execute)

        def validated_execute_sync(args: object, context: ToolRunContext) -> ToolReturn:
            instance, violations = parse(args)
            if violations:
                raise ToolArgsError(violations)
            return sync_body(instance, context)

        validated_execute = validated_execute_sync
        register_checked_body(validated_execute_sync, awaited=False, validate=validate)
    return json_schema, validate, convert, validated_execute


def _freeze(args: object) -> object:
    # The registry hands bodies snapshotted arguments already; a direct caller may not.
    return snapshot_json(args)  # a frozen object the library built passes at once


def _soft_readers(
    given: ToolDefinition, validate: _Validate, convert: _Convert
) -> dict[str, Callable[..., object]]:
    """The options of ``given`` that read a call's arguments (``READS_ARGUMENTS``), each made
    to see only arguments ``validate`` accepts, converted.
    """
    readers: dict[str, Callable[..., object]] = {}
    for field in attrs.fields(ToolDefinition):
        kind = field.metadata.get(READS_ARGUMENTS)
        author = getattr(given, field.name)
        if kind is None or author is None:
            continue
        if kind == "classifier":
            readers[field.name] = _soft_classifier(validate, convert, author)
        else:
            readers[field.name] = _soft(validate, convert, author)
    return readers


def _soft_classifier(
    validate: _Validate, convert: _Convert, author: Callable[[typing.Any], bool]
) -> Callable[[object], bool]:
    as_is = convert is _freeze

    def is_concurrency_safe(args: object) -> bool:
        if validate(args):
            return False
        return author(args if as_is and type(args) is FrozenJsonObject else convert(args))

    return is_concurrency_safe


_R = TypeVar("_R")


def _soft(
    validate: _Validate, convert: _Convert, author: Callable[..., _R]
) -> Callable[..., _R | None]:
    """A presenter of the author's that sees only valid arguments, converted: ``None`` (the
    generic view) for arguments its tool would reject.
    """

    def present(args: object, *rest: typing.Any) -> _R | None:
        if validate(args):
            return None
        return author(convert(args), *rest)

    return present
