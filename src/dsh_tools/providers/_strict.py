"""OpenAI strict mode: a strict-compatible copy of a schema, and the way back for arguments.

Strict mode (``"strict": true``) makes the model follow the schema exactly, but only for a
subset of JSON Schema: every object lists all its properties as ``required`` and says
``"additionalProperties": false``. An optional property is therefore expressed as a required one
that may be ``null``, and a strict-mode model always sends it, as ``null`` when it means
"absent". :func:`strict_schema` makes that copy; :func:`drop_optional_nulls` undoes it on the
arguments, so the tool's own validation sees the property absent, as its real schema says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ._common import plain_json

__all__ = ["drop_optional_nulls", "strict_schema"]

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("$defs", "definitions")


def _dict(value: object) -> dict[str, Any] | None:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def _list(value: object) -> list[Any] | None:
    return cast("list[Any]", value) if isinstance(value, list) else None


def strict_schema(schema: Mapping[str, object], tool: str) -> dict[str, Any]:
    """A plain strict-mode copy of ``schema`` (the original is not changed).

    Raises:
        ValueError: an object schema that strict mode cannot express (no ``properties``, or
            ``additionalProperties`` other than ``false``), naming the tool and the path.
    """
    converted = _strict(plain_json(schema), tool, "$")
    assert isinstance(converted, dict)
    return cast("dict[str, Any]", converted)


def _is_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return (
        kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema
    )


def _strict(value: object, tool: str, path: str) -> object:
    schema = _dict(value)
    if schema is None:
        return value
    out = dict(schema)
    for key in _SUBSCHEMA_LISTS:
        subs = _list(out.get(key))
        if subs is not None:
            out[key] = [_strict(sub, tool, f"{path}.{key}[{i}]") for i, sub in enumerate(subs)]
    for key in _SUBSCHEMA_MAPS:
        defs = _dict(out.get(key))
        if defs is not None:
            out[key] = {
                name: _strict(sub, tool, f"{path}.{key}.{name}") for name, sub in defs.items()
            }
    if "items" in out:
        out["items"] = _strict(out["items"], tool, f"{path}.items")
    if _is_object(out):
        properties = _dict(out.get("properties"))
        if properties is None or out.get("additionalProperties", False) is not False:
            raise ValueError(
                f'tool "{tool}": strict mode needs every object to list its properties and allow '
                f"no others, but the object at {path} is open-ended; send this tool with "
                "strict=False"
            )
        required = set(_list(out.get("required")) or ())
        new_properties: dict[str, object] = {}
        for name, sub in properties.items():
            converted = _strict(sub, tool, f"{path}.properties.{name}")
            new_properties[name] = converted if name in required else _nullable(converted)
        out["properties"] = new_properties
        out["required"] = list(new_properties)
        out["additionalProperties"] = False
    return out


def _nullable(value: object) -> object:
    schema = _dict(value)
    if schema is None or _allows_null(schema):
        return value
    out = dict(schema)
    kind = out.get("type")
    kinds = _list(kind)
    any_of = _list(out.get("anyOf"))
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    elif kinds is not None:
        out["type"] = [*kinds, "null"]
    elif any_of is not None:
        out["anyOf"] = [*any_of, {"type": "null"}]
        return out
    else:
        return {"anyOf": [out, {"type": "null"}]}
    enum = _list(out.get("enum"))
    if enum is not None:
        out["enum"] = [*enum, None]
    return out


def _allows_null(schema: Mapping[str, object]) -> bool:
    kind = schema.get("type")
    kinds = _list(kind)
    if kind == "null" or (kinds is not None and "null" in kinds):
        enum = _list(schema.get("enum"))
        return enum is None or None in enum
    any_of = _list(schema.get("anyOf"))
    if any_of is not None:
        return any(sub is not None and _allows_null(sub) for sub in map(_dict, any_of))
    return False


def drop_optional_nulls(
    value: object, schema: Mapping[str, object], root: Mapping[str, object]
) -> object:
    """``value`` without the ``null`` of every property the original ``schema`` leaves optional
    (and does not itself allow to be ``null``), at every nesting level; a new value, or
    ``value`` itself when nothing was dropped.

    Objects are followed through ``properties`` and arrays through ``items``; a local
    ``$ref`` (``#/...``) is resolved against ``root``. Branches of ``anyOf``/``oneOf`` are not
    entered (which branch a value took is the validator's business).
    """
    schema = _resolve(schema, root)
    obj = _dict(value)
    if obj is not None:
        properties = _dict(schema.get("properties"))
        if properties is None:
            return value
        required = set(_list(schema.get("required")) or ())
        out: dict[str, object] = {}
        changed = False
        for key, item in obj.items():
            sub = _dict(properties.get(key))
            if sub is None:
                out[key] = item
                continue
            if item is None and key not in required and not _allows_null(_resolve(sub, root)):
                changed = True
                continue
            new = drop_optional_nulls(item, sub, root)
            changed = changed or new is not item
            out[key] = new
        return out if changed else value
    array = _list(value)
    items = _dict(schema.get("items"))
    if array is None or items is None:
        return value
    new_items = [drop_optional_nulls(item, items, root) for item in array]
    if all(new is old for new, old in zip(new_items, array, strict=True)):
        return value
    return new_items


def _resolve(schema: Mapping[str, object], root: Mapping[str, object]) -> Mapping[str, object]:
    for _ in range(32):  # a bounded walk: a $ref cycle stops here instead of looping
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        target: object = root
        for part in ref[2:].split("/"):
            node = _dict(target)
            part = part.replace("~1", "/").replace("~0", "~")
            if node is None or part not in node:
                return schema
            target = node[part]
        resolved = _dict(target)
        if resolved is None:
            return schema
        schema = resolved
    return schema
