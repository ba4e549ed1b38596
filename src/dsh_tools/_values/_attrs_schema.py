"""Specs derived from classes: how ``define_tool(parameters=SomeClass)`` shows and validates
typed arguments, for an attrs class, a dataclass or a ``TypedDict``.

:func:`derive_attrs_schema` turns the class's fields into a :data:`~dsh_tools.SchemaSpec` (the
schema DSL of ``_schema``) plus a shaper that makes validated arguments ready for cattrs, which
structures all three kinds of class.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal, NotRequired, Required, TypeAlias, Union

import attrs

from ._json import FrozenJsonObject, snapshot_json, thaw_json
from ._schema import SchemaProp, SchemaSpec

__all__ = ["DerivedSchema", "derive_attrs_schema", "is_argument_class", "typeddict_required_keys"]

_MISSING: Final = object()


@attrs.frozen
class DerivedSchema:
    """What ``define_tool`` needs to accept an attrs class as its parameters."""

    spec: SchemaSpec
    shape: Callable[[Mapping[str, object]], Mapping[str, object]]
    """Turns validated arguments into the plain data cattrs structures the class from: nested
    objects become dicts, an integral float in an ``int`` field becomes an ``int``, and an
    absent ``X | None`` field without a default becomes ``None`` (attrs would otherwise require
    it). An ``int`` in a ``float`` field becomes a ``float``, as cattrs would make it. Frozen
    arguments that need none of this (exactly the declared keys, no nested shape, no number of
    the other kind) are handed on as they are."""
    direct: bool = False
    """Whether the shaped data are the class's keyword arguments as they are: an attrs class or
    a dataclass whose every field is a ``str``, ``bool``, ``int``, ``float`` or ``Literal`` of
    strings (or ``X | None`` of one) and is named as its ``__init__`` parameter. Calling the
    class with them builds what cattrs' own structuring of the class builds."""


_Shape: TypeAlias = Callable[[object], object] | None
"""Reshapes one validated value for cattrs; ``None`` passes the value through unchanged."""


def is_argument_class(cls: object) -> bool:
    """Whether ``cls`` is a class the derivation reads: attrs, a dataclass, or a ``TypedDict``."""
    if not isinstance(cls, type):
        return False
    return attrs.has(cls) or _is_dataclass(cls) or typing.is_typeddict(cls)


def _is_dataclass(cls: type) -> bool:
    # a plain bool: ``dataclasses.is_dataclass`` narrows its argument to Unknown when false
    return dataclasses.is_dataclass(cls)


@attrs.frozen
class _Field:
    name: str
    annotation: object
    has_default: bool
    default: object  # _MISSING unless a plain default value
    description: object


def _fields(cls: type, hints: Mapping[str, object]) -> list[_Field]:
    if attrs.has(cls):
        return [
            _Field(
                name=field.name,
                annotation=hints.get(field.name, field.type),
                has_default=field.default is not attrs.NOTHING,
                default=_MISSING
                if field.default is attrs.NOTHING
                or isinstance(field.default, typing.cast(type, attrs.Factory))
                else field.default,
                description=field.metadata.get("description"),
            )
            for field in attrs.fields(cls)
            if field.init
        ]
    if _is_dataclass(cls):
        return [
            _Field(
                name=field.name,
                annotation=hints.get(field.name, field.type),
                has_default=field.default is not dataclasses.MISSING
                or field.default_factory is not dataclasses.MISSING,
                default=_MISSING if field.default is dataclasses.MISSING else field.default,
                description=field.metadata.get("description"),
            )
            for field in dataclasses.fields(cls)
            if field.init
        ]
    required = typeddict_required_keys(cls)
    return [
        _Field(
            name=name,
            annotation=annotation,
            has_default=name not in required,
            default=_MISSING,
            description=None,
        )
        for name, annotation in hints.items()
    ]


def typeddict_required_keys(cls: type) -> frozenset[str]:
    """The keys a ``TypedDict`` requires: outside ``total=False`` and not ``NotRequired[...]``.

    ``__required_keys__`` alone is wrong under ``from __future__ import annotations`` on Python
    3.11 (it cannot see a ``NotRequired`` written as a string), so the resolved annotations are
    read as well.

    Raises:
        NameError: an annotation names something the class's module does not define.
    """
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    extras = typing.get_type_hints(cls, include_extras=True)
    keys: set[str] = set()
    for name, annotation in extras.items():
        marker = typing.get_origin(annotation)
        if marker is Required or (marker is not NotRequired and name in required):
            keys.add(name)
    return frozenset(keys)


def derive_attrs_schema(cls: type) -> DerivedSchema:
    """Derive a spec (and the matching argument shaper) from an attrs class, a dataclass or a
    ``TypedDict``.

    Supported field types: ``str``, ``int`` (``"integer"``), ``float`` (``"number"``), ``bool``,
    ``Literal`` of strings and ``Enum`` classes with string values (a string ``enum``), nested
    attrs classes, dataclasses and ``TypedDict`` classes (objects), ``list[X]`` /
    ``tuple[X, ...]`` / ``Sequence[X]`` (arrays), and ``X | None`` of any of these. A field is
    optional when it has a default (or a factory; for a ``TypedDict``: it is not a required key)
    or is ``X | None``; ``metadata={"description": ...}`` becomes its description, and a default
    that is JSON data (not ``None``, not a factory) is shown as ``default``.

    Raises:
        TypeError: an unsupported field type (named with its class and field), or a class that
            contains itself.
    """
    spec, shape = _derive_class(cls, ())
    return DerivedSchema(spec=spec, shape=shape, direct=_direct(cls))


_SCALARS: Final[frozenset[object]] = frozenset((str, bool, int, float))


def _direct(cls: type) -> bool:
    if attrs.has(cls):
        if any(field.alias != field.name for field in attrs.fields(cls) if field.init):
            return False
    elif not _is_dataclass(cls):
        return False
    hints = typing.get_type_hints(cls)
    for field in _fields(cls, hints):
        inner, _ = _split_optional(field.annotation)
        if inner not in _SCALARS and typing.get_origin(inner) is not Literal:
            return False
    return True


def _derive_class(
    cls: type, seen: tuple[type, ...]
) -> tuple[SchemaSpec, Callable[[Mapping[str, object]], Mapping[str, object]]]:
    if cls in seen:
        raise TypeError(
            f"{cls.__qualname__} contains itself; recursive arguments are not supported"
        )
    seen = (*seen, cls)
    try:
        hints = typing.get_type_hints(cls)
    except NameError as exc:
        # A string annotation (``from __future__ import annotations``) naming a class that is
        # not a global of the defining module, e.g. one defined inside a function.
        raise TypeError(
            f"{cls.__qualname__}: cannot resolve its field annotations ({exc}); "
            "define argument classes at module level"
        ) from exc
    spec: dict[str, SchemaProp] = {}
    plan: list[tuple[str, bool, _Shape]] = []
    for field in _fields(cls, hints):
        try:
            inner, nullable = _split_optional(field.annotation)
            prop, shape = _derive_type(inner, seen)
        except TypeError as exc:
            raise TypeError(f"{cls.__qualname__}.{field.name}: {exc}") from None
        has_default = field.has_default
        if not (has_default or nullable):
            prop["required"] = True
        description = field.description
        if isinstance(description, str) and description:
            prop["description"] = description
        shown_default = _shown_default(field.default)
        if shown_default is not _MISSING:
            prop["default"] = shown_default
        spec[field.name] = prop
        plan.append((field.name, nullable and not has_default, shape))
    fields = tuple(plan)
    names = frozenset(name for name, _, _ in fields)
    # each number field with the kind of number its shape changes
    numbers = tuple(
        (name, float if shape is _integral else int)
        for name, _, shape in fields
        if shape is _integral or shape is _floating
    )
    # no field has a shape of its own beyond a number's: shaped, a frozen object with exactly
    # the declared keys differs only where a number field holds the other kind of number
    flat = all(shape is None or shape is _integral or shape is _floating for _, _, shape in fields)

    def shape_object(data: Mapping[str, object]) -> Mapping[str, object]:
        if flat and type(data) is FrozenJsonObject and data.keys() == names:
            for name, other in numbers:
                if type(data[name]) is other:
                    break
            else:
                return data
        out: dict[str, object] = {}
        for key, fill_none, shape in fields:
            value = data.get(key, _MISSING)
            if value is not _MISSING:
                out[key] = value if shape is None else shape(value)
            elif fill_none:
                out[key] = None
        return out

    return spec, shape_object


def _shown_default(default: object) -> object:
    if default is None or default is _MISSING:
        return _MISSING
    try:
        return thaw_json(snapshot_json(default))
    except (TypeError, ValueError):
        return _MISSING


def _split_optional(annotation: object) -> tuple[object, bool]:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        members = typing.get_args(annotation)
        rest = tuple(m for m in members if m is not type(None))
        if len(rest) != 1 or len(members) != 2:
            raise TypeError(f"unions other than X | None are not supported: {annotation!r}")
        return rest[0], True
    return annotation, False


def _derive_type(annotation: object, seen: tuple[type, ...]) -> tuple[SchemaProp, _Shape]:
    if annotation is bool:
        return {"type": "boolean"}, None
    if annotation is int:
        return {"type": "integer"}, _integral
    if annotation is float:
        return {"type": "number"}, _floating
    if annotation is str:
        return {"type": "string"}, None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        if not args or not all(type(arg) is str for arg in args):
            raise TypeError(
                f"only Literal[...] of strings is supported (a string enum): {annotation!r}"
            )
        return {"type": "string", "enum": list(typing.cast("tuple[str, ...]", args))}, None
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        if not values or not all(type(value) is str for value in values):
            raise TypeError(f"only Enum classes with str values are supported: {annotation!r}")
        return {"type": "string", "enum": typing.cast("list[str]", values)}, None
    if isinstance(annotation, type) and is_argument_class(annotation):
        nested, shape_object = _derive_class(annotation, seen)

        def shape_nested(value: object) -> object:
            return shape_object(typing.cast("Mapping[str, object]", value))

        return {"type": "object", "properties": nested}, shape_nested
    if origin in (list, Sequence) and len(args) == 1:
        return _derive_array(args[0], seen)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _derive_array(args[0], seen)
    raise TypeError(f"unsupported argument type {annotation!r}")


def _integral(value: object) -> object:
    # "integer" accepts 3.0; the instance gets the int 3 whatever the converter's leniency.
    return int(value) if isinstance(value, float) else value


def _floating(value: object) -> object:
    # "number" accepts 3; the instance gets the float 3.0, as the converter's float hook makes it
    return float(value) if type(value) is int else value


def _derive_array(item: object, seen: tuple[type, ...]) -> tuple[SchemaProp, _Shape]:
    item_prop, item_shape = _derive_type(item, seen)
    if item_shape is None:
        return {"type": "array", "items": item_prop}, None
    shape_item = item_shape

    def shape_array(value: object) -> object:
        return [shape_item(element) for element in typing.cast("Sequence[object]", value)]

    return {"type": "array", "items": item_prop}, shape_array
