"""Scripted tools: bodies made of steps (sleep, checkpoint, fail, hang, shielded, inject,
returns) that record when each call started, how it ended and when, on trio's clock (virtual in tests).
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, final

import attrs
import trio

from dsh_tools import (
    Disposer,
    HookContext,
    JsonValue,
    ToolDefinition,
    ToolRegistry,
    ToolRunContext,
    ToolScope,
    inject_context,
)

__all__ = [
    "CheckpointStep",
    "FailStep",
    "HangStep",
    "InjectStep",
    "ReturnsStep",
    "RunEnding",
    "ScriptedRun",
    "ScriptedTool",
    "ShieldedStep",
    "SleepStep",
    "Step",
    "checkpoint",
    "fail",
    "hang",
    "inject",
    "returns",
    "scripted_tool",
    "shielded",
    "sleep",
]


def _seconds(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"{attribute.name} must be a number of seconds >= 0, not {value!r}")


@final
@attrs.frozen(kw_only=True)
class SleepStep:
    """``await trio.sleep(seconds)``: cancellable."""

    seconds: float = attrs.field(validator=_seconds)


@final
@attrs.frozen(kw_only=True)
class CheckpointStep:
    """``await trio.lowlevel.checkpoint()``: one schedule point, a cancel point."""


@final
@attrs.frozen(kw_only=True)
class FailStep:
    """Raise ``exception`` (an exception class is instantiated afresh for every run)."""

    exception: Exception | type[Exception]


@final
@attrs.frozen(kw_only=True)
class HangStep:
    """``await trio.sleep_forever()``: ends only through cancellation."""


@final
@attrs.frozen(kw_only=True)
class ShieldedStep:
    """Sleep ``seconds`` inside a shielded cancel scope: cancellation waits for it."""

    seconds: float = attrs.field(validator=_seconds)


@final
@attrs.frozen(kw_only=True)
class InjectStep:
    """``inject_context(context)``: the context joins the running batch's FIFO now."""

    context: HookContext = attrs.field(validator=attrs.validators.instance_of(HookContext))


@final
@attrs.frozen(kw_only=True)
class ReturnsStep:
    """End the body, returning ``text`` (one text block). Must be the last step."""

    text: str = attrs.field(validator=attrs.validators.instance_of(str))


Step: TypeAlias = (
    SleepStep | CheckpointStep | FailStep | HangStep | ShieldedStep | InjectStep | ReturnsStep
)
"""One step of a scripted body."""


def sleep(seconds: float) -> SleepStep:
    """A step that sleeps ``seconds`` on trio's clock (cancellable)."""
    return SleepStep(seconds=seconds)


def checkpoint() -> CheckpointStep:
    """A step that is one trio checkpoint."""
    return CheckpointStep()


def fail(exception: Exception | type[Exception] | str = "scripted failure") -> FailStep:
    """A step that raises ``exception`` (a ``str`` becomes a ``RuntimeError``)."""
    if isinstance(exception, str):
        exception = RuntimeError(exception)
    if not (
        isinstance(exception, Exception)
        or (isinstance(exception, type) and issubclass(exception, Exception))  # pyright: ignore[reportUnnecessaryIsInstance]
    ):
        raise TypeError(
            f"fail() takes an Exception (instance or class) or a str, not {exception!r}"
        )
    return FailStep(exception=exception)


def hang() -> HangStep:
    """A step that never ends by itself (only cancellation ends it)."""
    return HangStep()


def shielded(seconds: float) -> ShieldedStep:
    """A step that sleeps ``seconds`` shielded from cancellation."""
    return ShieldedStep(seconds=seconds)


def inject(context: HookContext) -> InjectStep:
    """A step that injects ``context`` into the running batch (:func:`~dsh_tools.inject_context`;
    outside a batch the body fails with its ``RuntimeError``).
    """
    return InjectStep(context=context)


def returns(text: str) -> ReturnsStep:
    """The last step: return ``text``."""
    return ReturnsStep(text=text)


RunEnding: TypeAlias = Literal["returned", "failed", "cancelled"]
"""How a scripted run ended: it returned, raised an exception, or was cancelled."""


@final
@attrs.frozen(kw_only=True)
class ScriptedRun:
    """One run of a scripted body.

    Attributes:
        call_id: the call the body ran for.
        started: trio clock time the body started.
        ended: trio clock time it ended, or ``None`` while it still runs.
        ending: how it ended, or ``None`` while it still runs.
    """

    call_id: str
    started: float
    ended: float | None = None
    ending: RunEnding | None = None

    @property
    def running(self) -> bool:
        """Whether the body is still running."""
        return self.ending is None


_PARAMETERS: Final[dict[str, object]] = {"type": "object", "properties": {}}


@final
@attrs.define(eq=False)
class ScriptedTool:
    """A tool whose body runs ``steps`` in order and records every run.

    Build one with :func:`scripted_tool`. The body accepts any arguments (the definition is a
    raw :class:`~dsh_tools.ToolDefinition`, which validates nothing) and returns the text of its
    :func:`returns` step, or ``"done <call_id>"``.

    Attributes:
        name: the tool's name.
        steps: the body's steps.
        parallel: whether calls of this tool may join a parallel pool.
        capacity_class: the tool's capacity class (``ToolDefinition.capacity_class``), or
            ``None``.
    """

    name: str
    steps: tuple[Step, ...]
    parallel: bool = True
    capacity_class: str | None = None
    _runs: list[ScriptedRun] = attrs.field(init=False, factory=lambda: list[ScriptedRun]())
    _definition: ToolDefinition = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        for index, step in enumerate(self.steps):
            if not isinstance(step, Step):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"step {index} of {self.name!r} is not a step: {step!r}")
            if isinstance(step, ReturnsStep) and index != len(self.steps) - 1:
                raise ValueError(f"returns() must be the last step of {self.name!r}")
        parallel = self.parallel
        self._definition = ToolDefinition(
            name=self.name,
            description=f"scripted tool {self.name}",
            parameters=_PARAMETERS,
            execute=self,
            is_concurrency_safe=(lambda _arguments: parallel),
            capacity_class=self.capacity_class,
        )

    @property
    def definition(self) -> ToolDefinition:
        """The definition to register (its ``execute`` is this object)."""
        return self._definition

    def register(self, target: ToolRegistry | ToolScope) -> Disposer:
        """Register the tool in a registry or a scope; return the disposer."""
        return target.register(self._definition)

    @property
    def runs(self) -> tuple[ScriptedRun, ...]:
        """Every run so far, in start order."""
        return tuple(self._runs)

    @property
    def running(self) -> tuple[ScriptedRun, ...]:
        """The runs that have not ended yet."""
        return tuple(run for run in self._runs if run.running)

    def started(self) -> tuple[str, ...]:
        """The call ids of every run, in start order."""
        return tuple(run.call_id for run in self._runs)

    def ended(self, ending: RunEnding) -> tuple[str, ...]:
        """The call ids of the runs that ended with ``ending``, in start order."""
        return tuple(run.call_id for run in self._runs if run.ending == ending)

    async def __call__(self, arguments: JsonValue, context: ToolRunContext) -> str:
        """The body: runs the steps, recording the run. Cancellable at every ``sleep``,
        ``checkpoint`` and ``hang`` step; a ``shielded`` step finishes first.
        """
        index = len(self._runs)
        self._runs.append(ScriptedRun(call_id=context.call_id, started=trio.current_time()))
        ending: RunEnding = "failed"
        try:
            text = await self._run_steps(context)
        except trio.Cancelled:
            ending = "cancelled"
            raise
        else:
            ending = "returned"
            return text
        finally:
            self._runs[index] = attrs.evolve(
                self._runs[index], ended=trio.current_time(), ending=ending
            )

    async def _run_steps(self, context: ToolRunContext) -> str:
        for step in self.steps:
            if isinstance(step, SleepStep):
                await trio.sleep(step.seconds)
            elif isinstance(step, CheckpointStep):
                await trio.lowlevel.checkpoint()
            elif isinstance(step, FailStep):
                exception = step.exception
                raise exception() if isinstance(exception, type) else exception
            elif isinstance(step, HangStep):
                await trio.sleep_forever()
            elif isinstance(step, ShieldedStep):
                with trio.CancelScope(shield=True):
                    await trio.sleep(step.seconds)
            elif isinstance(step, InjectStep):
                inject_context(step.context)
            else:
                # a script may have no schedule point at all: the caller's stages checkpoint
                return step.text  # noqa: ASYNC910
        return f"done {context.call_id}"  # noqa: ASYNC910


def scripted_tool(
    name: str, *steps: Step, parallel: bool = True, capacity_class: str | None = None
) -> ScriptedTool:
    """A tool named ``name`` whose body runs ``steps`` and records its runs.

    Example::

        slow = scripted_tool("slow", sleep(2), returns("slow done"))
        slow.register(registry)

    Args:
        name: the tool name the calls use.
        steps: :func:`sleep`, :func:`checkpoint`, :func:`fail`, :func:`hang`,
            :func:`shielded`, :func:`inject`, and last, optionally, :func:`returns`.
        parallel: ``True`` (default) classifies every call as parallel-safe; ``False`` makes
            each call an exclusive barrier.
        capacity_class: the tool's capacity class (see
            ``run_tool_calls(..., capacity_limits=...)``).
    """
    return ScriptedTool(name=name, steps=steps, parallel=parallel, capacity_class=capacity_class)
