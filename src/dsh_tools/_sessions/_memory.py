"""A session log in memory (tests, demos, short-lived agents)."""

from __future__ import annotations

import attrs

from ._events import SessionEvent, check_event
from ._log import notify_appended

__all__ = ["MemorySessionLog"]


@attrs.define(eq=False)
class MemorySessionLog:
    """A :class:`SessionLog` in memory (tests, demos, short-lived agents)."""

    _events: list[SessionEvent] = attrs.field(factory=lambda: list[SessionEvent](), init=False)

    def append(self, event: SessionEvent, /) -> int:
        """Store ``event``; return its sequence number.

        Raises:
            TypeError: ``event`` is not a session event.
        """
        check_event(event)
        self._events.append(event)
        notify_appended(self)
        return len(self._events) - 1

    def events(self) -> list[SessionEvent]:
        """A fresh list of every stored event, in append order."""
        return list(self._events)
