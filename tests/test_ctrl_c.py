"""Ctrl-C at the approval prompt of ``dsh-tools demo --ask``, on a real pseudo-terminal that is
the command's controlling terminal (so ``^C`` is the terminal's SIGINT, as a person sends it):
one line on stderr, exit status 130, never an interpreter abort, and a log whose batch a resume
or ``recover_session`` can finish.
"""

from __future__ import annotations

import io
import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest

from dsh_tools import JsonlSessionLog, ToolResultEvent, read_session_log, recover_session
from dsh_tools._sessions._reader import SessionReader

PROMPT = b"[y/N/a/e]"


def press_ctrl_c_at_the_prompt(*argv: str) -> tuple[int, bytes]:
    """Run ``dsh-tools argv`` on a pty, press Ctrl-C at the first approval prompt; its exit
    status and all it wrote."""
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(sys.executable, [sys.executable, "-m", "dsh_tools", *argv])
    output = bytearray()
    pressed = False
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if not pressed and PROMPT in output:
                os.write(master, b"\x03")
                pressed = True
        else:
            os.kill(pid, 9)
            pytest.fail(f"the command did not end; it wrote: {bytes(output)!r}")
    finally:
        os.close(master)
    _, status = os.waitpid(pid, 0)
    assert pressed, f"no prompt came; the command wrote: {bytes(output)!r}"
    return os.waitstatus_to_exitcode(status), bytes(output)


def test_ctrl_c_at_the_prompt_ends_cleanly_with_130_and_a_log_that_can_be_finished(
    tmp_path: Path,
) -> None:
    log = tmp_path / "demo.jsonl"
    code, output = press_ctrl_c_at_the_prompt("demo", "--ask", "--log", str(log))

    assert 130 == code, output
    assert b"dsh-tools: interrupted" in output
    assert b"Traceback" not in output
    assert b"Fatal Python error" not in output
    # the interrupted batch ended balanced ("aborted"); recover_session closes what is left
    events = read_session_log(log)
    record = SessionReader(events).last_batch()
    assert record is not None
    assert record.end is not None
    assert "aborted" == record.end.reason
    with JsonlSessionLog(log) as session:
        recover_session(session)
        after = SessionReader(session.events()).batch(record.start.batch_id)
        assert after is not None
        answered = {
            event.call_id for _, event in after.events if isinstance(event, ToolResultEvent)
        }
        assert {call.call_id for call in after.calls} <= answered
        assert SessionReader(session.events()).open_batch() is None


def test_the_console_reader_reads_the_descriptor_and_a_replaced_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_tools._policies._console_answerer import read_terminal_line

    read_end, write_end = os.pipe()
    os.write(write_end, "y\u00e9s\r\nrest".encode())
    os.close(write_end)
    with os.fdopen(read_end, "r", encoding="utf-8") as pipe:
        monkeypatch.setattr(sys, "stdin", pipe)
        assert "y\u00e9s" == read_terminal_line("Allow? ")
        assert "rest" == read_terminal_line("Again? ")  # the last line, without a newline
        with pytest.raises(EOFError):
            read_terminal_line("More? ")
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\n"))
    assert "a" == read_terminal_line("Typed? ")
    with pytest.raises(EOFError):
        read_terminal_line("Done? ")
    assert "Allow? Again? More? Typed? Done? " == capsys.readouterr().out
