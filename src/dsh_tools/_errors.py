"""The error vocabulary and the one function that turns an exception into model-facing text.

Every exception dsh-tools defines, in one tree::

    Exception
    ├── HarnessError              model-facing: .code (stable, machine-readable), .name
    │   ├── ToolNotFoundError     UNKNOWN_TOOL        unknown tool "<name>"
    │   ├── ToolArgsError         INVALID_ARGS        invalid arguments: <violations joined by "; ">
    │   └── OutputSchemaError     UNSUPPORTED_SCHEMA  unsupported output schema: <violations>
    ├── JsonSnapshotError         a value is not lossless JSON: "<path>: <reason>"
    │   ├── JsonTypeError         (also a TypeError) a type JSON cannot carry
    │   └── JsonValueError        (also a ValueError) a value that cannot cross losslessly
    ├── SessionLogCorruptError    (a ValueError) a log line that is not an event
    └── SessionLogLockedError     (an OSError) another writer holds the log (an SQLite log:
                                  the session)

A :class:`HarnessError` raised by a tool body or a hook becomes an error result that carries
``error=ToolErrorInfo(name, code)``; any other exception becomes an error result without it.
The cancellation, interruption and timeout results (``ABORTED``, ``ABORTED_BEFORE_DISPATCH``,
``TOOL_INTERRUPTED``, ``TOOL_TIMEOUT``) are synthetic: no exception class is raised for them.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

import attrs

__all__ = [
    "HarnessError",
    "JsonSnapshotError",
    "JsonTypeError",
    "JsonValueError",
    "OutputSchemaError",
    "SessionLogCorruptError",
    "SessionLogLockedError",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_INTERRUPTED",
    "TOOL_TIMEOUT",
    "ToolArgsError",
    "ToolErrorInfo",
    "ToolNotFoundError",
    "UNPRINTABLE",
    "error_info",
    "error_message",
    "format_js_json",
    "format_js_number",
]

TOOL_ABORTED = "ABORTED"
"""Code of the result that replaces a successful outcome when the call was cancelled after its
body started."""

TOOL_ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
"""Code of the result of a call that was cancelled before its body could start."""

TOOL_INTERRUPTED = "TOOL_INTERRUPTED"
"""Code of the result of a call whose process stopped while it ran, found when its batch was
resumed or recovered from the session log: its body may have run, in part or in full."""

TOOL_TIMEOUT = "TOOL_TIMEOUT"
"""Code of the result the timeout policy gives a call whose deadline fired first."""

UNPRINTABLE = "<unprintable thrown value>"


class HarnessError(Exception):
    """An error with a stable machine-readable ``code``.

    Args:
        message: the human- and model-readable text.
        code: a stable identifier such as ``"INVALID_ARGS"``.

    ``name`` defaults to the concrete class name (``ToolArgsError`` for a ``ToolArgsError``);
    it and ``code`` travel with the error result as :class:`ToolErrorInfo`. Chain a cause with
    ``raise HarnessError(...) from exc``.
    """

    code: str
    message: str

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    @property
    def name(self) -> str:
        """The error's name: the concrete class name unless a subclass overrides it."""
        return type(self).__name__

    def __str__(self) -> str:
        return self.message


class ToolNotFoundError(HarnessError):
    """No tool of this name is visible to the call's agent (``UNKNOWN_TOOL``)."""

    tool_name: str

    def __init__(self, name: str) -> None:
        super().__init__(f'unknown tool "{name}"', "UNKNOWN_TOOL")
        self.tool_name = name


class ToolArgsError(HarnessError):
    """The model's arguments violate the tool's schema (``INVALID_ARGS``).

    ``violations`` holds every violation in declaration order; the message joins them:
    ``invalid arguments: "path" must be a string; missing required property "mode"``.
    """

    violations: tuple[str, ...]

    def __init__(self, violations: Iterable[str]) -> None:
        self.violations = tuple(violations)
        super().__init__("invalid arguments: " + "; ".join(self.violations), "INVALID_ARGS")


class OutputSchemaError(HarnessError):
    """A structured-output schema uses something outside the supported subset
    (``UNSUPPORTED_SCHEMA``); ``violations`` lists every problem found.
    """

    violations: tuple[str, ...]

    def __init__(self, violations: Iterable[str]) -> None:
        self.violations = tuple(violations)
        super().__init__(
            "unsupported output schema: " + "; ".join(self.violations), "UNSUPPORTED_SCHEMA"
        )


@attrs.frozen(kw_only=True)
class ToolErrorInfo:
    """The structured part of an error result: which :class:`HarnessError` it was."""

    name: str
    code: str


def error_message(exc: BaseException) -> str:
    """Return the model-facing text of ``exc``; never raises.

    ``str(exc)``; the class name when that is empty; ``<unprintable thrown value>`` when
    ``__str__`` itself raises. An exception group names itself and each sub-exception:
    ``ExceptionGroup "boom" with 2 sub-exceptions: ValueError: a; KeyError: 'b'``.
    """
    try:
        if isinstance(exc, BaseExceptionGroup):
            return _group_message(exc)  # pyright: ignore[reportUnknownArgumentType]
        text = str(exc)
        return text if text else type(exc).__name__
    except Exception:
        return UNPRINTABLE


def _group_message(group: BaseExceptionGroup[BaseException]) -> str:
    subs = group.exceptions
    parts = "; ".join(f"{type(sub).__name__}: {error_message(sub)}" for sub in subs)
    plural = "" if len(subs) == 1 else "s"
    return (
        f'{type(group).__name__} "{group.message}" with {len(subs)} sub-exception{plural}: {parts}'
    )


def error_info(exc: BaseException) -> ToolErrorInfo | None:
    """The :class:`ToolErrorInfo` of a :class:`HarnessError`, else ``None``; never raises."""
    if not isinstance(exc, HarnessError):
        return None
    try:
        name, code = exc.name, exc.code
        if type(name) is not str or type(code) is not str:
            return None
        return ToolErrorInfo(name=name, code=code)
    except Exception:
        return None


def format_js_number(value: float) -> str:
    """``value`` as JavaScript's ``String(number)`` prints it, for model-facing text.

    An integral float prints without ``.0`` (``3.0`` -> ``3``), large and small magnitudes
    switch to exponent form where JavaScript does (``1e21``, ``1e-7``), and ``-0.0`` prints as
    ``0``. Python ints print in full.
    """
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return str(int(value))
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr is the shortest round-tripping decimal, as JavaScript's digit choice is
    _sign, digit_tuple, exponent = decimal.Decimal(repr(abs(number))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    k = len(digits)
    # value = 0.<digits> * 10**n
    n = exponent + len(digit_tuple)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        power = n - 1
        text = f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"
    return sign + text


def format_js_json(value: object) -> str:
    """Compact JSON text of ``value`` as JavaScript's ``JSON.stringify`` writes it, for
    model-facing messages: numbers as :func:`format_js_number` prints them (``[1,2.5]``, never
    ``[1.0,2.5]``), non-ASCII text kept as is.

    Args:
        value: JSON data (plain or snapshotted), nested no deeper than the snapshot limit.

    Raises:
        TypeError: ``value`` holds something that is not JSON data.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return format_js_number(value)
    if isinstance(value, Mapping):
        items = cast("Mapping[object, object]", value).items()
        parts: list[str] = []
        for key, item in items:
            if not isinstance(key, str):
                raise TypeError(f"a JSON object key must be a str, not {type(key).__name__}")
            parts.append(json.dumps(key, ensure_ascii=False) + ":" + format_js_json(item))
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list | tuple):
        return (
            "[" + ",".join(format_js_json(item) for item in cast("Sequence[object]", value)) + "]"
        )
    raise TypeError(f"a value of type {type(value).__name__} is not JSON data")


# --- the JSON boundary and the session log ------------------------------------------------


class JsonSnapshotError(Exception):
    """A value is not lossless JSON data. ``path`` names where (``$``, ``$.a[2]``, ``$["a b"]``),
    ``reason`` says why; the message is ``"<path>: <reason>"``.
    """

    path: str
    reason: str

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class JsonTypeError(JsonSnapshotError, TypeError):
    """A value of a type that JSON cannot carry (bytes, a set, an object, a non-``str`` key)."""


class JsonValueError(JsonSnapshotError, ValueError):
    """A value of a JSON type that cannot cross losslessly (NaN, ``-0.0``, a huge ``int``, a lone
    surrogate), a cycle, or nesting deeper than :data:`~dsh_tools.MAX_DEPTH`.
    """


class SessionLogCorruptError(ValueError):
    """A session log holds a line that is not an event (other than a torn last line).

    ``path`` and ``line`` (1-based) name it; the message says what is wrong.
    """

    path: str
    line: int

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}, line {line}: {reason}")
        self.path = path
        self.line = line


class SessionLogLockedError(OSError):
    """Another writer (in this process or another) holds the log: a :class:`JsonlSessionLog`
    the file's lock, or a :class:`SqliteSessionLog` the lock of the same session of the file.

    ``path`` names the file; ``session_id`` the session of an SQLite log (``None`` for a JSON
    Lines log). Read a log someone else is writing with :func:`read_session_log` or
    :meth:`SqliteSessionLog.read`.
    """

    path: str
    session_id: str | None

    def __init__(self, path: str, session_id: str | None = None) -> None:
        if session_id is None:
            message = (
                f"{path}: another JsonlSessionLog is writing to this file (it holds the lock); "
                "read it with read_session_log()"
            )
        else:
            message = (
                f"{path}: another SqliteSessionLog is writing session {session_id!r} (it holds "
                "the session's lock); read it with SqliteSessionLog.read()"
            )
        super().__init__(message)
        self.path = path
        self.session_id = session_id
