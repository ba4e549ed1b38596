"""The scripted demo (``dsh-tools demo``): its timeline, its outcomes, its session log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from dsh_tools import (
    JsonlSessionLog,
    MemorySessionLog,
    ToolCallEvent,
    ToolResultEvent,
)
from dsh_tools.__main__ import main
from dsh_tools._demo import DemoBatch, outcome, run_demo


def run_on_virtual_time() -> tuple[list[DemoBatch], MemorySessionLog]:
    session = MemorySessionLog()
    batches = trio.run(run_demo, session, clock=trio.testing.MockClock(autojump_threshold=0))
    return batches, session


def outcomes(demo: DemoBatch) -> list[str]:
    return [
        outcome(result, call.call_id in demo.spans)
        for call, result in zip(demo.calls, demo.batch.results, strict=True)
    ]


def test_batch_1_shows_a_pool_a_barrier_a_timeout_invalid_arguments_and_a_denial() -> None:
    batches, _session = run_on_virtual_time()
    expected = ["ok", "ok", "ok", "TOOL_TIMEOUT", "ok", "ok", "INVALID_ARGS", "denied"]
    assert expected == outcomes(batches[0])


def test_batch_1_timeline_rolls_the_pool_and_runs_the_write_alone() -> None:
    batches, _session = run_on_virtual_time()
    expected = {
        "c1": (0.0, 0.4),
        "c2": (0.0, 0.8),
        "c3": (0.0, 0.6),
        "c4": (0.4, 1.4),  # takes c1's slot; times out after 1 s
        "c5": (1.4, 1.7),  # the exclusive write waits for the pool to drain
        "c6": (1.7, 1.9),
        "c7": (1.9, 1.9),  # invalid arguments: exclusive, fails at once
    }
    spans = {k: (round(a, 6), round(b, 6)) for k, (a, b) in batches[0].spans.items()}
    assert expected == spans


def test_batch_2_is_interrupted_by_the_user() -> None:
    batches, _session = run_on_virtual_time()
    expected = ["ok", "ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert expected == outcomes(batches[1])
    assert pytest.approx(1.0) == batches[1].duration


def test_the_write_defers_a_context_that_follows_the_results() -> None:
    batches, session = run_on_virtual_time()
    assert len(batches[0].batch.contexts) == 1
    assert (
        type(session.events()[16]).__name__.replace("ContextMessageEvent", "context/message")
        == "context/message"
    )


def test_the_session_log_balances_every_call_with_one_result() -> None:
    _batches, session = run_on_virtual_time()
    events = session.events()
    calls = [e.call_id for e in events if isinstance(e, ToolCallEvent)]
    results = [e.call_id for e in events if isinstance(e, ToolResultEvent)]
    expected = ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "d1", "d2", "d3", "d4"]
    assert expected == calls
    assert expected == results
    assert len(events) == 25


def test_main_prints_the_timeline_and_the_log_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "demo.jsonl"
    assert main(["demo", "--plain", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"session log (25 events): {log}" in out
    assert "  c4   fetch_url  |        ====================           | 0.40s - 1.40s" in out
    assert 'c7   INVALID_ARGS             Error: invalid arguments: "path" must be a string' in out


def test_the_demo_runs_as_a_command_and_names_every_outcome(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "dsh_tools", "demo", "--plain", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    for label in (
        " ok ",
        "TOOL_TIMEOUT",
        "INVALID_ARGS",
        "denied",
        " ABORTED ",
        "ABORTED_BEFORE_DISPATCH",
        "Error: tool call timed out after 1000ms",
        "Error: write_file may only write inside the workspace, not /etc/passwd",
        "Error: tool call aborted before dispatch",
    ):
        assert label in done.stdout
    assert len(JsonlSessionLog(log).events()) == 25


def test_the_command_line_requires_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err
