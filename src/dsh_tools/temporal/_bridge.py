"""The one place asyncio runs: an event loop in a side thread, reached from trio.

The Temporal SDK is asyncio-only. Rather than mixing event loops in one thread, a trio program
runs one asyncio loop in one side thread (:func:`open_asyncio_thread`) and hands it coroutines
(:meth:`AsyncioThread.run`): trio awaits their outcome without blocking, and cancelling the
trio side cancels the asyncio task. The other way round, code on the asyncio loop starts a trio
task with the trio token and awaits an asyncio future the task completes
(``loop.call_soon_threadsafe``), so the loop keeps serving heartbeats meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import outcome
import trio

__all__ = ["AsyncioThread", "open_asyncio_thread"]

T = TypeVar("T")


class AsyncioThread:
    """An asyncio event loop running in a side thread (see :func:`open_asyncio_thread`)."""

    __slots__ = ("_loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The side thread's loop."""
        return self._loop

    async def run(self, function: Callable[[], Awaitable[T]]) -> T:
        """Run ``function()`` on the side thread's loop and return its result (or raise its
        exception) in this trio task.

        A checkpoint. Cancelling the calling trio task cancels the asyncio task and waits for
        it to unwind before ``trio.Cancelled`` propagates. The asyncio task runs in a copy of
        the calling task's context (its current trace span goes along).
        """
        token = trio.lowlevel.current_trio_token()
        context = contextvars.copy_context()
        done = trio.Event()
        captured: list[outcome.Outcome[T]] = []
        tasks: list[asyncio.Task[None]] = []

        async def call() -> None:
            # the outcome is kept here, never in the asyncio task: a task cancelled from trio
            # ends quietly instead of holding an exception nobody retrieves
            captured.append(await outcome.acapture(function))

        def wake(_task: object) -> None:
            # trio may have ended first (the loop outlived it): nobody waits any more
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

        def start() -> None:
            task = self._loop.create_task(call(), context=context)
            task.add_done_callback(wake)  # also when it is cancelled before it starts
            tasks.append(task)

        def cancel() -> None:
            tasks[0].cancel()  # start() ran first: the loop runs its callbacks in order

        self._loop.call_soon_threadsafe(start)
        try:
            await done.wait()
        except trio.Cancelled:
            self._loop.call_soon_threadsafe(cancel)
            with trio.CancelScope(shield=True):
                await done.wait()
            raise
        if not captured:
            raise RuntimeError("the asyncio side thread cancelled the call (it is stopping)")
        return captured[0].unwrap()


@asynccontextmanager
async def open_asyncio_thread() -> AsyncGenerator[AsyncioThread]:
    """Start an asyncio loop in a new thread; stop it (cancelling its tasks) and join the
    thread on exit.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="dsh-tools asyncio", daemon=True)
    thread.start()
    try:
        yield AsyncioThread(loop)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_stop, loop, thread)


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    async def cancel_all() -> None:
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await loop.shutdown_asyncgens()

    asyncio.run_coroutine_threadsafe(cancel_all(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()
