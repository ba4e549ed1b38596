"""parse_call_arguments: the one parser of a call's raw argument text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    MAX_DEPTH,
    FrozenJsonObject,
    JsonSnapshotError,
    parse_call_arguments,
    snapshot_json,
)


def test_empty_text_is_an_empty_object() -> None:
    parsed = parse_call_arguments("")

    assert {} == parsed
    assert FrozenJsonObject is type(parsed)


def test_json_text_is_parsed_into_frozen_values() -> None:
    parsed = parse_call_arguments('{"a": [1, 2.5, null, true], "b": {"c": "d"}}')

    assert snapshot_json({"a": [1, 2.5, None, True], "b": {"c": "d"}}) == parsed
    assert FrozenJsonObject is type(parsed)


def test_a_json_scalar_or_array_is_parsed_as_it_is() -> None:
    assert (1, 2) == parse_call_arguments("[1, 2]")
    assert "x" == parse_call_arguments('"x"')
    assert None is parse_call_arguments("null")


@pytest.mark.parametrize(
    "text",
    [
        '{"a": ',
        "{'a': 1}",
        "not json",
        " ",
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": -Infinity}',
        '{"a": 1} trailing',
        "[" * 200_000,
    ],
)
def test_text_that_is_not_json_is_passed_on_as_the_raw_string(text: str) -> None:
    assert text == parse_call_arguments(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1e400}',
        '{"a": 9007199254740992}',
        '{"a": -0.0}',
        '{"a": "\\ud800"}',
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    ],
)
def test_json_that_is_not_lossless_is_passed_on_parsed_but_not_frozen(text: str) -> None:
    # so that the pipeline's boundary check rejects it with its own error (and logs why)
    parsed = parse_call_arguments(text)

    expected = json.loads(text)
    assert (expected, type(expected)) == (parsed, type(parsed))


def test_the_deepest_accepted_nesting_parses() -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH

    assert isinstance(parse_call_arguments(text), tuple)


def test_a_non_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="tool call arguments must be JSON text"):
        parse_call_arguments(b"{}")  # type: ignore[arg-type]


@given(st.text())
def test_any_string_parses_without_raising_and_json_round_trips(text: str) -> None:
    parsed = parse_call_arguments(text)

    if parsed is not text and text != "":
        loaded = json.loads(text)
        try:
            expected = snapshot_json(loaded)
        except JsonSnapshotError:
            expected = loaded
        assert expected == parsed
