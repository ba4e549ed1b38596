"""The schema DSL: :class:`SchemaProp` / :data:`SchemaSpec`, their JSON Schema, and
:func:`validate_args`.

A spec is a mapping from argument name to :class:`SchemaProp`. It converts to the JSON Schema a
provider API shows the model (:func:`schema_spec_to_json_schema`) and validates what the model
sent back (:func:`validate_args`) with the original's exact rules and messages.

Validation is compiled: :func:`compile_spec` turns a spec into a tree of closures once (``type``
dispatch, enum sets, messages), so checking a call does no per-call reflection over the spec.
``define_tool`` compiles at definition time; :func:`validate_args` compiles on each call, so it
always sees the spec as it is now (a spec is a plain mutable mapping).

Deriving a spec from an attrs class lives in ``_attrs_schema``.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, NotRequired, Required, TypeAlias, TypedDict

from dsh_tools._texts import format_js_json

from ._json import (
    CHECKED_BY,
    MAX_DEPTH,
    FrozenJsonObject,
    json_kind,
    mark_checked,
    snapshot_json,
    thaw_json,
)

__all__ = [
    "SchemaProp",
    "SchemaSpec",
    "SchemaType",
    "compile_spec",
    "schema_spec_to_json_schema",
    "validate_args",
]

SchemaType: TypeAlias = Literal["string", "number", "integer", "boolean", "object", "array"]
"""The type of one property. ``"integer"`` is an extension over the original's five types: it
accepts ints and floats with an integral value, never ``bool``."""


class SchemaProp(TypedDict, total=False):
    """One property of a :data:`SchemaSpec`.

    Keys:
        type: the property's :data:`SchemaType` (the only required key).
        required: ``True`` makes the argument mandatory; absent means optional.
        description: what the model reads about the argument (an empty string is dropped).
        enum: the allowed values, compared strictly by JSON type and value.
        default: shown to the model only (any JSON data, plain or frozen);
            :func:`validate_args` never fills it in.
        properties: the nested spec of an ``"object"`` property.
        items: the element schema of an ``"array"`` property (its ``required`` is ignored).
    """

    type: Required[SchemaType]
    required: NotRequired[Literal[True]]
    description: NotRequired[str]
    enum: NotRequired[Sequence[str]]
    default: NotRequired[object]
    properties: NotRequired[SchemaSpec]
    items: NotRequired[SchemaProp]


SchemaSpec: TypeAlias = Mapping[str, SchemaProp]
"""A tool's parameters: argument name → :class:`SchemaProp`, in declaration order."""


# ---------------------------------------------------------------------------------------------
# JSON Schema


def schema_spec_to_json_schema(spec: SchemaSpec) -> dict[str, Any]:
    """Convert a spec to the JSON Schema object a provider API shows the model.

    The result is a fresh plain ``dict`` (nothing is shared with ``spec``):
    ``{"type": "object", "properties": {...}, "required": [...]}``, where ``required`` lists the
    ``required: True`` names in declaration order and is omitted when empty. Each property
    emits, in this order: ``type``; ``description`` if non-empty; ``enum`` if present (an empty
    list too); ``default`` if present (``None`` too); for an ``"object"`` with ``properties`` the
    nested ``properties`` and non-empty ``required``; for an ``"array"`` with ``items`` the
    converted ``items``. ``additionalProperties`` is never emitted (unknown keys are allowed).

    Args:
        spec: the tool's parameters.

    Returns:
        The JSON Schema as plain JSON data.

    Raises:
        TypeError: the spec is not a mapping of mappings, or reading it raised (the error names
            the path, e.g. ``spec.a.properties.b``).
        ValueError: the spec is cyclic or nested deeper than :data:`~dsh_tools.MAX_DEPTH`
            levels, or a property has an unknown ``type`` (``unreachable variant in
            validateArgs: "weird"``, as :func:`validate_args` and ``define_tool`` say).
    """
    schema: dict[str, Any] = {"type": "object"}
    properties, required = _convert_spec(read_spec(spec))
    schema["properties"] = properties
    if required:
        schema["required"] = required
    return schema


def _convert_spec(spec: SchemaSpec) -> tuple[dict[str, Any], list[str]]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, prop in spec.items():
        properties[key] = _convert_prop(prop)
        if prop.get("required") is True:
            required.append(key)
    return properties, required


def _convert_prop(prop: SchemaProp) -> dict[str, Any]:
    kind = prop["type"]
    if not (isinstance(kind, str) and (kind in ("object", "array") or kind in _SCALAR_TESTS)):  # pyright: ignore[reportUnnecessaryIsInstance]
        # the same programming error define_tool and validate_args report
        raise ValueError(f"unreachable variant in validateArgs: {_render(kind)}")
    out: dict[str, Any] = {"type": kind}
    description = prop.get("description")
    if description:
        out["description"] = description
    enum_value = prop.get("enum")
    if enum_value is not None:
        out["enum"] = _plain_copy(enum_value)
    if "default" in prop:
        out["default"] = _plain_copy(prop["default"])
    if kind == "object":
        nested = prop.get("properties")
        # JS truthiness: an empty ``properties`` object is still emitted.
        if nested is not None:
            nested_properties, nested_required = _convert_spec(nested)
            out["properties"] = nested_properties
            if nested_required:
                out["required"] = nested_required
    elif kind == "array":
        items = prop.get("items")
        if items is not None:
            out["items"] = _convert_prop(items)
    return out


def _plain_copy(value: object) -> Any:
    return thaw_json(snapshot_json(value))


# ---------------------------------------------------------------------------------------------
# Reading a spec once

_PROP_KEYS: Final = ("type", "required", "description", "enum", "default", "properties", "items")


def read_spec(spec: object) -> dict[str, SchemaProp]:
    """A plain copy of ``spec`` holding only the keys the DSL reads, checked for shape.

    Every read of the caller's mappings happens here, once: a spec that is cyclic or nested
    deeper than :data:`~dsh_tools.MAX_DEPTH` levels raises ``ValueError`` (never
    ``RecursionError``), and a mapping whose reads raise gives a ``TypeError`` naming the path.
    Enum and default values are kept as given (they are snapshotted where they are used).
    """
    return _read_spec(spec, "spec", 0, set())


def _read_error(path: str, exc: Exception) -> TypeError:
    return TypeError(f"reading the schema spec at {path} raised {type(exc).__name__}: {exc}")


def _enter(ident: int, path: str, depth: int, stack: set[int]) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"the schema spec is nested deeper than {MAX_DEPTH} levels at {path}")
    if ident in stack:
        raise ValueError(f"the schema spec is cyclic: {path} contains itself")


def _read_spec(spec: object, path: str, depth: int, stack: set[int]) -> dict[str, SchemaProp]:
    ident = id(spec)
    if not isinstance(spec, Mapping):
        raise TypeError(f"a schema spec must be a mapping, not {type(spec).__name__}")
    _enter(ident, path, depth, stack)
    try:
        entries = list(typing.cast("Mapping[object, object]", spec).items())
    except Exception as exc:
        raise _read_error(path, exc) from exc
    stack.add(ident)
    out: dict[str, SchemaProp] = {}
    for key, prop in entries:
        if not isinstance(key, str):
            raise TypeError(f"a schema spec's names must be str, not {type(key).__name__}")
        out[key] = _read_prop(prop, f"{path}.{key}", depth + 1, stack)
    stack.discard(ident)
    return out


def _read_prop(prop: object, path: str, depth: int, stack: set[int]) -> SchemaProp:
    ident = id(prop)
    if not isinstance(prop, Mapping):
        raise TypeError(f"a schema property must be a mapping, not {type(prop).__name__}")
    _enter(ident, path, depth, stack)
    source = typing.cast("Mapping[str, object]", prop)
    out: dict[str, object] = {}
    for key in _PROP_KEYS:
        try:
            value = source.get(key, _MISSING)
        except Exception as exc:
            raise _read_error(f"{path}.{key}", exc) from exc
        if value is not _MISSING:
            out[key] = value
    stack.add(ident)
    kind = out.get("type")
    nested = out.get("properties")
    if kind == "object" and nested is not None:
        out["properties"] = _read_spec(nested, f"{path}.properties", depth + 1, stack)
    items = out.get("items")
    if kind == "array" and items is not None:
        out["items"] = _read_prop(items, f"{path}.items", depth + 1, stack)
    stack.discard(ident)
    return typing.cast(SchemaProp, out)


# ---------------------------------------------------------------------------------------------
# Validation

_Check: TypeAlias = Callable[[object, str, list[str]], None]
"""Checks one present value at ``path`` and appends its violations to the list."""

_Fields: TypeAlias = tuple[tuple[str, bool, tuple[type, ...], _Check], ...]
"""A compiled spec: ``(key, required, passing types, check)`` in declaration order, where a
present value whose exact type is one of the passing types needs no check."""

_MISSING: Final = object()


def validate_args(spec: SchemaSpec, args: object) -> list[str]:
    """Validate a call's arguments against ``spec``; return every violation (``[]`` = valid).

    The rules are the original's: ``args`` must be an object (any ``Mapping``; lists and tuples
    are arrays), else the only violation is ``"arguments" must be an object``. Properties are
    checked in declaration order and all violations are collected, with paths such as
    ``servers[1].host``. An absent required key gives ``missing required property "<path>"``; a
    JSON ``null`` is a present value and is type-checked. The first failing check of a property
    wins: ``"<path>" must be a string`` (``number``, ``integer``, ``boolean``, ``object``,
    ``array``), then ``"<path>" must be one of ["a","b"]`` for scalars with an ``enum``.
    ``bool`` is never a number or an integer; an ``"integer"`` accepts integral floats. Unknown
    keys are allowed and defaults are not applied.

    Args:
        spec: the tool's parameters.
        args: the model's arguments, usually a snapshotted value.

    Returns:
        The violations in declaration order.

    Raises:
        ValueError: the *spec* is malformed: an unknown ``type`` gives
            ``unreachable variant in validateArgs: "weird"``; a cyclic spec or one nested
            deeper than :data:`~dsh_tools.MAX_DEPTH` levels says so (never ``RecursionError``).
            Malformed *arguments* never raise.
        TypeError: the *spec* is malformed in shape (a property that is not a mapping, an
            ``enum`` that is not a list of JSON values), or reading the spec raised (a
            ``Mapping`` whose ``__getitem__`` fails); the message names the path. A
            ``Mapping`` of *arguments* whose reads raise gives a ``TypeError`` naming the
            argument's path.
    """
    return compile_spec(spec)(args)


def compile_spec(spec: SchemaSpec) -> Callable[[object], list[str]]:
    """Compile ``spec`` once into a validator of whole argument values."""
    fields = _compile_fields(read_spec(spec))

    def validate(args: object) -> list[str]:
        out: list[str] = []
        if type(args) is FrozenJsonObject:
            # frozen arguments are checked once per validator (the classifier, then the body)
            if getattr(args, CHECKED_BY, None) is validate:
                return out
            # _check_fields, inline for the arguments of every call (a frozen object's reads
            # cannot raise)
            for key, required, fast, check in fields:
                value = args.get(key, _MISSING)
                if value is _MISSING:
                    if required:
                        out.append(f'missing required property "{key}"')
                elif type(value) not in fast:
                    check(value, key, out)
            if not out:
                mark_checked(args, validate)
        elif isinstance(args, Mapping):
            _check_fields(typing.cast("Mapping[str, object]", args), "", fields, out)
        else:
            out.append('"arguments" must be an object')
        return out

    return validate


def _compile_fields(spec: SchemaSpec) -> _Fields:
    if not isinstance(spec, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"a schema spec must be a mapping, not {type(spec).__name__}")
    fields: list[tuple[str, bool, tuple[type, ...], _Check]] = []
    for key, prop in spec.items():
        check = _compile_prop(prop)
        fast = _PASSING_TYPES.get(prop.get("type"), ()) if prop.get("enum") is None else ()
        fields.append((key, prop.get("required") is True, fast, check))
    return tuple(fields)


def _check_fields(data: Mapping[str, object], prefix: str, fields: _Fields, out: list[str]) -> None:
    for key, required, fast, check in fields:
        try:
            value = data.get(key, _MISSING)
        except Exception as exc:
            raise TypeError(
                f'reading argument "{prefix}{key}" raised {type(exc).__name__}: {exc}'
            ) from exc
        if value is _MISSING:
            if required:
                out.append(f'missing required property "{prefix}{key}"')
        elif type(value) not in fast:
            check(value, prefix + key, out)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: object) -> bool:
    cls = type(value)
    if cls is int:
        return True
    if cls is bool:
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def _is_string(value: object) -> bool:
    return isinstance(value, str)


def _is_boolean(value: object) -> bool:
    return isinstance(value, bool)


_SCALAR_TESTS: Final[Mapping[str, tuple[Callable[[object], bool], str]]] = {
    "string": (_is_string, "must be a string"),
    "number": (_is_number, "must be a number"),
    "integer": (_is_integer, "must be an integer"),
    "boolean": (_is_boolean, "must be a boolean"),
}


# a value of one of these exact types passes its scalar check (without an enum) as it is: the
# per-field check is called only for the other values, which it may accept or reject
_PASSING_TYPES: Final[Mapping[object, tuple[type, ...]]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def _compile_prop(prop: SchemaProp) -> _Check:
    if not isinstance(prop, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"a schema property must be a mapping, not {type(prop).__name__}")
    kind = typing.cast(object, prop.get("type"))
    if kind == "object":
        return _compile_object(prop)
    if kind == "array":
        return _compile_array(prop)
    if isinstance(kind, str) and kind in _SCALAR_TESTS:
        test, message = _SCALAR_TESTS[kind]
        return _compile_scalar(prop, test, message)
    raise ValueError(f"unreachable variant in validateArgs: {_render(kind)}")


def _render(value: object) -> str:
    try:
        return format_js_json(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _compile_scalar(prop: SchemaProp, test: Callable[[object], bool], message: str) -> _Check:
    raw_enum: object = prop.get("enum")
    if raw_enum is None:

        def check(value: object, path: str, out: list[str]) -> None:
            if not test(value):
                out.append(f'"{path}" {message}')

        return check

    members = _enum_members(raw_enum)
    enum_message = "must be one of " + format_js_json(snapshot_json(raw_enum))

    def check_enum(value: object, path: str, out: list[str]) -> None:
        if not test(value):
            out.append(f'"{path}" {message}')
        elif (json_kind(value), value) not in members:
            out.append(f'"{path}" {enum_message}')

    return check_enum


def _enum_members(raw_enum: object) -> frozenset[tuple[str, object]]:
    if not isinstance(raw_enum, list | tuple):
        raise TypeError(f"a schema enum must be a list, not {type(raw_enum).__name__}")
    # Keyed by JSON type so that True never matches 1 and "1" never matches 1, while 1 and 1.0
    # (one JSON number) do. Containers never match a scalar, so they are left out.
    return frozenset(
        (kind, member)
        for member in typing.cast("Sequence[object]", raw_enum)
        if (kind := json_kind(member)) != "container"
    )


def _compile_object(prop: SchemaProp) -> _Check:
    nested = prop.get("properties")
    fields = None if nested is None else _compile_fields(nested)

    def check(value: object, path: str, out: list[str]) -> None:
        if type(value) is FrozenJsonObject:
            if fields is not None:
                _check_fields(value, path + ".", fields, out)
        elif isinstance(value, Mapping):
            if fields is not None:
                _check_fields(typing.cast("Mapping[str, object]", value), path + ".", fields, out)
        else:
            out.append(f'"{path}" must be an object')

    return check


def _compile_array(prop: SchemaProp) -> _Check:
    items = prop.get("items")
    item_check = None if items is None else _compile_prop(items)

    def check(value: object, path: str, out: list[str]) -> None:
        if not isinstance(value, tuple | list):
            out.append(f'"{path}" must be an array')
        elif item_check is not None:
            for index, item in enumerate(typing.cast("Sequence[object]", value)):
                item_check(item, f"{path}[{index}]", out)

    return check
