"""Capacity classes: how many bodies of each class a batch may have in flight.

The lane asks, before it starts a call inside a pool, whether the call's class has a free slot
(:meth:`Capacity.full`); a call that must wait holds back the calls behind it, so calls still
start in model order. A new kind of limit (a weight, a rate, a key) is accounted here and asked
about at that one place in the lane.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from dsh_tools._values._checks import check_int
from dsh_tools._values._definition import ToolDefinition

__all__ = ["Capacity", "capacity_of", "check_capacity_limits"]

_CAPACITY_LIMITS_TYPE: Final = "capacity_limits must map class names (str) to positive integers"


def check_capacity_limits(value: object) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{_CAPACITY_LIMITS_TYPE}, not {type(value).__name__}")
    limits: dict[str, int] = {}
    for name, limit in cast("Mapping[object, object]", value).items():
        if type(name) is not str or not name:
            raise TypeError(f"{_CAPACITY_LIMITS_TYPE}: {name!r} is not a class name")
        limits[name] = check_int(f'capacity_limits["{name}"]', limit)
    return limits


def capacity_of(limits: dict[str, int]) -> Capacity | None:
    """The capacity classes of a batch with ``limits`` (checked), ``None`` without limits."""
    return Capacity(limits) if limits else None


class Capacity:
    """A batch's capacity classes: the limit of each class, the bodies of each class in flight,
    and the class of each dispatched call until it reports back.
    """

    __slots__ = ("_class_of", "_in_flight", "_limits")

    def __init__(self, limits: dict[str, int]) -> None:
        self._limits = limits
        self._in_flight = dict.fromkeys(limits, 0)
        self._class_of: dict[int, str] = {}

    def limited_class(self, tool: ToolDefinition | None) -> str | None:
        """The tool's capacity class, if the batch limits it."""
        name = None if tool is None else tool.capacity_class
        return name if name is not None and name in self._limits else None

    def full(self, name: str) -> bool:
        return self._in_flight[name] >= self._limits[name]

    def take(self, index: int, name: str) -> None:
        self._class_of[index] = name
        self._in_flight[name] += 1

    def release(self, index: int) -> None:
        name = self._class_of.pop(index, None)
        if name is not None:
            self._in_flight[name] -= 1
