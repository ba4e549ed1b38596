"""Every ```python block of the "Asking the user" page (docs/asking-the-user.md) is a complete
program: each runs as ``__main__`` and prints exactly the ```text block that follows it.

A plain reader of fenced blocks, for this page only, until the docs' blocks are all run by one
doc-testing tool; the first example reads its answer (``y``) from standard input.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "asking-the-user.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# what each program reads from standard input, by its position on the page
STDIN = {0: "y\n"}


def _programs() -> list[tuple[str, str | None]]:
    """Each python block with the text block right after it (``None`` when there is none)."""
    blocks = [(m.group(1), m.group(2)) for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))]
    programs: list[tuple[str, str | None]] = []
    for index, (language, body) in enumerate(blocks):
        if language != "python":
            continue
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        programs.append((body, following[1] if following and following[0] == "text" else None))
    return programs


def test_the_page_has_its_three_programs_each_with_its_output() -> None:
    assert [True, True, True] == [expected is not None for _, expected in _programs()]


def test_the_first_example_wires_approval_in_at_most_five_lines() -> None:
    source, _ = _programs()[0]
    wiring = [
        line.strip()
        for line in source.splitlines()
        if re.search(
            r"UserApproval\(|answerers\.add|ToolRegistry\(|pre_execute\.add|SessionLog\(", line
        )
    ]
    assert len(wiring) <= 5, wiring


@pytest.mark.parametrize("index", range(3))
def test_each_program_prints_what_the_page_shows(
    index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, expected = _programs()[index]
    monkeypatch.setattr(sys, "stdin", io.StringIO(STDIN.get(index, "")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, f"{PAGE.name}[{index}]", "exec"), {"__name__": "__main__"})
    assert expected == out.getvalue()
