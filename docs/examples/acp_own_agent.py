"""Your own ACP agent on the bridge: one tool, a session per ``session/new``, updates as they
are logged, the user's permission before every call. Run it with ``python acp_own_agent.py``
and point an editor at that command."""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any, cast

import attrs
import trio

from dsh_tools import (
    Ask,
    CancelController,
    GenericCallView,
    MemorySessionLog,
    PreExecuteNext,
    PreToolDecision,
    SessionEvent,
    ToolCallKind,
    ToolCallRequest,
    ToolExecution,
    ToolPresenter,
    ToolRegistry,
    ToolRunContext,
    UserApproval,
    define_tool,
    run_tool_calls,
    session_turn,
)
from dsh_tools.acp import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    AcpPermissionAnswerer,
    AcpSessionBridge,
    JsonRpcConnection,
    JsonRpcError,
)


@attrs.frozen
class ShoutArgs:
    text: str = attrs.field(metadata={"description": "what to shout"})


async def shout(args: ShoutArgs, context: ToolRunContext) -> str:
    await trio.sleep(0.5)
    return args.text.upper()


def present_shout(args: ShoutArgs) -> GenericCallView:
    return GenericCallView(title=f"Shout {args.text!r}", kind=ToolCallKind.OTHER)


async def ask_first(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
    await trio.lowlevel.checkpoint()
    return Ask(reason="shouting is loud")


class StreamingLog:
    """A session log that sends every event the bridge maps as a ``session/update``."""

    def __init__(self, session_id: str, connection: JsonRpcConnection) -> None:
        self.inner = MemorySessionLog()
        self.session_id = session_id
        self.connection = connection
        self.bridge: AcpSessionBridge | None = None

    def append(self, event: SessionEvent, /) -> int:
        seq = self.inner.append(event)
        update = self.bridge.update_for(event) if self.bridge is not None else None
        if update is not None:
            params = {"sessionId": self.session_id, "update": update}
            self.connection.notify("session/update", params)
        return seq

    def events(self) -> list[SessionEvent]:
        return self.inner.events()


class Session:
    def __init__(
        self, session_id: str, cwd: str, connection: JsonRpcConnection, agents: dict[object, str]
    ) -> None:
        self.log = StreamingLog(session_id, connection)
        approval = UserApproval(self.log)
        approval.answerers.add(AcpPermissionAnswerer(connection.request, agents))
        self.registry = ToolRegistry(approval=approval)
        self.registry.register(
            define_tool(
                name="shout",
                description="Say it louder.",
                parameters=ShoutArgs,
                execute=shout,
                present_call=present_shout,
            )
        )
        self.registry.hooks.pre_execute.add(ask_first)
        self.log.bridge = AcpSessionBridge(
            ToolPresenter(self.registry, agent=self), session_cwd=cwd
        )
        self.turns = 0
        self.running: CancelController | None = None


class MyAgent:
    def __init__(self, connection: JsonRpcConnection) -> None:
        self.connection = connection
        self.sessions: dict[str, Session] = {}
        self.agents: dict[object, str] = {}  # the answerer's view: agent -> ACP session id

    async def handle_request(self, method: str, params: object) -> object:
        await trio.lowlevel.checkpoint()
        if not isinstance(params, dict):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params", "params must be an object")
        params = cast("dict[str, Any]", params)
        if method == "initialize":
            return {"protocolVersion": 1, "agentCapabilities": {"loadSession": False}}
        if method == "session/new":
            session_id = f"sess_{uuid.uuid4().hex}"
            session = Session(session_id, str(params["cwd"]), self.connection, self.agents)
            self.sessions[session_id] = session
            self.agents[session] = session_id
            return {"sessionId": session_id}
        if method == "session/prompt":
            session = self.sessions[str(params["sessionId"])]
            text = "".join(block.get("text", "") for block in params["prompt"])
            return await self.prompt(session, text)
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found", method)

    async def prompt(self, session: Session, text: str) -> object:
        # a real agent asks its model here; this one calls its tool with the prompt's text
        controller = session.running = CancelController()
        turn, session.turns = session.turns, session.turns + 1
        arguments = json.dumps({"text": text})
        call = ToolCallRequest(call_id=f"t{turn}-shout", name="shout", arguments=arguments)
        try:
            async with session_turn(session.log, turn):
                await run_tool_calls(
                    session.registry,
                    [call],
                    signal=controller.signal,
                    agent=session,
                    session=session.log,
                    turn=turn,
                )
        finally:
            session.running = None
        return {"stopReason": "cancelled" if controller.signal.cancelled else "end_turn"}

    def handle_notification(self, method: str, params: object) -> None:
        if method == "session/cancel" and isinstance(params, dict):
            session_id = cast("dict[str, Any]", params).get("sessionId")
            session = self.sessions.get(str(session_id))
            if session is not None and session.running is not None:
                session.running.cancel("cancelled by the user")

    def handle_close(self) -> None:
        for session in self.sessions.values():
            if session.running is not None:
                session.running.cancel("the editor went away")


async def serve(receive: trio.abc.ReceiveStream, send: trio.abc.SendStream) -> None:
    connection = JsonRpcConnection(receive, send)
    await connection.serve(MyAgent(connection))


async def main() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    async with stdin, stdout:
        await serve(stdin, stdout)


if __name__ == "__main__":
    trio.run(main)
