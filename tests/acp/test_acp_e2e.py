"""End to end: ``dsh-tools acp`` in another process, driven by the ``agent-client-protocol``
package's own client-side connection over stdio.

The package is asyncio-based, so this one test module runs it with ``asyncio.run`` inside a
synchronous test (ruff's asyncio ban is lifted for this file only); our agent, trio-native,
runs in the subprocess. Every wait is bounded, and the package's transport closes the agent's
stdin on exit (then terminates and kills it if it has not ended).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, cast

from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)

from acp import PROTOCOL_VERSION, Client, spawn_agent_process, text_block

TIMEOUT = 30.0
"""Seconds any one step may take (the whole run takes about four on an idle machine)."""


class Editor:
    """The client side: records every update, allows each asked call once."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[tuple[str, str | None, list[str]]] = []
        self.seen = asyncio.Event()
        self.watch_for: str | None = None

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permissions.append(
            (session_id, tool_call.tool_call_id, [option.option_id for option in options])
        )
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow-once")
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if isinstance(update, ToolCallStart) and update.tool_call_id == self.watch_for:
            self.seen.set()

    def calls(self, session_id: str) -> list[str]:
        return [
            update.tool_call_id
            for sid, update in self.updates
            if sid == session_id and isinstance(update, ToolCallStart)
        ]

    def final(self, call_id: str) -> ToolCallProgress:
        (last,) = [
            update
            for _sid, update in self.updates
            if isinstance(update, ToolCallProgress) and update.tool_call_id == call_id
        ]
        return last


def _text(update: ToolCallProgress) -> str:
    return "".join(item.content.text for item in update.content or ())


async def _drive(stderr_path: Path) -> tuple[Editor, list[str], int | None]:
    editor = Editor()
    stop_reasons: list[str] = []
    with stderr_path.open("wb") as stderr:
        async with spawn_agent_process(
            # only the methods our agent calls are implemented (the package checks nothing more)
            cast(Client, editor),
            sys.executable,
            "-m",
            "dsh_tools",
            "acp",
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (connection, process):
            init = await asyncio.wait_for(
                connection.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(terminal=True),
                ),
                TIMEOUT,
            )
            assert PROTOCOL_VERSION == init.protocol_version
            session = await asyncio.wait_for(
                connection.new_session(cwd=str(Path.cwd().resolve()), mcp_servers=[]), TIMEOUT
            )
            first = await asyncio.wait_for(
                connection.prompt(session_id=session.session_id, prompt=[text_block("go")]),
                TIMEOUT,
            )
            stop_reasons.append(first.stop_reason)

            editor.watch_for = "t1-c4"
            second = asyncio.create_task(
                connection.prompt(session_id=session.session_id, prompt=[text_block("again")])
            )
            await asyncio.wait_for(editor.seen.wait(), TIMEOUT)
            await connection.cancel(session_id=session.session_id)
            stop_reasons.append((await asyncio.wait_for(second, TIMEOUT)).stop_reason)
        returncode = await asyncio.wait_for(process.wait(), TIMEOUT)
    assert session.session_id == editor.updates[0][0]
    return editor, stop_reasons, returncode


def test_an_editor_prompts_dsh_tools_acp_allows_the_write_then_cancels_a_second_prompt(
    tmp_path: Path,
) -> None:
    stderr_path = tmp_path / "agent-stderr.txt"
    editor, stop_reasons, returncode = asyncio.run(
        asyncio.wait_for(_drive(stderr_path), 4 * TIMEOUT)
    )
    session_id = editor.updates[0][0]

    assert ["end_turn", "cancelled"] == stop_reasons
    # the first prompt: every call announced in model order, the write and the command asked
    # about once each
    assert [f"t0-c{n}" for n in range(1, 10)] == editor.calls(session_id)[:9]
    assert [
        (session_id, "t0-c5", ["allow-once", "allow-always", "reject-once"]),
        (session_id, "t0-c9", ["allow-once", "allow-always", "reject-once"]),
    ] == editor.permissions
    assert "completed" == editor.final("t0-c5").status
    assert "TODO: error handling in src/app.py\n" == _text(editor.final("t0-c6"))
    # the command ran in the editor's terminal widget: its output and exit code in _meta
    command = editor.final("t0-c9")
    assert command.content is None
    assert {"terminal_id": "t0-c9", "exit_code": 0} == (command.field_meta or {})["terminal_exit"]
    # the second prompt: cancelled while the fetch ran; the calls after it never started
    assert [f"t1-c{n}" for n in range(1, 10)] == editor.calls(session_id)[9:]
    assert ("failed", "Error: tool call aborted") == (
        editor.final("t1-c4").status,
        _text(editor.final("t1-c4")),
    )
    for n in range(5, 10):
        assert "Error: tool call aborted before dispatch" == _text(editor.final(f"t1-c{n}"))
    # closing its stdin ended the agent cleanly
    assert 0 == returncode
    assert "Traceback" not in stderr_path.read_text()
