"""The schema DSL: ``validate_args`` and ``schema_spec_to_json_schema`` rule by rule.

The messages are the original's, byte for byte.
"""

from __future__ import annotations

import types
from typing import Any, cast

import pytest

from dsh_tools import (
    FrozenJsonObject,
    SchemaSpec,
    schema_spec_to_json_schema,
    snapshot_json,
    validate_args,
)


def _spec(raw: dict[str, Any]) -> SchemaSpec:
    """A spec the type checker would reject on purpose (extensions, malformed specs)."""
    return cast(SchemaSpec, raw)


def _frozen(value: dict[str, Any]) -> FrozenJsonObject:
    frozen = snapshot_json(value)
    assert isinstance(frozen, FrozenJsonObject)
    return frozen


SERVERS: SchemaSpec = {
    "servers": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"host": {"type": "string", "required": True}},
        },
    }
}

# --- the top level ----------------------------------------------------------------------------


@pytest.mark.parametrize("args", ["{}", None, 3, True, ["a"], ("a",)])
def test_arguments_that_are_not_an_object_give_exactly_one_violation(args: object) -> None:
    assert validate_args({"x": {"type": "string", "required": True}}, args) == [
        '"arguments" must be an object'
    ]


def test_a_frozen_json_object_is_an_object() -> None:
    assert validate_args({"x": {"type": "string"}}, _frozen({"x": "a"})) == []


def test_any_mapping_is_an_object() -> None:
    assert validate_args({"x": {"type": "string"}}, types.MappingProxyType({"x": "a"})) == []


def test_an_empty_spec_accepts_an_empty_object() -> None:
    assert validate_args({}, {}) == []


def test_unknown_argument_keys_are_allowed() -> None:
    assert validate_args({"x": {"type": "string"}}, {"x": "a", "y": 1}) == []


# --- presence -----------------------------------------------------------------------------------


def test_an_absent_required_property_is_missing() -> None:
    assert validate_args({"path": {"type": "string", "required": True}}, {}) == [
        'missing required property "path"'
    ]


def test_an_absent_optional_property_is_fine() -> None:
    assert validate_args({"path": {"type": "string"}}, {}) == []


def test_json_null_is_a_present_value_and_is_type_checked() -> None:
    assert validate_args({"path": {"type": "string", "required": True}}, {"path": None}) == [
        '"path" must be a string'
    ]


def test_a_default_is_not_applied_so_an_absent_required_property_is_still_missing() -> None:
    assert validate_args({"mode": {"type": "string", "required": True, "default": "r"}}, {}) == [
        'missing required property "mode"'
    ]


# --- types --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("string", '"x" must be a string'),
        ("number", '"x" must be a number'),
        ("integer", '"x" must be an integer'),
        ("boolean", '"x" must be a boolean'),
        ("object", '"x" must be an object'),
        ("array", '"x" must be an array'),
    ],
)
def test_a_value_of_the_wrong_type_names_the_expected_type(kind: str, message: str) -> None:
    wrong = {"object": "a", "array": "a"}.get(kind, {"k": 1})
    assert [message] == validate_args(_spec({"x": {"type": kind}}), {"x": wrong})


@pytest.mark.parametrize("value", [0, -7, 2.5, 1e300])
def test_a_number_is_an_int_or_a_float(value: float) -> None:
    assert validate_args({"x": {"type": "number"}}, {"x": value}) == []


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_never_a_number(value: bool) -> None:
    assert validate_args({"x": {"type": "number"}}, {"x": value}) == ['"x" must be a number']


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_never_an_integer(value: bool) -> None:
    assert validate_args({"x": {"type": "integer"}}, {"x": value}) == ['"x" must be an integer']


@pytest.mark.parametrize("value", [0, -3, 2**53 - 1, 3.0, -0.0])
def test_an_integer_is_an_int_or_an_integral_float(value: float) -> None:
    assert validate_args({"x": {"type": "integer"}}, {"x": value}) == []


@pytest.mark.parametrize("value", [1.5, "3", None])
def test_a_fractional_float_or_a_non_number_is_not_an_integer(value: object) -> None:
    assert validate_args({"x": {"type": "integer"}}, {"x": value}) == ['"x" must be an integer']


def test_a_number_string_is_not_a_number() -> None:
    assert validate_args({"x": {"type": "number"}}, {"x": "1"}) == ['"x" must be a number']


def test_zero_and_one_are_not_booleans() -> None:
    spec: SchemaSpec = {"a": {"type": "boolean"}, "b": {"type": "boolean"}}

    assert validate_args(spec, {"a": 0, "b": 1}) == [
        '"a" must be a boolean',
        '"b" must be a boolean',
    ]


@pytest.mark.parametrize("value", [[1, "a"], (1, "a"), []])
def test_lists_and_tuples_are_arrays(value: object) -> None:
    assert validate_args({"x": {"type": "array"}}, {"x": value}) == []


def test_a_string_is_not_an_array() -> None:
    assert validate_args({"x": {"type": "array"}}, {"x": "ab"}) == ['"x" must be an array']


def test_a_list_is_not_an_object() -> None:
    assert validate_args({"x": {"type": "object"}}, {"x": []}) == ['"x" must be an object']


def test_an_object_without_properties_accepts_any_object() -> None:
    assert validate_args({"x": {"type": "object"}}, _frozen({"x": {"a": [1, None]}})) == []


def test_an_array_without_items_accepts_any_elements() -> None:
    assert validate_args({"x": {"type": "array"}}, {"x": [1, "a", None, {"k": 1}]}) == []


# --- nesting and paths ----------------------------------------------------------------------------


def test_a_nested_property_path_joins_keys_with_dots() -> None:
    spec: SchemaSpec = {
        "server": {"type": "object", "properties": {"port": {"type": "integer"}}},
    }

    assert validate_args(spec, {"server": {"port": "22"}}) == ['"server.port" must be an integer']


def test_an_array_element_path_has_its_index() -> None:
    assert validate_args(SERVERS, _frozen({"servers": [{"host": "a"}, {"port": 1}]})) == [
        'missing required property "servers[1].host"'
    ]


def test_every_failing_array_element_is_reported() -> None:
    assert validate_args(SERVERS, {"servers": [{}, {"host": "b"}, {"host": 3}]}) == [
        'missing required property "servers[0].host"',
        '"servers[2].host" must be a string',
    ]


def test_an_array_element_of_the_wrong_type_is_reported_at_its_index() -> None:
    assert validate_args(SERVERS, {"servers": ["a"]}) == ['"servers[0]" must be an object']


def test_nested_arrays_chain_their_indices() -> None:
    spec: SchemaSpec = {
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}
    }

    assert validate_args(spec, {"grid": [[1], ["x"]]}) == ['"grid[1][0]" must be a number']


def test_violations_follow_the_declaration_order_of_the_spec() -> None:
    spec: SchemaSpec = {
        "b": {"type": "string", "required": True},
        "a": {"type": "number"},
        "c": {"type": "object", "properties": {"d": {"type": "boolean", "required": True}}},
    }

    assert validate_args(spec, {"c": {}, "a": "x"}) == [
        'missing required property "b"',
        '"a" must be a number',
        'missing required property "c.d"',
    ]


def test_a_nested_violation_is_reported_in_place_between_its_siblings() -> None:
    spec: SchemaSpec = {
        "a": {"type": "string"},
        "o": {"type": "object", "properties": {"x": {"type": "string"}}},
        "z": {"type": "string"},
    }

    assert (validate_args(spec, {"a": 1, "o": {"x": 1}, "z": 1})) == [
        '"a" must be a string',
        '"o.x" must be a string',
        '"z" must be a string',
    ]


# --- enums --------------------------------------------------------------------------------------


COLOR: SchemaSpec = {"color": {"type": "string", "enum": ["red", "green"]}}


def test_a_value_outside_the_enum_lists_the_enum_as_compact_json() -> None:
    assert validate_args(COLOR, {"color": "blue"}) == ['"color" must be one of ["red","green"]']


def test_a_value_inside_the_enum_is_accepted() -> None:
    assert validate_args(COLOR, {"color": "green"}) == []


def test_the_type_check_wins_over_the_enum_check() -> None:
    assert validate_args(COLOR, {"color": 1}) == ['"color" must be a string']


def test_an_empty_enum_rejects_every_value() -> None:
    assert validate_args({"x": {"type": "string", "enum": []}}, {"x": ""}) == [
        '"x" must be one of []'
    ]


def test_an_enum_message_keeps_non_ascii_text() -> None:
    assert validate_args({"x": {"type": "string", "enum": ["café"]}}, {"x": "cafe"}) == [
        '"x" must be one of ["café"]'
    ]


def test_an_enum_on_a_number_property_never_matches_a_number_for_a_string_member() -> None:
    assert validate_args({"n": {"type": "number", "enum": ["1"]}}, {"n": 1}) == [
        '"n" must be one of ["1"]'
    ]


def test_an_enum_never_treats_true_as_one() -> None:
    assert validate_args(_spec({"b": {"type": "boolean", "enum": [1]}}), {"b": True}) == [
        '"b" must be one of [1]'
    ]


def test_an_enum_treats_one_and_one_point_zero_as_the_same_json_number() -> None:
    assert validate_args(_spec({"n": {"type": "integer", "enum": [1]}}), {"n": 1.0}) == []


def test_an_enum_on_an_object_property_is_not_checked() -> None:
    assert validate_args(_spec({"o": {"type": "object", "enum": ["a"]}}), {"o": {}}) == []


def test_an_enum_on_an_array_property_is_not_checked() -> None:
    assert validate_args(_spec({"a": {"type": "array", "enum": ["a"]}}), {"a": []}) == []


def test_a_frozen_enum_works_like_a_list() -> None:
    spec = snapshot_json({"c": {"type": "string", "enum": ["a", "b"]}})

    assert validate_args(cast(SchemaSpec, spec), {"c": "z"}) == ['"c" must be one of ["a","b"]']


# --- malformed specs ------------------------------------------------------------------------------


def test_an_unknown_type_in_the_spec_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r'^unreachable variant in validateArgs: "weird"$'):
        validate_args(_spec({"x": {"type": "weird"}}), {"x": 1})


def test_an_unknown_type_raises_even_when_the_argument_is_absent() -> None:
    with pytest.raises(ValueError, match=r'^unreachable variant in validateArgs: "weird"$'):
        validate_args(_spec({"x": {"type": "weird"}}), {})


def test_an_unknown_type_deep_in_the_spec_raises() -> None:
    spec = _spec({"x": {"type": "array", "items": {"type": "null"}}})

    with pytest.raises(ValueError, match=r'^unreachable variant in validateArgs: "null"$'):
        validate_args(spec, {})


def test_a_missing_type_in_the_spec_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r"^unreachable variant in validateArgs: null$"):
        validate_args(_spec({"x": {}}), {})


def test_a_property_that_is_not_a_mapping_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="schema property must be a mapping"):
        validate_args(_spec({"x": "string"}), {})


def test_an_enum_that_is_not_a_list_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="schema enum must be a list"):
        validate_args(_spec({"x": {"type": "string", "enum": "abc"}}), {})


# --- schema_spec_to_json_schema -------------------------------------------------------------------


def test_an_empty_spec_converts_to_an_object_schema_without_required() -> None:
    assert schema_spec_to_json_schema({}) == {"type": "object", "properties": {}}


def test_required_lists_the_required_keys_in_declaration_order() -> None:
    spec: SchemaSpec = {
        "b": {"type": "string", "required": True},
        "a": {"type": "string"},
        "c": {"type": "number", "required": True},
    }

    assert schema_spec_to_json_schema(spec)["required"] == ["b", "c"]


def test_required_is_omitted_when_no_key_is_required() -> None:
    assert "required" not in schema_spec_to_json_schema({"a": {"type": "string"}})


def test_a_property_emits_its_keys_in_the_original_order() -> None:
    spec = _spec(
        {
            "x": {
                "default": "r",
                "enum": ["r"],
                "description": "d",
                "required": True,
                "type": "string",
            }
        }
    )

    assert list(schema_spec_to_json_schema(spec)["properties"]["x"]) == [
        "type",
        "description",
        "enum",
        "default",
    ]


def test_an_empty_description_is_dropped() -> None:
    assert schema_spec_to_json_schema({"x": {"type": "string", "description": ""}})["properties"][
        "x"
    ] == {"type": "string"}


def test_an_empty_enum_is_emitted() -> None:
    assert schema_spec_to_json_schema({"x": {"type": "string", "enum": []}})["properties"]["x"] == {
        "type": "string",
        "enum": [],
    }


def test_a_null_default_is_emitted() -> None:
    assert schema_spec_to_json_schema({"x": {"type": "string", "default": None}})["properties"][
        "x"
    ] == {"type": "string", "default": None}


def test_a_nested_object_emits_its_properties_and_required() -> None:
    spec: SchemaSpec = {
        "o": {
            "type": "object",
            "description": "nested",
            "properties": {"a": {"type": "integer", "required": True}, "b": {"type": "boolean"}},
        }
    }

    assert schema_spec_to_json_schema(spec)["properties"]["o"] == {
        "type": "object",
        "description": "nested",
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
        "required": ["a"],
    }


def test_a_nested_object_without_required_keys_omits_required() -> None:
    assert (
        schema_spec_to_json_schema(
            {"o": {"type": "object", "properties": {"a": {"type": "string"}}}}
        )["properties"]["o"]
    ) == {"type": "object", "properties": {"a": {"type": "string"}}}


def test_an_object_without_properties_is_just_its_type() -> None:
    assert schema_spec_to_json_schema({"o": {"type": "object"}})["properties"]["o"] == {
        "type": "object"
    }


def test_an_object_with_empty_properties_emits_them() -> None:
    assert schema_spec_to_json_schema({"o": {"type": "object", "properties": {}}})["properties"][
        "o"
    ] == {"type": "object", "properties": {}}


def test_an_array_without_items_is_just_its_type() -> None:
    assert schema_spec_to_json_schema({"a": {"type": "array"}})["properties"]["a"] == {
        "type": "array"
    }


def test_an_array_emits_its_converted_items_without_their_required_flag() -> None:
    spec: SchemaSpec = {
        "a": {"type": "array", "items": {"type": "string", "required": True, "description": "d"}}
    }

    assert (schema_spec_to_json_schema(spec)["properties"]["a"]) == {
        "type": "array",
        "items": {"type": "string", "description": "d"},
    }


def test_properties_of_other_types_are_not_emitted() -> None:
    spec = _spec({"s": {"type": "string", "properties": {}, "items": {"type": "string"}}})

    assert schema_spec_to_json_schema(spec)["properties"]["s"] == {"type": "string"}


def test_the_json_schema_shares_nothing_with_the_spec() -> None:
    enum = ["a"]
    default = {"k": [1]}
    spec = _spec({"x": {"type": "string", "enum": enum, "default": default}})

    schema = schema_spec_to_json_schema(spec)
    schema["properties"]["x"]["enum"].append("b")
    schema["properties"]["x"]["default"]["k"].append(2)

    assert (enum, default) == (["a"], {"k": [1]})


def test_a_frozen_spec_converts_to_plain_lists_and_dicts() -> None:
    spec = snapshot_json({"x": {"type": "string", "enum": ["a"], "default": {"k": [1]}}})

    schema = schema_spec_to_json_schema(cast(SchemaSpec, spec))

    assert (list, dict, list) == (
        type(schema["properties"]["x"]["enum"]),
        type(schema["properties"]["x"]["default"]),
        type(schema["properties"]["x"]["default"]["k"]),
    )


def test_an_enum_with_null_and_container_members_never_matches_them_by_accident() -> None:
    spec = _spec({"x": {"type": "string", "enum": [None, ["a"], "b"]}})

    assert validate_args(spec, {"x": "a"}) == ['"x" must be one of [null,["a"],"b"]']


def test_a_spec_that_is_not_a_mapping_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="schema spec must be a mapping"):
        validate_args(cast(SchemaSpec, ["x"]), {})


def test_an_unknown_type_that_is_not_json_is_shown_by_its_repr() -> None:
    with pytest.raises(ValueError, match=r"^unreachable variant in validateArgs: <class 'int'>$"):
        validate_args(_spec({"x": {"type": int}}), {})


def test_enum_numbers_in_a_violation_print_as_javascript_prints_them() -> None:
    spec = cast(SchemaSpec, {"n": {"type": "number", "enum": [1.0, 2.5, 1e21]}})

    assert ['"n" must be one of [1,2.5,1e+21]'] == validate_args(spec, {"n": 3})


def test_an_unknown_integral_float_type_prints_without_a_decimal() -> None:
    with pytest.raises(ValueError) as caught:
        validate_args(cast(SchemaSpec, {"n": {"type": 3.0}}), {})

    assert "unreachable variant in validateArgs: 3" == str(caught.value)
