"""The retry policy: run an idempotent tool's body again after a transient error.

One ``execute`` wrapper. Only a tool marked ``idempotent`` is ever retried: running its body
twice with the same arguments is harmless by its own declaration. The backoff sleeps on trio's
clock (virtual in tests) and ends at once when the call is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import cast

import trio

from dsh_tools._pipeline._hooks import ExecuteNext
from dsh_tools._pipeline._registry import ToolRegistry
from dsh_tools._pipeline._results import ABORTED
from dsh_tools._texts import TOOL_TIMEOUT
from dsh_tools._values._checks import check_int, check_seconds
from dsh_tools._values._definition import ToolDefinition
from dsh_tools._values._disposer import Disposer
from dsh_tools._values._execution import ToolDispatchExecution, ToolExecutionResult
from dsh_tools._values._signal import linked_cancel_scope

__all__ = ["install_retry_policy"]

RetryOn = Callable[[ToolExecutionResult], bool] | Collection[str]


def install_retry_policy(
    registry: ToolRegistry,
    *,
    attempts: int = 3,
    backoff: Sequence[float] = (0.5, 2.0, 8.0),
    retry_on: RetryOn | None = None,
) -> Disposer:
    """Run an **idempotent** tool's body again after an error result that ``retry_on``
    accepts, at most ``attempts`` times in all.

    Registers one ``execute`` wrapper (after a budget, before nothing that must see every
    attempt: wrappers registered later run inside it, once per attempt). Before attempt
    ``k + 1`` it waits ``backoff[k - 1]`` seconds of trio's clock (the last delay repeats;
    ``()``: no wait). The body's ``context.attempt`` counts the runs (``1``, ``2``, ...); the
    last attempt's result is the call's result. A tool that is not ``idempotent`` is never
    retried. A cancellation of the call's signal during a backoff ends the call at once with
    ``ABORTED``.

    Args:
        registry: the registry whose calls are retried.
        attempts: the most runs of one call's body (a positive ``int``; ``1``: no retry).
        backoff: the waits between runs, in seconds (finite numbers >= 0).
        retry_on: which error results are retried: a predicate ``(result) -> bool``, or a
            collection of codes and error names (``result.error.code`` or
            ``result.error.name``). ``None``: ``TOOL_TIMEOUT`` results, and errors whose name or
            code the tool lists in ``transient_errors`` (a body raises a
            :class:`~dsh_tools.HarnessError` with such a code to ask for a retry).

    Returns:
        A :class:`~dsh_tools.Disposer` that removes the policy.

    Raises:
        TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`, ``attempts`` is not
            an ``int``, ``backoff`` is not a sequence of numbers, or ``retry_on`` is neither a
            callable nor a collection of ``str``.
        ValueError: ``attempts`` is less than 1, or a delay is negative or not finite.
    """
    if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
    check_int("attempts", attempts)
    delays = _delays(backoff)
    accepts = _acceptor(retry_on)

    async def retry(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        tool = registry.get(execution.name, execution.agent)
        if tool is None or not tool.idempotent:
            return await next()
        result = await next()
        for attempt in range(1, attempts):
            if not result.is_error or not accepts(tool, result):
                return result
            delay = delays[min(attempt, len(delays)) - 1] if delays else 0.0
            signal = execution.signal
            with linked_cancel_scope(signal):
                await trio.sleep(delay)
            if signal.cancelled:
                return ABORTED
            result = await next()
        return result

    return registry.hooks.execute.add(retry)


def _delays(backoff: object) -> tuple[float, ...]:
    if isinstance(backoff, str) or not isinstance(backoff, Sequence):
        raise TypeError(
            f"backoff must be a sequence of delays in seconds, not {type(backoff).__name__}"
        )
    delays: list[float] = []
    for index, delay in enumerate(backoff):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        delays.append(check_seconds(f"backoff[{index}]", cast(object, delay), zero=True))
    return tuple(delays)


def _acceptor(
    retry_on: RetryOn | None,
) -> Callable[[ToolDefinition, ToolExecutionResult], bool]:
    if retry_on is None:

        def default(tool: ToolDefinition, result: ToolExecutionResult) -> bool:
            error = result.error
            if error is None:
                return False
            transient = tool.transient_errors
            return error.code == TOOL_TIMEOUT or error.name in transient or error.code in transient

        return default
    if callable(retry_on):
        predicate = retry_on

        def custom(_tool: ToolDefinition, result: ToolExecutionResult) -> bool:
            return predicate(result) is True

        return custom
    if isinstance(retry_on, str) or not isinstance(retry_on, Collection):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            "retry_on must be a predicate or a collection of codes and error names, not "
            f"{type(retry_on).__name__}"
        )
    names = frozenset(retry_on)
    for name in names:
        if type(name) is not str:
            raise TypeError(f"retry_on must hold codes and error names (str), not {name!r}")

    def listed(_tool: ToolDefinition, result: ToolExecutionResult) -> bool:
        error = result.error
        return error is not None and (error.code in names or error.name in names)

    return listed
