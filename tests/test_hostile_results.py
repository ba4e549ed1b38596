"""Failures are results, always: hostile values thrown at every place a result is built.

A body, a wrapper, a ``post_execute`` listener, a ``pre_execute`` listener and an observer
each hand the pipeline a value an attacker or a careless tool could produce (an int too long
to print, NaN, an object whose ``repr`` raises, a list that holds itself, nesting past the
depth limit, ...). Whatever it is, the batch returns one result per call, each with its text,
and the session log holds every result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    Accept,
    CancelSignal,
    MemorySessionLog,
    TextBlock,
    ToolCallRequest,
    ToolDefinition,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    run_tool_calls,
)


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError(10**5000)

    __str__ = __repr__


class _BadEquality:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing me")

    __hash__ = None  # type: ignore[assignment]


def _self_holding() -> list[object]:
    loop: list[object] = []
    loop.append(loop)
    return loop


def _deep(levels: int) -> object:
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


def _huge() -> int:
    return 10**5000


def _huge_negative() -> int:
    return -(10**4301)


def _unsafe_int() -> int:
    return 2**53


def _nan() -> float:
    return math.nan


def _infinity() -> float:
    return math.inf


def _negative_zero() -> float:
    return -0.0


def _surrogate() -> str:
    return "\ud800"


def _bytes() -> bytes:
    return b"\xff"


def _set() -> set[int]:
    return {1, 2}


def _none() -> None:
    return None


def _exception() -> Exception:
    return Exception(10**5000)


_ATOMS: dict[str, Callable[[], object]] = {
    "huge": _huge,
    "huge negative": _huge_negative,
    "unsafe int": _unsafe_int,
    "nan": _nan,
    "infinity": _infinity,
    "negative zero": _negative_zero,
    "surrogate": _surrogate,
    "bytes": _bytes,
    "set": _set,
    "none": _none,
    "unprintable": _Unprintable,
    "bad equality": _BadEquality,
    "exception": _exception,
    "self-holding": _self_holding,
}

# Hypothesis draws a recipe (plain tuples it can print; some of the values refuse to print)
# and the test builds the value from it
Recipe = tuple[Any, ...]
recipes: st.SearchStrategy[Recipe] = st.recursive(
    st.sampled_from(sorted(_ATOMS)).map(lambda name: ("atom", name))
    | st.integers(min_value=60, max_value=2000).map(lambda levels: ("deep", levels)),
    lambda inner: (
        st.tuples(st.just("list"), st.lists(inner, max_size=3))
        | st.tuples(st.just("dict"), st.sampled_from(["a", "b", "\udc80"]), inner)
        | st.tuples(st.just("tuple"), inner, inner)
    ),
    max_leaves=4,
)


def _build(recipe: Recipe) -> object:
    kind = recipe[0]
    if kind == "atom":
        return _ATOMS[recipe[1]]()
    if kind == "deep":
        return _deep(recipe[1])
    if kind == "list":
        return [_build(item) for item in recipe[1]]
    if kind == "dict":
        return {recipe[1]: _build(recipe[2])}
    return (_build(recipe[1]), _build(recipe[2]))


# where the value reaches the pipeline
PLACES = (
    "returned",
    "raised",
    "meta",
    "in a list",
    "wrapper returns",
    "wrapper raises",
    "post_execute raises",
    "pre_execute raises",
    "observer raises",
    "progress",
)


class _Carrier(Exception):
    """An exception carrying the hostile value (its ``str`` may fail, or be huge)."""


def _registry(place: str, value: object) -> ToolRegistry:
    async def body(args: Any, context: ToolRunContext) -> Any:
        if place == "raised":
            raise _Carrier(value)
        if place == "meta":
            return ToolOutput(content=[TextBlock(text="x")], meta=value)
        if place == "in a list":
            return [TextBlock(text="x"), value]
        if place == "progress":
            context.report_progress(progress=value, total=value, message=value)  # type: ignore[arg-type]
            return "ok"
        return value if place == "returned" else "ok"

    registry = ToolRegistry()
    registry.register(ToolDefinition(name="t", description="d", parameters={}, execute=body))

    async def wrapper(execution: Any, next: Any) -> Any:
        await next()
        if place == "wrapper raises":
            raise _Carrier(value)
        return value

    async def post(execution: Any, result: ToolExecutionResult, next: Any) -> Any:
        raise _Carrier(value)

    async def pre(execution: Any, next: Any) -> Any:
        raise _Carrier(value)

    def observer(execution: Any, result: ToolExecutionResult) -> None:
        raise _Carrier(value)

    if place.startswith("wrapper"):
        registry.hooks.execute.add(wrapper)
    elif place == "post_execute raises":
        registry.hooks.post_execute.add(post)
    elif place == "pre_execute raises":
        registry.hooks.pre_execute.add(pre)
    elif place == "observer raises":
        registry.hooks.result.add(observer)
    return registry


async def _run(place: str, value: object) -> tuple[list[str], list[str]]:
    """Each result's text (an empty list is empty content), and the call ids of the ``tool/result`` events logged."""
    registry = _registry(place, value)
    log = MemorySessionLog()
    calls = [ToolCallRequest(call_id=f"c{n}", name="t", arguments="{}") for n in range(2)]
    batch = await run_tool_calls(registry, calls, signal=CancelSignal.never(), session=log)
    texts = [
        "".join(block.text for block in result.content if isinstance(block, TextBlock))
        for result in batch.results
    ]
    logged = [event.call_id for event in log.events() if isinstance(event, ToolResultEvent)]
    return texts, logged


@settings(deadline=None)
@given(place=st.sampled_from(PLACES), recipe=recipes)
def test_a_hostile_value_anywhere_a_result_is_built_is_a_result_never_an_exception(
    place: str, recipe: Recipe
) -> None:
    texts, logged = trio.run(_run, place, _build(recipe))

    assert (2, ["c0", "c1"]) == (len(texts), logged)


def test_a_body_returning_an_int_too_long_to_print_is_an_error_result_the_model_reads() -> None:
    texts, logged = trio.run(_run, "returned", 10**5000)

    assert (["Error: tool result must be losslessly JSON-serializable"] * 2, ["c0", "c1"]) == (
        texts,
        logged,
    )


async def test_the_accept_path_stays_untouched_by_hostile_meta_elsewhere() -> None:
    # a sanity anchor for the property above: the plain path still succeeds
    registry = _registry("returned", "fine")

    async def accept(execution: Any, result: ToolExecutionResult, next: Any) -> Any:
        return Accept()

    registry.hooks.post_execute.add(accept)
    batch = await run_tool_calls(
        registry,
        [ToolCallRequest(call_id="c", name="t", arguments="{}")],
        signal=CancelSignal.never(),
    )

    assert "fine" == batch.results[0].content[0].text  # type: ignore[union-attr]
