"""docs/api.md, the API reference in Markdown, names every public name of the package and of each
integration subpackage, and shows each one's current signature."""

from __future__ import annotations

import importlib
import re

import pytest

from api_reference import signature_text
from support import ROOT

MODULES = [
    "dsh_tools",
    "dsh_tools.aio",
    "dsh_tools.providers",
    "dsh_tools.providers.openai",
    "dsh_tools.providers.anthropic",
    "dsh_tools.mcp",
    "dsh_tools.otel",
    "dsh_tools.acp",
    "dsh_tools.testing",
    "dsh_tools.testing.strategies",
    "dsh_tools.postgres",
    "dsh_tools.temporal",
]
ENTRY = re.compile(r"^### `([\w.]+)`\n\n```python\n(.*?)\n```$", re.M | re.S)


def _title(module: str, name: str) -> str:
    """How the page titles a name: bare in the core, qualified by its subpackage elsewhere."""
    if module == "dsh_tools":
        return name
    return f"{module.removeprefix('dsh_tools.')}.{name}"


def _public() -> dict[str, tuple[str, str]]:
    return {
        _title(module, name): (module, name)
        for module in MODULES
        for name in importlib.import_module(module).__all__
    }


def _entries() -> dict[str, str]:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    found = ENTRY.findall(page)
    entries = dict(found)
    assert len(entries) == len(found), "a name has two entries"
    return entries


def test_the_api_page_has_one_entry_for_every_public_name_and_no_other() -> None:
    assert sorted(_public()) == sorted(_entries())


@pytest.mark.parametrize("title", sorted(_public()))
def test_each_entry_shows_the_name_s_current_signature(title: str) -> None:
    module, name = _public()[title]
    current = signature_text(module, name)
    assert current == _entries().get(title), f"docs/api.md should show:\n{current}"


def test_the_page_has_no_sphinx_only_markup() -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert [] == re.findall(r"\{eval-rst\}|\{\w+\}`|^\.\. \w", page, flags=re.M)
