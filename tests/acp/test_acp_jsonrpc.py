"""JsonRpcConnection: JSON-RPC 2.0, one message per line, over trio streams (virtual clock)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing

import dsh_tools.acp._jsonrpc as jsonrpc_module
from dsh_tools.acp import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ConnectionClosedError,
    JsonRpcConnection,
    JsonRpcError,
)


class Handler:
    """Answers ``echo`` and ``sleep``; ``bad`` has bad params, ``boom`` fails unexpectedly."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, object]] = []
        self.sleepers_cancelled = 0
        self.closed_at: float | None = None

    async def handle_request(self, method: str, params: object) -> object:
        await trio.lowlevel.checkpoint()
        if method == "echo":
            return params
        if method == "sleep":
            try:
                await trio.sleep_forever()
            finally:
                self.sleepers_cancelled += 1
        if method == "bad":
            raise JsonRpcError(INVALID_PARAMS, "Invalid params", ["x: required"])
        if method == "boom":
            raise RuntimeError("kaput")
        raise JsonRpcError(METHOD_NOT_FOUND, "Method not found", method)

    def handle_notification(self, method: str, params: object) -> None:
        if method == "explode":
            raise RuntimeError("notification handler failed")
        self.notifications.append((method, params))

    def handle_close(self) -> None:
        self.closed_at = trio.current_time()


class Peer:
    """The client end: writes raw lines, reads whole JSON messages."""

    def __init__(self, stream: trio.StapledStream[Any, Any]) -> None:
        self.stream = stream
        self.buffer = b""

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send(self, message: object) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some()
            assert chunk, "the connection closed its output"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        assert isinstance(message, dict)
        return message


async def _open(
    nursery: trio.Nursery, handler: Handler | None = None
) -> tuple[Peer, JsonRpcConnection, trio.Event]:
    client, agent = trio.testing.memory_stream_pair()
    connection = JsonRpcConnection(agent, agent)
    done = trio.Event()

    async def serve() -> None:
        await connection.serve(handler or Handler())
        done.set()

    nursery.start_soon(serve)
    await trio.testing.wait_all_tasks_blocked()
    return Peer(client), connection, done


def _error(request_id: object, code: int, message: str, data: object = None) -> dict[str, object]:
    error: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def test_a_request_gets_its_result_under_its_own_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send({"jsonrpc": "2.0", "id": "a-1", "method": "echo", "params": {"x": [1]}})
        assert {"jsonrpc": "2.0", "id": "a-1", "result": {"x": [1]}} == await peer.receive()
        nursery.cancel_scope.cancel()


async def test_a_line_that_is_not_json_is_a_parse_error_and_the_connection_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send_raw(b"{not json\n")
        answer = await peer.receive()
        assert {"code": PARSE_ERROR, "message": "Parse error"} == {
            key: value for key, value in answer["error"].items() if key != "data"
        }
        assert answer["id"] is None
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": [1]})
        assert {"jsonrpc": "2.0", "id": 2, "result": [1]} == await peer.receive()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "line",
    [b'{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": NaN}', b"\xff\xfe{}"],
    ids=["nan-is-not-json", "not-utf8"],
)
async def test_json_extensions_and_bytes_that_are_not_utf8_are_parse_errors(
    autojump_clock: trio.testing.MockClock, line: bytes
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send_raw(line + b"\n")
        answer = await peer.receive()
        assert PARSE_ERROR == answer["error"]["code"]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            [{"jsonrpc": "2.0", "id": 1, "method": "echo"}],
            (None, "batch requests are not supported"),
        ),
        ("hello", (None, None)),
        ({"id": 7, "method": "echo"}, (7, 'jsonrpc must be "2.0"')),
        (
            {"jsonrpc": "2.0", "id": True, "method": "echo"},
            (None, "id must be a string, an integer or null"),
        ),
        ({"jsonrpc": "2.0", "id": 8, "method": 5}, (8, "method must be a string")),
        (
            {"jsonrpc": "2.0", "id": 9, "method": "echo", "params": 3},
            (9, "params must be an object or an array"),
        ),
    ],
    ids=["batch", "not-an-object", "no-jsonrpc", "bool-id", "method-not-a-string", "scalar-params"],
)
async def test_messages_that_are_not_requests_get_invalid_request_errors(
    autojump_clock: trio.testing.MockClock, message: object, expected: tuple[object, str | None]
) -> None:
    request_id, detail = expected
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send(message)
        assert (
            _error(request_id, INVALID_REQUEST, "Invalid Request", detail) == await peer.receive()
        )
        nursery.cancel_scope.cancel()


async def test_an_unknown_method_is_method_not_found(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "nope"})
        assert _error(1, METHOD_NOT_FOUND, "Method not found", "nope") == await peer.receive()
        nursery.cancel_scope.cancel()


async def test_a_handler_rejecting_params_answers_with_its_error_object(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "bad", "params": {}})
        expected = _error(1, INVALID_PARAMS, "Invalid params", ["x: required"])
        assert expected == await peer.receive()
        nursery.cancel_scope.cancel()


async def test_a_handler_that_fails_unexpectedly_is_an_internal_error_and_is_logged(
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "boom"})
        assert _error(1, INTERNAL_ERROR, "Internal error", "kaput") == await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {}})
        assert {"jsonrpc": "2.0", "id": 2, "result": {}} == await peer.receive()
        nursery.cancel_scope.cancel()
    assert ["the handler of request boom failed"] == [r.getMessage() for r in caplog.records]


async def test_notifications_are_handed_over_and_never_answered_even_when_the_handler_fails(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handler = Handler()
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery, handler)
        await peer.send({"jsonrpc": "2.0", "method": "explode"})
        await peer.send({"jsonrpc": "2.0", "method": "note", "params": {"n": 1}})
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "echo", "params": []})
        # the first thing back answers the request: nothing answered the notifications
        assert {"jsonrpc": "2.0", "id": 3, "result": []} == await peer.receive()
        nursery.cancel_scope.cancel()
    assert [("note", {"n": 1})] == handler.notifications


async def test_messages_split_across_chunks_or_sharing_one_are_all_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        first = b'{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [1]}\n'
        second = b'{"jsonrpc": "2.0", "id": 2, "method": "echo", "params": [2]}\n'
        await peer.send_raw(first[:10])
        await trio.testing.wait_all_tasks_blocked()
        await peer.send_raw(first[10:] + b"\n  \n" + second)
        answers = [await peer.receive(), await peer.receive()]
        assert [1, 2] == sorted(answer["id"] for answer in answers)
        nursery.cancel_scope.cancel()


async def test_a_line_longer_than_the_limit_is_a_parse_error_and_skipped(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jsonrpc_module, "MAX_LINE_BYTES", 64)
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send_raw(
            b'{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": "' + b"x" * 100
        )
        answer = await peer.receive()
        assert PARSE_ERROR == answer["error"]["code"]
        await peer.send_raw(b'xxxx"}\n{"jsonrpc": "2.0", "id": 2, "method": "echo"}\n')
        assert {"jsonrpc": "2.0", "id": 2, "result": None} == await peer.receive()
        nursery.cancel_scope.cancel()


# --- requests to the peer -----------------------------------------------------------------


async def test_requests_to_the_peer_are_correlated_by_id_whatever_the_answer_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    results: dict[str, object] = {}
    async with trio.open_nursery() as nursery:
        peer, connection, _done = await _open(nursery)

        async def ask(name: str) -> None:
            results[name] = await connection.request("ask", {"who": name})

        nursery.start_soon(ask, "first")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "second")
        one, two = await peer.receive(), await peer.receive()
        assert {
            "jsonrpc": "2.0",
            "id": one["id"],
            "method": "ask",
            "params": {"who": "first"},
        } == one
        assert {"who": "second"} == two["params"]
        await peer.send({"jsonrpc": "2.0", "id": two["id"], "result": "to second"})
        await peer.send({"jsonrpc": "2.0", "id": one["id"], "result": "to first"})
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert {"first": "to first", "second": "to second"} == results


async def test_an_error_answer_raises_the_peers_error_object(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, connection, _done = await _open(nursery)

        async def answer() -> None:
            request = await peer.receive()
            await peer.send(_error(request["id"], -32000, "denied", {"why": "no"}))

        nursery.start_soon(answer)
        with pytest.raises(JsonRpcError) as caught:
            await connection.request("ask")
        assert (-32000, "denied", {"why": "no"}) == (
            caught.value.code,
            caught.value.message,
            caught.value.data,
        )
        nursery.cancel_scope.cancel()


async def test_an_answer_to_no_pending_request_is_ignored_and_logged(
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, _done = await _open(nursery)
        await peer.send({"jsonrpc": "2.0", "id": 99, "result": "late"})
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}})
        assert {"jsonrpc": "2.0", "id": 1, "result": {}} == await peer.receive()
        nursery.cancel_scope.cancel()
    assert ["ignored a response to no pending request: id 99"] == [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    ]


async def test_a_cancelled_request_forgets_its_id_and_a_late_answer_is_ignored(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, connection, _done = await _open(nursery)
        with trio.move_on_after(1):
            await connection.request("ask")
        request = await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": "late"})
        await peer.send({"jsonrpc": "2.0", "id": "x", "method": "echo", "params": [0]})
        assert {"jsonrpc": "2.0", "id": "x", "result": [0]} == await peer.receive()
        nursery.cancel_scope.cancel()


# --- the end of the connection ------------------------------------------------------------


async def test_the_end_of_input_fails_pending_requests_tells_the_handler_and_gives_running_ones_a_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handler = Handler()
    outcome: list[str] = []
    async with trio.open_nursery() as nursery:
        peer, connection, done = await _open(nursery, handler)

        async def ask() -> None:
            try:
                await connection.request("ask")
            except ConnectionClosedError:
                outcome.append(f"closed at {trio.current_time():g}")

        nursery.start_soon(ask)
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "sleep"})
        await trio.testing.wait_all_tasks_blocked()
        closed = trio.current_time()
        await peer.stream.send_stream.aclose()
        await done.wait()
        ended = trio.current_time()
    assert [f"closed at {closed:g}"] == outcome
    assert closed == handler.closed_at
    assert 1 == handler.sleepers_cancelled
    assert jsonrpc_module.CLOSE_GRACE == ended - closed


async def test_a_request_read_just_before_the_input_ends_is_still_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, _connection, done = await _open(nursery)
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 5, "method": "echo", "params": [5]}')
        await peer.stream.send_stream.aclose()
        answer = await peer.receive()
        await done.wait()
    assert {"jsonrpc": "2.0", "id": 5, "result": [5]} == answer


async def test_messages_queued_before_the_input_ends_are_written_before_serve_returns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # lockstep: the writer cannot write until the peer reads, so both wait in the queue
    client, agent = trio.testing.lockstep_stream_pair()
    connection = JsonRpcConnection(agent, agent)
    peer = Peer(client)
    done = trio.Event()
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            await connection.serve(Handler())
            done.set()

        nursery.start_soon(serve)
        connection.notify("session/update", {"n": 1})
        connection.notify("session/update", {"n": 2})
        await client.send_stream.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        received = [await peer.receive(), await peer.receive()]
        await done.wait()
    expected = [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"n": 1}},
        {"jsonrpc": "2.0", "method": "session/update", "params": {"n": 2}},
    ]
    assert expected == received


async def test_a_request_after_the_connection_closed_fails_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        peer, connection, done = await _open(nursery)
        await peer.stream.send_stream.aclose()
        await done.wait()
    with pytest.raises(ConnectionClosedError):
        await connection.request("ask")


async def test_a_broken_output_ends_the_connection(autojump_clock: trio.testing.MockClock) -> None:
    handler = Handler()
    async with trio.open_nursery() as nursery:
        peer, _connection, done = await _open(nursery, handler)
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "sleep"})
        await peer.stream.receive_stream.aclose()
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "echo"})
        await done.wait()
    assert 1 == handler.sleepers_cancelled
