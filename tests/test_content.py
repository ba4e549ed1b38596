"""Content blocks, message sources and hook contexts as values."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given

from dsh_tools import (
    FrozenJsonObject,
    HookContext,
    PluginSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserSource,
)
from dsh_tools._pipeline._results import freeze_context
from strategies import content_blocks, hook_contexts


def test_a_tool_result_block_stores_its_content_as_a_tuple() -> None:
    block = ToolResultBlock(tool_call_id="c", content=[TextBlock(text="a")])

    assert block.content == (TextBlock(text="a"),)


def test_a_tool_result_block_has_no_error_flag_by_default() -> None:
    assert ToolResultBlock(tool_call_id="c", content=[]).is_error is None


def test_blocks_take_keyword_arguments_only() -> None:
    with pytest.raises(TypeError):
        TextBlock("positional")  # type: ignore[misc]


@pytest.mark.parametrize(
    "block",
    [
        TextBlock(text="a"),
        ReasoningBlock(text="a"),
        ToolCallBlock(id="c", name="n", arguments="{}"),
        ToolResultBlock(tool_call_id="c", content=[]),
    ],
    ids=lambda b: type(b).__name__,
)
def test_a_block_is_frozen(block: object) -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        block.text = "changed"  # type: ignore[attr-defined]


def test_text_and_reasoning_blocks_with_the_same_text_differ() -> None:
    assert TextBlock(text="a") != ReasoningBlock(text="a")


@given(content_blocks)
def test_equal_blocks_hash_equal(block: object) -> None:
    assert hash(block) == hash(attrs.evolve(block))


def test_a_user_source_equals_another_user_source() -> None:
    assert UserSource() == UserSource()


def test_plugin_sources_compare_by_plugin() -> None:
    assert (
        PluginSource(plugin="a") == PluginSource(plugin="a"),
        PluginSource(plugin="a") == PluginSource(plugin="b"),
    ) == (True, False)


def test_a_context_keeps_its_meta_as_given_until_the_pipeline_checks_it() -> None:
    meta = {"rows": [1, 2]}
    context = HookContext(content=[], source=UserSource(), meta=meta)

    assert context.meta is meta


def test_freezing_a_context_snapshots_its_meta_and_detaches_it() -> None:
    meta: dict[str, list[int]] = {"rows": [1]}
    frozen = freeze_context(HookContext(content=[], source=UserSource(), meta=meta))

    meta["rows"].append(2)

    assert (type(frozen.meta), frozen.meta) == (FrozenJsonObject, {"rows": (1,)})


def test_a_context_without_meta_has_none() -> None:
    assert HookContext(content=[], source=UserSource()).meta is None


def test_a_context_with_meta_that_is_not_json_is_built_but_refused_when_frozen() -> None:
    context = HookContext(content=[], source=UserSource(), meta={"when": b"now"})

    with pytest.raises(Exception) as caught:
        freeze_context(context)

    expected = "context.meta: $.when: a value of type bytes is not JSON data"
    assert expected == str(caught.value)


def test_a_context_stores_its_content_as_a_tuple() -> None:
    context = HookContext(content=[TextBlock(text="a")], source=PluginSource(plugin="p"))

    assert context.content == (TextBlock(text="a"),)


@given(hook_contexts)
def test_a_frozen_context_is_hashable_and_equal_to_its_copy(context: HookContext) -> None:
    frozen = freeze_context(context)
    copy = attrs.evolve(frozen)

    assert (frozen, hash(frozen)) == (copy, hash(copy))
