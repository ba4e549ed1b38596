"""The scripted demo (``dsh-tools demo``): its timeline, its outcomes, its session log."""

from __future__ import annotations

import functools
import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest
import trio
import trio.testing

from dsh_tools import (
    ApprovalDecidedEvent,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    BatchCallEvent,
    CancelController,
    DiffCallView,
    DiffResultView,
    FileDiff,
    FileLocation,
    GenericCallView,
    GenericResultView,
    MemorySessionLog,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallEvent,
    ToolCallKind,
    ToolCallRequest,
    ToolPresenter,
    ToolProgressEvent,
    ToolResultEvent,
    ToolResultView,
    TurnEndEvent,
    TurnStartEvent,
    read_session_log,
    run_tool_calls,
)
from dsh_tools.__main__ import main
from dsh_tools.cli import demo as cli_demo
from dsh_tools.cli import demo_tools, plain_demo
from dsh_tools.cli._loading import load_registry
from dsh_tools.cli.demo import DemoBatch, outcome, run_demo
from dsh_tools.cli.demo_tools import Workspace, build_registry, hunks


def run_on_virtual_time() -> tuple[list[DemoBatch], MemorySessionLog]:
    session = MemorySessionLog()
    batches = trio.run(run_demo, session, clock=trio.testing.MockClock(autojump_threshold=0))
    return batches, session


def outcomes(demo: DemoBatch) -> list[str]:
    return [
        outcome(result, call.call_id in demo.spans)
        for call, result in zip(demo.calls, demo.batch.results, strict=True)
    ]


def test_batch_1_shows_a_pool_a_barrier_a_timeout_invalid_arguments_and_a_denial() -> None:
    batches, _session = run_on_virtual_time()
    expected = ["ok", "ok", "ok", "TOOL_TIMEOUT", "ok", "ok", "INVALID_ARGS", "denied"]
    assert expected == outcomes(batches[0])


def test_batch_1_timeline_rolls_the_pool_and_runs_the_write_alone() -> None:
    batches, _session = run_on_virtual_time()
    expected = {
        "c1": (0.0, 0.4),
        "c2": (0.0, 0.8),
        "c3": (0.0, 0.6),
        "c4": (0.4, 1.4),  # takes c1's slot; times out after 1 s
        "c5": (1.4, 1.7),  # the exclusive write waits for the pool to drain
        "c6": (1.7, 1.9),
        # c7's arguments are invalid: rejected before any policy, its body never runs
    }
    spans = {k: (round(a, 6), round(b, 6)) for k, (a, b) in batches[0].spans.items()}
    assert expected == spans


def test_a_streamed_batch_1_starts_each_call_when_the_model_has_written_it() -> None:
    session = MemorySessionLog()
    batches = trio.run(
        functools.partial(run_demo, session, stream=True),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    spans = {k: (round(a, 6), round(b, 6)) for k, (a, b) in batches[0].spans.items()}

    # call k arrives at k * 0.1 s: c2 and c3 start on arrival, c4 waits for a slot of the
    # pool of three, the write waits for the pool to drain; the outcomes are the listed ones
    assert {
        "c1": (0.0, 0.4),
        "c2": (0.1, 0.9),
        "c3": (0.2, 0.8),
        "c4": (0.4, 1.4),
        "c5": (1.4, 1.7),
        "c6": (1.7, 1.9),
    } == spans
    assert ["ok", "ok", "ok", "TOOL_TIMEOUT", "ok", "ok", "INVALID_ARGS", "denied"] == outcomes(
        batches[0]
    )
    assert 8 == sum(isinstance(e, BatchCallEvent) for e in session.events())


def test_batch_2_is_interrupted_by_the_user() -> None:
    batches, _session = run_on_virtual_time()
    expected = ["ok", "ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert expected == outcomes(batches[1])
    assert pytest.approx(1.0) == batches[1].duration


def test_the_write_defers_a_context_that_follows_the_results() -> None:
    batches, session = run_on_virtual_time()
    assert len(batches[0].batch.contexts) == 1
    assert (
        type(
            [e for e in session.events() if not isinstance(e, ToolProgressEvent)][17]
        ).__name__.replace("ContextMessageEvent", "context/message")
        == "context/message"
    )


def test_the_session_log_balances_every_call_with_one_result() -> None:
    _batches, session = run_on_virtual_time()
    events = session.events()
    calls = [e.call_id for e in events if isinstance(e, ToolCallEvent)]
    results = [e.call_id for e in events if isinstance(e, ToolResultEvent)]
    expected = ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "d1", "d2", "d3", "d4"]
    assert expected == calls
    assert expected == results
    assert len(events) == 38  # two batches, each bracketed by batch/start and batch/end, and
    # the progress of the two searches


def test_main_prints_the_timeline_and_the_log_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "demo.jsonl"
    assert main(["demo", "--plain", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"session log (38 events): {log}" in out
    assert "  c4   fetch_url  |        ====================           | 0.40s - 1.40s" in out
    assert 'c7   INVALID_ARGS             Error: invalid arguments: "path" must be a string' in out


def test_the_demo_runs_as_a_command_and_names_every_outcome(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "dsh_tools", "demo", "--plain", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    for label in (
        " ok ",
        "TOOL_TIMEOUT",
        "INVALID_ARGS",
        "denied",
        " ABORTED ",
        "ABORTED_BEFORE_DISPATCH",
        "Error: tool call timed out after 1000ms",
        "Error: write_file may only write inside the workspace, not /etc/passwd",
        "Error: tool call aborted before dispatch",
    ):
        assert label in done.stdout
    assert len(read_session_log(log)) == 38


def test_the_command_line_requires_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


# --- presentation and --ask ---------------------------------------------------------------


def test_every_call_of_the_default_demo_has_a_call_and_a_result_card() -> None:
    batches, _session = run_on_virtual_time()
    c1_call, c1_result = batches[0].views["c1"]
    c5_call, c5_result = batches[0].views["c5"]

    assert {"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"} == set(batches[0].views)
    assert (
        GenericCallView(
            title="Read README.md",
            kind=ToolCallKind.READ,
            locations=[FileLocation(path="/workspace/README.md")],
        )
        == c1_call
    )
    assert (
        GenericResultView(content=[TextBlock(text="# demo-app\nA tiny app to show dsh-tools.\n")])
        == c1_result
    )
    assert isinstance(c5_call, DiffCallView)
    assert (
        DiffResultView(
            title="Wrote NOTES.md",
            diffs=[
                FileDiff(
                    path="/workspace/NOTES.md",
                    old_text=None,
                    new_text="TODO: error handling in src/app.py",
                )
            ],
        )
        == c5_result
    )
    # invalid arguments: the tool's presenter declines, the generic card shows the raw input
    c7_call, _ = batches[0].views["c7"]
    assert (
        GenericCallView(title="read_file", kind=ToolCallKind.OTHER, raw_input={"path": 42})
        == c7_call
    )


def test_hunks_of_an_edit_keep_one_line_of_context_around_each_change() -> None:
    old = "".join(f"line {n}\n" for n in range(1, 11))
    new = old.replace("line 2\n", "line two\n").replace("line 9\n", "")

    expected = (
        FileDiff(
            path="/w/f", old_text="line 1\nline 2\nline 3\n", new_text="line 1\nline two\nline 3\n"
        ),
        FileDiff(path="/w/f", old_text="line 8\nline 9\nline 10\n", new_text="line 8\nline 10\n"),
    )
    assert expected == hunks("/w/f", old, new)


def test_hunks_of_a_new_file_are_the_whole_file() -> None:
    assert (FileDiff(path="/w/f", old_text=None, new_text="x\n"),) == hunks("/w/f", None, "x\n")


def test_hunks_of_an_unchanged_file_are_empty() -> None:
    assert () == hunks("/w/f", "same\n", "same\n")


def test_the_ask_mode_asks_for_writes_and_commands_and_shows_terminal_and_diff_cards() -> None:
    answers = iter(
        [ApprovalOutcome.ALLOWED_ONCE, ApprovalOutcome.REJECTED]
        + [ApprovalOutcome.ALLOWED_ONCE] * 3
    )
    asked: list[str] = []

    async def answerer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        asked.append(f"{request.call_id} {request.tool_name}: {request.reason}")
        await trio.lowlevel.checkpoint()
        return next_answer()

    def next_answer() -> ApprovalOutcome:
        return next(answers)

    session = MemorySessionLog()
    batches = trio.run(
        functools.partial(run_demo, session, ask=True, answerer=answerer),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )

    expected_asked = [
        "c5 write_file: changes the workspace",
        "c8 write_file: changes the workspace",
        "e1 run_command: runs a command",
        "e2 write_file: changes the workspace",
        "e3 run_command: runs a command",
    ]
    assert expected_asked == asked
    assert ["ok", "ok", "ok", "TOOL_TIMEOUT", "ok", "ok", "INVALID_ARGS", "denied"] == outcomes(
        batches[0]
    )
    assert 'Error: the user rejected tool "write_file"' == _text_of(batches[0], 7)
    e1_call, e1_result = batches[2].views["e1"]
    _, e2_result = batches[2].views["e2"]
    assert TerminalCallView(title="grep TODO", cwd="/workspace") == e1_call
    assert isinstance(e1_result, TerminalResultView)
    assert 0 == e1_result.exit_code
    expected_diff = DiffResultView(
        title="Wrote src/app.py",
        diffs=[
            FileDiff(
                path="/workspace/src/app.py",
                old_text="def main():\n    # TODO: handle errors\n    print('hello')\n",
                new_text="def main():\n    try:\n        print('hello')\n"
                "    except OSError as exc:\n        print(exc)\n",
            )
        ],
    )
    assert expected_diff == e2_result
    events = session.events()
    assert (TurnStartEvent(turn=0), TurnEndEvent(turn=0)) == (events[0], events[-1])
    decided = [e.outcome.value for e in events if isinstance(e, ApprovalDecidedEvent)]
    assert ["allowed-once", "rejected", "allowed-once", "allowed-once", "allowed-once"] == decided


def _text_of(demo: DemoBatch, index: int) -> str:
    block = demo.batch.results[index].content[0]
    assert isinstance(block, TextBlock)
    return block.text


def test_a_command_that_fails_shows_its_exit_code() -> None:
    workspace = Workspace(files={"a.txt": "x\n"}, latency={})
    registry = build_registry(workspace)
    presenter = ToolPresenter(registry)

    async def run() -> ToolResultView:
        session = MemorySessionLog()
        await run_tool_calls(
            registry,
            [
                ToolCallRequest(
                    call_id="r1", name="run_command", arguments='{"command": "cat nope"}'
                )
            ],
            signal=CancelController().signal,
            session=session,
        )
        _start, call, result, _end = session.events()
        assert isinstance(call, ToolCallEvent)
        assert isinstance(result, ToolResultEvent)
        presenter.present_call(call)
        return presenter.present_result(result)

    view = trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))

    assert TerminalResultView(output="cat: nope: No such file or directory\n", exit_code=1) == view


def _run_ask_demo(tmp_path: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_tools", "demo", "--ask", "--log", str(tmp_path / "a.jsonl")],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_ask_mode_reads_the_answers_from_stdin(tmp_path: Path) -> None:
    done = _run_ask_demo(tmp_path, "y\nno\nwhat?\nyes\nY\n\n")

    assert (done.returncode, done.stderr) == (0, "")
    prompts = done.stdout.count("[y/N/a/e] ")
    assert 6 == prompts  # "what?" is asked again
    assert 'c8   denied                   Error: the user rejected tool "write_file"' in done.stdout
    assert (
        "  e1   terminal $ grep TODO (in /workspace) -> terminal exit 0, 3 lines of output"
        in done.stdout
    )
    assert "  e2   diff [Write src/app.py] -> diff: 1 hunk(s), 5 new line(s)" in done.stdout
    assert (
        'e3   denied                   Error: the user rejected tool "run_command"' in done.stdout
    )


def test_the_ask_mode_without_input_has_no_approval_channel(tmp_path: Path) -> None:
    done = _run_ask_demo(tmp_path, "")

    assert (done.returncode, done.stderr) == (0, "")
    assert (
        'c5   denied                   Error: tool "write_file" requires approval, but'
        in done.stdout
    )
    lines = (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()
    decided = [
        event["outcome"] for event in map(json.loads, lines) if event["type"] == "approval/decided"
    ]
    assert ["unavailable"] * 5 == decided


# --- the old module name ------------------------------------------------------------------

OLD_NAMES = [
    "DemoAgent",
    "DemoBatch",
    "build_registry",
    "default_log_path",
    "demo_registry",
    "execution_text",
    "first_line",
    "hunks",
    "main_demo",
    "open_file_log",
    "run_demo",
    "sample_workspace",
]


def _import_old_demo() -> ModuleType:
    sys.modules.pop("dsh_tools.demo", None)  # a fresh import: the warning is issued once per import
    return importlib.import_module("dsh_tools.demo")


def test_importing_the_old_demo_module_warns_once_naming_its_new_place() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _import_old_demo()

    expected = [
        (
            DeprecationWarning,
            "dsh_tools.demo is deprecated: the demo moved to dsh_tools.cli.demo "
            "(its tools to dsh_tools.cli.demo_tools, its printed view to "
            "dsh_tools.cli.plain_demo)",
        )
    ]
    assert expected == [(warning.category, str(warning.message)) for warning in caught]


def test_the_old_demo_module_gives_every_name_it_listed_from_the_new_modules() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = _import_old_demo()
    new = [cli_demo, demo_tools, plain_demo]

    assert OLD_NAMES == sorted(old.__all__)
    assert [] == [
        name
        for name in OLD_NAMES
        if getattr(old, name) is not next(getattr(m, name) for m in new if hasattr(m, name))
    ]


def test_the_old_registry_path_still_loads_the_demo_registry_for_replay() -> None:
    sys.modules.pop("dsh_tools.demo", None)

    with pytest.warns(DeprecationWarning, match=r"^dsh_tools\.demo is deprecated"):
        registry = load_registry("dsh_tools.demo:demo_registry")

    assert ["fetch_url", "read_file", "run_command", "search", "write_file"] == sorted(
        schema.name for schema in registry.schemas()
    )
