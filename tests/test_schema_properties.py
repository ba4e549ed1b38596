"""Invariants of the schema DSL over generated specs, and ``jsonschema`` as an oracle.

The oracle runs ``jsonschema.Draft202012Validator`` on ``schema_spec_to_json_schema(spec)`` and
must agree with ``validate_args`` about accept/reject. The two semantics coincide except where
the DSL deliberately differs, so the generated specs and values exclude:

- ``enum`` on ``"object"`` / ``"array"`` properties: the DSL never checks it (the original's
  rule), JSON Schema does;
- tuples and frozen mappings as argument values: the DSL treats any sequence/mapping as JSON
  arrays/objects, while ``jsonschema``'s default type checker knows only ``list`` and ``dict``,
  so the oracle sees plain data.
"""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dsh_tools import SchemaProp, SchemaSpec, schema_spec_to_json_schema, validate_args
from strategies import json_scalars, json_values
from support import jsonschema_accepts

_SCALAR_TYPES = ("string", "number", "integer", "boolean")
_ALL_TYPES = (*_SCALAR_TYPES, "object", "array")
_MAX_DEPTH = 3

keys = st.text(max_size=6)


@st.composite
def schema_props(draw: st.DrawFn, depth: int = 0, *, conformable: bool = False) -> SchemaProp:
    """A well-formed property. ``conformable`` keeps enums on strings and non-empty, so that
    every generated spec has conforming arguments."""
    kind = draw(st.sampled_from(_ALL_TYPES if depth < _MAX_DEPTH else _SCALAR_TYPES))
    prop: dict[str, Any] = {"type": kind}
    if draw(st.booleans()):
        prop["required"] = True
    if draw(st.booleans()):
        prop["description"] = draw(st.text(max_size=8))
    enum_allowed = kind == "string" if conformable else kind in _SCALAR_TYPES
    if enum_allowed and draw(st.booleans()):
        prop["enum"] = draw(
            st.lists(st.text(max_size=4), min_size=1 if conformable else 0, max_size=4)
        )
    if draw(st.booleans()):
        prop["default"] = draw(json_values(max_leaves=3))
    if kind == "object" and draw(st.booleans()):
        prop["properties"] = draw(schema_specs(depth + 1, conformable=conformable))
    if kind == "array" and draw(st.booleans()):
        prop["items"] = draw(schema_props(depth + 1, conformable=conformable))
    return cast(SchemaProp, prop)


@st.composite
def schema_specs(draw: st.DrawFn, depth: int = 0, *, conformable: bool = False) -> SchemaSpec:
    names = draw(st.lists(keys, max_size=4, unique=True))
    return {name: draw(schema_props(depth, conformable=conformable)) for name in names}


def conforming_values(prop: SchemaProp) -> st.SearchStrategy[Any]:
    """Values that satisfy ``prop`` (for a conformable property)."""
    kind = prop["type"]
    if kind == "string":
        enum = prop.get("enum")
        return st.sampled_from(list(enum)) if enum is not None else st.text(max_size=5)
    if kind == "number":
        return st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    if kind == "integer":
        return st.integers() | st.integers(min_value=-(2**52), max_value=2**52).map(float)
    if kind == "boolean":
        return st.booleans()
    if kind == "object":
        nested = prop.get("properties")
        if nested is None:
            return st.dictionaries(keys, json_values(max_leaves=3), max_size=3)
        return conforming_arguments(nested)
    items = prop.get("items")
    return st.lists(
        json_values(max_leaves=3) if items is None else conforming_values(items), max_size=3
    )


def conforming_arguments(spec: SchemaSpec) -> st.SearchStrategy[dict[str, Any]]:
    """Objects that satisfy ``spec``: every required key, some optional keys, and unknown keys."""
    required = {k: conforming_values(p) for k, p in spec.items() if p.get("required") is True}
    optional = {k: conforming_values(p) for k, p in spec.items() if p.get("required") is not True}
    unknown = st.dictionaries(
        keys.filter(lambda k: k not in spec), json_values(max_leaves=2), max_size=2
    )
    return st.tuples(st.fixed_dictionaries(required, optional=optional), unknown).map(
        lambda parts: {**parts[1], **parts[0]}
    )


@st.composite
def specs_with_arguments(draw: st.DrawFn) -> tuple[SchemaSpec, dict[str, Any]]:
    """A spec and arguments that conform to it, or that differ from it in one top-level value."""
    spec = draw(schema_specs(conformable=True))
    arguments = draw(conforming_arguments(spec))
    if spec and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(spec)))
        arguments[key] = draw(json_values(max_leaves=4))
    return spec, arguments


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in cast(dict[str, Any], value).items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in cast(list[Any], value)]
    return value


def _required_everywhere(spec: SchemaSpec, schema: dict[str, Any]) -> list[tuple[object, object]]:
    """Pairs (required keys of the spec, ``required`` of the schema) at every object level."""
    pairs: list[tuple[object, object]] = [
        ([k for k, p in spec.items() if p.get("required") is True], schema.get("required", []))
    ]
    for key, prop in spec.items():
        pairs.extend(_required_in_prop(prop, schema["properties"][key]))
    return pairs


def _required_in_prop(prop: SchemaProp, schema: dict[str, Any]) -> list[tuple[object, object]]:
    nested = prop.get("properties")
    if prop["type"] == "object" and nested is not None:
        return _required_everywhere(nested, schema)
    items = prop.get("items")
    if prop["type"] == "array" and items is not None:
        return _required_in_prop(items, schema["items"])
    return []


@given(schema_specs())
def test_every_generated_spec_converts_to_a_valid_draft_2020_12_schema(spec: SchemaSpec) -> None:
    Draft202012Validator.check_schema(schema_spec_to_json_schema(spec))


@given(schema_specs())
def test_required_equals_the_required_keys_at_every_level(spec: SchemaSpec) -> None:
    for expected, actual in _required_everywhere(spec, schema_spec_to_json_schema(spec)):
        assert expected == actual


@given(schema_specs())
def test_conversion_returns_fresh_plain_data(spec: SchemaSpec) -> None:
    assert _plain(schema_spec_to_json_schema(spec)) == schema_spec_to_json_schema(spec)


@given(
    schema_specs(conformable=True).flatmap(lambda s: st.tuples(st.just(s), conforming_arguments(s)))
)
def test_conforming_arguments_have_no_violations(case: tuple[SchemaSpec, dict[str, Any]]) -> None:
    spec, arguments = case

    assert validate_args(spec, arguments) == []


@given(st.data())
def test_removing_a_required_key_yields_a_violation_naming_it(data: st.DataObject) -> None:
    # built with a required property rather than filtered for one: a filter throws away about
    # half the specs, which trips Hypothesis's too-slow health check on a loaded machine
    required: SchemaProp = {**data.draw(schema_props(conformable=True)), "required": True}
    key = data.draw(st.text(max_size=6))
    spec = {**data.draw(schema_specs(conformable=True)), key: required}
    arguments = data.draw(conforming_arguments(spec))
    del arguments[key]

    assert f'missing required property "{key}"' in validate_args(spec, arguments)


@given(
    schema_specs(),
    json_scalars | st.lists(json_values(max_leaves=3), max_size=3) | st.tuples(json_scalars),
)
def test_a_top_level_that_is_not_an_object_always_yields_one_violation(
    spec: SchemaSpec, arguments: object
) -> None:
    assert validate_args(spec, arguments) == ['"arguments" must be an object']


@given(specs_with_arguments())
def test_validate_args_agrees_with_jsonschema_about_accept_and_reject(
    case: tuple[SchemaSpec, dict[str, Any]],
) -> None:
    spec, arguments = case
    plain = _plain(arguments)

    assert jsonschema_accepts(schema_spec_to_json_schema(spec), plain) == (
        validate_args(spec, plain) == []
    )


@given(schema_specs(), json_values(max_leaves=6))
def test_validate_args_agrees_with_jsonschema_on_arbitrary_json(
    spec: SchemaSpec, arguments: object
) -> None:
    plain = _plain(arguments)

    assert jsonschema_accepts(schema_spec_to_json_schema(spec), plain) == (
        validate_args(spec, plain) == []
    )
