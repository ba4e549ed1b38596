"""``dsh-tools replay``: a session log through the presenter, as a UI showed it live."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import trio
import trio.testing
from rich.console import Console

from dsh_tools import (
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    ContentBlock,
    GenericCallView,
    ImageBlock,
    JsonlSessionLog,
    TextBlock,
    ToolCallRequest,
    ToolCallView,
    ToolRegistry,
    ToolRunContext,
    read_session_log,
)
from dsh_tools.__main__ import main
from dsh_tools._values._media import format_size
from dsh_tools.cli.demo import run_demo
from dsh_tools.cli.replay import main_replay
from media_files import png
from support import registry_with, run_calls, tool


async def allow(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
    await trio.lowlevel.checkpoint()
    return ApprovalOutcome.ALLOWED_ONCE


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "demo.jsonl"
    with JsonlSessionLog(path) as session:
        trio.run(
            functools.partial(run_demo, session, ask=True, answerer=allow),
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
    return path


DEMO_REGISTRY = "dsh_tools.cli.demo_tools:demo_registry"


def replay(path: Path, registry: str | None = None) -> tuple[int, str, list[str]]:
    console = Console(width=100, record=True, color_system=None)
    errors: list[str] = []
    code = main_replay(path, registry=registry, console=console, err=errors.append)
    return code, console.export_text(), errors


def test_every_call_is_shown_as_its_tools_card_then_its_result(demo_log: Path) -> None:
    code, text, errors = replay(demo_log, DEMO_REGISTRY)

    assert (0, []) == (code, errors)
    for expected in (
        "c1 read: Read README.md",
        "@ /workspace/README.md",
        "c4 TOOL_TIMEOUT",
        "Error: tool call timed out after 1000ms",
        "c5 edit: Write NOTES.md",
        "+TODO: error handling in src/app.py",
        "e1 execute: grep TODO",
        "$ grep TODO",
        "exit 0",
        "d3 ABORTED_BEFORE_DISPATCH",
        "c7 other: read_file",
        '{"path":42}',
    ):
        assert expected in text


def test_without_a_registry_every_call_gets_the_generic_card_and_no_demo_path(
    demo_log: Path,
) -> None:
    code, text, errors = replay(demo_log)

    assert (0, []) == (code, errors)
    assert "c1 other: read_file" in text
    assert '{"path":"README.md"}' in text
    assert "c5 other: write_file" in text
    assert "e1 other: run_command" in text
    assert "/workspace/" not in text
    assert "c1 read: Read README.md" not in text


def test_a_result_diff_shows_the_hunks_of_the_edit(demo_log: Path) -> None:
    _code, text, _errors = replay(demo_log, DEMO_REGISTRY)
    e2 = text.index("e2 ok Wrote src/app.py")
    assert "-    # TODO: handle errors" in text[e2:]
    assert "+    try:" in text[e2:]


def test_turns_approvals_and_contexts_appear_in_log_order(demo_log: Path) -> None:
    _code, text, _errors = replay(demo_log)
    order = [
        "turn 0",
        "? approval asked for write_file (c5): changes the workspace",
        "approval allowed-once",
        "c5 ok",
        "context from demo-workspace: NOTES.md changed",
        "end of turn 0 (completed)",
    ]
    positions = [text.index(marker) for marker in order]
    assert sorted(positions) == positions
    assert f"{demo_log}: {len(read_session_log(demo_log))} events" in text


def test_long_output_is_cut_with_a_count_of_the_rest(demo_log: Path) -> None:
    _code, text, _errors = replay(demo_log, DEMO_REGISTRY)
    assert "logs/build.log:12: step 1 ok" in text
    assert "logs/build.log:13: step 1 ok" not in text
    assert "... 188 more lines" in text


def test_a_huge_one_line_result_and_huge_arguments_are_cut_to_what_a_screen_shows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "huge.jsonl"
    registry = registry_with(tool("t", lambda args, context: "x" * 16_000_000))
    with JsonlSessionLog(path) as session:
        trio.run(
            functools.partial(
                run_calls,
                registry,
                ToolCallRequest(call_id="c1", name="t", arguments=f'{{"a": "{"y" * 5_000_000}"}}'),
                session=session,
            )
        )

    code, text, errors = replay(path)

    assert (0, []) == (code, errors)
    assert "... 15999600 more characters" in text
    assert len(text) < 20_000  # both cards hold a screenful, not megabytes


def test_many_short_lines_are_cut_with_a_count_of_the_rest_and_crlf_reads_as_one_end(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lines.jsonl"
    output = "\r\n".join(f"line {n}" for n in range(100)) + "\r\n"
    registry = registry_with(tool("t", lambda args, context: output))
    with JsonlSessionLog(path) as session:
        trio.run(
            functools.partial(
                run_calls,
                registry,
                ToolCallRequest(call_id="c1", name="t", arguments="{}"),
                session=session,
            )
        )

    _code, text, _errors = replay(path)

    assert "line 11" in text
    assert "line 12" not in text
    assert "... 88 more lines" in text
    assert "\\r" not in text


def test_a_torn_last_line_is_skipped_and_the_file_is_not_touched(
    demo_log: Path, tmp_path: Path
) -> None:
    torn = tmp_path / "torn.jsonl"
    data = demo_log.read_bytes() + b'{"type": "tool/ca'
    torn.write_bytes(data)

    assert len(read_session_log(demo_log)) == len(read_session_log(torn))
    assert data == torn.read_bytes()


def test_a_corrupt_line_names_its_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "turn/start", "turn": 0}\n{"type": "nope"}\n')

    code, _text, errors = replay(path)

    assert 1 == code
    assert 1 == len(errors)
    assert errors[0].startswith(f"dsh-tools replay: {path}, line 2: not a session event")


def test_a_missing_log_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 1 == main(["replay", str(tmp_path / "none.jsonl")])
    assert "dsh-tools replay: [Errno 2] No such file or directory" in capsys.readouterr().err


def present_greeting(args: object) -> ToolCallView:
    return GenericCallView(title="Say hello nicely")


async def greet(args: object, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()
    return "hello"


def make_registry() -> ToolRegistry:
    return registry_with(tool("greet", greet, description="greets", present_call=present_greeting))


def test_a_registry_named_on_the_command_line_draws_its_own_cards(tmp_path: Path) -> None:
    path = tmp_path / "greet.jsonl"
    path.write_text(
        '{"type":"tool/call","turn":0,"step":0,"callId":"g1","name":"greet","arguments":"{}"}\n'
        '{"type":"tool/result","turn":0,"step":0,"callId":"g1",'
        '"content":[{"type":"text","text":"hello"}],"isError":false,"sourceEventSeqs":[0]}\n'
    )

    _code, with_registry, _ = replay(path, registry=f"{__name__}:make_registry")
    _code, without, _ = replay(path)

    assert "g1 other: Say hello nicely" in with_registry
    assert "g1 other: greet" in without  # the presenter's generic fallback


def test_a_registry_that_is_not_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    code, _text, errors = replay(path, registry=f"{__name__}:NOT_A_REGISTRY")
    assert 1 == code
    assert [
        f"dsh-tools replay: {__name__}:NOT_A_REGISTRY is not a ToolRegistry "
        "(nor a function returning one)"
    ] == errors


NOT_A_REGISTRY = 42


def test_a_picture_in_a_result_is_described_with_its_type_dimensions_and_size(
    tmp_path: Path,
) -> None:
    image = png(640, 480)
    registry = ToolRegistry()

    @registry.tool
    def screenshot() -> list[ContentBlock]:
        """A screenshot."""
        return [TextBlock(text="the app"), ImageBlock(media_type="image/png", data=image)]

    path = tmp_path / "shots.jsonl"
    with JsonlSessionLog(path) as session:
        trio.run(
            functools.partial(
                run_calls,
                registry,
                ToolCallRequest(call_id="s1", name="screenshot", arguments="{}"),
                session=session,
            )
        )
    code, text, errors = replay(path)

    assert (0, []) == (code, errors)
    assert "the app" in text
    assert f"[image/png 640x480, {format_size(len(image))}]" in text
    assert "iVBOR" not in text  # never the bytes
