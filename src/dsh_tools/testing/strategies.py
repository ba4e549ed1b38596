"""Hypothesis strategies for tests of tools, hooks and batches (needs ``dsh-tools[testing]``).

- :func:`json_values`: plain JSON data that :func:`~dsh_tools.snapshot_json` accepts.
- :func:`tool_batches`: a :class:`BatchPlan`: calls in model order, each with its own scripted
  tool (parallel or exclusive, sleeping, failing, shielded, hanging).
- :func:`hook_chains`: a :class:`HookChain`: ``pre_execute`` listeners, guards, ``execute``
  wrappers and ``post_execute`` listeners that pass, wait, decide, raise or cancel, with the
  outcome a call must have predicted from the chain alone.

Run each example under its own ``trio.run(..., clock=trio.testing.MockClock(autojump_threshold=0))``:
function-scoped fixtures and ``@given`` do not mix.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, final

import attrs
import trio
from hypothesis import strategies as st

from dsh_tools import (
    Accept,
    Allow,
    Ask,
    Block,
    CancelController,
    Deny,
    Disposer,
    ExecuteNext,
    HookContext,
    PluginSource,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    TextBlock,
    ToolCallRequest,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
)
from dsh_tools._for_integrations import MAX_SAFE_INTEGER

from ._scripted import (
    FailStep,
    HangStep,
    ScriptedTool,
    Step,
    fail,
    hang,
    inject,
    returns,
    scripted_tool,
    shielded,
    sleep,
)

__all__ = [
    "BatchPlan",
    "GuardAction",
    "HookChain",
    "PlannedCall",
    "PostAction",
    "PreAction",
    "WrapperAction",
    "hook_chains",
    "json_values",
    "tool_batches",
]


def _not_negative_zero(value: float) -> bool:
    return not (value == 0.0 and math.copysign(1.0, value) < 0)


def json_values(*, max_leaves: int = 25) -> st.SearchStrategy[Any]:
    """Plain, mutable JSON data (``dict`` with ``str`` keys, ``list``, scalars, including
    the integer range limits of ±(2**53 - 1)) that ``snapshot_json`` accepts.
    """
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
        st.floats(allow_nan=False, allow_infinity=False).filter(_not_negative_zero),
        st.text(max_size=20),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(st.text(max_size=8), children, max_size=5),
        ),
        max_leaves=max_leaves,
    )


# --- batches -------------------------------------------------------------------------------


@final
@attrs.frozen(kw_only=True)
class PlannedCall:
    """One planned call: its id, whether its tool is parallel-safe, its body's steps, its
    tool's capacity class.
    """

    call_id: str
    parallel: bool
    steps: tuple[Step, ...]
    capacity_class: str | None = None

    @property
    def tool_name(self) -> str:
        """The name of the call's own scripted tool."""
        return f"tool_{self.call_id}"


@final
@attrs.frozen(kw_only=True)
class BatchPlan:
    """A batch to run: calls in model order, one scripted tool per call.

    ``build(registry)`` registers fresh scripted tools (their records start empty) and returns
    them; ``requests`` are the calls to pass to :func:`~dsh_tools.run_tool_calls`.
    """

    calls: tuple[PlannedCall, ...]

    @property
    def requests(self) -> tuple[ToolCallRequest, ...]:
        """The model's calls, in order (arguments ``{}``)."""
        return tuple(
            ToolCallRequest(call_id=call.call_id, name=call.tool_name, arguments="{}")
            for call in self.calls
        )

    def build(self, registry: ToolRegistry) -> tuple[ScriptedTool, ...]:
        """Register one fresh scripted tool per call; return them in model order."""
        tools = tuple(
            scripted_tool(
                call.tool_name,
                *call.steps,
                parallel=call.parallel,
                capacity_class=call.capacity_class,
            )
            for call in self.calls
        )
        for tool in tools:
            tool.register(registry)
        return tools

    @property
    def hangs(self) -> bool:
        """Whether some body hangs until cancelled (run such a plan with a cancellation)."""
        return any(isinstance(step, HangStep) for call in self.calls for step in call.steps)


def _bodies(
    durations: Sequence[float], failures: bool, hangs: bool, shields: bool
) -> st.SearchStrategy[tuple[Step, ...]]:
    """A body's steps (an injection, if any, is added by the plan)."""
    options: list[st.SearchStrategy[tuple[Step, ...]]] = [
        st.sampled_from(durations).map(lambda s: (sleep(s),))
    ]
    if failures:
        options.append(st.sampled_from(durations).map(lambda s: (sleep(s), fail("boom"))))
    if shields:
        options.append(st.sampled_from(durations).map(lambda s: (shielded(s),)))
    if hangs:
        options.append(st.just((hang(),)))
    return st.one_of(options)


@st.composite
def _plans(
    draw: st.DrawFn,
    min_calls: int,
    max_calls: int,
    durations: Sequence[float],
    failures: bool,
    hangs: bool,
    shields: bool,
    injects: bool,
    capacity_classes: tuple[str, ...],
) -> BatchPlan:
    count = draw(st.integers(min_calls, max_calls))
    calls: list[PlannedCall] = []
    for index in range(count):
        steps = draw(_bodies(durations, failures, hangs, shields))
        if injects and draw(st.booleans()):
            steps = (inject(_injected(f"c{index}")), *steps)
        if draw(st.booleans()) and not isinstance(steps[-1], FailStep):
            steps = (*steps, returns(f"result of c{index}"))
        parallel = draw(st.booleans())
        capacity_class = (
            draw(st.sampled_from((None, *capacity_classes))) if capacity_classes else None
        )
        calls.append(
            PlannedCall(
                call_id=f"c{index}", parallel=parallel, steps=steps, capacity_class=capacity_class
            )
        )
    return BatchPlan(calls=tuple(calls))


def tool_batches(
    *,
    min_calls: int = 1,
    max_calls: int = 8,
    durations: Sequence[float] = (0, 0.5, 1, 2),
    failures: bool = True,
    hangs: bool = False,
    shields: bool = False,
    injects: bool = False,
    capacity_classes: Sequence[str] = (),
) -> st.SearchStrategy[BatchPlan]:
    """Batches of ``min_calls``..``max_calls`` calls mixing parallel and exclusive tools.

    Args:
        min_calls: the fewest calls in a batch.
        max_calls: the most calls in a batch.
        durations: the virtual seconds a body may sleep.
        failures: whether a body may raise after sleeping.
        hangs: whether a body may hang until cancelled (run such batches with a cancellation,
            e.g. :func:`~dsh_tools.testing.cancel_at` at a time).
        shields: whether a body may sleep shielded from cancellation.
        injects: whether a body may first inject a context (``injected by <call id>``) into
            the batch.
        capacity_classes: capacity classes a call's tool may belong to (or none).
    """
    if not 0 <= min_calls <= max_calls:
        raise ValueError("need 0 <= min_calls <= max_calls")
    return _plans(
        min_calls,
        max_calls,
        tuple(durations),
        failures,
        hangs,
        shields,
        injects,
        tuple(capacity_classes),
    )


def _injected(call_id: str) -> HookContext:
    return HookContext(
        content=(TextBlock(text=f"injected by {call_id}"),), source=PluginSource(plugin="kit")
    )


# --- hook chains ---------------------------------------------------------------------------

PreAction: TypeAlias = Literal["pass", "await", "cancel", "allow", "deny", "ask", "raise"]
GuardAction: TypeAlias = Literal["none", "cancel", "deny", "raise"]
WrapperAction: TypeAlias = Literal[
    "pass", "await", "cancel_before", "cancel_after", "short", "raise"
]
PostAction: TypeAlias = Literal["pass", "await", "cancel", "accept", "block", "raise"]

_PRE: Final[tuple[PreAction, ...]] = ("pass", "await", "cancel", "allow", "deny", "ask", "raise")
_GUARD: Final[tuple[GuardAction, ...]] = ("none", "cancel", "deny", "raise")
_WRAPPER: Final[tuple[WrapperAction, ...]] = (
    "pass",
    "await",
    "cancel_before",
    "cancel_after",
    "short",
    "raise",
)
_POST: Final[tuple[PostAction, ...]] = ("pass", "await", "cancel", "accept", "block", "raise")


class ChainFailure(Exception):
    """What a ``raise`` action of a :class:`HookChain` raises."""


@final
@attrs.frozen(kw_only=True)
class HookChain:
    """Listeners for every waterfall, in registration order, and what they do.

    ``pre``: ``pass`` / ``await`` (a checkpoint) / ``cancel`` (cancels the controller) then
    delegate; ``allow`` / ``deny`` / ``ask`` / ``raise`` decide without delegating.
    ``guards``: ``none``, ``cancel`` (cancel, no denial), ``deny``, ``raise``.
    ``wrappers``: ``pass``, ``await``, ``cancel_before`` (cancel, then delegate),
    ``cancel_after`` (delegate, then cancel: a successful body's result becomes ``ABORTED``),
    ``short`` (return a result without the body), ``raise``. ``post``: ``pass`` / ``await`` /
    ``cancel`` then delegate; ``accept`` / ``block`` / ``raise`` decide.

    The predictions assume a registry without an approval service (``ask`` denies) and a
    signal that starts uncancelled.
    """

    pre: tuple[PreAction, ...] = ()
    guards: tuple[GuardAction, ...] = ()
    wrappers: tuple[WrapperAction, ...] = ()
    post: tuple[PostAction, ...] = ()

    @property
    def body_runs(self) -> bool:
        """Whether the tool body must run, predicted from the chain alone."""
        cancelled = False
        for action in self.pre:
            if action == "cancel":
                cancelled = True
            elif action != "pass" and action != "await":
                if action != "allow":
                    return False
                break
        for guard in self.guards:
            if guard == "cancel":
                cancelled = True
            elif guard != "none":
                return False
        if cancelled:
            return False
        for wrapper in self.wrappers:
            if wrapper == "cancel_before":
                return False
            if wrapper in ("short", "raise"):
                return False
        return True

    @property
    def guard_denies(self) -> bool:
        """Whether a guard's denial is the outcome (its text ``Error: denied by a guard``)."""
        for action in self.pre:
            if action not in ("pass", "await", "cancel"):
                if action != "allow":
                    return False
                break
        for guard in self.guards:
            if guard == "deny":
                return True
            if guard == "raise":
                return False
        return False

    def install(self, registry: ToolRegistry, controller: CancelController) -> Disposer:
        """Add every listener to ``registry`` (``cancel`` actions cancel ``controller``);
        the returned disposer removes them all.
        """
        disposers = [
            *(registry.hooks.pre_execute.add(_pre(a, controller)) for a in self.pre),
            *(registry.guard(_guard(a, controller)) for a in self.guards),
            *(registry.hooks.execute.add(_wrapper(a, controller)) for a in self.wrappers),
            *(registry.hooks.post_execute.add(_post(a, controller)) for a in self.post),
        ]

        def remove() -> None:
            for disposer in reversed(disposers):
                disposer()

        return Disposer(remove)


async def _act(
    action: str,
    controller: CancelController,
    who: str,
    decisions: Mapping[str, object],
    next: Callable[[], Awaitable[Any]],
) -> Any:
    """What a listener of a :class:`HookChain` does for ``action``: ``await`` (a checkpoint) or
    ``cancel`` / ``cancel_before`` (cancel the controller), then delegate; decide at once with
    ``decisions[action]``; ``raise``; else delegate. ``who`` names the listener in its texts.
    """
    if action == "await":
        await trio.lowlevel.checkpoint()
    elif action in ("cancel", "cancel_before"):
        controller.cancel(f"cancelled by {who}")
    elif action in decisions:
        return decisions[action]  # noqa: ASYNC910 - decides at once, as a real policy may
    elif action == "raise":
        raise ChainFailure(f"{who} failed")
    return await next()


_PRE_DECISIONS: Final[Mapping[str, PreToolDecision]] = {
    "allow": Allow(),
    "deny": Deny("denied by a pre_execute listener"),
    "ask": Ask(),
}


def _pre(action: PreAction, controller: CancelController) -> Any:
    async def listener(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return await _act(action, controller, "a pre_execute listener", _PRE_DECISIONS, next)

    return listener


def _guard(action: GuardAction, controller: CancelController) -> Any:
    def guard(execution: ToolExecution) -> str | None:
        if action == "cancel":
            controller.cancel("cancelled by a guard")
        elif action == "deny":
            return "denied by a guard"
        elif action == "raise":
            raise ChainFailure("a guard failed")
        return None

    return guard


_SHORT: Final = ToolExecutionResult(content=(TextBlock(text="short-circuited"),), is_error=False)


def _wrapper(action: WrapperAction, controller: CancelController) -> Any:
    async def wrapper(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        if action == "cancel_after":
            result = await next()
            controller.cancel("cancelled by a wrapper after the body")
            return result
        return await _act(action, controller, "a wrapper", {"short": _SHORT}, next)

    return wrapper


_POST_DECISIONS: Final[Mapping[str, PostToolDecision]] = {
    "accept": Accept(),
    "block": Block(feedback=(TextBlock(text="blocked"),)),
}


def _post(action: PostAction, controller: CancelController) -> Any:
    async def listener(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        return await _act(action, controller, "a post_execute listener", _POST_DECISIONS, next)

    return listener


def hook_chains(*, max_listeners: int = 3) -> st.SearchStrategy[HookChain]:
    """Chains of up to ``max_listeners`` listeners per waterfall (and as many guards)."""

    def actions(choices: tuple[str, ...]) -> st.SearchStrategy[Any]:
        return st.lists(st.sampled_from(choices), max_size=max_listeners).map(tuple)

    return st.builds(
        HookChain,
        pre=actions(_PRE),
        guards=actions(_GUARD),
        wrappers=actions(_WRAPPER),
        post=actions(_POST),
    )
