"""Content blocks, message sources and hook contexts as values."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given

from dsh_tools import (
    FrozenJsonObject,
    HookContext,
    JsonTypeError,
    PluginSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserSource,
)
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


def test_a_context_snapshots_its_meta() -> None:
    context = HookContext(content=[], source=UserSource(), meta={"rows": [1, 2]})

    assert (type(context.meta), context.meta) == (FrozenJsonObject, {"rows": (1, 2)})


def test_a_context_leaves_the_caller_s_meta_mutable_and_detached() -> None:
    meta: dict[str, list[int]] = {"rows": [1]}
    context = HookContext(content=[], source=UserSource(), meta=meta)

    meta["rows"].append(2)

    assert context.meta == {"rows": (1,)}


def test_a_context_without_meta_has_none() -> None:
    assert HookContext(content=[], source=UserSource()).meta is None


def test_a_context_rejects_meta_that_is_not_json() -> None:
    with pytest.raises(JsonTypeError, match=r"^\$\.when: a value of type bytes is not JSON data$"):
        HookContext(content=[], source=UserSource(), meta={"when": b"now"})


def test_a_context_stores_its_content_as_a_tuple() -> None:
    context = HookContext(content=[TextBlock(text="a")], source=PluginSource(plugin="p"))

    assert context.content == (TextBlock(text="a"),)


@given(hook_contexts)
def test_a_context_is_hashable_and_equal_to_its_copy(context: HookContext) -> None:
    copy = attrs.evolve(context)

    assert (context, hash(context)) == (copy, hash(copy))
