"""The pytest plugin of ``dsh_tools.testing`` (registered through the ``pytest11`` entry
point, so installing dsh-tools makes the fixtures available everywhere).

Fixtures:
    registry: a fresh :class:`~dsh_tools.ToolRegistry` per test.
    session_log: a fresh :class:`~dsh_tools.MemorySessionLog` per test.
    explore_cancellations: :func:`~dsh_tools.testing.explore_cancellations` that fails the
        test with the exploration's summary when a run broke a promise.
    explore_crashes: the same for :func:`~dsh_tools.testing.explore_crashes`.

A test module's own fixture of the same name wins over these, as pytest does for every plugin.
The plugin imports neither Hypothesis nor trio's testing helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dsh_tools import MemorySessionLog, ToolRegistry

from ._explore import Exploration
from ._explore import explore_cancellations as explore_cancellations_of
from ._explore import explore_crashes as explore_crashes_of

__all__ = ["explore_cancellations", "explore_crashes", "registry", "session_log"]


@pytest.fixture
def registry() -> ToolRegistry:
    """A fresh, empty :class:`~dsh_tools.ToolRegistry` (no approval service)."""
    return ToolRegistry()


@pytest.fixture
def session_log() -> MemorySessionLog:
    """A fresh, empty :class:`~dsh_tools.MemorySessionLog`."""
    return MemorySessionLog()


def _failing(explore: Callable[..., Exploration]) -> Callable[..., Exploration]:
    def run(*args: Any, **kwargs: Any) -> Exploration:
        exploration = explore(*args, **kwargs)
        if exploration.failures:
            pytest.fail(str(exploration), pytrace=False)
        return exploration

    return run


@pytest.fixture
def explore_cancellations() -> Callable[..., Exploration]:
    """:func:`~dsh_tools.testing.explore_cancellations`, failing the test (with the summary)
    when a run broke a promise; returns the :class:`~dsh_tools.testing.Exploration` otherwise.
    Call it from a synchronous test: each run is its own ``trio.run``.
    """
    return _failing(explore_cancellations_of)


@pytest.fixture
def explore_crashes() -> Callable[..., Exploration]:
    """:func:`~dsh_tools.testing.explore_crashes`, failing the test (with the summary) when a
    run broke a promise; returns the :class:`~dsh_tools.testing.Exploration` otherwise.
    """
    return _failing(explore_crashes_of)
