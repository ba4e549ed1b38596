"""``dsh-tools bench``: the benchmark of :mod:`dsh_tools.cli.bench` with a progress bar and a
``rich`` table of the ratios.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dsh_tools.cli import bench

__all__ = ["main_bench", "render_report"]


def _ratio(value: float, good: float, fair: float) -> str:
    colour = "green" if value <= good else "yellow" if value <= fair else "red"
    return f"[{colour}]{value:.2f}x[/{colour}]"


def _spread(spread: dict[str, float] | None, fastest: float) -> str:
    """The median and how far the rounds strayed from it (the larger side, in percent): short
    enough for 80 columns, and honest that one number is not the whole story.
    """
    if not spread or not spread["median"]:
        return f"{fastest:.2f}"
    median = spread["median"]
    stray = max(spread["max"] - median, median - spread["min"]) / median * 100
    return f"{median:.2f} ±{stray:.0f}%"


def render_report(report: dict[str, Any]) -> list[Table]:
    """The report as tables: overhead per N, overlap and barriers, memory."""
    overhead = Table(
        title="Per-call overhead: CPU µs per call, the median ±how far rounds strayed "
        "(lower is better; the ratios compare the fastest rounds)",
        title_justify="left",
    )
    for column in ("N", "ours", "bare nursery", "loads+checks"):
        overhead.add_column(column, justify="right", no_wrap=True)
    overhead.add_column("vs bare", justify="right", no_wrap=True)
    overhead.add_column("vs hand", justify="right", no_wrap=True)
    overhead.add_column("", no_wrap=True)
    for n, row in report["overhead"]["per_n"].items():
        spread = row.get("spread", {})
        overhead.add_row(
            f"{int(n):,}",
            *(
                _spread(spread.get(name), row[f"{name}_us_per_call"])
                for name in ("scheduler", "bare_nursery", "hand_rolled")
            ),
            _ratio(row["ratio_to_bare"], 4, 8),
            _ratio(row["ratio_to_hand_rolled"], 3, 6),
            "[red]noisy[/red]" if row.get("noisy") else "",
        )

    timing = Table(
        title="Parallelism (real clock, bodies sleep 10 ms; peak = bodies in flight at once)",
        title_justify="left",
    )
    for column in ("batch", "wall ms", "ideal", "vs ideal", "overlap", "peak"):
        timing.add_column(column, justify="right" if column != "batch" else "left", no_wrap=True)
    for cap in ("cap_100", "cap_10"):
        row = report["overlap"][cap]
        timing.add_row(
            f"100 sleeps, {cap.replace('_', ' ')}",
            f"{row['wall_ms']:.1f}",
            f"{row['ideal_ms']:.0f}",
            _ratio(row["ratio_to_ideal"], 1.5, 3),
            f"{row['overlap']:.1f}x",
            str(row["peak_in_flight"]),
        )
    barrier = report["barriers"]
    timing.add_row(
        "5 x (4 pool + 1 barrier)",
        f"{barrier['wall_ms']:.1f}",
        f"{barrier['ideal_ms']:.0f}",
        _ratio(barrier["ratio_to_ideal"], 1.5, 3),
        "",
        str(barrier["peak_in_flight"]),
    )

    stream = Table(
        title="Streaming dispatch (virtual clock: 8 calls streamed over 2 s)",
        title_justify="left",
    )
    for column in ("tools", "collect, then run", "call stream", "ideal", "speedup"):
        stream.add_column(column, justify="right" if column != "tools" else "left")
    for label, text in (("even", "1 s each"), ("long_first", "2 s first, 0.25 s others")):
        row = report["streaming"][label]
        stream.add_row(
            text,
            f"{row['collect_then_run_s']:.2f} s",
            f"{row['streamed_s']:.2f} s",
            f"{row['ideal_s']:.2f} s",
            f"{row['speedup']:.2f}x",
        )

    memory = report["memory"]
    mem = Table(
        title=f"Memory per in-flight call ({memory['in_flight_calls']:,} at once, tracemalloc)",
        title_justify="left",
    )
    for column in ("run_tool_calls", "loads + checks", "bare trio task", "added", "ratio"):
        mem.add_column(column, justify="right")
    mem.add_row(
        f"{memory['scheduler_bytes_per_call']:,} B",
        f"{memory['hand_rolled_bytes_per_call']:,} B",
        f"{memory['bare_task_bytes']:,} B",
        f"{memory['added_bytes_per_call']:,} B",
        _ratio(memory["ratio_to_hand_rolled"], 2, 4),
    )
    return [overhead, timing, stream, mem]


def main_bench(*, quick: bool, console: Console | None = None) -> int:
    """Run the benchmark with a progress bar, then print the tables."""
    console = console if console is not None else Console()
    with Progress(
        TextColumn("[bold]benchmark[/bold] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        config = bench.QUICK if quick else bench.FULL
        task = progress.add_task("starting", total=bench.steps(config))

        def advance(label: str) -> None:
            progress.update(task, advance=1, description=label)

        report = bench.run(config, progress=advance)
    console.print(
        f"dsh-tools bench: Python {report['python']} on {report['machine']}"
        + (" (quick)" if quick else "")
    )
    for table in render_report(report):
        console.print(table)
    console.print(
        "Ratios: run_tool_calls' cost over the floor (1.00x = free); 'vs hand' is against a "
        "nursery doing json.loads + hand checks. The barrier batch: "
        f"{report['barriers']['shape']}. Wall-clock numbers on a shared machine move by "
        "30-50% between runs: a row marked noisy strayed too far to trust its ratios, and "
        "only ratios measured in one sitting compare. Read the docs page 'Benchmarking "
        "parallel dispatch' for what each floor includes."
    )
    return 0
