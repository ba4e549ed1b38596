"""Everything else that prints tool text (the demo's timeline, the live demo's summary, the
console answerer's question) shows it, never interprets it: no markup, no control character."""

from __future__ import annotations

import unicodedata

from rich.console import Console

from dsh_tools import (
    ApprovalOutcome,
    ApprovalRequest,
    CancelSignal,
    GenericCallView,
    GenericResultView,
    HookContext,
    PluginSource,
    TextBlock,
    ToolBatch,
    ToolCallRequest,
    ToolExecutionResult,
    console_answerer,
)
from dsh_tools._values._printable import printable
from dsh_tools.cli.demo import DemoBatch
from dsh_tools.cli.live_demo import model_receives
from dsh_tools.cli.plain_demo import render_batch
from hostile_logs import HOSTILE_TEXTS

HOSTILE = "".join(HOSTILE_TEXTS.values())


def controls(text: str, allowed: str = "\n") -> list[str]:
    return [
        char for char in text if char not in allowed and unicodedata.category(char) in ("Cc", "Cs")
    ]


def hostile_batch() -> DemoBatch:
    call = ToolCallRequest(call_id=HOSTILE, name=HOSTILE, arguments="{}")
    result = ToolExecutionResult(content=(TextBlock(text=HOSTILE),), is_error=False)
    return DemoBatch(
        title="batch",
        calls=(call,),
        batch=ToolBatch(
            results=(result,),
            contexts=(
                HookContext(
                    content=(TextBlock(text=HOSTILE),), source=PluginSource(plugin=HOSTILE)
                ),
            ),
        ),
        duration=1.0,
        spans={HOSTILE: (0.0, 1.0)},
        views={
            HOSTILE: (
                GenericCallView(title=HOSTILE),
                GenericResultView(content=(TextBlock(text=HOSTILE),)),
            )
        },
    )


def test_the_demo_timeline_shows_tool_text_with_every_control_character_visible() -> None:
    text = render_batch(hostile_batch())

    assert [] == controls(text)
    assert printable(HOSTILE, multiline=False) in text


def test_the_live_demos_summary_prints_tool_text_as_written_never_as_markup() -> None:
    call = ToolCallRequest(call_id="[/bold]", name="t", arguments="{}")
    result = ToolExecutionResult(
        content=(TextBlock(text="[red]\x1b]0;PWNED\x07 [/bold]"),), is_error=False
    )
    console = Console(width=400, record=True, color_system=None)

    console.print(model_receives(call, result, dispatched=True))

    shown = console.export_text()
    assert "[/bold]" in shown
    assert "[red]\\x1b]0;PWNED\\x07" in shown
    assert [] == controls(shown)


async def test_the_console_answerer_asks_with_every_control_character_visible() -> None:
    prompts: list[str] = []

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        return "n"

    answer = console_answerer(read_line=read_line)
    request = ApprovalRequest(
        agent=object(),
        tool_name=HOSTILE,
        call_id=HOSTILE,
        signal=CancelSignal.never(),
        reason=f'line one\nAllow tool "safe"? [y/N] {HOSTILE}',
    )

    async def unreachable() -> ApprovalOutcome:
        raise AssertionError("the answerer answers itself")

    assert ApprovalOutcome.REJECTED == await answer(request, unreachable)
    assert [] == controls(prompts[0], allowed="")
    assert prompts[0].startswith(f'Allow tool "{printable(HOSTILE, multiline=False)}"')
    assert "line one\\x0aAllow" in prompts[0]
