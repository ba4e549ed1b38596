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

import contextlib
import inspect
import json
import logging
import threading
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
from ._definition import ToolOutput, is_async_body
from ._errors import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    HarnessError,
    ToolErrorInfo,
    ToolNotFoundError,
    error_info,
    error_message,
    format_js_number,
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
    from ._definition import ToolDefinition
    from ._hooks import ExecuteHook, PostExecuteHook, PreExecuteHook
    from ._registry import ToolRegistry

__all__ = [
    "PreparedCall",
    "aborted_before_dispatch_result",
    "freeze_context",
    "materialize",
    "prepare",
]

logger: Final = logging.getLogger("dsh_tools")

_ALLOW: Final = Allow()
_ACCEPT: Final = Accept()
_MISSING: Final[Any] = object()


def printable(text: str) -> str:
    """``text`` with every lone surrogate written as a ``\\udXXX`` escape, so that model-supplied
    text (a tool name, a call id) can appear in a result, which must be valid Unicode."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _text_error(text: str, error: ToolErrorInfo | None = None) -> ToolExecutionResult:
    return ToolExecutionResult(
        content=(TextBlock(text="Error: " + printable(text)),), is_error=True, error=error
    )


def _log_raised(execution: ToolExecution, what: str, exc: BaseException) -> None:
    """Log, once, an exception a body, hook, guard, wrapper or observer raised: WARNING with
    its traceback, or DEBUG for a :class:`HarnessError` (an expected, model-facing failure)."""
    level = logging.DEBUG if isinstance(exc, HarnessError) else logging.WARNING
    if logger.isEnabledFor(level):
        logger.log(
            level,
            'tool "%s" (%s): %s raised %s',
            execution.name,
            execution.call_id,
            what,
            type(exc).__name__,
            exc_info=exc,
        )


def _log_invalid(execution: ToolExecution, detail: str) -> None:
    logger.warning(
        'tool "%s" (%s): tool result must be losslessly JSON-serializable: %s',
        execution.name,
        execution.call_id,
        detail,
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
_ABANDONED: Final = _text_error(
    "tool call aborted (its worker thread was abandoned and may still be running)",
    ToolErrorInfo(name="AbortError", code=TOOL_ABORTED),
)


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
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_js_number(value)
    try:
        return repr(value)
    except Exception:
        return "<unprintable thrown value>"


def _kind(value: object) -> str:
    """``42, an int``: a value and its type, for log details."""
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{_describe(value)}, {article} {name}"


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


def _content_problem(content: object, where: str) -> str | None:
    """Why ``content`` is not a tuple of valid content blocks, or ``None`` when it is."""
    if type(content) is not tuple:
        return f"{where} is {_kind(content)}, not a tuple of content blocks"
    for index, block in enumerate(cast("tuple[object, ...]", content)):
        cls = type(block)
        if cls is TextBlock or cls is ReasoningBlock:
            if not _valid_str(cast("TextBlock", block).text):
                return f"{where}[{index}].text is not a str without lone surrogates"
        elif cls is ToolCallBlock:
            call = cast("ToolCallBlock", block)
            if not (_valid_str(call.id) and _valid_str(call.name) and _valid_str(call.arguments)):
                return f"{where}[{index}] has a field that is not a str without lone surrogates"
        elif cls is ToolResultBlock:
            nested = cast("ToolResultBlock", block)
            if not _valid_str(nested.tool_call_id):
                return f"{where}[{index}].tool_call_id is not a str without lone surrogates"
            problem = _content_problem(nested.content, f"{where}[{index}].content")
            if problem is not None:
                return problem
            if not (nested.is_error is None or type(nested.is_error) is bool):
                return f"{where}[{index}].is_error is {_kind(nested.is_error)}, not a bool"
        elif not _valid_extension(block, ContentBlock):
            return f"{where}[{index}] is {_kind(block)}, not a content block"
    return None


def _valid_extension(value: object, union: object) -> bool:
    """A value of a type added to ``union`` through the converter (``register_content_block``)
    is valid when its wire form is lossless JSON; an unregistered type is not."""
    try:
        snapshot_json(converter.unstructure(value, cast("type[object]", union)))
    except Exception:
        return False
    return True


class _Invalid(Exception):
    """A result (or context) that is not lossless JSON; the message is the detail."""


def _frozen_meta(meta: object, where: str) -> JsonValue:
    if meta is None:
        return None
    try:
        return snapshot_json(meta)
    except Exception as exc:
        raise _Invalid(f"{where}: {error_message(exc)}") from None


def freeze_context(context: object, where: str = "context") -> HookContext:
    """``context`` checked as lossless JSON, with its ``meta`` frozen.

    Raises:
        _Invalid: with the detail.
    """
    if type(context) is not HookContext:
        raise _Invalid(f"{where} is {_kind(context)}, not a HookContext")
    source = context.source
    if type(source) is PluginSource:
        if not _valid_str(source.plugin):
            raise _Invalid(f"{where}.source.plugin is not a str without lone surrogates")
    elif type(source) is not UserSource and not _valid_extension(source, MessageSource):
        raise _Invalid(f"{where}.source is {_kind(source)}, not a message source")
    problem = _content_problem(context.content, f"{where}.content")
    if problem is not None:
        raise _Invalid(problem)
    meta = context.meta
    frozen = _frozen_meta(meta, f"{where}.meta")
    if frozen is meta:
        return context
    return attrs.evolve(context, meta=frozen)


def _freeze_result(result: object) -> ToolExecutionResult:
    """Stage 9: ``result`` checked as complete, immutable, lossless JSON, with every ``meta``
    frozen. A valid result whose metas are frozen already is returned as is (no copy).

    Raises:
        _Invalid: with the detail.
    """
    if type(result) is not ToolExecutionResult:
        raise _Invalid(f"the result is {_kind(result)}, not a ToolExecutionResult")
    if type(result.is_error) is not bool:
        raise _Invalid(f"is_error is {_kind(result.is_error)}, not a bool")
    problem = _content_problem(result.content, "content")
    if problem is not None:
        raise _Invalid(problem)
    error = result.error
    if not (
        error is None
        or (type(error) is ToolErrorInfo and _valid_str(error.name) and _valid_str(error.code))
    ):
        raise _Invalid(f"error is {_kind(error)}, not a ToolErrorInfo of two str")
    contexts = result.additional_contexts
    if type(contexts) is not tuple:
        raise _Invalid(f"additional_contexts is {_kind(contexts)}, not a tuple")
    frozen_contexts = tuple(
        freeze_context(context, f"additional_contexts[{index}]")
        for index, context in enumerate(cast("tuple[object, ...]", contexts))
    )
    meta = result.meta
    frozen_meta = _frozen_meta(meta, "meta")
    if frozen_meta is meta and all(a is b for a, b in zip(frozen_contexts, contexts, strict=True)):
        return result
    return attrs.evolve(result, additional_contexts=frozen_contexts, meta=frozen_meta)


def materialize(result: object) -> ToolExecutionResult:
    """Stage 9 without logging: the frozen result, or the canonical invalid-result error."""
    try:
        return _freeze_result(result)
    except _Invalid:
        return _INVALID_RESULT


def _is_return_value(returned: object) -> bool:
    return isinstance(returned, str | ToolOutput | list | tuple)


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
    # The hot path builds the value directly: ``content`` is a tuple already and ``meta`` is
    # checked and frozen at stage 9. attrs' __init__ would re-run the tuple converters (a
    # third of the per-call result cost) for nothing.
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
        "_bad_return",
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
        self._bad_return: object = _MISSING
        self._deferred: list[HookContext] = []

    # --- stage 7 -------------------------------------------------------------------------

    async def dispatch(self) -> None:
        """Stage 7: the ``execute`` wrapper waterfall around the body.

        The body runs in a trio cancel scope linked to the fusion of the caller's signal and a
        wrapper's replacement, and is always awaited until it returns (a sync body: until its
        worker thread returns, unless its definition says ``abandon_on_cancel``). Never raises
        for a tool, wrapper or policy failure (each becomes the call's outcome). Cancelling
        the caller's own trio scope raises ``trio.Cancelled`` once the body has unwound. Call
        at most once, and only when :attr:`needs_dispatch` is true.
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
            _log_raised(execution, "an execute wrapper", exc)
            self._final = _error_result(exc)
            return  # noqa: ASYNC910
        if type(result) is not ToolExecutionResult:
            _log_invalid(
                execution, f"an execute wrapper returned {_kind(result)}, not a ToolExecutionResult"
            )
            self._final = _INVALID_RESULT
            return
        if self._deferred:
            try:
                result = attrs.evolve(
                    result, additional_contexts=(*self._deferred, *result.additional_contexts)
                )
            except Exception as exc:  # a hand-built result whose contexts are not a sequence
                _log_invalid(execution, f"its additional_contexts cannot be read: {exc!r}")
                self._final = _INVALID_RESULT
                return
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
        body = cast("Callable[..., object]", tool.execute)
        if not is_async_body(body):
            return await self._invoke_sync(tool, body, context, signal)
        run = cast("Callable[[JsonValue, ToolRunContext], Awaitable[object]]", body)
        self._invoked = True
        returned: object = _MISSING
        failure: Exception | None = None
        try:
            if signal is CancelSignal.never():
                returned = await run(execution.arguments, context)
            else:
                with linked_cancel_scope(signal):
                    returned = await run(execution.arguments, context)
        except Exception as exc:
            # outside the per-call cancel scope: the failure belongs to the model
            failure = exc
        # The body has unwound. If the caller's own trio scope was cancelled meanwhile (a
        # shielded body finished anyway), that cancellation wins now, as trio requires.
        await trio.lowlevel.checkpoint_if_cancelled()
        if failure is not None:
            _log_raised(execution, "the tool body", failure)
            return _error_result(failure)
        if returned is _MISSING or signal.cancelled:
            return _ABORTED
        if not _is_return_value(returned):
            self._bad_return = returned
        return _normalize(returned)

    async def _invoke_sync(
        self,
        tool: ToolDefinition,
        body: Callable[..., object],
        context: ToolRunContext,
        signal: CancelSignal,
    ) -> ToolExecutionResult:
        """Run a sync body in a worker thread through the registry's thread limiter.

        ``started`` is set in the thread, under a lock, right before the body runs; once the
        call gives up on the thread (abandoned), a thread that had not started yet does not run
        the body at all. So "cancelled while waiting for a slot" is exactly "never started".
        """
        execution = self.execution
        arguments = execution.arguments
        lock = threading.Lock()
        state = {"started": False, "given_up": False}

        def run() -> tuple[object]:
            # boxed: trio refuses a thread function that returns a coroutine; we report it
            with lock:
                if state["given_up"]:
                    return (_MISSING,)
                state["started"] = True
            return (body(arguments, context),)

        returned: object = _MISSING
        failure: Exception | None = None
        scope = (
            contextlib.nullcontext()
            if signal is CancelSignal.never()
            else linked_cancel_scope(signal)
        )
        try:
            with scope:
                (returned,) = await trio.to_thread.run_sync(
                    run,
                    abandon_on_cancel=tool.abandon_on_cancel,
                    limiter=self._registry._thread_limiter,
                )
        except Exception as exc:
            failure = exc
        finally:
            with lock:
                state["given_up"] = True
                self._invoked = state["started"]
        await trio.lowlevel.checkpoint_if_cancelled()
        if failure is not None:
            _log_raised(execution, "the tool body", failure)
            return _error_result(failure)
        if returned is _MISSING:
            if not self._invoked:
                return _ABORTED_BEFORE_DISPATCH
            return _ABANDONED if tool.abandon_on_cancel else _ABORTED
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()
            text = (
                f'tool "{execution.name}": its body is a plain function that returned an '
                f"awaitable ({type(returned).__name__}); declare it `async def`"
            )
            logger.warning('tool "%s" (%s): %s', execution.name, execution.call_id, text)
            return _text_error(text)
        if signal.cancelled:
            return _ABORTED
        if not _is_return_value(returned):
            self._bad_return = returned
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

    @property
    def body_invoked(self) -> bool:
        """Whether the tool body started (a sync body: whether its thread started it)."""
        return self._invoked

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
        try:
            final = _freeze_result(final)
        except _Invalid as invalid:
            detail = str(invalid)
            bad = self._bad_return
            if bad is not _MISSING and detail.startswith("content[0] "):
                detail = (
                    f"a body returned {_kind(bad)}, where str, content blocks or ToolOutput belong"
                )
            _log_invalid(self.execution, detail)
            final = _INVALID_RESULT
        self._notify(final)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return final

    async def _post_execute(self, outcome: ToolExecutionResult) -> ToolExecutionResult:
        execution = self.execution
        listeners = self._registry._hook_lists.post_execute.for_agent(execution.agent)
        try:
            decision = cast(object, await _post_chain(listeners, execution, outcome)())
        except Exception as exc:
            _log_raised(execution, "a post_execute listener", exc)
            return _error_result(exc)  # noqa: ASYNC910
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
                return _text_error(
                    f"tools/post-execute returned {_describe(decision)}, not Accept or Block"
                )
        except Exception as exc:  # a hand-built decision whose fields cannot be read
            _log_raised(execution, "reading a post_execute decision", exc)
            return _text_error(
                f"tools/post-execute returned an unreadable {type(decision).__name__}: "
                + error_message(exc)
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
                    exc_info=exc,
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
    ``pre_execute`` listener or the approval service awaits).

    Fails closed: a decision the pipeline cannot read (not an ``Allow`` / ``Deny`` / ``Ask``,
    a ``Deny`` whose ``reason`` is not a ``str``, an ``Ask`` whose ``reason`` is neither
    ``str`` nor ``None``) becomes an error result, as a raising listener does, and the body
    never runs. A value that is an instance of several decision classes reads as the most
    restrictive one (``Deny``, then ``Ask``, then ``Allow``)."""
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
    rejected: BaseException | None = None
    try:
        arguments = snapshot_json(input.arguments)
    except JsonSnapshotError as exc:
        arguments, failure, rejected = None, _INVALID_ARGUMENTS, exc
    except Exception as exc:
        arguments, failure, rejected = None, _error_result(exc), exc
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
        if isinstance(rejected, JsonSnapshotError):
            logger.warning(
                'tool "%s" (%s): arguments rejected at the JSON boundary: %s',
                name,
                call_id,
                rejected,
            )
        else:
            assert rejected is not None
            _log_raised(execution, "reading the arguments", rejected)
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
            _log_raised(execution, "a pre_execute listener", exc)
            return PreparedCall(registry, execution, final=_error_result(exc))

    # stage 3
    approval_cancelled = False
    if not isinstance(decision, Deny) and isinstance(decision, Ask):
        try:
            decision, approval_cancelled = await _resolve_ask(registry, execution, decision)
        except Exception as exc:
            _log_raised(execution, "the approval service", exc)
            return PreparedCall(registry, execution, final=_error_result(exc))

    # stage 4
    if approval_cancelled and signal.cancelled:
        return PreparedCall(registry, execution, outcome=_ABORTED_BEFORE_DISPATCH)

    # stage 5: Deny is read first, so a value that is somehow Deny and Allow denies
    if isinstance(decision, Deny):
        reason = _deny_reason(execution, decision)
        if reason is None:
            return PreparedCall(
                registry,
                execution,
                final=_text_error(
                    f"tools/pre-execute returned a Deny whose reason is not a str "
                    f"({_describe(_read_reason(decision))}); the call is denied"
                ),
            )
    elif isinstance(decision, Allow):
        try:
            reason = registry._evaluate_guards(execution)
        except Exception as exc:
            _log_raised(execution, "a guard", exc)
            return PreparedCall(registry, execution, final=_error_result(exc))
    else:
        return PreparedCall(
            registry,
            execution,
            final=_text_error(
                f"tools/pre-execute returned {_describe(decision)}, not Allow, Deny or Ask"
            ),
        )
    # any non-None guard return denies (``False`` and ``""`` too): guards fail closed
    if reason is not None:
        return PreparedCall(registry, execution, outcome=_text_error(_text(reason)))

    # stage 6
    if signal.cancelled:
        return PreparedCall(registry, execution, outcome=_ABORTED_BEFORE_DISPATCH)
    return PreparedCall(registry, execution, needs_dispatch=True)


def _read_reason(decision: Deny | Ask) -> object:
    try:
        return cast(object, decision.reason)
    except Exception as exc:
        return exc


def _deny_reason(execution: ToolExecution, decision: Deny) -> str | None:
    """The reason of a ``Deny``, or ``None`` when it cannot be read as a ``str`` (a decision
    built around the constructor's check, or a subclass whose ``reason`` misbehaves)."""
    reason = _read_reason(decision)
    if isinstance(reason, str):
        return reason
    logger.warning(
        'tool "%s" (%s): a pre_execute listener returned a Deny whose reason is %s, not a str; '
        "the call is denied",
        execution.name,
        execution.call_id,
        _kind(reason),
    )
    return None


_OUTCOMES: Final = {outcome.value: outcome for outcome in ApprovalOutcome}


async def _resolve_ask(
    registry: ToolRegistry, execution: ToolExecution, ask: Ask
) -> tuple[PreToolDecision, bool]:
    name = execution.name
    reason = _read_reason(ask)
    if reason is not None and not isinstance(reason, str):
        raise TypeError(
            f"tools/pre-execute returned an Ask whose reason is {_kind(reason)}, not a str or None"
        )
    service = registry._approval
    if service is None:
        if reason is None:
            reason = f'tool "{name}" requires approval (not yet supported)'
        return Deny(reason), False  # noqa: ASYNC910
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
                reason=reason,
            )
        ),
    )
    # read a str subclass by its value, never through its own __eq__ / __hash__
    known = _OUTCOMES.get(str.__str__(answer)) if isinstance(answer, str) else None
    if known is ApprovalOutcome.ALLOWED_ONCE:
        return _ALLOW, False
    if known is ApprovalOutcome.REJECTED:
        return Deny(f'the user rejected tool "{name}"'), False
    if known is ApprovalOutcome.CANCELLED:
        return Deny(f'approval for tool "{name}" was cancelled'), True
    if known is ApprovalOutcome.UNAVAILABLE:
        return Deny(f'tool "{name}" requires approval, but no approval channel is available'), False
    raise _Unreachable(f"unreachable variant in ApprovalOutcome: {_describe(answer)}")
