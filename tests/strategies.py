"""Hypothesis strategies for the library's values, shared by the test modules.

``json_values()`` generates plain JSON data (``dict`` / ``list`` / scalars, as ``json.loads``
gives; ``tuples=True`` adds tuple arrays) that ``snapshot_json`` accepts; the other strategies generate the public value types, with every
optional field sometimes absent, so converter round trips cover the omitted-key paths.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Final, TypeVar

from hypothesis import strategies as st

from dsh_tools import (
    MAX_DEPTH,
    Accept,
    Allow,
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    ApprovalOutcome,
    ApprovalPolicyEvent,
    ApprovalRevokedEvent,
    Ask,
    AudioBlock,
    BatchCallEvent,
    BatchEndEvent,
    BatchStartEvent,
    Block,
    ContentBlock,
    ContextMessageEvent,
    Deny,
    DiffCallView,
    DiffResultView,
    FileBlock,
    FileDiff,
    FileLocation,
    GenericCallView,
    GenericResultView,
    HookContext,
    ImageBlock,
    JsonValue,
    MessageEvent,
    MessageSource,
    PluginSource,
    PostToolDecision,
    PreToolDecision,
    ReasoningBlock,
    SessionEvent,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallBlock,
    ToolCallEvent,
    ToolCallKind,
    ToolCallRequest,
    ToolCallView,
    ToolErrorInfo,
    ToolExecutionMode,
    ToolExecutionResult,
    ToolProgressEvent,
    ToolResult,
    ToolResultBlock,
    ToolResultEvent,
    ToolResultView,
    ToolSchema,
    TurnEndEvent,
    TurnStartEvent,
    UserSource,
    snapshot_json,
)
from dsh_tools._values._json import MAX_SAFE_INTEGER

T = TypeVar("T")

__all__ = [
    "MAX_DEPTH",
    "any_public_value",
    "public_values_by_kind",
    "content_blocks",
    "media_blocks",
    "file_diffs",
    "every_session_event",
    "session_events",
    "file_locations",
    "hook_contexts",
    "json_keys",
    "json_scalars",
    "json_values",
    "message_sources",
    "post_decisions",
    "pre_decisions",
    "snapshotted_json",
    "tool_call_views",
    "tool_error_infos",
    "tool_execution_modes",
    "tool_execution_results",
    "tool_result_views",
    "tool_results",
    "tool_schemas",
]


def _is_negative_zero(value: float) -> bool:
    return value == 0.0 and math.copysign(1.0, value) < 0


json_keys = st.text(max_size=8)
"""Object keys: any text without lone surrogates (Hypothesis excludes them by default)."""

json_scalars: st.SearchStrategy[bool | int | float | str | None] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not _is_negative_zero(f)),
    st.text(max_size=20),
)
"""Every kind of JSON scalar ``snapshot_json`` accepts, including the range limits."""


def json_values(*, max_leaves: int = 25, tuples: bool = False) -> st.SearchStrategy[Any]:
    """Plain, mutable JSON data: what ``json.loads`` gives (``dict`` with ``str`` keys, ``list``,
    scalars).

    Args:
        max_leaves: the size bound passed to ``st.recursive``.
        tuples: also generate ``tuple`` arrays (``snapshot_json`` accepts them; ``jsonschema``
            and ``json.loads`` comparisons do not), for tests of the snapshot itself.
    """

    def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        arrays = st.lists(children, max_size=5)
        if tuples:
            arrays = arrays | arrays.map(tuple)
        return arrays | st.dictionaries(json_keys, children, max_size=5)

    return st.recursive(json_scalars, containers, max_leaves=max_leaves)


def snapshotted_json(*, max_leaves: int = 10) -> st.SearchStrategy[JsonValue]:
    """Values already through ``snapshot_json`` (frozen objects, tuples)."""
    return json_values(max_leaves=max_leaves, tuples=True).map(snapshot_json)


def _optional(strategy: st.SearchStrategy[T]) -> st.SearchStrategy[T | None]:
    return st.none() | strategy


_text = st.text(max_size=12)

# a signature the block's media type needs, then any bytes: what the checks read is the start
_SIGNED: Final = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/gif": b"GIF89a",
    "image/jpeg": b"\xff\xd8\xff",
    "audio/ogg": b"OggS",
    "audio/flac": b"fLaC",
    "application/pdf": b"%PDF-",
}


def _signed(media_type: str) -> st.SearchStrategy[bytes]:
    return st.binary(max_size=16).map(lambda tail: _SIGNED[media_type] + tail)


_utf8_bytes = st.text(max_size=12).map(lambda text: text.encode("utf-8"))
_https_urls = st.from_regex(r"\Ahttps://[a-z]{1,8}\.example/[a-z0-9]{0,8}\Z")


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


_image_types = st.sampled_from(["image/png", "image/gif", "image/jpeg"])
_image_blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    _image_types.flatmap(lambda t: st.builds(ImageBlock, media_type=st.just(t), data=_signed(t))),
    _image_types.flatmap(
        lambda t: _signed(t).map(lambda data: ImageBlock(media_type=t, url=_data_url(t, data)))
    ),
    st.builds(ImageBlock, media_type=_image_types, url=_https_urls),
)
_audio_blocks: st.SearchStrategy[ContentBlock] = st.sampled_from(
    ["audio/ogg", "audio/flac"]
).flatmap(lambda t: st.builds(AudioBlock, media_type=st.just(t), data=_signed(t)))
_file_blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(
        FileBlock,
        media_type=st.just("application/pdf"),
        data=_signed("application/pdf"),
        name=_optional(_text),
    ),
    st.builds(
        FileBlock,
        media_type=st.sampled_from(["text/plain", "text/csv", "application/json"]),
        data=_utf8_bytes,
        name=_optional(_text),
    ),
    st.builds(FileBlock, media_type=st.just("application/pdf"), url=_https_urls),
)
media_blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    _image_blocks, _audio_blocks, _file_blocks
)
"""Pictures, sound and files: bytes, data: URLs and https: URLs."""

_leaf_blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(TextBlock, text=_text),
    st.builds(ReasoningBlock, text=_text),
    st.builds(ToolCallBlock, id=_text, name=_text, arguments=_text),
    media_blocks,
)

content_blocks: st.SearchStrategy[ContentBlock] = st.recursive(
    _leaf_blocks,
    lambda children: st.builds(
        ToolResultBlock,
        tool_call_id=_text,
        content=st.lists(children, max_size=3),
        is_error=_optional(st.booleans()),
    ),
    max_leaves=6,
)
"""Every core content block, tool-result blocks nesting others."""

_block_lists = st.lists(content_blocks, max_size=3)

message_sources: st.SearchStrategy[MessageSource] = st.one_of(
    st.builds(UserSource), st.builds(PluginSource, plugin=_text)
)

hook_contexts: st.SearchStrategy[HookContext] = st.builds(
    HookContext,
    content=_block_lists,
    source=message_sources,
    meta=_optional(snapshotted_json(max_leaves=5)),
)

tool_error_infos: st.SearchStrategy[ToolErrorInfo] = st.builds(
    ToolErrorInfo, name=_text, code=_text
)

tool_execution_results: st.SearchStrategy[ToolExecutionResult] = st.builds(
    ToolExecutionResult,
    content=_block_lists,
    is_error=st.booleans(),
    error=_optional(tool_error_infos),
    additional_contexts=st.lists(hook_contexts, max_size=2),
    meta=_optional(snapshotted_json(max_leaves=5)),
)

tool_results: st.SearchStrategy[ToolResult] = st.builds(
    ToolResult,
    content=_block_lists,
    is_error=st.booleans(),
    meta=_optional(snapshotted_json(max_leaves=5)),
)

_schema_properties = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.sampled_from([{"type": "string"}, {"type": "number"}, {"type": "boolean"}]),
    max_size=3,
)

tool_schemas: st.SearchStrategy[ToolSchema] = st.builds(
    ToolSchema,
    name=_text,
    description=_text,
    parameters=_schema_properties.map(lambda props: {"type": "object", "properties": props}),
)

tool_execution_modes: st.SearchStrategy[ToolExecutionMode] = st.sampled_from(
    [ToolExecutionMode.PARALLEL, ToolExecutionMode.EXCLUSIVE]
)

pre_decisions: st.SearchStrategy[PreToolDecision] = st.one_of(
    st.builds(Allow), st.builds(Deny, _text), st.builds(Ask, _optional(_text))
)

_context_lists = st.lists(hook_contexts, max_size=2)

post_decisions: st.SearchStrategy[PostToolDecision] = st.one_of(
    st.builds(Accept, content=_optional(_block_lists), additional_contexts=_context_lists),
    st.builds(Block, feedback=_block_lists, additional_contexts=_context_lists),
)

file_locations: st.SearchStrategy[FileLocation] = st.builds(
    FileLocation, path=_text, line=_optional(st.integers(min_value=1, max_value=10**6))
)

file_diffs: st.SearchStrategy[FileDiff] = st.builds(
    FileDiff, path=_text, old_text=_optional(_text), new_text=_text
)

_location_lists = _optional(st.lists(file_locations, max_size=2))

tool_call_views: st.SearchStrategy[ToolCallView] = st.one_of(
    st.builds(
        GenericCallView,
        title=_text,
        kind=_optional(st.sampled_from(ToolCallKind)),
        raw_input=_optional(json_values(max_leaves=5)),
        content=_optional(_block_lists),
        locations=_location_lists,
    ),
    st.builds(TerminalCallView, title=_text, description=_optional(_text), cwd=_optional(_text)),
    st.builds(
        DiffCallView, title=_text, diffs=st.lists(file_diffs, max_size=2), locations=_location_lists
    ),
)

_exit_or_signal = st.one_of(
    st.tuples(st.none(), st.none()),
    st.tuples(st.integers(min_value=-(2**31), max_value=2**31), st.none()),
    st.tuples(st.none(), st.sampled_from(["SIGTERM", "SIGKILL"])),
)

tool_result_views: st.SearchStrategy[ToolResultView] = st.one_of(
    st.builds(GenericResultView, title=_optional(_text), content=_optional(_block_lists)),
    _exit_or_signal.flatmap(
        lambda pair: st.builds(
            TerminalResultView,
            title=_optional(_text),
            output=_optional(_text),
            exit_code=st.just(pair[0]),
            signal=st.just(pair[1]),
        )
    ),
    st.builds(DiffResultView, title=_optional(_text), diffs=st.lists(file_diffs, max_size=2)),
)

_counters = st.integers(min_value=0, max_value=10_000)

_requests = st.builds(ToolCallRequest, call_id=_text, name=_text, arguments=_text)

session_events: st.SearchStrategy[SessionEvent] = st.one_of(
    st.builds(
        ToolCallEvent,
        turn=_counters,
        step=_counters,
        call_id=_text,
        name=_text,
        arguments=_text,
        attempt=st.integers(min_value=1, max_value=5),
    ),
    st.builds(
        ToolResultEvent,
        turn=_counters,
        step=_counters,
        call_id=_text,
        content=_block_lists,
        is_error=st.booleans(),
        error=_optional(tool_error_infos),
        meta=_optional(json_values(max_leaves=5)),
        source_event_seqs=st.lists(_counters, max_size=3),
        contexts=st.lists(hook_contexts, max_size=2),
    ),
    st.builds(
        ContextMessageEvent,
        content=_block_lists,
        source=message_sources,
        meta=_optional(json_values(max_leaves=5)),
    ),
    st.builds(
        BatchStartEvent,
        turn=_counters,
        step=_counters,
        batch_id=st.uuids().map(str),
        calls=st.lists(_requests, max_size=3),
    ),
    st.builds(
        BatchEndEvent,
        turn=_counters,
        step=_counters,
        batch_id=st.uuids().map(str),
        reason=st.sampled_from(["completed", "aborted", "suspended", "failed"]),
    ),
)
"""The session events the scheduler appends."""

_wire_text = st.text(st.characters(exclude_categories=()), max_size=12)  # lone surrogates too
_ids = st.text(st.characters(exclude_categories=()), min_size=1, max_size=12)
_amounts = _optional(
    st.integers(min_value=0, max_value=MAX_SAFE_INTEGER)
    | st.floats(min_value=0, allow_nan=False, allow_infinity=False)
)

every_session_event: st.SearchStrategy[SessionEvent] = st.one_of(
    session_events,
    st.builds(
        ToolProgressEvent,
        turn=_counters,
        step=_counters,
        call_id=_wire_text,
        message=_optional(_wire_text),
        progress=_amounts,
        total=_amounts,
        output=_optional(_wire_text),
    ),
    st.builds(
        BatchCallEvent,
        turn=_counters,
        step=_counters,
        batch_id=st.uuids().map(str),
        call=_requests,
    ),
    st.builds(TurnStartEvent, turn=_counters, trigger=_optional(json_values(max_leaves=5))),
    st.builds(TurnEndEvent, turn=_counters, kind=st.sampled_from(["completed", "aborted"])),
    st.builds(
        ApprovalAskedEvent,
        id=_ids,
        tool_name=_wire_text,
        call_id=_optional(_wire_text),
        reason=_optional(_wire_text),
        agent=_optional(_wire_text),
        arguments_digest=_optional(st.text("0123456789abcdef", min_size=64, max_size=64)),
    ),
    st.builds(
        MessageEvent,
        turn=_counters,
        role=st.sampled_from(["user", "assistant", "tool", "system"]),
        message=st.dictionaries(_wire_text, json_values(max_leaves=5), max_size=3),
    ),
    st.builds(
        ApprovalDecidedEvent,
        id=_ids,
        outcome=st.sampled_from(ApprovalOutcome),
        answered_by=_optional(st.sampled_from(["grant", "resume"]) | _wire_text),
        arguments_digest=_optional(st.text("0123456789abcdef", min_size=64, max_size=64)),
        arguments=_optional(st.dictionaries(_wire_text, json_values(max_leaves=4), max_size=3)),
        note=_optional(_wire_text),
    ),
    st.builds(ApprovalRevokedEvent, tool_name=_ids, agent=_optional(_wire_text)),
    st.builds(ApprovalPolicyEvent, policy=st.sampled_from(["ask", "never"])),
)
"""Every kind of session event, with every optional field sometimes absent."""

public_values_by_kind: dict[str, st.SearchStrategy[Any]] = {
    "content blocks": content_blocks,
    "message sources": message_sources,
    "hook contexts": hook_contexts,
    "tool error infos": tool_error_infos,
    "tool execution results": tool_execution_results,
    "tool results": tool_results,
    "tool schemas": tool_schemas,
    "tool execution modes": tool_execution_modes,
    "pre decisions": pre_decisions,
    "post decisions": post_decisions,
    "file locations": file_locations,
    "file diffs": file_diffs,
    "tool call views": tool_call_views,
    "tool result views": tool_result_views,
    "session events": session_events,
}
"""One strategy per kind of public wire type (unions cover each of their members)."""

any_public_value: st.SearchStrategy[object] = st.one_of(*public_values_by_kind.values())
"""A value of any public wire type."""
