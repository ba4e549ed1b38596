"""The "Tracing" page's example runs and prints what the page shows."""

from __future__ import annotations

import pytest
import trio.testing

from support import load_example


def test_the_tracing_example_prints_one_span_per_call_under_the_batch_under_the_agent_turn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    trio.run(
        load_example("docs/tracing.md", "Tracing tool calls with OpenTelemetry: o").main,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    assert [
        "agent turn (parent: -) UNSET",
        "execute_tool fetch (parent: execute_tool_batch) ERROR error.type=_OTHER",
        "execute_tool lookup (parent: execute_tool_batch) UNSET",
        "execute_tool lookup (parent: execute_tool_batch) UNSET",
        "execute_tool_batch (parent: agent turn) UNSET",
    ] == capsys.readouterr().out.splitlines()
