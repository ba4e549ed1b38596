"""The rules of the numbers a caller hands the package: a duration in seconds, and a count.

Each rule has one function here, so every setting that follows it (a tool's ``timeout``, the
registry's ``default_timeout`` and ``progress_interval``, a retry backoff, a Temporal timeout; a
thread limit, ``max_parallel_tool_calls``, a capacity limit, a turn, a step, an attempt) is
refused with the same exception and the same words: ``TypeError`` for a value of the wrong type
(``bool`` is never a number), ``ValueError`` for one out of range, and a message that states
the rule.
"""

from __future__ import annotations

import math

from dsh_tools._texts import format_js_number

__all__ = ["check_int", "check_seconds", "shown_value"]


def check_seconds(label: str, value: object, *, zero: bool = False) -> float:
    """``value`` as a ``float``, if it is a finite number of seconds above zero (a timeout) or,
    with ``zero``, at least zero (an interval, a delay).

    Raises:
        TypeError: ``value`` is not an ``int`` or a ``float`` (``bool`` is not a number):
            ``<label> must be a positive finite number of seconds (got <value>)``.
        ValueError: it is not finite, or not above zero (below zero with ``zero``): the same
            text (``<label> must be a finite number of seconds >= 0 (got <value>)`` with
            ``zero``).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(_seconds_rule(label, value, zero))
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise ValueError(_seconds_rule(label, value, zero))
    return float(value)


def _seconds_rule(label: str, value: object, zero: bool) -> str:
    rule = "a finite number of seconds >= 0" if zero else "a positive finite number of seconds"
    return f"{label} must be {rule} (got {shown_value(value)})"


def check_int(label: str, value: object, *, least: int = 1) -> int:
    """``value``, if it is an ``int`` (``bool`` is not one) of at least ``least``: a count
    (``least=1``, the default) or an index (``least=0``).

    Raises:
        TypeError: ``value`` is not an ``int``: ``<label> must be a positive int, not <value>``
            (``a non-negative int`` with ``least=0``, ``an int >= <least>`` otherwise).
        ValueError: it is below ``least``: the same text.
    """
    if type(value) is not int:
        raise TypeError(_int_rule(label, value, least))
    if value < least:
        raise ValueError(_int_rule(label, value, least))
    return value


def _int_rule(label: str, value: object, least: int) -> str:
    if least == 1:
        rule = "a positive int"
    elif least == 0:
        rule = "a non-negative int"
    else:
        rule = f"an int >= {least}"
    return f"{label} must be {rule}, not {value!r}"


def shown_value(value: object) -> str:
    """How an error message shows a refused ``value``: a number as JavaScript prints it (the
    original's messages do), anything else by its ``repr`` (its type's name if that raises).
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_js_number(value)
    try:
        return repr(value)
    except Exception:
        return type(value).__name__
