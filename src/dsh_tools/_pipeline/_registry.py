"""The tool registry: layers of tools, guards and restrictions, scopes, and the public
``execute``.

One global layer plus one :class:`ToolScope` per agent (identity-keyed). A scope's tools shadow
global tools of the same name (keeping the global's position in ``schemas()``), its
restrictions mask global tools for that agent only, its guards and hooks apply only to calls
whose ``agent`` is that agent. The stages of one call live in :mod:`dsh_tools._pipeline._call`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final, Unpack, final, overload

import attrs
import trio

from dsh_tools._values._arguments import parse_call_arguments
from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._checks import check_int, check_seconds
from dsh_tools._values._definition import (
    ToolDefinition,
    ToolOptions,
    ToolSchema,
    runs_in_parallel,
)
from dsh_tools._values._disposer import AgentScope, Disposer
from dsh_tools._values._execution import (
    ApprovalService,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionMode,
    ToolExecutionResult,
    ToolGuard,
)
from dsh_tools._values._json import thaw_json
from dsh_tools._values._limits import Limiter, RateLimit, check_capacity_limits, check_rate_limits
from dsh_tools._values._media import DEFAULT_MAX_BINARY_BYTES

from ._call import HasExecution, PipelineHost
from ._complete import complete
from ._gate import Gate
from ._held import dispatch_holding
from ._hooks import HookLists, ToolHooks
from ._open import prepare
from ._progress import TimeoutSettings
from ._tool import ToolDecorator, ToolFunction, tool_decorator

__all__ = ["ToolRegistry", "ToolRegistryStatistics", "ToolScope", "pipeline_host"]

logger: Final = logging.getLogger("dsh_tools")


@attrs.frozen(kw_only=True)
class ToolRegistryStatistics:
    """What :meth:`ToolRegistry.statistics` reports: a frozen snapshot for tests and
    debugging (trio's ``statistics()`` convention), not a live view.

    Attributes:
        tools: global tools registered.
        scopes: agent scopes open (each may hold tools, guards and hooks of its own).
        guards: guards registered, global and scoped.
        listeners: hook listeners registered, over every hook point, global and scoped.
        worker_threads: sync tool bodies running in worker threads right now.
        thread_limit: the most sync bodies that run in worker threads at once.
    """

    tools: int
    scopes: int
    guards: int
    listeners: int
    worker_threads: int
    thread_limit: int


class _GuardEntry:
    __slots__ = ("fn", "removed")

    def __init__(self, fn: ToolGuard) -> None:
        self.fn = fn
        self.removed = False


class _GuardTable:
    """An append-only list with tombstones, so that evaluation can iterate it live by index.

    A guard added during an evaluation is seen by that evaluation (same table). When the last
    guard goes, the layer gets a fresh table: an evaluation still walking the old one does not
    see guards added afterwards (the original's generation rule).
    """

    __slots__ = ("items", "iterating", "live")

    def __init__(self) -> None:
        self.items: list[_GuardEntry] = []
        self.live = 0
        self.iterating = 0

    def compact(self) -> None:
        if self.iterating == 0 and len(self.items) != self.live:
            self.items = [entry for entry in self.items if not entry.removed]


class _Layer:
    __slots__ = ("guards", "restrictions", "tools")

    def __init__(self) -> None:
        self.tools: dict[str, ToolDefinition] = {}
        self.guards = _GuardTable()
        # a scope's filters on the global tools (the global layer has none)
        self.restrictions: tuple[_Restriction, ...] = ()

    def admits(self, name: str) -> bool:
        return all(restriction.admits(name) for restriction in self.restrictions)

    def add_guard(self, fn: ToolGuard) -> Callable[[], None]:
        if not callable(fn):
            raise TypeError(f"a guard must be callable, not {type(fn).__name__}")
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
        ):
            raise TypeError(
                f"guards are synchronous: {_name_of(fn)} is an async function (it would return "
                "a coroutine); return a denial reason or None"
            )
        entry = _GuardEntry(fn)
        table = self.guards
        table.items.append(entry)
        table.live += 1

        def remove() -> None:
            entry.removed = True
            table.live -= 1
            if table.live == 0 and self.guards is table:
                self.guards = _GuardTable()
            table.compact()

        return remove


def _evaluate_guards(layer: _Layer, execution: ToolExecution) -> str | None:
    table = layer.guards
    if table.live == 0:
        return None
    table.iterating += 1
    try:
        index = 0
        while index < len(table.items):
            entry = table.items[index]
            index += 1
            if entry.removed:
                continue
            reason = entry.fn(execution)
            if reason is not None:
                if inspect.isawaitable(reason):
                    # a sync callable that hands back a coroutine: refused like an async guard
                    if inspect.iscoroutine(reason):
                        reason.close()
                    raise TypeError(
                        f"guards are synchronous: {_name_of(entry.fn)} returned an awaitable"
                    )
                return reason
        return None
    finally:
        table.iterating -= 1
        table.compact()


def _name_of(fn: object) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


class _Restriction:
    __slots__ = ("allow", "deny")

    def __init__(self, allow: frozenset[str] | None, deny: frozenset[str] | None) -> None:
        self.allow = allow
        self.deny = deny

    def admits(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and (
            self.deny is None or name not in self.deny
        )


class _Registrations:
    """The state a registry shares with its scopes: the global layer, the scope table, the
    hook lists, and the one registration/change rule both apply.
    """

    __slots__ = ("global_layer", "hook_lists", "scopes", "timeouts")

    def __init__(self, timeouts: TimeoutSettings) -> None:
        self.global_layer = _Layer()
        # id(agent) -> (its open scope, that scope's layer)
        self.scopes: dict[int, tuple[ToolScope, _Layer]] = {}
        self.hook_lists = HookLists()
        self.timeouts = timeouts

    def register(self, layer: _Layer, definition: ToolDefinition, *, scoped: bool) -> Disposer:
        if not isinstance(definition, ToolDefinition):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"register() takes a ToolDefinition, not {type(definition).__name__}")
        # the definition validated itself; this catches a field changed behind attrs' back
        attrs.validate(definition)
        name = definition.name
        if name in layer.tools:
            if not scoped:
                raise ValueError(
                    f'tool "{name}" is already registered (for a per-agent variant, '
                    "register through that agent's `registry.scope(agent)` instead)"
                )
            raise ValueError(f'tool "{name}" is already registered in this scope')
        layer.tools[name] = definition
        if definition.timeout is not None or definition.idle_timeout is not None:
            # from now on, calls look at their tool's timeouts (never reset: a cheap flag)
            self.timeouts.watched = True

        def remove() -> None:
            if layer.tools.get(name) is definition:
                del layer.tools[name]
                self.emit_change()

        self.commit(remove)
        return Disposer(remove)

    def commit(self, undo: Callable[[], None]) -> None:
        """Emit ``change`` for a new registration; roll it back if a listener raises."""
        try:
            self.emit_change()
        except Exception:
            try:
                undo()
            except Exception as exc:  # the rollback's own change emission
                logger.warning("tools/change listener failed during rollback: %s", exc)
            raise

    def emit_change(self) -> None:
        for listener in self.hook_lists.change.every():
            listener()

    def layer_of(self, agent: object) -> _Layer | None:
        if agent is None:
            return None
        entry = self.scopes.get(id(agent))
        if entry is None or entry[0].agent is not agent:
            return None
        return entry[1]


def _names(value: Iterable[str] | None, label: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{label} must be a collection of tool names, not a str")
    names = frozenset(value)
    for name in names:
        if not isinstance(name, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"{label} must contain tool names (str), not {type(name).__name__}")
    return names


class _HostHolder:
    """Holds a registry's pipeline host (internal: read by :func:`pipeline_host`)."""

    __slots__ = ("host",)

    host: PipelineHost


@final
class ToolRegistry(_HostHolder):
    """The tools an agent loop can call, and the policy around every call.

    Args:
        approval: the service that answers ``Ask`` decisions; without one, ``Ask`` denies.
        thread_limit: the most sync tool bodies (plain ``def``) running in worker threads at
            once, across every call of this registry (one ``trio.CapacityLimiter``). A call
            waiting for a slot has not started: cancelled there, it is
            ``ABORTED_BEFORE_DISPATCH``.
        default_timeout: the timeout (seconds) of a tool whose definition has none
            (``None``: such tools run without one). The registry enforces every tool's
            ``timeout`` and ``idle_timeout`` itself: its timeout policy is installed from the
            start (``install_timeout_policy`` returns its disposer).
        progress_interval: the least time (seconds, trio's clock) between two ``tool/progress``
            events of one call; closer reports are coalesced (the last one is kept).
        max_binary_bytes: the largest picture, sound or file (:class:`~dsh_tools.ImageBlock`,
            :class:`~dsh_tools.AudioBlock`, :class:`~dsh_tools.FileBlock`) a final result or
            its contexts may carry, in bytes (default 20 MiB; a block of exactly this size is
            kept). A larger block is replaced by a text note the model can read, naming its
            kind and size; the result is otherwise unchanged (not an error).
        capacity_limits: capacity classes that hold across every batch of this registry, e.g.
            ``{"network": 4}``: the calls of a tool whose ``capacity_class`` is listed hold
            ``capacity_weight`` slots of it while their body runs (a per-batch limit is
            ``run_tool_calls(capacity_limits=...)``).
        rate_limits: a :class:`~dsh_tools.RateLimit` per capacity class, across every batch:
            ``{"network": RateLimit(10, per=1.0)}``.
        limiter: a limiter every process shares (``dsh_tools.postgres.PostgresLimiter``):
            conflict keys, ``capacity_limits`` and ``rate_limits`` then hold across processes.

    A call that needs a key, a slot or a token (in a batch, or through :meth:`execute`) waits
    for it after its policies allowed it and before its body starts (an interrupt while it waits: ``ABORTED_BEFORE_DISPATCH``); calls
    are served first come first served, a batch's in model order.

    Raises:
        TypeError: ``thread_limit`` or ``max_binary_bytes`` is not an ``int`` (``bool`` is
            not accepted),
            ``approval`` has no ``request`` method, or ``default_timeout`` /
            ``progress_interval`` is not a number.
        ValueError: ``thread_limit`` or ``max_binary_bytes`` is less than 1, ``default_timeout`` is not a positive
            finite number, or ``progress_interval`` is negative or not finite.

    Registrations return a :class:`~dsh_tools.Disposer`. ``scope(agent)`` gives the per-agent
    layer (tools, guards, hooks, restrictions heard only by that agent's calls).
    """

    __slots__ = (
        "_approval",
        "_global",
        "_hook_lists",
        "_scopes",
        "_state",
        "_thread_limiter",
        "hooks",
    )

    hooks: ToolHooks
    """The global hooks: heard by every call (see :class:`ToolHooks`)."""

    def __init__(
        self,
        approval: ApprovalService | None = None,
        *,
        thread_limit: int = 8,
        default_timeout: float | None = None,
        progress_interval: float = 0.1,
        max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
        capacity_limits: Mapping[str, int] | None = None,
        rate_limits: Mapping[str, RateLimit] | None = None,
        limiter: Limiter | None = None,
    ) -> None:
        check_int("thread_limit", thread_limit)
        check_int("max_binary_bytes", max_binary_bytes)
        if limiter is not None and not callable(getattr(limiter, "acquire", None)):
            raise TypeError(
                "limiter must be a shared limiter (with an acquire method) or None, "
                f"not {type(limiter).__name__}"
            )
        gate = Gate(check_capacity_limits(capacity_limits), check_rate_limits(rate_limits), limiter)
        if approval is not None and not callable(getattr(approval, "request", None)):
            raise TypeError(
                "approval must be an approval service (with a request method) or None, "
                f"not {type(approval).__name__}"
            )
        timeout = (
            None if default_timeout is None else check_seconds("default_timeout", default_timeout)
        )
        interval = check_seconds("progress_interval", progress_interval, zero=True)
        self._thread_limiter = trio.CapacityLimiter(thread_limit)
        self._approval = approval
        timeouts = TimeoutSettings(timeout, interval)
        self._state = state = _Registrations(timeouts)
        # the same objects as the state's, held directly for the per-call lookup
        self._global = state.global_layer
        self._scopes = state.scopes
        self._hook_lists = state.hook_lists
        self.hooks = ToolHooks(self._hook_lists)
        # what the pipeline needs from this registry, handed down instead of the registry
        self.host = PipelineHost(
            hooks=self._hook_lists,
            lookup=self._lookup,
            evaluate_guards=self._evaluate_guards,
            approval=approval,
            thread_limiter=self._thread_limiter,
            timeouts=timeouts,
            max_binary_bytes=max_binary_bytes,
            gate=gate,
        )

    def statistics(self) -> ToolRegistryStatistics:
        """How many tools, scopes, guards and listeners the registry holds, and how many of
        its worker threads are busy. Not a checkpoint.
        """
        state = self._state
        layers = (state.global_layer, *(layer for _scope, layer in state.scopes.values()))
        hooks = state.hook_lists
        return ToolRegistryStatistics(
            tools=len(state.global_layer.tools),
            scopes=len(state.scopes),
            guards=sum(layer.guards.live for layer in layers),
            listeners=sum(
                len(hook_list)
                for hook_list in (
                    hooks.pre_execute,
                    hooks.execute,
                    hooks.post_execute,
                    hooks.result,
                    hooks.change,
                    hooks.batch,
                )
            ),
            worker_threads=int(self._thread_limiter.borrowed_tokens),
            thread_limit=int(self._thread_limiter.total_tokens),
        )

    @property
    def approval(self) -> ApprovalService | None:
        """The approval service ``Ask`` decisions are routed to, if any."""
        return self._approval

    # --- registration --------------------------------------------------------------------

    def register(self, definition: ToolDefinition) -> Disposer:
        """Register a global tool.

        Raises:
            TypeError: ``definition`` is not a :class:`~dsh_tools.ToolDefinition`, or one of
                its fields was changed behind its back to a value of the wrong type.
            ValueError: a global tool of that name is already registered, or a field was
                changed behind the definition's back to a value out of range (a ``timeout``
                that is not a positive finite number of seconds, say).
            Exception: whatever a ``change`` listener raised (the registration is rolled back).
        """
        return self._state.register(self._global, definition, scoped=False)

    def guard(self, fn: ToolGuard) -> Disposer:
        """Add a global guard: ``(execution) -> reason | None``, evaluated for every allowed
        call, before the scoped guards, in registration order.

        Raises:
            TypeError: ``fn`` is not callable, or is an async function (guards are
                synchronous; a guard that returns an awaitable at run time is a guard that
                raised: its call gets an error result).
        """
        return Disposer(self._global.add_guard(fn))

    @overload
    def tool(self, fn: ToolFunction, /) -> ToolDefinition: ...

    @overload
    def tool(
        self,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions[Any]],
    ) -> ToolDecorator: ...

    def tool(
        self,
        fn: ToolFunction | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions[Any]],
    ) -> ToolDefinition | ToolDecorator:
        """``@registry.tool`` / ``@registry.tool(...)``: :func:`~dsh_tools.tool`, and register
        the definition as a global tool (as :meth:`register`). The decorated name is bound to
        the definition, so no disposer is kept: to unregister the tool later, call ``tool`` and
        ``register`` yourself and keep ``register``'s disposer.

        Raises:
            TypeError: as :func:`~dsh_tools.tool` raises.
            ValueError: as :func:`~dsh_tools.tool` and :meth:`register` raise.
        """
        make = tool_decorator("ToolRegistry.tool", name, description, options)

        def decorate(function: ToolFunction) -> ToolDefinition:
            definition = make(function)
            self.register(definition)
            return definition

        return decorate if fn is None else decorate(fn)

    # --- scopes --------------------------------------------------------------------------

    def scope(self, agent: object) -> ToolScope:
        """The registration scope of ``agent`` (an identity key; not ``None``).

        Returns the same :class:`ToolScope` for the same agent until it is closed. The
        registry holds the agent until then: close the scope when the agent goes away.
        """
        if agent is None:
            raise TypeError("scope() needs an agent: None is the global scope")
        entry = self._scopes.get(id(agent))
        if entry is not None and entry[0].agent is agent:
            return entry[0]
        return ToolScope(self._state, agent)

    # --- views ---------------------------------------------------------------------------

    def _lookup(self, name: str, agent: object) -> ToolDefinition | None:
        tools = self._global.tools
        if agent is None or not self._scopes:
            return tools.get(name)
        layer = self._state.layer_of(agent)
        if layer is None:
            return tools.get(name)
        own = layer.tools.get(name)
        if own is not None:
            return own
        found = tools.get(name)
        if found is None or not layer.admits(name):
            return None
        return found

    def _visible(self, agent: object) -> list[ToolDefinition]:
        layer = self._state.layer_of(agent)
        if layer is None:
            return list(self._global.tools.values())
        visible = {name: tool for name, tool in self._global.tools.items() if layer.admits(name)}
        visible.update(layer.tools)
        return list(visible.values())

    def get(self, name: str, agent: object = None) -> ToolDefinition | None:
        """The definition of ``name`` visible to ``agent`` (global calls when ``None``), or
        ``None`` (unknown, or a global tool restricted away for that agent).
        """
        return self._lookup(name, agent)

    def schemas(self, agent: object = None) -> list[ToolSchema]:
        """The model-facing schemas of the tools visible to ``agent``, in registration order.

        Each call returns fresh, detached copies: only name, description and a plain ``dict``
        of parameters, never the body, ``timeout``, classifier or presenters.
        """
        return [
            ToolSchema(
                name=tool.name,
                description=tool.description,
                parameters=thaw_json(tool.parameters),
            )
            for tool in self._visible(agent)
        ]

    def execution_mode(
        self,
        call: ToolExecutionInput | ToolExecution | ToolCallRequest,
        *,
        agent: object = None,
    ) -> ToolExecutionMode:
        """How the scheduler may run ``call``: parallel only when the visible tool's
        ``is_concurrency_safe(arguments)`` returns exactly ``True``; a missing tool, a missing
        or raising classifier, or any other return value means exclusive.

        A :class:`~dsh_tools.ToolCallRequest` (the model's call, not yet run) carries no agent:
        it is classified for ``agent`` (``None``: the global tools) with its arguments parsed
        as the scheduler parses them. Other calls carry their own agent.
        """
        if isinstance(call, ToolCallRequest):
            tool = self._lookup(call.name, agent)
            arguments = parse_call_arguments(call.arguments)
        else:
            tool = self._lookup(call.name, call.agent)
            arguments = call.arguments
        if runs_in_parallel(tool, arguments):
            return ToolExecutionMode.PARALLEL
        return ToolExecutionMode.EXCLUSIVE

    # --- execution -----------------------------------------------------------------------

    def _evaluate_guards(self, agent: object, call: HasExecution) -> str | None:
        if not self._global.guards.live:
            layer = None if agent is None else self._state.layer_of(agent)
            if layer is None or not layer.guards.live:
                return None  # no guard applies: the view is never built
        view = call.validated_execution()
        reason = _evaluate_guards(self._global, view)
        if reason is not None:
            return reason
        layer = self._state.layer_of(agent)  # again: a global guard may have changed scopes
        if layer is None:
            return None
        return _evaluate_guards(layer, view)

    async def execute(self, input: ToolExecutionInput) -> ToolExecutionResult:
        """Run one tool call through the whole pipeline and return its final result.

        Never raises for a tool or policy failure: every one becomes an error result. The
        result is frozen, losslessly JSON-serializable, and the very object the ``result``
        observers saw.

        A checkpoint on every path. Cancellation through ``input.signal`` gives an
        ``ABORTED`` / ``ABORTED_BEFORE_DISPATCH`` result; cancelling the caller's own trio
        scope raises ``trio.Cancelled`` once a started body has unwound (a body is never
        abandoned).

        Raises:
            TypeError: ``input`` is not a :class:`ToolExecutionInput` (a programming error,
                not a tool failure).
        """
        prepared = await prepare(self.host, input)
        if prepared.needs_dispatch:
            # the call holds its conflict keys, slots and tokens as a batch's calls do
            await dispatch_holding(prepared, self._lookup(input.name, input.agent))
        result = await complete(prepared)
        # the outcome is decided: a schedule point that cannot be cancelled
        await trio.lowlevel.cancel_shielded_checkpoint()
        return result


@final
class ToolScope(AgentScope):
    """The registrations of one agent: tools, guards, hooks and restrictions that only that
    agent's calls see. Obtain it with ``registry.scope(agent)``.

    ``close()`` (or leaving the ``with`` block) unwinds everything registered through the scope,
    last first. A closed scope refuses new registrations; ``registry.scope(agent)`` then gives a
    fresh one.
    """

    __slots__ = ("_layer", "_state", "hooks")

    agent: object
    """The agent this scope belongs to (compared by identity)."""

    hooks: ToolHooks
    """Hooks heard only by calls whose ``agent`` is this scope's agent (``change`` excepted:
    change listeners hear every change)."""

    def __init__(self, state: _Registrations, agent: object) -> None:
        # the registry's shared state; the scope enters its table here
        super().__init__(agent, "this tool scope")
        self._state = state
        self._layer = layer = _Layer()
        self.hooks = ToolHooks(state.hook_lists, agent, self._owned.own)
        state.scopes[id(agent)] = (self, layer)

    def register(self, definition: ToolDefinition) -> Disposer:
        """Register a tool for this agent only; it shadows a global tool of the same name.

        Raises:
            TypeError: as :meth:`ToolRegistry.register`.
            ValueError: this scope already has a tool of that name.
        """
        self._owned.check_open()
        return self._owned.own(self._state.register(self._layer, definition, scoped=True))

    def guard(self, fn: ToolGuard) -> Disposer:
        """Add a guard evaluated for this agent's allowed calls, after every global guard.

        Raises:
            TypeError: as :meth:`ToolRegistry.guard`.
        """
        self._owned.check_open()
        return self._owned.own(Disposer(self._layer.add_guard(fn)))

    def restrict(
        self, allow: Collection[str] | None = None, deny: Collection[str] | None = None
    ) -> Disposer:
        """Hide global tools from this agent.

        A global tool stays visible only if every restriction of the scope admits it (``allow``
        given: it is listed; ``deny`` given: it is not). Restrictions are evaluated live: a
        ``deny``-only restriction admits global tools registered later, an ``allow`` one hides
        them. The scope's own tools are never hidden. ``allow=[]`` hides every global tool.

        Raises:
            ValueError: neither ``allow`` nor ``deny`` was given, or a name is not a registered
                global tool.
            TypeError: ``allow`` / ``deny`` is a bare ``str`` or holds non-``str`` names.
        """
        self._owned.check_open()
        if allow is None and deny is None:
            raise ValueError(
                "ToolScope.restrict() is a no-op: pass `allow` and/or `deny` (an empty filter "
                "is almost always a materialized-empty-config bug)"
            )
        allowed = _names(allow, "allow")
        denied = _names(deny, "deny")
        known = self._state.global_layer.tools
        named = [*(allow or ()), *(deny or ())]
        unknown = list(dict.fromkeys(name for name in named if name not in known))
        if unknown:
            listed = ", ".join(f'"{name}"' for name in unknown)
            known_text = ", ".join(sorted(known)) or "(none)"
            noun = "tool" if len(unknown) == 1 else "tools"
            raise ValueError(
                f"ToolScope.restrict() names unknown global {noun} {listed}; "
                f"known global tools: {known_text}"
            )
        restriction = _Restriction(allowed, denied)
        layer = self._layer
        layer.restrictions = (*layer.restrictions, restriction)

        def lift() -> None:
            if restriction in layer.restrictions:
                layer.restrictions = tuple(r for r in layer.restrictions if r is not restriction)
                self._state.emit_change()

        self._state.commit(lift)
        return self._owned.own(Disposer(lift))

    def _forget(self) -> None:
        scopes = self._state.scopes
        entry = scopes.get(id(self.agent))
        if entry is not None and entry[0] is self:
            del scopes[id(self.agent)]


def pipeline_host(registry: ToolRegistry) -> PipelineHost:
    """The pipeline host of ``registry``, for the scheduler (package-internal)."""
    return registry.host
