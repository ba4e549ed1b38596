"""``dsh-tools acp`` / ``python -m dsh_tools.acp``: serve the demo agent over stdio."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Final

import trio

from ._jsonrpc import JsonRpcConnection

__all__ = ["main", "serve_stdio"]

MISSING_EXTRA: Final = (
    "dsh-tools acp needs the [acp] extra (the agent-client-protocol package): "
    "pip install 'dsh-tools[acp]'"
)


def _parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="dsh-tools acp",
        description=(
            "Serve an ACP (Agent Client Protocol) agent over stdio: JSON-RPC 2.0, one message "
            "per line. Point an editor's custom agent setting at this command. Each prompt runs "
            "a scripted batch of the demo tools (no model) through the real registry, "
            "scheduler, presenter and approval service, and asks permission before writing."
        ),
    )


async def serve_stdio() -> None:
    """Serve the demo agent on this process's stdin and stdout until stdin ends.

    stdout carries the protocol only (logs go to stderr). POSIX only: the streams are
    :class:`trio.lowlevel.FdStream` over duplicates of file descriptors 0 and 1.
    """
    from ._agent import DemoAcpAgent

    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    async with stdin, stdout:
        connection = JsonRpcConnection(stdin, stdout)
        await connection.serve(DemoAcpAgent(connection))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dsh-tools acp``; return the exit code (0 once stdin has ended).

    Prints a clear message and returns 2 when the ``[acp]`` extra is not installed.
    """
    _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        import acp.schema  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        print(MISSING_EXTRA, file=sys.stderr)
        return 2
    try:
        trio.run(serve_stdio)
    except KeyboardInterrupt:
        return 130
    return 0
