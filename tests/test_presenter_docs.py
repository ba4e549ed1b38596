"""The "Showing tool calls" page's example runs and prints exactly what the page shows."""

from __future__ import annotations

import pytest

from support import ROOT, load_example


def _shown_on_the_page() -> str:
    page = (ROOT / "docs" / "showing-tool-calls.md").read_text(encoding="utf-8")
    return page.split("It prints:\n\n````text\n", 1)[1].split("````", 1)[0]


async def test_the_presenter_example_prints_each_view(capsys: pytest.CaptureFixture[str]) -> None:
    await load_example(
        "docs/showing-tool-calls.md", "Show tool calls: presenters on the tools"
    ).main()

    expected = [
        "c1 call   terminal $ ls",
        "c1 result terminal exit 0: '/w/app.py\\n'",
        "c2 call   diff None -> \"def main():\\n    print('bye')\\n\"",
        "c2 result diff \"def main():\\n    print('hi')\\n\" -> \"def main():\\n    print('bye')\\n\"",
        "c3 call   generic stat (other) {}",
        "c3 result generic 2 files",
        "```console",
        "app.py",
        "```",
    ]
    out = capsys.readouterr().out
    assert (expected, out) == (out.splitlines(), _shown_on_the_page())
