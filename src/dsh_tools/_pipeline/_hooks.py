"""Hook lists: the ordered listeners of one registry hook, and the scope-filtered views of them.

One :class:`HookList` per hook kind holds every listener, global and scoped, in one order
(registration order; ``prepend`` puts a listener first, i.e. outermost). A listener added
through ``registry.scope(agent).hooks`` carries that agent as its scope and hears only calls
whose ``agent`` is that very object; a global listener hears every call.

The list is an immutable tuple replaced on every change, so each dispatch snapshots it for
free when it starts (as in the original: "the listener list is snapshotted at dispatch time"). A
call dispatches its hooks one after another (``pre_execute``, ``execute``, ``post_execute``,
``result``), each reading the list afresh: a listener added or removed while a call runs
changes the hooks of that call that have not started yet (a ``post_execute`` or ``result``
listener added by the body is heard by the same call), never a dispatch already running.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeAlias, TypeVar

import attrs

from dsh_tools._values._batch import ToolBatch, ToolBatchInfo
from dsh_tools._values._disposer import Disposer
from dsh_tools._values._execution import (
    PostToolDecision,
    PreToolDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionResult,
)

__all__ = [
    "BatchHook",
    "BatchNext",
    "ChangeListener",
    "ExecuteHook",
    "ExecuteNext",
    "HookList",
    "HookLists",
    "HookPoint",
    "ProgressObserver",
    "PostExecuteHook",
    "PostExecuteNext",
    "PreExecuteHook",
    "PreExecuteNext",
    "ResultObserver",
    "ToolHooks",
    "waterfall",
]

PreExecuteNext: TypeAlias = Callable[[], Awaitable[PreToolDecision]]
"""Runs the rest of the ``pre_execute`` chain (``Allow()`` at its end)."""

PreExecuteHook: TypeAlias = Callable[[ToolExecution, PreExecuteNext], Awaitable[PreToolDecision]]
"""``async (execution, next) -> Allow | Deny | Ask``; return without calling ``next`` to
short-circuit every listener inside this one."""

ExecuteNext: TypeAlias = Callable[[], Awaitable[ToolExecutionResult]]
"""Runs the rest of the ``execute`` chain and, at its end, the tool body. Never raises for a
tool failure: the body's exception is already an error result."""

ExecuteHook: TypeAlias = Callable[
    [ToolDispatchExecution, ExecuteNext], Awaitable[ToolExecutionResult]
]
"""``async (dispatch_execution, next) -> ToolExecutionResult``: a wrapper around the body. It may
replace ``dispatch_execution.signal`` before ``next()`` (and must restore it afterwards)."""

PostExecuteNext: TypeAlias = Callable[[], Awaitable[PostToolDecision]]
"""Runs the rest of the ``post_execute`` chain (``Accept()`` at its end)."""

PostExecuteHook: TypeAlias = Callable[
    [ToolExecution, ToolExecutionResult, PostExecuteNext], Awaitable[PostToolDecision]
]
"""``async (execution, result, next) -> Accept | Block``."""

ResultObserver: TypeAlias = Callable[[ToolExecution, ToolExecutionResult], object]
"""``(execution, result) -> None``, synchronous; sees the frozen final result. Its exceptions are
logged and contained."""

ProgressObserver: TypeAlias = Callable[
    [str, str | None, float | None, float | None, str | None], object
]
"""``(call_id, message, progress, total, output) -> None``, synchronous, in the reporting body's
task: one emitted progress report of a running body (after coalescing, as the session log and
the UI get it; ``output`` the chunks since the last one). Its exceptions are logged and
contained."""

BatchNext: TypeAlias = Callable[[], Awaitable[ToolBatch]]
"""Runs the rest of the ``batch`` chain and, at its end, the batch itself. Call it at most
once; it raises only what :func:`~dsh_tools.run_tool_calls` raises."""

BatchHook: TypeAlias = Callable[[ToolBatchInfo, BatchNext], Awaitable[ToolBatch]]
"""``async (info, next) -> ToolBatch``: a wrapper around one whole batch, run in the task that
called :func:`~dsh_tools.run_tool_calls` (so a contextvar it sets, such as a current span, is
seen by every call of the batch). Return ``next()``'s batch, or another :class:`ToolBatch`
with exactly one result per call."""

ChangeListener: TypeAlias = Callable[[], object]
"""``() -> None``, synchronous; told when the set of tools or restrictions changed. An exception
rolls the registration back and propagates to the caller of ``register`` / ``restrict``."""

F = TypeVar("F", bound=Callable[..., object])


class _Entry(Generic[F]):
    __slots__ = ("fn", "scope")

    def __init__(self, fn: F, scope: object) -> None:
        self.fn = fn
        self.scope = scope


class HookList(Generic[F]):
    """Every listener of one hook, global and scoped, in dispatch order."""

    __slots__ = ("_entries", "_global_fns", "_per_agent", "active")

    # whether any listener is registered (for anyone): the pipeline reads it before asking
    # for_agent, so a hook nobody uses costs an attribute read per call
    active: bool
    _entries: tuple[_Entry[F], ...]
    _global_fns: tuple[F, ...]
    # id(agent) -> the listeners a call of that agent hears, for every agent that has scoped
    # listeners (their entries keep the agent alive, so its id cannot be reused meanwhile)
    _per_agent: dict[int, tuple[F, ...]]

    def __init__(self) -> None:
        self.active = False
        self._entries = ()
        self._global_fns = ()
        self._per_agent = {}

    def __len__(self) -> int:
        """How many listeners are registered (global and scoped)."""
        return len(self._entries)

    def add(self, fn: F, scope: object = None, *, prepend: bool = False) -> Disposer:
        """Add ``fn`` (heard by calls of ``scope``'s agent, or by every call when ``None``)."""
        if not callable(fn):
            raise TypeError(f"a hook listener must be callable, not {type(fn).__name__}")
        entry = _Entry(fn, scope)
        self._entries = (entry, *self._entries) if prepend else (*self._entries, entry)
        self._refresh()

        def remove() -> None:
            self._entries = tuple(e for e in self._entries if e is not entry)
            self._refresh()

        return Disposer(remove)

    def _refresh(self) -> None:
        # rebuilt on every change (rare) so that a call's lookup is one dict probe
        entries = self._entries
        self.active = bool(entries)
        self._global_fns = tuple(e.fn for e in entries if e.scope is None)
        agents = {id(e.scope): e.scope for e in entries if e.scope is not None}
        self._per_agent = {
            key: tuple(e.fn for e in entries if e.scope is None or e.scope is agent)
            for key, agent in agents.items()
        }

    def for_agent(self, agent: object) -> tuple[F, ...]:
        """The listeners that hear a call of ``agent`` (global ones and ``agent``'s own)."""
        if agent is None or not self._per_agent:
            return self._global_fns
        return self._per_agent.get(id(agent), self._global_fns)

    def every(self) -> tuple[F, ...]:
        """Every listener, scoped or not (``change`` is not scope-filtered)."""
        return tuple(e.fn for e in self._entries)


@attrs.define(eq=False)
class HookPoint(Generic[F]):
    """The registration face of one hook: ``add(fn, *, prepend=False) -> Disposer``.

    Reached as ``registry.hooks.<hook>`` (heard by every call) or
    ``registry.scope(agent).hooks.<hook>`` (heard only by calls of that agent, and removed when
    the scope closes).
    """

    _list: HookList[F]
    _scope: object = None
    # a scope's registrations are owned by the scope (disposed when it closes)
    _owner: Callable[[Disposer], Disposer] | None = None

    def add(self, fn: F, *, prepend: bool = False) -> Disposer:
        """Register ``fn``.

        Args:
            fn: the listener.
            prepend: put it first (outermost in a waterfall) instead of last.

        Returns:
            A :class:`~dsh_tools.Disposer` that removes exactly this registration (adding the
            same function twice makes two independent registrations).
        """
        disposer = self._list.add(fn, self._scope, prepend=prepend)
        return disposer if self._owner is None else self._owner(disposer)


@attrs.define(eq=False, init=False)
class ToolHooks:
    """The registry's hooks (``registry.hooks`` or a scope's ``scope.hooks``).

    Attributes:
        pre_execute: ``async (execution, next) -> Allow | Deny | Ask`` waterfall (default allow).
        execute: ``async (dispatch_execution, next) -> ToolExecutionResult`` wrappers around
            the body.
        post_execute: ``async (execution, result, next) -> Accept | Block`` waterfall (default
            accept unchanged).
        result: ``(execution, result) -> None`` observers of every final result.
        progress: ``(call_id, message, progress, total, output) -> None`` observers of every
            emitted progress report of a running body.
        change: ``() -> None`` listeners told when the visible tools may have changed (never
            scope-filtered).
        batch: ``async (info, next) -> ToolBatch`` wrappers around a whole
            :func:`~dsh_tools.run_tool_calls` batch, in the caller's task.
    """

    pre_execute: HookPoint[PreExecuteHook]
    execute: HookPoint[ExecuteHook]
    post_execute: HookPoint[PostExecuteHook]
    result: HookPoint[ResultObserver]
    progress: HookPoint[ProgressObserver]
    change: HookPoint[ChangeListener]
    batch: HookPoint[BatchHook]

    def __init__(
        self,
        lists: HookLists,
        scope: object = None,
        owner: Callable[[Disposer], Disposer] | None = None,
    ) -> None:
        # built from the registry's lists: the fields are not constructor arguments
        self.pre_execute = HookPoint(lists.pre_execute, scope, owner)
        self.execute = HookPoint(lists.execute, scope, owner)
        self.post_execute = HookPoint(lists.post_execute, scope, owner)
        self.result = HookPoint(lists.result, scope, owner)
        self.progress = HookPoint(lists.progress, scope, owner)
        self.change = HookPoint(lists.change, scope, owner)
        self.batch = HookPoint(lists.batch, scope, owner)


@attrs.define(eq=False)
class HookLists:
    pre_execute: HookList[PreExecuteHook] = attrs.field(factory=HookList[PreExecuteHook])
    execute: HookList[ExecuteHook] = attrs.field(factory=HookList[ExecuteHook])
    post_execute: HookList[PostExecuteHook] = attrs.field(factory=HookList[PostExecuteHook])
    result: HookList[ResultObserver] = attrs.field(factory=HookList[ResultObserver])
    progress: HookList[ProgressObserver] = attrs.field(factory=HookList[ProgressObserver])
    change: HookList[ChangeListener] = attrs.field(factory=HookList[ChangeListener])
    batch: HookList[BatchHook] = attrs.field(factory=HookList[BatchHook])


_R = TypeVar("_R")


def waterfall(
    listeners: tuple[Callable[..., Awaitable[_R]], ...],
    arguments: tuple[object, ...],
    last: Callable[[], Awaitable[_R]],
) -> Callable[..., Awaitable[_R]]:
    """The one builder of a hook chain: calling the result calls ``listeners[0](*arguments,
    next)``, whose ``next()`` calls ``listeners[1]`` the same way, and so on; the last
    listener's ``next()`` calls ``last()``.

    Arguments given to a ``next()`` are ignored, as in the original: a listener changes what
    the rest of the chain sees only through the objects it was handed.
    """
    chain: Callable[..., Awaitable[_R]] = last
    for listener in reversed(listeners):
        chain = _link(listener, arguments, chain)
    return chain


def _link(
    listener: Callable[..., Awaitable[_R]],
    arguments: tuple[object, ...],
    inner: Callable[..., Awaitable[_R]],
) -> Callable[..., Awaitable[_R]]:
    def next_(*_args: Any, **_kwargs: Any) -> Awaitable[_R]:
        return listener(*arguments, inner)

    return next_
