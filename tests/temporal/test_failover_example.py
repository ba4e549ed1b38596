"""examples/temporal_failover.py end to end: two worker processes, one killed with SIGKILL (or
stopped with SIGTERM past its drain timeout) mid-batch, the other finishing the batch from the
PostgreSQL log."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support import ROOT


def _example(dsn: str, temporal_address: str, *flags: str) -> tuple[list[str], dict[str, str]]:
    """The example's output lines (it exited 0), and how often each call's body started."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "temporal_failover.py"), *flags],
        env=os.environ | {"DATABASE_URL": dsn, "TEMPORAL_ADDRESS": temporal_address},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    return lines, {line.split()[0]: line.split()[4] for line in lines if line.startswith("  c")}


@pytest.mark.parametrize("flags", [[], ["--drain"]], ids=["SIGKILL", "SIGTERM past the drain"])
def test_the_failover_example_finishes_the_batch_on_the_other_worker(
    dsn: str, temporal_address: str, flags: list[str]
) -> None:
    lines, starts = _example(dsn, temporal_address, *flags)
    assert lines[-1].startswith("OK: the other worker finished the batch")
    # the interrupted crawl is idempotent: it runs again there, the fifth call for the first time
    assert {"c1": "1x", "c2": "1x", "c3": "1x", "c4": "2x", "c5": "1x"} == starts
    assert any(line.startswith("failover: ") for line in lines)
    if flags:
        said = next(line for line in lines if line.startswith("worker w"))
        # the stopped worker said it drained, and which batch it left to the other one
        assert ["worker.drain", "batch.left"] == [
            word for word in said.split() if word in ("worker.drain", "batch.left")
        ], said


def test_a_database_restart_mid_batch_costs_no_result_and_moves_no_batch(
    dsn: str, temporal_address: str
) -> None:
    # the runner's watch sees the session's lock gone while the database restarts, but the
    # worker keeps heartbeating: it keeps the batch, and stores its held result once the
    # server is back (the report is not idempotent: moved, it would be TOOL_INTERRUPTED)
    lines, starts = _example(dsn, temporal_address, "--restart-db")
    assert lines[-1].startswith("OK: the worker held its results across the restart")
    assert dict.fromkeys(["c1", "c2", "c3", "c4", "c5"], "1x") == starts
