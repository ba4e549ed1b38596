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


class _SignalState:
    """The mutable state behind one :class:`CancelSignal`, and the operations on it.

    Only this module touches it: a :class:`CancelController` fires and moves its own signal's
    state, :func:`fuse` and :func:`linked_cancel_scope` attach to a signal's state through
    :func:`_state_of`. The signal itself is a read-only view: no public name on it changes
    anything, so a tool body that holds ``context.signal`` cannot cancel its batch, and
    nothing can fire :meth:`CancelSignal.never`, whose state no controller owns.
    """

    __slots__ = (
        "callbacks",
        "cancelled",
        "deadline",
        "deadline_callbacks",
        "event",
        "next_key",
        "reason",
        "watch",
    )

    def __init__(self, deadline: float, cancelled: bool, reason: object) -> None:
        self.cancelled = cancelled
        self.reason = reason
        self.deadline = deadline
        # cancelled, or with a deadline: whether reading the signal needs observe() at all
        self.watch = cancelled or deadline != math.inf
        self.callbacks: dict[int, CancelCallback] | None = None
        self.deadline_callbacks: dict[int, Callable[[float], object]] | None = None
        self.event: trio.Event | None = None
        self.next_key = 0

    def observe(self) -> bool:
        """Whether the signal is cancelled, firing it first if its deadline has passed."""
        if self.cancelled:
            return True
        if self.deadline != math.inf and _now() >= self.deadline:
            self.fire(DeadlineReached(deadline=self.deadline))
            return True
        return False

    def add_callback(self, callback: CancelCallback) -> int:
        callbacks = self.callbacks
        if callbacks is None:
            callbacks = self.callbacks = {}
        key = self.next_key
        self.next_key = key + 1
        callbacks[key] = callback
        return key

    def remove_callback(self, key: int) -> None:
        callbacks = self.callbacks
        if callbacks is not None:
            callbacks.pop(key, None)

    def on_deadline_change(self, callback: Callable[[float], object]) -> Callable[[], None]:
        callbacks = self.deadline_callbacks
        if callbacks is None:
            callbacks = self.deadline_callbacks = {}
        key = self.next_key
        self.next_key = key + 1
        callbacks[key] = callback

        def undo() -> None:
            callbacks.pop(key, None)

        return undo

    def set_deadline(self, when: float) -> None:
        # a deadline that has already passed (unobserved) has cancelled the signal, and moving
        # it later must not undo that
        if self.cancelled:
            return
        if self.deadline != math.inf and _now() >= self.deadline:
            self.fire(DeadlineReached(deadline=self.deadline))
            return
        if when == self.deadline:
            return
        self.deadline = when
        self.watch = when != math.inf
        if self.deadline_callbacks:
            for callback in tuple(self.deadline_callbacks.values()):
                callback(when)
        # a deadline already in the past fires now
        if not self.cancelled and self.deadline != math.inf and _now() >= self.deadline:
            self.fire(DeadlineReached(deadline=self.deadline))

    def fire(self, reason: object) -> None:
        if self.cancelled:
            return
        if (
            self.deadline != math.inf
            and _now() >= self.deadline
            # a source's deadline that passed before this signal's own does not win over it
            and not (isinstance(reason, DeadlineReached) and reason.deadline <= self.deadline)
        ):
            reason = DeadlineReached(deadline=self.deadline)
        self.cancelled = True
        self.watch = True
        self.reason = reason
        self.deadline_callbacks = None
        if self.event is not None:
            self.event.set()
        callbacks = self.callbacks
        self.callbacks = None
        if callbacks:
            for callback in callbacks.values():
                try:
                    callback(reason)
                except Exception:
                    logger.exception("CancelSignal callback failed")


def _new_signal(
    deadline: float = math.inf, *, cancelled: bool = False, reason: object = None
) -> tuple[CancelSignal, _SignalState]:
    """A fresh signal and its state; ``cancelled=True`` gives one born cancelled with ``reason``."""
    state = _SignalState(deadline, cancelled, reason)
    signal = object.__new__(CancelSignal)
    object.__setattr__(signal, "_state", state)
    return signal, state


def _state_of(signal: CancelSignal) -> _SignalState:
    """The state behind ``signal``: the one door to it from outside the class."""
    return signal._state  # pyright: ignore[reportPrivateUsage]


@final
class CancelSignal:
    """A read-only view of cancellation state. Obtain one from :class:`CancelController`,
    :meth:`CancelSignal.any` or :meth:`CancelSignal.never`; it has no public constructor.

    Only reading is public: firing it and moving its deadline belong to its controller.
    """

    __slots__ = ("__weakref__", "_state")

    _state: _SignalState
    _never_instance: ClassVar[CancelSignal | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("CancelSignal has no public constructor: use CancelController().signal")

    # --- reading -------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """Whether the signal is cancelled (explicitly, through a fused source, or because its
        deadline has passed).
        """
        state = self._state
        # read at every stage of every call: a live signal without a deadline answers at once
        return state.watch and state.observe()

    @property
    def reason(self) -> object:
        """Why the signal was cancelled: the first reason given, a :class:`DeadlineReached`,
        or ``None`` while it is not cancelled (or when cancelled without a reason).
        """
        state = self._state
        return state.reason if state.observe() else None

    @property
    def deadline(self) -> float:
        """When the signal cancels itself, in trio clock time; ``math.inf`` for never."""
        return self._state.deadline

    async def wait(self) -> None:
        """Return once the signal is cancelled.

        A checkpoint on every path: it yields even when the signal is already cancelled.
        Cancelling the waiting task's own scope raises ``trio.Cancelled`` as usual.
        """
        state = self._state
        if state.observe():
            await trio.lowlevel.checkpoint()
            return
        event = state.event
        if event is None:
            event = state.event = trio.Event()
        with trio.CancelScope(deadline=state.deadline) as scope:
            undo = state.on_deadline_change(lambda when: setattr(scope, "deadline", when))
            try:
                await event.wait()
            finally:
                undo()
        if not event.is_set():
            state.observe()  # observing the passed deadline fires the signal

    def on_cancel(self, callback: CancelCallback) -> Disposer:
        """Call ``callback(reason)`` once when the signal is cancelled.

        If it is already cancelled, ``callback`` runs now. Returns a :class:`Disposer` that
        unregisters it (a no-op once it has run).

        Raises:
            TypeError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        state = self._state
        if state.observe():
            callback(state.reason)
            return Disposer.noop()
        if self is CancelSignal._never_instance:
            # it can never fire: keeping the callback would only leak it
            return Disposer.noop()
        key = state.add_callback(callback)
        return Disposer(lambda: state.remove_callback(key))

    def statistics(self) -> CancelSignalStatistics:
        """How many callbacks and deadline watchers the signal holds right now.

        Not a checkpoint; does not observe the deadline (a signal whose deadline has passed
        unobserved still reports its watchers).
        """
        state = self._state
        return CancelSignalStatistics(
            cancel_callbacks=len(state.callbacks or ()),
            deadline_listeners=len(state.deadline_callbacks or ()),
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CancelSignal is read-only: cannot set {name!r}")

    # --- construction helpers ------------------------------------------------------------

    @classmethod
    def never(cls) -> CancelSignal:
        """The signal that is never cancelled (one shared instance, which nothing can fire)."""
        never = cls._never_instance
        if never is None:
            never = cls._never_instance = _new_signal()[0]
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
        state = self._state
        status = f"cancelled reason={state.reason!r}" if state.cancelled else "active"
        deadline = "" if state.deadline == math.inf else f" deadline={state.deadline}"
        return f"<CancelSignal {status}{deadline}>"


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
            return _new_signal(deadline, cancelled=True, reason=source.reason)[0], _nothing
    fused, state = _new_signal(deadline)
    undos: list[Callable[[], None]] = []

    def detach() -> None:
        for undo in undos:
            undo()
        undos.clear()

    def on_source_cancel(reason: object) -> None:
        detach()
        state.fire(reason)

    def on_source_deadline(_when: float) -> None:
        state.set_deadline(min(own_deadline, min(s.deadline for s in signals)))

    for source in signals:
        if source is CancelSignal.never():
            continue
        source_state = _state_of(source)
        key = source_state.add_callback(on_source_cancel)
        undos.append(lambda source_state=source_state, key=key: source_state.remove_callback(key))
        undos.append(source_state.on_deadline_change(on_source_deadline))
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
    _state: _SignalState

    def __init__(self, *, deadline: float | None = None) -> None:
        # the deadline is the signal's, not the controller's: it is not a field
        self._signal, self._state = _new_signal(
            math.inf if deadline is None else _check_deadline(deadline)
        )

    @property
    def signal(self) -> CancelSignal:
        """The read-only signal this controller cancels."""
        return self._signal

    def cancel(self, reason: object = None) -> None:
        """Cancel the signal. Idempotent: the first reason sticks. Callbacks run now."""
        self._state.fire(reason)

    def set_deadline(self, when: float | None) -> None:
        """Move the deadline (trio clock time; ``None`` removes it). No effect once cancelled.

        Linked cancel scopes and fused signals follow the new deadline.
        """
        self._state.set_deadline(math.inf if when is None else _check_deadline(when))

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

    __slots__ = ("_key", "_scope", "_state", "_undo_deadline")

    def __init__(self, signal: CancelSignal) -> None:
        state = self._state = _state_of(signal)
        self._scope = trio.CancelScope(deadline=state.deadline)
        self._key: int | None = None
        self._undo_deadline: Callable[[], None] | None = None

    def __enter__(self) -> trio.CancelScope:
        state = self._state
        scope = self._scope
        if state.observe():
            scope.cancel()
        else:
            self._key = state.add_callback(lambda _reason: scope.cancel())
            self._undo_deadline = state.on_deadline_change(
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
            self._state.remove_callback(self._key)
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
