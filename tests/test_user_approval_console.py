"""console_answerer: y/n on a terminal, read in a worker thread (the real-stdin case is in
tests/test_demo.py, which pipes answers into ``dsh-tools demo --ask``)."""

from __future__ import annotations

import shlex
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    Approval,
    ApprovalOutcome,
    ApprovalRequest,
    CancelController,
    CancelSignal,
    DiffCallView,
    FileBlock,
    FileDiff,
    GenericCallView,
    ImageBlock,
    MemorySessionLog,
    TerminalCallView,
    TextBlock,
    TurnStartEvent,
    console_answerer,
    describe_call,
    snapshot_json,
)
from media_files import png
from support import approval_service


def _lines(*lines: str) -> tuple[Callable[[str], str], list[str]]:
    prompts: list[str] = []
    remaining = list(lines)

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        if not remaining:
            raise EOFError
        return remaining.pop(0)

    return read_line, prompts


def _request(signal: CancelSignal | None = None, reason: str | None = None) -> ApprovalRequest:
    return ApprovalRequest(
        agent=object(),
        tool_name="write_file",
        call_id="c1",
        signal=CancelSignal.never() if signal is None else signal,
        reason=reason,
    )


async def _fallback() -> ApprovalOutcome:
    await trio.lowlevel.checkpoint()
    return ApprovalOutcome.UNAVAILABLE


async def test_yes_allows_the_call_once() -> None:
    read_line, prompts = _lines(" Yes ")
    answer = console_answerer(read_line=read_line)

    assert ApprovalOutcome.ALLOWED_ONCE == await answer(_request(reason="writes"), _fallback)
    assert ['Allow tool "write_file" (writes)? [y/N/a/e] '] == prompts


async def test_no_or_an_empty_line_rejects() -> None:
    for line in ("n", "NO", ""):
        read_line, _prompts = _lines(line)
        answer = console_answerer(read_line=read_line)

        assert ApprovalOutcome.REJECTED == await answer(_request(), _fallback)


async def test_anything_else_asks_again() -> None:
    read_line, prompts = _lines("maybe", "y")
    answer = console_answerer(read_line=read_line, prompt="{call_id} {tool_name}{reason}: ")

    assert ApprovalOutcome.ALLOWED_ONCE == await answer(_request(), _fallback)
    assert ["c1 write_file: ", "c1 write_file: "] == prompts


async def test_the_end_of_input_delegates_to_the_next_answerer() -> None:
    read_line, _prompts = _lines()
    delegated: list[bool] = []

    async def next_answerer() -> ApprovalOutcome:
        delegated.append(True)
        await trio.lowlevel.checkpoint()
        return ApprovalOutcome.REJECTED

    answer = console_answerer(read_line=read_line)

    assert ApprovalOutcome.REJECTED == await answer(_request(), next_answerer)
    assert [True] == delegated


async def test_the_read_runs_in_a_worker_thread_while_the_loop_keeps_running() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []
    released = threading.Event()
    released_by_the_loop: list[bool] = []

    def read_line(prompt: str) -> str:
        threads.append(threading.get_ident())
        # only the event loop sets ``released``: a read that blocked the loop would time out
        released_by_the_loop.append(released.wait(10))
        return "y"

    answer = console_answerer(read_line=read_line)
    outcomes: list[ApprovalOutcome | Approval] = []

    async with trio.open_nursery() as nursery:

        async def ask() -> None:
            outcomes.append(await answer(_request(), _fallback))

        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        released.set()

    assert [ApprovalOutcome.ALLOWED_ONCE] == outcomes
    assert [True] == released_by_the_loop
    assert loop_thread not in threads


async def test_a_cancelled_request_returns_at_once_and_drops_the_late_answer() -> None:
    entered = threading.Event()
    released = threading.Event()

    def read_line(prompt: str) -> str:
        entered.set()
        released.wait(10)
        return "y"

    controller = CancelController()
    answer = console_answerer(read_line=read_line)
    outcomes: list[object] = []

    async def ask() -> None:
        session = MemorySessionLog()
        session.append(TurnStartEvent(turn=1))
        approval = approval_service(answer, session=session)
        outcomes.append(await approval.request(_request(signal=controller.signal)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.to_thread.run_sync(entered.wait, 10)
        controller.cancel("esc")
        await trio.testing.wait_all_tasks_blocked()
        assert [ApprovalOutcome.CANCELLED] == outcomes  # while the read is still pending
        released.set()


async def test_one_question_at_a_time() -> None:
    entered: list[str] = []
    first_read = threading.Event()
    release = threading.Event()

    def read_line(prompt: str) -> str:
        entered.append(prompt)
        first_read.set()
        release.wait(10)
        return "y"

    answer = console_answerer(read_line=read_line)
    results: list[ApprovalOutcome | Approval] = []

    async def ask() -> None:
        results.append(await answer(_request(), _fallback))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(ask)
        await trio.to_thread.run_sync(first_read.wait, 10)
        await trio.testing.wait_all_tasks_blocked()
        assert 1 == len(entered)  # the other two wait for the first answer
        release.set()

    assert [ApprovalOutcome.ALLOWED_ONCE] * 3 == results
    assert 3 == len(entered)


async def test_a_or_always_allows_the_tool_for_the_session() -> None:
    for line in ("a", " Always "):
        read_line, _ = _lines(line)
        answer = console_answerer(read_line=read_line, show=lambda _text: None)

        assert ApprovalOutcome.ALLOWED_SESSION == await answer(_request(), _fallback)


async def test_the_call_is_shown_before_the_question() -> None:
    shown: list[str] = []
    read_line, prompts = _lines("n")
    answer = console_answerer(read_line=read_line, show=shown.append)
    request = attrs.evolve(
        _request(),
        view=DiffCallView(
            title="Write NOTES.md",
            diffs=(FileDiff(path="NOTES.md", old_text="a\n", new_text="b\x1b[2J\n"),),
        ),
    )

    assert ApprovalOutcome.REJECTED == await answer(request, _fallback)
    expected = "Write NOTES.md\n--- NOTES.md\n+++ NOTES.md\n@@ -1 +1 @@\n-a\n+b\\x1b[2J"
    assert ([expected], 1) == (shown, len(prompts))


def test_a_command_is_shown_as_the_command_and_other_calls_as_their_arguments() -> None:
    terminal = attrs.evolve(
        _request(), view=TerminalCallView(title="rm -rf build", description="cleans", cwd="/w")
    )
    generic = attrs.evolve(
        _request(),
        view=GenericCallView(title="fetch", raw_input={"url": "https://example.com"}),
    )
    bare = attrs.evolve(_request(), arguments=snapshot_json({"n": 1}))
    described = attrs.evolve(
        _request(),
        view=GenericCallView(title="search", content=(TextBlock(text="for TODO\x1b[2J"),)),
    )

    assert [
        "$ rm -rf build\n  in /w\n  (cleans)",
        'fetch\n{\n  "url": "https://example.com"\n}',
        '{\n  "n": 1\n}',
        "",
        "search\nfor TODO\\x1b[2J",
    ] == [describe_call(r) for r in (terminal, generic, bare, _request(), described)]


def test_a_picture_on_a_call_card_is_shown_as_its_description() -> None:
    request = attrs.evolve(
        _request(),
        view=GenericCallView(
            title="post the chart",
            content=(
                TextBlock(text="to #sales"),
                ImageBlock(media_type="image/png", data=png(320, 200)),
                FileBlock(media_type="text/csv", data=b"a,b\n", name="q3\x1b[2J.csv"),
            ),
        ),
    )
    shown = describe_call(request).splitlines()
    assert shown[:2] == ["post the chart", "to #sales"]
    assert shown[2].startswith("[image/png 320x200, ")
    assert shown[3] == "[text/csv q3\\x1b[2J.csv, 4 B]"  # a file name is made printable too


# --- e: edit the arguments ------------------------------------------------------------------


def _with_arguments() -> ApprovalRequest:
    return attrs.evolve(_request(), arguments=snapshot_json({"path": "a.txt", "text": "hi"}))


async def test_e_reads_new_arguments_as_one_line_without_an_editor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    shown: list[str] = []
    read_line, prompts = _lines("e", '{"path": "b.txt", "text": "hi"}')
    answer = console_answerer(read_line=read_line, show=shown.append)

    decided = await answer(_with_arguments(), _fallback)

    assert Approval(ApprovalOutcome.ALLOWED_ONCE, {"path": "b.txt", "text": "hi"}) == decided
    assert "New arguments (one line of JSON): " == prompts[-1]
    assert '{\n  "path": "a.txt",\n  "text": "hi"\n}' in shown  # the current ones, to copy


@pytest.mark.parametrize(
    ("typed", "why"),
    [("{oops", "not JSON ("), ("[1, 2]", "the arguments must be a JSON object, not list")],
)
async def test_an_edit_that_is_not_a_json_object_is_shown_and_asked_again(
    monkeypatch: pytest.MonkeyPatch, typed: str, why: str
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    shown: list[str] = []
    read_line, _prompts = _lines("e", typed, "n")
    answer = console_answerer(read_line=read_line, show=shown.append)

    assert ApprovalOutcome.REJECTED == await answer(_with_arguments(), _fallback)
    assert any(why in line for line in shown)


async def test_e_opens_the_arguments_in_the_visual_editor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a real editor process: it rewrites the file it is given, as a person would
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import json, sys\n"
        "path = sys.argv[1]\n"
        "data = json.load(open(path))\n"
        "data['path'] = 'notes/' + data['path']\n"
        "json.dump(data, open(path, 'w'))\n"
    )
    monkeypatch.setenv("VISUAL", f"{shlex.quote(sys.executable)} {shlex.quote(str(editor))}")
    read_line, _prompts = _lines("e")
    answer = console_answerer(read_line=read_line, show=lambda _text: None)

    decided = await answer(_with_arguments(), _fallback)

    assert Approval(ApprovalOutcome.ALLOWED_ONCE, {"path": "notes/a.txt", "text": "hi"}) == decided


async def test_an_editor_that_fails_changes_nothing_and_the_question_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} -c 'raise SystemExit(3)'")
    shown: list[str] = []
    read_line, _prompts = _lines("e", "y")
    answer = console_answerer(read_line=read_line, show=shown.append)

    assert ApprovalOutcome.ALLOWED_ONCE == await answer(_with_arguments(), _fallback)
    assert "the editor exited with status 3: nothing changed" in shown


async def test_a_request_without_arguments_has_nothing_to_edit() -> None:
    shown: list[str] = []
    read_line, _prompts = _lines("e", "y")
    answer = console_answerer(read_line=read_line, show=shown.append)

    assert ApprovalOutcome.ALLOWED_ONCE == await answer(_request(), _fallback)
    assert "this request has no arguments to edit" in shown
