"""Hostile session logs through every reader and through ``dsh-tools replay``: text from a log
is shown, never interpreted (no markup, no terminal control sequence, no encoding error)."""

from __future__ import annotations

import io
import json
import re
import unicodedata
from pathlib import Path

import pytest
from rich.console import Console

from dsh_tools import JsonlSessionLog, read_session_log, session_event_from_json
from dsh_tools._values._printable import printable
from dsh_tools.cli.replay import main_replay
from hostile_logs import ESCAPES, HOSTILE_TEXTS, all_hostile_events, hostile_events, write_log
from test_cli_terminal import run_in_a_terminal, screen_of


@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS.keys())
def test_every_reader_reads_a_hostile_log_back_as_written(tmp_path: Path, text: str) -> None:
    events = hostile_events(text)
    path = write_log(tmp_path / "hostile.jsonl", events)

    assert events == read_session_log(path)
    with JsonlSessionLog(path) as reopened:
        assert events == reopened.events()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert events == [session_event_from_json(json.loads(line)) for line in lines]


def replay_bytes(path: Path, registry: str | None = None) -> tuple[int, bytes, list[str]]:
    """Replay into a strict UTF-8 byte stream (as a terminal's stdout encodes), no colour."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    console = Console(file=stream, width=200, color_system=None, force_terminal=False)
    errors: list[str] = []
    code = main_replay(path, registry=registry, console=console, err=errors.append)
    stream.flush()
    return code, raw.getvalue(), errors


@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS.keys())
def test_replay_shows_hostile_text_literally_and_no_control_character(
    tmp_path: Path, text: str
) -> None:
    path = write_log(tmp_path / "hostile.jsonl", hostile_events(text))

    code, output, errors = replay_bytes(path)

    assert (0, []) == (code, errors)
    shown = output.decode("utf-8")
    assert printable(text, multiline=False) in shown
    assert [] == [
        char for char in shown if char != "\n" and unicodedata.category(char) in ("Cc", "Cs")
    ]
    assert not any(escape in shown for escape in ESCAPES)


def test_replay_shows_markup_in_ids_names_and_results_as_written(tmp_path: Path) -> None:
    path = write_log(tmp_path / "markup.jsonl", hostile_events("[/bold]", tag="x"))

    _code, output, _errors = replay_bytes(path)

    shown = output.decode("utf-8")
    assert "x[/bold] other: [/bold]" in shown  # the call card's title: id, kind, tool name
    assert "x[/bold] [/bold]" in shown  # the result card's title: id, error code
    assert "? approval asked for [/bold] (x[/bold]): [/bold]" in shown
    assert "context from [/bold]: [/bold]" in shown


def test_replay_on_a_terminal_lets_no_escape_sequence_from_the_log_through(
    tmp_path: Path,
) -> None:
    path = write_log(tmp_path / "hostile.jsonl", all_hostile_events())

    output = run_in_a_terminal("replay", str(path))

    # every escape that reaches the terminal starts the view's own colouring (SGR)
    assert output.count(b"\x1b") == len(re.findall(rb"\x1b\[[0-9;]*m", output)) > 0
    assert b"\x1b]" not in output  # no operating system command (title, clipboard)
    assert b"\x1bP" not in output  # no device control string
    assert b"\xc2\x9b" not in output  # no one-byte CSI
    assert b"\x07" not in output
    screen = screen_of(output)
    assert "PWNED" not in screen.title
    shown = re.sub(rb"\x1b\[[0-9;]*m", b"", output).decode("utf-8")
    for text in HOSTILE_TEXTS.values():
        assert printable(text, multiline=False) in shown
