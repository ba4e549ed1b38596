"""mount_mcp against the real test server, connected in-process (the fast cases)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

import jsonschema
import mcp
import mcp_test_server
import pytest
import trio
import trio.testing

from dsh_tools import (
    AudioBlock,
    CancelController,
    CancelSignal,
    FileBlock,
    ImageBlock,
    TextBlock,
    ToolCallRequest,
    ToolErrorInfo,
    ToolExecutionInput,
    ToolExecutionMode,
    ToolExecutionResult,
    ToolRegistry,
    run_tool_calls,
)
from dsh_tools.mcp import MCP_TOOL_ERROR, mount_mcp
from support import run_calls

SERVER_TOOLS = (
    "add",
    "configure",
    "picture",
    "media",
    "odd_media",
    "broken",
    "hang",
    "die",
    "grow",
    "shrink",
    "explode",
    "steps",
    "flaky",
)


@pytest.fixture
async def client() -> AsyncGenerator[mcp.Client]:
    mcp_test_server.events.clear()
    async with mcp.Client(mcp_test_server.server) as connected:
        yield connected


def call(name: str, arguments: str, call_id: str = "c1") -> ToolCallRequest:
    return ToolCallRequest(call_id=call_id, name=name, arguments=arguments)


async def run_one(registry: ToolRegistry, name: str, arguments: str) -> tuple[str, bool]:
    batch = await run_calls(registry, call(name, arguments))
    (result,) = batch.results
    text = "".join(block.text for block in result.content if isinstance(block, TextBlock))
    return text, result.is_error


async def test_every_server_tool_is_registered_with_its_input_schema_as_given(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    async with mount_mcp(registry, client) as mounted:
        schemas = {schema.name: schema for schema in registry.schemas()}
        assert SERVER_TOOLS == mounted.tool_names
        assert {name: listed[name].input_schema for name in SERVER_TOOLS} == {
            name: schemas[name].parameters for name in SERVER_TOOLS
        }
        assert "Add two integers." == schemas["add"].description


async def test_the_prefix_goes_before_every_name_and_leaving_the_block_unregisters_them(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client, prefix="calc_"):
        assert [f"calc_{name}" for name in SERVER_TOOLS] == [s.name for s in registry.schemas()]
    assert [] == registry.schemas()


async def test_a_mounted_call_returns_the_text_and_the_structured_content_as_meta(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        batch = await run_tool_calls(
            registry, [call("add", '{"a": 2, "b": 3}')], signal=CancelSignal.never()
        )
    (result,) = batch.results
    assert (TextBlock(text="5"),) == result.content
    assert not result.is_error
    assert {"result": 5} == result.meta


async def test_read_only_tools_run_in_parallel_and_the_others_are_exclusive(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        modes = {
            name: registry.execution_mode(
                ToolExecutionInput(
                    call_id="m", name=name, arguments={}, signal=CancelSignal.never()
                )
            )
            for name in ("add", "configure")
        }
    assert {"add": ToolExecutionMode.PARALLEL, "configure": ToolExecutionMode.EXCLUSIVE} == modes


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            '{"servers": [{"host": "a", "port": 1}, {"host": 2}]}',
            'Error: invalid arguments: "servers[1].host" must be a string; '
            'missing required property "servers[1].port"',
        ),
        ('{"servers": "all"}', 'Error: invalid arguments: "servers" must be an array'),
        ("{}", 'Error: invalid arguments: missing required property "servers"'),
        ("not json", 'Error: invalid arguments: "arguments" must be an object'),
    ],
)
async def test_arguments_that_violate_the_input_schema_never_reach_the_server(
    client: mcp.Client, arguments: str, expected: str
) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        batch = await run_tool_calls(
            registry, [call("configure", arguments)], signal=CancelSignal.never()
        )
    (result,) = batch.results
    assert (TextBlock(text=expected),) == result.content
    assert ToolErrorInfo(name="ToolArgsError", code="INVALID_ARGS") == result.error


async def test_arguments_the_validator_rejects_are_the_ones_jsonschema_rejects(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    schema = next(t for t in (await client.list_tools()).tools if t.name == "configure")
    samples = [
        '{"servers": []}',
        '{"servers": [{"host": "h", "port": 1}]}',
        '{"servers": [{"host": "h", "port": "1"}]}',
        '{"servers": [{"host": null, "port": 1}]}',
        '{"servers": [[]]}',
        '{"servers": [{"host": "h", "port": 1.5}]}',
    ]
    async with mount_mcp(registry, client):
        for sample in samples:
            text, is_error = await run_one(registry, "configure", sample)
            validator = jsonschema.Draft202012Validator(schema.input_schema)
            oracle = validator.is_valid(json.loads(sample))  # pyright: ignore[reportUnknownMemberType]
            assert (not oracle) == (is_error and text.startswith("Error: invalid arguments"))


async def test_pictures_sound_and_binary_resources_become_blocks(client: mcp.Client) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        batch = await run_calls(registry, call("picture", ""), call("media", ""))
    picture, media = batch.results
    assert (
        TextBlock(text="a red pixel"),
        ImageBlock(media_type="image/png", data=mcp_test_server.PNG_PIXEL),
    ) == picture.content
    assert (
        AudioBlock(media_type="audio/wav", data=mcp_test_server.WAV),
        FileBlock(media_type="application/pdf", data=mcp_test_server.PDF, name="q3.pdf"),
        ImageBlock(media_type="image/png", data=mcp_test_server.PNG_PIXEL),
        TextBlock(text="[resource link: file:///notes.txt]"),
    ) == media.content
    assert not media.is_error


async def test_a_careless_servers_media_is_text_that_says_what_came(client: mcp.Client) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        batch = await run_calls(registry, call("odd_media", ""))
    (result,) = batch.results
    assert not result.is_error  # one odd block never fails the call
    bmp, mislabelled, alias, archive = result.content
    assert isinstance(bmp, TextBlock)
    assert bmp.text.startswith("[image content: image/bmp, not passed on: ImageBlock: unknown")
    assert isinstance(mislabelled, TextBlock)
    assert (
        "not passed on: ImageBlock: the data does not start with the signature of image/jpeg"
        in (mislabelled.text)
    )
    # a common alias of a known type is read as that type
    assert AudioBlock(media_type="audio/wav", data=mcp_test_server.WAV) == alias
    assert isinstance(archive, TextBlock)
    assert archive.text.startswith(
        "[resource content: file:///a.zip, application/zip, not passed on: FileBlock: unknown file"
    )


async def test_a_result_the_server_marks_is_error_is_an_error_result(client: mcp.Client) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        batch = await run_calls(registry, call("broken", ""))
    (result,) = batch.results
    assert (TextBlock(text="Error: Error executing tool broken: disk full"),) == result.content
    assert ToolErrorInfo(name="McpToolError", code=MCP_TOOL_ERROR) == result.error


async def test_a_cancelled_batch_cancels_the_request_and_the_server_handler_sees_it(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    controller = CancelController()
    results: list[ToolExecutionResult] = []
    async with mount_mcp(registry, client):

        async def run() -> None:
            batch = await run_tool_calls(
                registry, [call("hang", '{"label": "in-process"}')], signal=controller.signal
            )
            results.extend(batch.results)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            assert ["started in-process"] == mcp_test_server.events
            controller.cancel()
    assert ["started in-process", "cancelled in-process"] == mcp_test_server.events
    assert [ToolErrorInfo(name="AbortError", code="ABORTED")] == [r.error for r in results]


async def test_a_tools_list_changed_event_registers_and_unregisters_tools(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    try:
        async with mount_mcp(registry, client) as mounted:
            assert ("added late", False) == await run_one(registry, "grow", '{"name": "late"}')
            await trio.testing.wait_all_tasks_blocked()
            assert (*SERVER_TOOLS, "late") == mounted.tool_names
            assert ("I am late", False) == await run_one(registry, "late", "{}")
            await run_one(registry, "shrink", '{"name": "late"}')
            await trio.testing.wait_all_tasks_blocked()
            assert SERVER_TOOLS == mounted.tool_names
            assert registry.get("late") is None
    finally:
        if "late" in {t.name for t in await mcp_test_server.server.list_tools()}:
            mcp_test_server.server.remove_tool("late")


async def test_tools_mounted_into_a_scope_are_seen_only_by_that_agent(client: mcp.Client) -> None:
    registry = ToolRegistry()
    agent = object()
    async with mount_mcp(registry.scope(agent), client):
        assert registry.get("add") is None
        assert registry.get("add", agent) is not None
    assert registry.get("add", agent) is None


async def test_a_name_taken_in_the_target_fails_the_mount_and_leaves_nothing_behind(
    client: mcp.Client,
) -> None:
    registry = ToolRegistry()
    async with mount_mcp(registry, client):
        with pytest.raises(ValueError, match='tool "add" is already registered'):
            async with mount_mcp(registry, client):
                pass  # pragma: no cover
        assert list(SERVER_TOOLS) == [schema.name for schema in registry.schemas()]
