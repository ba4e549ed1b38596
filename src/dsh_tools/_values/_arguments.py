"""Parsing a tool call's raw argument text: the one rule the scheduler and the presenter share.

The model sends a call's arguments as JSON text. ``""`` means ``{}`` (a call with no arguments);
text that is not JSON is passed on as the text itself, so the tool's own validation reports it
to the model (the original loop does the same with text ``JSON.parse`` rejects). JSON that parses
but would not cross the lossless boundary is passed on parsed, so the pipeline's boundary check
rejects it with its own error and logs why.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Final, cast

from dsh_tools._errors import JsonSnapshotError

from ._json import FrozenJsonObject, JsonValue, flat_object, snapshot_json

__all__ = ["parse_call_arguments"]

_EMPTY: Final = snapshot_json({})


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# one decoder for every call: ``json.loads`` with a keyword argument builds a new one each time
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
# its scanner: what ``decode`` runs between two whitespace regexes, for text without whitespace
# around the value (what models send); anything else goes through ``decode`` itself
# (typeshed types make_scanner's argument as a scanner; at run time it reads a decoder's settings)
_SCAN: Final = json.scanner.make_scanner(_DECODER)  # pyright: ignore[reportArgumentType]


def parse_call_arguments(text: str) -> JsonValue | object:
    """Parse a call's raw argument text the way the original agent loop does.

    Args:
        text: the arguments exactly as the model emitted them.

    Returns:
        ``{}`` (a frozen empty object) for ``""``; the parsed, deeply immutable value (objects
        as :class:`~dsh_tools.FrozenJsonObject`, arrays as ``tuple``) for lossless JSON text;
        the parsed *plain* value (``dict`` / ``list``, not frozen) for JSON text that would not
        survive the lossless boundary (an integer beyond ±(2**53 - 1), a number too large for
        a float, ``-0.0``, a lone surrogate in a string, nesting deeper than
        :data:`~dsh_tools.MAX_DEPTH`), so that the pipeline rejects it with
        ``Error: tool execution arguments must be losslessly JSON-serializable`` and logs the
        detail; otherwise ``text`` itself. "Otherwise" covers text that is not JSON, Python's
        JSON extensions (``NaN``, ``Infinity``), and nesting deeper than the parser allows.
        Never raises for any ``str``.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if type(text) is not str and not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"tool call arguments must be JSON text (str), not {type(text).__name__}")
    if text == "":
        return _EMPTY
    parsed: object
    try:
        parsed, end = _SCAN(text, 0)
        if end != len(text):
            raise ValueError("text after the value")  # whitespace, or not JSON: decode decides
    except (StopIteration, ValueError, RecursionError):
        try:
            parsed = _DECODER.decode(text)
        except (ValueError, RecursionError):
            return text
    if type(parsed) is dict:
        # snapshot_json's fast path for the common arguments, without its frame
        flat = flat_object(cast("dict[object, object]", parsed))
        if flat is not None:
            return flat
    parsed = cast(object, parsed)  # pyright narrowed it to a dict of unknowns above
    try:
        return snapshot_json(parsed)
    except JsonSnapshotError:
        return parsed


assert isinstance(_EMPTY, FrozenJsonObject)
