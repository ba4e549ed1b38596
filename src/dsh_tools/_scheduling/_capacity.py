"""Capacity classes: how many bodies of each class a batch may have in flight.

The lane asks, before it starts a call inside a pool, whether the call's class has a free slot
(:meth:`Capacity.full`); a call that must wait holds back the calls behind it, so calls still
start in model order. Limits that hold across batches (keys, the registry's classes, rates)
are the registry's gate's (``_held``).
"""

from __future__ import annotations

from dsh_tools._values._definition import ToolDefinition

__all__ = ["Capacity", "capacity_of"]


def capacity_of(limits: dict[str, int]) -> Capacity | None:
    """The capacity classes of a batch with ``limits`` (checked), ``None`` without limits."""
    return Capacity(limits) if limits else None


class Capacity:
    """A batch's capacity classes: the limit of each class, the slots of each class in use,
    and the class and weight of each dispatched call until it reports back.

    A call takes its tool's ``capacity_weight`` slots, at most its class's limit (a heavier
    call takes the whole class).
    """

    __slots__ = ("_held", "_in_use", "_limits")

    def __init__(self, limits: dict[str, int]) -> None:
        self._limits = limits
        self._in_use = dict.fromkeys(limits, 0)
        self._held: dict[int, tuple[str, int]] = {}

    def limited_class(self, tool: ToolDefinition | None) -> str | None:
        """The tool's capacity class, if the batch limits it."""
        name = None if tool is None else tool.capacity_class
        return name if name is not None and name in self._limits else None

    def _weight(self, name: str, tool: ToolDefinition | None) -> int:
        weight = 1 if tool is None else tool.capacity_weight
        return min(weight, self._limits[name])

    def full(self, name: str, tool: ToolDefinition | None) -> bool:
        """Whether a call of ``tool`` must wait for slots of class ``name``."""
        return self._in_use[name] + self._weight(name, tool) > self._limits[name]

    def take(self, index: int, name: str, tool: ToolDefinition | None) -> None:
        weight = self._weight(name, tool)
        self._held[index] = (name, weight)
        self._in_use[name] += weight

    def release(self, index: int) -> None:
        held = self._held.pop(index, None)
        if held is not None:
            self._in_use[held[0]] -= held[1]
