"""Scheduler benchmarks: the measurements of ``dsh-tools bench`` (:mod:`dsh_tools.cli.bench`),
judged against the project's targets.

Targets:
- overhead: at most 3x the hand-rolled loop (``json.loads`` + hand validation in a nursery) at
  N = 1000 and 10000, and a per-call cost that stays flat (within 1.5x) from N = 100 to 10000;
- overlap: 100 calls sleeping 10 ms finish in under 20 ms with cap 100, in 90-130 ms with cap 10;
- barriers: the mixed batch within 1.5x of its ideal wall time;
- memory: at most 2 KiB that the registry and the scheduler add per in-flight call.
"""

from __future__ import annotations

import json
from typing import Any

from dsh_tools.cli import bench


def run(quick: bool) -> dict[str, object]:
    report: dict[str, Any] = bench.run(bench.QUICK if quick else bench.FULL)
    per_n = report["overhead"]["per_n"]
    flatness = per_n["10000"]["scheduler_us_per_call"] / per_n["100"]["scheduler_us_per_call"]
    overlap = report["overlap"]
    memory = report["memory"]
    targets = {
        "overhead_ratio_met": per_n["1000"]["ratio_to_hand_rolled"] <= 3
        and per_n["10000"]["ratio_to_hand_rolled"] <= 3,
        "overhead_flat_met": flatness <= 1.5,
        "overlap_cap_100_met": overlap["cap_100"]["wall_ms"] < 20,
        "overlap_cap_10_met": 90 <= overlap["cap_10"]["wall_ms"] <= 130,
        "barriers_met": report["barriers"]["ratio_to_ideal"] <= 1.5,
        "memory_added_met": memory["added_bytes_per_call"] <= 2048,
    }
    return {
        "overhead": report["overhead"],
        "flatness_10000_vs_100": round(flatness, 2),
        "overlap": overlap,
        "barriers": report["barriers"],
        "memory": memory,
        "targets": targets,
    }


if __name__ == "__main__":
    import sys

    print(json.dumps(run("--quick" in sys.argv), indent=2))
