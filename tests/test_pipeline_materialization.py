"""Stage 9 (the final snapshot) and the total text conversions, value by value."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from dsh_tools import (
    FrozenJsonObject,
    HookContext,
    PluginSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolErrorInfo,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolResultBlock,
    ToolReturn,
    ToolRunContext,
    UserSource,
    register_content_block,
    snapshot_json,
)
from dsh_tools._pipeline._results import ABORTED, INVALID_RESULT, Invalid, freeze_result
from support import execution_input, registry_with, tool

INVALID = ToolExecutionResult(
    content=(TextBlock(text="Error: tool result must be losslessly JSON-serializable"),),
    is_error=True,
)


def _materialize(result: object) -> ToolExecutionResult:
    """Stage 9's outcome for ``result``: frozen, or the canonical invalid-result error."""
    try:
        return freeze_result(result)
    except Invalid:
        return INVALID_RESULT


def _result(**changes: Any) -> ToolExecutionResult:
    result = ToolExecutionResult(content=(TextBlock(text="ok"),), is_error=False)
    for name, value in changes.items():
        object.__setattr__(result, name, value)  # bypass converters: what a buggy hook builds
    return result


def _bad_plugin_source() -> PluginSource:
    source = PluginSource(plugin="p")
    object.__setattr__(source, "plugin", 7)
    return source


VALID = [
    _result(),
    _result(content=(ReasoningBlock(text="thinking"), TextBlock(text="é"))),
    _result(content=(ToolCallBlock(id="1", name="n", arguments="{}"),)),
    _result(
        content=(
            ToolResultBlock(tool_call_id="1", content=(TextBlock(text="inner"),), is_error=True),
        )
    ),
    _result(
        additional_contexts=(
            HookContext(content=(TextBlock(text="c"),), source=UserSource(), meta={"k": 1}),
            HookContext(content=(), source=PluginSource(plugin="p")),
        )
    ),
    _result(error=ToolErrorInfo(name="E", code="C"), is_error=True),
    _result(meta={"a": [1, 2]}),
]


def snapshot_metas(result: ToolExecutionResult) -> ToolExecutionResult:
    contexts = tuple(
        attrs.evolve(c, meta=None if c.meta is None else snapshot_json(c.meta))
        for c in result.additional_contexts
    )
    meta = None if result.meta is None else snapshot_json(result.meta)
    return attrs.evolve(result, additional_contexts=contexts, meta=meta)


INVALID_RESULTS = [
    "not a result",
    _result(content=[TextBlock(text="a list")]),
    _result(content=(TextBlock(text="\ud800"),)),
    _result(content=(ToolCallBlock(id="1", name="n", arguments={}),)),  # pyright: ignore[reportArgumentType]
    _result(content=(ToolResultBlock(tool_call_id="1", content=("x",)),)),  # pyright: ignore[reportArgumentType]
    _result(content=(ToolResultBlock(tool_call_id="1", content=(), is_error=1),)),  # pyright: ignore[reportArgumentType]
    _result(is_error=1),
    _result(error=ToolErrorInfo(name="E", code=5)),  # pyright: ignore[reportArgumentType]
    _result(error=("E", "C")),
    _result(additional_contexts=[]),
    _result(additional_contexts=("context",)),
    _result(additional_contexts=(HookContext(content=(), source=_bad_plugin_source()),)),
    _result(additional_contexts=(HookContext(content=(), source="user"),)),  # pyright: ignore[reportArgumentType]
    _result(meta={1, 2}),
]


@pytest.mark.parametrize("result", [snapshot_metas(result) for result in VALID])
def test_a_complete_frozen_result_passes_the_final_snapshot_unchanged(
    result: ToolExecutionResult,
) -> None:
    assert _materialize(result) is result


@pytest.mark.parametrize("result", VALID)
def test_a_complete_result_materializes_as_an_equal_result_with_frozen_metas(
    result: ToolExecutionResult,
) -> None:
    materialized = _materialize(result)
    metas = [materialized.meta, *(context.meta for context in materialized.additional_contexts)]

    assert (snapshot_metas(result), [True] * len(metas)) == (
        materialized,
        [meta is None or type(meta) is FrozenJsonObject for meta in metas],
    )


def test_a_result_with_plain_meta_is_copied_and_the_caller_s_meta_stays_mutable() -> None:
    meta = {"a": [1]}
    materialized = _materialize(_result(meta=meta))
    meta["a"].append(2)

    assert ({"a": [1, 2]}, {"a": (1,)}) == (meta, materialized.meta)


@pytest.mark.parametrize("result", INVALID_RESULTS)
def test_an_incomplete_or_lossy_result_becomes_the_invalid_result_error(result: object) -> None:
    expected = INVALID
    assert expected == _materialize(result)


def test_the_canonical_aborted_result() -> None:
    expected = ToolExecutionResult(
        content=(TextBlock(text="Error: tool call aborted"),),
        is_error=True,
        error=ToolErrorInfo(name="AbortError", code="ABORTED"),
    )
    assert expected == ABORTED


# --- total text conversions ------------------------------------------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")

    def __repr__(self) -> str:
        raise RuntimeError("no")


async def _execute(registry: ToolRegistry, arguments: object = None) -> ToolExecutionResult:
    return await registry.execute(execution_input("t", arguments, call_id="c"))


def _registry() -> ToolRegistry:
    return registry_with(tool("t", description="t"))


async def test_a_guard_reason_that_is_not_a_str_is_shown_with_str() -> None:
    registry = _registry()
    registry.guard(lambda execution: 42)  # pyright: ignore[reportArgumentType]

    expected = ToolExecutionResult(content=(TextBlock(text="Error: 42"),), is_error=True)
    assert expected == await _execute(registry)


async def test_an_unprintable_guard_reason_is_shown_as_unprintable() -> None:
    registry = _registry()
    registry.guard(lambda execution: Unprintable())  # pyright: ignore[reportArgumentType]

    expected = ToolExecutionResult(
        content=(TextBlock(text="Error: <unprintable thrown value>"),), is_error=True
    )
    assert expected == await _execute(registry)


async def test_arguments_whose_reading_raises_give_that_error() -> None:
    class Hostile(dict[str, object]):
        def items(self) -> Any:
            raise RuntimeError("getter failed")

    expected = ToolExecutionResult(content=(TextBlock(text="Error: getter failed"),), is_error=True)
    assert expected == await _execute(_registry(), Hostile())


async def test_a_pre_execute_listener_returning_an_unprintable_value_is_still_reported() -> None:
    registry = _registry()

    async def pre(execution: Any, next: Any) -> Any:
        return Unprintable()

    registry.hooks.pre_execute.add(pre)

    expected = ToolExecutionResult(
        content=(
            TextBlock(
                text="Error: tools/pre-execute returned <unprintable thrown value>, "
                "not Allow, Deny or Ask"
            ),
        ),
        is_error=True,
    )
    assert expected == await _execute(registry)


@attrs.frozen(kw_only=True)
class ImageBlock:
    """An extension content block, as an application would add one."""

    url: str


register_content_block(ImageBlock, "test-pipeline-image")


@attrs.frozen(kw_only=True)
class UnregisteredBlock:
    url: str


def test_a_registered_extension_block_passes_the_final_snapshot() -> None:
    result = _result(content=(ImageBlock(url="https://example.invalid/a.png"),))

    assert _materialize(result) is result


def test_an_extension_block_with_a_non_json_field_is_an_invalid_result() -> None:
    result = _result(content=(ImageBlock(url=object()),))  # pyright: ignore[reportArgumentType]

    expected = INVALID
    assert expected == _materialize(result)


def test_an_unregistered_block_type_is_an_invalid_result() -> None:
    result = _result(content=(UnregisteredBlock(url="u"),))

    expected = INVALID
    assert expected == _materialize(result)


@pytest.mark.parametrize("where", ["output meta", "context meta"])
async def test_meta_that_is_not_json_is_refused_only_at_stage_9_with_the_exact_text(
    where: str,
) -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(
            HookContext(
                content=(),
                source=UserSource(),
                meta={"callback": print} if where == "context meta" else None,
            )
        )
        # neither constructor checks meta: the body gets this far
        return ToolOutput(
            content=(TextBlock(text="ok"),),
            meta={"callback": print} if where == "output meta" else None,
        )

    result = await registry_with(tool("t", body)).execute(execution_input("t", call_id="c"))

    assert INVALID == result
