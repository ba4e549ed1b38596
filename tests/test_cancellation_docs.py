"""The "Cancellation and timeouts" page's example runs and prints what the page shows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio.testing

EXAMPLES = Path(__file__).parent.parent / "docs" / "examples"


def load_example(name: str) -> ModuleType:
    """Import a docs example as a real module."""
    module_name = f"docs_example_{name.removesuffix('.py')}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


async def test_the_cancellation_example_prints_each_outcome_on_virtual_time(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    await load_example("cancellation_timeout.py").main()

    expected = [
        "in time: fetched [-] at t=1",
        "too slow: Error: tool call timed out after 2000ms [TOOL_TIMEOUT] at t=3",
        "cancelled: Error: tool call aborted [ABORTED] at t=3.5",
        "never started: Error: tool call aborted before dispatch [ABORTED_BEFORE_DISPATCH] at t=3.5",
        "caller scope cancelled: True",
    ]
    assert expected == capsys.readouterr().out.splitlines()
