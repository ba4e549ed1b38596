"""The ``dsh-tools`` command line: subcommands, the [cli] extra being optional, ``bench``'s
JSON and table, ``acp``'s install hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dsh_tools import BatchCallEvent, SqliteSessionLog, TurnStartEvent, read_session_log
from dsh_tools.__main__ import main
from dsh_tools.cli import bench
from dsh_tools.cli.bench_view import main_bench, render_report
from dsh_tools.cli.demo import default_log_path
from dsh_tools.cli.live_demo import main_live_demo
from dsh_tools.cli.replay import main_replay

WITHOUT_RICH = (
    "import sys; sys.modules['rich'] = None; "
    "from dsh_tools.__main__ import main; raise SystemExit(main(sys.argv[1:]))"
)


def run_without_rich(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RICH, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_plain_works_without_rich(tmp_path: Path) -> None:
    log = tmp_path / "demo.jsonl"
    done = run_without_rich("demo", "--plain", "--log", str(log))
    assert (0, "") == (done.returncode, done.stderr)
    assert "  c5   write_file |                            ======" in done.stdout
    assert 38 == len(read_session_log(log))


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (
            ["demo"],
            "`dsh-tools demo` needs the [cli] extra: python -m pip install "
            "'dsh-tools[cli]' (or `dsh-tools demo --plain`)",
        ),
        (
            ["bench"],
            "`dsh-tools bench` needs the [cli] extra: python -m pip install 'dsh-tools[cli]'",
        ),
        (
            ["replay", "x.jsonl"],
            "`dsh-tools replay` needs the [cli] extra: python -m pip install 'dsh-tools[cli]'",
        ),
    ],
)
def test_commands_that_need_rich_say_which_extra_to_install(
    argv: list[str], hint: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    assert 1 == main(argv)
    assert hint + "\n" == capsys.readouterr().err


def test_acp_hands_its_arguments_to_the_acp_main(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    seen: list[list[str]] = []
    fake = types.ModuleType("dsh_tools.acp")
    fake.main = lambda argv: seen.append(list(argv)) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dsh_tools.acp", fake)

    assert 7 == main(["acp", "--verbose", "x"])
    assert [["--verbose", "x"]] == seen


def test_the_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("demo", "bench", "replay", "acp"):
        assert f"    {command} " in out


TINY = bench.BenchConfig(sizes=(1, 10), work=20, rounds=1, in_flight=50)


@pytest.fixture(scope="module")
def tiny_report() -> dict[str, Any]:
    return bench.run(TINY)


def test_bench_reports_the_overhead_of_each_size_against_both_floors(
    tiny_report: dict[str, Any],
) -> None:
    rows = tiny_report["overhead"]["per_n"]
    assert ["1", "10"] == list(rows)
    for row in rows.values():
        for floor, ratio in (
            ("bare_nursery_us_per_call", "ratio_to_bare"),
            ("hand_rolled_us_per_call", "ratio_to_hand_rolled"),
        ):
            assert row[floor] > 0
            assert abs(row["scheduler_us_per_call"] / row[floor] - row[ratio]) < 0.05 * row[ratio]


def test_bench_reports_overlap_barriers_and_memory(tiny_report: dict[str, Any]) -> None:
    overlap = tiny_report["overlap"]
    assert {"cap_100", "cap_10"} == set(overlap)
    assert (10.0, 100.0) == (overlap["cap_100"]["ideal_ms"], overlap["cap_10"]["ideal_ms"])
    # 100 sleeping calls in one pool overlap: far less wall time than ten rounds of ten
    assert overlap["cap_100"]["wall_ms"] < overlap["cap_10"]["wall_ms"]
    assert (25, 100.0) == (tiny_report["barriers"]["calls"], tiny_report["barriers"]["ideal_ms"])
    # the timeline of one extra run: never more bodies at once than the cap allows, and the
    # barrier batch never more than its pools of four
    assert 1 <= overlap["cap_100"]["peak_in_flight"] <= 100
    assert 1 <= overlap["cap_10"]["peak_in_flight"] <= 10
    assert 1 <= tiny_report["barriers"]["peak_in_flight"] <= 4
    # the call stream's turn is the ideal (virtual clock: exact), faster than collect-then-run
    assert {
        "even": {
            "collect_then_run_s": 3.0,
            "streamed_s": 2.75,
            "ideal_s": 2.75,
            "speedup": 1.091,
        },
        "long_first": {
            "collect_then_run_s": 4.0,
            "streamed_s": 2.0,
            "ideal_s": 2.0,
            "speedup": 2.0,
        },
    } == tiny_report["streaming"]
    memory = tiny_report["memory"]
    assert 50 == memory["in_flight_calls"]
    assert (
        memory["added_bytes_per_call"]
        == (memory["scheduler_bytes_per_call"] - memory["hand_rolled_bytes_per_call"])
        or abs(
            memory["added_bytes_per_call"]
            - (memory["scheduler_bytes_per_call"] - memory["hand_rolled_bytes_per_call"])
        )
        <= 1
    )
    json.dumps(tiny_report)  # one JSON document


def test_progress_is_told_each_measurement_once() -> None:
    config = bench.BenchConfig(sizes=(1,), work=1, rounds=1, in_flight=10)
    steps: list[str] = []
    bench.run(config, progress=steps.append)
    assert [
        "overhead N=1",
        "overlap cap=100",
        "overlap cap=10",
        "barriers",
        "streaming",
        "memory",
    ] == steps
    assert bench.steps(config) == len(steps)


def test_the_bench_tables_fit_80_columns_without_cutting_a_number(
    tiny_report: dict[str, Any],
) -> None:
    console = Console(width=80, record=True, color_system=None)
    for table in render_report(tiny_report):
        console.print(table)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text  # rich cuts a cell it cannot fit with an ellipsis
    assert "%" in text  # how far the rounds strayed is shown


def test_the_bench_table_shows_the_ratios(tiny_report: dict[str, Any]) -> None:
    console = Console(width=160, record=True, color_system=None)
    for table in render_report(tiny_report):
        console.print(table)
    text = console.export_text()
    ratio = tiny_report["overhead"]["per_n"]["10"]["ratio_to_hand_rolled"]
    assert f"{ratio:.2f}x" in text
    assert "100 sleeps, cap 100" in text
    assert "5 x (4 pool + 1 barrier)" in text


def test_bench_json_prints_one_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "QUICK", TINY)
    assert 0 == main(["bench", "--json", "--quick"])
    report = json.loads(capsys.readouterr().out)
    assert (True, ["1", "10"]) == (report["quick"], list(report["overhead"]["per_n"]))


def test_bench_draws_a_progress_bar_then_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "QUICK", TINY)
    console = Console(width=160, record=True, force_terminal=True)
    assert 0 == main_bench(quick=True, console=console)
    text = console.export_text()
    assert "benchmark overhead N=1" in text  # the progress bar's description
    assert "Per-call overhead" in text
    assert "Memory per in-flight call (50 at once, tracemalloc)" in text


def test_the_live_demo_ends_with_what_the_model_received(tmp_path: Path) -> None:
    console = Console(width=120, record=True, color_system=None)
    log = tmp_path / "demo.jsonl"

    assert 0 == main_live_demo(log=log, console=console)

    text = console.export_text()
    assert "c4   TOOL_TIMEOUT             Error: tool call timed out after 1000ms" in text
    assert "d2   ABORTED                  Error: tool call aborted" in text
    # batch 1 was streamed: its 8 calls arrived as batch/call events (38 + 8)
    assert f"session log (46 events): {log}" in text
    assert 8 == sum(isinstance(e, BatchCallEvent) for e in read_session_log(log))


def test_the_demo_logs_to_sqlite_by_default_and_replay_reads_it(tmp_path: Path) -> None:
    log = tmp_path / "demo.db"

    demo = subprocess.run(
        [sys.executable, "-m", "dsh_tools", "demo", "--plain", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    replay = subprocess.run(
        [sys.executable, "-m", "dsh_tools", "replay", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "400"},
    )

    assert (0, "") == (demo.returncode, demo.stderr)
    assert 38 == len(SqliteSessionLog.read(log))
    assert (0, "") == (replay.returncode, replay.stderr)
    assert f"{log}: 38 events" in replay.stdout


def test_the_demo_s_default_log_is_a_sqlite_file() -> None:
    assert ".db" == default_log_path().suffix


def test_replay_of_a_session_a_sqlite_log_does_not_hold_is_a_clear_error(tmp_path: Path) -> None:
    log = tmp_path / "agent.db"
    with SqliteSessionLog(log, session_id="agent-1") as session:
        session.append(TurnStartEvent(turn=1))
    errors: list[str] = []

    code = main_replay(log, session="agent-2", console=Console(record=True), err=errors.append)

    assert (1, [f"dsh-tools replay: {log}: no session 'agent-2'"]) == (code, errors)


def test_bench_reports_cpu_time_with_its_spread_and_a_noise_verdict(
    tiny_report: dict[str, Any],
) -> None:
    overhead = tiny_report["overhead"]
    assert ("CPU time (process_time)", bench.NOISE_LIMIT) == (
        overhead["clock"],
        overhead["noise_limit"],
    )
    for row in overhead["per_n"].values():
        for name in ("scheduler", "bare_nursery", "hand_rolled"):
            spread = row["spread"][name]
            assert spread["min"] <= spread["median"] <= spread["max"]
            assert abs(row[f"{name}_us_per_call"] - spread["min"]) < 0.01
        noisy = any(
            spread["max"] > (1 + bench.NOISE_LIMIT) * spread["min"]
            for spread in row["spread"].values()
        )
        assert noisy == row["noisy"]


def test_the_bench_table_shows_the_spread_and_flags_a_noisy_size() -> None:
    row = {
        "scheduler_us_per_call": 10.0,
        "bare_nursery_us_per_call": 5.0,
        "hand_rolled_us_per_call": 6.0,
        "ratio_to_bare": 2.0,
        "ratio_to_hand_rolled": 1.67,
        "spread": {
            "scheduler": {"min": 10.0, "median": 11.0, "max": 19.0},
            "bare_nursery": {"min": 5.0, "median": 5.1, "max": 5.2},
            "hand_rolled": {"min": 6.0, "median": 6.1, "max": 6.2},
        },
        "noisy": True,
    }
    report = bench.run(TINY)
    report["overhead"]["per_n"] = {"1000": row}
    console = Console(width=200, record=True, color_system=None)

    for table in render_report(report):
        console.print(table)

    text = console.export_text()
    assert "11.00 ±73%" in text  # the median, and the larger stray (19 - 11) / 11
    assert "noisy" in text


def test_the_live_view_shows_a_running_calls_last_progress() -> None:
    from rich.console import Console

    from dsh_tools import TimelineSpan, ToolCallEvent, ToolProgressEvent
    from dsh_tools.cli.live_demo import DemoView

    view = DemoView()
    view.on_event(
        ToolCallEvent(turn=0, step=0, call_id="c3", name="search", arguments='{"query": "TODO"}')
    )
    view.on_span(TimelineSpan(call_id="c3", name="search", started=0.0, finished=None))
    view.on_event(
        ToolProgressEvent(
            turn=0, step=0, call_id="c3", message="searched docs/design.md", progress=2, total=4
        )
    )
    console = Console(width=200, record=True, color_system=None)
    console.print(view.render())

    assert "running: searched docs/design.md (2/4)" in console.export_text()
