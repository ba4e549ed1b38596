"""Stages 0-6 of a call: the arguments snapshotted (0), the signal (1), validation first when
a hook or guard hears the call, the ``pre_execute`` waterfall (2), an ``Ask`` to the approval
service (3, 4), ``Deny`` or the guards after ``Allow`` (5), the signal again (6).

:func:`open_call` runs 0-1, and 5-6 too when no ``pre_execute`` listener hears the call (the
common case: nothing awaits); otherwise the call is left ``PENDING`` for
:func:`apply_policies`. :func:`resume_suspended` is the same opening for a call whose deferred
approval a resumed batch decides: stage 0, validation, then 4-6 from the decision.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Final, cast

import attrs
import trio

from dsh_tools._errors import (
    ApprovalSetupWarning,
    JsonSnapshotError,
    ToolArgsError,
)
from dsh_tools._texts import (
    approval_cancelled,
    approval_needs_agent,
    approval_not_supported,
    approval_rejected,
    approval_unavailable,
    arguments_edited,
    deny_reason_not_str,
    pre_execute_returned,
)
from dsh_tools._values._content import HookContext, UserSource, text_block
from dsh_tools._values._execution import (
    Allow,
    Approval,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    Deny,
    PreToolDecision,
    ToolExecution,
    ToolExecutionInput,
    arguments_digest,
    read_approval,
)
from dsh_tools._values._json import (
    CHECKED_BY,
    FrozenJsonObject,
    JsonValue,
    dumps_json,
    snapshot_json,
)
from dsh_tools._values._presentation import call_view_of
from dsh_tools._values._signal import (
    CancelSignal,
)

from ._call import (
    OPENED,
    PENDING,
    CallEnv,
    CallRequest,
    InvalidArguments,
    PipelineHost,
    PreparedCall,
    log_raised,
    logger,
    violations,
)
from ._hooks import waterfall
from ._results import (
    ABORTED_BEFORE_DISPATCH,
    INVALID_ARGUMENTS,
    describe,
    error_result,
    kind,
    reason_text,
    text_error,
)

if TYPE_CHECKING:
    pass

__all__ = ["apply_policies", "approved", "open_call", "prepare", "resume_suspended"]

_ALLOW: Final = Allow()
_NEVER: Final = CancelSignal.never()


class _Unreachable(Exception):
    pass


async def _default_allow() -> PreToolDecision:
    return _ALLOW  # noqa: ASYNC910


async def prepare(host: PipelineHost, input: ToolExecutionInput) -> PreparedCall:
    """Stages 0-6 of one call: a cancel point at entry, :func:`open_call`, then (when
    ``pre_execute`` listeners hear the call) :meth:`PreparedCall.apply_policies`.

    Raises:
        TypeError: ``input`` is not a :class:`ToolExecutionInput`.
        trio.Cancelled: the caller's trio scope is cancelled (at entry, or while a
            ``pre_execute`` listener or the approval service awaits).
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    if type(input) is not ToolExecutionInput and not isinstance(input, ToolExecutionInput):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"execute() takes a ToolExecutionInput, not {type(input).__name__}")
    prepared = open_call(
        CallEnv(host, input.signal, input.agent, input.parent), input, input.arguments
    )
    if prepared.stage == PENDING:
        await apply_policies(prepared)
    return prepared


def open_call(env: CallEnv, request: CallRequest, arguments: object) -> PreparedCall:
    """Stages 0-1 of one call, and stages 5-6 too when no ``pre_execute`` listener hears it
    (then the decision is ``Allow`` and nothing awaits). Otherwise the call is left at stage
    ``PENDING``: await :meth:`PreparedCall.apply_policies` next.

    Never raises for a tool or policy failure.
    """
    # stage 0: wins over a cancelled signal
    try:
        # a frozen object the library built passes at once (snapshot_json's first rule, inline
        # for the scheduler's parsed arguments); one built around its constructor (a plugin's
        # dict.__new__) is checked like a dict
        if type(arguments) is FrozenJsonObject and hasattr(arguments, CHECKED_BY):
            frozen: JsonValue = arguments
        else:
            frozen = snapshot_json(arguments)
    except JsonSnapshotError as exc:
        logger.warning(
            'tool "%s" (%s): arguments rejected at the JSON boundary: %s',
            request.name,
            request.call_id,
            exc,
        )
        return PreparedCall(env, request, None).final_result(INVALID_ARGUMENTS)
    except Exception as exc:
        prepared = PreparedCall(env, request, None)
        log_raised(prepared, "reading the arguments", exc)
        return prepared.final_result(error_result(exc))
    prepared = PreparedCall(env, request, frozen)
    signal = env.signal
    if signal is not _NEVER and signal.cancelled:  # stage 1
        return prepared.final_result(ABORTED_BEFORE_DISPATCH)
    host = env.host
    listeners = host.hooks.pre_execute
    if listeners.active and listeners.for_agent(env.agent):
        # validation first: nobody decides about a call that cannot run
        found = violations(prepared)
        if found:
            return _invalid(prepared, found)
        return prepared.pending()
    return _allowed(prepared, env)


def _invalid(prepared: PreparedCall, violations: list[str]) -> PreparedCall:
    """Settle on ``INVALID_ARGS``, as the body's own validation would have (a post-result)."""
    error = ToolArgsError(violations)
    log_raised(prepared, "validating the arguments", error)
    return prepared.post_result(error_result(error))


async def apply_policies(prepared: PreparedCall) -> None:  # noqa: ASYNC910
    """Stages 2-6 of a call at stage ``PENDING`` (``pre_execute`` listeners hear it): the
    ``pre_execute`` waterfall, the approval service, guards. Never raises for a tool or policy
    failure; raises ``trio.Cancelled`` when the caller's trio scope is cancelled while a
    listener or the approval service awaits.

    Fails closed: a decision the pipeline cannot read (not an ``Allow`` / ``Deny`` / ``Ask``,
    a ``Deny`` whose ``reason`` is not a ``str``, an ``Ask`` whose ``reason`` is neither
    ``str`` nor ``None``) becomes an error result, as a raising listener does, and the body
    never runs. A value that is an instance of several decision classes reads as the most
    restrictive one (``Deny``, then ``Ask``, then ``Allow``).
    """
    if prepared.stage != PENDING:
        raise RuntimeError("apply_policies() runs once, for a call whose policies are pending")
    prepared.stage = OPENED
    env = prepared.env
    host = env.host
    # stage 2 (the listeners are read again: one may have been removed since open_call)
    decision: object = _ALLOW
    listeners = host.hooks.pre_execute.for_agent(env.agent)
    if listeners:
        try:
            decision = await waterfall(listeners, (prepared.execution(),), _default_allow)()
        except Exception as exc:  # more specific than a concurrent cancellation
            log_raised(prepared, "a pre_execute listener", exc)
            prepared.final_result(error_result(exc))
            return  # noqa: ASYNC910

    # stage 3
    approval_cancelled = False
    if not isinstance(decision, Deny) and isinstance(decision, Ask):
        try:
            decision, approval_cancelled, approval = await _resolve_ask(
                host, prepared.execution(), decision
            )
        except Exception as exc:
            log_raised(prepared, "the approval service", exc)
            prepared.final_result(error_result(exc))
            return  # noqa: ASYNC910
        if decision is _DEFERRED:
            prepared.suspend()
            return  # noqa: ASYNC910
        if decision is _ALLOW:
            approved(prepared, approval)
            return  # noqa: ASYNC910
    _decided(prepared, decision, approval_cancelled=approval_cancelled)


def approved(prepared: PreparedCall, approval: Approval | None) -> PreparedCall:
    """Stages 5-6 of a call its approval allowed: edited arguments (``approval.arguments``)
    replace the model's and are validated again (invalid: ``INVALID_ARGS``, nothing runs),
    the model is told of the edit in the result's contexts, and the body may start only with
    arguments of the approved digest (checked in :func:`~._execute.invoke`).
    """
    edited = None if approval is None else approval.arguments
    if edited is None:
        prepared.approved = arguments_digest(prepared.name, prepared.arguments)
        return _decided(prepared, _ALLOW, approval_cancelled=False)
    prepared.arguments = edited
    prepared.view = prepared.token  # every later view shows the edited arguments
    told = HookContext(
        content=(text_block(arguments_edited(prepared.name, dumps_json(edited))),),
        source=UserSource(),
    )
    found = violations(prepared)
    if found:
        settled = _invalid(prepared, found)
    else:
        prepared.approved = arguments_digest(prepared.name, edited)
        settled = _decided(prepared, _ALLOW, approval_cancelled=False)
    result = settled.result
    if result is None:  # allowed: the context joins the body's result
        prepared.deferred = [told]
    else:
        settled.result = attrs.evolve(
            result, additional_contexts=(told, *result.additional_contexts)
        )
    return settled


def resume_suspended(
    env: CallEnv, request: CallRequest, arguments: object, decision: Approval | None
) -> PreparedCall:
    """A suspended call of a resumed batch, settled on its deferred approval's ``decision``
    (``None``: still undecided, so suspended again; edited arguments apply as in
    :func:`approved`).

    Its ``pre_execute`` listeners decided ``Ask`` before the batch was suspended and do not
    run again: stage 0 (the arguments), validation, then stages 4-6 from the decision
    (``ALLOWED_ONCE`` / ``ALLOWED_SESSION`` run the guards and leave the call to dispatch;
    the other outcomes deny it with the texts of a live decision). Never raises for a tool or
    policy failure.
    """
    try:
        frozen = snapshot_json(arguments)
    except JsonSnapshotError:
        return PreparedCall(env, request, None).final_result(INVALID_ARGUMENTS)
    prepared = PreparedCall(env, request, frozen)
    if decision is None:
        return prepared.suspend()
    signal = env.signal
    if signal is not _NEVER and signal.cancelled:
        return prepared.final_result(ABORTED_BEFORE_DISPATCH)
    found = violations(prepared)
    if found:
        return _invalid(prepared, found)
    outcome = decision.outcome
    settled, approval_cancelled = _decision_for(request.name, outcome, outcome)
    if settled is _DEFERRED:
        return prepared.suspend()
    if settled is _ALLOW:
        return approved(prepared, decision)
    return _decided(prepared, settled, approval_cancelled=approval_cancelled)


def _decided(prepared: PreparedCall, decision: object, *, approval_cancelled: bool) -> PreparedCall:
    """Stages 4-6: settle the call on the decision (guards run after an ``Allow``)."""
    signal = prepared.env.signal
    # stage 4
    if approval_cancelled and signal.cancelled:
        return prepared.post_result(ABORTED_BEFORE_DISPATCH)

    # stage 5: Deny is read first, so a value that is somehow Deny and Allow denies
    if isinstance(decision, Deny):
        reason = _deny_reason(prepared, decision)
        if reason is None:
            return prepared.final_result(
                text_error(deny_reason_not_str(describe(_read_reason(decision))))
            )
    elif isinstance(decision, Allow):
        return _allowed(prepared, prepared.env)
    else:
        return prepared.final_result(text_error(pre_execute_returned(describe(decision))))
    return prepared.post_result(text_error(reason_text(reason)))


def _allowed(prepared: PreparedCall, env: CallEnv) -> PreparedCall:
    """Stages 5-6 after an ``Allow``: the guards, then the signal."""
    try:
        reason = env.host.evaluate_guards(env.agent, prepared)
    except InvalidArguments as invalid:
        return _invalid(prepared, invalid.violations)
    except Exception as exc:
        log_raised(prepared, "a guard", exc)
        return prepared.final_result(error_result(exc))
    # any non-None guard return denies (``False`` and ``""`` too): guards fail closed
    if reason is not None:
        return prepared.post_result(text_error(reason_text(reason)))
    # stage 6
    signal = env.signal
    if signal is not _NEVER and signal.cancelled:
        return prepared.post_result(ABORTED_BEFORE_DISPATCH)
    return prepared.allow()


def _read_reason(decision: Deny | Ask) -> object:
    try:
        return cast(object, decision.reason)
    except Exception as exc:
        return exc


def _deny_reason(call: CallRequest, decision: Deny) -> str | None:
    """The reason of a ``Deny``, or ``None`` when it cannot be read as a ``str`` (a decision
    built around the constructor's check, or a subclass whose ``reason`` misbehaves).
    """
    reason = _read_reason(decision)
    if isinstance(reason, str):
        return reason
    logger.warning(
        'tool "%s" (%s): a pre_execute listener returned a Deny whose reason is %s, not a str; '
        "the call is denied",
        call.name,
        call.call_id,
        kind(reason),
    )
    return None


async def _resolve_ask(
    host: PipelineHost, execution: ToolExecution, ask: Ask
) -> tuple[PreToolDecision, bool, Approval | None]:
    name = execution.name
    reason = _read_reason(ask)
    if reason is not None and not isinstance(reason, str):
        raise TypeError(
            f"tools/pre-execute returned an Ask whose reason is {kind(reason)}, not a str or None"
        )
    service = host.approval
    if service is None:
        warnings.warn(
            f'a pre_execute listener asked for approval of tool "{name}", but the registry has '
            "no approval service: the call is denied; pass ToolRegistry(approval=...)",
            ApprovalSetupWarning,
            stacklevel=2,
        )
        if reason is None:
            reason = approval_not_supported(name)
        return Deny(reason), False, None  # noqa: ASYNC910
    if execution.agent is None:
        return Deny(approval_needs_agent(name)), False, None  # noqa: ASYNC910
    # the service is a plug-in: do not trust its annotation
    arguments = execution.arguments
    tool = host.lookup(name, execution.agent)
    view, error = call_view_of(None if tool is None else tool.present_call, name, arguments)
    if error is not None:
        log_raised(execution, "present_call (for the approval request)", error)
    answer = cast(
        object,
        await service.request(
            ApprovalRequest(
                agent=execution.agent,
                tool_name=name,
                call_id=execution.call_id,
                signal=execution.signal,
                reason=reason,
                arguments=arguments,
                view=view,
            )
        ),
    )
    known, approval = read_approval(answer)
    if approval is not None and not _applies(approval, name, arguments):
        known, approval = ApprovalOutcome.UNAVAILABLE, None
    decision, cancelled = _decision_for(name, known, answer)
    return decision, cancelled, approval


def _applies(approval: Approval, name: str, arguments: object) -> bool:
    """Whether ``approval`` may decide the request about ``arguments`` (its ``digest``, when
    it names one, is theirs); a refused one is logged.
    """
    digest = approval.digest
    if digest is None or digest == arguments_digest(name, arguments):
        return True
    logger.warning(
        'tool "%s": an approval of arguments with digest %s does not apply to this call\'s '
        "arguments: unavailable",
        name,
        digest,
    )
    return False


_DEFERRED: Final[Any] = object()


def _decision_for(
    name: str, known: ApprovalOutcome | None, answer: object
) -> tuple[PreToolDecision, bool]:
    """The decision an approval outcome stands for, and whether it is a cancellation
    (``_DEFERRED`` for a deferred one).
    """
    if known is ApprovalOutcome.ALLOWED_ONCE or known is ApprovalOutcome.ALLOWED_SESSION:
        return _ALLOW, False
    if known is ApprovalOutcome.REJECTED:
        return Deny(approval_rejected(name)), False
    if known is ApprovalOutcome.CANCELLED:
        return Deny(approval_cancelled(name)), True
    if known is ApprovalOutcome.UNAVAILABLE:
        return Deny(approval_unavailable(name)), False
    if known is ApprovalOutcome.DEFERRED:
        return _DEFERRED, False
    raise _Unreachable(f"unreachable variant in ApprovalOutcome: {describe(answer)}")
