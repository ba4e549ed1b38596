"""The structured-output schema subset: :func:`assert_supported_output_schema` and
:func:`validate_structured_value`.

A subagent (or any model call) may be asked for a JSON value of a given shape. Providers and our
own validator agree only on a small subset of JSON Schema, so a schema is checked against that
subset first, and the value the model produced is then validated by :func:`validate_structured_value`,
which is total on every schema the assertion accepts.

The subset: ``type`` (one of ``object/array/string/number/integer/boolean/null``),
``properties``, ``required`` and ``additionalProperties`` on objects, ``items`` on arrays,
``enum`` and ``const`` on scalars, plus the annotations ``description``, ``title``, ``default``
and ``examples``. The root is an object.

Python equivalents of the original's JavaScript notions:

- a "plain object" is a ``Mapping`` whose keys are all ``str`` (a ``dict`` or a
  :class:`~dsh_tools.FrozenJsonObject`); lists and tuples are arrays;
- "JSON data" is ``None``, ``bool``, ``str``, ``int``, finite ``float``, and lists, tuples and
  plain objects of JSON data without cycles; sets, datetimes, bytes and instances of other classes
  are not JSON data (and are not schema objects);
- ``bool`` is never a number or an integer, and enum/const comparisons are by JSON type, then
  value: ``True`` never equals ``1``, while ``1`` equals ``1.0`` (one JSON number).

Not ``from __future__ import annotations``: the node types' annotations are evaluated, so
``Required`` shows at run time too (``StructuredSchemaNode.__required_keys__``).
"""

import math
import typing
from collections.abc import Mapping, Sequence
from typing import Final, Literal, Required, TypeAlias, TypedDict

from dsh_tools._errors import OutputSchemaError
from dsh_tools._texts import format_js_json

from ._json import json_kind

__all__ = [
    "StructuredOutputSchema",
    "StructuredScalar",
    "StructuredSchemaNode",
    "StructuredSchemaType",
    "assert_supported_output_schema",
    "validate_structured_value",
]

StructuredScalar: TypeAlias = str | int | float | bool | None
"""A value ``enum`` and ``const`` may hold: a string, a finite number, a boolean or ``null``."""

StructuredSchemaType: TypeAlias = Literal[
    "object", "array", "string", "number", "integer", "boolean", "null"
]
"""The one ``type`` of a node of the supported subset."""


class StructuredSchemaNode(TypedDict, total=False):
    """One node of a structured-output schema (the supported JSON Schema subset).

    Keys:
        type: the node's :data:`StructuredSchemaType` (required on every node).
        properties: child schemas of an ``"object"`` node.
        required: names that must be present (each one a key of ``properties``).
        additionalProperties: ``False`` rejects undeclared keys.
        items: the element schema of an ``"array"`` node.
        enum: the allowed values of a scalar node (non-empty).
        const: the one allowed value of a scalar node.
        description / title / default / examples: annotations (JSON data).
    """

    type: Required[StructuredSchemaType]
    properties: Mapping[str, "StructuredSchemaNode"]
    required: Sequence[str]
    additionalProperties: bool
    items: "StructuredSchemaNode"
    enum: Sequence[StructuredScalar]
    const: StructuredScalar
    description: str
    title: str
    default: object
    examples: Sequence[object]


class StructuredOutputSchema(StructuredSchemaNode, total=False):
    """A whole structured-output schema: the root :class:`StructuredSchemaNode`, whose ``type``
    must be ``"object"`` (:func:`assert_supported_output_schema` checks it).
    """


_TYPES: Final = ("object", "array", "string", "number", "integer", "boolean", "null")
_SCALAR_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "null"})
_CONSTRAINTS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const"}
)
_ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples"})
# How many schema nodes one path may hold (and how deeply an annotation value may nest): far
# beyond any real schema, and a few frames per level stay far below Python's recursion limit,
# so a hostile schema gets a violation, never a RecursionError.
_MAX_SCHEMA_DEPTH: Final = 64
# The keywords that only some types take, in the order their misuse is reported.
_TYPED_KEYWORDS: Final = (
    ("properties", frozenset({"object"})),
    ("required", frozenset({"object"})),
    ("additionalProperties", frozenset({"object"})),
    ("items", frozenset({"array"})),
    ("enum", _SCALAR_TYPES),
    ("const", _SCALAR_TYPES),
)
_UNSUPPORTED: Final = (
    "is not a supported keyword "
    "(subset: type/properties/required/additionalProperties/items/enum/const + annotations)"
)


def assert_supported_output_schema(schema: StructuredOutputSchema | Mapping[str, object]) -> None:
    """Check that ``schema`` stays inside the structured-output subset.

    Every node is walked (paths start at ``schema``, e.g. ``schema.properties.items.items``) and
    every violation is collected in walk order before raising, so one error lists all the fixes
    needed. Only when nothing else is wrong is the root required to be an object. A path of
    more than 64 schema nodes (``... nests deeper than 64 schema levels``), and an annotation
    value nested deeper than that, are violations too: the walk never recurses without bound.

    Args:
        schema: a JSON Schema as plain data (``dict`` / ``list`` / scalars, or frozen values).

    Raises:
        OutputSchemaError: with ``code == "UNSUPPORTED_SCHEMA"`` and ``violations`` such as
            ``schema.properties.x.pattern is not a supported keyword (...)``.
    """
    violations: list[str] = []
    _walk(schema, "schema", set(), violations, 1)
    if not violations and _as_plain_object(schema)["type"] != "object":
        violations.append('schema.type must be "object" (structured output is object-rooted)')
    if violations:
        raise OutputSchemaError(violations)


def _as_plain_object(value: object) -> Mapping[str, object]:
    return typing.cast("Mapping[str, object]", value)


def _is_plain_object(value: object) -> bool:
    if not isinstance(value, Mapping):
        return False
    return all(type(key) is str for key in typing.cast("Mapping[object, object]", value))


def _walk(node: object, path: str, stack: set[int], out: list[str], depth: int) -> None:
    if not _is_plain_object(node):
        out.append(f"{path} must be a schema object")
        return
    if depth > _MAX_SCHEMA_DEPTH:
        out.append(f"{path} nests deeper than {_MAX_SCHEMA_DEPTH} schema levels")
        return
    if id(node) in stack:
        out.append(f"{path} is circular")
        return
    stack.add(id(node))
    try:
        _walk_node(_as_plain_object(node), path, stack, out, depth)
    finally:
        stack.discard(id(node))


def _walk_node(
    node: Mapping[str, object], path: str, stack: set[int], out: list[str], depth: int
) -> None:
    for key, value in node.items():
        if key in _CONSTRAINTS:
            continue
        if key in _ANNOTATIONS:
            if not _is_json_data(value, set(), 1):
                out.append(f"{path}.{key} annotation must be JSON data")
        else:
            out.append(f"{path}.{key} {_UNSUPPORTED}")
    out.extend(
        f"{path}.{key} must be a string"
        for key in ("description", "title")
        if key in node and not isinstance(node[key], str)
    )

    kind = node.get("type")
    if isinstance(kind, list | tuple):
        out.append(f"{path}.type must be a single type string (type arrays are not supported)")
        return
    if not isinstance(kind, str) or kind not in _TYPES:
        out.append(f"{path}.type must be one of {'/'.join(_TYPES)}")
        return

    allowed: set[str] = set()
    for key, types in _TYPED_KEYWORDS:
        if key not in node:
            continue
        if kind in types:
            allowed.add(key)
        else:
            out.append(f'{path}.{key} is not supported on type "{kind}"')

    if kind == "object":
        _walk_object(node, allowed, path, stack, out, depth)
    elif kind == "array":
        if "items" in allowed:
            _walk(node["items"], f"{path}.items", stack, out, depth + 1)
    else:
        if "enum" in allowed:
            members = node["enum"]
            if (
                not isinstance(members, list | tuple)
                or not members
                or not all(_is_scalar(m) for m in typing.cast("Sequence[object]", members))
            ):
                out.append(f"{path}.enum must be a non-empty array of scalars")
        if "const" in allowed and not _is_scalar(node["const"]):
            out.append(f"{path}.const must be a scalar")


def _walk_object(
    node: Mapping[str, object],
    allowed: set[str],
    path: str,
    stack: set[int],
    out: list[str],
    depth: int,
) -> None:
    properties = node.get("properties")
    declared: Mapping[str, object] = {}
    if "properties" in allowed:
        if _is_plain_object(properties):
            declared = _as_plain_object(properties)
            for name, child in declared.items():
                _walk(child, f"{path}.properties.{name}", stack, out, depth + 1)
        else:
            out.append(f"{path}.properties must be an object of schemas")
    if "required" in allowed:
        required = node["required"]
        if not isinstance(required, list | tuple) or not all(
            isinstance(name, str) for name in typing.cast("Sequence[object]", required)
        ):
            out.append(f"{path}.required must be an array of strings")
        else:
            out.extend(
                f'{path}.required names "{name}" which is not in properties'
                for name in typing.cast("Sequence[str]", required)
                if name not in declared
            )
    if "additionalProperties" in allowed and not isinstance(node["additionalProperties"], bool):
        out.append(f"{path}.additionalProperties must be a boolean")


def _is_scalar(value: object) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _is_json_data(value: object, stack: set[int], depth: int) -> bool:
    if _is_scalar(value):
        return True
    if depth > _MAX_SCHEMA_DEPTH:
        return False
    ident = id(value)
    if isinstance(value, list | tuple):
        items: Sequence[object] = typing.cast("Sequence[object]", value)
    elif _is_plain_object(value):
        items = list(_as_plain_object(value).values())
    else:
        return False
    if ident in stack:
        return False
    stack.add(ident)
    try:
        return all(_is_json_data(item, stack, depth + 1) for item in items)
    finally:
        stack.discard(ident)


def validate_structured_value(
    schema: StructuredOutputSchema | Mapping[str, object], value: object
) -> list[str]:
    """Validate a structured-output value against a schema of the supported subset.

    Paths start at ``value`` (``"value.items[2].name" must be a string``). For objects: missing
    ``required`` names first, then the declared properties present in the value (in
    ``properties`` order), then, with ``additionalProperties: false``, the undeclared keys (in
    the value's key order). ``number`` must be finite; ``integer`` accepts integral floats; a
    scalar is then checked against ``enum`` and, if that passes, ``const``.

    Args:
        schema: a schema that :func:`assert_supported_output_schema` accepts.
        value: the value to check (plain JSON data or snapshotted values).

    Returns:
        Every violation, in walk order (``[]`` = valid).

    Raises:
        ValueError: a node has a ``type`` outside the subset (only possible when the schema
            skipped :func:`assert_supported_output_schema`).
    """
    out: list[str] = []
    _validate(typing.cast("Mapping[str, object]", schema), value, "value", out)
    return out


def _validate(schema: Mapping[str, object], value: object, path: str, out: list[str]) -> None:
    kind = schema.get("type")
    if kind == "object":
        _validate_object(schema, value, path, out)
        return
    if kind == "array":
        if not isinstance(value, list | tuple):
            out.append(f'"{path}" must be an array')
            return
        items = schema.get("items")
        if items is not None:
            item_schema = _as_plain_object(items)
            for index, item in enumerate(typing.cast("Sequence[object]", value)):
                _validate(item_schema, item, f"{path}[{index}]", out)
        return
    if kind == "string":
        ok, message = isinstance(value, str), "must be a string"
    elif kind == "number":
        ok, message = _is_finite_number(value), "must be a finite number"
    elif kind == "integer":
        ok, message = _is_integer(value), "must be an integer"
    elif kind == "boolean":
        ok, message = isinstance(value, bool), "must be a boolean"
    elif kind == "null":
        ok, message = value is None, "must be null"
    else:
        raise ValueError(f"unreachable variant in validateStructuredValue: {_render(kind)}")
    if not ok:
        out.append(f'"{path}" {message}')
        return
    if "enum" in schema:
        members = typing.cast("Sequence[object]", schema["enum"])
        if not any(_json_equal(member, value) for member in members):
            out.append(f'"{path}" must be one of {_render(members)}')
            return
    if "const" in schema and not _json_equal(schema["const"], value):
        out.append(f'"{path}" must be {_render(schema["const"])}')


def _validate_object(
    schema: Mapping[str, object], value: object, path: str, out: list[str]
) -> None:
    if not _is_plain_object(value):
        out.append(f'"{path}" must be an object')
        return
    data = _as_plain_object(value)
    properties = _as_plain_object(schema.get("properties", {}))
    out.extend(
        f'missing required property "{path}.{name}"'
        for name in typing.cast("Sequence[str]", schema.get("required", ()))
        if name not in data
    )
    for name, child in properties.items():
        if name in data:
            _validate(_as_plain_object(child), data[name], f"{path}.{name}", out)
    if schema.get("additionalProperties") is False:
        out.extend(
            f'"{path}.{name}" is not a declared property (additionalProperties: false)'
            for name in data
            if name not in properties
        )


def _is_finite_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _is_integer(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _json_equal(a: object, b: object) -> bool:
    kind = json_kind(a)
    return kind != "container" and kind == json_kind(b) and a == b


def _render(value: object) -> str:
    # as the original prints it: an integral float is ``3``, not ``3.0``
    try:
        return format_js_json(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
