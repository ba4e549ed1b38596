"""``console_answerer`` on a real terminal: ``dsh-tools demo --ask`` runs on a pseudo-terminal
(the stdlib ``pty``), a person answers each prompt as it appears, and the screen is replayed
through a VT100 emulator (``pyte``): each question shows the call it approves."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte

COLUMNS, LINES = 110, 200
PROMPT = b"[y/N/a] "


def answer_in_a_terminal(argv: list[str], answers: list[str], timeout: float = 120) -> bytes:
    """Run ``dsh-tools argv`` on a pseudo-terminal; type the next answer at each prompt."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TERM")
    }
    env["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_tools", *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    output = bytearray()
    remaining = list(answers)
    answered = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            while output.count(PROMPT) > answered and remaining:
                os.write(master, remaining.pop(0).encode() + b"\n")
                answered += 1
    finally:
        os.close(master)
        process.wait(timeout=30)
    assert 0 == process.returncode, output.decode(errors="replace")
    return bytes(output)


def test_each_question_shows_the_call_and_always_grants_the_tool(tmp_path: Path) -> None:
    log = tmp_path / "ask.jsonl"
    # NOTES.md: yes; /etc/passwd: no; the first command: always (so the second is not asked);
    # src/app.py: yes
    output = answer_in_a_terminal(["demo", "--ask", "--log", str(log)], ["y", "n", "a", "y"])

    screen = pyte.Screen(COLUMNS, LINES)
    pyte.ByteStream(screen).feed(output)
    lines = [line.rstrip() for line in screen.display]
    text = "\n".join(lines)
    assert 4 == output.count(PROMPT)
    # the write's card is its diff, shown before its question; the command's is the command
    notes = lines.index("--- /dev/null")
    assert ["Write NOTES.md", "--- /dev/null", "+++ /workspace/NOTES.md"] == lines[
        notes - 1 : notes + 2
    ]
    assert "+TODO: error handling in src/app.py" in lines[notes + 3]
    assert lines[notes + 4].startswith('Allow tool "write_file" (changes the workspace)? [y/N/a] y')
    assert "$ grep TODO" in text
    assert 'c8   denied                   Error: the user rejected tool "write_file"' in text
    assert "e3   ok" in text  # granted for the session: not asked again
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    decided = [
        (event["outcome"], event.get("answeredBy"))
        for event in events
        if event["type"] == "approval/decided"
    ]
    expected = [
        ("allowed-once", None),
        ("rejected", None),
        ("allowed-session", None),
        ("allowed-once", None),
        ("allowed-session", "grant"),
    ]
    assert expected == decided
