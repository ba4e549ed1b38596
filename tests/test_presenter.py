"""ToolPresenter: a tool's render intents for session events, and every fallback."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from dsh_tools import (
    DiffCallView,
    DiffResultView,
    FileDiff,
    FileLocation,
    FrozenJsonObject,
    GenericCallView,
    GenericResultView,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallEvent,
    ToolCallKind,
    ToolCallView,
    ToolDefinition,
    ToolPresenter,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolResultView,
    console_block,
    define_tool,
    snapshot_json,
    tool_result_from_event,
)
from support import call_event, ok_body, registry_with, result_event


def _tool(
    name: str = "bash",
    *,
    present_call: Callable[[Any], ToolCallView | None] | None = None,
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = None,
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description="a tool",
        parameters={"type": "object"},
        execute=ok_body,
        present_call=present_call,
        present_result=present_result,
    )


def _call(
    arguments: str = '{"command": "ls"}', *, name: str = "bash", call_id: str = "c1"
) -> ToolCallEvent:
    return call_event(name, arguments, call_id=call_id, turn=1)


def _result(
    content: str = "out", *, call_id: str = "c1", is_error: bool = False, meta: object = None
) -> ToolResultEvent:
    return result_event(content, call_id=call_id, is_error=is_error, meta=meta, turn=1)


RAW = GenericResultView(content=(TextBlock(text="out"),))


def _presenter(*tools: ToolDefinition, errors: list[tuple[Exception, str]] | None = None):
    registry = registry_with(*tools)

    def sink(exc: Exception, call_id: str) -> None:
        if errors is not None:
            errors.append((exc, call_id))

    return ToolPresenter(registry, on_error=sink)


def _terminal(args: Any) -> ToolCallView:
    return TerminalCallView(title=args["command"], cwd="/w")


# --- call views ---------------------------------------------------------------------------


def test_a_tool_presenter_gives_the_call_view() -> None:
    presenter = _presenter(_tool(present_call=_terminal))

    assert TerminalCallView(title="ls", cwd="/w") == presenter.present_call(_call())


def test_a_tool_without_present_call_gets_the_generic_card_with_its_parsed_arguments() -> None:
    presenter = _presenter(_tool())

    expected = GenericCallView(title="bash", kind=ToolCallKind.OTHER, raw_input={"command": "ls"})
    assert expected == presenter.present_call(_call())


def test_an_unknown_tool_gets_the_generic_card() -> None:
    presenter = _presenter()

    expected = GenericCallView(title="nope", kind=ToolCallKind.OTHER, raw_input={})
    assert expected == presenter.present_call(_call("", name="nope"))


def test_a_present_call_returning_none_falls_back_to_the_generic_card() -> None:
    errors: list[tuple[Exception, str]] = []
    presenter = _presenter(_tool(present_call=lambda args: None), errors=errors)

    expected = GenericCallView(title="bash", kind=ToolCallKind.OTHER, raw_input={"command": "ls"})
    assert expected == presenter.present_call(_call())
    assert [] == errors


def test_a_raising_present_call_falls_back_and_is_reported_to_on_error_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    boom = RuntimeError("boom")

    def raises(args: object) -> ToolCallView:
        raise boom

    errors: list[tuple[Exception, str]] = []
    presenter = _presenter(_tool(present_call=raises), errors=errors)

    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        view = presenter.present_call(_call(call_id="c9"))

    expected = GenericCallView(title="bash", kind=ToolCallKind.OTHER, raw_input={"command": "ls"})
    assert expected == view
    assert [(boom, "c9")] == errors
    assert ["tool 'bash' call 'c9': present_call failed: boom"] == caplog.messages


def test_a_present_call_returning_a_non_view_falls_back_and_is_reported() -> None:
    errors: list[tuple[Exception, str]] = []
    presenter = _presenter(_tool(present_call=lambda args: {"card": "generic"}), errors=errors)  # type: ignore[arg-type, return-value]

    assert "bash" == presenter.present_call(_call()).title
    assert [("TypeError", "present_call returned dict, not a ToolCallView")] == [
        (type(exc).__name__, str(exc)) for exc, _ in errors
    ]


def test_an_on_error_that_raises_is_contained() -> None:
    def raises(args: object) -> ToolCallView:
        raise ValueError("bad presenter")

    def bad_sink(exc: Exception, call_id: str) -> None:
        raise RuntimeError("bad sink")

    registry = ToolRegistry()
    registry.register(_tool(present_call=raises))
    presenter = ToolPresenter(registry, on_error=bad_sink)

    assert "bash" == presenter.present_call(_call()).title


def test_empty_argument_text_is_presented_as_an_empty_object() -> None:
    seen: list[object] = []
    presenter = _presenter(_tool(present_call=lambda args: seen.append(args)))

    presenter.present_call(_call(""))

    assert [{}] == seen


def test_invalid_argument_text_is_presented_as_the_raw_string() -> None:
    presenter = _presenter(_tool())

    expected = GenericCallView(title="bash", kind=ToolCallKind.OTHER, raw_input='{"command": ')
    assert expected == presenter.present_call(_call('{"command": '))


def test_raw_text_with_a_lone_surrogate_still_gets_a_card() -> None:
    presenter = _presenter(_tool())

    view = presenter.present_call(_call('{"a": "\ud800'))

    assert GenericCallView(title="bash", kind=ToolCallKind.OTHER, raw_input='{"a": "\ufffd') == view


def test_presenters_receive_frozen_arguments() -> None:
    seen: list[object] = []
    presenter = _presenter(_tool(present_call=lambda args: seen.append(args)))

    presenter.present_call(_call('{"a": [1, {"b": 2}]}'))

    assert [FrozenJsonObject] == [type(value) for value in seen]
    assert snapshot_json({"a": [1, {"b": 2}]}) == seen[0]


def test_scoped_tools_are_presented_for_the_presenters_agent() -> None:
    registry = ToolRegistry()
    agent = object()
    registry.register(_tool())
    registry.scope(agent).register(_tool(present_call=_terminal))

    assert isinstance(ToolPresenter(registry).present_call(_call()), GenericCallView)
    assert isinstance(ToolPresenter(registry, agent=agent).present_call(_call()), TerminalCallView)


# --- result views -------------------------------------------------------------------------


def test_a_result_without_a_remembered_call_is_the_raw_content() -> None:
    presenter = _presenter(_tool(present_result=lambda args, result: TerminalResultView()))

    assert RAW == presenter.present_result(_result())


def test_a_tool_without_present_result_gives_the_raw_content() -> None:
    presenter = _presenter(_tool(present_call=_terminal))
    presenter.present_call(_call())

    assert RAW == presenter.present_result(_result())


def test_a_present_result_returning_none_gives_the_raw_content() -> None:
    presenter = _presenter(_tool(present_result=lambda args, result: None))
    presenter.present_call(_call())

    assert RAW == presenter.present_result(_result())


def test_a_raising_present_result_gives_the_raw_content_and_is_reported() -> None:
    boom = KeyError("exitCode")

    def raises(args: object, result: ToolResult) -> ToolResultView:
        raise boom

    errors: list[tuple[Exception, str]] = []
    presenter = _presenter(_tool(present_result=raises), errors=errors)
    presenter.present_call(_call())

    assert RAW == presenter.present_result(_result())
    assert [(boom, "c1")] == errors


def test_a_present_result_returning_a_non_view_gives_the_raw_content_and_is_reported() -> None:
    errors: list[tuple[Exception, str]] = []
    presenter = _presenter(_tool(present_result=lambda args, result: "done"), errors=errors)  # type: ignore[arg-type, return-value]
    presenter.present_call(_call())

    assert RAW == presenter.present_result(_result())
    assert ["present_result returned str, not a ToolResultView"] == [str(e) for e, _ in errors]


def test_a_generic_result_without_content_gets_the_raw_content() -> None:
    presenter = _presenter(_tool(present_result=lambda args, result: GenericResultView(title="ls")))
    presenter.present_call(_call())

    expected = GenericResultView(title="ls", content=(TextBlock(text="out"),))
    assert expected == presenter.present_result(_result())


def test_a_generic_result_with_content_keeps_it() -> None:
    view = GenericResultView(title="ls", content=[TextBlock(text="3 files")])
    presenter = _presenter(_tool(present_result=lambda args, result: view))
    presenter.present_call(_call())

    assert view == presenter.present_result(_result())


def test_a_terminal_result_of_a_terminal_call_is_kept() -> None:
    view = TerminalResultView(output="a\nb\n", exit_code=0)
    presenter = _presenter(_tool(present_call=_terminal, present_result=lambda a, r: view))
    presenter.present_call(_call())

    assert view == presenter.present_result(_result())


def test_a_terminal_result_of_a_non_terminal_call_is_dropped_to_the_raw_content() -> None:
    view = TerminalResultView(output="a\nb\n", exit_code=0)
    presenter = _presenter(_tool(present_result=lambda a, r: view))  # the call card is generic
    presenter.present_call(_call())

    assert RAW == presenter.present_result(_result())


def test_a_terminal_result_is_orphaned_when_the_call_presenter_fell_back() -> None:
    def raises(args: object) -> ToolCallView:
        raise RuntimeError("no")

    view = TerminalResultView(output="x", exit_code=1)
    presenter = _presenter(_tool(present_call=raises, present_result=lambda a, r: view))
    presenter.present_call(_call())

    assert RAW == presenter.present_result(_result())


def test_a_diff_result_is_kept() -> None:
    view = DiffResultView(diffs=[FileDiff(path="/w/a", old_text=None, new_text="x")])
    presenter = _presenter(_tool(present_result=lambda a, r: view))
    presenter.present_call(_call())

    assert view == presenter.present_result(_result())


def test_present_result_gets_the_call_arguments_and_the_result_with_its_meta() -> None:
    seen: list[tuple[object, ToolResult]] = []

    def present_result(args: object, result: ToolResult) -> ToolResultView | None:
        seen.append((args, result))
        return None

    presenter = _presenter(_tool(present_result=present_result))
    presenter.present_call(_call('{"command": "ls"}'))
    presenter.present_result(_result("boom", is_error=True, meta={"exitCode": 2}))

    expected = ToolResult(
        content=(TextBlock(text="boom"),), is_error=True, meta=snapshot_json({"exitCode": 2})
    )
    assert [({"command": "ls"}, expected)] == seen


def test_the_remembered_call_is_forgotten_once_its_result_is_presented() -> None:
    view = TerminalResultView(output="x", exit_code=0)
    presenter = _presenter(_tool(present_call=_terminal, present_result=lambda a, r: view))
    presenter.present_call(_call(call_id="c1"))
    presenter.present_call(_call(call_id="c2"))
    assert ("c1", "c2") == presenter.pending_call_ids

    assert view == presenter.present_result(_result(call_id="c1"))
    assert ("c2",) == presenter.pending_call_ids
    # a second result for c1 has no remembered call any more
    assert RAW == presenter.present_result(_result(call_id="c1"))


def test_the_result_presenter_is_looked_up_by_the_remembered_name() -> None:
    view = GenericResultView(title="from read", content=())
    presenter = _presenter(
        _tool("read", present_result=lambda a, r: view),
        _tool("bash", present_result=lambda a, r: None),
    )
    presenter.present_call(_call(name="read"))

    assert view == presenter.present_result(_result())


def test_a_define_tool_presenter_with_invalid_arguments_falls_back_without_error() -> None:
    @attrs.frozen
    class Args:
        path: str

    async def body(args: Args, context: object) -> str:
        return args.path

    errors: list[tuple[Exception, str]] = []
    tool = define_tool(
        name="read",
        description="read",
        parameters=Args,
        execute=body,
        present_call=lambda args: GenericCallView(
            title=f"Read {args.path}",
            kind=ToolCallKind.READ,
            locations=[FileLocation(path=args.path)],
        ),
    )
    presenter = _presenter(tool, errors=errors)

    good = presenter.present_call(_call('{"path": "a.py"}', name="read", call_id="c1"))
    bad = presenter.present_call(_call('{"path": 1}', name="read", call_id="c2"))

    assert "Read a.py" == good.title
    assert GenericCallView(title="read", kind=ToolCallKind.OTHER, raw_input={"path": 1}) == bad
    assert [] == errors


# --- helpers ------------------------------------------------------------------------------


def test_tool_result_from_event_carries_content_error_flag_and_meta() -> None:
    event = _result("x", is_error=True, meta={"diffs": []})

    expected = ToolResult(
        content=(TextBlock(text="x"),), is_error=True, meta=snapshot_json({"diffs": []})
    )
    assert expected == tool_result_from_event(event)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("a\nb\n\n", "```console\na\nb\n```"),
        ("", "```console\n\n```"),
        ("no newline", "```console\nno newline\n```"),
        ("  indented\r\n", "```console\n  indented\r\n```"),
        ("has ``` inside", "````console\nhas ``` inside\n````"),
        ("a ````` run", "``````console\na ````` run\n``````"),
    ],
)
def test_console_block_fences_the_output_without_trailing_newlines(
    output: str, expected: str
) -> None:
    assert expected == console_block(output)


def test_the_diff_call_card_is_kept_as_the_tool_made_it() -> None:
    diff = DiffCallView(
        title="Write a.txt",
        diffs=[FileDiff(path="/w/a.txt", old_text=None, new_text="hi")],
        locations=[FileLocation(path="/w/a.txt")],
    )
    presenter = _presenter(_tool("write", present_call=lambda args: diff))

    assert diff == presenter.present_call(_call(name="write"))


def test_without_on_error_a_raising_presenter_is_logged_and_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def raises(args: object) -> ToolCallView:
        raise RuntimeError("boom")

    registry = ToolRegistry()
    registry.register(_tool(present_call=raises))
    presenter = ToolPresenter(registry)

    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        view = presenter.present_call(_call())

    assert "bash" == view.title
    assert ["tool 'bash' call 'c1': present_call failed: boom"] == caplog.messages
    assert "<ToolPresenter agent=None pending=1>" == repr(presenter)
