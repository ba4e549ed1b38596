"""pytest runs the code of README.md and docs/*.md with Sybil, as a reader would run it.

- A ```` ```python ```` block runs as it reads: the blocks of one page run in order in one module
  namespace (so a block may continue the one before it), with ``__name__ == "__main__"`` (so a
  whole script's ``if __name__ == "__main__":`` runs its ``main``; an invisible block may set
  another ``__name__`` around a script that must not run here, such as a stdio server) and
  ``__file__`` naming the last block that mentions ``__file__``, saved as a file (so a script
  can start itself as a subprocess). What a block prints is kept.
- A ```` ```text ```` block right after a paragraph whose last sentence says ``prints`` and ends
  in a colon (``It prints:``, ``Running it prints the schema, then:``) must be exactly what the
  last Python block that printed anything printed.
  A fragment may ``await`` at top level (it then runs under ``trio.run``).
- ``<!-- invisible-code-block: python -->`` comments hold code a reader does not need to see
  (setup, extra checks); ``<!-- skip: next -->`` marks a block that cannot run here (it needs a
  real model or a network) — a test then checks it another way.

How a contributor writes such a block: docs/architecture.md, "Documentation".
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import inspect
import io
import re
import sys
import tempfile
import types
from collections.abc import Iterable
from pathlib import Path

import trio
from sybil import Document, Example, Region, Sybil
from sybil.evaluators.python import pad
from sybil.parsers.markdown import CodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

_MODULE = "module"
_PRINTED = "printed"
_FOLDER = "folder"
# the last sentence of the paragraph before the block says "prints" and ends in a colon
_SHOWS_OUTPUT = re.compile(r"\bprints\b(?:(?!\n\s*\n)[^.])*:\s*\Z")


def _set_up(namespace: dict[str, object]) -> None:
    module = types.ModuleType("__main__")
    namespace[_MODULE] = module
    namespace[_PRINTED] = []
    namespace[_FOLDER] = tempfile.TemporaryDirectory(prefix="docs-page-")


def _tear_down(namespace: dict[str, object]) -> None:
    module = namespace[_MODULE]
    assert isinstance(module, types.ModuleType)
    module.__dict__.clear()
    folder = namespace[_FOLDER]
    assert isinstance(folder, tempfile.TemporaryDirectory)
    folder.cleanup()


def _run_python(example: Example) -> None:
    """Run a block in its page's module, as ``__main__``, keeping what it prints."""
    module = example.namespace[_MODULE]
    printed = example.namespace[_PRINTED]
    source = pad(str(example.parsed), example.line + example.parsed.line_offset)
    # a fragment may ``await`` at top level, as in an async REPL: it then runs under trio.run
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(source, example.path, "exec", flags=flags, dont_inherit=True)
    if "__file__" in str(example.parsed):
        # a whole script that runs itself finds itself: this block, saved as a file
        script = Path(example.namespace[_FOLDER].name) / f"line_{example.line}.py"
        script.write_text(str(example.parsed), encoding="utf-8")
        module.__dict__["__file__"] = str(script)
    output = io.StringIO()
    # the block's classes name "__main__" as their module: attrs and cattrs resolve their
    # annotations there, so the page's module stands in for it while the block runs
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = module
    try:
        with contextlib.redirect_stdout(output):
            if code.co_flags & inspect.CO_COROUTINE:
                trio.run(_awaited, code, module.__dict__)
            else:
                exec(code, module.__dict__)
    finally:
        sys.modules["__main__"] = saved
        if output.getvalue():
            printed[:] = [output.getvalue()]


async def _awaited(code: types.CodeType, namespace: dict[str, object]) -> None:
    await eval(code, namespace)


def _check_output(example: Example) -> str | None:
    """The text block is what the last block that printed printed."""
    printed: list[str] = example.namespace[_PRINTED]
    actual = "".join(printed)
    printed.clear()
    expected = str(example.parsed)
    if actual == expected:
        return None
    diff = difflib.unified_diff(
        expected.splitlines(),
        actual.splitlines(),
        "the page shows",
        "the code printed",
        lineterm="",
    )
    return "\n".join(diff)


class _OutputParser:
    """The ```` ```text ```` blocks a paragraph ending in ``prints:`` introduces."""

    def __init__(self) -> None:
        self._lexer = FencedCodeBlockLexer(language="text", mapping={"source": "source"})

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self._lexer(document):
            before = document.text[: region.start].rstrip("\n")
            if _SHOWS_OUTPUT.search(before):
                region.parsed = region.lexemes["source"]
                region.evaluator = _check_output
                yield region


pytest_collect_file = Sybil(
    parsers=[
        CodeBlockParser(language="python", evaluator=_run_python),
        _OutputParser(),
        SkipParser(),
    ],
    patterns=["README.md", "docs/*.md"],
    # the API page's blocks are signatures, not code to run: tests/test_api_page.py checks them
    excludes=["api.md"],
    setup=_set_up,
    teardown=_tear_down,
).pytest()
