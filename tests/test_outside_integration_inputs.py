"""The integrations from a user's side: a missing extra names the extra to install, and a wrong
argument to an integration's entry point is a ``TypeError`` naming it, before anything runs."""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

import mcp
import pytest
from mcp.server.mcpserver import MCPServer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dsh_tools import (
    CancelSignal,
    FrozenJsonObject,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    ToolSchema,
    define_tool,
    run_tool_calls,
)
from dsh_tools.mcp import mount_mcp
from dsh_tools.otel import install_tracing
from dsh_tools.providers import anthropic, openai

PROBE = """
import sys
import dsh_tools, dsh_tools.providers.openai, dsh_tools.providers.anthropic
loaded = {name.split(".")[0] for name in sys.modules}
print(sorted(loaded & {"mcp", "jsonschema", "opentelemetry", "openai", "anthropic", "httpx",
                       "httpx2", "pydantic"}))
"""


def test_the_core_and_the_provider_adapters_load_no_sdk_and_no_http_client() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert "[]" == done.stdout.strip()


@pytest.mark.parametrize(
    ("package", "missing", "extra"),
    [
        ("dsh_tools.mcp", "jsonschema", "mcp"),
        ("dsh_tools.mcp", "mcp", "mcp"),
        ("dsh_tools.otel", "opentelemetry", "otel"),
    ],
)
def test_importing_an_integration_without_its_extra_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, package: str, missing: str, extra: str
) -> None:
    for name in list(sys.modules):
        if name == package or name.startswith(f"{package}."):
            monkeypatch.delitem(sys.modules, name)
        if name == missing or name.startswith(f"{missing}."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # what an absent package looks like

    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module(package)

    assert f"python -m pip install 'dsh-tools[{extra}]'" in str(caught.value)
    assert missing == caught.value.name


def _bad(value: object) -> Any:
    """A wrongly typed argument, as an untyped caller would pass it."""
    return value


async def test_mount_mcp_refuses_a_target_that_is_not_a_registry_or_scope() -> None:
    async with mcp.Client(MCPServer("empty")) as client:
        with pytest.raises(TypeError) as caught:
            async with mount_mcp(_bad(None), client):
                pass
    assert "mount_mcp() mounts into a ToolRegistry or a ToolScope, not NoneType" == str(
        caught.value
    )


async def test_mount_mcp_refuses_something_that_is_not_an_mcp_client() -> None:
    with pytest.raises(TypeError) as caught:
        async with mount_mcp(ToolRegistry(), _bad("http://localhost:8000/mcp")):
            pass
    assert "mount_mcp() needs an entered mcp.Client, not str" == str(caught.value)


async def test_mount_mcp_refuses_a_prefix_that_is_not_a_str() -> None:
    async with mcp.Client(MCPServer("empty")) as client:
        with pytest.raises(TypeError) as caught:
            async with mount_mcp(ToolRegistry(), client, prefix=_bad(3)):
                pass
    assert "mount_mcp() prefix must be a str, not int" == str(caught.value)


def test_install_tracing_refuses_something_that_is_not_a_registry() -> None:
    with pytest.raises(TypeError) as caught:
        install_tracing(_bad(None))
    assert "install_tracing() takes a ToolRegistry or a ToolScope, not NoneType" == str(
        caught.value
    )


def test_install_tracing_refuses_a_tracer_provider_of_the_wrong_kind() -> None:
    registry = ToolRegistry()
    with pytest.raises(TypeError) as caught:
        install_tracing(registry, tracer_provider=_bad("console"))
    assert (
        "install_tracing() tracer_provider must be an OpenTelemetry TracerProvider, not str"
        == str(caught.value)
    )
    # and nothing was installed: a real provider still installs once
    install_tracing(registry, tracer_provider=TracerProvider())()


async def test_install_tracing_on_an_agent_scope_traces_only_that_agents_calls() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = ToolRegistry()

    async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
        return "ok"

    registry.register(define_tool(name="t", description="T.", parameters={}, execute=body))
    agent, other = object(), object()
    install_tracing(registry.scope(agent), tracer_provider=provider)

    for call_id, who in (("mine", agent), ("other", other), ("global", None)):
        await run_tool_calls(
            registry,
            [ToolCallRequest(call_id=call_id, name="t", arguments="{}")],
            signal=CancelSignal.never(),
            agent=who,
        )

    spans = exporter.get_finished_spans()
    # one call span and its batch's span, both only for that agent
    assert [("execute_tool t", "mine"), ("execute_tool_batch", None)] == [
        (span.name, (span.attributes or {}).get("gen_ai.tool.call.id")) for span in spans
    ]


@pytest.mark.parametrize(
    "make_params",
    [openai.tool_params, openai.responses_tool_params, anthropic.tool_params],
)
@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            ToolSchema(name="t", description=_bad(None), parameters={"type": "object"}),
            'schemas[0] (tool "t"): description must be a str, not NoneType',
        ),
        (
            ToolSchema(name=_bad(42), description="d", parameters={"type": "object"}),
            "schemas[0].name must be a non-empty str, not 42",
        ),
        (
            ToolSchema(name="", description="d", parameters={"type": "object"}),
            "schemas[0].name must be a non-empty str, not ''",
        ),
    ],
)
def test_provider_tool_params_refuse_a_schema_no_provider_accepts(
    make_params: Any, schema: ToolSchema, message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        make_params([schema])
    assert message == str(caught.value)


def _echo_server() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    return server


async def test_an_error_raised_inside_a_mount_block_leaves_it_as_itself() -> None:
    registry = ToolRegistry()
    seen: list[str] = []

    async def agent_step(client: mcp.Client) -> None:
        async with mount_mcp(registry, client, prefix="s_"):
            seen.extend(schema.name for schema in registry.schemas())
            raise LookupError("the agent's own failure")

    async with mcp.Client(_echo_server()) as client:
        with pytest.raises(LookupError, match="the agent's own failure"):
            await agent_step(client)
    assert ["s_echo"] == seen
    assert [] == registry.schemas()


async def test_a_second_mount_with_a_taken_name_fails_with_a_plain_value_error() -> None:
    registry = ToolRegistry()
    async with mcp.Client(_echo_server()) as client, mount_mcp(registry, client):
        with pytest.raises(ValueError, match='tool "echo" is already registered'):
            async with mount_mcp(registry, client):
                pass
        assert ["echo"] == [schema.name for schema in registry.schemas()]
