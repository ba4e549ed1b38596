"""Loads the examples under docs/examples/ for the tests that check their documented output."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``docs/examples/<name>`` as a real module, once (its classes' annotations resolve
    in its own globals)."""
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
