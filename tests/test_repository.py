"""The repository stands on its own: no file points at documents kept outside it, and no merge
left its conflict markers behind."""

from __future__ import annotations

import re
from pathlib import Path

from support import ROOT

_TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml"}


def _text_files() -> list[Path]:
    roots = [ROOT / name for name in ("src", "tests", "docs", "examples", "benchmarks", ".ci")]
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "noxfile.py"]
    for root in roots:
        files.extend(
            path
            for path in root.rglob("*")
            if path.is_file()
            and (path.suffix in _TEXT_SUFFIXES or path.parent.name == ".ci")
            and "_build" not in path.parts
            and "__pycache__" not in path.parts
        )
    return sorted(files)


def _matching(pattern: re.Pattern[str]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _text_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_file_holds_a_merge_conflict_marker() -> None:
    assert [] == _matching(re.compile(r"^(<{7}|>{7}) |^={7}$"))


def test_no_file_points_at_design_notes_outside_the_repository() -> None:
    section = " " + "\u00a7"  # the pattern is built so that this file does not match it
    names = (
        "DESIGN" + r"\.md",
        "STYLE" + r"\.md",
        "upstream" + section,
        "DESIGN" + section,
        "upstream" + "-behaviour",
        "seed" + "/tools",
    )
    outside = re.compile("|".join((*names, r"\.\./" + "shared")))

    assert [] == _matching(outside)


def test_no_file_names_a_path_of_the_machine_it_was_written_on_or_a_registry_host() -> None:
    # built in pieces, so that this file does not match itself
    work = "/" + "work/"
    registries = ("pypi" + r"\.org", "files" + r"\.pythonhosted", "registry" + r"\.npmjs")
    outside = re.compile("|".join((r"(?<![\w.~])" + work, *registries)))

    assert [] == _matching(outside)
