"""``ToolOptions``, the one record of a tool's options: ``define_tool``, ``@tool`` and
``@registry.tool`` take the same keywords, each reaches the ``ToolDefinition`` attribute of its
name, and a keyword that is no option is refused in Python's own words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast, get_type_hints

import attrs
import pytest

from dsh_tools import (
    GenericCallView,
    GenericResultView,
    ToolDefinition,
    ToolOptions,
    ToolRegistry,
    define_tool,
    tool,
)
from dsh_tools._values._definition import READS_ARGUMENTS
from support import ok_body

# the fields of a definition that are not options
_OWN_FIELDS = ["name", "description", "parameters", "execute"]


def _options() -> ToolOptions[Any]:
    """A value other than the default for every option."""
    return {
        "timeout": 2.5,
        "idle_timeout": 0.5,
        "max_output_chars": 100,
        "transient_errors": ["ConnectionError"],
        "abandon_on_cancel": True,
        "is_concurrency_safe": lambda args: True,
        "capacity_class": "disk",
        "capacity_weight": 3,
        "conflict_keys": lambda args: ["k"],
        "idempotent": True,
        "present_call": lambda args: GenericCallView(title="t"),
        "present_result": lambda args, result: GenericResultView(title="t"),
        "present_progress": lambda args, event: None,
    }


# how a definition shows those values (a callable as True: define_tool wraps it)
_SHOWN: dict[str, object] = {
    "timeout": 2.5,
    "idle_timeout": 0.5,
    "max_output_chars": 100,
    "transient_errors": ["ConnectionError"],
    "abandon_on_cancel": True,
    "is_concurrency_safe": True,
    "capacity_class": "disk",
    "capacity_weight": 3,
    "conflict_keys": True,
    "idempotent": True,
    "present_call": True,
    "present_result": True,
    "present_progress": True,
}


def _shown(definition: ToolDefinition) -> dict[str, object]:
    shown: dict[str, object] = {}
    for name in ToolOptions.__optional_keys__:
        value: object = getattr(definition, name)
        if isinstance(value, frozenset):
            value = sorted(cast("frozenset[str]", value))
        shown[name] = True if callable(value) else value
    return shown


async def read(path: str) -> str:
    return path


def test_the_options_are_the_definitions_fields_besides_its_own_four() -> None:
    fields = [field.name for field in attrs.fields(ToolDefinition) if field.init]

    assert sorted(set(fields) - set(_OWN_FIELDS)) == sorted(ToolOptions.__optional_keys__)


def test_every_option_is_optional() -> None:
    assert set[str]() == set(ToolOptions.__required_keys__)


def test_the_test_gives_every_option() -> None:
    assert sorted(ToolOptions.__optional_keys__) == sorted(_options())


def test_each_option_has_the_type_of_its_definition_attribute() -> None:
    # an option's type is generic in the arguments (A) where the definition's reads Any
    hints = {
        name: repr(hint).replace("~A", "typing.Any")
        for name, hint in get_type_hints(ToolOptions).items()
    }
    attributes = {field.name: repr(field.type) for field in attrs.fields(ToolDefinition)}
    # transient_errors is taken as any collection of names and kept as a frozenset
    kept = {name: hints[name] for name in hints if name != "transient_errors"}

    assert kept == {name: attributes[name] for name in kept}


def test_define_tool_hands_every_option_to_the_definition() -> None:
    definition = define_tool(
        name="t", description="d", parameters={}, execute=ok_body, **_options()
    )

    assert _SHOWN == _shown(definition)


def test_tool_hands_every_option_to_the_definition() -> None:
    definition = tool(**_options())(read)

    assert _SHOWN == _shown(definition)


def test_registry_tool_hands_every_option_to_the_definition_it_registers() -> None:
    registry = ToolRegistry()

    definition = registry.tool(**_options())(read)

    assert (_SHOWN, definition) == (_shown(definition), registry.get("read"))


def test_an_option_not_given_has_the_definitions_default() -> None:
    defaults = {
        field.name: field.default
        for field in attrs.fields(ToolDefinition)
        if field.name in ToolOptions.__optional_keys__
    }

    definition = define_tool(name="t", description="d", parameters={}, execute=ok_body)

    assert defaults == {name: getattr(definition, name) for name in defaults}


def test_the_options_that_read_arguments_are_the_classifier_the_presenters_and_the_keys() -> None:
    readers = {
        field.name: field.metadata[READS_ARGUMENTS]
        for field in attrs.fields(ToolDefinition)
        if READS_ARGUMENTS in field.metadata
    }

    expected = {
        "is_concurrency_safe": "classifier",
        "conflict_keys": "keys",
        "present_call": "presenter",
        "present_result": "presenter",
        "present_progress": "presenter",
    }
    assert expected == readers


@pytest.mark.parametrize(
    ("make", "function"),
    [
        (
            lambda: define_tool(
                name="t",
                description="d",
                parameters={},
                execute=ok_body,
                **cast("ToolOptions[Any]", {"tmeout": 1}),
            ),
            "define_tool",
        ),
        (lambda: tool(**cast("ToolOptions[Any]", {"tmeout": 1})), "tool"),
        (
            lambda: ToolRegistry().tool(**cast("ToolOptions[Any]", {"tmeout": 1})),
            "ToolRegistry.tool",
        ),
    ],
    ids=["define_tool", "tool", "registry.tool"],
)
def test_a_keyword_that_is_no_option_is_refused_in_pythons_words(
    make: Callable[[], object], function: str
) -> None:
    with pytest.raises(TypeError) as caught:
        make()

    assert f"{function}() got an unexpected keyword argument 'tmeout'" == str(caught.value)


def test_tool_refuses_an_unknown_option_before_it_decorates_anything() -> None:
    registry = ToolRegistry()

    with pytest.raises(TypeError):
        registry.tool(**cast("ToolOptions[Any]", {"parameters": {}}))

    assert [] == registry.schemas()


@pytest.mark.parametrize(
    ("option", "value", "error", "message"),
    [
        (
            "timeout",
            0,
            ValueError,
            'tool "read": timeout must be a positive finite number of seconds (got 0)',
        ),
        (
            "idle_timeout",
            "1",
            TypeError,
            "tool \"read\": idle_timeout must be a positive finite number of seconds (got '1')",
        ),
        (
            "max_output_chars",
            0,
            ValueError,
            'tool "read": max_output_chars must be a positive integer number of characters (got 0)',
        ),
        ("idempotent", 1, TypeError, "idempotent must be a bool, not int"),
        (
            "capacity_class",
            "",
            TypeError,
            "tool \"read\": capacity_class must be a non-empty str or None, not ''",
        ),
        (
            "present_call",
            1,
            TypeError,
            'tool "read": present_call must be callable or None, not int',
        ),
        (
            "conflict_keys",
            ["path"],
            TypeError,
            'tool "read": conflict_keys must be callable or None, not list',
        ),
        (
            "capacity_weight",
            0,
            ValueError,
            'tool "read": capacity_weight must be a positive int, not 0',
        ),
        (
            "capacity_weight",
            True,
            TypeError,
            'tool "read": capacity_weight must be a positive int, not True',
        ),
    ],
)
@pytest.mark.parametrize("decorator", ["tool", "registry.tool"])
def test_the_decorators_refuse_a_bad_option_value_as_the_definition_does(
    decorator: str, option: str, value: object, error: type[Exception], message: str
) -> None:
    options = cast("ToolOptions[Any]", {option: value})
    make = tool(**options) if decorator == "tool" else ToolRegistry().tool(**options)

    with pytest.raises(error) as caught:
        make(read)

    assert message == str(caught.value)
