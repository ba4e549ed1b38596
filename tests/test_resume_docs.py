"""The "Surviving a crash" page's example kills a real process and prints what the page shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_tools import SqliteSessionLog, ToolResultEvent
from support import load_example


def test_the_crash_example_kills_the_agent_and_resumes_its_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example("docs/surviving-a-crash.md", "A batch killed mid-run with SIGKILL, the")
    log_path = tmp_path / "agent.sqlite"

    example.main(log_path)

    expected = [
        "agent killed after: started c1, started c2",
        "started c1",
        "started c3",
        "c1: fetched https://example.com (attempt 2)",
        "c2: Error: tool call interrupted: the process stopped while it ran; its effects are "
        "unknown",
        "c3: wrote notes.txt",
    ]
    assert expected == capsys.readouterr().out.splitlines()
    events = SqliteSessionLog.read(log_path)
    assert ["c1", "c2", "c3"] == [e.call_id for e in events if isinstance(e, ToolResultEvent)]
    assert "completed" == getattr(events[-1], "reason", None)
