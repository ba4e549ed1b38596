"""The "Showing tool calls" page's example runs and prints exactly what the page shows."""

from __future__ import annotations

import pytest

from support import load_example


async def test_the_presenter_example_prints_each_view(capsys: pytest.CaptureFixture[str]) -> None:
    await load_example("showing_tool_calls.py").main()

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
    assert expected == capsys.readouterr().out.splitlines()
