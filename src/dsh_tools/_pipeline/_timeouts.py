"""The timeout rule of a call, in one place: which of a tool's ``timeout``, the registry's
``default_timeout`` and the tool's ``idle_timeout`` apply (:func:`timeouts_for`), and how a
body runs under them (:func:`run_timed`): the caller's signal fused with the call's own
deadline and an idle deadline that each progress report moves; the deadline that fires first
names the outcome (``TOOL_TIMEOUT``, ``TOOL_IDLE_TIMEOUT``), and a caller that cancelled first
keeps ``ABORTED``.

The registry decides whether the rule is enforced at all (``TimeoutSettings.enforced``, cleared
by disposing ``install_timeout_policy``) and whether any call may need it
(``TimeoutSettings.watched``: with nothing watched a call pays one attribute read).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

import trio

from dsh_tools._values._execution import ToolExecutionResult
from dsh_tools._values._signal import CancelController, CancelSignal, DeadlineReached, fuse

from ._call import PreparedCall
from ._progress import ProgressState, TimeoutSettings
from ._results import idle_timeout_result, timeout_result

if TYPE_CHECKING:
    from dsh_tools._values._definition import ToolDefinition

__all__ = ["Invoke", "run_timed", "timeouts_for"]

Invoke: TypeAlias = Callable[
    [PreparedCall, CancelSignal, bool, bool], Awaitable[ToolExecutionResult]
]
"""Stage 7's body run: ``(call, signal, linked, timed)``."""


def timeouts_for(
    tool: ToolDefinition, settings: TimeoutSettings
) -> tuple[float | None, float | None] | None:
    """The call's ``(timeout, idle_timeout)``: the tool's ``timeout`` or else the registry's
    ``default_timeout``, and the tool's ``idle_timeout``; ``None`` when neither applies.
    """
    timeout = tool.timeout
    if timeout is None:
        timeout = settings.default_timeout
    idle = tool.idle_timeout
    if timeout is None and idle is None:
        return None
    return timeout, idle


async def run_timed(
    prepared: PreparedCall,
    signal: CancelSignal,
    timeout: float | None,  # noqa: ASYNC109 (the tool's own budget, applied as a deadline)
    idle: float | None,
    invoke: Invoke,
) -> ToolExecutionResult:
    """The registry's timeout policy: run the body under the caller's signal fused with
    its own deadline (``timeout``) and idle deadline (``idle``, moved by each progress
    report). Its own deadline firing first makes the outcome ``TOOL_TIMEOUT``, whatever
    the body returned; a caller that cancelled first keeps ``ABORTED``. ``invoke`` runs the
    body (stage 7's, told that the timeouts are applied).
    """
    now = trio.current_time()
    deadline = math.inf if timeout is None else now + timeout
    controller: CancelController | None = None
    state: ProgressState | None = None
    sources: tuple[CancelSignal, ...] = (signal,)
    if idle is not None:
        controller = CancelController(deadline=now + idle)
        state = prepared.progress_state()
        state.idle = controller
        state.idle_timeout = idle
        sources = (signal, controller.signal)
    # the deadline is data on the fused signal: the body's cancel scope carries it
    fused, detach = fuse(sources, deadline)
    try:
        result = await invoke(prepared, fused, False, True)
    finally:
        detach()
        if state is not None:
            state.idle = None
    reason = fused.reason
    if isinstance(reason, DeadlineReached):
        if timeout is not None and reason.deadline == deadline:
            return timeout_result(timeout)
        if controller is not None and idle is not None and controller.signal.cancelled:
            return idle_timeout_result(idle)
    return result
