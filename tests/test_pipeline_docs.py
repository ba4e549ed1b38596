"""The "Execution pipeline" page's example runs and prints exactly what the page shows."""

from __future__ import annotations

import pytest

from support import load_example


async def test_the_policy_example_prints_each_call_outcome(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/pipeline.md", "Policy around tool calls: ask before wri").main()

    expected = [
        "c1 read_file: [redacted]",
        "approval asked for write_file: writes to disk",
        "c2 write_file: wrote todo.txt",
        "approval asked for write_file: writes to disk",
        'c3 write_file: Error: the user rejected tool "write_file"',
        "c4 read_file: Error: absolute paths are outside the workspace",
        'c5 delete_file: Error: unknown tool "delete_file"',
    ]
    assert expected == capsys.readouterr().out.splitlines()
