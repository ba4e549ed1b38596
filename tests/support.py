"""Shared builders for the test suite: the one place for what several test files need.

Import it by name (``from support import ...``) from any test, in ``tests/`` or a subfolder:
``tests/conftest.py`` puts ``tests/`` on ``sys.path``. It uses public names of ``dsh_tools``
only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root folder."""

EXAMPLES = ROOT / "docs" / "examples"
"""The docs examples, each run by a test that checks its documented output."""


def load_module(path: Path, module_name: str) -> ModuleType:
    """Import the script at ``path`` as the real module ``module_name``, once (its classes'
    annotations resolve in its own globals)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_example(name: str) -> ModuleType:
    """Import ``docs/examples/<name>`` as a real module, once."""
    return load_module(EXAMPLES / name, f"docs_example_{name.removesuffix('.py')}")
