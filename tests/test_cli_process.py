"""The ``dsh-tools`` process itself: ``--version``, and a closed stdout pipe (``| head``) that
ends a command quietly, checked on a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import dsh_tools


def _command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "dsh_tools", *argv]


def test_version_prints_the_distribution_version() -> None:
    done = subprocess.run(
        _command("--version"), capture_output=True, text=True, timeout=60, check=False
    )

    assert (0, f"dsh-tools {dsh_tools.__version__}\n", "") == (
        done.returncode,
        done.stdout,
        done.stderr,
    )


def _with_stdout_closed(*argv: str) -> tuple[str, int]:
    """Run ``dsh-tools argv`` with its stdout pipe closed by the reader at once, as
    ``| head -0`` does (every write fails with EPIPE); its stderr and exit status."""
    with subprocess.Popen(
        _command(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        stderr = process.stderr.read()
        return stderr, process.wait(timeout=120)


@pytest.mark.parametrize("view", ["--plain", "--live"])
def test_a_closed_pipe_ends_the_demo_quietly_with_status_1(view: str, tmp_path: Path) -> None:
    plain = () if view == "--live" else ("--plain",)
    assert ("", 1) == _with_stdout_closed("demo", *plain, "--log", str(tmp_path / "d.jsonl"))


@pytest.mark.parametrize("argv", [("--help",), ("demo", "--help")], ids=["help", "demo-help"])
def test_a_closed_pipe_ends_help_quietly(argv: tuple[str, ...]) -> None:
    # argparse drops a failed help write itself and exits 0
    assert ("", 0) == _with_stdout_closed(*argv)


def test_replay_imports_the_registry_module_from_the_current_folder(tmp_path: Path) -> None:
    # the installed console script, as a user runs it (its sys.path[0] is its own folder)
    script = Path(sys.executable).parent / "dsh-tools"
    assert script.exists(), "dsh-tools is installed beside this Python"
    (tmp_path / "mytools.py").write_text(
        "from dsh_tools import ToolRegistry\n\ndef registry():\n    return ToolRegistry()\n",
        encoding="utf-8",
    )
    log = tmp_path / "session.jsonl"
    with dsh_tools.JsonlSessionLog(log) as session:
        session.append(dsh_tools.TurnStartEvent(turn=1))
    assert str(tmp_path) not in os.environ.get("PYTHONPATH", "")
    done = subprocess.run(
        [str(script), "replay", "--registry", "mytools:registry", str(log)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (0, "") == (done.returncode, done.stderr), done.stderr
