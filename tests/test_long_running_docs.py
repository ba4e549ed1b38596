"""Every code block of the "Long-running tools" page runs as written (Sybil executes the
page's ``python`` blocks; each is a complete program with its own assertions)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser

PAGE = Path(__file__).parent.parent / "docs" / "long-running-tools.md"

_DOCUMENT = Sybil(parsers=[PythonCodeBlockParser()]).parse(PAGE)
_EXAMPLES = list(_DOCUMENT)


def test_the_page_has_its_examples() -> None:
    assert 3 == len(_EXAMPLES)


@pytest.mark.parametrize("index", range(len(_EXAMPLES)))
def test_the_example_runs(index: int) -> None:
    _EXAMPLES[index].evaluate()
