"""The structured-output subset over generated schemas, with ``jsonschema`` as the oracle.

Inside the subset the two semantics coincide, so ``validate_structured_value`` must accept
exactly what ``jsonschema.Draft202012Validator`` accepts. Values are plain ``dict`` / ``list``
data (``jsonschema``'s default type checker does not know tuples or frozen mappings) and finite
(the subset's ``number`` also rejects non-finite floats, which JSON cannot carry anyway).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dsh_tools import assert_supported_output_schema, validate_structured_value
from strategies import json_values
from support import jsonschema_accepts

_SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")
_ALL_TYPES = (*_SCALAR_TYPES, "object", "array")
_MAX_DEPTH = 3

keys = st.text(max_size=5)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([0.0, 1.0, 1.5, -2.5]),
    st.text(max_size=2),
)


@st.composite
def subset_schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """A schema node inside the subset (the root is always an object)."""
    if depth == 0:
        kind = "object"
    else:
        kind = draw(st.sampled_from(_ALL_TYPES if depth < _MAX_DEPTH else _SCALAR_TYPES))
    node: dict[str, Any] = {"type": kind}
    if draw(st.booleans()):
        node["description"] = draw(st.text(max_size=6))
    if kind == "object":
        properties: dict[str, Any] | None = None
        if draw(st.booleans()):
            names = draw(st.lists(keys, max_size=4, unique=True))
            properties = {name: draw(subset_schemas(depth + 1)) for name in names}
            node["properties"] = properties
        if draw(st.booleans()):
            node["required"] = draw(
                st.lists(st.sampled_from(sorted(properties)), unique=True)
                if properties
                else st.just([])
            )
        if draw(st.booleans()):
            node["additionalProperties"] = draw(st.booleans())
    elif kind == "array":
        if draw(st.booleans()):
            node["items"] = draw(subset_schemas(depth + 1))
    else:
        if draw(st.booleans()):
            node["enum"] = draw(st.lists(scalars, min_size=1, max_size=4))
        if draw(st.booleans()):
            node["const"] = draw(scalars)
    return node


def near_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values shaped like ``schema`` (often valid, sometimes not), plus arbitrary JSON."""
    return st.one_of(_shaped(schema), json_values(max_leaves=4))


def _shaped(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema["type"]
    if kind == "object":
        properties: dict[str, Any] = schema.get("properties", {})
        declared = {name: near_values(child) for name, child in properties.items()}
        return st.tuples(
            st.fixed_dictionaries({}, optional=declared),
            st.dictionaries(keys, json_values(max_leaves=2), max_size=2),
            st.booleans(),
        ).map(lambda parts: {**parts[1], **parts[0]} if parts[2] else parts[0])
    if kind == "array":
        items = schema.get("items")
        return st.lists(
            json_values(max_leaves=2) if items is None else near_values(items), max_size=3
        )
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"]) | scalars
    base: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=3),
        "number": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
        "integer": st.integers() | st.sampled_from([2.0, 2.5]),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    return base[kind]


@given(subset_schemas())
def test_every_generated_subset_schema_is_supported(schema: dict[str, Any]) -> None:
    assert_supported_output_schema(schema)


@given(subset_schemas())
def test_every_generated_subset_schema_is_a_valid_draft_2020_12_schema(
    schema: dict[str, Any],
) -> None:
    Draft202012Validator.check_schema(schema)


@given(subset_schemas().flatmap(lambda s: st.tuples(st.just(s), near_values(s))))
def test_validate_structured_value_agrees_with_jsonschema(case: tuple[dict[str, Any], Any]) -> None:
    schema, value = case

    assert jsonschema_accepts(schema, value) == (validate_structured_value(schema, value) == [])


@given(subset_schemas().flatmap(lambda s: st.tuples(st.just(s), near_values(s))))
def test_every_violation_names_a_path_under_value(case: tuple[dict[str, Any], Any]) -> None:
    schema, value = case

    assert [
        message
        for message in validate_structured_value(schema, value)
        if not message.startswith(('"value', 'missing required property "value.'))
    ] == []
