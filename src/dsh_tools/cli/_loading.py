"""Naming a registry on the command line (``--registry MODULE:NAME``), for every command that
takes one; it imports nothing heavier than the registry itself.
"""

from __future__ import annotations

import importlib
import os
import sys

from dsh_tools import ToolRegistry

__all__ = ["load_registry"]


def load_registry(spec: str) -> ToolRegistry:
    """The registry named ``MODULE:NAME`` (a :class:`~dsh_tools.ToolRegistry`, or a callable
    returning one). The module is found as ``python -m`` finds one: the current folder is
    searched first (the ``dsh-tools`` script's own folder is what Python puts there).

    Raises:
        ValueError: ``spec`` is not ``MODULE:NAME``.
        TypeError: the object named is neither a registry nor a function returning one.
        ImportError / AttributeError: there is no such module or name.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--registry takes MODULE:NAME, not {spec!r}")
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)
    value: object = getattr(importlib.import_module(module_name), attribute)
    if callable(value):  # a ToolRegistry is not callable: this is a factory
        value = value()
    if not isinstance(value, ToolRegistry):
        raise TypeError(f"{spec} is not a ToolRegistry (nor a function returning one)")
    return value
