"""The quickstart example shared by the concepts page and the README runs as documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support import EXAMPLES, ROOT, load_example

EXAMPLE = EXAMPLES / "quickstart.py"

EXPECTED_OUTPUT = [
    '{"name":"greet","description":"Greet someone.","parameters":{"type":"object","properties":'
    '{"name":{"type":"string","description":"Who to greet."},"excited":{"type":"boolean",'
    '"default":false}},"required":["name"]}}',
    '{"content":[{"type":"text","text":"Hello, Ada!"}],"isError":false}',
    '{"content":[{"type":"text","text":"Error: invalid arguments: \\"name\\" must be a string"}],'
    '"isError":true,"error":{"name":"ToolArgsError","code":"INVALID_ARGS"}}',
]


def _fenced_blocks(path: Path, language: str) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.M | re.S)


async def test_the_quickstart_prints_the_schema_a_success_and_an_argument_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("quickstart.py").main()

    assert capsys.readouterr().out.splitlines() == EXPECTED_OUTPUT


def test_the_concepts_page_shows_the_quickstart_s_real_output() -> None:
    assert "\n".join(EXPECTED_OUTPUT) + "\n" in _fenced_blocks(
        ROOT / "docs" / "concepts.md", "text"
    )


def test_the_readme_shows_the_quickstart_s_real_output() -> None:
    assert "\n".join(EXPECTED_OUTPUT) + "\n" in _fenced_blocks(ROOT / "README.md", "text")


def test_the_readme_example_is_the_quickstart_without_its_docstring() -> None:
    source = EXAMPLE.read_text(encoding="utf-8")
    body = source.split('"""', 2)[2].lstrip("\n")

    assert body in _fenced_blocks(ROOT / "README.md", "python")


def _stage_numbers(path: Path) -> list[int]:
    (diagram,) = [
        block for block in _fenced_blocks(path, "text") if "snapshot the arguments" in block
    ]
    return [int(match) for match in re.findall(r"^\s{1,3}(\d{1,2})\s{1,2}\S", diagram, flags=re.M)]


def test_the_concepts_page_numbers_the_stages_as_the_pipeline_page_does() -> None:
    expected = list(range(11))

    assert expected == _stage_numbers(ROOT / "docs" / "pipeline.md")
    assert expected == _stage_numbers(ROOT / "docs" / "concepts.md")
