"""The one rule of a duration and the one rule of a count (``_values._checks``): what each
accepts, and the exception and words of each refusal, which every setting that follows the rule
shares."""

from __future__ import annotations

import math

import pytest

from dsh_tools import ToolRegistry, install_retry_policy
from dsh_tools._values._checks import check_int, check_seconds


@pytest.mark.parametrize(("value", "expected"), [(1, 1.0), (0.25, 0.25), (1e-9, 1e-9)])
def test_a_positive_finite_duration_is_kept_as_a_float(value: float, expected: float) -> None:
    kept = check_seconds("timeout", value)

    assert (expected, float) == (kept, type(kept))


@pytest.mark.parametrize(
    ("value", "error", "shown"),
    [
        (0, ValueError, "0"),
        (-1, ValueError, "-1"),
        (-0.5, ValueError, "-0.5"),
        (math.inf, ValueError, "Infinity"),
        (math.nan, ValueError, "NaN"),
        (True, TypeError, "True"),
        ("5", TypeError, "'5'"),
        (None, TypeError, "None"),
    ],
)
def test_a_duration_that_breaks_the_rule_is_refused_in_the_words_of_the_rule(
    value: object, error: type[Exception], shown: str
) -> None:
    # a number out of range is a ValueError, anything that is not a number a TypeError
    with pytest.raises(error) as caught:
        check_seconds("timeout", value)

    assert f"timeout must be a positive finite number of seconds (got {shown})" == str(caught.value)


def test_a_duration_that_may_be_zero_keeps_zero() -> None:
    assert 0.0 == check_seconds("interval", 0, zero=True)


@pytest.mark.parametrize(("value", "shown"), [(-1, "-1"), (math.inf, "Infinity")])
def test_a_duration_that_may_be_zero_still_refuses_a_negative_or_infinite_one(
    value: float, shown: str
) -> None:
    with pytest.raises(ValueError) as caught:
        check_seconds("interval", value, zero=True)

    assert f"interval must be a finite number of seconds >= 0 (got {shown})" == str(caught.value)


@pytest.mark.parametrize(("least", "value"), [(1, 1), (1, 10**20), (0, 0), (2, 2)])
def test_an_int_of_at_least_the_least_is_kept(least: int, value: int) -> None:
    assert value == check_int("n", value, least=least)


@pytest.mark.parametrize(
    ("least", "value", "expected"),
    [
        (1, 0, "n must be a positive int, not 0"),
        (0, -1, "n must be a non-negative int, not -1"),
        (2, 1, "n must be an int >= 2, not 1"),
    ],
)
def test_an_int_below_the_least_is_a_value_error_that_states_the_rule(
    least: int, value: int, expected: str
) -> None:
    with pytest.raises(ValueError) as caught:
        check_int("n", value, least=least)

    assert expected == str(caught.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "n must be a positive int, not True"),
        (2.0, "n must be a positive int, not 2.0"),
        ("3", "n must be a positive int, not '3'"),
    ],
)
def test_something_other_than_an_int_is_a_type_error_in_the_same_words(
    value: object, expected: str
) -> None:
    with pytest.raises(TypeError) as caught:
        check_int("n", value)

    assert expected == str(caught.value)


def test_the_registry_and_the_retry_policy_refuse_a_non_number_by_the_rule() -> None:
    messages: list[str] = []
    for refuse in (
        lambda: ToolRegistry(default_timeout="5"),  # pyright: ignore[reportArgumentType]
        lambda: install_retry_policy(ToolRegistry(), backoff=("5",)),  # pyright: ignore[reportArgumentType]
    ):
        with pytest.raises(TypeError) as caught:
            refuse()
        messages.append(str(caught.value))

    expected = [
        "default_timeout must be a positive finite number of seconds (got '5')",
        "backoff[0] must be a finite number of seconds >= 0 (got '5')",
    ]
    assert expected == messages
