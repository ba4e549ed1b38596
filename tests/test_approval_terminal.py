"""``console_answerer`` on a real terminal: ``dsh-tools demo --ask`` runs on a pseudo-terminal
(the stdlib ``pty``), a person answers each prompt as it appears, and the screen is replayed
through a VT100 emulator (``pyte``): each question shows the call it approves."""

from __future__ import annotations

import json
from pathlib import Path

import pyte

from support import run_in_a_terminal

COLUMNS, LINES = 110, 200
PROMPT = b"[y/N/a/e] "


def test_each_question_shows_the_call_and_always_grants_the_tool(tmp_path: Path) -> None:
    log = tmp_path / "ask.jsonl"
    # NOTES.md: yes; /etc/passwd: no; the first command: always (so the second is not asked);
    # src/app.py: yes
    output = run_in_a_terminal(
        "demo",
        "--ask",
        "--log",
        str(log),
        columns=COLUMNS,
        lines=LINES,
        answers=["y", "n", "a", "y"],
        prompt=PROMPT,
    )

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
    assert lines[notes + 4].startswith(
        'Allow tool "write_file" (changes the workspace)? [y/N/a/e] y'
    )
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
