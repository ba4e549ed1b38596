"""Where a pool's bodies run: a nursery in one cancel scope linked to the batch's signal, and
how what leaves a pool's nursery leaves ``run_tool_calls`` (the one exception a group stands
for, as itself).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, cast

import trio

from dsh_tools._pipeline._call import PreparedCall
from dsh_tools._pipeline._execute import dispatch
from dsh_tools._pipeline._gate import Ticket
from dsh_tools._pipeline._held import held_dispatch
from dsh_tools._values._signal import CancelSignal, linked_cancel_scope

__all__ = [
    "BODY_TASK",
    "dispatch_reporting",
    "linked_bodies",
    "lone_as_itself",
    "start_body",
]


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = cast("BaseExceptionGroup[BaseException]", exc).exceptions[0]
    return exc


def _lone(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception a nursery's ``group`` stands for, or ``None`` to raise the group.

    Only cancellations: the first (the caller's scope was cancelled; trio gathers one per
    cancelled task). One exception that is neither a cancellation nor a group (a body's
    ``KeyboardInterrupt`` or ``SystemExit``): that exception. A group a body raised itself is
    never unwrapped.
    """
    _, other = group.split(trio.Cancelled)
    if other is None:
        return _first_leaf(group)
    (first, *rest) = group.exceptions
    if not rest and not isinstance(first, (trio.Cancelled, BaseExceptionGroup)):
        return first
    return None


async def lone_as_itself(pool: Awaitable[None]) -> None:
    """Await ``pool``; what leaves its nursery leaves as ``run_tool_calls`` documents it
    (:func:`_lone`).
    """
    try:
        await pool
    except BaseExceptionGroup as group:
        lone = _lone(group)
        if lone is None:
            raise
    else:
        return
    raise lone  # outside the except block: the group does not become its __context__


# the name of every pool's body tasks in trio's task tree: one shared string (trio would format
# one per task from the function's module and qualname)
BODY_TASK: Final = "dsh_tools.run_tool_calls: tool body"


async def dispatch_reporting(
    prepared: PreparedCall, index: int, report: Callable[[int], None]
) -> None:
    """A body task for a call whose ``execute`` wrappers may replace its signal (the call then
    has a cancel scope of its own): dispatch it, then report its index to the lane.
    """
    await dispatch(prepared)
    report(index)


def start_body(
    prepared: PreparedCall,
    index: int,
    report: Callable[[int], None],
    ticket: Ticket | None,
    nursery: trio.Nursery,
    bodies: trio.Nursery | None,
    own_scope: bool,
) -> None:
    """Start the body task of an allowed call of a pool (``ticket``: what it holds first).

    Without ``own_scope``, in ``bodies``, the pool's nursery in a scope linked to the batch's
    signal (``nursery`` for a signal that never fires): the body needs no scope of its own.
    With it (an ``execute`` wrapper hears the call and may replace its signal), in ``nursery``,
    with scopes of its own.
    """
    if own_scope:
        if ticket is None:
            nursery.start_soon(dispatch_reporting, prepared, index, report, name=BODY_TASK)
        else:
            nursery.start_soon(
                held_dispatch, prepared, ticket, report, index, False, name=BODY_TASK
            )
        return
    target = nursery if bodies is None else bodies
    if ticket is None:
        target.start_soon(dispatch, prepared, report, index, name=BODY_TASK)
    else:
        target.start_soon(held_dispatch, prepared, ticket, report, index, True, name=BODY_TASK)


async def linked_bodies(  # noqa: ASYNC910 (leaving the bodies' nursery is a checkpoint)
    signal: CancelSignal,
    pool_done: trio.Event,
    pool: trio.Nursery,
    task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Host a pool's bodies in one cancel scope linked to ``signal`` until the pool is done.

    The wait is shielded so that the nursery stays open for the lane after the signal fires
    (the lane sets ``pool_done`` on every path, so a cancelled batch still ends). It happens
    only once ``pool.start`` has adopted this task: when the caller's scope is cancelled while
    ``start`` waits, trio leaves the task under ``start`` (``started()`` does not move it), and
    ``start`` waits for it to exit, so it must not wait for the lane, which is still inside
    ``start``.
    """
    with linked_cancel_scope(signal):
        lone = None
        try:
            async with trio.open_nursery() as bodies:
                task_status.started(bodies)
                if trio.lowlevel.current_task().parent_nursery is not pool:
                    return  # nothing was started in ``bodies``: the lane never received it
                with trio.CancelScope(shield=True):
                    await pool_done.wait()
        except BaseExceptionGroup as group:
            # unwrapped here, inside the linked scope (which absorbs its own cancellation), so
            # that the pool's nursery does not nest this nursery's group in its own
            lone = _lone(group)
            if lone is None:
                raise
        if lone is not None:
            raise lone
