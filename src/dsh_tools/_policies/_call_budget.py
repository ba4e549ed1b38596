"""The call budget: a ``pre_execute`` policy against a model that calls tools in a loop.

Counts the calls it allows per turn (the turn of the batch that runs them; calls outside a
batch share one count that never resets) and denies, with a text the model can act on, a call
beyond its tool's budget, beyond the turn's total, or the ``repeat_limit``-th identical call
(same tool, same arguments) of the turn. The counts of an agent's older turns are dropped when
its next turn starts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from dsh_tools._pipeline._hooks import PreExecuteNext
from dsh_tools._pipeline._registry import ToolRegistry
from dsh_tools._scheduling._active import current_turn
from dsh_tools._texts import call_budget_per_tool, call_budget_per_turn, call_budget_repeated
from dsh_tools._values._checks import check_int
from dsh_tools._values._disposer import Disposer
from dsh_tools._values._execution import Allow, Deny, PreToolDecision, ToolExecution

__all__ = ["install_call_budget"]

_ALLOW: Final = Allow()


class _TurnCounts:
    __slots__ = ("per_tool", "repeats", "total", "turn")

    def __init__(self, turn: int | None) -> None:
        self.turn = turn
        self.total = 0
        self.per_tool: dict[str, int] = {}
        self.repeats: dict[tuple[str, str], int] = {}

    def count(self, name: str, key: tuple[str, str] | None, step: int) -> None:
        self.total += step
        self.per_tool[name] = self.per_tool.get(name, 0) + step
        if key is not None:
            self.repeats[key] = self.repeats.get(key, 0) + step


def install_call_budget(
    registry: ToolRegistry,
    *,
    per_tool: int | Mapping[str, int] | None = None,
    per_turn: int | None = None,
    repeat_limit: int | None = None,
) -> Disposer:
    """Deny calls beyond a budget, per turn, with a text the model can act on.

    Registers one ``pre_execute`` listener. A call it allows counts toward its turn (the turn
    ``run_tool_calls`` was given; per agent). It denies a call when its tool has had
    ``per_tool`` calls this turn already (``Error: tool "<name>" has reached its limit of <n>
    calls this turn; ...``), when the turn has had ``per_turn`` calls (``Error: this turn has
    reached its limit of <n> tool calls; ...``), or when it would be the ``repeat_limit``-th
    call of the same tool with the same arguments this turn (``Error: tool "<name>" was
    already called <n> times this turn with exactly these arguments; ...``). A denied call
    does not count. A call counts from the moment this policy lets it through: while a later
    listener still decides on it (an approval, say), other calls of the agent, in this batch
    or a concurrent one, are counted against a budget that includes it; if the call is then not
    allowed, its place is given back.

    Args:
        registry: the registry whose calls are counted.
        per_tool: the most calls of one tool per turn: one ``int`` for every tool, or a
            mapping from tool name to its budget (tools not in it have none).
        per_turn: the most calls per turn over every tool.
        repeat_limit: the count at which an identical call is denied (``3``: the third
            identical call is); at least 2.

    Returns:
        A :class:`~dsh_tools.Disposer` that removes the budget.

    Raises:
        TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`, or a budget is
            not an ``int`` (a mapping: with ``str`` keys).
        ValueError: a budget is less than 1, or ``repeat_limit`` less than 2.
    """
    if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
    tool_budget: int | None = None
    tool_budgets: dict[str, int] = {}
    if isinstance(per_tool, Mapping):
        for name, limit in per_tool.items():
            if type(name) is not str:
                raise TypeError(f"per_tool must map tool names (str) to budgets, not {name!r}")
            tool_budgets[name] = check_int(f"per_tool[{name!r}]", limit)
    elif per_tool is not None:
        tool_budget = check_int("per_tool", per_tool)
    turn_budget = None if per_turn is None else check_int("per_turn", per_turn)
    repeats = None if repeat_limit is None else check_int("repeat_limit", repeat_limit, least=2)
    # per agent (by identity; None: global calls): the counts of its current turn
    counts: dict[int, tuple[object, _TurnCounts]] = {}

    async def budget(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        turn = current_turn()
        agent = execution.agent
        entry = counts.get(id(agent))
        if entry is None or entry[0] is not agent or entry[1].turn != turn:
            entry = counts[id(agent)] = (agent, _TurnCounts(turn))
        state = entry[1]
        name = execution.name
        limit = tool_budgets.get(name, tool_budget)
        used = state.per_tool.get(name, 0)
        if limit is not None and used >= limit:
            return Deny(call_budget_per_tool(name, limit))  # noqa: ASYNC910
        if turn_budget is not None and state.total >= turn_budget:
            return Deny(call_budget_per_turn(turn_budget))  # noqa: ASYNC910
        key: tuple[str, str] | None = None
        if repeats is not None:
            key = (name, _canonical(execution.arguments))
            seen = state.repeats.get(key, 0)
            if seen + 1 >= repeats:
                return Deny(call_budget_repeated(name, seen + 1))  # noqa: ASYNC910
        # counted now, at the decision, and given back if the rest of the waterfall does not
        # allow the call: a listener after this one may wait (an approval), and concurrent
        # batches of the agent decide meanwhile against the count that includes this call
        state.count(name, key, 1)
        try:
            decision = await next()
        except BaseException:
            state.count(name, key, -1)
            raise
        if not isinstance(decision, Allow) or isinstance(decision, Deny):
            state.count(name, key, -1)
        return decision

    return registry.hooks.pre_execute.add(budget)


def _canonical(arguments: object) -> str:
    try:
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(arguments)
