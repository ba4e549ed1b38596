"""A bound on each round trip of a session log's connection.

An append runs on the trio loop's thread (the :class:`~dsh_tools.SessionLog` protocol is
synchronous), so a server that stops answering (a stalled backend, a partitioned network)
would freeze the loop, and every deadline with it, for as long as it stalls. PostgreSQL's own
timeouts run in the server, which is the part that stalled. So one watchdog thread per process
keeps the deadline of every round trip in progress; when one passes, it shuts the
connection's socket down: the waiting call returns at once with the connection lost, and the
log raises :class:`TimeoutError`.

Arming and disarming is two acquisitions of one lock: no thread is started per round trip, and
the watchdog's thread wakes only when a deadline is due, not per round trip.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time
from typing import Final

__all__ = ["Watchdog", "WATCHDOG"]


class Watchdog:
    """Deadlines of round trips in progress, each with the socket to cut when it passes."""

    __slots__ = ("_armed", "_condition", "_cut", "_thread", "_tokens", "_wake")

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        # token -> (deadline on time.monotonic(), the socket's file descriptor)
        self._armed: dict[int, tuple[float, int]] = {}
        self._cut: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        # when the thread wakes next (None: when notified): arming a later deadline, as every
        # round trip after the first does, wakes nothing
        self._wake: float | None = None

    def arm(self, fd: int, seconds: float) -> int:
        """Cut ``fd`` unless :meth:`disarm` comes within ``seconds``; the token to disarm."""
        deadline = time.monotonic() + seconds
        with self._condition:
            token = next(self._tokens)
            self._armed[token] = (deadline, fd)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dsh-tools postgres watchdog", daemon=True
                )
                self._thread.start()
            elif self._wake is None or deadline < self._wake:
                self._condition.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching ``token``; whether its socket was cut (its deadline passed first)."""
        with self._condition:
            self._armed.pop(token, None)
            if token in self._cut:
                self._cut.discard(token)
                return True
            return False

    def _run(self) -> None:
        with self._condition:
            while True:
                now = time.monotonic()
                for token, (deadline, fd) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[token]
                        self._cut.add(token)
                        _shut_down(fd)
                self._wake = min((d for d, _ in self._armed.values()), default=None)
                self._condition.wait(None if self._wake is None else self._wake - now)


def _shut_down(fd: int) -> None:
    """Shut the socket behind ``fd`` down for both directions (its owner's blocked wait wakes
    to a lost connection); ``fd`` itself stays its owner's to close.
    """
    try:
        duplicate = os.dup(fd)
    except OSError:
        return  # closed already: nothing waits on it
    try:
        sock = socket.socket(fileno=duplicate)
    except OSError:
        os.close(duplicate)
        return
    with sock, contextlib.suppress(OSError):  # OSError: not connected any more
        sock.shutdown(socket.SHUT_RDWR)


WATCHDOG: Final = Watchdog()
"""The process's one watchdog."""
