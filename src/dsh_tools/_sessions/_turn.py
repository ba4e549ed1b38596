"""A turn of the agent in its session log: ``turn/start`` and ``turn/end`` around it
(``UserApproval`` answers only inside an open turn).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType

import trio

from ._events import TurnEndEvent, TurnStartEvent
from ._log import SessionLog

__all__ = ["session_turn"]


class _SessionTurn:
    __slots__ = ("_session", "_trigger", "_turn")

    def __init__(self, session: SessionLog, turn: int, trigger: object) -> None:
        self._session = session
        self._turn = turn
        self._trigger = trigger

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint()
        self._session.append(TurnStartEvent(turn=self._turn, trigger=self._trigger))

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        kind = "completed" if exc_type is None else "aborted"
        self._session.append(TurnEndEvent(turn=self._turn, kind=kind))
        await trio.lowlevel.cancel_shielded_checkpoint()


def session_turn(
    session: SessionLog, turn: int, *, trigger: object = None
) -> AbstractAsyncContextManager[None]:
    """Bound one agent turn in ``session`` with ``turn/start`` and ``turn/end`` events.

    Use it as ``async with session_turn(session, 1): ...``.

    Appends ``turn/start`` on entry (after a checkpoint: a cancelled caller appends nothing)
    and ``turn/end`` on exit, with ``kind="aborted"`` when the block raised (a cancellation
    included), else ``"completed"``. Exiting is a schedule point that does not raise
    ``trio.Cancelled``. :class:`UserApproval` answers only inside an open turn.

    Args:
        session: the agent's session log.
        turn: the turn's number (a non-negative ``int``).
        trigger: what started the turn, as JSON (optional; logged on ``turn/start``).
    """
    TurnStartEvent(turn=turn, trigger=trigger)  # validate before the block runs
    return _SessionTurn(session, turn, trigger)
