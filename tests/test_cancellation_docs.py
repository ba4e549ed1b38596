"""The "Cancellation and timeouts" page's example runs and prints what the page shows."""

from __future__ import annotations

import pytest
import trio.testing

from support import load_example


async def test_the_cancellation_example_prints_each_outcome_on_virtual_time(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    await load_example("docs/cancellation.md", "Cancellation through a signal, a timeout").main()

    expected = [
        "in time: fetched [-] at t=1",
        "too slow: Error: tool call timed out after 2000ms [TOOL_TIMEOUT] at t=3",
        "cancelled: Error: tool call aborted [ABORTED] at t=3.5",
        "never started: Error: tool call aborted before dispatch [ABORTED_BEFORE_DISPATCH] at t=3.5",
        "caller scope cancelled: True",
    ]
    assert expected == capsys.readouterr().out.splitlines()
