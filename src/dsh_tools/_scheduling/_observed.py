"""A batch seen from outside its tasks, for the testing kit's explorers: which batch a trio task
runs, with its calls, its log, its registry and agent, and how far it has got.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import trio

from dsh_tools._pipeline._registry import ToolRegistry
from dsh_tools._sessions._log import SessionLog
from dsh_tools._values._batch import ToolCallRequest

from ._active import ACTIVE_BATCH
from ._lane import Batch

__all__ = ["ObservedBatch", "observed_batch"]


@attrs.frozen
class ObservedBatch:
    """One batch at one moment: its identity and its progress then."""

    batch_id: str
    calls: tuple[ToolCallRequest, ...]
    session: SessionLog | None
    registry: ToolRegistry
    agent: object | None
    started: int
    committed: int


def observed_batch(task: trio.lowlevel.Task) -> ObservedBatch | None:
    """The batch ``task`` runs in (its context's active batch), or ``None``."""
    batch = task.context.get(ACTIVE_BATCH)
    if not isinstance(batch, Batch):
        return None
    log = batch.log
    calls: Sequence[ToolCallRequest] = batch.calls
    return ObservedBatch(
        batch_id=batch.batch_id,
        calls=tuple(calls),
        session=None if log is None else log.session,
        registry=batch.registry,
        agent=batch.agent,
        started=batch.started,
        committed=batch.committed,
    )
