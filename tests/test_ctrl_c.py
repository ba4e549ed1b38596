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
    return press_ctrl_c_when(PROMPT, "-m", "dsh_tools", *argv)


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


# --- Ctrl-C in a user's own loop: while a body runs, while the log writes ---------------------

USER_LOOP = """
import sys, time
from pathlib import Path

import trio

from dsh_tools import CancelController, JsonlSessionLog, ToolCallRequest, ToolRegistry, run_tool_calls

where = sys.argv[2]
registry = ToolRegistry()


@registry.tool(idempotent=True, is_concurrency_safe=lambda args: True)
async def crunch(n: int) -> str:
    '''Crunch a number for a long time.'''
    if where == "body" and n == 1:
        print("BODY RUNNING", flush=True)
        await trio.sleep(3600)
    return f"crunched {n}"


class SlowLog(JsonlSessionLog):
    def _store(self, seq, line):
        super()._store(seq, line)
        if where == "write" and b'"tool/result"' in line:
            print("IN APPEND", flush=True)
            time.sleep(3600)  # a disk that stalls right after a result was written


async def main() -> None:
    calls = [
        ToolCallRequest(call_id=f"c{n}", name="crunch", arguments=f'{{"n": {n}}}')
        for n in (1, 2, 3)
    ]
    with SlowLog(Path(sys.argv[1])) as log:
        await run_tool_calls(registry, calls, signal=CancelController().signal, session=log)


trio.run(main)
"""


def press_ctrl_c_when(marker: bytes, *argv: str) -> tuple[int, bytes]:
    """Run a Python program on a pty and press Ctrl-C once it prints ``marker``."""
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(sys.executable, [sys.executable, *argv])
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
            except OSError:
                break
            if not chunk:
                break
            output += chunk
            if not pressed and marker in output:
                os.write(master, b"\x03")
                pressed = True
        else:
            os.kill(pid, 9)
            pytest.fail(f"the program did not end; it wrote: {bytes(output)!r}")
    finally:
        os.close(master)
    _, status = os.waitpid(pid, 0)
    assert pressed, f"the marker never came; the program wrote: {bytes(output)!r}"
    return os.waitstatus_to_exitcode(status), bytes(output)


@pytest.mark.parametrize(("where", "marker"), [("body", b"BODY RUNNING"), ("write", b"IN APPEND")])
def test_ctrl_c_in_a_body_or_a_log_write_leaves_a_log_a_resume_finishes(
    tmp_path: Path, where: str, marker: bytes
) -> None:
    import trio

    from dsh_tools import CancelSignal, ToolRegistry, resume_tool_calls

    program = tmp_path / "loop.py"
    program.write_text(USER_LOOP)
    log = tmp_path / "loop.jsonl"
    code, output = press_ctrl_c_when(marker, str(program), str(log), where)

    assert code in (130, -2), output  # KeyboardInterrupt: Python's own exit for SIGINT
    assert b"KeyboardInterrupt" in output
    assert b"Fatal Python error" not in output
    events = read_session_log(log)
    record = SessionReader(events).last_batch()
    assert record is not None
    # in a body: the batch ends "aborted", balanced; inside a log write the library cannot
    # know what was stored, so it writes no more: the batch stays open, as after a crash
    expected_end = "aborted" if where == "body" else None
    assert expected_end == (None if record.end is None else record.end.reason)

    registry = ToolRegistry()

    @registry.tool(idempotent=True, is_concurrency_safe=lambda args: True)
    async def crunch(n: int) -> str:
        """Crunch."""
        await trio.lowlevel.checkpoint()
        return f"crunched {n}"

    async def resume() -> None:
        with JsonlSessionLog(log) as session:
            # open (calls without a result): the resume runs them; closed: nothing to do
            batch = await resume_tool_calls(registry, session, signal=CancelSignal.never())
            assert (batch is not None) == record.is_open
            assert SessionReader(session.events()).open_batch() is None
            finished = SessionReader(session.events()).batch(record.start.batch_id)
            assert finished is not None
            results = [e for _, e in finished.events if isinstance(e, ToolResultEvent)]
            # one result per call, whatever the interrupt cut
            assert ["c1", "c2", "c3"] == sorted(event.call_id for event in results)
            if where == "body":  # the body the interrupt stopped: the model is told so
                (stopped,) = [e for e in results if e.call_id == "c1"]
                assert "tool call aborted" in str(stopped.content)

    trio.run(resume)


@pytest.mark.parametrize(
    "marker",
    [
        b"\x1b[?25l",  # as the view starts (it hid the cursor): rich's start is not safe there
        b"still writin",  # calls in flight, the model still streaming its message
    ],
)
def test_ctrl_c_in_the_live_view_restores_the_terminal_and_exits_130(
    tmp_path: Path, marker: bytes
) -> None:
    log = tmp_path / "live.jsonl"
    hide_cursor, show_cursor = b"\x1b[?25l", b"\x1b[?25h"
    code, output = press_ctrl_c_when(marker, "-m", "dsh_tools", "demo", "--log", str(log))

    assert 130 == code, output
    assert b"dsh-tools: interrupted" in output
    assert b"Traceback" not in output
    # the live view gave the cursor back after it hid it
    assert output.rindex(show_cursor) > output.index(hide_cursor)
    with JsonlSessionLog(log) as session:
        recover_session(session)  # whatever the interrupt left open is closed
        assert SessionReader(session.events()).open_batch() is None
