"""``dsh-tools demo --defer``: the batch suspends in one process and is resumed from its log
in another, with the decisions given on the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsh_tools import ApprovalDecidedEvent, BatchEndEvent, ToolResultEvent
from dsh_tools.cli.demo import open_file_log


def _demo(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_tools", "demo", "--defer", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", ["defer.jsonl", "defer.db"])
def test_the_batch_suspends_then_resumes_from_the_log_in_another_process(
    name: str, tmp_path: Path
) -> None:
    log = tmp_path / name

    first = _demo("--log", str(log))

    assert (first.returncode, first.stderr) == (0, "")
    assert "waiting for a decision (3 calls):" in first.stdout
    assert "    $ grep TODO" in first.stdout  # each pending call with its card
    assert "    +++ /workspace/src/app.py" in first.stdout
    assert f"--log {log} --approve e1 --reject e2 --always e3" in first.stdout

    second = _demo("--log", str(log), "--approve", "e1", "--reject", "e2", "--always", "e3")

    assert (second.returncode, second.stderr) == (0, "")
    assert "what the model receives:" in second.stdout
    assert 'e2   write_file   Error: the user rejected tool "write_file"' in second.stdout
    assert "e3   run_command  3 src/app.py" in second.stdout
    with open_file_log(log) as session:
        events = session.events()
    decided = [(e.outcome, e.answered_by) for e in events if isinstance(e, ApprovalDecidedEvent)]
    assert [
        ("allowed-once", "resume"),
        ("rejected", "resume"),
        ("allowed-session", "resume"),
    ] == decided
    assert ["suspended", "completed"] == [e.reason for e in events if isinstance(e, BatchEndEvent)]
    assert ["e1", "e2", "e3"] == [e.call_id for e in events if isinstance(e, ToolResultEvent)]


def test_decisions_for_calls_that_are_not_pending_are_an_error(tmp_path: Path) -> None:
    log = tmp_path / "defer.jsonl"
    assert 0 == _demo("--log", str(log)).returncode
    before = log.read_bytes()

    done = _demo("--log", str(log), "--approve", "x9")

    assert 2 == done.returncode
    assert before == log.read_bytes()  # not even a turn: the log is as it was
    assert "approvals name calls whose approval is not pending" in done.stderr
    assert "'x9'" in done.stderr

    # one call given two decisions: refused, nothing written, and the batch still decidable
    twice = _demo("--log", str(log), "--approve", "e1", "--reject", "e1")
    assert (2, before) == (twice.returncode, log.read_bytes())
    assert "'e1' is given two decisions (allowed-once and rejected)" in twice.stderr
    approved = _demo("--log", str(log), "--approve", "e1", "--approve", "e2", "--approve", "e3")
    assert 0 == approved.returncode


def test_defer_needs_a_log() -> None:
    done = _demo()

    assert (2, "") == (done.returncode, done.stdout)
    assert "--defer needs --log PATH" in done.stderr


def test_resuming_a_finished_batch_is_an_error_that_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "defer.db"
    assert 0 == _demo("--log", str(log)).returncode
    decided = _demo("--log", str(log), "--approve", "e1", "--approve", "e2", "--reject", "e3")
    assert 0 == decided.returncode
    with open_file_log(log) as session:
        before = session.events()

    again = _demo("--log", str(log), "--approve", "e3")

    assert 2 == again.returncode
    assert "the log has no suspended batch to resume" in again.stderr
    with open_file_log(log) as session:
        assert before == session.events()


def test_an_approved_call_runs_with_the_edited_arguments_given_on_the_command_line(
    tmp_path: Path,
) -> None:
    log = tmp_path / "defer.jsonl"
    assert 0 == _demo("--log", str(log)).returncode

    done = _demo(
        "--log",
        str(log),
        "--approve",
        "e1",
        "--arguments",
        'e1={"command": "ls"}',
        "--reject",
        "e2",
        "--reject",
        "e3",
    )

    assert (done.returncode, done.stderr) == (0, "")
    with open_file_log(log) as session:
        events = session.events()
    (result,) = [e for e in events if isinstance(e, ToolResultEvent) and e.call_id == "e1"]
    assert "src" in str(result.content)  # ls ran, not the model's grep
    assert "The user changed the arguments of run_command before it ran" in str(result.contexts)
    decided = [e for e in events if isinstance(e, ApprovalDecidedEvent)]
    assert {"command": "ls"} == decided[0].arguments


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--approve", "e1", "--arguments", "e1=[1]"], "must be a JSON object"),
        (["--approve", "e1", "--arguments", "e1={oops"], "is not JSON"),
        (["--reject", "e1", "--arguments", 'e1={"command": "ls"}'], "which is not approved"),
        (
            ["--approve", "e1", "--approve", "e2", "--arguments", '{"command": "ls"}'],
            "needs exactly one --approve",
        ),
    ],
)
def test_edited_arguments_that_cannot_apply_are_an_error_that_writes_nothing(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    log = tmp_path / "defer.jsonl"
    assert 0 == _demo("--log", str(log)).returncode
    before = log.read_bytes()
    done = _demo("--log", str(log), *argv)
    assert 2 == done.returncode
    assert message in done.stderr
    assert before == log.read_bytes()
