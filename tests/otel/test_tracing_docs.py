"""The "Tracing" page's example runs and prints what the page shows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio.testing

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "tracing.py"


def load_example() -> ModuleType:
    name = "docs_example_tracing"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_tracing_example_prints_one_span_per_call_under_the_batch_under_the_agent_turn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    trio.run(load_example().main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [
        "agent turn (parent: -) UNSET",
        "execute_tool fetch (parent: execute_tool_batch) ERROR error.type=_OTHER",
        "execute_tool lookup (parent: execute_tool_batch) UNSET",
        "execute_tool lookup (parent: execute_tool_batch) UNSET",
        "execute_tool_batch (parent: agent turn) UNSET",
    ] == capsys.readouterr().out.splitlines()
