"""The "Security model" page's example runs and prints exactly what the page shows."""

from __future__ import annotations

import re

import pytest

from support import ROOT, load_example


async def test_a_wrapper_writing_through_dict_changes_what_the_body_sees_not_the_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/security.md", "In-process code is trusted: a wrapper ca").main()

    page = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    (shown,) = re.findall(r"^```text\n(.*?)^```$", page, flags=re.M | re.S)
    assert shown == capsys.readouterr().out
    assert "the body saw: deleted /etc\n" in shown
