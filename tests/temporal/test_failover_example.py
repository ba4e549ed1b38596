"""examples/temporal_failover.py end to end: two worker processes, one killed with SIGKILL
mid-batch, the other finishing the batch from the PostgreSQL log."""

from __future__ import annotations

import os
import subprocess
import sys

from support import ROOT


def test_the_failover_example_finishes_the_batch_on_the_other_worker(
    dsn: str, temporal_address: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "temporal_failover.py")],
        env=os.environ | {"DATABASE_URL": dsn, "TEMPORAL_ADDRESS": temporal_address},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert 0 == done.returncode, done.stdout + done.stderr
    assert lines[-1].startswith("OK: the other worker finished the batch")
    starts = {line.split()[0]: line.split()[4] for line in lines if line.startswith("  c")}
    assert {"c1": "1x", "c2": "1x", "c3": "1x", "c4": "2x", "c5": "1x"} == starts
    assert any(line.startswith("failover: ") for line in lines)
