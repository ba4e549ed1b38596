"""A hostile corpus for the value layer: what an attacker (or an unlucky model) can feed the JSON
boundary and the session log, and what a tool or wrapper can try on a frozen value.

Each case pins one defect found by an attack on the core: surrogates in keys, values and
events, frozen values nested past the depth limit, copy/pickle protocols that handed out a
frozen value's storage, and mutation attempts.
"""

from __future__ import annotations

import copy
import copyreg
import json
import pickle
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    MAX_DEPTH,
    CancelSignal,
    ContextMessageEvent,
    FrozenJsonObject,
    JsonlSessionLog,
    JsonValue,
    JsonValueError,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolErrorInfo,
    ToolExecutionInput,
    ToolOutput,
    ToolResultEvent,
    ToolRunContext,
    UserSource,
    dumps_json,
    read_session_log,
    run_tool_calls,
    snapshot_json,
    thaw_json,
)
from support import first_text, registry_with, request, run_calls, string_tool, tool

# --- surrogates ------------------------------------------------------------------------------

# a lone high, a lone low, a surrogateescape'd byte, and a low surrogate before a high one
SURROGATE_TEXTS = [
    "\ud800",
    "a\udfffb",
    b"\xff-name".decode("utf-8", "surrogateescape"),
    "\udc00\ud800",
]


@pytest.mark.parametrize("key", SURROGATE_TEXTS)
def test_a_lone_surrogate_in_an_object_key_is_rejected_like_one_in_a_value(key: str) -> None:
    with pytest.raises(JsonValueError, match=r"^\$\.a: object key .* contains a lone surrogate"):
        snapshot_json({"a": {key: 1}})


def test_a_lone_surrogate_in_a_key_is_rejected_at_the_top_level_naming_the_root() -> None:
    with pytest.raises(JsonValueError) as caught:
        snapshot_json({"\ud800": 1})
    assert ("$", "object key '\\ud800' contains a lone surrogate at index 0") == (
        caught.value.path,
        caught.value.reason,
    )


def test_a_key_with_a_proper_surrogate_pair_character_is_accepted() -> None:
    assert {"😀": 1} == snapshot_json({"😀": 1})


_surrogate_text = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.characters(),
    max_size=12,
)
_ids = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.characters(),
    max_size=6,
)


def _no_surrogate_pairs(text: str) -> bool:
    """JSON spells a high surrogate followed by a low one as the character they encode."""
    return re.search("[\ud800-\udbff][\udc00-\udfff]", text) is None


@given(
    call_id=_ids.filter(_no_surrogate_pairs),
    name=_ids.filter(_no_surrogate_pairs),
    arguments=_surrogate_text.filter(_no_surrogate_pairs),
    text=_surrogate_text.filter(_no_surrogate_pairs),
)
def test_every_python_string_in_an_event_reads_back_equal_from_jsonl(
    tmp_path_factory: pytest.TempPathFactory, call_id: str, name: str, arguments: str, text: str
) -> None:
    path = tmp_path_factory.mktemp("surrogates") / "log.jsonl"
    events = [
        ToolCallEvent(turn=0, step=0, call_id=call_id, name=name, arguments=arguments),
        ToolResultEvent(
            turn=0,
            step=0,
            call_id=call_id,
            content=[TextBlock(text=text)],
            is_error=True,
            error=ToolErrorInfo(name=name, code=text),
            source_event_seqs=(0,),
        ),
        ContextMessageEvent(content=[TextBlock(text=text)], source=UserSource()),
    ]
    with JsonlSessionLog(path) as log:
        for event in events:
            log.append(event)

    assert events == read_session_log(path)
    path.read_bytes().decode("utf-8")  # the file stays valid UTF-8 for every other reader


def test_a_surrogate_escape_is_written_as_its_json_escape(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(ToolCallEvent(turn=0, step=0, call_id="\udcff", name="é", arguments=""))

    expected = (
        '{"type":"tool/call","turn":0,"step":0,"callId":"\\udcff","name":"é","arguments":""}\n'
    )
    assert expected == path.read_text(encoding="utf-8")


def test_a_high_then_low_surrogate_reads_back_as_the_character_json_spells() -> None:
    # the one limit JSON itself imposes (documented on JsonlSessionLog)
    event = ToolCallEvent(turn=0, step=0, call_id="\ud83d\ude00", name="n", arguments="")
    from dsh_tools._sessions._wire import encode_event_line

    assert "😀" == json.loads(encode_event_line(event))["callId"]


async def test_surrogates_everywhere_the_model_supplies_text_lose_no_result(
    tmp_path: Path,
) -> None:
    async def echo(args: FrozenJsonObject, context: ToolRunContext) -> str:
        await trio.lowlevel.checkpoint()
        return f"got {args['text']}"

    registry = registry_with(string_tool("echo", echo, description="Echo."))
    escaped = b"\xfe".decode("utf-8", "surrogateescape")
    calls = [
        ToolCallRequest(call_id=f"c1{escaped}", name="echo", arguments='{"text": "ok"}'),
        ToolCallRequest(call_id="c2", name=f"echo{escaped}", arguments="{}"),
        ToolCallRequest(call_id="c3", name="echo", arguments='{"text": "\ud800 raw"}'),
        ToolCallRequest(call_id="c4", name="echo", arguments='{"text": "\\ud800 escaped"}'),
        ToolCallRequest(call_id="c5\udfff", name="echo", arguments='{"text": "fine"}'),
    ]
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        batch = await run_tool_calls(registry, calls, signal=CancelSignal.never(), session=log)

    events = read_session_log(path)
    call_events = [e for e in events if isinstance(e, ToolCallEvent)]
    result_events = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [c.call_id for c in calls] == [e.call_id for e in call_events]
    assert [c.arguments for c in calls] == [e.arguments for e in call_events]
    assert [tuple(r.content) for r in batch.results] == [e.content for e in result_events]
    assert (5, [False, True, True, True, False]) == (
        len(batch.results),
        [r.is_error for r in batch.results],
    )


# --- depth ---------------------------------------------------------------------------------


def _chain(levels: int) -> JsonValue:
    """A frozen value built by nesting frozen values one level at a time."""
    value: JsonValue = snapshot_json({})
    for _ in range(levels - 1):
        value = snapshot_json({"prev": value})
    return value


def test_nesting_frozen_values_counts_their_full_depth() -> None:
    deepest = _chain(MAX_DEPTH)
    with pytest.raises(JsonValueError, match=rf"^\$\.prev: nesting deeper than {MAX_DEPTH} levels"):
        snapshot_json({"prev": deepest})


def test_a_frozen_chain_at_the_limit_is_accepted_and_serializes() -> None:
    deepest = _chain(MAX_DEPTH)
    text = dumps_json(deepest)
    assert (MAX_DEPTH, deepest) == (text.count("{"), snapshot_json(json.loads(text)))


def test_a_frozen_value_inside_an_array_counts_its_depth_too() -> None:
    with pytest.raises(JsonValueError, match=r"^\$\[0\]: nesting deeper than"):
        snapshot_json([_chain(MAX_DEPTH)])


def test_a_frozen_value_inside_a_re_snapshotted_tuple_counts_its_depth() -> None:
    inner = snapshot_json([_chain(MAX_DEPTH - 1)])  # exactly at the limit
    with pytest.raises(JsonValueError, match="nesting deeper than"):
        snapshot_json({"x": inner})


def test_the_frozen_nesting_loop_of_the_attack_stops_with_a_clear_error() -> None:
    value: JsonValue = snapshot_json({})
    levels = 1
    error: JsonValueError | None = None
    for _ in range(10 * MAX_DEPTH):
        try:
            value = snapshot_json({"prev": value, "pad": [[1]]})
        except JsonValueError as exc:
            error = exc
            break
        levels += 1
    # the first wrap is 3 levels deep ({"pad": [[1]]}), each further one adds a level
    assert (MAX_DEPTH - 1, f"nesting deeper than {MAX_DEPTH} levels") == (
        levels,
        error and error.reason,
    )
    # everything that was built still works: no RecursionError anywhere
    assert isinstance(hash(value), int)
    assert repr(value).startswith("FrozenJsonObject(")
    assert thaw_json(value) == json.loads(dumps_json(value))


def test_nesting_deep_frozen_values_in_meta_cannot_crash_the_log(tmp_path: Path) -> None:
    with pytest.raises(JsonValueError, match="nesting deeper than"):
        ToolResultEvent(
            turn=0, step=0, call_id="c", content=[], is_error=False, meta={"m": _chain(MAX_DEPTH)}
        )
    event = ToolResultEvent(
        turn=0, step=0, call_id="c", content=[], is_error=False, meta=_chain(MAX_DEPTH)
    )
    with JsonlSessionLog(tmp_path / "log.jsonl") as log:
        log.append(event)
        assert [event] == log.events()


def test_a_frozen_value_remembers_how_deep_it_nests_independent_of_siblings() -> None:
    shallow_then_deep = snapshot_json({"a": [], "b": _chain(MAX_DEPTH - 1)})  # depth MAX_DEPTH
    deep_then_shallow = snapshot_json({"b": _chain(MAX_DEPTH - 1), "a": []})
    for value in (shallow_then_deep, deep_then_shallow):
        with pytest.raises(JsonValueError, match="nesting deeper than"):
            snapshot_json([value])
    assert snapshot_json([snapshot_json({"a": [], "b": _chain(MAX_DEPTH - 2)})]) is not None


# --- copy and pickle escapes ------------------------------------------------------------------


def _frozen() -> FrozenJsonObject:
    value = snapshot_json({"path": "notes.txt", "list": [1, {"k": "v"}]})
    assert isinstance(value, FrozenJsonObject)
    return value


def _mutate_everything_in(obj: object) -> None:
    """Try to change every mutable container reachable from ``obj`` (what an attacker does
    with whatever a protocol hands out)."""
    seen: set[int] = set()

    def visit(item: object) -> None:
        if id(item) in seen:
            return
        seen.add(id(item))
        if isinstance(item, dict) and not isinstance(item, FrozenJsonObject):
            for value in list(item.values()):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
                visit(value)  # pyright: ignore[reportUnknownArgumentType]
            item["path"] = "/etc/passwd"
            item.clear()
        elif isinstance(item, list):
            for value in list(item):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
                visit(value)  # pyright: ignore[reportUnknownArgumentType]
            item.clear()
        elif isinstance(item, tuple):
            for value in item:  # pyright: ignore[reportUnknownVariableType]
                visit(value)  # pyright: ignore[reportUnknownArgumentType]

    visit(obj)


ESCAPES: list[tuple[str, Callable[[FrozenJsonObject], object]]] = [
    ("__reduce__", lambda f: f.__reduce__()),
    *[(f"__reduce_ex__({n})", lambda f, n=n: f.__reduce_ex__(n)) for n in range(6)],
    ("__getstate__", lambda f: f.__getstate__()),
    ("copyreg reduce", lambda f: copyreg.__reduce_ex__(f, 2)),  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownLambdaType]
    ("copy()", lambda f: f.copy()),
    ("dict()", lambda f: dict(f)),
    ("copy.copy", lambda f: copy.copy(f)),
    ("copy.deepcopy", lambda f: copy.deepcopy(f)),
    ("items()", lambda f: list(f.items())),
    ("thaw_json", lambda f: thaw_json(f)),
]


@pytest.mark.parametrize(("name", "escape"), ESCAPES, ids=[e[0] for e in ESCAPES])
def test_no_protocol_hands_out_storage_that_changes_a_frozen_value(
    name: str, escape: Callable[[FrozenJsonObject], object]
) -> None:
    frozen = _frozen()
    try:
        handed_out = escape(frozen)
    except TypeError:
        return  # refusing is fine too
    _mutate_everything_in(handed_out)

    assert {"path": "notes.txt", "list": (1, {"k": "v"})} == frozen


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickling_a_frozen_value_restores_an_equal_frozen_value(protocol: int) -> None:
    frozen = _frozen()
    restored = pickle.loads(pickle.dumps(frozen, protocol=protocol))

    assert (frozen, FrozenJsonObject, FrozenJsonObject) == (
        restored,
        type(restored),
        type(restored["list"][1]),
    )


def test_unpickling_data_that_is_not_json_is_rejected() -> None:
    # the reconstructor a frozen value pickles itself with, fed data that is not JSON
    rebuild = snapshot_json({})
    assert isinstance(rebuild, FrozenJsonObject)
    unpickle = rebuild.__reduce__()[0]
    forged = pickle.dumps((unpickle, ({"n": 2**60},)))
    payload = pickle.loads(forged)
    with pytest.raises(JsonValueError, match="outside"):
        payload[0](*payload[1])


def test_an_unpickled_frozen_value_keeps_its_depth() -> None:
    restored = pickle.loads(pickle.dumps(_chain(MAX_DEPTH)))
    with pytest.raises(JsonValueError, match="nesting deeper than"):
        snapshot_json([restored])


def test_the_recursion_limit_is_not_what_stops_a_deep_value() -> None:
    # deep frozen values stay far below the interpreter's recursion limit
    assert MAX_DEPTH * 4 < sys.getrecursionlimit()


# --- mutation attempts -------------------------------------------------------------------------

ATTEMPTS: list[tuple[str, Callable[[Any], object]]] = [
    ("setitem", lambda f: f.__setitem__("path", "/etc/passwd")),
    ("delitem", lambda f: f.__delitem__("path")),
    ("update", lambda f: f.update(path="/etc/passwd")),
    ("setdefault", lambda f: f.setdefault("new", 1)),
    ("pop", lambda f: f.pop("path")),
    ("popitem", lambda f: f.popitem()),
    ("clear", lambda f: f.clear()),
    ("ior", lambda f: f.__ior__({"path": "/etc/passwd"})),
    ("init", lambda f: f.__init__(path="/etc/passwd")),
    ("fromkeys", lambda f: type(f).fromkeys(["path"])),  # pyright: ignore[reportUnknownMemberType, reportUnknownLambdaType]
    ("nested setitem", lambda f: f["list"][1].__setitem__("k", "w")),
    ("setattr", lambda f: setattr(f, "_depth", 0)),
    ("class swap", lambda f: setattr(f, "__class__", dict)),
]


@pytest.mark.parametrize(("name", "attempt"), ATTEMPTS, ids=[a[0] for a in ATTEMPTS])
def test_a_mutation_attempt_raises_and_changes_nothing(
    name: str, attempt: Callable[[Any], object]
) -> None:
    frozen = _frozen()
    with pytest.raises((TypeError, AttributeError)):
        attempt(frozen)
    assert ({"path": "notes.txt", "list": (1, {"k": "v"})}, FrozenJsonObject) == (
        frozen,
        type(frozen),
    )


# --- frozen objects built around the constructor ------------------------------------------


def forged_frozen(**items: object) -> FrozenJsonObject:
    """A ``FrozenJsonObject`` made the way a careless plugin could: ``dict.__new__`` and
    ``dict.update``, bypassing :func:`snapshot_json`."""
    forged = dict.__new__(FrozenJsonObject)
    dict.update(forged, items)  # pyright: ignore[reportUnknownMemberType]
    return forged


def test_a_frozen_object_built_around_the_constructor_is_checked_like_a_dict() -> None:
    with pytest.raises(JsonValueError, match=re.escape("$.x: nan is not a finite number")):
        snapshot_json(forged_frozen(x=float("nan")))


def test_a_forged_frozen_object_nested_in_data_is_checked_at_its_path() -> None:
    with pytest.raises(JsonValueError, match=re.escape("$.a[0].big: integer")):
        snapshot_json({"a": [forged_frozen(big=2**60)]})


def test_a_forged_frozen_object_with_valid_data_becomes_a_real_one() -> None:
    forged = forged_frozen(a=1)
    frozen = snapshot_json(forged)

    assert frozen is not forged
    assert {"a": 1} == frozen
    assert snapshot_json(frozen) is frozen  # the real one is trusted from then on


async def test_a_forged_frozen_meta_holding_nan_becomes_an_error_result_and_the_log_balances(
    tmp_path: Path,
) -> None:
    async def body(args: object, context: ToolRunContext) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        return ToolOutput(content=[TextBlock(text="done")], meta=forged_frozen(x=float("nan")))

    registry = registry_with(tool("t", body))
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as session:
        batch = await run_calls(registry, request("c1", "t"), request("c2", "t"), session=session)

    assert [
        "Error: tool result must be losslessly JSON-serializable",
        "Error: tool result must be losslessly JSON-serializable",
    ] == [first_text(result) for result in batch.results]
    events = read_session_log(path)
    assert ["c1", "c1", "c2", "c2"] == [
        event.call_id for event in events if isinstance(event, ToolCallEvent | ToolResultEvent)
    ]


def test_an_integer_too_long_to_print_is_rejected_with_its_size() -> None:
    with pytest.raises(JsonValueError, match=re.escape("$.n: integer of 16610 bits is outside")):
        snapshot_json({"n": 10**5000})


async def test_forged_frozen_arguments_handed_to_execute_are_rejected_at_the_boundary() -> None:
    seen: list[object] = []

    async def body(args: object, context: ToolRunContext) -> str:
        seen.append(args)
        return "ran"

    registry = registry_with(tool("t", body))

    result = await registry.execute(
        ToolExecutionInput(
            call_id="c1",
            name="t",
            arguments=forged_frozen(x=float("nan")),
            signal=CancelSignal.never(),
        )
    )

    assert (
        "Error: tool execution arguments must be losslessly JSON-serializable",
        [],
    ) == (first_text(result), seen)
