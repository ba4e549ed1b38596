"""Stages 8-10 of a call: ``post_execute`` (for a post-result), the final snapshot (stage 9),
the ``result`` observers (stage 10). A call commits through :func:`complete_now` (no await
when no ``post_execute`` listener hears it) or :func:`complete`.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Final, cast

import attrs

from dsh_tools._texts import (
    debug_traceback,
    error_message,
    one_line,
    post_execute_returned,
    post_execute_unreadable,
)
from dsh_tools._values._execution import (
    Accept,
    Block,
    PostToolDecision,
    ToolExecutionResult,
)

from ._call import FINAL, MISSING, PreparedCall, log_invalid, log_raised, logger
from ._hooks import waterfall
from ._results import (
    ABORTED_BEFORE_DISPATCH,
    INVALID_RESULT,
    Invalid,
    cap_binary,
    describe,
    error_result,
    freeze_result,
    kind,
    media_inside,
    text_error,
)

if TYPE_CHECKING:
    from ._hooks import ResultObserver

__all__ = ["complete", "complete_now"]

_ACCEPT: Final = Accept()


async def _default_accept() -> PostToolDecision:
    return _ACCEPT  # noqa: ASYNC910


def complete_now(
    prepared: PreparedCall,
) -> ToolExecutionResult | None:
    """What :meth:`complete` returns, when it needs no await: ``None`` when a
    ``post_execute`` listener hears the call (then await :meth:`complete`).
    """
    result = prepared.result
    stage = prepared.stage
    if stage >= FINAL:
        assert result is not None
        # a suspended call's placeholder is no result, a replayed one was observed already
        return _materialize(prepared, result) if stage == FINAL else result
    env = prepared.env
    listeners = env.host.hooks.post_execute
    if listeners.active and listeners.for_agent(env.agent):
        return None
    if result is None:
        result = ABORTED_BEFORE_DISPATCH  # what _outcome gives
    elif result is prepared.trusted and not env.host.hooks.result.active:
        return result  # what _materialize gives: nothing to check, no observer
    return _materialize(prepared, result)


async def complete(
    prepared: PreparedCall,
) -> ToolExecutionResult:
    """Stages 8-10: the ``post_execute`` waterfall (for outcomes that reach it), the final
    snapshot, the ``result`` observers.

    Honest interrupts: an outcome settled before the signal fired is kept as it is, even
    when the signal has fired by the time the call commits (only a body or wrapper still
    running when it fired makes the outcome ``ABORTED``, in :meth:`dispatch`).

    Returns the frozen final result, the very object the observers saw. Never raises for a
    tool or policy failure. Not a checkpoint by itself (the caller yields once per group of
    commits); cancelling the caller's trio scope while ``post_execute`` awaits raises
    ``trio.Cancelled``. If the call needed dispatch but :meth:`dispatch`
    never ran, the outcome is ``ABORTED_BEFORE_DISPATCH``.
    """
    result = complete_now(prepared)
    if result is not None:
        return result  # noqa: ASYNC910
    return _materialize(prepared, await _post_execute(prepared, _outcome(prepared)))


def _outcome(
    prepared: PreparedCall,
) -> ToolExecutionResult:
    """The post-result (a call that needed dispatch but never had it: aborted)."""
    outcome = prepared.result
    if outcome is None:
        return ABORTED_BEFORE_DISPATCH
    return outcome


def _materialize(prepared: PreparedCall, final: ToolExecutionResult) -> ToolExecutionResult:
    """Stages 9-10: the final snapshot (not for the very success built from a valid str),
    then the ``result`` observers.
    """
    if final is not prepared.trusted:
        try:
            final = freeze_result(final)
        except Invalid as invalid:
            detail = str(invalid)
            bad = prepared.returned
            if bad is not MISSING and detail.startswith("content[0] "):
                detail = (
                    f"a body returned {kind(bad)}, where str, content blocks, ToolOutput or "
                    "lossless JSON data belong"
                )
                if media_inside(bad):
                    detail += (
                        " (it holds a picture, sound or file inside its data: return such "
                        "blocks as content, [text, ImageBlock(...)] or ToolOutput(content=...))"
                    )
            log_invalid(prepared, detail)
            final = INVALID_RESULT
        else:
            final = cap_binary(final, prepared.env.host.max_binary_bytes)
    env = prepared.env
    observers = env.host.hooks.result
    if observers.active:
        heard = observers.for_agent(env.agent)
        if heard:
            _notify(prepared, final, heard)
    return final


async def _post_execute(
    prepared: PreparedCall, outcome: ToolExecutionResult
) -> ToolExecutionResult:
    env = prepared.env
    execution = prepared.execution()
    listeners = env.host.hooks.post_execute.for_agent(env.agent)
    try:
        decision = cast(object, await waterfall(listeners, (execution, outcome), _default_accept)())
    except Exception as exc:
        log_raised(prepared, "a post_execute listener", exc)
        return error_result(exc)  # noqa: ASYNC910
    # Block is read first: a value that is somehow both is the restrictive one.
    try:
        if isinstance(decision, Block):
            result = ToolExecutionResult(
                content=decision.feedback,
                is_error=True,
                additional_contexts=decision.additional_contexts,
            )
        elif isinstance(decision, Accept):
            content = decision.content
            extra = tuple(decision.additional_contexts)
            result = outcome
            if content is not None or extra:
                result = attrs.evolve(
                    outcome,
                    content=outcome.content if content is None else content,
                    additional_contexts=(*outcome.additional_contexts, *extra),
                )
        else:
            return text_error(post_execute_returned(describe(decision)))
    except Exception as exc:  # a hand-built decision whose fields cannot be read
        log_raised(prepared, "reading a post_execute decision", exc)
        return text_error(post_execute_unreadable(type(decision).__name__, error_message(exc)))
    return result


def _notify(
    prepared: PreparedCall, result: ToolExecutionResult, observers: tuple[ResultObserver, ...]
) -> None:
    execution = prepared.execution()
    for observer in observers:
        try:
            returned = observer(execution, result)
            if inspect.isawaitable(returned):
                if inspect.iscoroutine(returned):
                    returned.close()
                raise TypeError("result observers are synchronous: it returned an awaitable")
        except Exception as exc:
            logger.warning(
                'tool "%s" (%s): tools/result observer failed: %s',
                prepared.name,
                prepared.call_id,
                one_line(exc),
                exc_info=debug_traceback(logger, exc),
            )
