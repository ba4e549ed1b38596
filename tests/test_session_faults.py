"""A JSON Lines session log under real write faults: an append that fails halfway must not
leave a partial line that later appends build on (which would make every reader fail there).

The fault is real: a child process lowers its ``RLIMIT_FSIZE`` just above the log's size and
ignores ``SIGXFSZ``, so the kernel writes what fits and then fails the write with ``EFBIG``.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from rich.console import Console

from dsh_tools import (
    JsonlSessionLog,
    SessionLogCorruptError,
    TextBlock,
    ToolCallEvent,
    ToolResultEvent,
    read_session_log,
)
from dsh_tools.cli.replay import main_replay

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="RLIMIT_FSIZE and flock are POSIX-only"
)

FIRST = ToolCallEvent(turn=0, step=0, call_id="c1", name="echo", arguments='{"a":1}')
LARGE = ToolResultEvent(
    turn=0, step=0, call_id="c1", content=[TextBlock(text="x" * 20_000)], is_error=False
)
SMALL = ToolResultEvent(
    turn=0, step=0, call_id="c1", content=[TextBlock(text="ok")], is_error=False
)

_CHILD = """
import json, resource, signal, sys
from dsh_tools import JsonlSessionLog, TextBlock, ToolCallEvent, ToolResultEvent

path, then = sys.argv[1], sys.argv[2]
first = ToolCallEvent(turn=0, step=0, call_id="c1", name="echo", arguments='{"a":1}')
large = ToolResultEvent(
    turn=0, step=0, call_id="c1", content=[TextBlock(text="x" * 20_000)], is_error=False
)
small = ToolResultEvent(turn=0, step=0, call_id="c1", content=[TextBlock(text="ok")], is_error=False)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of a kill
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
report = {}
with JsonlSessionLog(path) as log:
    report["first"] = log.append(first)
    size = log.path.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 300, hard))  # room for small, not large
    try:
        log.append(large)
    except OSError as exc:
        report["error"] = [exc.errno, str(exc)]
    report["size_after_failure"] = log.path.stat().st_size - size
    if then == "raise":
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    report["small"] = log.append(small)
print(json.dumps(report))
"""


def _run_child(path: Path, then: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), then],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize("then", ["raise", "keep"])
def test_an_append_that_fails_halfway_leaves_no_partial_line_behind(
    tmp_path: Path, then: str
) -> None:
    path = tmp_path / "log.jsonl"
    report = _run_child(path, then)
    assert [FIRST, SMALL] == read_session_log(path)
    assert (0, 0, 1) == (report["first"], report["size_after_failure"], report["small"])


def test_the_error_of_a_failed_append_says_the_log_was_cut_back(tmp_path: Path) -> None:
    report = _run_child(tmp_path / "log.jsonl", "raise")
    code, message = cast("list[object]", report["error"])
    assert errno.EFBIG == code
    assert str(message).endswith(
        "the event was not appended: the log was cut back to its last complete event "
        "and accepts appends"
    )


class _FailingFile:
    """Stands in for the writer's file: every write writes half and then fails (ENOSPC)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def write(self, data: memoryview) -> int:
        self.calls += 1
        if self.calls == 1:
            return self.inner.write(data[: len(data) // 2])  # type: ignore[attr-defined, no-any-return]
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_log_that_cannot_cut_back_refuses_appends_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    log = JsonlSessionLog(path)
    log.append(FIRST)
    failing = _FailingFile(log._file)  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(log, "_file", failing)

    def no_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError, match=r"refuses appends until it is reopened$") as caught:
        log.append(LARGE)
    assert errno.ENOSPC == caught.value.errno
    monkeypatch.undo()
    with pytest.raises(ValueError, match="reopen the log"):
        log.append(SMALL)
    assert [FIRST] == log.events()  # the partial line reads as a torn tail
    log.close()
    with JsonlSessionLog(path) as reopened:  # reopening cuts the partial line
        assert 1 == reopened.append(SMALL)
    assert [FIRST, SMALL] == read_session_log(path)


# --- hostile lines: whatever a log file holds, readers fail with the documented error -------

_CALL_LINE = (
    b'{"type":"tool/call","turn":0,"step":0,"callId":"c1","name":"echo","arguments":"{\\"a\\":1}"}'
)
_DEEP = b"[" * 100_000 + b"]" * 100_000
_HUGE_NUMBER = b'{"type":"turn/start","turn":' + b"7" * 5_000 + b"}"
_HOSTILE = {"deep": _DEEP, "huge-number": _HUGE_NUMBER}
_REASON = {
    "deep": "not JSON (nested too deeply)",
    "huge-number": f"not JSON (a number longer than {sys.get_int_max_str_digits()} digits)",
}


def _read_with_every_reader(path: Path) -> list[object]:
    """What each reader makes of ``path``: its events, or the exception it raised."""
    outcomes: list[object] = []
    try:
        outcomes.append(read_session_log(path))
    except Exception as exc:
        outcomes.append(exc)
    try:
        with JsonlSessionLog(path) as log:
            outcomes.append(log.events())
    except Exception as exc:
        outcomes.append(exc)
    return outcomes


@pytest.mark.parametrize("kind", sorted(_HOSTILE))
def test_a_hostile_line_in_the_middle_is_corruption_naming_its_line(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(_CALL_LINE + b"\n" + _HOSTILE[kind] + b"\n" + _CALL_LINE + b"\n")
    for outcome in _read_with_every_reader(path):
        assert isinstance(outcome, SessionLogCorruptError), outcome
        assert (str(path), 2, f"{path}, line 2: {_REASON[kind]}") == (
            outcome.path,
            outcome.line,
            str(outcome),
        )


@pytest.mark.parametrize("kind", sorted(_HOSTILE))
def test_a_hostile_torn_tail_is_skipped_by_readers_and_cut_by_the_writer(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(_CALL_LINE + b"\n" + _HOSTILE[kind])
    assert [FIRST] == read_session_log(path)
    with JsonlSessionLog(path) as log:
        assert 1 == log.append(SMALL)
    assert [FIRST, SMALL] == read_session_log(path)


def test_a_deep_line_in_the_middle_is_reported_by_replay_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(_CALL_LINE + b"\n" + _DEEP + b"\n" + _CALL_LINE + b"\n")
    errors: list[str] = []
    code = main_replay(path, console=Console(record=True), err=errors.append)
    assert (1, [f"dsh-tools replay: {path}, line 2: not JSON (nested too deeply)"]) == (
        code,
        errors,
    )


def test_an_append_whose_fsync_fails_is_cut_back_and_the_log_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path, fsync=True) as log:
        log.append(FIRST)

        def failing_fsync(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        with monkeypatch.context() as patch:
            patch.setattr(os, "fsync", failing_fsync)
            with pytest.raises(OSError, match="cut back to its last complete event") as caught:
                log.append(LARGE)
        assert errno.EIO == caught.value.errno
        assert 1 == log.append(SMALL)
    assert [FIRST, SMALL] == read_session_log(path)
