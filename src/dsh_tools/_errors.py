"""Every exception dsh-tools defines, and nothing else (the texts a model reads, the result
codes and ``error_message`` live in ``_texts``).

The tree::

    Exception
    ├── HarnessError              model-facing: .code (stable, machine-readable), .name
    │   ├── ToolNotFoundError     UNKNOWN_TOOL        unknown tool "<name>"
    │   ├── ToolArgsError         INVALID_ARGS        invalid arguments: <violations joined by "; ">
    │   └── OutputSchemaError     UNSUPPORTED_SCHEMA  unsupported output schema: <violations>
    ├── JsonSnapshotError         a value is not lossless JSON: "<path>: <reason>"
    │   ├── JsonTypeError         (also a TypeError) a type JSON cannot carry
    │   └── JsonValueError        (also a ValueError) a value that cannot cross losslessly
    ├── SessionLogCorruptError    (a ValueError) a log line that is not an event
    │   └── SessionLogIntegrityError  an event a keyed log's MAC chain does not vouch for
    ├── SessionLogLockedError     (an OSError) another writer holds the log (an SQLite log:
    │                             the session)
    └── ApprovalSetupWarning      (a UserWarning) approval wired so that it can never ask

A :class:`HarnessError` raised by a tool body or a hook becomes an error result that carries
``error=ToolErrorInfo(name, code)``; any other exception becomes an error result without it.
The cancellation, interruption and timeout results (``ABORTED``, ``ABORTED_BEFORE_DISPATCH``,
``TOOL_INTERRUPTED``, ``TOOL_TIMEOUT``) are synthetic: no exception class is raised for them.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "ApprovalSetupWarning",
    "HarnessError",
    "JsonSnapshotError",
    "JsonTypeError",
    "JsonValueError",
    "OutputSchemaError",
    "SessionLogCorruptError",
    "SessionLogIntegrityError",
    "SessionLogLockedError",
    "ToolArgsError",
    "ToolNotFoundError",
]


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


class SessionLogIntegrityError(SessionLogCorruptError):
    """A session log kept with an ``integrity_key`` holds an event its chain of MACs does not
    vouch for: changed, forged, reordered, removed, or written without the key.

    ``seq`` is the sequence number (the one ``append`` returned) of the first event that fails;
    ``line`` is ``seq + 1``, as for :class:`SessionLogCorruptError`.
    """

    seq: int

    def __init__(self, path: str, seq: int, reason: str) -> None:
        super().__init__(
            path, seq + 1, f"integrity check failed at sequence number {seq}: {reason}"
        )
        self.seq = seq


class SessionLogLockedError(OSError):
    """Another writer (in this process or another) holds the log: the lock of its file, or of
    the same session of its database.

    ``path`` names the file or the database (a database without its password);
    ``session_id`` the session of a log that keeps several (``None`` for a log of one file);
    ``log_class`` names the session log class in the message, and ``read_with`` how to read a
    log someone else is writing (by default the class's ``read()``); each store passes both.
    """

    path: str
    session_id: str | None

    def __init__(
        self,
        path: str,
        session_id: str | None = None,
        *,
        log_class: str | None = None,
        read_with: str | None = None,
    ) -> None:
        writer = "session log" if log_class is None else log_class
        if read_with is not None:
            reader = read_with
        else:
            reader = "the log's reader" if log_class is None else f"{log_class}.read()"
        if session_id is None:
            message = (
                f"{path}: another {writer} is writing to this file (it holds the lock); "
                f"read it with {reader}"
            )
        else:
            message = (
                f"{path}: another {writer} is writing session {session_id!r} (it holds "
                f"the session's lock); read it with {reader}"
            )
        super().__init__(message)
        self.path = path
        self.session_id = session_id


class ApprovalSetupWarning(UserWarning):
    """Approval is wired so that no person can ever be asked, seen when a registry or a batch
    is set up: an ``Ask`` policy on a registry without an approval service, a batch whose
    calls have no agent to route an approval through, or an agent no answerer hears. Each
    such call would otherwise only fail in text the model reads.
    """
