"""Stage 7 of a call: the ``execute`` wrapper waterfall around the body, the body itself (an
async body in the caller's task, a sync one in a worker thread), under the call's timeouts
(``_timeouts``), and what it returned turned into the call's outcome.

One path, and the fast one: a pool's body task is :func:`dispatch` itself. The one labelled
shortcut is in :func:`invoke`: arguments ``define_tool``'s validator accepted go straight to
the author's body (``tests/test_hot_path.py`` holds it to the general path).
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import attrs
import trio

from dsh_tools._errors import (
    ToolNotFoundError,
)
from dsh_tools._texts import (
    approved_arguments_changed,
    sync_body_returned_awaitable,
)
from dsh_tools._values._execution import (
    ToolDispatchExecution,
    ToolExecutionResult,
    ToolRunContext,
    arguments_digest,
    run_context,
    text_success,
)
from dsh_tools._values._json import CHECKED_BY, FrozenJsonObject
from dsh_tools._values._signal import (
    CancelSignal,
    fuse,
    linked_cancel_scope,
)

from ._call import (
    ALLOWED,
    BODY_ABANDONED,
    BODY_NOT_RUN,
    BODY_RAN,
    DISPATCHED,
    MISSING,
    PreparedCall,
    log_invalid,
    log_raised,
    logger,
)
from ._hooks import waterfall
from ._results import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    INVALID_RESULT,
    error_result,
    is_return_value,
    kind,
    normalize,
    text_error,
    valid_str,
)
from ._timeouts import run_timed, timeouts_for

if TYPE_CHECKING:
    from dsh_tools._values._definition import BodyPlan, ToolDefinition

    from ._hooks import ExecuteHook

__all__ = ["dispatch", "invoke"]

_NEVER: Final = CancelSignal.never()


async def dispatch(
    prepared: PreparedCall, report: Callable[[int], None] | None = None, index: int = 0
) -> None:
    """Stage 7: the ``execute`` wrapper waterfall around the body.

    The body runs in a trio cancel scope linked to the fusion of the caller's signal and a
    wrapper's replacement, and is always awaited until it returns (a sync body: until its
    worker thread returns, unless its definition says ``abandon_on_cancel``). Never raises
    for a tool, wrapper or policy failure (each becomes the call's outcome). Cancelling
    the caller's own trio scope raises ``trio.Cancelled`` once the body has unwound. Call
    at most once, and only when :attr:`needs_dispatch` is true.

    ``report`` (the scheduler's pools, which run this as a body task): the caller runs this
    inside a cancel scope linked to the call's signal already, so a body that no wrapper
    hears gets no scope of its own; when that scope cancels the body (or the body raises
    what no result holds, such as ``SystemExit``), the outcome is recorded
    (:meth:`interrupted_result`) and the exception propagates. ``report(index)`` is called
    once the outcome is recorded, on every path.
    """
    if prepared.stage != ALLOWED:
        raise RuntimeError("dispatch() runs once, and only for a call that needs dispatch")
    prepared.stage = DISPATCHED
    env = prepared.env
    hooks = env.host.hooks.execute
    linked = report is not None
    try:
        if hooks.active and (wrappers := hooks.for_agent(env.agent)):
            try:
                result = await _run_wrappers(prepared, wrappers)
            except Exception as exc:
                # a wrapper failed: final-result, deferred contexts lost, post_execute
                # skipped
                log_raised(prepared, "an execute wrapper", exc)
                prepared.final_result(error_result(exc))
                return  # noqa: ASYNC910 (the caller's stages checkpoint)
            _settle(prepared, result)
            return
        result = await invoke(prepared, env.signal, linked)
        # invoke read the signal after the body returned: nothing to replace
        if type(result) is ToolExecutionResult and not prepared.deferred:
            # what _settle records when the body deferred no context
            prepared.deferred = None
            prepared.result = result
        else:
            _settle(prepared, result, replace=False)
    except BaseException:
        if linked and prepared.result is None:
            _settle(prepared, prepared.interrupted_result())
        raise
    finally:
        if report is not None:
            report(index)


def _settle(prepared: PreparedCall, result: ToolExecutionResult, *, replace: bool = True) -> None:
    """Record what stage 7 produced: the outcome, with the contexts the body deferred
    (``replace``: a success becomes ``ABORTED`` if the signal has fired meanwhile).
    """
    if type(result) is not ToolExecutionResult:
        log_invalid(
            prepared, f"an execute wrapper returned {kind(result)}, not a ToolExecutionResult"
        )
        prepared.final_result(INVALID_RESULT)
        return
    deferred = prepared.deferred
    if deferred:
        try:
            result = attrs.evolve(
                result, additional_contexts=(*deferred, *result.additional_contexts)
            )
        except Exception as exc:  # a hand-built result whose contexts are not a sequence
            log_invalid(prepared, f"its additional_contexts cannot be read: {exc!r}")
            prepared.final_result(INVALID_RESULT)
            return
    # read only here: a pool need not keep the list until the call commits
    prepared.deferred = None
    prepared.result = _replace_if_cancelled(prepared, result) if replace else result


async def _run_wrappers(
    prepared: PreparedCall, wrappers: tuple[ExecuteHook, ...]
) -> ToolExecutionResult:
    env = prepared.env
    caller = env.signal
    dispatch_execution = ToolDispatchExecution(
        token=prepared.token,
        call_id=prepared.call_id,
        name=prepared.name,
        arguments=prepared.arguments,
        signal=caller,
        agent=env.agent,
        parent=env.parent,
    )

    async def body() -> ToolExecutionResult:
        if prepared.approved is not None and not _as_approved(
            prepared, dispatch_execution.arguments
        ):
            return _changed(prepared)  # noqa: ASYNC910 (a wrapper forced new arguments in)
        upstream = dispatch_execution.signal
        if upstream is caller:
            return await invoke(prepared, caller)
        # wrapper first: its reason wins when both are already cancelled
        fused, detach = fuse((upstream, caller))
        dispatch_execution.signal = fused
        try:
            return await invoke(prepared, fused)
        finally:
            dispatch_execution.signal = upstream
            detach()

    return await waterfall(wrappers, (dispatch_execution,), body)()


def _as_approved(prepared: PreparedCall, arguments: object) -> bool:
    """Whether ``arguments`` are those the call's approval allowed (their digest)."""
    try:
        return arguments_digest(prepared.name, arguments) == prepared.approved
    except Exception:  # not even JSON data: not what was approved
        return False


def _changed(prepared: PreparedCall) -> ToolExecutionResult:
    logger.warning(
        'tool "%s" (%s): the arguments changed after they were approved; the call is denied',
        prepared.name,
        prepared.call_id,
    )
    return text_error(approved_arguments_changed(prepared.name))


async def invoke(
    prepared: PreparedCall, signal: CancelSignal, linked: bool = False, timed: bool = False
) -> ToolExecutionResult:
    """The innermost ``next()``: look the tool up, run the body under ``signal`` with its
    context (which reads the call's token, identity, arguments and the list its deferred
    contexts join from the call when the body first asks), and turn what it returned into
    the call's outcome.

    ``linked``: the caller's cancel scope is linked to ``signal`` already (see
    :meth:`dispatch`); an async body runs without a scope of its own, and nothing here
    checkpoints after it. ``timed``: :func:`run_timed` applied the tool's timeouts to
    ``signal`` already.
    """
    if signal is not _NEVER and signal.cancelled:
        return ABORTED_BEFORE_DISPATCH  # noqa: ASYNC910 (the caller's stages checkpoint)
    if prepared.approved is not None and not _as_approved(prepared, prepared.arguments):
        return _changed(prepared)  # noqa: ASYNC910
    env = prepared.env
    request = prepared.request
    tool = env.host.lookup(request.name, env.agent)
    if tool is None:
        return error_result(ToolNotFoundError(request.name))  # noqa: ASYNC910
    timeouts = env.host.timeouts
    # two reads when no tool of the registry has a timeout and there is no default (the
    # body runs in this frame: no extra coroutine on the common path)
    if timeouts.watched and timeouts.enforced and not timed:
        limits = timeouts_for(tool, timeouts)
        if limits is not None:
            return await run_timed(prepared, signal, *limits, invoke)
    if prepared.body != BODY_NOT_RUN:
        # the body runs again within this call (a retry policy called next() again)
        state = prepared.progress_state()
        state.ended = False
        state.runs += 1
    arguments = prepared.arguments
    # the context reads the call's token, identity, arguments and deferred list from the
    # call when the body first asks (context_fields): a body that reads none of them costs
    # no token and no list
    context = run_context(signal, prepared)
    plan: BodyPlan = tool._plan  # pyright: ignore[reportPrivateUsage]
    if not plan.awaited:
        return await _invoke_sync(prepared, tool, tool.execute, context, signal, linked)
    # the labelled shortcut (checked against the general path in tests/test_hot_path.py):
    # arguments define_tool's validator accepted go straight to the author's body, as
    # ``execute`` itself would send them after finding the mark
    run: Callable[[object, ToolRunContext], Awaitable[object]]
    body = plan.body
    if (
        body is not None
        and type(arguments) is FrozenJsonObject
        and getattr(arguments, CHECKED_BY, None) is plan.validate
    ):
        run = body
        convert = plan.convert
    else:
        # no runtime cast on the hot path: the plan says the body returns an awaitable
        run = tool.execute  # pyright: ignore[reportAssignmentType]
        convert = None
    prepared.body = BODY_RAN
    returned: object = MISSING
    failure: Exception | None = None
    try:
        # converted here, as the validating execute converts inside the body's call: a
        # conversion that raises (an attrs validator, say) is the call's failure
        value = arguments if convert is None else convert(arguments)
        if linked or signal is _NEVER:
            returned = await run(value, context)
        else:
            with linked_cancel_scope(signal):
                returned = await run(value, context)
    except Exception as exc:
        # outside the per-call cancel scope: the failure belongs to the model
        failure = exc
    finally:
        progress = prepared.progress
        if progress is not None:
            progress.end()
    # The body has unwound. If the caller's own trio scope was cancelled meanwhile (a
    # shielded body finished anyway), that cancellation wins now, as trio requires. (A
    # linked caller is inside a scope that may be cancelled by the signal itself: the
    # outcome is recorded first, and the caller's next checkpoint raises.)
    if not linked:
        await trio.lowlevel.checkpoint_if_cancelled()
    if failure is not None:
        log_raised(prepared, "the tool body", failure)
        return error_result(failure)  # noqa: ASYNC910
    if returned is MISSING or (signal is not _NEVER and signal.cancelled):
        return ABORTED  # noqa: ASYNC910
    if type(returned) is str and returned.isascii():
        # the common case of _normalize, inline: valid JSON text by construction
        result = prepared.trusted = text_success(returned)
        return result  # noqa: ASYNC910
    return _normalize(prepared, returned)  # noqa: ASYNC910


async def _invoke_sync(
    prepared: PreparedCall,
    tool: ToolDefinition,
    body: Callable[..., object],
    context: ToolRunContext,
    signal: CancelSignal,
    linked: bool,
) -> ToolExecutionResult:
    """Run a sync body in a worker thread through the registry's thread limiter.

    ``started`` is set in the thread, under a lock, right before the body runs; once the
    call gives up on the thread (abandoned), a thread that had not started yet does not run
    the body at all. So "cancelled while waiting for a slot" is exactly "never started".
    """
    arguments = prepared.arguments
    lock = threading.Lock()
    state = {"started": False, "given_up": False}

    def run() -> tuple[object]:
        # boxed: trio refuses a thread function that returns a coroutine; we report it
        with lock:
            if state["given_up"]:
                return (MISSING,)
            state["started"] = True
        return (body(arguments, context),)

    returned: object = MISSING
    failure: Exception | None = None
    scope = contextlib.nullcontext() if signal is _NEVER else linked_cancel_scope(signal)
    try:
        with scope:
            (returned,) = await trio.to_thread.run_sync(
                run,
                abandon_on_cancel=tool.abandon_on_cancel,
                limiter=prepared.env.host.thread_limiter,
            )
    except Exception as exc:
        failure = exc
    finally:
        progress = prepared.progress
        if progress is not None:
            progress.end()
        with lock:
            state["given_up"] = True
            started = state["started"]
        if not started:
            prepared.body = BODY_NOT_RUN
        elif returned is MISSING and failure is None and tool.abandon_on_cancel:
            # a cancellation left the started body's thread running (in a pool, this is
            # what the outcome recorded while the cancellation propagates says)
            prepared.body = BODY_ABANDONED
        else:
            prepared.body = BODY_RAN
    if not linked:
        await trio.lowlevel.checkpoint_if_cancelled()
    if failure is not None:
        log_raised(prepared, "the tool body", failure)
        return error_result(failure)  # noqa: ASYNC910
    if returned is MISSING:
        return prepared.interrupted_result()  # noqa: ASYNC910
    if inspect.isawaitable(returned):
        if inspect.iscoroutine(returned):
            returned.close()
        text = sync_body_returned_awaitable(prepared.name, type(returned).__name__)
        logger.warning('tool "%s" (%s): %s', prepared.name, prepared.call_id, text)
        return text_error(text)  # noqa: ASYNC910
    if signal.cancelled:
        return ABORTED  # noqa: ASYNC910
    return _normalize(prepared, returned)  # noqa: ASYNC910


def _normalize(prepared: PreparedCall, returned: object) -> ToolExecutionResult:
    """Stage 7.6, remembering what stage 9 needs: a success built from a valid ``str`` is
    final as it is; a value that is not content is named in the stage-9 log.
    """
    if type(returned) is str and returned.isascii():
        # the common case, without normalize's dispatch: valid JSON text by construction
        result = prepared.trusted = text_success(returned)
        return result
    result = normalize(returned)
    if type(returned) is str and valid_str(returned):
        prepared.trusted = result
    elif not is_return_value(returned):
        prepared.returned = returned
    return result


def _replace_if_cancelled(
    prepared: PreparedCall, result: ToolExecutionResult
) -> ToolExecutionResult:
    signal = prepared.env.signal
    if result.is_error or signal is _NEVER or not signal.cancelled:
        return result
    replacement = ABORTED if prepared.body != BODY_NOT_RUN else ABORTED_BEFORE_DISPATCH
    contexts = result.additional_contexts
    if contexts:
        return attrs.evolve(replacement, additional_contexts=contexts)
    return replacement
