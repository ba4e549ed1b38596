"""The ``dsh-tools acp`` agent in process, over in-memory streams, on trio's virtual clock.

A small scripted editor drives it; every message the agent sends is checked against the
``agent-client-protocol`` package's models (``acp_wire``). The subprocess test with the
package's own client is ``test_acp_e2e.py``.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing
from acp_editor import CWD, REJECT, Editor, Message, Served

from dsh_tools.acp import INVALID_PARAMS, METHOD_NOT_FOUND
from dsh_tools.acp._agent import prompt_script


def _prompt_in_background(
    nursery: trio.Nursery, editor: Editor, session_id: str
) -> tuple[list[Message], trio.Event]:
    """Send an empty ``session/prompt`` from a task of ``nursery``; its reply lands in the list,
    and the event is set then."""
    replies: list[Message] = []
    answered = trio.Event()

    async def prompt() -> None:
        replies.append(await editor.prompt(session_id))
        answered.set()

    nursery.start_soon(prompt)
    return replies, answered


def _text(update: Message) -> str:
    return "".join(item["content"]["text"] for item in update.get("content", ()))


async def test_initialize_advertises_protocol_1_without_session_loading(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    response = await editor.request("initialize", {"protocolVersion": 1})
    expected: dict[str, object] = {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": False,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
        },
        "authMethods": [],
        "agentInfo": {
            "name": "dsh-tools",
            "title": "dsh-tools demo agent",
            "version": response["result"]["agentInfo"]["version"],
        },
    }
    assert expected == response["result"]


async def test_initialize_accepts_a_legacy_date_protocol_version_as_the_package_does(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    response = await editor.request("initialize", {"protocolVersion": "2024-11-05"})
    assert 1 == response["result"]["protocolVersion"]


@pytest.mark.parametrize(
    ("method", "params", "detail"),
    [
        (
            "session/new",
            {"cwd": "relative/dir", "mcpServers": []},
            "cwd must be an absolute path, not 'relative/dir'",
        ),
        ("session/new", {}, ["cwd: Field required", "mcpServers: Field required"]),
        ("session/prompt", {"sessionId": "nope", "prompt": []}, "unknown session 'nope'"),
        (
            "session/prompt",
            {"sessionId": 3},
            ["sessionId: Input should be a valid string", "prompt: Field required"],
        ),
        ("initialize", None, ["protocolVersion: Field required"]),
    ],
    ids=[
        "relative-cwd",
        "new-without-params",
        "unknown-session",
        "bad-prompt",
        "initialize-without-params",
    ],
)
async def test_bad_params_get_invalid_params_errors_that_say_what_is_wrong(
    autojump_clock: trio.testing.MockClock,
    method: str,
    params: object,
    detail: object,
    editor: Editor,
) -> None:
    response = await editor.request(method, params)
    assert {"code": INVALID_PARAMS, "message": "Invalid params", "data": detail} == response[
        "error"
    ]


async def test_an_unsupported_method_is_method_not_found(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    response = await editor.request(
        "session/load", {"sessionId": "x", "cwd": CWD, "mcpServers": []}
    )
    assert METHOD_NOT_FOUND == response["error"]["code"]


async def test_a_prompt_streams_every_call_in_model_order_asks_before_the_write_and_the_command(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    session_id = await editor.new_session()
    response = await editor.prompt(session_id, [{"type": "text", "text": "go"}])
    assert {"stopReason": "end_turn"} == response["result"]
    calls = [call.call_id for call in prompt_script(0)]
    assert calls == [u["toolCallId"] for u in editor.updates("tool_call")]
    # each call is announced before it is updated, and the prompt answers after every update
    order = [
        (m["params"]["update"]["sessionUpdate"], m["params"]["update"].get("toolCallId"))
        for m in editor.received
        if m.get("method") == "session/update"
    ]
    for call_id in calls:
        assert order.index(("tool_call", call_id)) < order.index(("tool_call_update", call_id))
    assert editor.received[-1] is response
    permissions = [m for m in editor.received if m.get("method") == "session/request_permission"]
    options = [
        {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow-always", "name": "Allow always (this session)", "kind": "allow_always"},
        {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    ]
    assert [
        {"sessionId": session_id, "toolCall": {"toolCallId": call_id}, "options": options}
        for call_id in ("t0-c5", "t0-c9")
    ] == [m["params"] for m in permissions]
    # each question comes after the card it is about
    for permission in permissions:
        call_id = permission["params"]["toolCall"]["toolCallId"]
        card = next(
            i
            for i, m in enumerate(editor.received)
            if m.get("params", {}).get("update", {}).get("toolCallId") == call_id
        )
        assert card < editor.received.index(permission)
    statuses = {call_id: u["status"] for call_id, u in editor.final_updates().items()}
    expected = {
        "t0-c1": "completed",
        "t0-c2": "completed",
        "t0-c3": "completed",
        "t0-c4": "failed",
        "t0-c5": "completed",
        "t0-c6": "completed",
        "t0-c7": "completed",
        "t0-c8": "failed",
        "t0-c9": "completed",
    }
    assert expected == statuses
    assert "Error: tool call timed out after 1000ms" == _text(editor.final_updates()["t0-c4"])
    assert "TODO: error handling in src/app.py\n" == _text(editor.final_updates()["t0-c6"])


async def test_the_write_shows_as_a_diff_card_with_its_location(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    session_id = await editor.new_session()
    await editor.prompt(session_id)
    (write,) = [u for u in editor.updates("tool_call") if u["toolCallId"] == "t0-c5"]
    expected = {
        "sessionUpdate": "tool_call",
        "toolCallId": "t0-c5",
        "status": "in_progress",
        "title": "Write NOTES.md",
        "kind": "edit",
        "locations": [{"path": "/workspace/NOTES.md"}],
        "content": [
            {
                "type": "diff",
                "path": "/workspace/NOTES.md",
                "oldText": None,
                "newText": "TODO: error handling in src/app.py\n",
            }
        ],
    }
    assert expected == write


async def test_a_rejected_write_fails_with_the_rejection_and_the_turn_goes_on(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    editor.permission_answer = lambda _request: REJECT
    session_id = await editor.new_session()
    response = await editor.prompt(session_id)
    assert {"stopReason": "end_turn"} == response["result"]
    write = editor.final_updates()["t0-c5"]
    assert ("failed", 'Error: the user rejected tool "write_file"') == (
        write["status"],
        _text(write),
    )
    assert "Error: no such file: NOTES.md" == _text(editor.final_updates()["t0-c6"])


async def test_a_failed_permission_request_is_unavailable_and_denies_the_write(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    editor.permission_answer = lambda _request: {"outcome": "not an outcome"}
    session_id = await editor.new_session()
    await editor.prompt(session_id)
    expected = 'Error: tool "write_file" requires approval, but no approval channel is available'
    assert expected == _text(editor.final_updates()["t0-c5"])


async def test_cancel_interrupts_the_batch_in_flight_calls_abort_and_the_prompt_is_cancelled(
    autojump_clock: trio.testing.MockClock, editor: Editor, nursery: trio.Nursery
) -> None:
    session_id = await editor.new_session()
    prompt_done, answered = _prompt_in_background(nursery, editor, session_id)
    await editor.wait_for(
        lambda m: m.get("params", {}).get("update", {}).get("toolCallId") == "t0-c4"
    )
    await trio.sleep(0.2)  # virtual: the fetch (1 s timeout) and src/app.py (0.8 s) in flight
    await editor.send(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
    )
    with trio.fail_after(10):
        await answered.wait()
    assert {"stopReason": "cancelled"} == prompt_done[0]["result"]
    final = editor.final_updates()
    assert "completed" == final["t0-c1"]["status"]
    for call_id in ("t0-c2", "t0-c4"):
        assert ("failed", "Error: tool call aborted") == (
            final[call_id]["status"],
            _text(final[call_id]),
        )
    for call_id in ("t0-c5", "t0-c6", "t0-c7", "t0-c8", "t0-c9"):
        assert "Error: tool call aborted before dispatch" == _text(final[call_id])
    assert [] == [m for m in editor.received if m.get("method") == "session/request_permission"]


async def test_cancel_while_the_permission_is_asked_settles_the_write_without_its_answer(
    autojump_clock: trio.testing.MockClock, editor: Editor, nursery: trio.Nursery
) -> None:
    session_id = await editor.new_session()
    asked = trio.Event()

    def never_answer(_request: Message) -> object:
        asked.set()
        return None  # the agent must not wait for it: the cancel decides

    editor.permission_answer = never_answer
    prompt_done, answered = _prompt_in_background(nursery, editor, session_id)
    await asked.wait()
    await editor.send(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
    )
    with trio.fail_after(10):
        await answered.wait()
    assert {"stopReason": "cancelled"} == prompt_done[0]["result"]
    # as in the original: a cancelled approval of an aborted caller is ABORTED_BEFORE_DISPATCH
    assert "Error: tool call aborted before dispatch" == _text(editor.final_updates()["t0-c5"])


async def test_a_second_prompt_while_one_runs_is_refused_and_the_next_turn_gets_new_call_ids(
    autojump_clock: trio.testing.MockClock, editor: Editor, nursery: trio.Nursery
) -> None:
    session_id = await editor.new_session()
    _first, answered = _prompt_in_background(nursery, editor, session_id)
    await editor.wait_for(lambda m: m.get("method") == "session/update")
    refused = await editor.prompt(session_id)
    await answered.wait()
    second = await editor.prompt(session_id)
    assert {
        "code": INVALID_PARAMS,
        "message": "Invalid params",
        "data": f"session {session_id!r} is already running a prompt",
    } == refused["error"]
    assert {"stopReason": "end_turn"} == second["result"]
    assert "t1-c1" in editor.final_updates()


async def test_a_cancel_for_an_unknown_session_or_with_bad_params_is_ignored(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    await editor.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}})
    await editor.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {}})
    await editor.send({"jsonrpc": "2.0", "method": "something/else"})
    response = await editor.request("initialize", {"protocolVersion": 1})
    assert 1 == response["result"]["protocolVersion"]
    assert [response] == editor.received


async def test_the_end_of_input_mid_prompt_cancels_it_and_the_agent_ends_with_no_task_left(
    autojump_clock: trio.testing.MockClock, served: Served
) -> None:
    editor, done = served.editor, served.done
    session_id = await editor.new_session()
    editor.methods[1] = "session/prompt"
    await editor.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": []},
        }
    )
    await editor.wait_for(lambda m: m.get("method") == "session/update")
    await editor.stream.send_eof()
    with trio.fail_after(1):
        await done.wait()
    answer = await editor.wait_for(lambda m: m.get("id") == 1)
    # the batch drained at once: the prompt still answered, its calls all settled
    assert {"stopReason": "cancelled"} == answer["result"]
    assert {call.call_id for call in prompt_script(0)} == set(editor.final_updates())


GREP_OUTPUT = (
    "NOTES.md:TODO: error handling in src/app.py\n"
    "docs/design.md:TODO: write the scheduler page.\n"
    "src/app.py:    # TODO: handle errors\n"
)


@pytest.mark.parametrize(
    "capabilities",
    [{"terminal": True}, {"_meta": {"terminal_output": True}}],
    ids=["terminal-methods", "zed-terminal-output-meta"],
)
async def test_a_client_with_the_terminal_capability_gets_the_command_as_a_live_terminal(
    autojump_clock: trio.testing.MockClock, capabilities: dict[str, object], editor: Editor
) -> None:
    await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    session = await editor.request("session/new", {"cwd": CWD, "mcpServers": []})
    session_id = session["result"]["sessionId"]
    await editor.prompt(session_id)
    (call,) = [u for u in editor.updates("tool_call") if u["toolCallId"] == "t0-c9"]
    expected_call = {
        "sessionUpdate": "tool_call",
        "toolCallId": "t0-c9",
        "status": "in_progress",
        "title": "grep TODO",
        "kind": "execute",
        "rawInput": "grep TODO",
        "content": [{"type": "terminal", "terminalId": "t0-c9"}],
        "_meta": {"terminal_info": {"terminal_id": "t0-c9", "cwd": "/workspace"}},
    }
    assert expected_call == call
    expected_result = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t0-c9",
        "status": "completed",
        "_meta": {
            "terminal_output": {"terminal_id": "t0-c9", "data": GREP_OUTPUT},
            "terminal_exit": {"terminal_id": "t0-c9", "exit_code": 0},
        },
    }
    assert expected_result == editor.final_updates()["t0-c9"]


async def test_a_client_without_the_terminal_capability_gets_the_output_as_a_console_block(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    session_id = await editor.new_session()
    await editor.prompt(session_id)
    result = editor.final_updates()["t0-c9"]
    assert "_meta" not in result
    assert f"```console\n{GREP_OUTPUT.rstrip()}\n```" == _text(result)


async def test_the_slow_search_streams_its_progress_before_its_result(
    autojump_clock: trio.testing.MockClock, editor: Editor
) -> None:
    session_id = await editor.new_session()
    await editor.prompt(session_id)
    updates = [u for u in editor.updates("tool_call_update") if u["toolCallId"] == "t0-c3"]
    progress = [_text(u) for u in updates if u["status"] == "in_progress"]
    expected = (
        [
            "searched README.md (1/4)",
            "searched docs/design.md (2/4)",
            "searched logs/build.log (3/4)",
            "searched src/app.py (4/4)",
        ],
        "completed",
    )
    assert expected == (progress, updates[-1]["status"])
