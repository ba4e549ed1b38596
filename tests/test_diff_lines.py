"""A call card's file diff as the lines a terminal shows (the console answerer and
``dsh-tools replay`` share them)."""

from __future__ import annotations

from dsh_tools import FileDiff
from dsh_tools._values._presentation import unified_diff_lines


def test_a_new_file_is_a_diff_from_dev_null() -> None:
    lines = unified_diff_lines(FileDiff(path="src/app.py", old_text=None, new_text="a\nb\n"))
    assert ["--- /dev/null", "+++ src/app.py", "@@ -0,0 +1,2 @@", "+a", "+b"] == lines


def test_a_last_line_without_its_newline_stays_a_line_of_its_own() -> None:
    lines = unified_diff_lines(FileDiff(path="f", old_text="keep\nold", new_text="keep\nnew\n"))
    assert ["--- f", "+++ f", "@@ -1,2 +1,2 @@", " keep", "-old", "+new"] == lines


def test_every_line_is_made_printable_and_tabs_stay() -> None:
    lines = unified_diff_lines(
        FileDiff(path="a\x1b[2Jb", old_text=None, new_text="\tindented \x1b]0;title\x07\n")
    )
    assert "\x1b" not in "".join(lines)
    assert "+\tindented " in lines[-1]
