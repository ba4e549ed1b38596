"""The stages of one tool call (upstream §2.6), split so the scheduler can interleave them.

::

    prepare()   0  snapshot the arguments        invalid            -> final-result
                1  signal already cancelled      ABORTED_BEFORE_DISPATCH -> final-result
                2  pre_execute waterfall         a listener raised  -> final-result
                3  Ask -> approval service       raised / impossible outcome -> final-result
                4  approval cancelled + signal   ABORTED_BEFORE_DISPATCH -> post-result
                5  Deny, or guards after Allow   Error: <reason>    -> post-result
                                                 a guard raised     -> final-result
                6  signal cancelled              ABORTED_BEFORE_DISPATCH -> post-result
    dispatch()  7  execute wrappers, body        a wrapper raised   -> final-result
                                                 anything else      -> post-result
    complete()  8  post_execute (post-results)   a listener raised  -> final-result
                9  final snapshot (all results)  invalid: Error: tool result must be ...
               10  result observers, then return the very same frozen result

A post-result goes through ``post_execute``; a final-result skips it. :class:`PreparedCall`
holds one call between the stages. Nothing here raises for a tool or policy failure;
``trio.Cancelled`` of the caller's own scope (and ``KeyboardInterrupt`` etc.) always propagates.

The stages are deliberately not checkpoints each (``# noqa: ASYNC910``): ``ToolRegistry.execute``
and the scheduler are, and a schedule point per stage would multiply the per-call cost.
``prepare`` is a cancel point at entry and ``complete`` ends with a schedule point, so every path
through ``execute`` checkpoints.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, cast

import attrs
import trio

from ._content import (
    ContentBlock,
    HookContext,
    MessageSource,
    PluginSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserSource,
)
from ._converter import converter
from ._definition import ToolOutput
from ._errors import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    ToolErrorInfo,
    ToolNotFoundError,
    error_info,
    error_message,
)
from ._execution import (
    Accept,
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    PostToolDecision,
    PreToolDecision,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolExecutionToken,
    ToolRunContext,
)
from ._json import JsonSnapshotError, JsonValue, snapshot_json
from ._signal import CancelSignal, _fuse, linked_cancel_scope

if TYPE_CHECKING:
    from ._hooks import ExecuteHook, PostExecuteHook, PreExecuteHook
    from ._registry import ToolRegistry

__all__ = ["PreparedCall", "aborted_before_dispatch_result", "prepare"]

logger: Final = logging.getLogger("dsh_tools")

_ALLOW: Final = Allow()
_ACCEPT: Final = Accept()
_MISSING: Final[Any] = object()


def _text_error(text: str, error: ToolErrorInfo | None = None) -> ToolExecutionResult:
    return ToolExecutionResult(
        content=(TextBlock(text="Error: " + text),), is_error=True, error=error
    )


def _error_result(exc: BaseException) -> ToolExecutionResult:
    return _text_error(error_message(exc), error_info(exc))


_ABORTED: Final = _text_error(
    "tool call aborted", ToolErrorInfo(name="AbortError", code=TOOL_ABORTED)
)
_ABORTED_BEFORE_DISPATCH: Final = _text_error(
    "tool call aborted before dispatch",
    ToolErrorInfo(name="AbortError", code=TOOL_ABORTED_BEFORE_DISPATCH),
)
_INVALID_ARGUMENTS: Final = _text_error(
    "tool execution arguments must be losslessly JSON-serializable"
)
_INVALID_RESULT: Final = _text_error("tool result must be losslessly JSON-serializable")


def aborted_before_dispatch_result() -> ToolExecutionResult:
    """The canonical result of a call that cancellation stopped before its body started:
    ``Error: tool call aborted before dispatch``, ``error=AbortError/ABORTED_BEFORE_DISPATCH``."""
    return _ABORTED_BEFORE_DISPATCH


def aborted_result() -> ToolExecutionResult:
    """The canonical result of a call cancelled after its body started:
    ``Error: tool call aborted``, ``error=AbortError/ABORTED``."""
    return _ABORTED


def _text(value: object) -> str:
    """``str(value)`` for a denial reason, total like :func:`error_message`."""
    if type(value) is str:
        return value
    try:
        return str(value)
    except Exception:
        return "<unprintable thrown value>"


def _describe(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    try:
        return repr(value)
    except Exception:
        return "<unprintable thrown value>"


class _Unreachable(Exception):
    pass


# --- the waterfalls ------------------------------------------------------------------------


async def _default_allow(*_args: object, **_kwargs: object) -> PreToolDecision:
    return _ALLOW  # noqa: ASYNC910


async def _default_accept(*_args: object, **_kwargs: object) -> PostToolDecision:
    return _ACCEPT  # noqa: ASYNC910


def _pre_chain(
    listeners: tuple[PreExecuteHook, ...], execution: ToolExecution
) -> Callable[..., Awaitable[PreToolDecision]]:
    chain: Callable[..., Awaitable[PreToolDecision]] = _default_allow
    # built innermost first; arguments given to next() are ignored, as upstream
    for listener in reversed(listeners):
        chain = _bind2(listener, execution, chain)
    return chain


def _bind2(
    listener: Callable[[Any, Any], Awaitable[Any]], first: object, inner: Callable[..., Any]
) -> Callable[..., Awaitable[Any]]:
    def next_(*_args: object, **_kwargs: object) -> Awaitable[Any]:
        return listener(first, inner)

    return next_


def _bind3(
    listener: Callable[[Any, Any, Any], Awaitable[Any]],
    first: object,
    second: object,
    inner: Callable[..., Any],
) -> Callable[..., Awaitable[Any]]:
    def next_(*_args: object, **_kwargs: object) -> Awaitable[Any]:
        return listener(first, second, inner)

    return next_


# --- final materialization -----------------------------------------------------------------

_BLOCK_TYPES: Final = (TextBlock, ReasoningBlock, ToolCallBlock, ToolResultBlock)


def _valid_str(value: object) -> bool:
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _valid_content(content: object) -> bool:
    if type(content) is not tuple:
        return False
    for block in cast("tuple[object, ...]", content):
        cls = type(block)
        if cls is TextBlock or cls is ReasoningBlock:
            if not _valid_str(cast("TextBlock", block).text):
                return False
        elif cls is ToolCallBlock:
            call = cast("ToolCallBlock", block)
            if not (_valid_str(call.id) and _valid_str(call.name) and _valid_str(call.arguments)):
                return False
        elif cls is ToolResultBlock:
            nested = cast("ToolResultBlock", block)
            if not (
                _valid_str(nested.tool_call_id)
                and _valid_content(nested.content)
                and (nested.is_error is None or type(nested.is_error) is bool)
            ):
                return False
        elif not _valid_extension(block, ContentBlock):
            return False
    return True


def _valid_extension(value: object, union: object) -> bool:
    """A value of a type added to ``union`` through the converter (``register_content_block``)
    is valid when its wire form is lossless JSON; an unregistered type is not."""
    try:
        snapshot_json(converter.unstructure(value, cast("type[object]", union)))
    except Exception:
        return False
    return True


def _valid_meta(meta: object) -> bool:
    if meta is None:
        return True
    try:
        snapshot_json(meta)
    except Exception:
        return False
    return True


def _valid_context(context: object) -> bool:
    if type(context) is not HookContext:
        return False
    source = context.source
    if type(source) is PluginSource:
        if not _valid_str(source.plugin):
            return False
    elif type(source) is not UserSource and not _valid_extension(source, MessageSource):
        return False
    return _valid_content(context.content) and _valid_meta(context.meta)


def _materialize(result: object) -> ToolExecutionResult:
    """Stage 9: the result if it is complete, immutable and lossless JSON; otherwise the
    canonical invalid-result error. Every field is a frozen value already, so a valid result
    is returned as is (no copy)."""
    if type(result) is not ToolExecutionResult:
        return _INVALID_RESULT
    error = result.error
    if (
        type(result.is_error) is not bool
        or not _valid_content(result.content)
        or not (
            error is None
            or (type(error) is ToolErrorInfo and _valid_str(error.name) and _valid_str(error.code))
        )
        or type(result.additional_contexts) is not tuple
        or not all(_valid_context(c) for c in result.additional_contexts)
        or not _valid_meta(result.meta)
    ):
        return _INVALID_RESULT
    return result


def _normalize(returned: object) -> ToolExecutionResult:
    """Stage 7.6: a body's return value as a successful result. Content is not checked here:
    shape problems surface at final materialization, after post_execute."""
    meta: JsonValue = None
    if isinstance(returned, str):
        content: tuple[object, ...] = (TextBlock(text=returned),)
    elif isinstance(returned, ToolOutput):
        content, meta = returned.content, returned.meta
    elif isinstance(returned, list | tuple):
        content = tuple(cast("list[object] | tuple[object, ...]", returned))
    else:
        # not content at all (None, a dict, a number): carried as is, rejected at stage 9
        content = (returned,)
    return _success(cast("tuple[ContentBlock, ...]", content), meta)


_setattr: Final = object.__setattr__


def _success(content: tuple[ContentBlock, ...], meta: JsonValue) -> ToolExecutionResult:
    # The hot path builds the frozen value directly: ``content`` is a tuple already and
    # ``meta`` comes from a ToolOutput, whose converter snapshotted it. attrs' __init__ would
    # re-run both converters (a third of the per-call result cost) for nothing.
    result = object.__new__(ToolExecutionResult)
    _setattr(result, "content", content)
    _setattr(result, "is_error", False)
    _setattr(result, "error", None)
    _setattr(result, "additional_contexts", ())
    _setattr(result, "meta", meta)
    return result


# --- one call --------------------------------------------------------------------------------


class PreparedCall:
    """One call after stages 0-6 of upstream §2.6: arguments snapshotted, policy decided.

    Attributes:
        execution: the frozen execution view (the same token everywhere).
        needs_dispatch: ``True`` when the call was allowed: await :meth:`dispatch` before
            :meth:`complete`.
    """

    __slots__ = (
        "_caller",
        "_deferred",
        "_dispatched",
        "_final",
        "_invoked",
        "_outcome",
        "_registry",
        "execution",
        "needs_dispatch",
    )

    execution: ToolExecution
    needs_dispatch: bool

    def __init__(
        self,
        registry: ToolRegistry,
        execution: ToolExecution,
        *,
        needs_dispatch: bool = False,
        outcome: ToolExecutionResult | None = None,
        final: ToolExecutionResult | None = None,
    ) -> None:
        self._registry = registry
        self.execution = execution
        self._caller = execution.signal
        self.needs_dispatch = needs_dispatch
        # post-result: still goes through post_execute; final-result: straight to stage 9
        self._outcome = outcome
        self._final = final
        self._invoked = False
        self._dispatched = False
        self._deferred: list[HookContext] = []

    # --- stage 7 -------------------------------------------------------------------------

    async def dispatch(self) -> None:
        """Stage 7: the ``execute`` wrapper waterfall around the body.

        The body runs in a trio cancel scope linked to the fusion of the caller's signal and a
        wrapper's replacement, and is always awaited until it returns. Never raises for a tool,
        wrapper or policy failure (each becomes the call's outcome). Cancelling the caller's
        own trio scope raises ``trio.Cancelled`` once the body has unwound. Call at most once,
        and only when :attr:`needs_dispatch` is true.
        """
        if not self.needs_dispatch or self._dispatched:
            raise RuntimeError("dispatch() runs once, and only for a call that needs dispatch")
        self._dispatched = True
        execution = self.execution
        wrappers = self._registry._hook_lists.execute.for_agent(execution.agent)
        try:
            if wrappers:
                result = await self._run_wrappers(wrappers)
            else:
                result = await self._invoke(self._caller)
        except Exception as exc:
            # a wrapper failed: final-result, deferred contexts lost, post_execute skipped
            self._final = _error_result(exc)
            return  # noqa: ASYNC910
        if type(result) is not ToolExecutionResult:
            self._final = _INVALID_RESULT
            return
        if self._deferred:
            result = attrs.evolve(
                result, additional_contexts=(*self._deferred, *result.additional_contexts)
            )
        self._outcome = self._replace_if_cancelled(result)

    async def _run_wrappers(self, wrappers: tuple[ExecuteHook, ...]) -> ToolExecutionResult:
        execution = self.execution
        caller = self._caller
        dispatch_execution = ToolDispatchExecution(
            token=execution.token,
            call_id=execution.call_id,
            name=execution.name,
            arguments=execution.arguments,
            signal=caller,
            agent=execution.agent,
            parent=execution.parent,
        )

        async def body(*_args: object, **_kwargs: object) -> ToolExecutionResult:
            upstream = dispatch_execution.signal
            if upstream is caller:
                return await self._invoke(caller)
            # wrapper first: its reason wins when both are already cancelled (upstream §2.7)
            fused, detach = _fuse((upstream, caller))
            dispatch_execution.signal = fused
            try:
                return await self._invoke(fused)
            finally:
                dispatch_execution.signal = upstream
                detach()

        chain: Callable[..., Awaitable[ToolExecutionResult]] = body
        for wrapper in reversed(wrappers):
            chain = _bind2(wrapper, dispatch_execution, chain)
        return await chain()

    async def _invoke(self, signal: CancelSignal) -> ToolExecutionResult:
        """The innermost ``next()``: look the tool up, run the body under ``signal``."""
        if signal.cancelled:
            return _ABORTED_BEFORE_DISPATCH  # noqa: ASYNC910
        execution = self.execution
        tool = self._registry._lookup(execution.name, execution.agent)
        if tool is None:
            return _error_result(ToolNotFoundError(execution.name))  # noqa: ASYNC910
        self._invoked = True
        context = ToolRunContext(
            token=execution.token,
            call_id=execution.call_id,
            name=execution.name,
            arguments=execution.arguments,
            signal=signal,
            agent=execution.agent,
            parent=execution.parent,
            _deferred=self._deferred,
        )
        returned: object = _MISSING
        failure: Exception | None = None
        try:
            if signal is CancelSignal.never():
                returned = await tool.execute(execution.arguments, context)
            else:
                with linked_cancel_scope(signal):
                    returned = await tool.execute(execution.arguments, context)
        except Exception as exc:
            # outside the per-call cancel scope: the failure belongs to the model
            failure = exc
        # The body has unwound. If the caller's own trio scope was cancelled meanwhile (a
        # shielded body finished anyway), that cancellation wins now, as trio requires.
        await trio.lowlevel.checkpoint_if_cancelled()
        if failure is not None:
            return _error_result(failure)
        if returned is _MISSING or signal.cancelled:
            return _ABORTED
        return _normalize(returned)

    # --- stages 8-10 ---------------------------------------------------------------------

    def _replace_if_cancelled(self, result: ToolExecutionResult) -> ToolExecutionResult:
        if result.is_error or not self._caller.cancelled:
            return result
        replacement = _ABORTED if self._invoked else _ABORTED_BEFORE_DISPATCH
        contexts = result.additional_contexts
        if contexts:
            return attrs.evolve(replacement, additional_contexts=contexts)
        return replacement

    async def complete(self) -> ToolExecutionResult:
        """Stages 8-10: the ``post_execute`` waterfall (for outcomes that reach it), the
        cancellation replacement, the final snapshot, the ``result`` observers.

        Returns the frozen final result, the very object the observers saw. Never raises for a
        tool or policy failure. Ends with a schedule point that cannot be cancelled (the
        outcome is already decided); cancelling the caller's trio scope while ``post_execute``
        awaits raises ``trio.Cancelled``. If the call needed dispatch but :meth:`dispatch`
        never ran, the outcome is ``ABORTED_BEFORE_DISPATCH``.
        """
        final = self._final
        if final is None:
            outcome = self._outcome
            if outcome is None:
                outcome = self._replace_if_cancelled(_ABORTED_BEFORE_DISPATCH)
            if self._registry._hook_lists.post_execute.for_agent(self.execution.agent):
                final = await self._post_execute(outcome)
            else:
                final = self._replace_if_cancelled(outcome)
        final = _materialize(final)
        self._notify(final)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return final

    async def _post_execute(self, outcome: ToolExecutionResult) -> ToolExecutionResult:
        execution = self.execution
        listeners = self._registry._hook_lists.post_execute.for_agent(execution.agent)
        try:
            decision = cast(object, await _post_chain(listeners, execution, outcome)())
        except Exception as exc:
            return _error_result(exc)  # noqa: ASYNC910
        if isinstance(decision, Block):
            result = ToolExecutionResult(
                content=decision.feedback,
                is_error=True,
                additional_contexts=decision.additional_contexts,
            )
        elif isinstance(decision, Accept):
            accept = decision
            result = outcome
            if accept.content is not None or accept.additional_contexts:
                result = attrs.evolve(
                    outcome,
                    content=outcome.content if accept.content is None else accept.content,
                    additional_contexts=(
                        *outcome.additional_contexts,
                        *accept.additional_contexts,
                    ),
                )
        else:
            return _text_error(
                f"tools/post-execute returned {_describe(decision)}, not Accept or Block"
            )
        return self._replace_if_cancelled(result)

    def _notify(self, result: ToolExecutionResult) -> None:
        execution = self.execution
        for observer in self._registry._hook_lists.result.for_agent(execution.agent):
            try:
                returned = observer(execution, result)
                if inspect.isawaitable(returned):
                    if inspect.iscoroutine(returned):
                        returned.close()
                    raise TypeError("result observers are synchronous: it returned an awaitable")
            except Exception as exc:
                logger.warning(
                    'tool "%s" (%s): tools/result observer failed: %s',
                    execution.name,
                    execution.call_id,
                    error_message(exc),
                )


def _post_chain(
    listeners: tuple[PostExecuteHook, ...],
    execution: ToolExecution,
    outcome: ToolExecutionResult,
) -> Callable[..., Awaitable[PostToolDecision]]:
    chain: Callable[..., Awaitable[PostToolDecision]] = _default_accept
    for listener in reversed(listeners):
        chain = _bind3(listener, execution, outcome, chain)
    return chain


# --- stages 0-6 ------------------------------------------------------------------------------


async def prepare(registry: ToolRegistry, input: ToolExecutionInput) -> PreparedCall:
    """Stages 0-6 of one call. Never raises for a tool or policy failure; raises
    ``trio.Cancelled`` when the caller's trio scope is cancelled (at entry, or while a
    ``pre_execute`` listener or the approval service awaits)."""
    await trio.lowlevel.checkpoint_if_cancelled()
    if type(input) is not ToolExecutionInput and not isinstance(input, ToolExecutionInput):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"execute() takes a ToolExecutionInput, not {type(input).__name__}")
    token = ToolExecutionToken._mint()
    call_id = input.call_id
    name = input.name
    agent = input.agent
    parent = input.parent
    signal = input.signal
    failure: ToolExecutionResult | None = None
    try:
        arguments = snapshot_json(input.arguments)
    except JsonSnapshotError:
        arguments, failure = None, _INVALID_ARGUMENTS
    except Exception as exc:
        arguments, failure = None, _error_result(exc)
    execution = ToolExecution(
        token=token,
        call_id=call_id,
        name=name,
        arguments=arguments,
        signal=signal,
        agent=agent,
        parent=parent,
    )
    if failure is not None:  # stage 0: wins over a cancelled signal
        return PreparedCall(registry, execution, final=failure)
    if signal.cancelled:  # stage 1
        return PreparedCall(registry, execution, final=_ABORTED_BEFORE_DISPATCH)

    # stage 2
    decision: object = _ALLOW
    listeners = registry._hook_lists.pre_execute.for_agent(agent)
    if listeners:
        try:
            decision = await _pre_chain(listeners, execution)()
        except Exception as exc:  # more specific than a concurrent cancellation
            return PreparedCall(registry, execution, final=_error_result(exc))

    # stage 3
    approval_cancelled = False
    if type(decision) is Ask or isinstance(decision, Ask):
        try:
            decision, approval_cancelled = await _resolve_ask(registry, execution, decision)
        except Exception as exc:
            return PreparedCall(registry, execution, final=_error_result(exc))

    # stage 4
    if approval_cancelled and signal.cancelled:
        return PreparedCall(registry, execution, outcome=_ABORTED_BEFORE_DISPATCH)

    # stage 5
    if type(decision) is Allow or isinstance(decision, Allow):
        try:
            reason = registry._evaluate_guards(execution)
        except Exception as exc:
            return PreparedCall(registry, execution, final=_error_result(exc))
    elif isinstance(decision, Deny):
        reason = decision.reason
    else:
        return PreparedCall(
            registry,
            execution,
            final=_text_error(
                f"tools/pre-execute returned {_describe(decision)}, not Allow, Deny or Ask"
            ),
        )
    if reason is not None:
        return PreparedCall(registry, execution, outcome=_text_error(_text(reason)))

    # stage 6
    if signal.cancelled:
        return PreparedCall(registry, execution, outcome=_ABORTED_BEFORE_DISPATCH)
    return PreparedCall(registry, execution, needs_dispatch=True)


_OUTCOMES: Final = {outcome.value: outcome for outcome in ApprovalOutcome}


async def _resolve_ask(
    registry: ToolRegistry, execution: ToolExecution, ask: Ask
) -> tuple[PreToolDecision, bool]:
    name = execution.name
    service = registry._approval
    if service is None:
        return Deny(ask.reason or f'tool "{name}" requires approval (not yet supported)'), False  # noqa: ASYNC910
    if execution.agent is None:
        return Deny(  # noqa: ASYNC910
            f'tool "{name}" requires approval, but the call has no agent to route it through'
        ), False
    # the service is a plug-in: do not trust its annotation
    answer = cast(
        object,
        await service.request(
            ApprovalRequest(
                agent=execution.agent,
                tool_name=name,
                call_id=execution.call_id,
                signal=execution.signal,
                reason=ask.reason,
            )
        ),
    )
    known = _OUTCOMES.get(answer) if isinstance(answer, str) else None
    if known is ApprovalOutcome.ALLOWED_ONCE:
        return _ALLOW, False
    if known is ApprovalOutcome.REJECTED:
        return Deny(f'the user rejected tool "{name}"'), False
    if known is ApprovalOutcome.CANCELLED:
        return Deny(f'approval for tool "{name}" was cancelled'), True
    if known is ApprovalOutcome.UNAVAILABLE:
        return Deny(f'tool "{name}" requires approval, but no approval channel is available'), False
    raise _Unreachable(f"unreachable variant in ApprovalOutcome: {_describe(answer)}")
