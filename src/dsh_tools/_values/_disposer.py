"""`Disposer`, the undo handle every registration returns, `DisposerGroup`, what a scope
uses to own the registrations made through it, and `AgentScope`, what the per-agent scopes
share.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Self, final

import attrs

__all__ = ["AgentScope", "Disposer", "DisposerGroup"]


def _nothing() -> None:
    return None


@final
@attrs.define(eq=False, repr=False)
class Disposer:
    """Undoes one registration. Idempotent: only the first call does anything.

    Call it (``dispose()``) or use it as a context manager, which disposes on exit::

        with registry.register(tool):
            ...  # the tool is registered here

    ``disposed`` tells whether it has run. If the undo raises, the disposer still counts as
    disposed and the error propagates to the first caller.
    """

    _undo: Callable[[], object] | None

    @classmethod
    def noop(cls) -> Disposer:
        """A disposer that has nothing to undo."""
        return cls(_nothing)

    @property
    def disposed(self) -> bool:
        """Whether this disposer has run."""
        return self._undo is None

    def __call__(self) -> None:
        undo = self._undo
        if undo is None:
            return
        self._undo = None
        undo()

    def __enter__(self) -> Disposer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self()

    def __repr__(self) -> str:
        return f"<Disposer {'disposed' if self._undo is None else 'active'}>"


@final
class DisposerGroup:
    """The registrations one scope owns (a :class:`~dsh_tools.ToolScope`, an approval scope):
    released together by :meth:`close`, last first; a closed group refuses new ones.

    Args:
        what: how the owner is named in the error a closed group raises
            (``"this tool scope"``).
    """

    __slots__ = ("_closed", "_next_key", "_owned", "_what")

    def __init__(self, what: str) -> None:
        self._what = what
        self._owned: dict[int, Disposer] = {}
        self._next_key = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def check_open(self) -> None:
        """Raise ``RuntimeError`` once the group is closed."""
        if self._closed:
            raise RuntimeError(f"{self._what} is closed")

    def own(self, disposer: Disposer) -> Disposer:
        """Take ``disposer`` into the group; return the disposer the caller gets back (it also
        leaves the group). A closed group undoes it at once (it was already registered, e.g. a
        hook added through a closed scope's hook point), then raises.
        """
        if self._closed:
            disposer()
            self.check_open()
        key = self._next_key
        self._next_key = key + 1
        owned = self._owned

        def undo() -> None:
            owned.pop(key, None)
            disposer()

        held = owned[key] = Disposer(undo)
        return held

    def close(self) -> bool:
        """Undo every registration still held, last first; ``False`` if already closed.

        Every one is undone even if one raises; the first error is raised afterwards.
        """
        if self._closed:
            return False
        self._closed = True
        error: Exception | None = None
        while self._owned:
            _key, disposer = self._owned.popitem()
            try:
                disposer()
            except Exception as exc:
                if error is None:
                    error = exc
        if error is not None:
            raise error
        return True


class AgentScope:
    """What the registrations of one agent (a :class:`~dsh_tools.ToolScope`, an approval
    scope) share: the agent, the registrations made through the scope, released by
    :meth:`close` or by leaving the ``with`` block, and how the scope shows itself.

    A subclass names its owner's table in ``_forget``, which :meth:`close` runs last (the
    owner then hands out a fresh scope for the agent).
    """

    __slots__ = ("_owned", "agent")

    def __init__(self, agent: object, what: str) -> None:
        self.agent = agent
        self._owned = DisposerGroup(what)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._owned.closed

    def close(self) -> None:
        """Undo every registration made through this scope, last first. Idempotent.

        Every registration is undone even if one undo raises (a ``change`` listener); the
        first error is raised afterwards.
        """
        try:
            self._owned.close()
        finally:
            self._forget()

    def _forget(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._owned.closed else "open"
        return f"<{type(self).__name__} {state} agent={self.agent!r}>"
