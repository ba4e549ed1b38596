"""`Disposer`: the undo handle every registration returns."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import final

import attrs

__all__ = ["Disposer"]


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
