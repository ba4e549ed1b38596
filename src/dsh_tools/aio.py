"""Hosting dsh-tools in an asyncio program: trio's guest mode on the running asyncio loop.

dsh-tools is trio-native: a batch runs in trio nurseries, its cancellation is trio's. An
asyncio program (a FastAPI handler, an openai-agents or pydantic-ai tool, a plain
``asyncio.run``) uses it through this module, which starts trio as a *guest* of the asyncio
loop that is already running (:func:`trio.lowlevel.start_guest_run`): both loops share the
thread, asyncio keeps control, and the batch runs with all of trio's guarantees::

    batch = await dsh_tools.aio.run_tool_calls(registry, calls)

Cancelling the asyncio task that awaits fires the batch's signal: the tools see it as any
interrupt (their results ``ABORTED``), the batch ends balanced, then the task's
``CancelledError`` goes on. A tool body (trio code) awaits asyncio code of the host with
:func:`run_asyncio`; trio cancelling the body cancels that asyncio task.

Without this module, awaiting a dsh-tools coroutine from asyncio is refused at once with a
``RuntimeError`` that names it (trio's own primitives would otherwise fail deep inside with
``Task got bad yield``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar, TypeVarTuple

import outcome
import trio

from dsh_tools import (
    CancelController,
    CancelSignal,
    SessionLog,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
)
from dsh_tools import resume_tool_calls as _resume_tool_calls
from dsh_tools import run_tool_calls as _run_tool_calls

__all__ = ["resume_tool_calls", "run", "run_asyncio", "run_tool_calls"]

T = TypeVar("T")
Args = TypeVarTuple("Args")

# the asyncio loop that hosts the current trio guest run (read by run_asyncio in tool bodies)
_HOST: contextvars.ContextVar[asyncio.AbstractEventLoop] = contextvars.ContextVar(
    "dsh_tools_aio_host"
)


class _Guest:
    """One guest run's way back into trio: its token, once it started."""

    __slots__ = ("token",)

    def __init__(self) -> None:
        self.token: trio.lowlevel.TrioToken | None = None


async def _guest_run(
    body: Callable[[], Awaitable[T]],
    on_cancel: Callable[[], None] | None = None,
    clock: trio.abc.Clock | None = None,
) -> T:
    """Run trio ``body()`` as a guest of the running asyncio loop and return what it returns.

    When the awaiting asyncio task is cancelled: ``on_cancel`` runs inside trio (or, without
    one, the guest's root scope is cancelled), the guest run is awaited to its end, and the
    ``CancelledError`` goes on.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "dsh_tools.aio runs trio as a guest of a running asyncio loop: call it from "
            "asyncio code (asyncio.run(...)); under trio, call dsh_tools directly"
        ) from None
    guest = _Guest()
    scope = trio.CancelScope()
    finished: asyncio.Future[outcome.Outcome[T]] = loop.create_future()

    async def main() -> T:
        _HOST.set(loop)
        guest.token = trio.lowlevel.current_trio_token()
        with scope:
            return await body()
        raise asyncio.CancelledError  # the root scope was cancelled: asyncio cancelled us

    def done(result: outcome.Outcome[T]) -> None:
        if not finished.done():
            finished.set_result(result)

    trio.lowlevel.start_guest_run(
        main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon,
        done_callback=done,
        host_uses_signal_set_wakeup_fd=False,
        clock=clock,
    )
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(finished)
            break
        except asyncio.CancelledError:
            if finished.done():
                result = finished.result()
                break
            if not cancelled:
                cancelled = True
                _deliver(guest, on_cancel if on_cancel is not None else scope.cancel)
    if cancelled:
        raise asyncio.CancelledError
    return result.unwrap()  # noqa: ASYNC910 - asyncio code: it awaited asyncio's future


def _deliver(guest: _Guest, action: Callable[[], None]) -> None:
    """Run ``action`` inside the guest run (its token's queue), or at its start."""
    token = guest.token
    if token is not None:
        with contextlib.suppress(trio.RunFinishedError):  # it ended: nothing left to stop
            token.run_sync_soon(action)
        return
    loop = asyncio.get_running_loop()
    loop.call_soon(lambda: _deliver(guest, action))  # not started yet: on the next tick


async def run(
    async_fn: Callable[[*Args], Awaitable[T]],
    *args: *Args,
    clock: trio.abc.Clock | None = None,
) -> T:
    """Run the trio function ``async_fn(*args)`` as a guest of the running asyncio loop and
    return its result (or raise its exception).

    Cancelling the awaiting asyncio task cancels the guest run's root scope: ``async_fn``
    unwinds as under any trio cancellation, and the ``CancelledError`` goes on once it has.
    ``clock``: the guest run's trio clock (a ``trio.testing.MockClock`` for tests on virtual
    time), as :func:`trio.run` takes it.

    Raises:
        RuntimeError: no asyncio loop is running in this thread.
    """
    return await _guest_run(lambda: async_fn(*args), clock=clock)


async def run_tool_calls(
    registry: ToolRegistry,
    calls: Iterable[ToolCallRequest],
    *,
    signal: CancelSignal | None = None,
    clock: trio.abc.Clock | None = None,
    **options: Any,
) -> ToolBatch:
    """:func:`dsh_tools.run_tool_calls` for asyncio code: the batch runs in trio, as a guest of
    the running asyncio loop, and its results come back here.

    ``signal`` (optional) is the caller's own; cancelling the awaiting asyncio task fires the
    batch's signal as well (reason ``"cancelled by asyncio"``): running bodies are interrupted,
    every call gets its result (``ABORTED``, or ``ABORTED_BEFORE_DISPATCH``), the session log
    is balanced, and then the ``CancelledError`` goes on. ``clock`` is the guest run's trio
    clock, as for :func:`run`. Every other keyword is :func:`dsh_tools.run_tool_calls`' own.

    Raises:
        RuntimeError: no asyncio loop is running in this thread.
        TypeError, ValueError: as :func:`dsh_tools.run_tool_calls`.
    """
    controller = CancelController()
    fused = controller.signal if signal is None else CancelSignal.any(signal, controller.signal)
    requests = list(calls)
    return await _guest_run(
        lambda: _run_tool_calls(registry, requests, signal=fused, **options),
        lambda: controller.cancel("cancelled by asyncio"),
        clock,
    )


async def resume_tool_calls(
    registry: ToolRegistry,
    session: SessionLog,
    *,
    signal: CancelSignal | None = None,
    approvals: Mapping[str, object] | None = None,
    clock: trio.abc.Clock | None = None,
    **options: Any,
) -> ToolBatch | None:
    """:func:`dsh_tools.resume_tool_calls` for asyncio code, as :func:`run_tool_calls` is
    for :func:`dsh_tools.run_tool_calls` (cancelling the awaiting task fires the signal).
    """
    controller = CancelController()
    fused = controller.signal if signal is None else CancelSignal.any(signal, controller.signal)
    return await _guest_run(
        lambda: _resume_tool_calls(registry, session, signal=fused, approvals=approvals, **options),
        lambda: controller.cancel("cancelled by asyncio"),
        clock,
    )


async def run_asyncio(async_fn: Callable[[*Args], Awaitable[T]], *args: *Args) -> T:
    """From trio code running as a guest of an asyncio loop (a tool body of a batch started
    with this module): run the asyncio coroutine ``async_fn(*args)`` on the host loop, and
    return its result (or raise its exception).

    Trio cancelling the caller (the batch's signal, a timeout) cancels the asyncio task, waits
    for it to finish, and raises ``trio.Cancelled``, as any trio checkpoint would.

    Raises:
        RuntimeError: the caller does not run in a guest run this module started.
    """
    loop = _HOST.get(None)
    if loop is None:
        raise RuntimeError(
            "run_asyncio() needs an asyncio host: the batch must run through dsh_tools.aio "
            "(trio's guest mode on the asyncio loop)"
        )
    token = trio.lowlevel.current_trio_token()
    ended = trio.Event()
    task: asyncio.Future[T] = asyncio.ensure_future(_awaited(async_fn, *args), loop=loop)
    task.add_done_callback(lambda _task: _set_soon(token, ended))
    try:
        await ended.wait()
    except trio.Cancelled:
        task.cancel()
        with trio.CancelScope(shield=True):
            await ended.wait()
        raise
    return task.result()


async def _awaited(async_fn: Callable[[*Args], Awaitable[T]], *args: *Args) -> T:
    return await async_fn(*args)


def _set_soon(token: trio.lowlevel.TrioToken, event: trio.Event) -> None:
    with contextlib.suppress(trio.RunFinishedError):  # the guest run ended: nobody waits
        token.run_sync_soon(event.set)
