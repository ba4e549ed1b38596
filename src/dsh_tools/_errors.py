"""The error vocabulary and the one function that turns an exception into model-facing text.

Exception tree::

    Exception
    └── HarnessError            .code (stable, machine-readable), .name (class name by default)
        ├── ToolNotFoundError   UNKNOWN_TOOL        unknown tool "<name>"
        ├── ToolArgsError       INVALID_ARGS        invalid arguments: <violations joined by "; ">
        └── OutputSchemaError   UNSUPPORTED_SCHEMA  unsupported output schema: <violations>

A :class:`HarnessError` raised by a tool body or a hook becomes an error result that carries
``error=ToolErrorInfo(name, code)``; any other exception becomes an error result without it.
The cancellation and timeout results (``ABORTED``, ``ABORTED_BEFORE_DISPATCH``, ``TOOL_TIMEOUT``)
are synthetic: no exception class is raised for them.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = [
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_TIMEOUT",
    "HarnessError",
    "OutputSchemaError",
    "ToolArgsError",
    "ToolErrorInfo",
    "ToolNotFoundError",
    "error_message",
]

TOOL_ABORTED = "ABORTED"
"""Code of the result that replaces a successful outcome when the call was cancelled after its
body started."""

TOOL_ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
"""Code of the result of a call that was cancelled before its body could start."""

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
    (``UNSUPPORTED_SCHEMA``); ``violations`` lists every problem found."""

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
