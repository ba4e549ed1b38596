"""``dsh-tools demo`` in a real terminal: the command runs on a pseudo-terminal (the stdlib
``pty``) and its output is replayed through a VT100 emulator (``pyte``) to check what the
screen shows, colours included, and the frames drawn while the batch ran."""

from __future__ import annotations

import re
from pathlib import Path

import pyte

from support import run_in_a_terminal as run_on_a_pty

COLUMNS, LINES = 110, 70
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def run_in_a_terminal(*argv: str) -> bytes:
    """Run ``dsh-tools argv`` on this file's pseudo-terminal and return all it wrote."""
    return run_on_a_pty(*argv, columns=COLUMNS, lines=LINES)


def screen_of(output: bytes) -> pyte.Screen:
    screen = pyte.Screen(COLUMNS, LINES)
    stream = pyte.ByteStream(screen)
    stream.feed(output)  # the terminal turned every "\n" into "\r\n" already
    return screen


def line_with(screen: pyte.Screen, text: str) -> int:
    for number, line in enumerate(screen.display):
        if text in line:
            return number
    raise AssertionError(f"{text!r} is not on the screen:\n" + "\n".join(screen.display))


def colour_of(screen: pyte.Screen, line: int, text: str) -> str:
    column = screen.display[line].index(text)
    return screen.buffer[line][column].fg


def test_the_live_demo_draws_the_batches_in_colour_on_a_terminal(tmp_path: Path) -> None:
    log = tmp_path / "demo.jsonl"
    output = run_in_a_terminal("demo", "--log", str(log))
    screen = screen_of(output)

    # the final frame: both batches, each with a full progress count
    batch_1 = line_with(screen, "batch 1: each call starts while the model still writes")
    batch_2 = line_with(screen, "batch 2: the user presses Esc at 1s")
    assert batch_1 < batch_2
    assert "8/8 results" in screen.display[batch_1 + 1]
    assert "4/4 results" in screen.display[batch_2 + 1]
    # the barrier and the pool are labelled, outcomes are coloured
    c5 = line_with(screen, "c5    write_file  barrier")
    assert "green" == colour_of(screen, c5, "ok")
    c4 = line_with(screen, "c4    fetch_url   pool")
    assert "magenta" == colour_of(screen, c4, "timed out")
    d2 = line_with(screen, "d2    read_file   pool")
    assert "red" == colour_of(screen, d2, "aborted")
    d3 = line_with(screen, "d3    write_file  barrier")
    assert "red" == colour_of(screen, d3, "not started")
    line_with(screen, "Esc the user interrupted the turn")
    # then what the model receives, and the log
    line_with(screen, "d4   ABORTED_BEFORE_DISPATCH  Error: tool call aborted before dispatch")
    line_with(screen, f"session log (46 events): {log}")  # 8 batch/call: batch 1 streamed

    # frames drawn while the batch ran: calls running, the pool holding bodies in flight
    plain = ANSI.sub(b"", output).decode()
    assert "running" in plain
    assert re.search(r"pool [■□ ]+ [123]/3 in flight", plain)
    assert 46 == len(log.read_text().splitlines())
