"""``dsh-tools watch``: a session drawn live while another process writes it.

The same cards as ``dsh-tools replay`` (the generic card of each call, or a registry's
presenters with ``--registry``), printed as the events arrive, until Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio
from rich.console import Console

from dsh_tools import SessionEvent, ToolPresenter, ToolRegistry, subscribe
from dsh_tools._for_integrations import printable

from ._loading import load_registry
from .replay import render_event

__all__ = ["main_watch"]


def main_watch(
    log: str,
    *,
    session: str = "default",
    postgres: bool = False,
    registry: str | None = None,
    poll_interval: float = 0.2,
    console: Console | None = None,
) -> int:
    """Follow ``log`` (a JSON Lines or SQLite file, or with ``postgres`` a PostgreSQL
    connection string) and print each event of session ``session`` as it arrives, until
    interrupted; return the exit code (1: the log or the registry cannot be read).
    """
    console = console if console is not None else Console()
    try:
        tools = ToolRegistry() if registry is None else load_registry(registry)
        source = _source(log, session, postgres)
    except (OSError, ValueError, TypeError, LookupError, ImportError, AttributeError) as exc:
        Console(stderr=True).print(printable(f"dsh-tools watch: {exc}"), markup=False)
        return 1
    presenter = ToolPresenter(tools)
    console.print(f"watching {printable(log, multiline=False)} (Ctrl-C to stop)", markup=False)

    async def follow() -> None:
        async for event in subscribe(source, session_id=session, poll_interval=poll_interval):
            console.print(render_event(presenter, event), highlight=False)

    trio.run(follow)
    return 0  # pragma: no cover - follow() ends only when interrupted


def _source(log: str, session: str, postgres: bool) -> str | Callable[[], list[SessionEvent]]:
    if not postgres:
        path = Path(log)
        if not path.parent.is_dir():
            raise FileNotFoundError(f"no directory {path.parent} for the log")
        return log
    from dsh_tools.postgres import PostgresSessionLog

    def read() -> list[SessionEvent]:
        try:
            return PostgresSessionLog.read(log, session)
        except LookupError:
            return []  # the session has no event yet

    return read
