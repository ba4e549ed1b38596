"""The pytest plugin of ``dsh_tools.testing`` (registered through the ``pytest11`` entry
point, so installing dsh-tools makes the fixtures available everywhere).

Fixtures:
    registry: a fresh :class:`~dsh_tools.ToolRegistry` per test.
    session_log: a fresh :class:`~dsh_tools.MemorySessionLog` per test.

A test module's own fixture of the same name wins over these, as pytest does for every plugin.
The plugin imports neither Hypothesis nor trio's testing helpers.
"""

from __future__ import annotations

import pytest

from dsh_tools import MemorySessionLog, ToolRegistry

__all__ = ["registry", "session_log"]


@pytest.fixture
def registry() -> ToolRegistry:
    """A fresh, empty :class:`~dsh_tools.ToolRegistry` (no approval service)."""
    return ToolRegistry()


@pytest.fixture
def session_log() -> MemorySessionLog:
    """A fresh, empty :class:`~dsh_tools.MemorySessionLog`."""
    return MemorySessionLog()
