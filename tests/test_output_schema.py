"""The structured-output subset: ``assert_supported_output_schema`` and
``validate_structured_value`` rule by rule, with the original's messages."""

from __future__ import annotations

import datetime
from typing import Any, cast

import pytest

from dsh_tools import (
    OutputSchemaError,
    StructuredOutputSchema,
    StructuredSchemaNode,
    assert_supported_output_schema,
    snapshot_json,
    validate_structured_value,
)

SUBSET = (
    "is not a supported keyword "
    "(subset: type/properties/required/additionalProperties/items/enum/const + annotations)"
)


def _violations(schema: object) -> list[str]:
    with pytest.raises(OutputSchemaError) as caught:
        assert_supported_output_schema(cast(Any, schema))
    return list(caught.value.violations)


def _violations_or_none(schema: object) -> list[str]:
    """The schema's violations, ``[]`` when the assertion accepts it."""
    try:
        assert_supported_output_schema(cast(Any, schema))
    except OutputSchemaError as error:
        return list(error.violations)
    return []


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


# --- assert_supported_output_schema ---------------------------------------------------------------


def test_a_supported_schema_passes() -> None:
    schema = {
        "type": "object",
        "title": "Answer",
        "description": "the answer",
        "properties": {
            "name": {"type": "string", "examples": ["x"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "score": {"type": "number", "default": 1.5},
            "count": {"type": "integer", "const": 3},
            "done": {"type": "boolean"},
            "none": {"type": "null"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }

    assert_supported_output_schema(schema)  # raises on any violation
    assert ['"value.count" must be 3'] == validate_structured_value(
        schema, {"name": "n", "count": 4}
    )


def test_a_frozen_schema_counts_as_plain_objects() -> None:
    schema = snapshot_json(_object(a={"type": "string"}))
    assert_supported_output_schema(cast(Any, schema))  # raises on any violation
    assert ['"value.a" must be a string'] == validate_structured_value(cast(Any, schema), {"a": 1})


def test_the_error_carries_its_code_and_joined_message() -> None:
    with pytest.raises(OutputSchemaError) as caught:
        assert_supported_output_schema({"type": "object", "pattern": "x", "oneOf": []})

    assert (caught.value.code, str(caught.value)) == (
        "UNSUPPORTED_SCHEMA",
        f"unsupported output schema: schema.pattern {SUBSET}; schema.oneOf {SUBSET}",
    )


@pytest.mark.parametrize("node", [None, [], "object", 3, datetime.date(2020, 1, 1), {1: "a"}])
def test_a_root_that_is_not_a_plain_object_is_not_a_schema_object(node: object) -> None:
    assert _violations(node) == ["schema must be a schema object"]


def test_a_child_that_is_not_a_plain_object_is_reported_at_its_path() -> None:
    assert _violations(_object(a=["string"])) == ["schema.properties.a must be a schema object"]


def test_a_node_on_its_own_path_is_circular() -> None:
    schema: dict[str, Any] = {"type": "array"}
    schema["items"] = schema

    assert _violations(_object(a=schema)) == ["schema.properties.a.items is circular"]


def test_a_node_reused_by_siblings_is_fine() -> None:
    shared = {"type": "string"}

    assert [] == _violations_or_none(_object(a=shared, b=shared))


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf", "allOf", "not", "$ref", "minimum"])
def test_a_keyword_outside_the_subset_is_reported(keyword: str) -> None:
    assert _violations({"type": "object", keyword: {}}) == [f"schema.{keyword} {SUBSET}"]


def test_unsupported_keywords_are_reported_in_key_order() -> None:
    schema = _object(s={"maxLength": 3, "type": "string", "pattern": "x"})

    assert _violations(schema) == [
        f"schema.properties.s.maxLength {SUBSET}",
        f"schema.properties.s.pattern {SUBSET}",
    ]


@pytest.mark.parametrize(
    "value",
    [float("inf"), float("nan"), {1, 2}, datetime.date(2020, 1, 1), [b"x"], {"k": object()}],
)
def test_an_annotation_that_is_not_json_data_is_reported(value: object) -> None:
    assert _violations(_object(a={"type": "string", "default": value})) == [
        "schema.properties.a.default annotation must be JSON data"
    ]


def test_a_cyclic_annotation_is_not_json_data() -> None:
    example: list[Any] = []
    example.append(example)

    assert _violations({"type": "object", "examples": example}) == [
        "schema.examples annotation must be JSON data"
    ]


def test_a_non_string_description_is_reported() -> None:
    assert _violations({"type": "object", "description": 3}) == [
        "schema.description must be a string"
    ]


def test_a_non_string_title_is_reported() -> None:
    assert _violations({"type": "object", "title": ["t"]}) == ["schema.title must be a string"]


def test_a_type_array_is_reported() -> None:
    assert _violations(_object(a={"type": ["string", "null"]})) == [
        "schema.properties.a.type must be a single type string (type arrays are not supported)"
    ]


@pytest.mark.parametrize("kind", ["text", "float", 3, None])
def test_an_unknown_type_is_reported(kind: object) -> None:
    assert _violations(_object(a={"type": kind})) == [
        "schema.properties.a.type must be one of object/array/string/number/integer/boolean/null"
    ]


def test_a_node_without_a_type_is_reported() -> None:
    assert _violations(_object(a={"description": "d"})) == [
        "schema.properties.a.type must be one of object/array/string/number/integer/boolean/null"
    ]


def test_a_bad_type_stops_the_walk_of_its_node() -> None:
    schema = _object(a={"type": "tuple", "items": {"type": "nope"}, "enum": []})

    assert _violations(schema) == [
        "schema.properties.a.type must be one of object/array/string/number/integer/boolean/null"
    ]


@pytest.mark.parametrize("keyword", ["properties", "required", "additionalProperties", "items"])
def test_a_container_keyword_on_a_scalar_type_is_reported(keyword: str) -> None:
    assert _violations(_object(a={"type": "string", keyword: {}})) == [
        f'schema.properties.a.{keyword} is not supported on type "string"'
    ]


def test_items_on_an_object_is_reported() -> None:
    assert _violations({"type": "object", "items": {"type": "string"}}) == [
        'schema.items is not supported on type "object"'
    ]


def test_properties_on_an_array_is_reported() -> None:
    assert _violations(_object(a={"type": "array", "properties": {}})) == [
        'schema.properties.a.properties is not supported on type "array"'
    ]


def test_enum_and_const_on_a_container_type_are_reported() -> None:
    assert _violations(_object(a={"type": "array", "const": 1, "enum": [1]})) == [
        'schema.properties.a.enum is not supported on type "array"',
        'schema.properties.a.const is not supported on type "array"',
    ]


def test_misplaced_keywords_are_reported_in_the_fixed_keyword_order() -> None:
    schema = _object(a={"type": "null", "items": {}, "required": [], "properties": {}})

    assert _violations(schema) == [
        'schema.properties.a.properties is not supported on type "null"',
        'schema.properties.a.required is not supported on type "null"',
        'schema.properties.a.items is not supported on type "null"',
    ]


def test_a_misplaced_keyword_is_not_walked() -> None:
    schema = _object(a={"type": "string", "items": {"type": "nope"}})

    assert _violations(schema) == ['schema.properties.a.items is not supported on type "string"']


@pytest.mark.parametrize("properties", [[], "a", None, {1: {"type": "string"}}])
def test_properties_that_are_not_an_object_are_reported(properties: object) -> None:
    assert _violations({"type": "object", "properties": properties}) == [
        "schema.properties must be an object of schemas"
    ]


@pytest.mark.parametrize("required", ["a", [1], {"a": True}])
def test_required_that_is_not_a_list_of_strings_is_reported(required: object) -> None:
    assert _violations({**_object(a={"type": "string"}), "required": required}) == [
        "schema.required must be an array of strings"
    ]


def test_a_required_name_outside_properties_is_reported() -> None:
    assert _violations({**_object(a={"type": "string"}), "required": ["a", "b"]}) == [
        'schema.required names "b" which is not in properties'
    ]


def test_without_properties_every_required_name_is_reported() -> None:
    assert _violations({"type": "object", "required": ["a", "__class__"]}) == [
        'schema.required names "a" which is not in properties',
        'schema.required names "__class__" which is not in properties',
    ]


def test_additional_properties_must_be_a_boolean() -> None:
    assert _violations({"type": "object", "additionalProperties": {"type": "string"}}) == [
        "schema.additionalProperties must be a boolean"
    ]


def test_items_are_walked_at_their_path() -> None:
    schema = _object(a={"type": "array", "items": {"type": "string", "minLength": 1}})

    assert _violations(schema) == [f"schema.properties.a.items.minLength {SUBSET}"]


@pytest.mark.parametrize("enum", [[], "a", [[1]], [{"a": 1}], [float("inf")]])
def test_an_enum_must_be_a_non_empty_list_of_scalars(enum: object) -> None:
    assert _violations(_object(a={"type": "string", "enum": enum})) == [
        "schema.properties.a.enum must be a non-empty array of scalars"
    ]


@pytest.mark.parametrize("const", [[1], {"a": 1}, float("nan")])
def test_a_const_must_be_a_scalar(const: object) -> None:
    assert _violations(_object(a={"type": "string", "const": const})) == [
        "schema.properties.a.const must be a scalar"
    ]


def test_a_null_const_is_a_scalar() -> None:
    assert [] == _violations_or_none(_object(a={"type": "null", "const": None}))


def test_enum_and_const_are_not_checked_against_the_type() -> None:
    assert [] == _violations_or_none(_object(a={"type": "string", "enum": [1, True], "const": 2}))


def test_numbers_in_messages_print_as_javascript_prints_them() -> None:
    schema: Any = _object(
        a={"type": "number", "const": 3.0},
        b={"type": "number", "enum": [1.0, 2.5, 1e21, 1e-7]},
    )

    assert [
        '"value.a" must be 3',
        '"value.b" must be one of [1,2.5,1e+21,1e-7]',
    ] == validate_structured_value(schema, {"a": 4, "b": 7})


def test_a_root_of_another_type_is_reported_when_nothing_else_is_wrong() -> None:
    assert _violations({"type": "array", "items": {"type": "string"}}) == [
        'schema.type must be "object" (structured output is object-rooted)'
    ]


def test_the_root_type_rule_waits_for_the_other_violations() -> None:
    assert _violations({"type": "string", "pattern": "x"}) == [f"schema.pattern {SUBSET}"]


def test_every_violation_is_collected_in_walk_order() -> None:
    schema = {
        "type": "object",
        "anyOf": [],
        "properties": {
            "a": {"type": "string", "format": "uri"},
            "b": {"type": "array", "items": {"type": ["string"]}},
        },
        "required": ["c"],
        "additionalProperties": "no",
    }

    assert _violations(schema) == [
        f"schema.anyOf {SUBSET}",
        f"schema.properties.a.format {SUBSET}",
        "schema.properties.b.items.type must be a single type string "
        "(type arrays are not supported)",
        'schema.required names "c" which is not in properties',
        "schema.additionalProperties must be a boolean",
    ]


# --- validate_structured_value --------------------------------------------------------------------


PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
}


def test_a_conforming_value_has_no_violations() -> None:
    assert validate_structured_value(PERSON, {"name": "a", "age": 3, "tags": ["x"]}) == []


def test_a_frozen_value_is_validated_like_plain_data() -> None:
    assert validate_structured_value(PERSON, snapshot_json({"name": "a", "age": 3})) == []


@pytest.mark.parametrize("value", [[], "a", None, datetime.date(2020, 1, 1), {1: "a"}])
def test_a_non_object_value_for_an_object_schema_is_reported(value: object) -> None:
    assert validate_structured_value(PERSON, value) == ['"value" must be an object']


def test_missing_required_properties_come_first_in_required_order() -> None:
    assert validate_structured_value(PERSON, {"tags": [1]}) == [
        'missing required property "value.name"',
        'missing required property "value.age"',
        '"value.tags[0]" must be a string',
    ]


def test_null_is_a_present_value() -> None:
    assert validate_structured_value(PERSON, {"name": None, "age": 1}) == [
        '"value.name" must be a string'
    ]


def test_declared_properties_are_validated_in_properties_order() -> None:
    assert validate_structured_value(PERSON, {"age": "x", "name": 1}) == [
        '"value.name" must be a string',
        '"value.age" must be an integer',
    ]


def test_undeclared_properties_are_allowed_by_default() -> None:
    assert validate_structured_value(PERSON, {"name": "a", "age": 1, "extra": 1}) == []


def test_additional_properties_false_reports_undeclared_keys_in_value_order() -> None:
    schema = {**PERSON, "additionalProperties": False}

    assert validate_structured_value(schema, {"z": 1, "name": "a", "age": 1, "y": 2}) == [
        '"value.z" is not a declared property (additionalProperties: false)',
        '"value.y" is not a declared property (additionalProperties: false)',
    ]


def test_object_violations_are_ordered_required_then_properties_then_additional() -> None:
    schema = {**PERSON, "additionalProperties": False}

    assert validate_structured_value(schema, {"extra": 1, "age": 1.5}) == [
        'missing required property "value.name"',
        '"value.age" must be an integer',
        '"value.extra" is not a declared property (additionalProperties: false)',
    ]


def test_a_non_array_value_for_an_array_schema_is_reported() -> None:
    schema = _object(a={"type": "array"})

    assert validate_structured_value(schema, {"a": "abc"}) == ['"value.a" must be an array']


def test_an_array_without_items_accepts_anything_inside() -> None:
    assert validate_structured_value(_object(a={"type": "array"}), {"a": [1, "x", None]}) == []


def test_nested_paths_chain_keys_and_indices() -> None:
    schema = _object(rows={"type": "array", "items": _object(cells={"type": "array"})})

    assert validate_structured_value(schema, {"rows": [{"cells": [0]}, {"cells": 1}]}) == [
        '"value.rows[1].cells" must be an array'
    ]


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("string", 1, '"value.x" must be a string'),
        ("number", "1", '"value.x" must be a finite number'),
        ("number", float("inf"), '"value.x" must be a finite number'),
        ("number", float("nan"), '"value.x" must be a finite number'),
        ("number", True, '"value.x" must be a finite number'),
        ("integer", 1.5, '"value.x" must be an integer'),
        ("integer", "x", '"value.x" must be an integer'),
        ("integer", False, '"value.x" must be an integer'),
        ("integer", float("inf"), '"value.x" must be an integer'),
        ("boolean", 0, '"value.x" must be a boolean'),
        ("null", 0, '"value.x" must be null'),
        ("null", "null", '"value.x" must be null'),
    ],
)
def test_a_scalar_of_the_wrong_type_is_reported(kind: str, value: object, message: str) -> None:
    assert validate_structured_value(_object(x={"type": kind}), {"x": value}) == [message]


@pytest.mark.parametrize(
    ("kind", "value"),
    [("integer", 3), ("integer", 3.0), ("integer", 10**30), ("number", 2.5), ("null", None)],
)
def test_a_scalar_of_the_right_type_is_accepted(kind: str, value: object) -> None:
    assert validate_structured_value(_object(x={"type": kind}), {"x": value}) == []


def test_a_value_outside_the_enum_is_reported_as_compact_json() -> None:
    schema = _object(x={"type": "string", "enum": ["a", "b"]})

    assert validate_structured_value(schema, {"x": "c"}) == ['"value.x" must be one of ["a","b"]']


def test_an_enum_never_treats_true_as_one() -> None:
    schema = _object(x={"type": "integer", "enum": [1, 2]})

    assert validate_structured_value(schema, {"x": True}) == ['"value.x" must be an integer']


def test_an_enum_of_true_rejects_one() -> None:
    schema = _object(x={"type": "number", "enum": [True]})

    assert validate_structured_value(schema, {"x": 1}) == ['"value.x" must be one of [true]']


def test_an_enum_accepts_one_point_zero_for_one() -> None:
    schema = _object(x={"type": "number", "enum": [1]})

    assert validate_structured_value(schema, {"x": 1.0}) == []


def test_a_value_unequal_to_the_const_is_reported_as_json() -> None:
    schema = _object(x={"type": "string", "const": "on"})

    assert validate_structured_value(schema, {"x": "off"}) == ['"value.x" must be "on"']


def test_a_const_never_treats_false_as_zero() -> None:
    schema = _object(x={"type": "number", "const": 0})

    assert validate_structured_value(schema, {"x": False}) == ['"value.x" must be a finite number']


def test_a_null_const_accepts_only_null() -> None:
    schema = _object(x={"type": "null", "const": None})

    assert validate_structured_value(schema, {"x": None}) == []


def test_only_the_enum_violation_is_reported_when_both_enum_and_const_fail() -> None:
    schema = _object(x={"type": "string", "enum": ["a"], "const": "b"})

    assert validate_structured_value(schema, {"x": "z"}) == ['"value.x" must be one of ["a"]']


def test_the_const_is_checked_when_the_enum_passes() -> None:
    schema = _object(x={"type": "string", "enum": ["a", "b"], "const": "b"})

    assert validate_structured_value(schema, {"x": "a"}) == ['"value.x" must be "b"']


def test_an_unknown_type_that_skipped_the_assertion_is_a_programming_error() -> None:
    with pytest.raises(
        ValueError, match=r'^unreachable variant in validateStructuredValue: "tuple"$'
    ):
        validate_structured_value(_object(x={"type": "tuple"}), {"x": 1})


def test_every_schema_node_requires_its_type_key() -> None:
    assert frozenset({"type"}) == StructuredSchemaNode.__required_keys__
    assert frozenset({"type"}) == StructuredOutputSchema.__required_keys__


def _deep_items(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "array", "items": node}
    return {"type": "object", "properties": {"x": node}}


def _deep_properties(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"a": node}}
    return node


@pytest.mark.parametrize("schema", [_deep_items(100_000), _deep_properties(100_000)])
def test_a_very_deep_schema_is_an_output_schema_error_never_a_recursion_error(
    schema: dict[str, Any],
) -> None:
    violations = _violations(schema)

    assert 1 == len(violations)
    assert violations[0].endswith("nests deeper than 64 schema levels")


def test_a_schema_at_the_depth_limit_is_accepted() -> None:
    assert [] == _violations_or_none(_deep_properties(63))  # 64 nodes on one path
    assert ["schema" + ".properties.a" * 64 + " nests deeper than 64 schema levels"] == (
        _violations_or_none(_deep_properties(64))
    )


def test_a_very_deep_annotation_is_reported_not_a_recursion_error() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]

    assert ["schema.default annotation must be JSON data"] == _violations(
        {"type": "object", "default": value}
    )
