"""Shared pieces of the provider-adapter tests: a small registry, a scripted model endpoint
behind each SDK's own mock HTTP transport, a loader for the example scripts, and a round trip
through an SDK's own type."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import attrs
import httpx2
import sniffio
import trio
from pydantic import TypeAdapter

from dsh_tools import ToolRegistry, ToolRunContext, define_tool
from support import ROOT, load_module

JsonDict = dict[str, Any]
Turn = Callable[[JsonDict], JsonDict]
"""One scripted model turn: checks the request body it receives, returns the response body."""


@attrs.frozen(kw_only=True)
class ReadArgs:
    path: str
    max_chars: int | None = None


@attrs.frozen(kw_only=True)
class AddArgs:
    a: int
    b: int


@attrs.frozen(kw_only=True)
class WaitArgs:
    seconds: float


@attrs.define
class ToolLog:
    """What the tool bodies saw: (name, event, virtual time)."""

    events: list[tuple[str, str, float]] = attrs.field(factory=list[tuple[str, str, float]])
    wait_started: trio.Event = attrs.field(factory=trio.Event)


def build_registry(files: dict[str, str], log: ToolLog) -> ToolRegistry:
    """``read`` (parallel, 1 s of I/O, an optional ``max_chars``), ``add`` (exclusive), ``wait``
    (parallel, sleeps)."""

    async def read(args: ReadArgs, context: ToolRunContext) -> str:
        log.events.append((f"read {args.path}", "start", trio.current_time()))
        await trio.sleep(1)
        log.events.append((f"read {args.path}", "end", trio.current_time()))
        return files[args.path][: args.max_chars]

    async def add(args: AddArgs, context: ToolRunContext) -> str:
        log.events.append(("add", "start", trio.current_time()))
        return str(args.a + args.b)

    async def wait(args: WaitArgs, context: ToolRunContext) -> str:
        log.events.append(("wait", "start", trio.current_time()))
        log.wait_started.set()
        try:
            await trio.sleep(args.seconds)
        finally:
            log.events.append(("wait", "end", trio.current_time()))
        return "waited"

    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="read",
            description="Read a file.",
            parameters=ReadArgs,
            execute=read,
            is_concurrency_safe=lambda args: True,
        )
    )
    registry.register(
        define_tool(name="add", description="Add two integers.", parameters=AddArgs, execute=add)
    )
    registry.register(
        define_tool(
            name="wait",
            description="Wait a number of seconds.",
            parameters=WaitArgs,
            execute=wait,
            is_concurrency_safe=lambda args: True,
        )
    )
    return registry


@attrs.define(eq=False)
class ScriptedEndpoint:
    """A model API that answers each request with the next scripted turn.

    Every request body is recorded, with the async library the SDK ran it on; a request after the script ran out fails the test (the
    transport answers 500 with the reason, and the SDK raises).
    """

    turns: list[Turn]
    requests: list[JsonDict] = attrs.field(factory=list[JsonDict])
    paths: list[str] = attrs.field(factory=list[str])
    failures: list[str] = attrs.field(factory=list[str])
    async_libraries: list[str] = attrs.field(factory=list[str])

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body: JsonDict = json.loads(request.content)
        self.async_libraries.append(sniffio.current_async_library())
        self.requests.append(body)
        self.paths.append(request.url.path)
        index = len(self.requests) - 1
        if index >= len(self.turns):
            self.failures.append(f"unexpected request #{index + 1}")
            return httpx2.Response(500, json={"error": {"message": "script exhausted"}})
        try:
            return httpx2.Response(200, json=self.turns[index](body))
        except AssertionError as exc:
            self.failures.append(f"turn {index + 1}: {exc}")
            return httpx2.Response(400, json={"error": {"message": f"turn {index + 1}: {exc}"}})

    def http_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))


def chat_completion(message: JsonDict, finish_reason: str) -> JsonDict:
    """A Chat Completions response body around one assistant ``message``."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


def chat_tool_calls(*calls: tuple[str, str, str]) -> JsonDict:
    """A Chat Completions response with ``(id, name, arguments)`` tool calls."""
    return chat_completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, name, args in calls
            ],
        },
        "tool_calls",
    )


def chat_answer(text: str) -> JsonDict:
    return chat_completion({"role": "assistant", "content": text}, "stop")


def anthropic_message(content: list[JsonDict], stop_reason: str) -> JsonDict:
    """An Anthropic Messages response body."""
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def anthropic_tool_uses(*calls: tuple[str, str, JsonDict]) -> JsonDict:
    return anthropic_message(
        [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls], "tool_use"
    )


def anthropic_answer(text: str) -> JsonDict:
    return anthropic_message([{"type": "text", "text": text}], "end_turn")


def responses_output(output: list[JsonDict]) -> JsonDict:
    """A Responses API response body with ``output`` items."""
    return {
        "id": "resp_scripted",
        "object": "response",
        "created_at": 0,
        "model": "scripted",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def responses_function_call(call_id: str, name: str, arguments: str) -> JsonDict:
    """A Responses API ``function_call`` output item."""
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def responses_message(text: str) -> JsonDict:
    """A Responses API assistant ``message`` output item with one text part."""
    return {
        "type": "message",
        "id": "msg_scripted",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def load_script(relative: str) -> ModuleType:
    """Import a script of the repository (``examples/...``) as a module."""
    module_name = "provider_script_" + relative.replace("/", "_").removesuffix(".py")
    return load_module(ROOT / relative, module_name)


def round_trip(adapter_type: Any, value: object) -> object:
    """Validate ``value`` with the SDK's type and dump it back: equal only when every key is
    one the type knows, with a value of the right type (pydantic drops unknown keys)."""
    type_adapter: TypeAdapter[Any] = TypeAdapter(adapter_type)
    return type_adapter.dump_python(type_adapter.validate_python(value), mode="json")
