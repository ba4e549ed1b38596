r"""Text from a model, a tool, an MCP server or a session log, made safe to show on a terminal.

Such text is shown, never interpreted. A terminal interprets control characters: ``ESC ]0;``
retitles the window, ``ESC [2J`` clears the screen, ``ESC ]52;`` writes the user's clipboard,
a carriage return overwrites what the line showed, a bidirectional override reorders it. So
everything the library prints from those sources goes through :func:`printable` first, which
writes each such character as a visible escape (``\x1b``, ``\x0d``, ``\u202e``). Lone
surrogates (which no terminal encoding can carry) are written the same way, so printing never
fails with an encoding error.

Markup is the printer's concern: the ``rich`` views build ``Text`` objects from this text and
never pass it where ``rich`` parses markup, so ``[/bold]`` in a tool's output prints as itself.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["printable"]

# C0 controls but tab and newline, DEL, C1 controls (U+009B is a CSI to many terminals),
# bidirectional marks, embeddings, overrides and isolates, the Unicode line and paragraph
# separators, and surrogates (in a str, any surrogate is a lone one: UTF-8 cannot encode it)
_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
# the same, with tab and newline too: for text shown on one line
_UNSAFE_ON_ONE_LINE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, multiline: bool = True) -> str:
    r"""``text`` with every character a terminal would act on written as a visible escape.

    Args:
        text: text from a model, a tool, a server or a log.
        multiline: keep newlines and tabs as they are (a ``"\r\n"`` line end becomes
            ``"\n"``); with ``False`` they are escaped too, for text shown on one line (a
            call id, a tool name, a title).

    Returns:
        ``text`` itself when nothing needed escaping, else the escaped copy.
    """
    if multiline:
        if _UNSAFE.search(text) is None:
            return text
        return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))
    if _UNSAFE_ON_ONE_LINE.search(text) is None:
        return text
    return _UNSAFE_ON_ONE_LINE.sub(_visible, text)
