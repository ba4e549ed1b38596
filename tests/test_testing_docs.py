"""The examples of "Testing your tools and hooks" and "Benchmarking parallel dispatch" run as
the pages say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio.testing

from dsh_tools import MemorySessionLog, ToolRegistry
from dsh_tools.cli.bench import BenchConfig
from support import ROOT, example_source, load_example


async def test_the_fault_injection_example_passes(
    registry: ToolRegistry,
    session_log: MemorySessionLog,
    autojump_clock: trio.testing.MockClock,
) -> None:
    example = load_example("docs/testing-your-tools.md", "Fault injection with dsh_tools.testing:")
    await example.test_cancelling_while_the_fetch_runs(registry, session_log, autojump_clock)


def test_the_fault_injection_example_runs_under_pytest_with_the_plugin_fixtures(
    tmp_path: Path,
) -> None:
    script = tmp_path / "test_fault_injection.py"
    script.write_text(
        example_source("docs/testing-your-tools.md", "Fault injection with dsh_tools.testing:"),
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "trio_mode=true",  # as the page asks
            f"--rootdir={tmp_path}",
            str(script),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_benchmark_example_prints_every_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = BenchConfig(sizes=(1, 10), work=10, rounds=1, in_flight=20)
    load_example("docs/benchmarking.md", "Run the parallel-dispatch benchmark from").main(tiny)
    lines = capsys.readouterr().out.splitlines()
    patterns = [
        r"N=1: [\d.]+ us per call = [\d.]+x a bare nursery, [\d.]+x json\.loads \+ hand checks",
        r"N=10: [\d.]+ us per call = [\d.]+x a bare nursery, [\d.]+x json\.loads \+ hand checks",
        r"100 calls sleeping 10 ms: \d+ ms, \d+x overlap",
        r"mixed barriers: [\d.]+x the ideal 100 ms",
        r"memory: -?\d+ bytes added per in-flight call",
    ]
    assert len(patterns) == len(lines)
    for pattern, line in zip(patterns, lines, strict=True):
        assert re.fullmatch(pattern, line), line


def test_the_property_snippet_runs_as_the_page_shows_it() -> None:
    page = (ROOT / "docs" / "testing-your-tools.md").read_text(encoding="utf-8")
    section = page.split("## Property tests", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}

    exec(compile(snippet, "testing-your-tools.md", "exec"), namespace)
    test = namespace["test_every_batch_keeps_the_invariants"]

    assert callable(test)
    test()  # the snippet's own imports suffice: Hypothesis runs its examples here
