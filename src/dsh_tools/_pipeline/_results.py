"""The canonical results and the final check every result passes (stage 9 of the pipeline).

The pipeline, the scheduler and the timeout policy build their model-facing error results here,
so each text has one home; :func:`freeze_result` checks a result as
complete, immutable, lossless JSON, and :func:`normalize` turns a body's return value into a
success.

A deviation from the original: a body may also return JSON data (``dict``, ``list``, ``int``,
``float``, ``bool``) or an attrs / dataclass instance, which reaches the model as one text block
of compact JSON.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Final, cast

import attrs

from dsh_tools._errors import HarnessError
from dsh_tools._texts import (
    APPROVAL_PENDING,
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_INTERRUPTED,
    TOOL_TIMEOUT,
    UNPRINTABLE,
    ToolErrorInfo,
    approval_pending,
    error_message,
    format_js_number,
)
from dsh_tools._values._content import (
    ContentBlock,
    HookContext,
    MessageSource,
    PluginSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserSource,
    text_block,
)
from dsh_tools._values._converter import content_block_classes, converter
from dsh_tools._values._definition import ToolOutput
from dsh_tools._values._execution import ToolExecutionResult, success_result
from dsh_tools._values._json import JsonValue, snapshot_json
from dsh_tools._values._media import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    MediaBlock,
    block_payload,
    media_problem,
    oversized_note,
)

__all__ = [
    "ABANDONED",
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "INVALID_ARGUMENTS",
    "INTERRUPTED",
    "INVALID_RESULT",
    "TOOL_INTERRUPTED_ERROR_NAME",
    "TOOL_TIMEOUT_ERROR_NAME",
    "Invalid",
    "approval_pending_result",
    "cap_binary",
    "describe",
    "error_info",
    "error_result",
    "freeze_context",
    "freeze_result",
    "is_return_value",
    "kind",
    "media_inside",
    "normalize",
    "printable",
    "reason_text",
    "text_error",
    "idle_timeout_result",
    "timeout_result",
    "valid_str",
]


def printable(text: str) -> str:
    r"""``text`` with every lone surrogate written as a ``\udXXX`` escape, so that model-supplied
    text (a tool name, a call id) can appear in a result, which must be valid Unicode.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def text_error(text: str, error: ToolErrorInfo | None = None) -> ToolExecutionResult:
    return ToolExecutionResult(
        content=(TextBlock(text="Error: " + printable(text)),), is_error=True, error=error
    )


def error_info(exc: BaseException) -> ToolErrorInfo | None:
    """The :class:`ToolErrorInfo` of a :class:`HarnessError`, else ``None``; never raises."""
    if not isinstance(exc, HarnessError):
        return None
    try:
        name, code = exc.name, exc.code
        if type(name) is not str or type(code) is not str:
            return None
        return ToolErrorInfo(name=name, code=code)
    except Exception:
        return None


def error_result(exc: BaseException) -> ToolExecutionResult:
    return text_error(error_message(exc), error_info(exc))


ABORTED: Final = text_error(
    "tool call aborted", ToolErrorInfo(name="AbortError", code=TOOL_ABORTED)
)
ABORTED_BEFORE_DISPATCH: Final = text_error(
    "tool call aborted before dispatch",
    ToolErrorInfo(name="AbortError", code=TOOL_ABORTED_BEFORE_DISPATCH),
)
INVALID_ARGUMENTS: Final = text_error(
    "tool execution arguments must be losslessly JSON-serializable"
)
INVALID_RESULT: Final = text_error("tool result must be losslessly JSON-serializable")
TOOL_INTERRUPTED_ERROR_NAME: Final = "ToolInterruptedError"
"""``error.name`` of :data:`INTERRUPTED` (synthetic: no exception class is raised)."""
INTERRUPTED: Final = text_error(
    "tool call interrupted: the process stopped while it ran; its effects are unknown",
    ToolErrorInfo(name=TOOL_INTERRUPTED_ERROR_NAME, code=TOOL_INTERRUPTED),
)
"""A call found with a ``tool/call`` and no ``tool/result`` when its batch is resumed or
recovered, and not run again."""
APPROVAL_PENDING_ERROR_NAME: Final = "ApprovalPendingError"


def approval_pending_result(tool: str) -> ToolExecutionResult:
    """The placeholder result of a call whose approval was deferred (code
    ``APPROVAL_PENDING``): never a result for the model.
    """
    return text_error(
        approval_pending(tool),
        ToolErrorInfo(name=APPROVAL_PENDING_ERROR_NAME, code=APPROVAL_PENDING),
    )


ABANDONED: Final = text_error(
    "tool call aborted (its worker thread was abandoned and may still be running)",
    ToolErrorInfo(name="AbortError", code=TOOL_ABORTED),
)


def reason_text(value: object) -> str:
    """``str(value)`` for a denial reason, total like :func:`error_message`."""
    if type(value) is str:
        return value
    try:
        return str(value)
    except Exception:
        return UNPRINTABLE


def describe(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_js_number(value)
    try:
        return repr(value)
    except Exception:
        return UNPRINTABLE


def kind(value: object) -> str:
    """``42, an int``: a value and its type, for log details."""
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{describe(value)}, {article} {name}"


# --- stage 9: final materialization -------------------------------------------------------


def valid_str(value: object) -> bool:
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
        return f"{where} is {kind(content)}, not a tuple of content blocks"
    for index, block in enumerate(cast("tuple[object, ...]", content)):
        cls = type(block)
        if cls is TextBlock or cls is ReasoningBlock:
            if not valid_str(cast("TextBlock", block).text):
                return f"{where}[{index}].text is not a str without lone surrogates"
        elif cls is ToolCallBlock:
            call = cast("ToolCallBlock", block)
            if not (valid_str(call.id) and valid_str(call.name) and valid_str(call.arguments)):
                return f"{where}[{index}] has a field that is not a str without lone surrogates"
        elif cls is ToolResultBlock:
            nested = cast("ToolResultBlock", block)
            if not valid_str(nested.tool_call_id):
                return f"{where}[{index}].tool_call_id is not a str without lone surrogates"
            problem = _content_problem(nested.content, f"{where}[{index}].content")
            if problem is not None:
                return problem
            if not (nested.is_error is None or type(nested.is_error) is bool):
                return f"{where}[{index}].is_error is {kind(nested.is_error)}, not a bool"
        elif cls is ImageBlock or cls is AudioBlock or cls is FileBlock:
            # frozen, but attrs' setters can be bypassed: checked again, as text is
            invalid = media_problem(cast("MediaBlock", block))
            if invalid is not None:
                return f"{where}[{index}]: {invalid}"
        elif not _valid_extension(block, ContentBlock):
            return f"{where}[{index}] is {kind(block)}, not a content block"
    return None


def _valid_extension(value: object, union: object) -> bool:
    """A value of a type added to ``union`` through the converter (``register_content_block``)
    is valid when its wire form is lossless JSON; an unregistered type is not.
    """
    try:
        snapshot_json(converter.unstructure(value, cast("type[object]", union)))
    except Exception:
        return False
    return True


class Invalid(Exception):
    """A result (or context) that is not lossless JSON; the message is the detail."""


def _frozen_meta(meta: object, where: str) -> JsonValue:
    if meta is None:
        return None
    try:
        return snapshot_json(meta)
    except Exception as exc:
        raise Invalid(f"{where}: {error_message(exc)}") from None


def freeze_context(context: object, where: str = "context") -> HookContext:
    """``context`` checked as lossless JSON, with its ``meta`` frozen.

    Raises:
        Invalid: with the detail.
    """
    if type(context) is not HookContext:
        raise Invalid(f"{where} is {kind(context)}, not a HookContext")
    source = context.source
    if type(source) is PluginSource:
        if not valid_str(source.plugin):
            raise Invalid(f"{where}.source.plugin is not a str without lone surrogates")
    elif type(source) is not UserSource and not _valid_extension(source, MessageSource):
        raise Invalid(f"{where}.source is {kind(source)}, not a message source")
    problem = _content_problem(context.content, f"{where}.content")
    if problem is not None:
        raise Invalid(problem)
    meta = context.meta
    frozen = _frozen_meta(meta, f"{where}.meta")
    if frozen is meta:
        return context
    return attrs.evolve(context, meta=frozen)


def freeze_result(result: object) -> ToolExecutionResult:
    """Stage 9: ``result`` checked as complete, immutable, lossless JSON, with every ``meta``
    frozen. A valid result whose metas are frozen already is returned as is (no copy).

    Raises:
        Invalid: with the detail.
    """
    if type(result) is not ToolExecutionResult:
        raise Invalid(f"the result is {kind(result)}, not a ToolExecutionResult")
    if type(result.is_error) is not bool:
        raise Invalid(f"is_error is {kind(result.is_error)}, not a bool")
    problem = _content_problem(result.content, "content")
    if problem is not None:
        raise Invalid(problem)
    error = result.error
    if not (
        error is None
        or (type(error) is ToolErrorInfo and valid_str(error.name) and valid_str(error.code))
    ):
        raise Invalid(f"error is {kind(error)}, not a ToolErrorInfo of two str")
    contexts = result.additional_contexts
    if type(contexts) is not tuple:
        raise Invalid(f"additional_contexts is {kind(contexts)}, not a tuple")
    frozen_contexts = tuple(
        freeze_context(context, f"additional_contexts[{index}]")
        for index, context in enumerate(cast("tuple[object, ...]", contexts))
    )
    meta = result.meta
    frozen_meta = _frozen_meta(meta, "meta")
    if frozen_meta is meta and all(a is b for a, b in zip(frozen_contexts, contexts, strict=True)):
        return result
    return attrs.evolve(result, additional_contexts=frozen_contexts, meta=frozen_meta)


def _capped_content(
    content: tuple[ContentBlock, ...], limit: int
) -> tuple[ContentBlock, ...] | None:
    """``content`` with every media block over ``limit`` bytes replaced by a text note, or
    ``None`` when nothing is over.
    """
    capped: list[ContentBlock] | None = None
    for index, block in enumerate(content):
        if type(block) not in _MEDIA_TYPES:
            continue
        payload = block_payload(cast("MediaBlock", block))
        if payload is None or len(payload) <= limit:
            continue
        if capped is None:
            capped = list(content)
        capped[index] = text_block(oversized_note(cast("MediaBlock", block), len(payload), limit))
    return None if capped is None else tuple(capped)


def cap_binary(result: ToolExecutionResult, limit: int) -> ToolExecutionResult:
    """``result`` (final, checked) with every picture, sound or file over ``limit`` bytes, in
    its content or its contexts, replaced by a note the model can read. The result stays what
    it was otherwise (a replaced block does not make it an error). Returned as is when nothing
    is over.
    """
    content = _capped_content(result.content, limit)
    contexts: list[HookContext] = []
    changed = content is not None
    for context in result.additional_contexts:
        capped = _capped_content(context.content, limit)
        if capped is not None:
            changed = True
            context = attrs.evolve(context, content=capped)
        contexts.append(context)
    if not changed:
        return result
    return attrs.evolve(
        result,
        content=result.content if content is None else content,
        additional_contexts=tuple(contexts),
    )


def is_return_value(returned: object) -> bool:
    return isinstance(returned, str | ToolOutput | list | tuple)


def normalize(returned: object) -> ToolExecutionResult:
    """Stage 7.6: a body's return value as a successful result. Content is not checked here:
    shape problems surface at final materialization, after post_execute.

    A ``str`` is one text block, a :class:`~dsh_tools.ToolOutput` its content, and a list or
    tuple holding a content block (or empty) is content. Any other value that is lossless JSON
    data (``dict``, ``list``, ``int``, ``float``, ``bool``), or an attrs / dataclass instance the
    converter unstructures to it, is one text block of compact JSON. What remains (``None``, a
    value that is not lossless JSON) is carried as is and rejected at stage 9.
    """
    meta: JsonValue = None
    if isinstance(returned, str):
        content: tuple[object, ...] = (text_block(returned),)
    elif isinstance(returned, ToolOutput):
        content, meta = returned.content, returned.meta
    elif isinstance(returned, list | tuple) and _is_content(
        cast("list[object] | tuple[object, ...]", returned)
    ):
        content = tuple(cast("list[object] | tuple[object, ...]", returned))
    else:
        content = (_json_text(cast("object", returned)),)
    return success_result(content, meta)  # pyright: ignore[reportArgumentType] (checked at stage 9; no runtime cast on the hot path)


def _is_content(items: list[object] | tuple[object, ...]) -> bool:
    if not items:
        return True
    blocks = tuple(content_block_classes())
    return any(isinstance(item, blocks) for item in items)


_MEDIA_TYPES: Final = (ImageBlock, AudioBlock, FileBlock)


def media_inside(value: object, depth: int = 0) -> bool:
    """Whether ``value`` (JSON-like data, an attrs or dataclass instance) holds a picture,
    sound or file block somewhere inside it (internal: only on the path of data that is not
    plain JSON).
    """
    if isinstance(value, _MEDIA_TYPES):
        return True
    if depth > 64 or isinstance(value, str | bytes | int | float | type(None)):
        return False
    items: Iterable[object]
    if isinstance(value, Mapping):
        items = cast("Mapping[object, object]", value).values()
    elif isinstance(value, list | tuple):
        items = cast("list[object] | tuple[object, ...]", value)
    elif attrs.has(type(value)):
        items = (getattr(value, field.name) for field in attrs.fields(type(value)))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = (getattr(value, field.name) for field in dataclasses.fields(value))
    else:
        return False
    return any(media_inside(item, depth + 1) for item in items)


def _json_text(value: object) -> object:
    """One text block of ``value`` as compact JSON, or ``value`` itself when it is not lossless
    JSON data, even once the converter has unstructured the attrs / dataclass instances in it
    (stage 9 then rejects it).
    """
    if value is None:
        return value  # most likely a forgotten ``return``: stays an error
    if type(value) in content_block_classes():
        return value  # a bare block is content, as it always was
    try:
        frozen = snapshot_json(value)
    except (TypeError, ValueError):
        if media_inside(value):
            return value  # bytes would become a base64 string in a text block: stage 9 refuses
        try:
            frozen = snapshot_json(converter.unstructure(value))
        except Exception:
            return value
    return text_block(json.dumps(frozen, separators=(",", ":"), ensure_ascii=False))


# --- the timeout policy's result -------------------------------------------------------------

TOOL_TIMEOUT_ERROR_NAME: Final = "ToolTimeoutError"
"""``error.name`` of a timeout result (synthetic: no exception class is raised)."""


def _milliseconds(seconds: float) -> str:
    # model-facing text keeps the original's milliseconds, printed as JavaScript prints a number
    # (``100``, ``1.5``, ``0.00001``); rounding drops the noise of the seconds -> ms product
    return format_js_number(round(seconds * 1000, 6))


def timeout_result(timeout: float) -> ToolExecutionResult:
    """The ``TOOL_TIMEOUT`` result for a budget of ``timeout`` seconds.

    ``Error: tool call timed out after <ms>ms`` (``0.1`` → ``100ms``, ``0.0015`` → ``1.5ms``).
    """
    return text_error(
        f"tool call timed out after {_milliseconds(timeout)}ms",
        ToolErrorInfo(name=TOOL_TIMEOUT_ERROR_NAME, code=TOOL_TIMEOUT),
    )


def idle_timeout_result(idle_timeout: float) -> ToolExecutionResult:
    """The ``TOOL_TIMEOUT`` result of a body that made no progress for ``idle_timeout``
    seconds: ``Error: tool call made no progress for <ms>ms``.
    """
    return text_error(
        f"tool call made no progress for {_milliseconds(idle_timeout)}ms",
        ToolErrorInfo(name=TOOL_TIMEOUT_ERROR_NAME, code=TOOL_TIMEOUT),
    )
