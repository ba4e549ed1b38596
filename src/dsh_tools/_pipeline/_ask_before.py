"""``ask_before``: the ready-made ``pre_execute`` policy that asks the approval service before
every call of the named tools.
"""

from __future__ import annotations

from typing import final

import trio

from dsh_tools._values._execution import Ask, PreToolDecision, ToolExecution

from ._hooks import PreExecuteHook, PreExecuteNext

__all__ = ["AskBefore", "ask_before"]


@final
class AskBefore:
    """The policy :func:`ask_before` returns; the approval setup check recognises it."""

    __slots__ = ("reason", "tool_names")

    def __init__(self, tool_names: frozenset[str], reason: str | None) -> None:
        self.tool_names = tool_names
        self.reason = reason

    async def __call__(self, execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        if execution.name in self.tool_names:
            await trio.lowlevel.checkpoint()
            return Ask(reason=self.reason)
        return await next()

    def __repr__(self) -> str:
        names = ", ".join(repr(name) for name in sorted(self.tool_names))
        return f"ask_before({names})"


def ask_before(*tool_names: str, reason: str | None = None) -> PreExecuteHook:
    """A ``pre_execute`` policy that asks the approval service before every call of the named
    tools (``Ask(reason)``) and leaves every other call to the rest of the waterfall.

    Add it with ``registry.hooks.pre_execute.add(ask_before("write_file", "run_command"))``
    (or to an agent's scope). A batch set up on a registry with this policy and no approval
    service warns (:class:`~dsh_tools.ApprovalSetupWarning`).

    Raises:
        TypeError: no tool name, or a name that is not a non-empty ``str``; ``reason`` is
            neither ``None`` nor a ``str``.
    """
    if not tool_names:
        raise TypeError("ask_before() needs at least one tool name")
    for name in tool_names:
        if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ask_before(): a tool name must be a non-empty str, not {name!r}")
    if reason is not None and not isinstance(reason, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"ask_before(): reason must be a str or None, not {type(reason).__name__}")
    return AskBefore(frozenset(tool_names), reason)
