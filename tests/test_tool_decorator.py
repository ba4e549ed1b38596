"""``@tool`` and ``@registry.tool``: a plain function becomes a validated, typed tool whose schema
comes from its signature and whose descriptions come from its docstring."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import threading
from collections.abc import Sequence
from typing import Any, Literal, NotRequired, TypedDict, assert_type

import attrs
import jsonschema
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    CancelSignal,
    GenericCallView,
    ToolArgsError,
    ToolDefinition,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    snapshot_json,
    thaw_json,
    tool,
)
from dsh_tools._values._execution import new_execution_token
from support import first_text, jsonschema_accepts


def _context() -> ToolRunContext:
    return ToolRunContext(
        token=new_execution_token(),
        call_id="call-1",
        name="tool",
        arguments=None,
        signal=CancelSignal.never(),
    )


async def _run(definition: ToolDefinition, arguments: object) -> object:
    returned = definition.execute(snapshot_json(arguments), _context())
    if isinstance(returned, str):
        return returned
    return await returned  # pyright: ignore[reportGeneralTypeIssues, reportUnknownVariableType]


# --- schema and descriptions -------------------------------------------------------------------


@tool
async def search(pattern: str, root: str = ".", limit: int | None = None) -> str:
    """Search files for a regular expression.

    Args:
        pattern: The regular expression.
        root: Where to start.
    """
    return f"{pattern} in {root} ({limit})"


def test_a_function_gives_a_definition_named_after_it_with_its_docstring_summary() -> None:
    assert_type(search, ToolDefinition)
    assert ("search", "Search files for a regular expression.") == (
        search.name,
        search.description,
    )


def test_the_signature_gives_the_schema_and_defaults_make_properties_optional() -> None:
    assert {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression."},
            "root": {"type": "string", "description": "Where to start.", "default": "."},
            "limit": {"type": "integer"},
        },
        "required": ["pattern"],
    } == thaw_json(search.parameters)


NUMPY_DOC = """Read a file.

Parameters
----------
path : str
    The file to read.
"""

SPHINX_DOC = """Read a file.

:param path: The file to read.
"""

GOOGLE_DOC = """Read a file.

Args:
    path: The file to read.
"""


@pytest.mark.parametrize(
    "doc", [GOOGLE_DOC, NUMPY_DOC, SPHINX_DOC], ids=["google", "numpy", "sphinx"]
)
def test_google_numpy_and_sphinx_parameter_sections_describe_the_properties(doc: str) -> None:
    def read(path: str) -> str:
        return path

    read.__doc__ = doc

    definition = tool(read)

    assert ("Read a file.", {"type": "string", "description": "The file to read."}) == (
        definition.description,
        thaw_json(definition.parameters)["properties"]["path"],
    )


def test_the_docstring_text_after_the_summary_is_part_of_the_description() -> None:
    @tool
    def read(path: str) -> str:
        """Read a file.

        Binary files are refused.

        Args:
            path: The file.
        """
        return path

    assert "Read a file.\n\nBinary files are refused." == read.description


def test_name_and_description_given_to_the_decorator_win() -> None:
    @tool(name="read_file", description="Reads.")
    def read(path: str) -> str:
        """Read a file."""
        return path

    assert ("read_file", "Reads.") == (read.name, read.description)


def test_a_function_without_a_docstring_has_an_empty_description() -> None:
    @tool
    def read(path: str) -> str:
        return path

    assert "" == read.description


def test_definition_options_reach_the_definition() -> None:
    @tool(timeout=2.5, capacity_class="disk", is_concurrency_safe=lambda args: True)
    async def read(path: str) -> str:
        return path

    assert (2.5, "disk", True) == (
        read.timeout,
        read.capacity_class,
        read.is_concurrency_safe is not None
        and read.is_concurrency_safe(snapshot_json({"path": "a"})),
    )


# --- the context parameter ---------------------------------------------------------------------


async def test_a_tool_run_context_parameter_receives_the_context_and_is_not_in_the_schema() -> None:
    seen: list[str] = []

    @tool
    async def whoami(context: ToolRunContext, prefix: str) -> str:
        seen.append(context.call_id)
        return prefix

    returned = await _run(whoami, {"prefix": "p"})

    assert (
        "p",
        ["call-1"],
        {"type": "object", "properties": {"prefix": {"type": "string"}}, "required": ["prefix"]},
    ) == (
        returned,
        seen,
        thaw_json(whoami.parameters),
    )


# --- typed values ------------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Range:
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Label:
    text: str
    color: Color = Color.RED


async def test_the_body_gets_typed_values_for_every_supported_annotation() -> None:
    seen: list[tuple[object, ...]] = []

    @tool
    async def every(
        s: str,
        i: int,
        f: float,
        b: bool,
        words: list[str],
        mode: Literal["fast", "slow"],
        maybe: int | None,
        rng: Range,
        labels: Sequence[Label],
        color: Color = Color.BLUE,
    ) -> str:
        seen.append((s, i, f, b, words, mode, maybe, rng, labels, color))
        return "ok"

    await _run(
        every,
        {
            "s": "x",
            "i": 3.0,
            "f": 1,
            "b": True,
            "words": ["a", "b"],
            "mode": "slow",
            "rng": {"start": 1, "end": 2},
            "labels": [{"text": "t", "color": "blue"}, {"text": "u"}],
        },
    )

    assert [
        (
            "x",
            3,
            1.0,
            True,
            ["a", "b"],
            "slow",
            None,
            Range(start=1, end=2),
            (Label(text="t", color=Color.BLUE), Label(text="u")),
            Color.BLUE,
        )
    ] == seen
    assert [int, float] == [type(seen[0][1]), type(seen[0][2])]


async def test_an_absent_defaulted_parameter_gets_the_functions_default() -> None:
    assert ". in . (None)" == await _run(search, {"pattern": "."})


async def test_invalid_arguments_never_reach_the_body() -> None:
    with pytest.raises(ToolArgsError) as caught:
        await _run(search, {"root": 3, "limit": "x"})

    assert [
        'missing required property "pattern"',
        '"root" must be a string',
        '"limit" must be an integer',
    ] == list(caught.value.violations)


async def test_a_plain_def_runs_in_a_worker_thread_through_the_registry() -> None:
    registry = ToolRegistry()
    threads: list[bool] = []

    @registry.tool
    def where(x: int) -> str:
        threads.append(threading.current_thread() is threading.main_thread())
        return str(x * 2)

    result = await registry.execute(
        ToolExecutionInput(
            call_id="c1",
            name="where",
            arguments=snapshot_json({"x": 21}),
            signal=CancelSignal.never(),
        )
    )

    assert ("42", [False]) == (first_text(result), threads)


async def _through(registry: ToolRegistry, name: str, arguments: object) -> str:
    result = await registry.execute(
        ToolExecutionInput(
            call_id="c1", name=name, arguments=snapshot_json(arguments), signal=CancelSignal.never()
        )
    )
    assert not result.is_error, first_text(result)
    return first_text(result)


async def test_a_function_that_returns_nothing_succeeds_with_the_json_text_null() -> None:
    registry = ToolRegistry()
    done: list[str] = []

    @registry.tool
    async def deploy(target: str) -> None:
        done.append(target)

    @registry.tool
    def archive(target: str):
        done.append(target)

    @registry.tool
    async def maybe(target: str) -> str | None:
        return None if target == "none" else target

    texts = [
        await _through(registry, "deploy", {"target": "prod"}),
        await _through(registry, "archive", {"target": "old"}),
        await _through(registry, "maybe", {"target": "none"}),
        await _through(registry, "maybe", {"target": "x"}),
    ]

    assert (["null", "null", "null", "x"], ["prod", "old"]) == (texts, done)


async def test_each_call_gets_its_own_copy_of_a_mutable_default() -> None:
    registry = ToolRegistry()

    @registry.tool
    def tag(name: str, tags: list[str] = ["seed"], seen: list[int] = []) -> str:  # noqa: B006
        tags.append(name)
        seen.append(len(seen))
        return f"{tags} {seen}"

    first = await _through(registry, "tag", {"name": "a"})
    second = await _through(registry, "tag", {"name": "b"})
    given = await _through(registry, "tag", {"name": "c", "tags": ["x"]})

    assert ["['seed', 'a'] [0]", "['seed', 'b'] [0]", "['x', 'c'] [0]"] == [
        first,
        second,
        given,
    ]
    # the schema still shows the default the model may rely on
    assert ["seed"] == thaw_json(tag.parameters)["properties"]["tags"]["default"]


# --- registry.tool -----------------------------------------------------------------------------


def test_registry_tool_registers_the_definition_it_returns() -> None:
    registry = ToolRegistry()

    @registry.tool(name="greet")
    async def hello(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    assert (hello, ["greet"]) == (registry.get("greet"), [s.name for s in registry.schemas()])


# --- errors at decoration time -----------------------------------------------------------------


def test_a_parameter_without_an_annotation_is_a_type_error_naming_it() -> None:
    def f(path, limit: int) -> str:  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
        return "x"

    with pytest.raises(TypeError, match=r'^@tool f: parameter "path" has no annotation$'):
        tool(f)  # pyright: ignore[reportUnknownArgumentType]


def test_an_unsupported_annotation_is_a_type_error_naming_the_parameter() -> None:
    def f(table: dict[str, int]) -> str:
        return "x"

    with pytest.raises(
        TypeError, match=r'^@tool f: parameter "table": unsupported argument type dict\[str, int\]$'
    ):
        tool(f)


@pytest.mark.parametrize(
    ("source", "parameter"),
    [
        ("def f(x: int, *rest: int) -> str: ...", "*rest"),
        ("def f(**extra: int) -> str: ...", "**extra"),
    ],
)
def test_variadic_parameters_are_a_type_error_naming_them(source: str, parameter: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)

    with pytest.raises(
        TypeError, match="^@tool f: parameter " + re.escape(f'"{parameter}"') + " is variadic"
    ):
        tool(namespace["f"])


def test_a_positional_only_parameter_is_a_type_error_naming_it() -> None:
    def f(x: int, /) -> str:
        return "x"

    with pytest.raises(TypeError, match=r'^@tool f: parameter "x" is positional-only'):
        tool(f)


def test_something_not_callable_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"^@tool takes a function, not int$"):
        tool(3)  # pyright: ignore[reportArgumentType]


# --- the schema against jsonschema -------------------------------------------------------------


class Span(TypedDict):
    start: int
    end: NotRequired[int]


@attrs.frozen
class Inner:
    name: str
    weight: float = 1.0


@tool(is_concurrency_safe=lambda args: True)
async def oracle(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    tags: list[str],
    level: Literal["low", "high"],
    inner: Inner,
    many: list[Inner],
    span: Span,
    tagged: Label,
    color: Color,
    maybe: int | None = None,
    label: str = "x",
) -> str:
    """A tool with one parameter of every supported kind."""
    return "ok"


def test_a_tool_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(thaw_json(oracle.parameters))


# -0.0 is not lossless JSON: it never reaches a tool
FLOATS = st.floats(allow_nan=False, allow_infinity=False).map(lambda x: x + 0.0)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | FLOATS | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


def _valid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for ``schema`` (one of the tool's generated property schemas)."""
    kind = schema["type"]
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        return st.text(max_size=5)
    if kind == "integer":
        return st.integers(-100, 100) | st.integers(-100, 100).map(float)
    if kind == "number":
        return st.integers(-100, 100) | FLOATS
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(_valid(schema["items"]), max_size=3)
    properties: dict[str, Any] = schema["properties"]
    required = set(schema.get("required", ()))
    return st.fixed_dictionaries(
        {key: _valid(prop) for key, prop in properties.items() if key in required},
        optional={key: _valid(prop) for key, prop in properties.items() if key not in required},
    )


def _near(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Valid values, and valid values wrong in one place (recursively), and any JSON."""
    if schema["type"] == "array":
        wrong_item = st.tuples(_valid(schema), _near(schema["items"])).map(
            lambda pair: [*pair[0], pair[1]]
        )
        return st.one_of(_valid(schema), wrong_item, JSON)
    if schema["type"] != "object":
        return st.one_of(_valid(schema), JSON)
    properties: dict[str, Any] = schema["properties"]

    def spoil(key: str) -> st.SearchStrategy[Any]:
        replaced = st.tuples(_valid(schema), _near(properties[key])).map(
            lambda pair: {**pair[0], key: pair[1]}
        )
        removed = _valid(schema).map(lambda value: {k: v for k, v in value.items() if k != key})
        return replaced | removed

    return st.one_of(_valid(schema), st.sampled_from(sorted(properties)).flatmap(spoil), JSON)


ORACLE_SCHEMA = thaw_json(oracle.parameters)


@settings(max_examples=300, deadline=None)
@given(_near(ORACLE_SCHEMA))
def test_the_tools_validation_agrees_with_jsonschema(value: Any) -> None:
    classify = oracle.is_concurrency_safe
    assert classify is not None

    expected = jsonschema_accepts(ORACLE_SCHEMA, value)
    actual = classify(snapshot_json(value))

    assert expected == actual, json.dumps(value)


async def test_parameters_named_like_the_wrappers_own_names_reach_the_body() -> None:
    @tool
    async def odd(args: str, context: int, fn: bool, ctx: ToolRunContext) -> str:
        return f"{args} {context} {fn} {ctx.call_id}"

    assert "a 1 True call-1" == await _run(odd, {"args": "a", "context": 1, "fn": True})


async def test_each_argument_reaches_its_parameter_wherever_the_context_and_keyword_only_ones_are() -> (
    None
):
    @tool
    def mixed(a: str, ctx: ToolRunContext, b: int, *, c: str, d: bool = True, e: str) -> str:
        return f"{a} {ctx.call_id} {b} {c} {d} {e}"

    assert "x call-1 2 y True z" == await _run(mixed, {"a": "x", "b": 2, "c": "y", "e": "z"})
    assert "x call-1 2 y False z" == await _run(
        mixed, {"e": "z", "d": False, "c": "y", "b": 2, "a": "x"}
    )


async def test_a_classifier_that_changes_its_arguments_changes_nothing_the_function_gets() -> None:
    # the arguments object is the classifier's own (built for it), so it need not be frozen
    def meddle(args: Any) -> bool:
        args.path = "elsewhere"
        return True

    @tool(is_concurrency_safe=meddle)
    async def read(path: str) -> str:
        return path

    assert read.is_concurrency_safe is not None
    arguments = snapshot_json({"path": "a.txt"})
    assert (True, "a.txt") == (read.is_concurrency_safe(arguments), await _run(read, arguments))


def test_presenters_and_the_classifier_read_the_parameters_as_attributes() -> None:
    @tool(
        is_concurrency_safe=lambda args: args.mode == "read",
        present_call=lambda args: GenericCallView(title=f"{args.mode} {args.path}"),
    )
    async def access(path: str, mode: Literal["read", "write"] = "read") -> str:
        return path

    assert (True, False, "read a.py", None) == (
        access.is_concurrency_safe is not None
        and access.is_concurrency_safe(snapshot_json({"path": "a.py"})),
        access.is_concurrency_safe is not None
        and access.is_concurrency_safe(snapshot_json({"path": "a.py", "mode": "write"})),
        access.present_call is not None
        and getattr(access.present_call(snapshot_json({"path": "a.py"})), "title", None),
        access.present_call is not None and access.present_call(snapshot_json({"path": 1})),
    )


def test_an_annotation_naming_a_local_class_is_a_clear_type_error() -> None:
    @attrs.frozen
    class Local:
        x: int

    def f(value: Local) -> str:
        return "x"

    with pytest.raises(TypeError, match=r"^@tool f: cannot resolve its annotations \(name 'Local'"):
        tool(f)


@settings(max_examples=200, deadline=None)
@given(_valid(ORACLE_SCHEMA))
def test_arguments_the_validator_accepts_always_reach_the_body(value: Any) -> None:
    # structuring cannot fail after validation: every accepted value becomes typed arguments
    assert "ok" == trio.run(_run, oracle, value)


def test_a_function_tool_can_say_it_is_idempotent() -> None:
    registry = ToolRegistry()

    @tool(idempotent=True)
    async def fetch(url: str) -> str:
        return url

    @registry.tool(idempotent=True)
    async def lookup(key: str) -> str:
        return key

    @tool
    async def write(path: str) -> str:
        return path

    assert (True, True, False) == (fetch.idempotent, lookup.idempotent, write.idempotent)
