"""The "Asking the user" page's example runs and prints exactly what the page shows."""

from __future__ import annotations

import pytest

from support import load_example


async def test_the_approval_example_prints_outcomes_and_the_audit_trail(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/asking-the-user.md", "Ask the user before a call runs: UserApp").main()

    expected = [
        "c1: wrote notes.md",
        'c2: Error: the user rejected tool "write"',
        'c3: Error: the user rejected tool "write"',
        "policy now: never",
        "asked    c1 write: changes a file",
        "decided  allowed-once",
        "asked    c2 write: changes a file",
        "decided  rejected",
        "policy   never",
        "asked    c3 write: changes a file",
        "decided  rejected",
    ]
    assert expected == capsys.readouterr().out.splitlines()
