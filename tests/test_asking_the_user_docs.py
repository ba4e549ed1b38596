"""The "Asking the user" page's first example wires approval in at most five lines (Sybil runs
the page's programs and checks what each prints; conftest.py)."""

from __future__ import annotations

import re

from support import example_source


def test_the_first_example_wires_approval_in_at_most_five_lines() -> None:
    source = example_source("docs/asking-the-user.md", "console_answerer()")
    wiring = [
        line.strip()
        for line in source.splitlines()
        if re.search(
            r"UserApproval\(|answerers\.add|ToolRegistry\(|pre_execute\.add|SessionLog\(", line
        )
    ]
    assert 5 == len(wiring), wiring
