"""Calls that hold something before their body starts: a conflict key, a slot of a capacity
class the registry limits, a token of a rate (the registry's gate, ``_pipeline._gate``, and a
shared limiter behind it).

The lane queues the call's claim when the call is allowed (:func:`queue_claim`, in model order);
:func:`held_dispatch` then waits for it in the call's own task, runs the body, and releases it.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from dsh_tools._errors import ToolArgsError
from dsh_tools._texts import error_message
from dsh_tools._values._definition import ToolDefinition
from dsh_tools._values._signal import linked_cancel_scope

from ._call import ALLOWED, PreparedCall, log_raised
from ._execute import dispatch
from ._gate import LOCAL_ONLY, Ticket
from ._results import ABORTED_BEFORE_DISPATCH, error_result

__all__ = ["dispatch_holding", "held_dispatch", "queue_claim"]


def queue_claim(prepared: PreparedCall, tool: ToolDefinition | None) -> Ticket | None:
    """On the lane, for an allowed call of ``tool``: its claim queued at the registry's gate,
    or ``None`` when it needs nothing held (then dispatch it as usual). A ``conflict_keys``
    that raises, or returns what is not a collection of keys, withholds the call with an
    ``INVALID_ARGS`` result (``None`` too).
    """
    gate = prepared.env.host.gate
    if tool is None or (
        tool.conflict_keys is None and not (gate.limits_classes and tool.capacity_class)
    ):
        return None  # the common case: nothing to hold, nothing computed
    try:
        claim = gate.claim(tool, prepared.arguments)
    except Exception as exc:
        error = ToolArgsError([f"conflict_keys failed: {error_message(exc)}"])
        log_raised(prepared, "conflict_keys", exc)
        prepared.withhold(error_result(error))
        return None
    return None if claim is None else gate.request(claim)


async def held_dispatch(  # noqa: ASYNC910 (Gate.hold or the dispatch is its cancel point)
    prepared: PreparedCall,
    ticket: Ticket,
    report: Callable[[int], None] | None = None,
    index: int = 0,
    linked: bool = False,
) -> None:
    """Wait until the call holds its claim, dispatch it, release the claim; ``report(index)``
    once its outcome is recorded (a pool's body task).

    ``linked``: the task runs in the pool's scope linked to the batch's signal already (as a
    body no ``execute`` wrapper hears does): an interrupt while it waits withholds the call as
    ``ABORTED_BEFORE_DISPATCH``, reports it and propagates (that scope absorbs it). Otherwise
    the wait has a linked scope of its own and the body one of its own. A shared limiter that
    fails (a lost connection) withholds the call with that error: the body never runs
    unguarded. When the caller's own scope is cancelled, ``trio.Cancelled`` propagates (the
    batch gives the call ``ABORTED_BEFORE_DISPATCH``).
    """
    gate = prepared.env.host.gate
    release = None
    try:
        if linked:
            release = await gate.hold(ticket)
        else:
            with linked_cancel_scope(prepared.env.signal):
                release = await gate.hold(ticket)
    except trio.Cancelled:
        # the signal (linked) or the caller's scope: the call never ran
        prepared.withhold(ABORTED_BEFORE_DISPATCH)
        if report is not None:
            report(index)
        raise
    except Exception as exc:
        log_raised(prepared, "the shared limiter", exc)
        prepared.withhold(error_result(exc))
    if release is None:
        if prepared.stage == ALLOWED:
            prepared.withhold(ABORTED_BEFORE_DISPATCH)
        if report is not None:
            report(index)
        return  # noqa: ASYNC910 (Gate.hold waited: it checkpointed)
    try:
        if linked:
            await dispatch(prepared, report, index)  # reports itself
            report = None
        else:
            await dispatch(prepared)
    finally:
        if release is not LOCAL_ONLY:
            with trio.CancelScope(shield=True):
                await release()
        gate.release(ticket)
    if report is not None:
        report(index)


async def dispatch_holding(  # noqa: ASYNC910 (its callers checkpoint before it)
    prepared: PreparedCall, tool: ToolDefinition | None
) -> None:
    """Dispatch an allowed call of ``tool`` that runs alone (a barrier on the lane, or
    ``ToolRegistry.execute``), after holding what it needs, if anything.
    """
    ticket = queue_claim(prepared, tool)
    if ticket is not None:
        await held_dispatch(prepared, ticket)
    elif prepared.stage == ALLOWED:
        await dispatch(prepared)
