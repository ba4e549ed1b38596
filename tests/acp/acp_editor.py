"""A scripted editor for in-process tests: the client end of an ACP connection."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import trio
from acp_wire import assert_valid_agent_message

Message = dict[str, Any]
CWD = "/home/u/proj"
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "reject-once"}}


class Editor:
    """The client end: sends requests, answers permission requests, keeps every message."""

    def __init__(self, stream: trio.abc.HalfCloseableStream) -> None:
        self.stream = stream
        self.received: list[Message] = []
        self.methods: dict[object, str] = {}
        self.permission_answer: Callable[[Message], object] = lambda _request: ALLOW
        self._next_id = 100
        self._changed = trio.Event()
        self._sending = trio.Lock()
        self._buffer = bytearray()

    async def _line(self) -> bytes | None:
        while b"\n" not in self._buffer:
            chunk = await self.stream.receive_some()
            if not chunk:
                return None
            self._buffer += chunk
        line, _newline, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        return bytes(line)

    async def run(self) -> None:
        while True:
            line = await self._line()
            if line is None:
                return
            message: Message = json.loads(line)
            assert_valid_agent_message(message, self.methods)
            self.received.append(message)
            self._changed.set()
            self._changed = trio.Event()
            if message.get("method") == "session/request_permission":
                answer = self.permission_answer(message)
                if answer is not None:  # None: never answered
                    await self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})

    async def send(self, message: object) -> None:
        async with self._sending:
            await self.stream.send_all(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: object) -> Message:
        request_id = self._next_id
        self._next_id += 1
        self.methods[request_id] = method
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await self.wait_for(lambda m: m.get("id") == request_id and "method" not in m)

    async def wait_for(self, predicate: Callable[[Message], bool]) -> Message:
        seen = 0
        while True:
            for message in self.received[seen:]:
                if predicate(message):
                    return message
            seen = len(self.received)
            await self._changed.wait()

    async def prompt(self, session_id: str, prompt: list[object] | None = None) -> Message:
        """Send a ``session/prompt`` (empty unless ``prompt`` is given); its answer."""
        params = {"sessionId": session_id, "prompt": [] if prompt is None else prompt}
        return await self.request("session/prompt", params)

    async def new_session(self, terminal: bool = False) -> str:
        await self.request(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {"terminal": terminal}},
        )
        response = await self.request("session/new", {"cwd": CWD, "mcpServers": []})
        return response["result"]["sessionId"]

    def updates(self, kind: str) -> list[Message]:
        return [
            m["params"]["update"]
            for m in self.received
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == kind
        ]

    def final_updates(self) -> dict[str, Message]:
        return {u["toolCallId"]: u for u in self.updates("tool_call_update")}


@attrs.frozen
class Served:
    """An agent served on one end of an in-memory stream, and the editor on the other (the
    ``served`` fixture of ``conftest.py``)."""

    editor: Editor
    """Reading every message the agent sends, from the start."""
    done: trio.Event
    """Set when the agent's ``serve`` returns (its input ended)."""
