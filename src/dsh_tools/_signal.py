"""Cancellation as data: :class:`CancelController` owns a :class:`CancelSignal`.

A signal is how cancellation crosses API boundaries that trio's own cancel scopes cannot: a
batch-wide "the user pressed Esc", a timeout wrapper's deadline, an approval prompt. The
registry fuses the signals that apply to one tool body and links the result to a
``trio.CancelScope`` around the body (:func:`linked_cancel_scope`), so plain trio code is
cancelled at its next checkpoint and code that forwards cancellation elsewhere reads the signal.

Deadlines are data, not timer tasks. A signal with a deadline counts as cancelled, with a
:class:`DeadlineReached` reason, from the moment trio's clock reaches it. Its ``on_cancel``
callbacks run the first time that is observed (``cancelled``, ``reason``, ``wait()``, a fusion
or a cancel), while a linked cancel scope is cancelled by trio exactly at the deadline. Because
the check is made against the clock whenever a signal is cancelled, a deadline that passed
first keeps its reason even when an explicit cancel is observed earlier.

Signals are used from the trio thread they belong to; callbacks run synchronously inside
``cancel()``, in registration order. A callback that raises is logged to the ``dsh_tools``
logger and does not stop the others.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, ClassVar, Final, final

import attrs
import trio

from ._disposer import Disposer

__all__ = [
    "CancelController",
    "CancelSignal",
    "CancelSignalStatistics",
    "DeadlineReached",
    "fuse",
    "linked_cancel_scope",
]

logger: Final = logging.getLogger("dsh_tools")

CancelCallback = Callable[[object], object]
"""Called with the signal's reason when it is cancelled."""


@attrs.frozen(kw_only=True)
class DeadlineReached:
    """The reason of a signal that was cancelled because its deadline passed."""

    deadline: float
    """The deadline, in trio clock time."""


@attrs.frozen(kw_only=True)
class CancelSignalStatistics:
    """What :meth:`CancelSignal.statistics` reports (trio's ``statistics()`` convention): a
    frozen snapshot for tests and debugging, not a live view.
    """

    cancel_callbacks: int
    """Callbacks waiting for the signal to fire: ``on_cancel`` registrations, linked cancel
    scopes and fused signals that are still attached. ``0`` once it has fired."""

    deadline_listeners: int
    """Watchers of the signal's deadline (linked cancel scopes, fused signals, ``wait()``
    calls) that follow it when it moves. ``0`` once it has fired."""


def _now() -> float:
    try:
        return trio.current_time()
    except RuntimeError:  # outside trio.run: no clock, so no deadline can have passed
        return -math.inf


class _SignalCore:
    """The state of a :class:`CancelSignal` and the operations the package performs on it
    (internal).

    The public class shows the read-only face; :class:`CancelController`, :func:`fuse` and
    :func:`linked_cancel_scope` use these methods, which are not part of the public API.
    """

    __slots__ = (
        "__weakref__",
        "_callbacks",
        "_cancelled",
        "_deadline",
        "_deadline_callbacks",
        "_event",
        "_next_key",
        "_reason",
    )

    _cancelled: bool
    _reason: object
    _deadline: float
    _callbacks: dict[int, CancelCallback] | None
    _deadline_callbacks: dict[int, Callable[[float], object]] | None
    _event: trio.Event | None
    _next_key: int

    def __init__(self, deadline: float, cancelled: bool, reason: object) -> None:
        # only through _new_signal (CancelSignal's own __init__ refuses construction)
        self._cancelled = cancelled
        self._reason = reason
        self._deadline = deadline
        self._callbacks = None
        self._deadline_callbacks = None
        self._event = None
        self._next_key = 0

    def add_callback(self, callback: CancelCallback) -> int:
        callbacks = self._callbacks
        if callbacks is None:
            callbacks = self._callbacks = {}
        key = self._next_key
        self._next_key = key + 1
        callbacks[key] = callback
        return key

    def remove_callback(self, key: int) -> None:
        callbacks = self._callbacks
        if callbacks is not None:
            callbacks.pop(key, None)

    def on_deadline_change(self, callback: Callable[[float], object]) -> Callable[[], None]:
        callbacks = self._deadline_callbacks
        if callbacks is None:
            callbacks = self._deadline_callbacks = {}
        key = self._next_key
        self._next_key = key + 1
        callbacks[key] = callback

        def undo() -> None:
            callbacks.pop(key, None)

        return undo

    def set_deadline(self, when: float) -> None:
        # a deadline that has already passed (unobserved) has cancelled the signal, and moving
        # it later must not undo that
        if self._cancelled:
            return
        if self._deadline != math.inf and _now() >= self._deadline:
            self.fire(DeadlineReached(deadline=self._deadline))
            return
        if when == self._deadline:
            return
        self._deadline = when
        if self._deadline_callbacks:
            for callback in tuple(self._deadline_callbacks.values()):
                callback(when)
        # a deadline already in the past fires now
        if not self._cancelled and self._deadline != math.inf and _now() >= self._deadline:
            self.fire(DeadlineReached(deadline=self._deadline))

    def fire(self, reason: object) -> None:
        if self._cancelled:
            return
        if (
            self._deadline != math.inf
            and _now() >= self._deadline
            # a source's deadline that passed before this signal's own does not win over it
            and not (isinstance(reason, DeadlineReached) and reason.deadline <= self._deadline)
        ):
            reason = DeadlineReached(deadline=self._deadline)
        self._cancelled = True
        self._reason = reason
        self._deadline_callbacks = None
        if self._event is not None:
            self._event.set()
        callbacks = self._callbacks
        self._callbacks = None
        if callbacks:
            for callback in callbacks.values():
                try:
                    callback(reason)
                except Exception:
                    logger.exception("CancelSignal callback failed")


def _new_signal(
    deadline: float = math.inf, *, cancelled: bool = False, reason: object = None
) -> CancelSignal:
    """A fresh signal; ``cancelled=True`` gives one born cancelled with ``reason``."""
    signal = object.__new__(CancelSignal)
    _SignalCore.__init__(signal, deadline, cancelled, reason)
    return signal


@final
class CancelSignal(_SignalCore):
    """A read-only view of cancellation state. Obtain one from :class:`CancelController`,
    :meth:`CancelSignal.any` or :meth:`CancelSignal.never`; it has no public constructor.
    """

    __slots__ = ()

    _never_instance: ClassVar[CancelSignal | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("CancelSignal has no public constructor: use CancelController().signal")

    # --- reading -------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """Whether the signal is cancelled (explicitly, through a fused source, or because its
        deadline has passed).
        """
        if self._cancelled:
            return True
        if self._deadline != math.inf and _now() >= self._deadline:
            self.fire(DeadlineReached(deadline=self._deadline))
            return True
        return False

    @property
    def reason(self) -> object:
        """Why the signal was cancelled: the first reason given, a :class:`DeadlineReached`,
        or ``None`` while it is not cancelled (or when cancelled without a reason).
        """
        return self._reason if self.cancelled else None

    @property
    def deadline(self) -> float:
        """When the signal cancels itself, in trio clock time; ``math.inf`` for never."""
        return self._deadline

    async def wait(self) -> None:
        """Return once the signal is cancelled.

        A checkpoint on every path: it yields even when the signal is already cancelled.
        Cancelling the waiting task's own scope raises ``trio.Cancelled`` as usual.
        """
        if self.cancelled:
            await trio.lowlevel.checkpoint()
            return
        event = self._event
        if event is None:
            event = self._event = trio.Event()
        with trio.CancelScope(deadline=self._deadline) as scope:
            undo = self.on_deadline_change(lambda when: setattr(scope, "deadline", when))
            try:
                await event.wait()
            finally:
                undo()
        if not event.is_set():
            self.cancelled  # noqa: B018 - observing the passed deadline fires the signal

    def on_cancel(self, callback: CancelCallback) -> Disposer:
        """Call ``callback(reason)`` once when the signal is cancelled.

        If it is already cancelled, ``callback`` runs now. Returns a :class:`Disposer` that
        unregisters it (a no-op once it has run).

        Raises:
            TypeError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        if self.cancelled:
            callback(self._reason)
            return Disposer.noop()
        if self is CancelSignal._never_instance:
            # it can never fire: keeping the callback would only leak it
            return Disposer.noop()
        key = self.add_callback(callback)
        return Disposer(lambda: self.remove_callback(key))

    def statistics(self) -> CancelSignalStatistics:
        """How many callbacks and deadline watchers the signal holds right now.

        Not a checkpoint; does not observe the deadline (a signal whose deadline has passed
        unobserved still reports its watchers).
        """
        return CancelSignalStatistics(
            cancel_callbacks=len(self._callbacks or ()),
            deadline_listeners=len(self._deadline_callbacks or ()),
        )

    # --- construction helpers ------------------------------------------------------------

    @classmethod
    def never(cls) -> CancelSignal:
        """The signal that is never cancelled (one shared instance)."""
        never = cls._never_instance
        if never is None:
            never = cls._never_instance = _new_signal()
        return never

    @classmethod
    def any(cls, *signals: CancelSignal) -> CancelSignal:
        """A fresh signal cancelled when any of ``signals`` is, with that signal's reason.

        If several are already cancelled, the first in argument order gives the reason. The
        deadline is the earliest of theirs. The fused signal detaches from its sources once it
        fires; until then each source holds one callback for it.

        Raises:
            TypeError: an argument is not a :class:`CancelSignal`.
        """
        for index, signal in enumerate(signals):
            if not isinstance(signal, CancelSignal):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(
                    f"signals[{index}] must be a CancelSignal, not {type(signal).__name__}"
                )
        return fuse(signals)[0]

    def __repr__(self) -> str:
        state = f"cancelled reason={self._reason!r}" if self._cancelled else "active"
        deadline = "" if self._deadline == math.inf else f" deadline={self._deadline}"
        return f"<CancelSignal {state}{deadline}>"


def fuse(
    signals: tuple[CancelSignal, ...], deadline: float = math.inf
) -> tuple[CancelSignal, Callable[[], None]]:
    """Fuse ``signals`` into a fresh signal; also return the function that detaches it.

    ``deadline`` is an extra deadline of the fused signal itself (what fusing with a
    deadline-only controller would give, without the controller).
    """
    own_deadline = deadline
    deadline = min(own_deadline, min((s.deadline for s in signals), default=math.inf))
    for source in signals:
        if source.cancelled:
            # fired before taking the deadline: a cancelled source's stale deadline must not
            # replace the reason it was cancelled with
            return _new_signal(deadline, cancelled=True, reason=source.reason), _nothing
    fused = _new_signal(deadline)
    undos: list[Callable[[], None]] = []

    def detach() -> None:
        for undo in undos:
            undo()
        undos.clear()

    def on_source_cancel(reason: object) -> None:
        detach()
        fused.fire(reason)

    def on_source_deadline(_when: float) -> None:
        fused.set_deadline(min(own_deadline, min(s.deadline for s in signals)))

    for source in signals:
        if source is CancelSignal.never():
            continue
        key = source.add_callback(on_source_cancel)
        undos.append(lambda source=source, key=key: source.remove_callback(key))
        undos.append(source.on_deadline_change(on_source_deadline))
    return fused, detach


def _nothing() -> None:
    return None


@final
@attrs.define(eq=False, init=False, repr=False)
class CancelController:
    """Owns a :class:`CancelSignal` and cancels it.

    Args:
        deadline: optional trio clock time at which the signal cancels itself.
    """

    _signal: CancelSignal

    def __init__(self, *, deadline: float | None = None) -> None:
        # the deadline is the signal's, not the controller's: it is not a field
        self._signal = _new_signal(math.inf if deadline is None else _check_deadline(deadline))

    @property
    def signal(self) -> CancelSignal:
        """The read-only signal this controller cancels."""
        return self._signal

    def cancel(self, reason: object = None) -> None:
        """Cancel the signal. Idempotent: the first reason sticks. Callbacks run now."""
        self._signal.fire(reason)

    def set_deadline(self, when: float | None) -> None:
        """Move the deadline (trio clock time; ``None`` removes it). No effect once cancelled.

        Linked cancel scopes and fused signals follow the new deadline.
        """
        self._signal.set_deadline(math.inf if when is None else _check_deadline(when))

    def __repr__(self) -> str:
        return f"<CancelController {self._signal!r}>"


def _check_deadline(when: float) -> float:
    if isinstance(when, bool) or not isinstance(when, int | float) or math.isnan(when):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"deadline must be a number (trio clock time), not {when!r}")
    return float(when)


class _LinkedCancelScope:
    """The context manager behind :func:`linked_cancel_scope` (a class, not a generator: it
    sits on the per-call hot path).
    """

    __slots__ = ("_key", "_scope", "_signal", "_undo_deadline")

    def __init__(self, signal: CancelSignal) -> None:
        self._signal = signal
        self._scope = trio.CancelScope(deadline=signal.deadline)
        self._key: int | None = None
        self._undo_deadline: Callable[[], None] | None = None

    def __enter__(self) -> trio.CancelScope:
        signal = self._signal
        scope = self._scope
        if signal.cancelled:
            scope.cancel()
        else:
            self._key = signal.add_callback(lambda _reason: scope.cancel())
            self._undo_deadline = signal.on_deadline_change(
                lambda when: setattr(scope, "deadline", when)
            )
        return scope.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._key is not None:
            self._signal.remove_callback(self._key)
        if self._undo_deadline is not None:
            self._undo_deadline()
        return self._scope.__exit__(exc_type, exc, tb)


def linked_cancel_scope(signal: CancelSignal) -> AbstractContextManager[trio.CancelScope]:
    """Run a block inside a ``trio.CancelScope`` that is cancelled when ``signal`` is.

    ::

        with linked_cancel_scope(signal) as scope:
            await do_work()
        if scope.cancelled_caught: ...

    The scope's deadline follows the signal's deadline, so trio cancels the block exactly when
    the deadline passes, with no timer task. On exit the link is removed. Like any cancel
    scope, it swallows only its own cancellation: check ``scope.cancelled_caught`` (or the
    signal) afterwards to know whether the block was cut short.

    Raises:
        TypeError: ``signal`` is not a :class:`CancelSignal`.
    """
    if not isinstance(signal, CancelSignal):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"signal must be a CancelSignal, not {type(signal).__name__}")
    return _LinkedCancelScope(signal)
