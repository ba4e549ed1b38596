"""Mount the tools of a connected MCP server into a registry or a scope.

Each server tool becomes a raw :class:`~dsh_tools.ToolDefinition` whose body validates the
arguments against the server's input schema with ``jsonschema``, calls the tool through the
client, and maps the MCP result onto a tool result. ``mount_mcp`` owns one background task (the
``tools/list_changed`` listener) in its own nursery, so nothing outlives the ``async with``.

A server is untrusted input: a tool it lists that cannot be mounted (an empty name, a schema
that is not lossless JSON) is skipped with a warning; structured content that is not lossless
JSON is dropped with a warning and the text kept; and the server's regular expressions are
matched with RE2, in time linear in the argument (``_patterns``): a ``pattern`` such as
``^(a+)+$`` would make ``re`` backtrack for minutes while holding the GIL, which no thread and
no deadline can interrupt.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import PurePosixPath
from typing import Any, Final, TypeAlias, cast
from urllib.parse import urlsplit

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import jsonschema.validators
import mcp
import mcp.types
import trio
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost

from dsh_tools import (
    AudioBlock,
    ContentBlock,
    Disposer,
    FileBlock,
    HarnessError,
    ImageBlock,
    JsonSnapshotError,
    JsonValue,
    TextBlock,
    ToolArgsError,
    ToolDefinition,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
    ToolScope,
    error_message,
    snapshot_json,
    thaw_json,
)
from dsh_tools._for_integrations import check_seconds

from ._patterns import linear_validator, needs_backtracking, unmatched_patterns

__all__ = [
    "MCP_TOOL_ERROR",
    "McpConnectionError",
    "McpToolError",
    "MountTarget",
    "MountedServer",
    "mount_mcp",
]

logger: Final = logging.getLogger("dsh_tools")

MCP_TOOL_ERROR: Final = "MCP_TOOL_ERROR"
"""The error code of a result the MCP server itself marked ``isError``."""

MountTarget: TypeAlias = ToolRegistry | ToolScope
"""Where ``mount_mcp`` registers the server's tools."""


class McpToolError(HarnessError):
    """The server answered the call with ``isError: true``; its text is the message
    (code :data:`MCP_TOOL_ERROR`).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, MCP_TOOL_ERROR)


class McpConnectionError(HarnessError):
    """The call could not complete: the server failed the request or the connection broke
    (code ``MCP_CONNECTION``).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, "MCP_CONNECTION")


# --- argument validation -----------------------------------------------------------------


def _path_text(path: Iterable[str | int]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


_TYPE_NOUNS: Final = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _violation(error: jsonschema.exceptions.ValidationError) -> str:
    """One jsonschema error in the DSL's wording: ``"servers[1].host" must be a string``,
    ``missing required property "servers[1].port"``; other keywords keep jsonschema's text.
    """
    path = list(error.absolute_path)
    where = _path_text(path) or "arguments"
    validator = error.validator
    expected = cast(object, error.validator_value)
    instance = cast(object, error.instance)
    if validator == "required" and isinstance(expected, list) and isinstance(instance, dict):
        # jsonschema reports the object; name the missing property as the DSL does
        present = cast("dict[str, object]", instance)
        for name in cast("list[object]", expected):
            if isinstance(name, str) and name not in present:
                return f'missing required property "{_path_text([*path, name])}"'
    if validator == "type":
        kinds = cast("list[object]", expected) if isinstance(expected, list) else [expected]
        nouns = [
            _TYPE_NOUNS.get(kind, kind) if isinstance(kind, str) else repr(kind) for kind in kinds
        ]
        return f'"{where}" must be {" or ".join(nouns)}'
    if validator == "enum":
        return f'"{where}" must be one of {_compact(cast(object, error.validator_value))}'
    if validator == "const":
        return f'"{where}" must be {_compact(cast(object, error.validator_value))}'
    return f'"{where}" {error.message}'


@attrs.frozen
class _ArgsChecker:
    validator: jsonschema.protocols.Validator | None
    schema_error: str | None

    @classmethod
    def for_schema(cls, name: str, schema: Mapping[str, Any]) -> _ArgsChecker:
        try:
            validator_class = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            validator_class.check_schema(dict(schema))
        except jsonschema.exceptions.SchemaError as exc:
            logger.warning('MCP tool "%s" has an invalid input schema: %s', name, exc.message)
            return cls(None, f'tool "{name}" has an invalid input schema: {exc.message}')
        except RecursionError:
            logger.warning('MCP tool "%s" has an input schema too deep to check', name)
            return cls(None, f'tool "{name}" has an invalid input schema: nested too deeply')
        if needs_backtracking(schema):
            logger.warning(
                'MCP tool "%s": its input schema pairs patternProperties with '
                "unevaluatedProperties, which only a backtracking matcher resolves; "
                "its arguments are left for the server to check",
                name,
            )
            return cls(None, None)
        unmatched = unmatched_patterns(schema)
        if unmatched:
            logger.warning(
                'MCP tool "%s": patterns RE2 cannot run (backreferences, lookaround) are left '
                "for the server to check: %s",
                name,
                ", ".join(json.dumps(pattern, ensure_ascii=False) for pattern in unmatched),
            )
        return cls(linear_validator(validator_class)(schema), None)

    def check(self, arguments: object) -> None:
        if self.validator is None:
            if self.schema_error is None:
                return  # left for the server to check
            raise HarnessError(self.schema_error, "UNSUPPORTED_SCHEMA")
        # jsonschema reports in the schema's own keyword and property order: deterministic
        violations = dict.fromkeys(
            _violation(error) for error in self.validator.iter_errors(cast(Any, arguments))
        )
        if violations:
            raise ToolArgsError(violations)


# --- result mapping ------------------------------------------------------------------------


# what some servers write for a type the blocks know by another name
_MEDIA_ALIASES: Final = {
    "image/jpg": "image/jpeg",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-flac": "audio/flac",
}


def _media(kind: str, mime_type: str | None, data: str, uri: str | None = None) -> ContentBlock:
    """An MCP picture, sound or blob as a block, or (bytes that are not base64, a media type
    the blocks do not know, bytes that are not what the type says) a text that says what came
    and why it is not passed on: a server's odd block never fails the call.
    """
    media_type = (mime_type or "").strip().lower()
    media_type = _MEDIA_ALIASES.get(media_type, media_type)
    name = (PurePosixPath(urlsplit(uri).path).name or None) if uri else None
    try:
        raw = base64.b64decode(data, validate=True)
        if kind == "image" or (kind == "resource" and media_type.startswith("image/")):
            return ImageBlock(media_type=media_type, data=raw)
        if kind == "audio" or (kind == "resource" and media_type.startswith("audio/")):
            return AudioBlock(media_type=media_type, data=raw)
        return FileBlock(media_type=media_type, data=raw, name=name)
    except (binascii.Error, TypeError, ValueError) as exc:
        where = f"{uri}, " if uri else ""
        return TextBlock(
            text=f"[{kind} content: {where}{mime_type or 'no media type'}, not passed on: "
            f"{error_message(exc)}]"
        )


def _block(block: mcp.types.ContentBlock) -> ContentBlock:
    """An MCP content block as a content block: text as text, pictures, sound and binary
    resources as blocks, a link or a text resource as text that names it.
    """
    if isinstance(block, mcp.types.TextContent):
        return TextBlock(text=block.text)
    if isinstance(block, mcp.types.ImageContent):
        return _media("image", block.mime_type, block.data)
    if isinstance(block, mcp.types.AudioContent):
        return _media("audio", block.mime_type, block.data)
    if isinstance(block, mcp.types.ResourceLink):
        return TextBlock(text=f"[resource link: {block.uri}]")
    resource = block.resource  # the last kind: an embedded resource
    if isinstance(resource, mcp.types.TextResourceContents):
        return TextBlock(text=f"[embedded resource: {resource.uri}]\n{resource.text}")
    return _media("resource", resource.mime_type, resource.blob, str(resource.uri))


def _content(blocks: Sequence[mcp.types.ContentBlock]) -> list[ContentBlock]:
    return [_block(block) for block in blocks]


def _output(remote: str, result: mcp.types.CallToolResult) -> ToolOutput:
    content = _content(result.content)
    if result.is_error:
        text = "\n".join(block.text for block in content if isinstance(block, TextBlock))
        raise McpToolError(text or "the MCP tool reported an error")
    structured: JsonValue = None
    if result.structured_content is not None:
        try:
            structured = snapshot_json(result.structured_content)
        except JsonSnapshotError as exc:
            # the text content is the tool's answer; one unreadable extra must not replace it
            logger.warning(
                'MCP tool "%s": structured content dropped, it is not lossless JSON: %s',
                remote,
                exc,
            )
    return ToolOutput(content=content, meta=structured)


# --- the mounted tools ---------------------------------------------------------------------


def _read_only(_arguments: object) -> bool:
    return True


@attrs.frozen
class _Options:
    """What ``mount_mcp`` applies to every tool it mounts."""

    timeout: float | None = None
    idle_timeout: float | None = None
    trust_hints: bool = False


def _definition(
    client: mcp.Client,
    tool: mcp.types.Tool,
    name: str,
    options: _Options,
) -> ToolDefinition:
    """The mounted tool, or a ``TypeError`` / ``ValueError`` when the server's tool cannot be
    one (an empty name, a schema that is not lossless JSON).
    """
    remote = tool.name
    if not remote:
        raise ValueError("an MCP tool needs a non-empty name")
    # fails before the (slower) schema check when the schema is not lossless JSON
    parameters = snapshot_json(tool.input_schema)
    checker = _ArgsChecker.for_schema(name, tool.input_schema)

    async def call(arguments: JsonValue, context: ToolRunContext) -> ToolOutput:
        plain = thaw_json(arguments)
        checker.check(plain)  # on the loop: every regular expression runs in linear time

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            # the server's progress notifications become the call's progress (a server that
            # sends nonsense amounts, or a notification that arrives after the call ended,
            # loses them, never the call)
            try:
                context.report_progress(message=message, progress=progress, total=total)
            except (TypeError, ValueError, RuntimeError) as exc:
                logger.debug('MCP tool "%s": progress dropped: %s', remote, exc)
            await trio.lowlevel.checkpoint()

        try:
            result = await client.call_tool(
                remote, cast("dict[str, Any]", plain), progress_callback=progress
            )
        except mcp.MCPError as exc:
            raise McpConnectionError(f'MCP tool "{remote}" failed: {exc}') from exc
        return _output(remote, result)

    annotations = tool.annotations
    read_only = annotations is not None and annotations.read_only_hint is True
    # a server's hint decides a retry only when the user trusts the server's hints
    idempotent = (
        options.trust_hints and annotations is not None and annotations.idempotent_hint is True
    )
    return ToolDefinition(
        name=name,
        description=tool.description or "",
        parameters=cast("Mapping[str, object]", parameters),
        execute=call,
        timeout=options.timeout,
        idle_timeout=options.idle_timeout,
        idempotent=idempotent,
        is_concurrency_safe=_read_only if read_only else None,
    )


def _fingerprint(tool: mcp.types.Tool) -> str:
    return tool.model_dump_json(by_alias=True, exclude_none=True)


@attrs.define(eq=False)
class _Registrations:
    """What a mount has registered, shared by :class:`MountedServer` and ``mount_mcp`` (which
    unregisters it all when its block ends).
    """

    # server tool name (with the prefix) -> (the tool's fingerprint, its disposer)
    entries: dict[str, tuple[str, Disposer]] = attrs.field(
        factory=lambda: dict[str, tuple[str, Disposer]]()
    )
    closed: bool = False

    def close(self) -> None:
        """Unregister every tool, last first; later syncs refuse. Idempotent."""
        self.closed = True
        entries, self.entries = self.entries, {}
        for _fingerprint, dispose in reversed(entries.values()):
            dispose()


@attrs.define(eq=False)
class MountedServer:
    """The tools ``mount_mcp`` registered for one connected client.

    Attributes:
        prefix: prepended to every server tool name.
    """

    _target: MountTarget = attrs.field(alias="target")
    _client: mcp.Client = attrs.field(alias="client")
    prefix: str
    _registrations: _Registrations = attrs.field(alias="registrations")
    _options: _Options = attrs.field(alias="options", factory=_Options)
    _lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    _syncs: int = attrs.field(init=False, default=0)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The registered names (with the prefix), in the server's order."""
        return tuple(self._registrations.entries)

    @property
    def sync_count(self) -> int:
        """How many times the tool list was fetched (the first mount counts)."""
        return self._syncs

    async def sync(self) -> None:
        """Fetch the server's tool list and bring the registrations in line with it: new tools
        are registered, removed ones unregistered, changed ones replaced. A tool that cannot be
        mounted (an empty name, an input schema that is not lossless JSON) is skipped with a
        warning on logger ``dsh_tools``; the others mount.

        ``mount_mcp`` calls this on entry and on every ``tools/list_changed`` event; call it
        yourself for a server that cannot send those events (an MCP connection older than
        2026-07-28). A checkpoint; cancellation leaves the previous registrations in place.

        Raises:
            RuntimeError: the ``mount_mcp`` block has ended.
            mcp.MCPError: listing the tools failed.
        """
        async with self._lock:
            tools = await _list_tools(self._client)
            registrations = self._registrations
            if registrations.closed:
                raise RuntimeError("this MCP mount has ended: its tools are unregistered")
            self._syncs += 1
            listed = {self.prefix + tool.name: tool for tool in tools}
            mounted = registrations.entries
            for name in [name for name in mounted if name not in listed]:
                mounted.pop(name)[1]()
            for name, tool in listed.items():
                fingerprint = _fingerprint(tool)
                current = mounted.get(name)
                if current is not None:
                    if current[0] == fingerprint:
                        continue
                    mounted.pop(name)[1]()
                try:
                    definition = _definition(self._client, tool, name, self._options)
                except (TypeError, ValueError) as exc:
                    logger.warning("MCP tool %r skipped: %s", tool.name, exc)
                    continue
                # recorded at once, so a later failure still leaves every registration known
                mounted[name] = (fingerprint, self._target.register(definition))
            registrations.entries = {name: mounted[name] for name in listed if name in mounted}


async def _list_tools(client: mcp.Client) -> list[mcp.types.Tool]:
    tools: list[mcp.types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


async def _follow_changes(
    mounted: MountedServer,
    client: mcp.Client,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    started = False
    try:
        async with client.listen(tools_list_changed=True) as subscription:
            task_status.started()
            started = True
            async for _event in subscription:
                try:
                    await mounted.sync()
                except mcp.MCPError:
                    raise
                except Exception as exc:
                    # e.g. a new server tool whose name is taken in the target
                    logger.warning("MCP tools/list_changed re-sync failed: %s", exc)
    except ListenNotSupportedError:
        # a connection older than 2026-07-28 cannot subscribe (refused before any I/O): the
        # user calls mounted.sync() instead
        await trio.lowlevel.checkpoint()
    except (SubscriptionLost, mcp.MCPError) as exc:
        # the connection is gone: the mounted tools stay, and their calls report it
        logger.warning("MCP tools/list_changed subscription ended: %s", exc)
        await trio.lowlevel.checkpoint()
    if not started:
        task_status.started()


def _check_mount_options(timeout: object, idle_timeout: object, trust_hints: object) -> _Options:
    for label, value in (("timeout", timeout), ("idle_timeout", idle_timeout)):
        if value is not None:
            check_seconds(f"mount_mcp() {label}", value)
    if type(trust_hints) is not bool:
        raise TypeError(f"mount_mcp() trust_hints must be a bool, not {type(trust_hints).__name__}")
    return _Options(
        timeout=cast("float | None", timeout),
        idle_timeout=cast("float | None", idle_timeout),
        trust_hints=trust_hints,
    )


def _check_mount_arguments(target: object, client: object, prefix: object) -> None:
    if not isinstance(target, ToolRegistry | ToolScope):
        raise TypeError(
            f"mount_mcp() mounts into a ToolRegistry or a ToolScope, not {type(target).__name__}"
        )
    if not isinstance(client, mcp.Client):
        raise TypeError(f"mount_mcp() needs an entered mcp.Client, not {type(client).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"mount_mcp() prefix must be a str, not {type(prefix).__name__}")


@asynccontextmanager
async def mount_mcp(
    target: ToolRegistry | ToolScope,
    client: mcp.Client,
    *,
    prefix: str = "",
    timeout: float | None = None,  # noqa: ASYNC109 (the mounted tools' own timeout, not this call's)
    idle_timeout: float | None = None,
    trust_hints: bool = False,
) -> AsyncGenerator[MountedServer]:
    """Register every tool of a connected MCP server into ``target`` for the ``async with``.

    Each tool's ``parameters`` is the server's input schema as given. Before a call, the
    arguments are validated against it with ``jsonschema`` (violations become an
    ``INVALID_ARGS`` result with path messages such as ``"servers[1].host" must be a string``),
    in a worker thread the call abandons when it is cancelled when the schema holds a
    ``pattern`` (or ``patternProperties``): one can backtrack for minutes, and the event loop
    (with every deadline) must not wait for it. A tool that cannot be mounted (an empty name, an input schema that
    is not lossless JSON) is skipped with a warning; structured content that is not lossless
    JSON is dropped with a warning, and the text content kept.
    A tool annotated ``readOnlyHint: true`` may run in parallel pools; one annotated
    ``idempotentHint: true`` is marked idempotent (retried by ``install_retry_policy``, re-run
    by ``resume_tool_calls``) only with ``trust_hints=True``. The server's progress
    notifications for a call become the call's progress (``tool/progress`` events), which
    also resets ``idle_timeout``. Cancelling the call
    (through its signal) cancels the request, and the SDK sends MCP's cancel notification.
    Text content becomes :class:`~dsh_tools.TextBlock`; other content a text rendering naming
    its type; structured content becomes the result's ``meta``; ``isError`` an error result
    (code :data:`MCP_TOOL_ERROR`); a failed request or a lost connection an error result
    (code ``MCP_CONNECTION``).

    While the block runs, the tool list follows the server's ``tools/list_changed`` events
    (2026-07-28 connections). On exit every registration is removed.

    Args:
        target: a :class:`~dsh_tools.ToolRegistry` or a :class:`~dsh_tools.ToolScope`.
        client: an entered ``mcp.Client``.
        prefix: prepended to every tool name (e.g. ``"files_"``), to keep servers apart.
        timeout: the ``timeout`` of every mounted tool (seconds; ``None``: the registry's
            ``default_timeout``).
        idle_timeout: the ``idle_timeout`` of every mounted tool: how long a call may go
            without a progress notification from the server.
        trust_hints: whether the server's ``idempotentHint`` marks a tool idempotent.

    Raises:
        TypeError: ``target`` is not a registry or a scope, ``client`` is not an
            ``mcp.Client``, ``prefix`` is not a ``str``, a timeout is not a number, or
            ``trust_hints`` is not a ``bool`` (before anything is sent).
        ValueError: a timeout is not a positive finite number.
        ValueError: a tool name is already registered in ``target``.
        mcp.MCPError: listing the tools failed.

    A checkpoint on entry and exit; cancellation while listing the tools leaves nothing
    registered. An exception raised in the ``async with`` block leaves it as itself (not
    wrapped in an exception group by the listener's nursery).
    """
    _check_mount_arguments(target, client, prefix)
    options = _check_mount_options(timeout, idle_timeout, trust_hints)
    registrations = _Registrations()
    mounted = MountedServer(
        target=target, client=client, prefix=prefix, registrations=registrations, options=options
    )
    lone: BaseException | None = None
    try:
        await mounted.sync()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(_follow_changes, mounted, client)
                try:
                    yield mounted
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # the listener's nursery would wrap whatever the block raises: a lone exception
            # (the block's own, as a rule) leaves as itself, so `except ValueError` still works
            if len(group.exceptions) != 1:
                raise
            lone = group.exceptions[0]
        if lone is not None:
            raise lone
    finally:
        registrations.close()
