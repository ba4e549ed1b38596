"""The "Sync tool bodies" and "Injecting context" examples print exactly what the pages show."""

from __future__ import annotations

import pytest

from support import load_example


async def test_the_sync_body_example_runs_in_a_thread_and_validates_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/pipeline.md", "A plain ``def`` tool body: it runs in a").main()

    expected = [
        "2cf24dba5fb0 (on the trio thread: False)",
        'Error: invalid arguments: "text" must be a string',
    ]
    assert expected == capsys.readouterr().out.splitlines()


async def test_the_inject_context_example_puts_the_context_after_the_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/pipeline.md", "A tool body that injects a context messa").main()

    expected = [
        "ticket 7 opened",
        "Ticket 7 is assigned to you now.",
        "['BatchStartEvent', 'ToolCallEvent', 'ToolResultEvent', 'ContextMessageEvent', "
        "'BatchEndEvent']",
    ]
    assert expected == capsys.readouterr().out.splitlines()
