"""A ``str`` passed as ``content`` is refused at construction instead of being split into
one-character "blocks"; a body returning a plain ``str`` stays the one-text-block shorthand."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from dsh_tools import (
    Accept,
    Block,
    CancelSignal,
    FrozenJsonObject,
    HookContext,
    TextBlock,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolResultBlock,
    ToolRunContext,
    UserSource,
    define_tool,
)

_MESSAGE = (
    "content must be a sequence of content blocks, not str; for text use [TextBlock(text=...)]"
)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ToolOutput(content="hello", meta={"k": 1}),  # pyright: ignore[reportArgumentType]
        lambda: Accept(content="replaced"),  # pyright: ignore[reportArgumentType]
        lambda: HookContext(content="note", source=UserSource()),  # pyright: ignore[reportArgumentType]
        lambda: ToolExecutionResult(content="x", is_error=False),  # pyright: ignore[reportArgumentType]
        lambda: ToolResultBlock(tool_call_id="c", content="x"),  # pyright: ignore[reportArgumentType]
    ],
    ids=["ToolOutput", "Accept", "HookContext", "ToolExecutionResult", "ToolResultBlock"],
)
def test_a_str_content_is_refused_with_a_hint_to_wrap_it(build: Callable[[], object]) -> None:
    with pytest.raises(TypeError) as caught:
        build()

    assert _MESSAGE == str(caught.value)


def test_a_list_of_blocks_is_still_stored_as_a_tuple() -> None:
    output = ToolOutput(content=[TextBlock(text="hello")])

    assert (TextBlock(text="hello"),) == output.content
    assert Accept(content=None).content is None


async def test_a_body_returning_a_plain_str_still_gives_one_text_block() -> None:
    async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
        return "hello"

    registry = ToolRegistry()
    registry.register(define_tool(name="t", description="d", parameters={}, execute=body))

    result = await registry.execute(
        ToolExecutionInput(call_id="c", name="t", arguments={}, signal=CancelSignal.never())
    )

    assert (TextBlock(text="hello"),) == result.content
    assert not result.is_error


async def test_a_tool_output_built_with_blocks_reaches_the_model_whole() -> None:
    async def body(args: FrozenJsonObject, context: ToolRunContext) -> ToolOutput:
        await trio.lowlevel.checkpoint()
        return ToolOutput(content=[TextBlock(text="hello")], meta={"k": 1})

    registry = ToolRegistry()
    registry.register(define_tool(name="t", description="d", parameters={}, execute=body))

    result = await registry.execute(
        ToolExecutionInput(call_id="c", name="t", arguments={}, signal=CancelSignal.never())
    )

    assert (TextBlock(text="hello"),) == result.content


def test_block_feedback_refuses_a_str_naming_the_field() -> None:
    with pytest.raises(TypeError, match=r"^feedback must be a sequence of content blocks, not str"):
        Block(feedback="try again")  # type: ignore[arg-type]


def test_block_feedback_takes_any_sequence_of_blocks() -> None:
    assert (TextBlock(text="try again"),) == Block(feedback=[TextBlock(text="try again")]).feedback
