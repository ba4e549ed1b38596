r"""A server's regular expressions, matched in linear time.

jsonschema matches ``pattern`` and ``patternProperties`` with Python's ``re``, which backtracks:
``^(a+)+$`` against 28 characters holds the GIL for seconds, so neither a worker thread nor a
deadline helps (the event loop cannot run while it holds the GIL). The validators a mount
builds match those keywords, and the property names ``additionalProperties`` weighs against
``patternProperties``, with RE2 (``google-re2``), whose time is linear in the text. RE2 is also
closer to the schema's own dialect (ECMA-262: ``\d`` is an ASCII digit) than ``re`` is.

RE2 has no backreferences and no lookaround. A pattern that uses them is not matched here at
all (the server, which wrote it, checks its own arguments): :func:`unmatched_patterns` names
them so that the mount can warn once. ``unevaluatedProperties`` finds the properties that
``patternProperties`` evaluated with ``re`` deep inside jsonschema; a schema that has both
(:func:`needs_backtracking`) is left to the server whole.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

import jsonschema.validators
import re2  # pyright: ignore[reportMissingTypeStubs]
from jsonschema.exceptions import ValidationError

__all__ = ["linear_validator", "needs_backtracking", "unmatched_patterns"]

_OPTIONS: Final = cast(Any, re2).Options()
_OPTIONS.log_errors = False  # RE2 would print a pattern it refuses to stderr


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    """RE2's program for ``pattern``, or ``None`` when RE2 cannot run it."""
    try:
        return cast(Any, re2).compile(pattern, _OPTIONS)
    except cast(Any, re2).error:
        return None


def _matches(pattern: str, text: str) -> bool:
    """``re.search(pattern, text)`` in linear time; a pattern RE2 cannot run matches
    everything (it is left to the server).
    """
    program = _compiled(pattern)
    return program is None or program.search(text) is not None


def _pattern(validator: Any, pattern: str, instance: object, schema: object) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _matches(pattern, cast(str, instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, object], instance: object, schema: object
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = cast("Mapping[str, object]", instance)
    for pattern, subschema in patterns.items():
        if _compiled(pattern) is None:
            continue  # unknown which properties it names: the server checks them
        for name, value in properties.items():
            if _matches(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: object, instance: object, schema: Mapping[str, object]
) -> Iterator[Any]:
    patterns = cast("Mapping[str, object] | None", schema.get("patternProperties"))
    if not patterns or not validator.is_type(instance, "object"):
        yield from _BUILT_IN_ADDITIONAL(validator, additional, instance, schema)
        return
    # jsonschema's own keyword, with the names the patterns match listed as properties (its
    # own search of them would run re), and its words for the extras that match no pattern
    properties = cast("Mapping[str, object]", instance)
    known = cast("Mapping[str, object]", schema.get("properties", {}))
    matched = [
        name
        for name in properties
        if name not in known and any(_matches(pattern, name) for pattern in patterns)
    ]
    view = {key: value for key, value in schema.items() if key != "patternProperties"}
    view["properties"] = {**known, **dict.fromkeys(matched, True)}
    for error in _BUILT_IN_ADDITIONAL(validator, additional, instance, view):
        if validator.is_type(additional, "object"):
            yield error
            continue
        extras = sorted(name for name in properties if name not in view["properties"])
        verb = "does" if len(extras) == 1 else "do"
        listed = ", ".join(repr(pattern) for pattern in sorted(patterns))
        yield ValidationError(
            f"{', '.join(repr(name) for name in extras)} {verb} not match any of the regexes: "
            f"{listed}"
        )


_BUILT_IN_ADDITIONAL: Final[Any] = jsonschema.Draft202012Validator.VALIDATORS[
    "additionalProperties"
]


def linear_validator(base: type[Any]) -> type[Any]:
    """``base`` (a jsonschema validator class) with its regular expressions on RE2."""
    return cast(
        "type[Any]",
        cast(Any, jsonschema.validators).extend(
            base,
            {
                "pattern": _pattern,
                "patternProperties": _pattern_properties,
                "additionalProperties": _additional_properties,
            },
        ),
    )


def _objects(schema: object) -> Iterator[Mapping[str, object]]:
    """Every JSON object in a schema, at any depth."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list | tuple):
            stack.extend(cast("list[object]", node))
        elif isinstance(node, Mapping):
            mapping = cast("Mapping[str, object]", node)
            yield mapping
            stack.extend(mapping.values())


def _patterns(schema: object) -> Iterator[tuple[str, Mapping[str, object]]]:
    """Every ``(pattern, schema object holding it)`` in a schema, ``pattern`` values and
    ``patternProperties`` keys.
    """
    for mapping in _objects(schema):
        value = mapping.get("pattern")
        if isinstance(value, str):
            yield value, mapping
        named = mapping.get("patternProperties")
        if isinstance(named, Mapping):
            for key in cast("Mapping[str, object]", named):
                yield key, mapping


def unmatched_patterns(schema: object) -> list[str]:
    """The patterns of ``schema`` RE2 cannot run (backreferences, lookaround), each once."""
    return list(dict.fromkeys(p for p, _ in _patterns(schema) if _compiled(p) is None))


def needs_backtracking(schema: object) -> bool:
    """Whether ``schema`` pairs ``patternProperties`` with ``unevaluatedProperties``, which
    jsonschema resolves with ``re`` where no keyword of a validator reaches.
    """
    has_pattern_properties = any("patternProperties" in holder for _, holder in _patterns(schema))
    return has_pattern_properties and any(
        "unevaluatedProperties" in mapping for mapping in _objects(schema)
    )
