"""JSON-RPC 2.0 over a pair of trio byte streams, one JSON message per line.

ACP's stdio transport: each message is one line of UTF-8 JSON. Both peers send requests, so a
:class:`JsonRpcConnection` is a server (it hands incoming requests and notifications to a
:class:`JsonRpcHandler`) and a client (:meth:`JsonRpcConnection.request` sends a request and waits
for the response with the same ``id``).

Every outgoing message goes through one writer task, in the order it was queued: a
``session/update`` notification queued before a ``session/request_permission`` request, or
before a prompt's response, reaches the peer first. Queuing is synchronous
(:meth:`JsonRpcConnection.notify`), so a synchronous session-log ``append`` can stream an
update.

Nothing the peer sends crashes the connection: a line that is not JSON gets a ``-32700`` error,
a message that is not a JSON-RPC request a ``-32600``, an unknown method ``-32601``, bad params
``-32602`` (the handler raises :class:`JsonRpcError`), and a handler that fails unexpectedly
``-32603`` (logged with its traceback). When the input ends (or the output breaks), the
connection winds its tasks down (:meth:`JsonRpcConnection.serve`) and returns.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from typing import Final, Protocol, TypeAlias, cast

import attrs
import trio

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "ConnectionClosedError",
    "JsonRpcConnection",
    "JsonRpcError",
    "JsonRpcHandler",
    "RequestId",
    "Wire",
]

logger = logging.getLogger("dsh_tools.acp")

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""A longer line is answered with a parse error and skipped (never buffered without bound)."""

Wire: TypeAlias = dict[str, object]
"""One JSON object as it goes over the wire."""

RequestId: TypeAlias = int | str | None


class JsonRpcError(Exception):
    """A JSON-RPC error object: raised by a handler to answer with it, and by
    :meth:`JsonRpcConnection.request` when the peer answered with it.
    """

    code: int
    message: str
    data: object

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> Wire:
        """The error object (``code``, ``message``, ``data`` when there is some)."""
        error: Wire = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConnectionClosedError(Exception):
    """The connection ended before the peer answered a request."""


class JsonRpcHandler(Protocol):
    """What a :class:`JsonRpcConnection` hands incoming messages to."""

    async def handle_request(self, method: str, params: object) -> object:
        """Answer one request: return the ``result`` (JSON data) or raise
        :class:`JsonRpcError`. Raise ``JsonRpcError(METHOD_NOT_FOUND, ...)`` for a method you
        do not serve. Each request runs in its own task.
        """
        ...

    def handle_notification(self, method: str, params: object) -> None:
        """Take one notification (never answered); unknown methods should be ignored."""
        ...

    def handle_close(self) -> None:
        """The input ended: make long-running requests wind down (they may still answer;
        whatever still runs after :data:`CLOSE_GRACE` seconds is cancelled).
        """
        ...


@attrs.define(eq=False)
class _Pending:
    done: trio.Event = attrs.field(factory=trio.Event)
    result: object = None
    error: BaseException | None = None


@attrs.define(eq=False)
class JsonRpcConnection:
    """One JSON-RPC 2.0 peer over newline-delimited JSON.

    Args:
        receive_stream: where the peer's messages come from (e.g. stdin).
        send_stream: where ours go (e.g. stdout).
    """

    _receive_stream: trio.abc.ReceiveStream
    _send_stream: trio.abc.SendStream
    _outgoing: trio.MemorySendChannel[bytes] = attrs.field(init=False)
    _outgoing_receive: trio.MemoryReceiveChannel[bytes] = attrs.field(init=False)
    _pending: dict[int, _Pending] = attrs.field(init=False, factory=lambda: dict[int, _Pending]())
    _next_id: int = attrs.field(init=False, default=0)
    _closed: bool = attrs.field(init=False, default=False)

    def __attrs_post_init__(self) -> None:
        # unbounded: a synchronous session-log append must be able to queue an update
        self._outgoing, self._outgoing_receive = trio.open_memory_channel[bytes](math.inf)

    async def serve(
        self,
        handler: JsonRpcHandler,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read and dispatch messages until the input ends or the output breaks.

        When the input ends, ``handler.handle_close()`` is called and running requests get
        :data:`CLOSE_GRACE` seconds to finish (then they are cancelled); their answers and
        every message queued before are written (for at most 5 more seconds). Requests still
        waiting for the peer fail with :class:`ConnectionClosedError`. Returns once every task
        the connection started has ended. Cancelling the caller's scope
        cancels everything and propagates as usual.
        """
        try:
            async with trio.open_nursery() as outer:
                writer_done = trio.Event()
                outer.start_soon(self._write_all, outer.cancel_scope, writer_done)
                async with trio.open_nursery() as handlers:
                    task_status.started()
                    await self._read_all(handler, handlers)
                    # the input ended: nobody will answer our requests; let running requests
                    # wind down and answer, briefly
                    self._closed = True
                    self._fail_pending()
                    handler.handle_close()
                    handlers.cancel_scope.deadline = trio.current_time() + CLOSE_GRACE
                self._outgoing.close()
                with trio.move_on_after(_FLUSH_TIMEOUT):
                    await writer_done.wait()
                outer.cancel_scope.cancel()
        finally:
            self._closed = True
            self._fail_pending()

    def notify(self, method: str, params: Mapping[str, object] | None = None) -> None:
        """Queue a notification (sent in queue order; never blocks, never raises once the
        connection has closed: the message is dropped).
        """
        message: Wire = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        self._queue(message)

    async def request(self, method: str, params: Mapping[str, object] | None = None) -> object:
        """Send a request and wait for its response.

        Returns:
            The response's ``result``.

        Raises:
            JsonRpcError: the peer answered with an error object.
            ConnectionClosedError: the connection ended first.

        A checkpoint on every path. Cancelling it stops waiting (a late response is
        discarded).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            await trio.lowlevel.cancel_shielded_checkpoint()
            raise ConnectionClosedError(f"connection closed before {method} was sent")
        request_id = self._next_id
        self._next_id += 1
        pending = _Pending()
        self._pending[request_id] = pending
        message: Wire = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            self._queue(message)
            await pending.done.wait()
        finally:
            del self._pending[request_id]
        if pending.error is not None:
            raise pending.error
        return pending.result

    # --- output -------------------------------------------------------------------------

    def _queue(self, message: Wire) -> None:
        line = json.dumps(message, ensure_ascii=True, allow_nan=False).encode("ascii") + b"\n"
        try:
            self._outgoing.send_nowait(line)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            logger.debug("dropped a message queued after the connection closed: %.200r", line)

    def _respond(self, request_id: RequestId, result: object) -> None:
        self._queue({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _respond_error(self, request_id: RequestId, error: JsonRpcError) -> None:
        self._queue({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})

    async def _write_all(self, everything: trio.CancelScope, done: trio.Event) -> None:
        await trio.lowlevel.checkpoint()
        try:
            async for line in self._outgoing_receive:
                await self._send_stream.send_all(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            logger.debug("the output closed: ending the connection")
            self._closed = True
            everything.cancel()
        finally:
            done.set()

    # --- input --------------------------------------------------------------------------

    async def _read_all(self, handler: JsonRpcHandler, nursery: trio.Nursery) -> None:
        await trio.lowlevel.checkpoint()
        buffer = bytearray()
        skipping = False
        while True:
            try:
                chunk = await self._receive_stream.receive_some()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                if buffer.strip() and not skipping:
                    self._dispatch_line(bytes(buffer), handler, nursery)
                return
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                if skipping:
                    skipping = False
                else:
                    buffer += chunk[start:end]
                    self._dispatch_line(bytes(buffer), handler, nursery)
                buffer.clear()
                start = end + 1
            if not skipping:
                buffer += chunk[start:]
                if len(buffer) > MAX_LINE_BYTES:
                    buffer.clear()
                    skipping = True
                    self._respond_error(
                        None,
                        JsonRpcError(
                            PARSE_ERROR, f"Parse error: message longer than {MAX_LINE_BYTES} bytes"
                        ),
                    )

    def _dispatch_line(self, line: bytes, handler: JsonRpcHandler, nursery: trio.Nursery) -> None:
        if not line.strip():
            return
        try:
            message: object = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            self._respond_error(None, JsonRpcError(PARSE_ERROR, "Parse error", _describe(exc)))
            return
        if not isinstance(message, dict):
            detail = "batch requests are not supported" if isinstance(message, list) else None
            self._respond_error(None, JsonRpcError(INVALID_REQUEST, "Invalid Request", detail))
            return
        self._dispatch(_as_wire(message), handler, nursery)  # pyright: ignore[reportUnknownArgumentType]

    def _dispatch(self, message: Wire, handler: JsonRpcHandler, nursery: trio.Nursery) -> None:
        has_id = "id" in message
        raw_id = message.get("id")
        request_id: RequestId = (
            raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
        )
        if message.get("jsonrpc") != "2.0":
            self._invalid(request_id, 'jsonrpc must be "2.0"')
            return
        if has_id and raw_id is not None and request_id is None:
            self._invalid(None, "id must be a string, an integer or null")
            return
        method = message.get("method")
        if method is None and has_id and ("result" in message or "error" in message):
            self._settle(message, request_id)
            return
        if not isinstance(method, str):
            self._invalid(request_id, "method must be a string")
            return
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            self._invalid(request_id, "params must be an object or an array")
            return
        params = cast(object, params)
        if not has_id:
            try:
                handler.handle_notification(method, params)
            except Exception:
                logger.exception("the handler of notification %s failed", method)
            return
        nursery.start_soon(self._answer, handler, request_id, method, params)

    def _invalid(self, request_id: RequestId, detail: str) -> None:
        self._respond_error(request_id, JsonRpcError(INVALID_REQUEST, "Invalid Request", detail))

    async def _answer(
        self, handler: JsonRpcHandler, request_id: RequestId, method: str, params: object
    ) -> None:
        await trio.lowlevel.checkpoint()
        try:
            result = await handler.handle_request(method, params)
        except JsonRpcError as exc:
            self._respond_error(request_id, exc)
        except Exception as exc:
            logger.exception("the handler of request %s failed", method)
            self._respond_error(
                request_id, JsonRpcError(INTERNAL_ERROR, "Internal error", _describe(exc))
            )
        else:
            self._respond(request_id, result)

    def _settle(self, message: Wire, request_id: RequestId) -> None:
        pending = self._pending.get(request_id) if isinstance(request_id, int) else None
        if pending is None or pending.done.is_set():
            logger.warning("ignored a response to no pending request: id %r", request_id)
            return
        if "error" in message:
            error = message["error"]
            code, text, data = INTERNAL_ERROR, "malformed error object", error
            if isinstance(error, dict):
                fields = _as_wire(error)  # pyright: ignore[reportUnknownArgumentType]
                raw_code, raw_text = fields.get("code"), fields.get("message")
                if isinstance(raw_code, int) and not isinstance(raw_code, bool):
                    code = raw_code
                if isinstance(raw_text, str):
                    text = raw_text
                data = fields.get("data")
            pending.error = JsonRpcError(code, text, data)
        else:
            pending.result = message["result"]
        pending.done.set()

    def _fail_pending(self) -> None:
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = ConnectionClosedError("the connection closed before the answer")
                pending.done.set()


CLOSE_GRACE: Final = 5.0
"""Seconds running requests get to wind down once the input has ended."""

_FLUSH_TIMEOUT: Final = 5.0
"""How long a closing connection waits for its queued messages to be written."""


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _as_wire(value: dict[object, object]) -> Wire:
    return {str(key): item for key, item in value.items()}


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
