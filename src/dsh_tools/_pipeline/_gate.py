"""The registry's gate: conflict keys, weighted capacity classes and rates held for the calls
of every batch of one registry, and, through a shared :class:`~dsh_tools.Limiter`, of every
process.

A call asks on the lane, in model order (:meth:`Gate.request`), so a batch's calls are served
in model order; it then waits in its own task (:meth:`Gate.hold`) until the gate grants the
whole claim at once, never a part of it. Each key, and each class, serves its waiters first come
first served (a call waiting for a key does not hold back the other calls of its class): the
earliest waiting claim is first in every queue it is in, so it waits only for holders, which
are running bodies; no set of waiting calls can deadlock.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from dsh_tools._values._definition import ToolDefinition
from dsh_tools._values._limits import (
    LimitClaim,
    Limiter,
    RateLimit,
    check_conflict_keys,
)

__all__ = ["LOCAL_ONLY", "Gate", "Ticket"]

logger: Final = logging.getLogger("dsh_tools")

Release = Callable[[], Awaitable[None]]


class Ticket:
    """One call's claim at the gate: waiting, then granted until released."""

    __slots__ = ("claim", "granted", "retry_at", "seq", "wake")

    def __init__(self, claim: LimitClaim, seq: int) -> None:
        self.claim = claim
        self.seq = seq
        self.granted = False
        # what the waiting task sleeps on (made when it first waits), and until when (a
        # rate's token): set when the ticket is granted, or may be granted sooner than that
        self.wake: trio.Event | None = None
        self.retry_at = math.inf


class Gate:
    """What a registry holds for its calls (see the module's text).

    Attributes:
        capacity_limits: the registry's capacity classes (slots per class).
        rate_limits: the registry's rates per class.
        shared: the limiter every process shares, if any.
        limits_classes: whether a tool's capacity class can matter here (a limit or a rate).
    """

    __slots__ = (
        "_class_waiting",
        "_in_use",
        "_keys",
        "_seq",
        "_starts",
        "_waiting",
        "capacity_limits",
        "limits_classes",
        "rate_limits",
        "shared",
    )

    def __init__(
        self,
        capacity_limits: dict[str, int],
        rate_limits: dict[str, RateLimit],
        shared: Limiter | None,
    ) -> None:
        self.capacity_limits = capacity_limits
        self.rate_limits = rate_limits
        self.shared = shared
        self.limits_classes = bool(capacity_limits or rate_limits)
        # per key, its holder (if granted) then its waiters, in request order
        self._keys: dict[str, deque[Ticket]] = {}
        # per class: slots in use, waiters in request order, starts within the rate window
        self._in_use = dict.fromkeys(capacity_limits, 0)
        self._class_waiting: dict[str, deque[Ticket]] = {}
        self._starts: dict[str, deque[float]] = {name: deque() for name in rate_limits}
        # every waiting ticket, in request order
        self._waiting: dict[int, Ticket] = {}
        self._seq = 0

    def claim(self, tool: ToolDefinition, arguments: object) -> LimitClaim | None:
        """What a call of ``tool`` with ``arguments`` (its validated arguments) needs here, or
        ``None`` when it needs nothing. Raises what the tool's ``conflict_keys`` raised, or
        ``TypeError`` for what it returned that is not a collection of keys.
        """
        keys: tuple[str, ...] = ()
        conflict_keys = tool.conflict_keys
        if conflict_keys is not None:
            returned = conflict_keys(arguments)
            # None: no keys (define_tool's reader answers None for arguments its tool rejects)
            if returned is not None:
                keys = check_conflict_keys(returned)
        name = tool.capacity_class
        limit = None if name is None else self.capacity_limits.get(name)
        rate = None if name is None else self.rate_limits.get(name)
        if not keys and limit is None and rate is None:
            return None
        return LimitClaim(
            keys=keys,
            capacity_class=None if limit is None else name,
            weight=0 if limit is None else min(tool.capacity_weight, limit),
            capacity_limit=limit,
            rate=rate,
            rate_class=None if rate is None else name,
        )

    def request(self, claim: LimitClaim) -> Ticket:
        """Queue ``claim`` behind every earlier request (on the lane: model order)."""
        self._seq += 1
        ticket = Ticket(claim, self._seq)
        for key in claim.keys:
            self._keys.setdefault(key, deque()).append(ticket)
        name = _class_of(claim)
        if name is not None:
            self._class_waiting.setdefault(name, deque()).append(ticket)
        self._waiting[ticket.seq] = ticket
        # granted at once when nothing holds it back (the common case: no waiting, no scan)
        now = trio.current_time() if claim.rate is not None else 0.0
        if self._try(ticket, now) is None:
            self._grant(ticket, now)
        return ticket

    async def hold(self, ticket: Ticket) -> Release:
        """Wait until the gate, then the shared limiter, holds ``ticket``'s claim; return what
        releases the shared limiter's hold (:data:`LOCAL_ONLY` when there is none), to await
        (shielded) before :meth:`release`. Cancelled, it holds nothing. An exception of the
        shared limiter is raised (after the gate's hold is released).
        """
        shared = self.shared
        if ticket.granted and (shared is None or not ticket.claim.shares_anything):
            # granted as it asked, nothing shared: the body's dispatch is the cancel point
            return LOCAL_ONLY  # noqa: ASYNC910
        try:
            # inside the try: a call cancelled before it waited leaves the queue too
            await trio.lowlevel.checkpoint_if_cancelled()
            while not ticket.granted:
                retry_at = self._grant_ready(ticket)
                if ticket.granted:
                    # a grant may make the next waiter of a class first: it looks again
                    self._grant_ready()
                    break
                ticket.retry_at = retry_at
                wake = ticket.wake = trio.Event()
                with trio.move_on_at(retry_at):
                    await wake.wait()
        except BaseException:
            if ticket.granted:
                self.release(ticket)
            else:
                self._withdraw(ticket)
            raise
        if shared is None or not ticket.claim.shares_anything:
            return LOCAL_ONLY
        try:
            release_shared = await shared.acquire(ticket.claim)
        except BaseException:
            self.release(ticket)
            raise
        return _logging(release_shared)

    # --- the queues ------------------------------------------------------------------------

    def _grant_ready(self, asking: Ticket | None = None) -> float:
        """Grant every waiting ticket that can be granted now, in request order, and wake a
        waiter whose rate frees a token sooner than it sleeps for; return when ``asking``
        (still waiting) should look again (infinity: when it is woken).
        """
        now = trio.current_time()
        retry_at = math.inf
        for ticket in list(self._waiting.values()):
            at = self._try(ticket, now)
            if at is None:
                self._grant(ticket, now)
            elif ticket is asking:
                retry_at = at
            elif at < ticket.retry_at and ticket.wake is not None:
                ticket.wake.set()
        return retry_at

    def _try(self, ticket: Ticket, now: float) -> float | None:
        """``None`` if ``ticket`` can be granted now; else when its rate frees a token (or
        infinity, when something else holds it back).
        """
        if not self._keys_free(ticket):
            return math.inf
        claim = ticket.claim
        name = _class_of(claim)
        if name is None:
            return None
        # first come first served among the class's waiters whose keys are free (one waiting
        # for a key holds back nobody of its class; a heavy one waiting for room does)
        for first in self._class_waiting[name]:
            if first is ticket:
                break
            if self._keys_free(first):
                return math.inf
        limit = claim.capacity_limit
        if limit is not None and self._in_use[name] + claim.weight > limit:
            return math.inf
        rate = claim.rate
        if rate is not None:
            starts = self._starts[name]
            # the same sum as the time returned to wait for: a token is back exactly then
            while starts and starts[0] + rate.per <= now:
                starts.popleft()
            if len(starts) >= rate.calls:
                return starts[0] + rate.per
        return None

    def _keys_free(self, ticket: Ticket) -> bool:
        """Whether ``ticket`` is first in the queue of each of its keys."""
        keys = self._keys
        return all(keys[key][0] is ticket for key in ticket.claim.keys)

    def _grant(self, ticket: Ticket, now: float) -> None:
        claim = ticket.claim
        name = _class_of(claim)
        if name is not None:
            self._class_waiting[name].remove(ticket)
            if claim.capacity_limit is not None:
                self._in_use[name] += claim.weight
            if claim.rate is not None:
                self._starts[name].append(now)
        del self._waiting[ticket.seq]
        ticket.granted = True
        if ticket.wake is not None:
            ticket.wake.set()

    def release(self, ticket: Ticket) -> None:
        """Release a granted ticket's hold here (after its shared release, if any)."""
        claim = ticket.claim
        for key in claim.keys:
            queue = self._keys[key]
            queue.popleft()
            if not queue:
                del self._keys[key]
        if claim.capacity_limit is not None and claim.capacity_class is not None:
            self._in_use[claim.capacity_class] -= claim.weight
        ticket.granted = False
        if self._waiting:
            self._grant_ready()

    def _withdraw(self, ticket: Ticket) -> None:
        claim = ticket.claim
        for key in claim.keys:
            queue = self._keys[key]
            queue.remove(ticket)
            if not queue:
                del self._keys[key]
        name = _class_of(claim)
        if name is not None:
            self._class_waiting[name].remove(ticket)
        del self._waiting[ticket.seq]
        if self._waiting:
            self._grant_ready()


async def _nothing_shared() -> None:
    pass  # noqa: ASYNC910 (never awaited: compared by identity)


LOCAL_ONLY: Final[Release] = _nothing_shared
"""What :meth:`Gate.hold` returns when no shared limiter holds anything for the claim."""


def _logging(release: Release) -> Release:
    async def release_shared() -> None:  # noqa: ASYNC910 (awaited shielded)
        try:
            await release()
        except Exception:
            # a lost connection freed the shared hold with it
            logger.warning("the shared limiter could not release a hold", exc_info=True)

    return release_shared


def _class_of(claim: LimitClaim) -> str | None:
    """The class whose queue a claim waits in: its limited class, or its rate's."""
    return claim.capacity_class if claim.capacity_class is not None else claim.rate_class
