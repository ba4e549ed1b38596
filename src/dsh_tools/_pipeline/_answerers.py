"""Approval answerers: their types, and the chain a request asks them through.

An answerer is a plug-in: its annotation is not trusted. The chain reads each reply as an
:class:`~dsh_tools.ApprovalOutcome`; anything else (a value outside it, or a reply that is not
awaitable) is a rogue answer, logged and read as ``UNAVAILABLE``. The end of the chain answers
``UNAVAILABLE``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeAlias, cast

import trio

from dsh_tools._values._execution import (
    Approval,
    ApprovalOutcome,
    ApprovalRequest,
    read_approval,
)

from ._hooks import waterfall

__all__ = ["ApprovalAnswerer", "ApprovalNext", "answer_chain"]

logger: Final = logging.getLogger("dsh_tools")


ApprovalNext: TypeAlias = Callable[[], Awaitable[ApprovalOutcome | Approval]]
"""Asks the rest of the answerers (``UNAVAILABLE`` at the end of the chain)."""

ApprovalAnswerer: TypeAlias = Callable[
    [ApprovalRequest, ApprovalNext], Awaitable[ApprovalOutcome | Approval]
]
"""``async (request, next) -> ApprovalOutcome | Approval``: answer (an :class:`Approval` to
approve edited arguments or add a note), or delegate with ``return await next()``."""


def answer_chain(answerers: Sequence[ApprovalAnswerer], request: ApprovalRequest) -> ApprovalNext:
    """The waterfall of ``answerers`` for ``request``: calling it asks the first, whose
    ``next()`` asks the second, and so on; each reply is checked (see the module docs).
    """
    return waterfall(tuple(_checked(answerer) for answerer in answerers), (request,), _unavailable)


async def _unavailable() -> ApprovalOutcome | Approval:
    await trio.lowlevel.checkpoint()
    return ApprovalOutcome.UNAVAILABLE


def _checked(answerer: ApprovalAnswerer) -> ApprovalAnswerer:
    """``answerer``, with its reply read as an :class:`ApprovalOutcome` (a plug-in: its
    annotation is not trusted; anything else is a rogue answer, read as unavailable).
    """

    async def step(request: ApprovalRequest, rest: ApprovalNext) -> ApprovalOutcome | Approval:
        pending = cast(object, answerer(request, rest))
        if not inspect.isawaitable(pending):
            await trio.lowlevel.checkpoint()
            return _rogue(request, pending, "returned (not awaitable)")
        answer = cast(object, await pending)
        known, approval = read_approval(answer)
        if known is None:
            return _rogue(request, answer, "answered")
        return known if approval is None else approval

    return step


def _rogue(request: ApprovalRequest, answer: object, how: str) -> ApprovalOutcome:
    logger.warning(
        "tool %r call %r: an approval answerer %s %r, not an ApprovalOutcome or Approval: unavailable",
        request.tool_name,
        request.call_id,
        how,
        answer,
    )
    return ApprovalOutcome.UNAVAILABLE
