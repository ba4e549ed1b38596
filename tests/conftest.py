"""Hypothesis profiles for the whole suite.

- ``dev`` (the default): Hypothesis's defaults, random seeds, the local example database.
- ``ci``: derandomized (the same examples on every run, so CI never fails by chance), no example
  database (nothing replays a failure found elsewhere), and a reproduction blob printed on
  failure. Nothing timing-dependent may fail it either: no per-example deadline and no
  ``too_slow`` health check (a loaded CI machine is slow by chance). ``nox -s tests`` selects it
  when the ``CI`` environment variable is set.
- ``thorough``: at least 5,000 examples per test with random seeds, no deadline; run by
  ``nox -s thorough`` to hunt for rare failures.

Select one with ``--hypothesis-profile=NAME`` or the ``HYPOTHESIS_PROFILE`` environment
variable. A test's own ``@settings(max_examples=...)`` still applies under every profile.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from support import postgres_dsn, stop_postgres

settings.register_profile("dev")
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=5_000, deadline=None, derandomize=False)

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def dsn() -> str:
    """The run's throwaway PostgreSQL cluster, with the session logs' schema (started on first
    use)."""
    return postgres_dsn()


@pytest.fixture(scope="session", autouse=True)
def _stop_the_postgres_cluster() -> Iterator[None]:
    """Stop the throwaway PostgreSQL cluster at the end of the run, if a test started it
    (``support.postgres_dsn``), also when the run fails.
    """
    yield
    stop_postgres()
