"""The concepts page's quickstart and the README's agent loop run as documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, example_source, load_example

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
    await load_example("docs/concepts.md", "Quickstart: define a tool, register it,").main()

    assert capsys.readouterr().out.splitlines() == EXPECTED_OUTPUT


def test_the_concepts_page_shows_the_quickstart_s_real_output() -> None:
    assert "\n".join(EXPECTED_OUTPUT) + "\n" in _fenced_blocks(
        ROOT / "docs" / "concepts.md", "text"
    )


def _agent_loop_body() -> str:
    """The README's one Python block: the whole agent loop."""
    (block,) = _fenced_blocks(ROOT / "README.md", "python")
    assert block == example_source("README.md", "async def main")
    return block


def _stage_numbers(path: Path) -> list[int]:
    (diagram,) = [
        block for block in _fenced_blocks(path, "text") if "snapshot the arguments" in block
    ]
    return [int(match) for match in re.findall(r"^\s{1,3}(\d{1,2})\s{1,2}\S", diagram, flags=re.M)]


def test_the_concepts_page_numbers_the_stages_as_the_pipeline_page_does() -> None:
    expected = list(range(11))

    assert expected == _stage_numbers(ROOT / "docs" / "pipeline.md")
    assert expected == _stage_numbers(ROOT / "docs" / "concepts.md")


def test_the_readme_agent_loop_is_under_40_lines() -> None:
    assert len(_agent_loop_body().splitlines()) < 40


def test_the_readme_agent_loop_runs_with_no_network_and_prints_what_the_readme_shows(
    tmp_path: Path,
) -> None:
    script = tmp_path / "agent_loop.py"
    script.write_text(_agent_loop_body(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )

    assert (0, "") == (done.returncode, done.stderr)
    assert done.stdout in _fenced_blocks(ROOT / "README.md", "text")
    assert "17 + 25 = 42\n" == done.stdout


def test_the_readme_starts_with_the_demo_and_the_test_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")

    assert readme.startswith(
        "# dsh-tools\n\n```console\n"
        "python -m pip install '.[cli]' && dsh-tools demo     "
        "# a scripted agent turn through the real pipeline, live\n"
        "python -m pip install nox && python -m nox -s tests   # run the whole test suite\n```\n"
    )
