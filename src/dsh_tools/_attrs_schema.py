"""Specs derived from attrs classes: how ``define_tool(parameters=SomeAttrsClass)`` shows and
validates typed arguments.

:func:`derive_attrs_schema` turns the class's fields into a :data:`~dsh_tools.SchemaSpec` (the
schema DSL of ``_schema``) plus a shaper that makes validated arguments ready for cattrs.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal, TypeAlias, Union

import attrs

from ._json import snapshot_json, thaw_json
from ._schema import SchemaProp, SchemaSpec

__all__ = ["DerivedSchema", "derive_attrs_schema"]

_MISSING: Final = object()


@attrs.frozen
class DerivedSchema:
    """What ``define_tool`` needs to accept an attrs class as its parameters."""

    spec: SchemaSpec
    shape: Callable[[Mapping[str, object]], dict[str, object]]
    """Turns validated arguments into the plain data cattrs structures the class from: nested
    objects become dicts, and an absent ``X | None`` field without a default becomes ``None``
    (attrs would otherwise require it)."""


_Shape: TypeAlias = Callable[[object], object] | None
"""Reshapes one validated value for cattrs; ``None`` passes the value through unchanged."""


def derive_attrs_schema(cls: type) -> DerivedSchema:
    """Derive a spec (and the matching argument shaper) from an attrs class.

    Supported field types: ``str``, ``int`` (``"integer"``), ``float`` (``"number"``), ``bool``,
    ``Literal`` of strings and ``Enum`` classes with string values (a string ``enum``), nested
    attrs classes (objects), ``list[X]`` / ``tuple[X, ...]`` / ``Sequence[X]`` (arrays), and
    ``X | None`` of any of these. A field is optional when it has a default or is ``X | None``;
    ``metadata={"description": ...}`` becomes its description, and a default that is JSON data
    (not ``None``, not a factory) is shown as ``default``.

    Raises:
        TypeError: an unsupported field type (named with its class and field), or a class that
            contains itself.
    """
    spec, shape = _derive_class(cls, ())
    return DerivedSchema(spec=spec, shape=shape)


def _derive_class(
    cls: type, seen: tuple[type, ...]
) -> tuple[SchemaSpec, Callable[[Mapping[str, object]], dict[str, object]]]:
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
    for field in attrs.fields(cls):
        if not field.init:
            continue
        annotation = hints.get(field.name, field.type)
        try:
            inner, nullable = _split_optional(annotation)
            prop, shape = _derive_type(inner, seen)
        except TypeError as exc:
            raise TypeError(f"{cls.__qualname__}.{field.name}: {exc}") from None
        has_default = field.default is not attrs.NOTHING
        if not (has_default or nullable):
            prop["required"] = True
        description = field.metadata.get("description")
        if isinstance(description, str) and description:
            prop["description"] = description
        shown_default = _shown_default(field.default)
        if shown_default is not _MISSING:
            prop["default"] = shown_default
        spec[field.name] = prop
        plan.append((field.name, nullable and not has_default, shape))
    fields = tuple(plan)

    def shape_object(data: Mapping[str, object]) -> dict[str, object]:
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
    if (
        default is None
        or default is attrs.NOTHING
        or isinstance(default, typing.cast(type, attrs.Factory))
    ):
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
        return {"type": "number"}, None
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
    if isinstance(annotation, type) and attrs.has(annotation):
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


def _derive_array(item: object, seen: tuple[type, ...]) -> tuple[SchemaProp, _Shape]:
    item_prop, item_shape = _derive_type(item, seen)
    if item_shape is None:
        return {"type": "array", "items": item_prop}, None
    shape_item = item_shape

    def shape_array(value: object) -> object:
        return [shape_item(element) for element in typing.cast("Sequence[object]", value)]

    return {"type": "array", "items": item_prop}, shape_array
