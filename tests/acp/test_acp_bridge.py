"""AcpSessionBridge: session events → ACP ``session/update`` payloads.

Every payload is also checked against the ``agent-client-protocol`` package's own models.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from acp_wire import assert_valid_update

from dsh_tools import (
    AudioBlock,
    ContextMessageEvent,
    DiffCallView,
    DiffResultView,
    FileBlock,
    FileDiff,
    FileLocation,
    GenericCallView,
    GenericResultView,
    ImageBlock,
    ReasoningBlock,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallEvent,
    ToolCallKind,
    ToolCallView,
    ToolPresenter,
    ToolProgressEvent,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolResultView,
    UserSource,
)
from dsh_tools.acp import AcpSessionBridge, relativize_title
from media_files import png, wav
from support import call_event, registry_with, result_event, tool

CWD = "/home/u/proj"


def _bridge(
    present_call: Callable[[Any], ToolCallView | None] | None = None,
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = None,
    *,
    session_cwd: str | None = CWD,
    terminal: bool = False,
) -> AcpSessionBridge:
    registry = registry_with(
        tool(
            "tool",
            description="a tool",
            parameters={"type": "object"},
            present_call=present_call,
            present_result=present_result,
        )
    )
    return AcpSessionBridge(ToolPresenter(registry), session_cwd=session_cwd, terminal=terminal)


def _call(arguments: str = '{"a": 1}', *, name: str = "tool") -> ToolCallEvent:
    return call_event(name, arguments)


def _result(*content: str, is_error: bool = False) -> ToolResultEvent:
    return result_event(*content, is_error=is_error)


def _update_for(bridge: AcpSessionBridge, event: object) -> dict[str, object]:
    update = bridge.update_for(event)
    assert update is not None
    assert_valid_update(update)
    return update


def _text(text: str) -> dict[str, object]:
    return {"type": "content", "content": {"type": "text", "text": text}}


# --- tool/call: generic -----------------------------------------------------------------


def test_a_call_without_a_presenter_is_a_generic_in_progress_card_with_its_parsed_arguments() -> (
    None
):
    expected = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "status": "in_progress",
        "title": "tool",
        "kind": "other",
        "rawInput": {"a": [1, 2]},
    }
    assert expected == _update_for(_bridge(), _call('{"a": [1, 2]}'))


@pytest.mark.parametrize(("arguments", "raw_input"), [("", {}), ("{oops", "{oops")])
def test_raw_input_is_parsed_from_the_call_text_empty_is_an_object_invalid_stays_text(
    arguments: str, raw_input: object
) -> None:
    assert raw_input == _update_for(_bridge(), _call(arguments))["rawInput"]


def test_a_generic_card_carries_kind_locations_and_only_its_text_content() -> None:
    view = GenericCallView(
        title="Read /home/u/proj/src/app.py",
        kind=ToolCallKind.READ,
        raw_input={"path": "src/app.py"},
        content=[TextBlock(text="first"), ReasoningBlock(text="dropped"), TextBlock(text="last")],
        locations=[FileLocation(path="/home/u/proj/src/app.py", line=3)],
    )
    expected = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "status": "in_progress",
        "title": "Read src/app.py",
        "kind": "read",
        "rawInput": {"path": "src/app.py"},
        "locations": [{"path": "/home/u/proj/src/app.py", "line": 3}],
        "content": [_text("first"), _text("last")],
    }
    assert expected == _update_for(_bridge(lambda _args: view), _call())


def test_a_generic_card_omits_absent_raw_input_and_locations_and_content_without_text() -> None:
    view = GenericCallView(title="t", content=[ReasoningBlock(text="not shown")])
    expected = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "status": "in_progress",
        "title": "t",
        "kind": "other",
    }
    assert expected == _update_for(_bridge(lambda _args: view), _call())


def test_a_generic_card_keeps_an_empty_locations_list_it_was_given() -> None:
    view = GenericCallView(title="t", locations=[])
    assert [] == _update_for(_bridge(lambda _args: view), _call())["locations"]


# --- tool/call: diff --------------------------------------------------------------------


def test_a_diff_card_is_an_edit_with_one_diff_block_per_diff_and_raw_paths() -> None:
    view = DiffCallView(
        title="Edit /home/u/proj/a.py",
        diffs=[
            FileDiff(path="/home/u/proj/a.py", old_text="x = 1\n", new_text="x = 2\n"),
            FileDiff(path="/home/u/proj/new.py", old_text=None, new_text="y\n"),
        ],
    )
    expected = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "status": "in_progress",
        "title": "Edit a.py",
        "kind": "edit",
        "content": [
            {
                "type": "diff",
                "path": "/home/u/proj/a.py",
                "oldText": "x = 1\n",
                "newText": "x = 2\n",
            },
            {"type": "diff", "path": "/home/u/proj/new.py", "oldText": None, "newText": "y\n"},
        ],
    }
    assert expected == _update_for(_bridge(lambda _args: view), _call())


def test_a_diff_card_title_is_relativized_with_its_first_location_before_its_first_diff() -> None:
    view = DiffCallView(
        title="Edit /home/u/proj/loc.py (was /home/u/proj/diff.py)",
        diffs=[FileDiff(path="/home/u/proj/diff.py", old_text=None, new_text="")],
        locations=[FileLocation(path="/home/u/proj/loc.py")],
    )
    update = _update_for(_bridge(lambda _args: view), _call())
    assert "Edit loc.py (was /home/u/proj/diff.py)" == update["title"]
    assert [{"path": "/home/u/proj/loc.py"}] == update["locations"]


def test_a_diff_card_without_diffs_has_no_content() -> None:
    view = DiffCallView(title="Edit nothing", diffs=[])
    update = _update_for(_bridge(lambda _args: view), _call())
    assert "content" not in update
    assert "edit" == update["kind"]


# --- tool/call: terminal ----------------------------------------------------------------


def test_a_terminal_card_without_the_capability_shows_the_command_and_its_description() -> None:
    view = TerminalCallView(title="ls -la /home/u/proj", description="List files", cwd="/tmp")
    expected = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "status": "in_progress",
        "title": "ls -la /home/u/proj",
        "kind": "execute",
        "rawInput": "ls -la /home/u/proj",
        "content": [_text("List files")],
    }
    assert expected == _update_for(_bridge(lambda _args: view), _call())


def test_a_terminal_card_without_description_or_capability_has_no_content() -> None:
    view = TerminalCallView(title="ls", description="")
    update = _update_for(_bridge(lambda _args: view), _call())
    assert "content" not in update
    assert "_meta" not in update


def test_a_terminal_card_with_the_capability_opens_a_terminal_named_by_the_call_id() -> None:
    view = TerminalCallView(title="make", description="Build", cwd="/srv/build")
    expected = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "status": "in_progress",
        "title": "make",
        "kind": "execute",
        "rawInput": "make",
        "content": [_text("Build"), {"type": "terminal", "terminalId": "c1"}],
        "_meta": {"terminal_info": {"terminal_id": "c1", "cwd": "/srv/build"}},
    }
    assert expected == _update_for(_bridge(lambda _args: view, terminal=True), _call())


@pytest.mark.parametrize(
    ("view_cwd", "session_cwd", "expected"),
    [
        ("/abs/dir", CWD, "/abs/dir"),
        ("sub/dir", CWD, "/home/u/proj/sub/dir"),
        ("../sibling", CWD, "/home/u/sibling"),
        ("sub/dir", None, "sub/dir"),
        (None, CWD, CWD),
    ],
)
def test_the_terminal_cwd_is_absolute_as_is_relative_resolved_against_the_session_or_the_session_cwd(
    view_cwd: str | None, session_cwd: str | None, expected: str
) -> None:
    view = TerminalCallView(title="make", cwd=view_cwd)
    bridge = _bridge(lambda _args: view, session_cwd=session_cwd, terminal=True)
    update = _update_for(bridge, _call())
    assert {"terminal_info": {"terminal_id": "c1", "cwd": expected}} == update["_meta"]


def test_a_terminal_without_any_cwd_has_terminal_info_without_cwd() -> None:
    view = TerminalCallView(title="make")
    bridge = _bridge(lambda _args: view, session_cwd=None, terminal=True)
    update = _update_for(bridge, _call())
    assert {"terminal_info": {"terminal_id": "c1"}} == update["_meta"]
    assert [{"type": "terminal", "terminalId": "c1"}] == update["content"]


# --- tool/result --------------------------------------------------------------------------


def test_a_result_without_a_presenter_is_a_completed_update_with_its_text_content() -> None:
    bridge = _bridge()
    bridge.update_for(_call())
    expected = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "completed",
        "content": [_text("one"), _text("two")],
    }
    assert expected == _update_for(bridge, _result("one", "two"))


def test_an_error_result_is_a_failed_update() -> None:
    bridge = _bridge()
    bridge.update_for(_call())
    update = _update_for(bridge, _result("Error: boom", is_error=True))
    assert "failed" == update["status"]
    assert [_text("Error: boom")] == update["content"]


def test_a_generic_result_shows_only_text_content_and_its_title() -> None:
    view = GenericResultView(
        title="Read 3 lines", content=[TextBlock(text="kept"), ReasoningBlock(text="dropped")]
    )
    bridge = _bridge(present_result=lambda _args, _result: view)
    bridge.update_for(_call())
    expected = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "completed",
        "content": [_text("kept")],
        "title": "Read 3 lines",
    }
    assert expected == _update_for(bridge, _result("raw"))


def test_pictures_sound_and_files_of_a_result_reach_the_editor() -> None:
    image, sound = png(2, 2), wav(8)
    bridge = _bridge()
    bridge.update_for(_call())
    event = ToolResultEvent(
        turn=0,
        step=0,
        call_id="c1",
        content=[
            TextBlock(text="see"),
            ImageBlock(media_type="image/png", data=image),
            AudioBlock(media_type="audio/wav", data=sound),
            FileBlock(media_type="application/pdf", data=b"%PDF-1.4 x", name="r.pdf"),
            ImageBlock(media_type="image/png", url="https://a.example/p.png"),
        ],
        is_error=False,
    )

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    assert [
        _text("see"),
        {
            "type": "content",
            "content": {"type": "image", "data": b64(image), "mimeType": "image/png"},
        },
        {
            "type": "content",
            "content": {"type": "audio", "data": b64(sound), "mimeType": "audio/wav"},
        },
        {
            "type": "content",
            "content": {
                "type": "resource",
                "resource": {
                    "uri": "r.pdf",
                    "blob": b64(b"%PDF-1.4 x"),
                    "mimeType": "application/pdf",
                },
            },
        },
        {
            "type": "content",
            "content": {
                "type": "resource_link",
                "uri": "https://a.example/p.png",
                "name": "attachment",
                "mimeType": "image/png",
            },
        },
    ] == _update_for(bridge, event)["content"]


def _terminal_bridge(result: TerminalResultView, *, terminal: bool) -> AcpSessionBridge:
    bridge = _bridge(
        lambda _args: TerminalCallView(title="make"),
        lambda _args, _result: result,
        terminal=terminal,
    )
    bridge.update_for(_call())
    return bridge


def test_a_terminal_result_with_the_capability_streams_output_and_exit_code_and_no_content() -> (
    None
):
    bridge = _terminal_bridge(
        TerminalResultView(title="make (done)", output="built\n", exit_code=0), terminal=True
    )
    expected = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "completed",
        "title": "make (done)",
        "_meta": {
            "terminal_output": {"terminal_id": "c1", "data": "built\n"},
            "terminal_exit": {"terminal_id": "c1", "exit_code": 0},
        },
    }
    assert expected == _update_for(bridge, _result("raw"))


def test_a_terminal_result_killed_by_a_signal_reports_the_signal() -> None:
    bridge = _terminal_bridge(TerminalResultView(output="x", signal="SIGTERM"), terminal=True)
    update = _update_for(bridge, _result("raw", is_error=True))
    expected = {
        "terminal_output": {"terminal_id": "c1", "data": "x"},
        "terminal_exit": {"terminal_id": "c1", "signal": "SIGTERM"},
    }
    assert expected == update["_meta"]
    assert "failed" == update["status"]


def test_a_terminal_result_without_output_or_exit_streams_empty_data_and_no_exit() -> None:
    bridge = _terminal_bridge(TerminalResultView(), terminal=True)
    update = _update_for(bridge, _result("raw"))
    assert {"terminal_output": {"terminal_id": "c1", "data": ""}} == update["_meta"]
    assert "content" not in update
    assert "title" not in update


def test_a_terminal_result_without_the_capability_is_a_fenced_console_block() -> None:
    bridge = _terminal_bridge(
        TerminalResultView(title="make", output="line 1\nline 2\n\n", exit_code=2), terminal=False
    )
    expected = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "failed",
        "content": [_text("```console\nline 1\nline 2\n```")],
        "title": "make",
    }
    assert expected == _update_for(bridge, _result("raw", is_error=True))


def test_a_terminal_result_for_a_generic_call_falls_back_to_raw_content() -> None:
    bridge = _bridge(present_result=lambda _args, _result: TerminalResultView(output="x"))
    bridge.update_for(_call())
    update = _update_for(bridge, _result("raw"))
    assert [_text("raw")] == update["content"]
    assert "_meta" not in update


def test_a_diff_result_shows_its_diffs_and_a_title_relativized_with_the_first_diff() -> None:
    view = DiffResultView(
        title="Edited /home/u/proj/a.py",
        diffs=[FileDiff(path="/home/u/proj/a.py", old_text="a", new_text="b")],
    )
    bridge = _bridge(present_result=lambda _args, _result: view)
    bridge.update_for(_call())
    expected = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "completed",
        "content": [{"type": "diff", "path": "/home/u/proj/a.py", "oldText": "a", "newText": "b"}],
        "title": "Edited a.py",
    }
    assert expected == _update_for(bridge, _result("raw"))


def test_a_diff_result_without_diffs_or_title_has_neither_content_nor_title() -> None:
    bridge = _bridge(present_result=lambda _args, _result: DiffResultView())
    bridge.update_for(_call())
    expected = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}
    assert expected == _update_for(bridge, _result("raw"))


def test_a_diff_result_title_without_diffs_stays_as_given() -> None:
    view = DiffResultView(title="Edited /home/u/proj/a.py")
    bridge = _bridge(present_result=lambda _args, _result: view)
    bridge.update_for(_call())
    assert "Edited /home/u/proj/a.py" == _update_for(bridge, _result("raw"))["title"]


# --- no update ----------------------------------------------------------------------------


def test_events_other_than_calls_and_results_give_no_update() -> None:
    event = ContextMessageEvent(content=[TextBlock(text="ctx")], source=UserSource())
    assert _bridge().update_for(event) is None


# --- exhaustiveness -----------------------------------------------------------------------


class _RoguePresenter(ToolPresenter):
    def present_call(self, event: ToolCallEvent) -> ToolCallView:
        return "a card from nowhere"  # type: ignore[return-value]

    def present_result(self, event: ToolResultEvent) -> ToolResultView:
        return 42  # type: ignore[return-value]


def test_an_unknown_call_card_is_an_unreachable_variant_error() -> None:
    bridge = AcpSessionBridge(_RoguePresenter(ToolRegistry()))
    with pytest.raises(TypeError) as caught:
        bridge.update_for(_call())
    assert "unreachable variant in ToolCallView: 'a card from nowhere'" == str(caught.value)


def test_an_unknown_result_card_is_an_unreachable_variant_error() -> None:
    bridge = AcpSessionBridge(_RoguePresenter(ToolRegistry()))
    with pytest.raises(TypeError) as caught:
        bridge.update_for(_result("x"))
    assert "unreachable variant in ToolResultView: 42" == str(caught.value)


# --- title relativization -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "path", "cwd", "expected"),
    [
        ("Read /home/u/proj/src/a.py", "/home/u/proj/src/a.py", CWD, "Read src/a.py"),
        ("Read /home/u/proj/..cache/x", "/home/u/proj/..cache/x", CWD, "Read ..cache/x"),
        ("Read /home/u/x", "/home/u/x", CWD, "Read /home/u/x"),
        ("Read /etc/passwd", "/etc/passwd", CWD, "Read /etc/passwd"),
        ("Read src/a.py", "src/a.py", CWD, "Read src/a.py"),
        ("Read /home/u/proj/a", "/home/u/proj/a", "proj", "Read /home/u/proj/a"),
        ("Diff /home/u/proj/a vs /home/u/proj/a", "/home/u/proj/a", CWD, "Diff a vs a"),
        ("List /home/u/proj", "/home/u/proj", CWD, "List ."),
    ],
    ids=[
        "inside",
        "dotdot-prefixed-name-is-inside",
        "parent-is-outside",
        "elsewhere-is-outside",
        "relative-path",
        "relative-cwd",
        "every-occurrence",
        "the-cwd-itself",
    ],
)
def test_titles_are_relativized_only_for_absolute_paths_inside_the_session_cwd(
    title: str, path: str, cwd: str, expected: str
) -> None:
    assert expected == relativize_title(title, path, cwd)


def test_without_a_session_cwd_titles_stay_as_given() -> None:
    view = GenericCallView(
        title="Read /home/u/proj/a", locations=[FileLocation(path="/home/u/proj/a")]
    )
    bridge = _bridge(lambda _args: view, session_cwd=None)
    assert "Read /home/u/proj/a" == _update_for(bridge, _call())["title"]


# --- surface ops (``surface_op`` absent means ``append``) ------------------------


def _surfaced(surface_op: str | None) -> ToolResultEvent:
    return ToolResultEvent(
        turn=0,
        step=0,
        call_id="c1",
        content=[TextBlock(text="pruned")],
        is_error=False,
        surface_op=surface_op,
    )


def test_a_result_that_replaces_an_earlier_one_gives_no_update_and_keeps_the_call_pending() -> None:
    seen: list[str] = []

    def present_result(_args: object, result: ToolResult) -> ToolResultView:
        seen.append("presented")
        return GenericResultView(title="from the tool")

    bridge = _bridge(present_result=present_result)
    bridge.update_for(_call())
    assert bridge.update_for(_surfaced("replace")) is None
    assert [] == seen
    # the append that follows is still presented by the tool (its call was not forgotten)
    assert "from the tool" == _update_for(bridge, _result("x"))["title"]


@pytest.mark.parametrize("surface_op", ["append", None])
def test_an_append_surface_op_is_a_result_update(surface_op: str | None) -> None:
    bridge = _bridge()
    bridge.update_for(_call())
    assert [_text("pruned")] == _update_for(bridge, _surfaced(surface_op))["content"]


# --- tool/progress ------------------------------------------------------------------------


def _progress(**fields: Any) -> ToolProgressEvent:
    return ToolProgressEvent(turn=0, step=0, call_id=_call().call_id, **fields)


def test_progress_becomes_an_in_progress_update_with_its_text() -> None:
    bridge = _bridge()
    _update_for(bridge, _call())

    update = _update_for(bridge, _progress(message="fetching", progress=3, total=10))

    expected = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": _call().call_id,
        "status": "in_progress",
        "content": [_text("fetching (3/10)")],
    }
    assert expected == update


def test_terminal_output_progress_is_a_terminal_output_chunk_with_the_capability() -> None:
    bridge = _bridge(lambda _args: TerminalCallView(title="make"), terminal=True)
    _update_for(bridge, _call())

    update = _update_for(bridge, _progress(output="compiling a.c\n"))

    expected = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": _call().call_id,
        "status": "in_progress",
        "_meta": {"terminal_output": {"terminal_id": _call().call_id, "data": "compiling a.c\n"}},
    }
    assert expected == update


def test_terminal_output_progress_is_a_console_block_without_the_capability() -> None:
    bridge = _bridge(lambda _args: TerminalCallView(title="make"))
    _update_for(bridge, _call())

    update = _update_for(bridge, _progress(output="compiling a.c\n"))

    assert [_text("```console\ncompiling a.c\n```")] == update["content"]


def test_the_call_stays_pending_after_its_progress() -> None:
    bridge = _bridge()
    _update_for(bridge, _call())
    _update_for(bridge, _progress(message="working"))

    update = _update_for(bridge, _result("done"))

    assert ("completed", [_text("done")]) == (update["status"], update["content"])
