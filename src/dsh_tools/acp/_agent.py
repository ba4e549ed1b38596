"""``dsh-tools acp``: an ACP agent over stdio that runs the demo's tools for real.

There is no model: every ``session/prompt`` runs one scripted batch of the demo's tools
(:mod:`dsh_tools.cli.demo_tools`) through a real :class:`~dsh_tools.ToolRegistry` with the timeout
policy, a guard and a ``pre_execute`` listener that asks before every write and command, the real
scheduler, a :class:`~dsh_tools.ToolPresenter` and a :class:`~dsh_tools.UserApproval` whose
answerer is an :class:`AcpPermissionAnswerer`. The tools sleep on the real clock (a fraction of
a second to a second and a half), so an editor can watch the pool fill and drain and cancel a
prompt midway. Each event the session log records is streamed as a ``session/update`` when it
is appended.

Incoming params are read with the ``agent-client-protocol`` package's ``acp.schema`` models (the
``[acp]`` extra), so the agent accepts what that package accepts and answers ``-32602`` with
its validation errors otherwise.
"""

from __future__ import annotations

import logging
import os.path
import uuid
from collections.abc import Mapping
from typing import Final, TypeVar

import attrs
import pydantic
import trio

from acp import schema
from dsh_tools import (
    CancelController,
    MemorySessionLog,
    SessionEvent,
    ToolBatch,
    ToolCallRequest,
    ToolPresenter,
    ToolRegistry,
    UserApproval,
    run_tool_calls,
    session_turn,
)
from dsh_tools.cli.demo_tools import Workspace, build_registry, sample_workspace

from ._bridge import AcpSessionBridge
from ._jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcConnection, JsonRpcError
from ._permission import AcpPermissionAnswerer

__all__ = ["DemoAcpAgent", "PROTOCOL_VERSION", "prompt_script"]

logger: Final = logging.getLogger("dsh_tools.acp")

PROTOCOL_VERSION: Final = 1
"""The ACP protocol version this agent speaks."""

MAX_PARALLEL: Final = 3

LATENCY: Final = {"README.md": 0.4, "src/app.py": 0.8, "logs/build.log": 1.5}
"""Seconds each file takes to read (others: 0.2 s): slow enough to watch, and to cancel."""

_Model = TypeVar("_Model", bound=pydantic.BaseModel)


def prompt_script(turn: int) -> tuple[ToolCallRequest, ...]:
    """The tool calls the scripted "model" emits for prompt number ``turn`` (0-based).

    A rolling pool of reads, a search and a fetch that times out; a write that asks for
    permission (an exclusive barrier); then a read of what it wrote, a slow read (long enough
    to cancel), a call with invalid arguments, and a command (a terminal card) that asks too.
    """
    prefix = f"t{turn}-"

    def call(number: int, name: str, arguments: str) -> ToolCallRequest:
        return ToolCallRequest(call_id=f"{prefix}c{number}", name=name, arguments=arguments)

    return (
        call(1, "read_file", '{"path": "README.md"}'),
        call(2, "read_file", '{"path": "src/app.py"}'),
        call(3, "search", '{"query": "TODO"}'),
        call(4, "fetch_url", '{"url": "https://example.com/"}'),
        call(
            5,
            "write_file",
            '{"path": "NOTES.md", "content": "TODO: error handling in src/app.py\\n"}',
        ),
        call(6, "read_file", '{"path": "NOTES.md"}'),
        call(7, "read_file", '{"path": "logs/build.log"}'),
        call(8, "read_file", '{"path": 42}'),
        call(9, "run_command", '{"command": "grep TODO"}'),
    )


# --- one ACP session ----------------------------------------------------------------------


@attrs.define(eq=False)
class _StreamingLog:
    """A session log that streams each appended event to the client as it is recorded."""

    _inner: MemorySessionLog
    _session_id: str
    _bridge: AcpSessionBridge | None = None
    _connection: JsonRpcConnection | None = None

    def stream_to(self, bridge: AcpSessionBridge, connection: JsonRpcConnection) -> None:
        self._bridge = bridge
        self._connection = connection

    def append(self, event: SessionEvent, /) -> int:
        seq = self._inner.append(event)
        if self._bridge is not None and self._connection is not None:
            try:
                update = self._bridge.update_for(event)
            except Exception:
                logger.exception("no session/update for event %d: the bridge failed", seq)
            else:
                if update is not None:
                    self._connection.notify(
                        "session/update", {"sessionId": self._session_id, "update": update}
                    )
        return seq

    def events(self) -> list[SessionEvent]:
        return self._inner.events()


@attrs.define(eq=False)
class _Session:
    session_id: str
    cwd: str
    agent: object
    log: _StreamingLog
    registry: ToolRegistry
    turns: int = 0
    running: CancelController | None = None


class _SessionAgent:
    """The identity of one ACP session's agent (routes approval requests to its session)."""

    __slots__ = ("session_id",)

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"<ACP agent of session {self.session_id}>"


# --- the agent ----------------------------------------------------------------------------


class DemoAcpAgent:
    """The request handler of ``dsh-tools acp`` (a :class:`JsonRpcHandler`).

    Args:
        connection: the JSON-RPC connection to the client; updates, permission requests and
            responses go through it.
    """

    def __init__(self, connection: JsonRpcConnection) -> None:
        self._connection = connection
        self._sessions: dict[str, _Session] = {}
        self._agents: dict[object, str] = {}
        self._terminal = False

    async def handle_request(self, method: str, params: object) -> object:
        """Answer ``initialize``, ``session/new`` and ``session/prompt``.

        ``session/prompt`` runs until the scripted batch is done or cancelled; cancelling the
        caller's scope (the connection closing) cancels the batch too.
        """
        if method == "initialize":
            await trio.lowlevel.checkpoint()
            return self._initialize(_parse(schema.InitializeRequest, params))
        if method == "session/new":
            await trio.lowlevel.checkpoint()
            return self._new_session(_parse(schema.NewSessionRequest, params))
        if method == "session/prompt":
            return await self._prompt(_parse(schema.PromptRequest, params))
        await trio.lowlevel.checkpoint()
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found", method)

    def handle_notification(self, method: str, params: object) -> None:
        """Take ``session/cancel``; other notifications are ignored (and logged)."""
        if method != "session/cancel":
            logger.debug("ignored notification %s", method)
            return
        try:
            cancel = _parse(schema.CancelNotification, params)
        except JsonRpcError as exc:
            logger.warning("ignored a session/cancel with bad params: %s", exc.data)
            return
        session = self._sessions.get(cancel.session_id)
        if session is None:
            logger.warning("ignored a session/cancel for unknown session %r", cancel.session_id)
            return
        if session.running is not None:
            session.running.cancel("the client cancelled the prompt")

    def handle_close(self) -> None:
        """The client went away: cancel every running prompt (each still answers
        ``cancelled`` once its batch has drained).
        """
        for session in self._sessions.values():
            if session.running is not None:
                session.running.cancel("the client closed the connection")

    # --- initialize, session/new -----------------------------------------------------------

    def _initialize(self, request: schema.InitializeRequest) -> dict[str, object]:
        capabilities = request.client_capabilities
        meta: Mapping[str, object] = (
            (capabilities.field_meta or {}) if capabilities is not None else {}
        )
        # the core capability (the client serves terminal/*) or Zed's terminal extension key
        self._terminal = bool(
            (capabilities is not None and capabilities.terminal)
            or meta.get("terminal_output") is True
        )
        return {
            "protocolVersion": min(request.protocol_version, PROTOCOL_VERSION),
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            },
            "authMethods": [],
            "agentInfo": {
                "name": "dsh-tools",
                "title": "dsh-tools demo agent",
                "version": _version(),
            },
        }

    def _new_session(self, request: schema.NewSessionRequest) -> dict[str, object]:
        if not os.path.isabs(request.cwd):
            raise JsonRpcError(
                INVALID_PARAMS,
                "Invalid params",
                f"cwd must be an absolute path, not {request.cwd!r}",
            )
        session_id = f"sess_{uuid.uuid4().hex}"
        agent = _SessionAgent(session_id)
        log = _StreamingLog(MemorySessionLog(), session_id)
        approval = UserApproval(log)
        # "allow always" grants the tool for the rest of this session (its log)
        approval.answerers.add(
            AcpPermissionAnswerer(self._connection.request, self._agents, allow_always=True)
        )
        registry = _session_registry(approval)
        bridge = AcpSessionBridge(
            ToolPresenter(registry, agent=agent), session_cwd=request.cwd, terminal=self._terminal
        )
        log.stream_to(bridge, self._connection)
        self._sessions[session_id] = _Session(
            session_id=session_id, cwd=request.cwd, agent=agent, log=log, registry=registry
        )
        self._agents[agent] = session_id
        return {"sessionId": session_id}

    # --- session/prompt --------------------------------------------------------------------

    async def _prompt(self, request: schema.PromptRequest) -> dict[str, object]:
        session = self._sessions.get(request.session_id)
        if session is None:
            await trio.lowlevel.checkpoint()
            raise JsonRpcError(
                INVALID_PARAMS, "Invalid params", f"unknown session {request.session_id!r}"
            )
        if session.running is not None:
            await trio.lowlevel.checkpoint()
            raise JsonRpcError(
                INVALID_PARAMS,
                "Invalid params",
                f"session {request.session_id!r} is already running a prompt",
            )
        controller = CancelController()
        session.running = controller
        turn = session.turns
        session.turns += 1
        try:
            self._say(
                session,
                "No model here: running the scripted batch of the dsh-tools demo tools (reads in "
                "a rolling pool, a fetch that times out, a write and a command that ask for your "
                "permission, a slow read you can cancel).\n",
            )
            async with session_turn(session.log, turn):
                batch = await run_tool_calls(
                    session.registry,
                    prompt_script(turn),
                    signal=controller.signal,
                    agent=session.agent,
                    max_parallel_tool_calls=MAX_PARALLEL,
                    session=session.log,
                    turn=turn,
                    step=0,
                )
            self._say(session, _summary(batch))
        finally:
            session.running = None
        return {"stopReason": "cancelled" if controller.signal.cancelled else "end_turn"}

    def _say(self, session: _Session, text: str) -> None:
        self._connection.notify(
            "session/update",
            {
                "sessionId": session.session_id,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        )


def _summary(batch: ToolBatch) -> str:
    ok = sum(1 for result in batch.results if not result.is_error)
    codes = [result.error.code for result in batch.results if result.error is not None]
    failed = len(batch.results) - ok
    detail = f" ({', '.join(codes)})" if codes else ""
    return f"{len(batch.results)} tool calls: {ok} succeeded, {failed} failed{detail}.\n"


def _parse(model: type[_Model], params: object) -> _Model:
    try:
        return model.model_validate(params if params is not None else {})
    except pydantic.ValidationError as exc:
        problems = [
            f"{'.'.join(str(part) for part in error['loc']) or '$'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        ]
        raise JsonRpcError(INVALID_PARAMS, "Invalid params", problems) from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsh-tools")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


# --- the tools ----------------------------------------------------------------------------


def _session_registry(approval: UserApproval) -> ToolRegistry:
    """The demo's tools, presenters, guard and timeout policy over a fresh in-memory
    workspace, asking ``approval`` before every write (and command).
    """
    workspace = Workspace(files=dict(sample_workspace().files), latency=dict(LATENCY))
    return build_registry(workspace, approval=approval)
