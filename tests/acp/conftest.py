"""Fixtures of the ACP tests: the ``dsh-tools acp`` agent served in process, with the scripted
editor (``acp_editor.Editor``) at the other end of an in-memory stream (``acp_editor.Served``)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from acp_editor import Editor, Served

from dsh_tools.acp import JsonRpcConnection
from dsh_tools.acp._agent import DemoAcpAgent


@pytest.fixture
async def served(nursery: trio.Nursery) -> Served:
    """The agent and the editor, both running in the test's nursery until the test ends."""
    client, agent_end = trio.testing.memory_stream_pair()
    connection = JsonRpcConnection(agent_end, agent_end)
    served = Served(editor=Editor(client), done=trio.Event())

    async def serve() -> None:
        await connection.serve(DemoAcpAgent(connection))
        served.done.set()

    nursery.start_soon(serve)
    nursery.start_soon(served.editor.run)
    return served


@pytest.fixture
def editor(served: Served) -> Editor:
    """The editor of :func:`served`."""
    return served.editor
