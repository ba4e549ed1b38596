"""The batch running in the current task, as bodies, wrappers and hooks reach it:
:func:`batch_statistics`, :func:`inject_context`, and :func:`current_turn` (for the call
budget).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from typing import Final, Protocol

from dsh_tools._pipeline._results import freeze_context
from dsh_tools._values._batch import ToolBatchStatistics, ToolCallRequest
from dsh_tools._values._content import HookContext

__all__ = ["ACTIVE_BATCH", "ActiveBatch", "batch_statistics", "current_turn", "inject_context"]

logger: Final = logging.getLogger("dsh_tools")


class ActiveBatch(Protocol):
    """What the current task's batch shows of itself."""

    @property
    def active(self) -> bool: ...
    @property
    def calls(self) -> Sequence[ToolCallRequest]: ...
    @property
    def started(self) -> int: ...
    @property
    def committed(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def turn(self) -> int: ...
    def inject(self, context: HookContext) -> None: ...


ACTIVE_BATCH: Final = contextvars.ContextVar[ActiveBatch | None](
    "dsh_tools_active_batch", default=None
)
"""The batch running in the current task (set by the bracket for the batch's whole run)."""


def batch_statistics() -> ToolBatchStatistics:
    """How far the batch running in the current task has got: its calls, how many started,
    how many committed, how many bodies of its current pool are in flight.

    Call it from a tool body, an ``execute`` wrapper or a hook while :func:`run_tool_calls`
    runs (found like :func:`inject_context`'s batch). Not a checkpoint.

    Raises:
        RuntimeError: no batch is running in this task.
    """
    batch = ACTIVE_BATCH.get()
    if batch is None or not batch.active:
        raise RuntimeError("batch_statistics() called outside an active batch")
    return ToolBatchStatistics(
        calls=len(batch.calls),
        started=batch.started,
        committed=batch.committed,
        in_flight=batch.in_flight,
    )


def current_turn() -> int | None:
    """The turn of the batch running in the current task, or ``None`` outside a batch
    (internal: the call budget counts per turn).
    """
    batch = ACTIVE_BATCH.get()
    if batch is None or not batch.active:
        return None
    return batch.turn


def inject_context(context: HookContext) -> None:
    """Put ``context`` into the context FIFO of the batch running in the current task.

    Call it from a tool body, an ``execute`` wrapper or a hook while :func:`run_tool_calls` runs
    (the batch is found through a ``contextvars`` value that ``run_tool_calls`` sets, and that
    trio passes on to the tasks and worker threads it starts). The context joins the FIFO at
    call time: before the contexts of every call that commits later, after those of calls
    committed already. Its ``context/message`` event, like every context's, is appended after
    every ``tool/result`` of the batch. Not a checkpoint.

    Args:
        context: the context; checked and frozen now (its ``meta`` must be lossless JSON).

    Raises:
        TypeError: ``context`` is not a :class:`~dsh_tools.HookContext`, or is not lossless JSON:
            ``agent context must be losslessly JSON-serializable``.
        RuntimeError: no batch is running in this task:
            ``inject_context() called outside an active batch``.
    """
    batch = ACTIVE_BATCH.get()
    if batch is None or not batch.active:
        raise RuntimeError("inject_context() called outside an active batch")
    if not isinstance(context, HookContext):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"inject_context() takes a HookContext, not {type(context).__name__}")
    try:
        frozen = freeze_context(context)
    except Exception as exc:
        logger.warning("inject_context(): context rejected: %s", exc)
        raise TypeError("agent context must be losslessly JSON-serializable") from exc
    batch.inject(frozen)
