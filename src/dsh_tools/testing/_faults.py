"""Fault injection: cancel a batch's signal at an exact virtual time, or the k-th time a named
stage of a named call is reached.

Stages are observed through the registry's public hooks only (the hooks ``cancel_at`` adds
are removed by the disposer it returns):

================  ===========================================================================
stage             reached when ...
================  ===========================================================================
``pre_execute``   the call enters the ``pre_execute`` waterfall (an outermost listener)
``approval``      the waterfall decided ``Ask``: the approval service is asked next
``guard``         the global guards are evaluated (a guard added after the existing ones)
``execute``       the call enters its ``execute`` wrappers (an outermost wrapper)
``body``          the innermost wrapper hands over to the body; the cancellation is delivered
                  at the body's first schedule point, so the body has started
``post_execute``  the call enters the ``post_execute`` waterfall (an outermost listener)
``result``        the ``result`` observers are told the call's final result
================  ===========================================================================
"""

from __future__ import annotations

import math
from typing import Final, Literal, TypeAlias, final, get_args, overload

import attrs
import trio

from dsh_tools import (
    Ask,
    CancelController,
    Disposer,
    ExecuteNext,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
)

__all__ = ["STAGES", "CallStage", "StageReached", "cancel_at"]

CallStage: TypeAlias = Literal[
    "pre_execute", "approval", "guard", "execute", "body", "post_execute", "result"
]
"""A stage of one call's pipeline that :func:`cancel_at` can watch."""

STAGES: Final[tuple[CallStage, ...]] = get_args(CallStage)
"""Every :data:`CallStage`, in the order a call reaches them."""


def _positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"{attribute.name} must be a positive int, not {value!r}")


def _stage(instance: object, attribute: attrs.Attribute[CallStage], value: str) -> None:
    if value not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}; not {value!r}")


@final
@attrs.frozen(kw_only=True)
class StageReached:
    """The moment the ``count``-th time call ``call_id`` reaches ``stage``.

    Attributes:
        call_id: the call, by id.
        stage: the stage (see :data:`CallStage`).
        count: which time (1 = the first; a retry wrapper reaches ``body`` more than once).
    """

    call_id: str = attrs.field(validator=attrs.validators.instance_of(str))
    stage: CallStage = attrs.field(validator=_stage)
    count: int = attrs.field(default=1, validator=_positive)


@overload
def cancel_at(controller: CancelController, *, when: float) -> Disposer: ...
@overload
def cancel_at(
    controller: CancelController,
    *,
    when: StageReached,
    registry: ToolRegistry,
    reason: object = None,
) -> Disposer: ...
def cancel_at(
    controller: CancelController,
    *,
    when: float | StageReached,
    registry: ToolRegistry | None = None,
    reason: object = None,
) -> Disposer:
    """Cancel ``controller`` at a moment of a batch.

    Args:
        controller: the controller whose signal the batch (or call) runs under.
        when: a trio clock time (a ``float``: on a fresh ``MockClock`` the run starts at 0),
            or a :class:`StageReached`. A time becomes the controller's deadline (kept if it
            already had an earlier one); the signal's reason is then
            :class:`~dsh_tools.DeadlineReached`. No background task is started.
        registry: for a :class:`StageReached`, the registry whose hooks observe the stage.
        reason: the cancellation reason at a stage (ignored for a time).

    Returns:
        A :class:`~dsh_tools.Disposer` that removes the observing hook (or restores the
        previous deadline, if the signal has not fired yet).

    Raises:
        TypeError: ``when`` is neither a number nor a :class:`StageReached`, or a
            :class:`StageReached` comes without a registry.
    """
    if isinstance(when, StageReached):
        if not isinstance(registry, ToolRegistry):
            raise TypeError("cancel_at(..., when=StageReached(...)) needs registry=")
        return _at_stage(controller, when, registry, reason)
    if isinstance(when, bool) or not isinstance(when, int | float) or math.isnan(when):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"when must be a trio clock time or a StageReached, not {when!r}")
    signal = controller.signal
    previous = signal.deadline
    controller.set_deadline(min(previous, float(when)))

    def restore() -> None:
        controller.set_deadline(None if previous == math.inf else previous)

    return Disposer(restore)


def _at_stage(
    controller: CancelController, point: StageReached, registry: ToolRegistry, reason: object
) -> Disposer:
    seen = 0
    call_id = point.call_id

    def reached(actual_call_id: str) -> bool:
        """Count a visit of the stage; ``True`` exactly at the watched one."""
        nonlocal seen
        if actual_call_id != call_id:
            return False
        seen += 1
        return seen == point.count

    def fire() -> None:
        controller.cancel(reason)

    stage = point.stage
    if stage == "pre_execute":

        async def on_pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
            if reached(execution.call_id):
                fire()
            return await next()

        return registry.hooks.pre_execute.add(on_pre, prepend=True)
    if stage == "approval":

        async def on_ask(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
            decision = await next()
            if isinstance(decision, Ask) and reached(execution.call_id):
                fire()
            return decision

        return registry.hooks.pre_execute.add(on_ask, prepend=True)
    if stage == "guard":

        def on_guard(execution: ToolExecution) -> None:
            if reached(execution.call_id):
                fire()

        return registry.guard(on_guard)
    if stage == "execute":

        async def on_execute(
            execution: ToolDispatchExecution, next: ExecuteNext
        ) -> ToolExecutionResult:
            if reached(execution.call_id):
                fire()
            return await next()

        return registry.hooks.execute.add(on_execute, prepend=True)
    if stage == "body":

        async def fire_soon() -> None:  # noqa: ASYNC910 - a task body: start_soon is its schedule point
            # runs at the first schedule point after the body was entered
            fire()

        async def on_body(
            execution: ToolDispatchExecution, next: ExecuteNext
        ) -> ToolExecutionResult:
            if not reached(execution.call_id):
                return await next()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fire_soon)
                return await next()

        return registry.hooks.execute.add(on_body)
    if stage == "post_execute":

        async def on_post(
            execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
        ) -> PostToolDecision:
            if reached(execution.call_id):
                fire()
            return await next()

        return registry.hooks.post_execute.add(on_post, prepend=True)

    def on_result(execution: ToolExecution, result: ToolExecutionResult) -> None:
        if reached(execution.call_id):
            fire()

    return registry.hooks.result.add(on_result)
