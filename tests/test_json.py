"""The lossless JSON boundary: ``snapshot_json`` and the immutable values it returns."""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import pickle
import subprocess
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import attrs
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dsh_tools import (
    MAX_DEPTH,
    FrozenJsonObject,
    JsonSnapshotError,
    JsonTypeError,
    JsonValue,
    JsonValueError,
    ToolRunContext,
    define_tool,
    dumps_json,
    snapshot_json,
    thaw_json,
)
from strategies import json_keys, json_values, snapshotted_json
from support import ROOT, example_source, load_example

# --- helpers -------------------------------------------------------------------------------


def _as_lists(value: Any) -> Any:
    """The value ``json.loads`` would give back: tuples become lists."""
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list | tuple):
        return [_as_lists(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _as_tuples(value: Any) -> Any:
    """The value ``snapshot_json`` should return, as plain data: arrays become tuples."""
    if isinstance(value, dict):
        return {k: _as_tuples(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list | tuple):
        return tuple(_as_tuples(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    return value


def _containers(value: JsonValue) -> list[FrozenJsonObject | tuple[JsonValue, ...]]:
    """Every object and array inside ``value``, itself included."""
    found: list[FrozenJsonObject | tuple[JsonValue, ...]] = []
    stack: list[JsonValue] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, FrozenJsonObject):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, tuple):
            found.append(item)
            stack.extend(item)
    return found


def _path(keys: list[str | int]) -> str:
    """The path syntax of the boundary's errors: ``$``, ``.name``, ``[2]``, ``["a b"]``."""
    text = "$"
    for key in keys:
        if isinstance(key, int):
            text += f"[{key}]"
        elif key.isidentifier():
            text += f".{key}"
        else:
            text += f"[{json.dumps(key)}]"
    return text


_SIBLINGS = json_values(max_leaves=3, tuples=True)


@st.composite
def _planted(draw: st.DrawFn, make_bad: Callable[[], object]) -> tuple[object, list[str | int]]:
    """A random JSON value with ``make_bad()`` planted at a random location; the location."""
    steps = draw(
        st.lists(
            st.one_of(json_keys, st.integers(min_value=0, max_value=3)),
            max_size=5,
        )
    )
    value: object = make_bad()
    keys: list[str | int] = []
    for step in reversed(steps):  # build from the innermost container outwards
        if isinstance(step, str):
            obj: dict[str, object] = draw(st.dictionaries(json_keys, _SIBLINGS, max_size=3))
            obj[step] = value
            value = obj
            keys.insert(0, step)
        else:
            array: list[object] = draw(st.lists(_SIBLINGS, max_size=3))
            index = min(step, len(array))
            array.insert(index, value)
            value = tuple(array) if draw(st.booleans()) else array
            keys.insert(0, index)
    return value, keys


class _Colour(enum.Enum):
    RED = "red"


class _Mode(enum.StrEnum):
    FAST = "fast"


class _Level(enum.IntEnum):
    LOW = 1


class _Name(str):
    pass


class _Count(int):
    pass


@attrs.frozen
class _Point:
    x: int


@dataclasses.dataclass
class _Pair:
    a: int


def _cycle() -> object:
    loop: list[object] = []
    loop.append(loop)
    return loop


# (label, factory of the bad value, error class, keys below the planted location, reason)
REJECTED: list[tuple[str, Callable[[], object], type[JsonSnapshotError], list[str | int], str]] = [
    ("nan", lambda: float("nan"), JsonValueError, [], "nan is not a finite number"),
    ("inf", lambda: float("inf"), JsonValueError, [], "inf is not a finite number"),
    ("-inf", lambda: float("-inf"), JsonValueError, [], "-inf is not a finite number"),
    ("-0.0", lambda: -0.0, JsonValueError, [], "-0.0 cannot be represented in JSON"),
    (
        "2**53",
        lambda: 2**53,
        JsonValueError,
        [],
        "integer 9007199254740992 is outside ±(2**53 - 1) and would lose precision",
    ),
    (
        "-(2**53)",
        lambda: -(2**53),
        JsonValueError,
        [],
        "integer -9007199254740992 is outside ±(2**53 - 1) and would lose precision",
    ),
    ("bytes", lambda: b"x", JsonTypeError, [], "a value of type bytes is not JSON data"),
    ("set", lambda: {1}, JsonTypeError, [], "a value of type set is not JSON data"),
    (
        "frozenset",
        lambda: frozenset[int](),
        JsonTypeError,
        [],
        "a value of type frozenset is not JSON data",
    ),
    (
        "enum",
        lambda: _Colour.RED,
        JsonTypeError,
        [],
        "a value of type test_json._Colour is not JSON data",
    ),
    (
        "str enum",
        lambda: _Mode.FAST,
        JsonTypeError,
        [],
        "a value of type test_json._Mode is not JSON data",
    ),
    (
        "int enum",
        lambda: _Level.LOW,
        JsonTypeError,
        [],
        "a value of type test_json._Level is not JSON data",
    ),
    (
        "str subclass",
        lambda: _Name("n"),
        JsonTypeError,
        [],
        "a value of type test_json._Name is not JSON data",
    ),
    (
        "int subclass",
        lambda: _Count(1),
        JsonTypeError,
        [],
        "a value of type test_json._Count is not JSON data",
    ),
    (
        "attrs instance",
        lambda: _Point(1),
        JsonTypeError,
        [],
        "a value of type test_json._Point is not JSON data",
    ),
    (
        "dataclass",
        lambda: _Pair(1),
        JsonTypeError,
        [],
        "a value of type test_json._Pair is not JSON data",
    ),
    ("non-str key", lambda: {1: "a"}, JsonTypeError, [], "object key 1 is not a str"),
    ("tuple key", lambda: {("a",): 1}, JsonTypeError, [], "object key ('a',) is not a str"),
    ("cycle", _cycle, JsonValueError, [0], "circular reference"),
    (
        "lone surrogate",
        lambda: "ok\ud800",
        JsonValueError,
        [],
        "string contains a lone surrogate at index 2",
    ),
]


# --- accepted values -----------------------------------------------------------------------


@given(json_values(tuples=True))
def test_a_json_value_round_trips_through_the_snapshot_and_json_text(value: object) -> None:
    assert _as_lists(value) == json.loads(dumps_json(snapshot_json(value)))


@given(json_values(tuples=True))
def test_a_snapshot_serializes_to_the_same_text_as_its_source(value: object) -> None:
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    assert expected == dumps_json(snapshot_json(value))


@given(json_values(tuples=True))
def test_a_snapshot_equals_its_source_with_arrays_as_tuples(value: object) -> None:
    assert _as_tuples(value) == snapshot_json(value)


@given(json_values(tuples=True))
def test_the_input_is_left_untouched(value: object) -> None:
    before = copy.deepcopy(value)

    snapshot_json(value)

    assert before == value
    assert _as_lists(before) == _as_lists(value)  # tuples stay tuples, lists stay lists


def test_the_input_stays_mutable_after_a_snapshot() -> None:
    source: dict[str, list[int]] = {"a": [1]}
    snapshot = snapshot_json(source)

    source["a"].append(2)

    assert snapshot == {"a": (1,)}


@given(json_values(tuples=True))
def test_mutating_the_source_afterwards_does_not_change_the_snapshot(value: object) -> None:
    expected = _as_tuples(value)
    snapshot = snapshot_json(value)

    def scribble(data: object) -> None:
        if isinstance(data, dict):
            obj = cast("dict[str, object]", data)
            for item in list(obj.values()):
                scribble(item)
            obj["scribbled"] = True
        elif isinstance(data, list | tuple):
            array = cast("list[object] | tuple[object, ...]", data)
            for item in array:
                scribble(item)
            if isinstance(array, list):
                array.append("scribbled")

    scribble(value)

    assert expected == snapshot


def test_booleans_are_kept_as_booleans() -> None:
    assert [type(v) is bool for v in (snapshot_json(True), snapshot_json(1))] == [True, False]


@pytest.mark.parametrize("value", [2**53 - 1, -(2**53 - 1), 0.0, 1e308, -5e-324])
def test_numbers_at_the_edges_of_the_range_are_accepted(value: float) -> None:
    assert value == snapshot_json(value)


def test_a_sub_object_shared_by_siblings_is_accepted() -> None:
    shared = {"a": [1, 2]}

    assert snapshot_json([shared, shared]) == ({"a": (1, 2)}, {"a": (1, 2)})


def test_a_dict_subclass_is_accepted_as_an_object() -> None:
    class Ordered(dict[str, int]):
        pass

    assert snapshot_json(Ordered(a=1)) == {"a": 1}


def test_a_frozen_object_passed_again_is_returned_as_is() -> None:
    snapshot = snapshot_json({"a": {"b": [1]}})

    assert snapshot is snapshot_json(snapshot)


@given(snapshotted_json())
def test_a_snapshot_passed_again_is_equal_to_itself(snapshot: JsonValue) -> None:
    assert snapshot == snapshot_json(snapshot)


def test_exactly_max_depth_containers_are_accepted() -> None:
    value: object = 1
    for _ in range(MAX_DEPTH):
        value = [value]

    snapshot = snapshot_json(value)

    assert value == thaw_json(snapshot)
    with pytest.raises(JsonValueError, match="nest"):
        snapshot_json([snapshot])  # one level more is over the limit, frozen or not


# --- rejected values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make_bad", "error", "below", "reason"),
    [case[1:] for case in REJECTED],
    ids=[case[0] for case in REJECTED],
)
@settings(max_examples=50)  # twenty cases; each draws a whole value around the planted one
@given(data=st.data())
def test_a_rejected_value_is_reported_with_its_class_path_and_reason(
    make_bad: Callable[[], object],
    error: type[JsonSnapshotError],
    below: list[str | int],
    reason: str,
    data: st.DataObject,
) -> None:
    value, keys = data.draw(_planted(make_bad))

    with pytest.raises(JsonSnapshotError) as caught:
        snapshot_json(value)

    path = _path(keys + below)
    assert (error, path, reason, f"{path}: {reason}") == (
        type(caught.value),
        caught.value.path,
        caught.value.reason,
        str(caught.value),
    )


def test_a_type_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        snapshot_json(b"")


def test_a_value_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        snapshot_json(float("nan"))


def test_a_cycle_through_an_object_is_reported_where_it_closes() -> None:
    loop: dict[str, object] = {}
    loop["self"] = {"again": loop}

    with pytest.raises(JsonValueError, match=r"^\$\.self\.again: circular reference$"):
        snapshot_json(loop)


def test_nesting_deeper_than_the_limit_is_rejected_with_its_path() -> None:
    value: object = 1
    for _ in range(MAX_DEPTH + 1):
        value = [value]

    with pytest.raises(JsonValueError) as caught:
        snapshot_json(value)

    assert ("$" + "[0]" * MAX_DEPTH, f"nesting deeper than {MAX_DEPTH} levels") == (
        caught.value.path,
        caught.value.reason,
    )


def test_very_deep_nesting_is_rejected_without_a_recursion_error() -> None:
    value: object = None
    for _ in range(100_000):
        value = {"a": value}

    with pytest.raises(JsonValueError, match="nesting deeper than"):
        snapshot_json(value)


def test_a_key_that_is_not_an_identifier_is_quoted_in_the_path() -> None:
    with pytest.raises(JsonValueError, match=r'^\$\["a b"\]\[1\]\.c: '):
        snapshot_json({"a b": [0, {"c": float("inf")}]})


# --- immutability --------------------------------------------------------------------------


@given(json_values(tuples=True))
def test_no_object_in_a_snapshot_accepts_item_assignment(value: object) -> None:
    for obj in _containers(snapshot_json(value)):
        if isinstance(obj, FrozenJsonObject):
            with pytest.raises(TypeError):
                obj["new"] = 1
            with pytest.raises(TypeError):
                del obj["new"]


@given(json_values(tuples=True))
def test_no_object_in_a_snapshot_accepts_attribute_assignment(value: object) -> None:
    for obj in _containers(snapshot_json(value)):
        if isinstance(obj, FrozenJsonObject):
            # its own bookkeeping slots (named through variables: they are private)
            depth, cached_hash = "_depth", "_hash"
            with pytest.raises(AttributeError, match="FrozenJsonObject is immutable"):
                setattr(obj, depth, 0)
            with pytest.raises(AttributeError, match="FrozenJsonObject is immutable"):
                delattr(obj, cached_hash)


@given(json_values(tuples=True))
def test_every_array_in_a_snapshot_is_a_tuple(value: object) -> None:
    assert set() == {
        type(c)
        for c in _containers(snapshot_json(value))
        if not isinstance(c, FrozenJsonObject | tuple)
    }


def _ior(frozen: Any) -> None:
    frozen |= {"b": 2}


MUTATIONS: list[tuple[str, Callable[[Any], object]]] = [
    ("__setitem__", lambda f: f.__setitem__("b", 2)),
    ("item assignment", lambda f: f.__setitem__("a", 2)),
    ("__delitem__", lambda f: f.__delitem__("a")),
    ("update", lambda f: f.update({"b": 2})),
    ("update with keywords", lambda f: f.update(b=2)),
    ("pop", lambda f: f.pop("a")),
    ("pop with default", lambda f: f.pop("z", None)),
    ("popitem", lambda f: f.popitem()),
    ("clear", lambda f: f.clear()),
    ("setdefault", lambda f: f.setdefault("b", 2)),
    ("setdefault of a present key", lambda f: f.setdefault("a", 2)),
    ("__ior__", lambda f: f.__ior__({"b": 2})),
    ("|=", _ior),
    ("__init__ again", lambda f: f.__init__({"b": 2})),
]


@pytest.mark.parametrize(("name", "mutate"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_every_mutator_of_a_frozen_object_raises_and_changes_nothing(
    name: str, mutate: Callable[[Any], object]
) -> None:
    frozen = _object({"a": [1]})
    with pytest.raises(TypeError):
        mutate(frozen)
    assert ({"a": (1,)}, ["a"]) == (frozen, list(frozen))


def test_a_frozen_object_is_a_dict() -> None:
    assert isinstance(snapshot_json({"a": 1}), dict)


def test_merging_a_frozen_object_gives_a_new_plain_dict() -> None:
    frozen = _object({"a": 1})
    merged = frozen | {"b": 2}
    assert (dict, {"a": 1, "b": 2}, {"a": 1}) == (type(merged), merged, frozen)


def test_a_frozen_object_has_no_public_constructor() -> None:
    with pytest.raises(TypeError, match="no public constructor"):
        FrozenJsonObject({"a": 1})


# --- FrozenJsonObject as a value -----------------------------------------------------------


def test_a_frozen_object_equals_the_equal_dict_with_tuple_arrays() -> None:
    assert snapshot_json({"a": [1, {"b": None}]}) == {"a": (1, {"b": None})}


def test_a_frozen_object_does_not_equal_the_dict_with_list_arrays() -> None:
    assert snapshot_json({"a": [1]}) != {"a": [1]}


def test_a_frozen_object_differs_from_a_different_dict() -> None:
    assert snapshot_json({"a": 1}) != {"a": 2}


def test_a_frozen_object_does_not_equal_a_non_mapping() -> None:
    assert snapshot_json({}) != []


@given(json_values(tuples=True))
def test_equal_snapshots_hash_equal(value: object) -> None:
    assert hash(snapshot_json(value)) == hash(snapshot_json(copy.deepcopy(value)))


def test_a_frozen_object_can_be_a_set_member() -> None:
    assert len({snapshot_json({"a": 1}), snapshot_json({"a": 1})}) == 1


@given(snapshotted_json())
def test_a_snapshot_survives_pickling(snapshot: JsonValue) -> None:
    restored = pickle.loads(pickle.dumps(snapshot))

    assert (snapshot, [type(c) for c in _containers(snapshot)]) == (
        restored,
        [type(c) for c in _containers(restored)],
    )


def test_a_shallow_copy_of_a_frozen_object_is_the_object_itself() -> None:
    snapshot = snapshot_json({"a": [1]})

    assert copy.copy(snapshot) is snapshot


def test_a_deep_copy_of_a_frozen_object_is_plain_mutable_data() -> None:
    snapshot = snapshot_json({"a": [1, {"b": [2]}]})
    copied: Any = copy.deepcopy(snapshot)
    copied["a"][1]["b"].append(3)

    assert ({"a": [1, {"b": [2, 3]}]}, dict, dict) == (copied, type(copied), type(copied["a"][1]))
    assert {"a": (1, {"b": (2,)})} == snapshot


@given(st.dictionaries(json_keys, json_values(max_leaves=8, tuples=True), max_size=4))
def test_a_deep_copy_of_a_frozen_object_equals_its_thawed_value(value: dict[str, Any]) -> None:
    snapshot = snapshot_json(value)

    assert thaw_json(snapshot) == copy.deepcopy(snapshot)


def test_a_frozen_value_deep_copied_inside_a_plain_container_becomes_plain() -> None:
    frozen = snapshot_json({"a": [1]})
    assert [{"a": [1]}] == copy.deepcopy([frozen])
    assert dict is type(copy.deepcopy([frozen])[0])


def _object(value: dict[str, Any]) -> FrozenJsonObject:
    snapshot = snapshot_json(value)
    assert isinstance(snapshot, FrozenJsonObject)
    return snapshot


def test_a_frozen_object_equals_an_equal_mapping_of_another_kind() -> None:
    assert _object({"a": 1}) == types.MappingProxyType({"a": 1})


def test_a_frozen_object_supports_membership_tests() -> None:
    assert ("a" in _object({"a": 1}), "b" in _object({"a": 1})) == (True, False)


def test_a_frozen_object_s_repr_shows_its_data() -> None:
    assert repr(_object({"a": [1]})) == "FrozenJsonObject({'a': (1,)})"


def test_a_list_subclass_is_accepted_as_an_array() -> None:
    class Row(list[int]):
        pass

    assert snapshot_json(Row([1, 2])) == (1, 2)


def test_a_tuple_subclass_is_rejected() -> None:
    class Point(tuple[int, int]):
        pass

    with pytest.raises(JsonTypeError, match="is not JSON data"):
        snapshot_json(Point((1, 2)))


def test_a_frozen_object_keeps_its_key_order() -> None:
    assert list(_object({"b": 1, "a": 2, "c": 3})) == ["b", "a", "c"]


def test_a_frozen_object_s_get_returns_the_default_for_a_missing_key() -> None:
    assert (_object({"a": 1}).get("a"), _object({}).get("a", "d")) == (1, "d")


# --- dumps_json and thaw_json --------------------------------------------------------------


def test_dumps_json_writes_the_compact_form_by_default() -> None:
    assert dumps_json(snapshot_json({"a": ["red", "green"]})) == '{"a":["red","green"]}'


def test_dumps_json_can_write_the_spaced_form() -> None:
    assert dumps_json({"a": [1, 2]}, compact=False) == '{"a": [1, 2]}'


def test_dumps_json_keeps_non_ascii_text() -> None:
    assert dumps_json("héllo ✓") == '"héllo ✓"'


def test_dumps_json_refuses_nan() -> None:
    with pytest.raises(ValueError, match="Out of range float values"):
        dumps_json(float("nan"))


def test_dumps_json_refuses_a_value_that_is_not_json() -> None:
    with pytest.raises(TypeError, match="a value of type set is not JSON serializable"):
        dumps_json({1, 2})


@given(json_values(tuples=True))
def test_thaw_json_returns_plain_mutable_data(value: object) -> None:
    thawed = thaw_json(snapshot_json(value))

    assert _as_lists(value) == thawed
    assert json.dumps(_as_lists(value)) == json.dumps(thawed)


# --- interop: a frozen value is JSON to every Python JSON serializer --------------------------

_ARGS = {"path": "a.txt", "tags": ["x", "y"], "nested": {"n": 1, "f": 1.5, "none": None}}


def _tool_parameters() -> object:
    async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
        return "ok"

    return define_tool(
        name="t",
        description="d",
        parameters={"path": {"type": "string", "required": True}},
        execute=body,
    ).parameters


def test_json_dumps_accepts_frozen_arguments_as_they_are() -> None:
    assert json.dumps(_ARGS) == json.dumps(snapshot_json(_ARGS))


def test_orjson_accepts_frozen_arguments_as_they_are() -> None:
    assert orjson.dumps(_ARGS) == orjson.dumps(snapshot_json(_ARGS))


def test_httpx_accepts_frozen_arguments_as_a_json_body() -> None:
    request = httpx.Request("POST", "https://example.invalid/api", json=snapshot_json(_ARGS))
    assert _ARGS == json.loads(request.content)


def test_every_serializer_accepts_a_tool_s_parameters_as_they_are() -> None:
    parameters = _tool_parameters()
    expected = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    request = httpx.Request("POST", "https://example.invalid/api", json={"parameters": parameters})

    assert (expected, expected, {"parameters": expected}) == (
        json.loads(json.dumps(parameters)),
        json.loads(orjson.dumps(parameters)),
        json.loads(request.content),
    )


def test_jsonschema_validates_the_thawed_value() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array"}}}
    frozen = snapshot_json(_ARGS)

    assert (True, False) == (
        Draft202012Validator(schema).is_valid(thaw_json(frozen)),  # pyright: ignore[reportUnknownMemberType]
        Draft202012Validator(schema).is_valid(frozen),  # pyright: ignore[reportUnknownMemberType]
    )


def test_json_value_is_a_real_type_alias_at_run_time() -> None:
    members = typing.get_args(JsonValue)
    assert not isinstance(JsonValue, str)
    assert {bool, int, float, str, FrozenJsonObject, type(None)} <= set(members)


@given(json_values())
def test_json_values_generates_only_what_json_loads_gives(value: object) -> None:
    # a generated tuple would be excluded by every test comparing with jsonschema or json.loads
    assert _as_lists(value) == value
    assert json.loads(json.dumps(value)) == value
    assert _no_tuples(value)


def _no_tuples(value: object) -> bool:
    if isinstance(value, tuple):
        return False
    if isinstance(value, dict):
        return all(_no_tuples(v) for v in value.values())  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list):
        return all(_no_tuples(v) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return True


# --- the interop example in docs/defining-tools.md ----------------------------------------------

INTEROP_OUTPUT = 'POST /api/tickets {"title": "Crash on start", "labels": ["bug", "p1"]}\n'


async def test_the_interop_example_posts_and_validates_frozen_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/defining-tools.md", "Frozen arguments go straight to JSON lib").main()

    assert INTEROP_OUTPUT == capsys.readouterr().out


def test_the_interop_example_runs_with_only_what_its_page_names(tmp_path: Path) -> None:
    # the page names jsonschema; httpx, which no extra of the library installs, must not be needed
    script = tmp_path / "defining_tools_interop.py"
    script.write_text(
        example_source("docs/defining-tools.md", "Frozen arguments go straight to JSON lib"),
        encoding="utf-8",
    )
    probe = (
        "import sys, runpy; sys.modules['httpx'] = None; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )

    assert (0, INTEROP_OUTPUT, "") == (done.returncode, done.stdout, done.stderr)


def test_the_defining_tools_page_shows_the_interop_example_s_real_output() -> None:
    page = (ROOT / "docs" / "defining-tools.md").read_text(encoding="utf-8")
    assert f"```text\n{INTEROP_OUTPUT}```" in page


def test_the_ci_profile_cannot_fail_by_chance() -> None:
    ci = settings.get_profile("ci")
    assert (True, None, None, True) == (
        ci.derandomize,
        ci.database,
        ci.deadline,
        HealthCheck.too_slow in ci.suppress_health_check,
    )


def test_the_thorough_profile_runs_many_random_examples() -> None:
    thorough = settings.get_profile("thorough")
    assert (False, True) == (thorough.derandomize, thorough.max_examples >= 5_000)
