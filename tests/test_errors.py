"""The error vocabulary and the model-facing text of any exception."""

from __future__ import annotations

import attrs
import pytest

from dsh_tools import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_INTERRUPTED,
    TOOL_TIMEOUT,
    HarnessError,
    OutputSchemaError,
    TextBlock,
    ToolArgsError,
    ToolErrorInfo,
    ToolNotFoundError,
    error_message,
)
from dsh_tools._pipeline._results import INTERRUPTED, error_info
from dsh_tools._texts import format_js_json, format_js_number


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class _Silent(Exception):
    pass


class _QuotaError(HarnessError):
    def __init__(self) -> None:
        super().__init__("quota exceeded", "QUOTA")


class _RenamedError(HarnessError):
    @property
    def name(self) -> str:
        return "AbortError"


class _BrokenNameError(HarnessError):
    @property
    def name(self) -> str:
        raise RuntimeError("no name")


# --- constants -----------------------------------------------------------------------------


def test_the_synthetic_codes_are_the_original_s() -> None:
    assert (TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, TOOL_TIMEOUT) == (
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "TOOL_TIMEOUT",
    )


def test_the_interrupted_result_has_its_exact_text_name_and_code() -> None:
    assert (
        (
            TextBlock(
                text="Error: tool call interrupted: the process stopped while it ran; "
                "its effects are unknown"
            ),
        ),
        True,
        ToolErrorInfo(name="ToolInterruptedError", code="TOOL_INTERRUPTED"),
    ) == (INTERRUPTED.content, INTERRUPTED.is_error, INTERRUPTED.error)
    assert TOOL_INTERRUPTED == "TOOL_INTERRUPTED"


# --- HarnessError and its subclasses -------------------------------------------------------


def test_a_harness_error_carries_its_message_and_code() -> None:
    error = HarnessError("it broke", "BROKEN")

    assert (error.message, error.code, str(error)) == ("it broke", "BROKEN", "it broke")


def test_a_harness_error_is_named_after_its_concrete_class() -> None:
    assert (HarnessError("m", "C").name, _QuotaError().name) == ("HarnessError", "_QuotaError")


def test_a_harness_error_keeps_its_cause() -> None:
    cause = OSError("disk")

    with pytest.raises(HarnessError) as caught:
        raise HarnessError("wrapped", "IO") from cause

    assert caught.value.__cause__ is cause


def test_an_unknown_tool_error_names_the_tool() -> None:
    error = ToolNotFoundError("grep")

    assert (
        str(error),
        error.code,
        error.name,
        error.tool_name,
    ) == ('unknown tool "grep"', "UNKNOWN_TOOL", "ToolNotFoundError", "grep")


def test_an_arguments_error_joins_its_violations() -> None:
    error = ToolArgsError(['"path" must be a string', 'missing required property "mode"'])

    assert (str(error), error.code, error.violations) == (
        'invalid arguments: "path" must be a string; missing required property "mode"',
        "INVALID_ARGS",
        ('"path" must be a string', 'missing required property "mode"'),
    )


def test_an_output_schema_error_joins_its_violations() -> None:
    error = OutputSchemaError(iter(["a", "b"]))

    assert (
        str(error),
        error.code,
        error.violations,
    ) == ("unsupported output schema: a; b", "UNSUPPORTED_SCHEMA", ("a", "b"))


@pytest.mark.parametrize(
    "error", [ToolNotFoundError("x"), ToolArgsError(["v"]), OutputSchemaError(["v"])]
)
def test_every_library_error_is_a_harness_error(error: Exception) -> None:
    assert isinstance(error, HarnessError)


# --- error_message -------------------------------------------------------------------------


def test_the_message_of_an_exception_is_its_text() -> None:
    assert error_message(ValueError("bad value")) == "bad value"


def test_the_message_of_an_exception_without_text_is_its_class_name() -> None:
    assert error_message(_Silent()) == "_Silent"


def test_the_message_of_an_exception_whose_str_raises_is_a_placeholder() -> None:
    assert error_message(_Unprintable()) == "<unprintable thrown value>"


def test_the_message_of_a_key_error_is_its_repr_like_text() -> None:
    assert error_message(KeyError("missing")) == "'missing'"


def test_the_message_of_an_exception_group_names_every_sub_exception() -> None:
    group = ExceptionGroup("boom", [ValueError("a"), KeyError("b")])

    assert (
        error_message(group)
    ) == "ExceptionGroup \"boom\" with 2 sub-exceptions: ValueError: a; KeyError: 'b'"


def test_the_message_of_a_group_with_one_sub_exception_is_singular() -> None:
    group = ExceptionGroup("one", [_Silent()])

    assert error_message(group) == 'ExceptionGroup "one" with 1 sub-exception: _Silent: _Silent'


def test_the_message_of_a_nested_exception_group_describes_the_nesting() -> None:
    group = ExceptionGroup("outer", [ExceptionGroup("inner", [ValueError("x")]), _Unprintable()])

    assert error_message(group) == (
        'ExceptionGroup "outer" with 2 sub-exceptions: '
        'ExceptionGroup: ExceptionGroup "inner" with 1 sub-exception: ValueError: x; '
        "_Unprintable: <unprintable thrown value>"
    )


def test_the_message_of_a_base_exception_group_names_its_class() -> None:
    group = BaseExceptionGroup("stop", [KeyboardInterrupt()])

    assert (
        error_message(group)
        == 'BaseExceptionGroup "stop" with 1 sub-exception: KeyboardInterrupt: KeyboardInterrupt'
    )


def test_the_message_of_a_harness_error_is_its_message() -> None:
    assert error_message(ToolNotFoundError("x")) == 'unknown tool "x"'


# --- error_info ----------------------------------------------------------------------------


def test_a_harness_error_gives_its_name_and_code_as_error_info() -> None:
    assert ToolErrorInfo(name="ToolArgsError", code="INVALID_ARGS") == error_info(
        ToolArgsError(["v"])
    )


def test_an_overridden_name_is_used_in_the_error_info() -> None:
    assert ToolErrorInfo(name="AbortError", code="X") == error_info(_RenamedError("m", "X"))


def test_an_ordinary_exception_has_no_error_info() -> None:
    assert error_info(ValueError("v")) is None


def test_a_harness_error_whose_name_raises_has_no_error_info() -> None:
    assert error_info(_BrokenNameError("m", "C")) is None


def test_a_harness_error_with_a_non_string_code_has_no_error_info() -> None:
    error = HarnessError("m", "C")
    error.code = 5  # type: ignore[assignment]

    assert error_info(error) is None


def test_error_info_is_a_frozen_value() -> None:
    info = ToolErrorInfo(name="n", code="c")

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        info.code = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (3.0, "3"),
        (-3.0, "-3"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (100, "100"),
        (2**53 - 1, "9007199254740991"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (-2.5e-10, "-2.5e-10"),
        (123.456, "123.456"),
        (5e-324, "5e-324"),
        (float("inf"), "Infinity"),
        (float("nan"), "NaN"),
    ],
)
def test_a_number_prints_as_javascript_prints_it(number: float, text: str) -> None:
    assert text == format_js_number(number)


@pytest.mark.parametrize(
    ("number", "text"),
    [(10**5000, "1e+5000"), (-3 * 10**4400, "-3e+4400"), (2**20000, "3.98028e+6020")],
    ids=["10**5000", "-3*10**4400", "2**20000"],
)
def test_an_int_too_long_for_str_prints_in_exponent_form(number: int, text: str) -> None:
    assert text == format_js_number(number)


def test_json_in_messages_prints_numbers_as_javascript_does() -> None:
    value = {"a": [1.0, 2.5, True, None, "é"], "b": {"c": 1e-7}}

    assert '{"a":[1,2.5,true,null,"é"],"b":{"c":1e-7}}' == format_js_json(value)
