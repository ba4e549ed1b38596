"""``printable``: text from a model, a tool, a server or a log is shown, never interpreted."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools._values._printable import printable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b]0;PWNED\x07", "\\x1b]0;PWNED\\x07"),  # retitles the terminal
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clears the screen
        ("\x1b]52;c;cHduZWQ=\x07", "\\x1b]52;c;cHduZWQ=\\x07"),  # writes the clipboard
        ("\x9b2J", "\\x9b2J"),  # the one-byte CSI
        ("rm -rf ~\rls", "rm -rf ~\\x0dls"),  # a carriage return hides what came before
        ("\x00\x08\x7f", "\\x00\\x08\\x7f"),
        ("abc\u202edef", "abc\\u202edef"),  # a bidirectional override reorders the line
        ("a\u2028b", "a\\u2028b"),
        ("lone \ud800 and \udcff", "lone \\ud800 and \\udcff"),
    ],
)
def test_every_character_a_terminal_acts_on_is_written_visibly(text: str, shown: str) -> None:
    assert shown == printable(text)


def test_newlines_and_tabs_stay_and_crlf_line_ends_become_newlines() -> None:
    assert "a\n\tb\nc\n" == printable("a\r\n\tb\nc\r\n")


def test_on_one_line_newlines_and_tabs_are_escaped_too() -> None:
    assert "a\\x0ab\\x09c\\x0d\\x0a" == printable("a\nb\tc\r\n", multiline=False)


def test_text_with_nothing_to_escape_is_returned_as_it_is() -> None:
    text = "plain [/bold] text, ünïcode and emoji 🎉\n"
    assert text is printable(text)


def test_markup_is_not_the_helpers_concern() -> None:
    assert "[red]x[/red]" == printable("[red]x[/red]")


@given(st.text())
def test_what_printable_returns_encodes_as_utf_8_and_holds_no_control_character(
    text: str,
) -> None:
    for multiline in (True, False):
        shown = printable(text, multiline=multiline)
        shown.encode("utf-8")
        allowed = "\n\t" if multiline else ""
        assert all(
            unicodedata.category(char) not in ("Cc", "Cs") or char in allowed for char in shown
        )
