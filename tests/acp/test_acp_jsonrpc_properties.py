"""Property: however the input bytes are cut into chunks, the connection answers the same
requests, once each, with their own ids (each example on its own virtual clock)."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools.acp import JsonRpcConnection, JsonRpcError


class Echo:
    async def handle_request(self, method: str, params: object) -> object:
        await trio.lowlevel.checkpoint()
        if method == "fail":
            raise JsonRpcError(-32602, "Invalid params")
        return params

    def handle_notification(self, method: str, params: object) -> None:
        pass

    def handle_close(self) -> None:
        pass


_messages = st.lists(
    st.tuples(
        st.sampled_from(["echo", "fail", "note"]),
        st.text(max_size=20),  # any text, non-ASCII and lone surrogates included
    ),
    max_size=8,
)


def _answers(data: bytes, cuts: list[int]) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        client, agent = trio.testing.memory_stream_pair()
        connection = JsonRpcConnection(agent, agent)
        received = b""
        async with trio.open_nursery() as nursery:

            async def serve_then_close() -> None:
                await connection.serve(Echo())
                await agent.send_stream.aclose()  # the peer now reads to the end

            nursery.start_soon(serve_then_close)
            start = 0
            for cut in [*sorted(cuts), len(data)]:
                await client.send_all(data[start:cut])
                await trio.testing.wait_all_tasks_blocked()
                start = cut
            await client.send_stream.aclose()
            while chunk := await client.receive_some():
                received += chunk
        return [json.loads(line) for line in received.splitlines()]

    return trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=60, deadline=None)
@given(_messages, st.lists(st.integers(min_value=0), max_size=6))
def test_any_chunking_of_the_input_gives_one_answer_per_request_with_its_id(
    messages: list[tuple[str, str]], raw_cuts: list[int]
) -> None:
    lines: list[bytes] = []
    expected: dict[int, dict[str, Any]] = {}
    for number, (method, text) in enumerate(messages):
        if method == "note":
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": [text]}
        else:
            message = {"jsonrpc": "2.0", "id": number, "method": method, "params": [text]}
            expected[number] = (
                {"jsonrpc": "2.0", "id": number, "result": [text]}
                if method == "echo"
                else {
                    "jsonrpc": "2.0",
                    "id": number,
                    "error": {"code": -32602, "message": "Invalid params"},
                }
            )
        lines.append(json.dumps(message).encode("ascii") + b"\n")
    data = b"".join(lines)
    cuts = [cut % (len(data) + 1) for cut in raw_cuts]
    answers = _answers(data, cuts)
    assert expected == {answer["id"]: answer for answer in answers}
    assert len(expected) == len(answers)
