"""The "build your own agent" example of docs/acp.md works as
the page says: one shouted tool call, asked about first, streamed as ACP updates."""

from __future__ import annotations

import trio
import trio.testing
from acp_editor import REJECT, Editor, Message

from support import load_example


async def _prompt(editor: Editor) -> tuple[str, Message]:
    await editor.request("initialize", {"protocolVersion": 1})
    session = await editor.request("session/new", {"cwd": "/home/u/proj", "mcpServers": []})
    session_id = session["result"]["sessionId"]
    prompt = [{"type": "text", "text": "hello"}]
    return session_id, await editor.request(
        "session/prompt", {"sessionId": session_id, "prompt": prompt}
    )


async def _run(editor_setup: object = None) -> tuple[Editor, str, Message]:
    client, agent_end = trio.testing.memory_stream_pair()
    editor = Editor(client)
    if editor_setup is not None:
        editor.permission_answer = lambda _request: editor_setup
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            load_example("docs/acp.md", "Your own ACP agent on the bridge: one to").serve,
            agent_end,
            agent_end,
        )
        nursery.start_soon(editor.run)
        session_id, answer = await _prompt(editor)
        nursery.cancel_scope.cancel()
    return editor, session_id, answer


async def test_the_example_agent_asks_then_shouts_and_streams_both_updates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor, session_id, answer = await _run()
    assert {"stopReason": "end_turn"} == answer["result"]
    (call,) = editor.updates("tool_call")
    expected_call = {
        "sessionUpdate": "tool_call",
        "toolCallId": "t0-shout",
        "status": "in_progress",
        "title": "Shout 'hello'",
        "kind": "other",
    }
    assert expected_call == call
    (permission,) = [m for m in editor.received if m.get("method") == "session/request_permission"]
    assert (session_id, {"toolCallId": "t0-shout"}) == (
        permission["params"]["sessionId"],
        permission["params"]["toolCall"],
    )
    expected_result = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t0-shout",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "HELLO"}}],
    }
    assert [expected_result] == editor.updates("tool_call_update")


async def test_the_example_agent_respects_a_rejection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor, _session_id, _answer = await _run(REJECT)
    (result,) = editor.updates("tool_call_update")
    assert "failed" == result["status"]
