"""The "Execution pipeline" page's example runs and prints exactly what the page shows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

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


async def test_the_policy_example_prints_each_call_outcome(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("pipeline_policy.py").main()

    expected = [
        "c1 read_file: [redacted]",
        "approval asked for write_file: writes to disk",
        "c2 write_file: wrote todo.txt",
        "approval asked for write_file: writes to disk",
        'c3 write_file: Error: the user rejected tool "write_file"',
        "c4 read_file: Error: absolute paths are outside the workspace",
        'c5 delete_file: Error: unknown tool "delete_file"',
    ]
    assert expected == capsys.readouterr().out.splitlines()
