"""Run the benchmarks and print one JSON document.

Each ``benchmarks/bench_<area>.py`` defines ``run(quick: bool) -> dict[str, object]`` returning
JSON-serializable measurements (and the targets they are judged against).

Usage: ``python -m benchmarks [--quick] [AREA ...]`` (e.g. ``python -m benchmarks json``).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    wanted = [a for a in argv if not a.startswith("--")]
    here = Path(__file__).parent
    areas = sorted(
        info.name.removeprefix("bench_")
        for info in pkgutil.iter_modules([str(here)])
        if info.name.startswith("bench_")
    )
    unknown = sorted(set(wanted) - set(areas))
    if unknown:
        print(f"unknown benchmark area(s): {', '.join(unknown)}; known: {', '.join(areas)}")
        return 2
    report: dict[str, object] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "quick": quick,
    }
    results: dict[str, object] = {}
    for area in wanted or areas:
        module = importlib.import_module(f"benchmarks.bench_{area}")
        started = time.perf_counter()
        results[area] = module.run(quick)
        print(f"# {area}: {time.perf_counter() - started:.1f}s", file=sys.stderr)
    report["results"] = results
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
