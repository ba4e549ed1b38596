"""A stdio MCP server whose stderr goes to the ``dsh_tools.mcp`` logger.

``mcp.Client(StdioServerParameters(...))`` lets the server process write to the agent's own
stderr: a server that logs, or prints the traceback of every failing tool, draws over the
agent's terminal. :func:`open_stdio_client` gives the server a pipe instead and logs each line
it writes (level ``INFO``, the server's command in the record), from a task of its own nursery.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Final

import mcp
import trio
from mcp.client.stdio import stdio_client

__all__ = ["STDERR_LOGGER", "open_stdio_client"]

STDERR_LOGGER: Final = logging.getLogger("dsh_tools.mcp")
"""Where a stdio server's stderr lines go (``INFO``)."""

_GRACE: Final = 1.0
"""How long (seconds) the reader waits, after the client closed, for the server's last lines."""


@asynccontextmanager
async def open_stdio_client(
    server: mcp.StdioServerParameters, **client_options: Any
) -> AsyncGenerator[mcp.Client]:
    """Start a stdio MCP server and yield the entered ``mcp.Client`` connected to it, with
    the server's stderr logged line by line to the ``dsh_tools.mcp`` logger instead of the
    agent's terminal.

    Args:
        server: the server's command, arguments and environment.
        client_options: passed on to ``mcp.Client``.

    A checkpoint on entry and exit. On exit the client closes (the server process ends) and
    the lines the server wrote last are still logged (waiting at most one second for them).

    Raises:
        TypeError: ``server`` is not an ``mcp.StdioServerParameters``.
    """
    if not isinstance(server, mcp.StdioServerParameters):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"open_stdio_client() takes mcp.StdioServerParameters, not {type(server).__name__}"
        )
    read_fd, write_fd = os.pipe()
    errlog = os.fdopen(write_fd, "w", encoding="utf-8")
    finished = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_log_lines, read_fd, server.command, finished)
        try:
            async with mcp.Client(stdio_client(server, errlog=errlog), **client_options) as client:
                yield client
        finally:
            # our copy of the write end; the reader sees the end once the server's copy closes
            errlog.close()
            with trio.move_on_after(_GRACE) as waited:
                waited.shield = True
                await finished.wait()
            nursery.cancel_scope.cancel()


async def _log_lines(read_fd: int, command: str, finished: trio.Event) -> None:
    pending = b""
    try:
        async with trio.lowlevel.FdStream(read_fd) as stream:
            while chunk := await stream.receive_some():
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    _log(command, line)
            if pending:
                _log(command, pending)
    finally:
        finished.set()


def _log(command: str, line: bytes) -> None:
    STDERR_LOGGER.info("MCP server %s: %s", command, line.decode("utf-8", "replace").rstrip("\r"))
