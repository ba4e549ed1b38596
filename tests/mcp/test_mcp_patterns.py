"""The mount's validators match a server's regular expressions with RE2: the same verdicts and
words as jsonschema's own validator wherever both engines can run a pattern (jsonschema is the
oracle), linear time where Python's ``re`` would backtrack, and the patterns RE2 cannot run
left to the server."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools.mcp._patterns import linear_validator, needs_backtracking, unmatched_patterns

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}},
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": "^[0-9]+$"}},
        "patternProperties": {"^y[0-9]": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"},
    },
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "string", "pattern": "^(ab)+$|^x"},
            }
        },
        "patternProperties": {"^z": True},
        "additionalProperties": False,
    },
]

_keys = st.sampled_from(["a", "ab", "b", "ba", "x", "y1", "y", "z", "zz", "items", "q"])
_values = st.one_of(
    st.integers(-3, 3),
    st.booleans(),
    st.sampled_from(["", "12", "1a", "ab", "abab", "aba", "x!", "b"]),
    st.lists(st.sampled_from(["ab", "abab", "a", "x", "yx"]), max_size=3),
)


def _errors(validator_class: Any, schema: dict[str, Any], instance: object) -> list[Any]:
    validator = validator_class(schema)
    return sorted(
        (list(error.absolute_path), error.validator, error.message)
        for error in validator.iter_errors(instance)
    )


@pytest.mark.parametrize("schema", SCHEMAS, ids=["pattern-properties", "mixed", "nested"])
@given(instance=st.dictionaries(_keys, _values, max_size=5))
def test_verdicts_and_words_equal_jsonschemas_where_both_engines_run_the_patterns(
    schema: dict[str, Any], instance: dict[str, object]
) -> None:
    built_in = jsonschema.Draft202012Validator

    assert _errors(built_in, schema, instance) == _errors(
        linear_validator(built_in), schema, instance
    )


@pytest.mark.parametrize("length", [30, 1_000_000])
def test_a_catastrophic_pattern_is_matched_in_linear_time(length: int) -> None:
    # re would take 2**length steps; the test can only end on a linear-time engine
    validator = linear_validator(jsonschema.Draft202012Validator)(
        {
            "type": "object",
            "properties": {"s": {"pattern": "^(a+)+$"}},
            "patternProperties": {"^(b+)+$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    text = "a" * length + "!"
    key = "b" * length + "!"

    errors = sorted(error.validator for error in validator.iter_errors({"s": text, key: 1}))

    assert ["additionalProperties", "pattern"] == errors


def test_patterns_re2_cannot_run_are_named_and_never_fail_a_call() -> None:
    schema = {
        "type": "object",
        "properties": {
            "word": {"type": "string", "pattern": "^(?!admin)"},
            "twice": {"type": "string", "pattern": "^(a)\\1$"},
            "plain": {"type": "string", "pattern": "^[a-z]+$"},
        },
        "patternProperties": {"(?<=x)y": {"type": "integer"}},
    }
    validator = linear_validator(jsonschema.Draft202012Validator)(schema)

    messages = [error.message for error in validator.iter_errors({"word": "admin", "twice": "b"})]

    assert (["(?<=x)y", "^(?!admin)", "^(a)\\1$"], []) == (
        sorted(unmatched_patterns(schema)),
        messages,
    )
    assert ["'A' does not match '^[a-z]+$'"] == [
        error.message for error in validator.iter_errors({"plain": "A"})
    ]


def test_pattern_properties_beside_unevaluated_properties_are_left_to_the_server() -> None:
    paired = {
        "allOf": [{"patternProperties": {"^a": {"type": "integer"}}}],
        "unevaluatedProperties": False,
    }

    assert [True, False, False] == [
        needs_backtracking(paired),
        needs_backtracking({"unevaluatedProperties": False}),
        needs_backtracking({"patternProperties": {"^a": True}}),
    ]
