"""``dsh-tools demo --log`` to a path that cannot be opened prints one error line and exits 2,
instead of a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_tools.__main__ import main


def test_a_log_in_a_missing_folder_is_one_error_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "missing" / "x.jsonl"

    code = main(["demo", "--log", str(path)])

    err = capsys.readouterr().err
    assert 2 == code
    assert [f"dsh-tools demo: error: {path}: No such file or directory"] == err.splitlines()
    assert not path.parent.exists()
