"""The model-facing vocabulary: result codes, the one function that turns an exception into
the text a model reads, and JavaScript's way of printing numbers and JSON in those texts.

The canonical results built from these (``ABORTED``, ``TOOL_INTERRUPTED``, ...) are in
``_results``; the exceptions, in one tree, in ``_errors``.
"""

from __future__ import annotations

import decimal
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Final, cast

import attrs

__all__ = [
    "APPROVAL_PENDING",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_INTERRUPTED",
    "TOOL_TIMEOUT",
    "UNPRINTABLE",
    "ToolErrorInfo",
    "approval_cancelled",
    "call_budget_per_tool",
    "call_budget_per_turn",
    "call_budget_repeated",
    "output_omitted",
    "output_spilled",
    "approval_needs_agent",
    "approval_not_supported",
    "approval_pending",
    "approval_rejected",
    "approved_arguments_changed",
    "arguments_edited",
    "approval_unavailable",
    "debug_traceback",
    "deny_reason_not_str",
    "error_message",
    "format_js_json",
    "format_js_number",
    "one_line",
    "post_execute_returned",
    "post_execute_unreadable",
    "pre_execute_returned",
    "sync_body_returned_awaitable",
]

TOOL_ABORTED = "ABORTED"
"""Code of the result that replaces a successful outcome when the call was cancelled after its
body started."""

TOOL_ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
"""Code of the result of a call that was cancelled before its body could start."""

TOOL_INTERRUPTED = "TOOL_INTERRUPTED"
"""Code of the result of a call whose process stopped while it ran, found when its batch was
resumed or recovered from the session log: its body may have run, in part or in full."""

APPROVAL_PENDING = "APPROVAL_PENDING"
"""Code of the placeholder result of a call whose approval was deferred: its batch ended
suspended, and the placeholder is not a result to send to the model (resume the batch with
``resume_tool_calls(..., approvals=...)`` for the call's real result)."""

TOOL_TIMEOUT = "TOOL_TIMEOUT"
"""Code of the result the timeout policy gives a call whose deadline fired first."""

UNPRINTABLE = "<unprintable thrown value>"


@attrs.frozen(kw_only=True)
class ToolErrorInfo:
    """The structured part of an error result: which :class:`HarnessError` it was."""

    name: str
    code: str


def one_line(exc: BaseException) -> str:
    """The first line of :func:`error_message` (``" ..."`` marks the lines left out): what a
    log record's message says of an exception.
    """
    first, _, rest = error_message(exc).partition("\n")
    return f"{first} ..." if rest else first


def debug_traceback(logger: logging.Logger, exc: BaseException) -> BaseException | None:
    """The ``exc_info`` of a record that reports ``exc`` in one line: the exception itself when
    ``logger`` is enabled for DEBUG (the traceback is printed with the line), else ``None``.
    """
    return exc if logger.isEnabledFor(logging.DEBUG) else None


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


def _huge_int_text(integer: int) -> str:
    """An int too long for ``str``, in exponent form (math.log10 takes any int, in little time)."""
    magnitude = math.log10(abs(integer))
    exponent = math.floor(magnitude)
    mantissa = f"{10 ** (magnitude - exponent):.6g}"
    return f"{'-' if integer < 0 else ''}{mantissa}e+{exponent}"


def format_js_number(value: float) -> str:
    """``value`` as JavaScript's ``String(number)`` prints it, for model-facing text.

    An integral float prints without ``.0`` (``3.0`` -> ``3``), large and small magnitudes
    switch to exponent form where JavaScript does (``1e21``, ``1e-7``), and ``-0.0`` prints as
    ``0``. Python ints print in full, up to the digits Python converts (4,300 by default); a
    longer one prints in exponent form, its leading digits approximate (``1e+5000``).
    """
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        integer = int(value)
        try:
            return str(integer)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            return _huge_int_text(integer)
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


# --- the pipeline's texts (values in them arrive already described) --------------------------


def _about_tool(template: str) -> Callable[[str], str]:
    """A text about one tool: ``template`` with the tool's name for ``{tool}``."""

    def text(tool: str) -> str:
        return template.format(tool=tool)

    return text


approval_rejected: Final = _about_tool('the user rejected tool "{tool}"')
approval_cancelled: Final = _about_tool('approval for tool "{tool}" was cancelled')
approval_unavailable: Final = _about_tool(
    'tool "{tool}" requires approval, but no approval channel is available'
)
approval_not_supported: Final = _about_tool('tool "{tool}" requires approval (not yet supported)')
approval_pending: Final = _about_tool(
    'approval for tool "{tool}" is pending: the batch is suspended until it is decided'
)
approval_needs_agent: Final = _about_tool(
    'tool "{tool}" requires approval, but the call has no agent to route it through'
)
approved_arguments_changed: Final = _about_tool(
    'the arguments of tool "{tool}" changed after they were approved: the call is denied'
)


def arguments_edited(tool: str, arguments: str) -> str:
    """The context that tells the model the person edited a call before it ran."""
    return f"The user changed the arguments of {tool} before it ran: {arguments}"


def pre_execute_returned(described: str) -> str:
    return f"tools/pre-execute returned {described}, not Allow, Deny or Ask"


def deny_reason_not_str(described: str) -> str:
    return (
        f"tools/pre-execute returned a Deny whose reason is not a str ({described}); "
        "the call is denied"
    )


def post_execute_returned(described: str) -> str:
    return f"tools/post-execute returned {described}, not Accept or Block"


def post_execute_unreadable(class_name: str, message: str) -> str:
    return f"tools/post-execute returned an unreadable {class_name}: {message}"


def sync_body_returned_awaitable(tool: str, class_name: str) -> str:
    return (
        f'tool "{tool}": its body is a plain function that returned an awaitable '
        f"({class_name}); declare it `async def`"
    )


# --- the long-running policies ------------------------------------------------------------------


def output_omitted(count: int) -> str:
    """The one line an output budget puts between a long result's head and tail."""
    return f"[... {count} characters omitted ...]"


def output_spilled(path: str) -> str:
    """The line after :func:`output_omitted` when the whole output was written to a file."""
    return f"full output: {path}"


def call_budget_per_tool(name: str, limit: int) -> str:
    """The denial of a call beyond its tool's budget for the turn."""
    return (
        f'tool "{name}" has reached its limit of {limit} calls this turn; '
        "use the results you have, or answer without calling it again"
    )


def call_budget_per_turn(limit: int) -> str:
    """The denial of a call beyond the turn's total budget."""
    return (
        f"this turn has reached its limit of {limit} tool calls; answer with what you have so far"
    )


def call_budget_repeated(name: str, count: int) -> str:
    """The denial of the ``count``-th identical call in a turn."""
    return (
        f'tool "{name}" was already called {count - 1} times this turn with exactly these '
        "arguments; its result will not change: use it, or change the arguments"
    )
