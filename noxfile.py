"""The one entry point for every check.

``nox`` runs the default sessions (tests, lint, typecheck, docs); ``nox -s bench`` runs the
benchmarks and prints one JSON document.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "docs"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (pytest + pytest-trio + Hypothesis) with branch coverage."""
    session.install("-e", ".[test,testing,cli]")
    session.run("coverage", "run", "-m", "pytest", *session.posargs)
    session.run("coverage", "report", "--fail-under=85")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and flake8-async's ASYNC910/ASYNC911 (ruff lacks them)."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("flake8", "--select=ASYNC910,ASYNC911", "src")


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
    """Run every benchmark in benchmarks/ and print one JSON document."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "benchmarks", *session.posargs)
