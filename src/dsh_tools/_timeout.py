"""The timeout policy: one ``execute`` wrapper that applies ``ToolDefinition.timeout``.

The deadline is data on a :class:`~dsh_tools.CancelSignal`, so the body's linked cancel scope
carries it as a trio deadline: no timer task per call. Cooperative like every cancellation here:
a body that shields itself runs to its end, and the result is then ``TOOL_TIMEOUT``.
"""

from __future__ import annotations

import trio

from ._disposer import Disposer
from ._execution import ToolDispatchExecution, ToolExecutionResult
from ._hooks import ExecuteNext
from ._registry import ToolRegistry
from ._results import timeout_result
from ._signal import DeadlineReached, fuse

__all__ = ["install_timeout_policy"]


def install_timeout_policy(registry: ToolRegistry) -> Disposer:
    """Apply every tool's ``timeout`` (seconds) to its calls.

    Registers one global ``execute`` wrapper. For a tool with a ``timeout`` it gives the body a
    signal that is cancelled at ``now + timeout`` (or when the upstream signal is, whichever
    comes first). If its own deadline fired first, the call's result is ``TOOL_TIMEOUT``
    (``Error: tool call timed out after <ms>ms``, ``error=ToolTimeoutError/TOOL_TIMEOUT``),
    whatever the body returned, and a later caller cancellation does not change that; if the
    caller cancelled first, the result stays ``ABORTED``. Registration order decides how it
    composes with other wrappers (outermost: one budget over every retry).

    Returns:
        A :class:`~dsh_tools.Disposer` that removes the policy.

    Raises:
        TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`.
    """
    if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")

    async def apply_timeout(
        execution: ToolDispatchExecution, next: ExecuteNext
    ) -> ToolExecutionResult:
        tool = registry.get(execution.name, execution.agent)
        timeout = None if tool is None else tool.timeout
        if timeout is None:
            return await next()
        deadline = trio.current_time() + timeout
        upstream = execution.signal
        # one fused signal carrying this wrapper's own deadline (no controller needed: only
        # the deadline can fire it)
        signal, detach = fuse((upstream,), deadline)
        execution.signal = signal
        try:
            result = await next()
        finally:
            execution.signal = upstream
            detach()
        # only this wrapper's own deadline firing first counts as a timeout; the reason of a
        # fused signal is the reason of whichever source fired first
        reason = signal.reason
        if isinstance(reason, DeadlineReached) and reason.deadline == deadline:
            return timeout_result(timeout)
        return result

    return registry.hooks.execute.add(apply_timeout)
