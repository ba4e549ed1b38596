"""mount_mcp against a low-level MCP server that sends what MCPServer never would: an invalid
input schema, every kind of non-text content, a changing tool list without events."""

from __future__ import annotations

import mcp
import mcp.types as types
import pytest
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from dsh_tools import CancelSignal, TextBlock, ToolCallRequest, ToolErrorInfo, ToolRegistry
from dsh_tools import run_tool_calls as run
from dsh_tools.mcp import mount_mcp

listed: list[types.Tool] = []


async def list_tools(
    _ctx: ServerRequestContext[object], _params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=list(listed))


async def call_tool(
    _ctx: ServerRequestContext[object], params: types.CallToolRequestParams
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[
            types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
            types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///b.txt", text="hello"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///c.bin", blob="AAAA", mime_type="application/octet-stream"
                ),
            ),
            types.TextContent(type="text", text=f"called {params.name}"),
        ]
    )


server = Server("edges", on_list_tools=list_tools, on_call_tool=call_tool)


def tool(name: str, schema: dict[str, object] | None = None) -> types.Tool:
    return types.Tool(name=name, input_schema=schema or {"type": "object"})


async def test_content_no_block_can_carry_becomes_a_text_block_naming_it() -> None:
    listed[:] = [tool("media")]
    registry = ToolRegistry()
    async with mcp.Client(server) as client, mount_mcp(registry, client):
        batch = await run(
            registry,
            [ToolCallRequest(call_id="1", name="media", arguments="")],
            signal=CancelSignal.never(),
        )
    sound, link, text, blob, called = batch.results[0].content
    # three zero bytes are no WAV file: named, not passed on
    assert (
        TextBlock(
            text="[audio content: audio/wav, not passed on: AudioBlock: the data does not start "
            "with the signature of audio/wav (it starts b'\\x00\\x00\\x00')]"
        )
        == sound
    )
    assert TextBlock(text="[resource link: file:///a.txt]") == link
    assert TextBlock(text="[embedded resource: file:///b.txt]\nhello") == text
    assert isinstance(blob, TextBlock)
    assert blob.text.startswith(
        "[resource content: file:///c.bin, application/octet-stream, not passed on: "
        "FileBlock: unknown file media type 'application/octet-stream'"
    )
    assert TextBlock(text="called media") == called


async def test_a_tool_with_an_invalid_input_schema_mounts_and_its_calls_say_why() -> None:
    listed[:] = [tool("odd", {"type": "object", "properties": {"a": {"type": "strnig"}}})]
    registry = ToolRegistry()
    async with mcp.Client(server) as client, mount_mcp(registry, client):
        batch = await run(
            registry,
            [ToolCallRequest(call_id="1", name="odd", arguments='{"a": "x"}')],
            signal=CancelSignal.never(),
        )
    (result,) = batch.results
    assert ToolErrorInfo(name="HarnessError", code="UNSUPPORTED_SCHEMA") == result.error
    assert (
        TextBlock(
            text="Error: tool \"odd\" has an invalid input schema: 'strnig' is not valid under "
            "any of the given schemas"
        ),
    ) == result.content


async def test_sync_follows_a_server_that_cannot_send_change_events() -> None:
    listed[:] = [tool("one"), tool("two")]
    registry = ToolRegistry()
    changes: list[None] = []
    registry.hooks.change.add(lambda: changes.append(None))
    async with mcp.Client(server) as client, mount_mcp(registry, client) as mounted:
        listed[:] = [tool("two"), tool("three", {"type": "object", "properties": {}})]
        await mounted.sync()
        assert ("two", "three") == mounted.tool_names
        assert ["two", "three"] == [schema.name for schema in registry.schemas()]
        listed[:] = [tool("two", {"type": "object", "required": ["x"]}), tool("three")]
        await mounted.sync()
        assert {"type": "object", "required": ["x"]} == registry.schemas()[0].parameters
        assert 3 == mounted.sync_count
    # 2 mounted, 1 removed + 1 added, 2 replaced (remove + add each), 2 unmounted
    assert 2 + 2 + 4 + 2 == len(changes)
    assert [] == registry.schemas()


async def test_enum_const_type_lists_and_other_keywords_are_worded_with_their_path() -> None:
    listed[:] = [
        tool(
            "strict",
            {
                "type": "object",
                "properties": {
                    "mode": {"enum": ["a", "b"]},
                    "v": {"const": 1},
                    "n": {"type": ["integer", "null"], "minimum": 0},
                },
                "additionalProperties": False,
            },
        )
    ]
    registry = ToolRegistry()
    async with mcp.Client(server) as client, mount_mcp(registry, client):
        batch = await run(
            registry,
            [
                ToolCallRequest(
                    call_id="1",
                    name="strict",
                    arguments='{"mode": "c", "v": 2, "n": -1, "extra": true}',
                ),
                ToolCallRequest(call_id="2", name="strict", arguments='{"n": "x"}'),
            ],
            signal=CancelSignal.never(),
        )
    assert [
        (
            TextBlock(
                text='Error: invalid arguments: "mode" must be one of ["a","b"]; '
                '"v" must be 1; "n" -1 is less than the minimum of 0; '
                "\"arguments\" Additional properties are not allowed ('extra' was unexpected)"
            ),
        ),
        (TextBlock(text='Error: invalid arguments: "n" must be an integer or null'),),
    ] == [result.content for result in batch.results]


async def test_a_legacy_connection_mounts_and_follows_changes_through_sync() -> None:
    listed[:] = [tool("one")]
    registry = ToolRegistry()
    async with (
        mcp.Client(server, mode="legacy") as client,
        mount_mcp(registry, client) as mounted,
    ):
        assert "2026-07-28" != client.protocol_version
        listed[:] = [tool("one"), tool("two")]
        await mounted.sync()
        assert ("one", "two") == mounted.tool_names


async def test_sync_after_the_block_ended_refuses_instead_of_registering_again() -> None:
    listed[:] = [tool("one")]
    registry = ToolRegistry()
    async with mcp.Client(server) as client:
        async with mount_mcp(registry, client) as mounted:
            pass
        with pytest.raises(RuntimeError, match="this MCP mount has ended"):
            await mounted.sync()
    assert [] == registry.schemas()
