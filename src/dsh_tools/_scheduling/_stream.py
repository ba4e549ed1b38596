"""The call stream of a streamed batch: read by the batch's own task (never by a body, and
never waiting for one), each call handed to the lane the moment it arrives.

Reading stops when the stream is exhausted, when it raises (the lane then starts no further
call), when the batch's signal fires, or when the caller's scope is cancelled; then the stream
is closed (``aclose()`` when it has one: shielded, and bounded so that a stream that does not
close cannot hold the batch).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, cast

import trio

from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._signal import linked_cancel_scope

from ._lane import Batch

__all__ = ["READER_TASK", "read_calls"]

logger: Final = logging.getLogger("dsh_tools")

READER_TASK: Final = "dsh_tools.run_tool_calls: call stream"
"""The name of a streamed batch's reader in trio's task tree."""

_CLOSE_TIMEOUT: Final = 5.0
"""How long closing a stream may take before the batch stops waiting for it (seconds)."""


async def read_calls(batch: Batch, stream: AsyncIterator[object]) -> None:
    """Hand every call of ``stream`` to ``batch`` as it arrives, then close the stream."""
    error: BaseException | None = None
    try:
        with linked_cancel_scope(batch.signal):
            async for call in stream:
                _arrive(batch, call)
    except Exception as exc:
        error = exc
    finally:
        _ended(batch, error)
        await _close(stream)


def _arrive(batch: Batch, call: object) -> None:
    """Take a call the stream gave: it joins the batch in model order, its ``batch/call`` is
    logged, and a lane waiting for calls is woken.

    Raises:
        TypeError: it is not a :class:`ToolCallRequest` (the stream fails).
    """
    if type(call) is not ToolCallRequest and not isinstance(call, ToolCallRequest):
        raise TypeError(
            f"the call stream gave {type(call).__name__}, not a ToolCallRequest "
            f"(call {len(batch.calls)})"
        )
    calls = batch.calls
    assert isinstance(calls, list)  # a streamed batch's
    index = len(calls)
    calls.append(call)
    batch.prepared.append(None)
    batch.ready.append(0)
    batch.results.append(None)
    if batch.log is not None:
        batch.log.arrived(index)
    batch.wake()


def _ended(batch: Batch, error: BaseException | None) -> None:
    """The stream is exhausted (``error`` ``None``), stopped, or raised ``error``: no call
    arrives any more; a failed stream starts no further call (a pool stops filling).
    """
    batch.stream_done = True
    if error is not None:
        batch.stream_error = error
        batch.pool_closed = True
    batch.wake()


async def _close(stream: AsyncIterator[object]) -> None:  # noqa: ASYNC910 (shielded: no cancel point)
    aclose = cast("Callable[[], Awaitable[object]] | None", getattr(stream, "aclose", None))
    if not callable(aclose):
        return  # noqa: ASYNC910 (nothing to close; the reader's caller checkpoints)
    with trio.CancelScope(shield=True) as scope:
        scope.deadline = trio.current_time() + _CLOSE_TIMEOUT
        try:
            await aclose()
        except Exception:
            logger.warning("closing the tool call stream raised", exc_info=True)
    if scope.cancelled_caught:
        logger.warning("the tool call stream did not close within %s s", _CLOSE_TIMEOUT)
