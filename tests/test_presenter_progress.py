"""A tool's own ``present_progress(arguments, event)``: its view of a running call's progress,
and every fallback to the generic progress line."""

from __future__ import annotations

from typing import Any

import attrs

from dsh_tools import (
    GenericResultView,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolPresenter,
    ToolProgressEvent,
    ToolRegistry,
    ToolResultView,
    ToolRunContext,
    define_tool,
    tool,
)
from support import call_event


@attrs.frozen
class Fetch:
    url: str


async def _fetch(args: Fetch, context: ToolRunContext) -> str:
    return args.url


def _event(message: str = "fetching", output: str | None = None) -> ToolProgressEvent:
    return ToolProgressEvent(
        turn=1, step=0, call_id="c1", message=message, progress=3, total=10, output=output
    )


def _presenter(
    present_progress: Any, errors: list[Exception] | None = None, *, arguments: str
) -> ToolPresenter:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="fetch",
            description="fetch",
            parameters=Fetch,
            execute=_fetch,
            present_progress=present_progress,
        )
    )

    def sink(exc: Exception, call_id: str) -> None:
        if errors is not None:
            errors.append(exc)

    presenter = ToolPresenter(registry, on_error=sink)
    presenter.present_call(call_event("fetch", arguments, call_id="c1", turn=1))
    return presenter


GENERIC = GenericResultView(content=(TextBlock(text="fetching (3/10)"),))


def test_the_tools_view_gets_the_typed_arguments_and_the_event() -> None:
    seen: list[tuple[Fetch, ToolProgressEvent]] = []

    def view(args: Fetch, event: ToolProgressEvent) -> ToolResultView:
        seen.append((args, event))
        return GenericResultView(content=(TextBlock(text=f"{args.url}: {event.progress}"),))

    presenter = _presenter(view, arguments='{"url": "https://example.org"}')
    shown = presenter.present_progress(_event())

    assert GenericResultView(content=(TextBlock(text="https://example.org: 3"),)) == shown
    assert [(Fetch(url="https://example.org"), _event())] == seen


def _declines(args: Fetch, event: ToolProgressEvent) -> None:
    return None


def test_a_view_of_none_shows_the_generic_progress_line() -> None:
    presenter = _presenter(_declines, arguments='{"url": "u"}')
    assert GENERIC == presenter.present_progress(_event())


def test_invalid_arguments_never_reach_the_tools_view() -> None:
    called: list[object] = []

    def view(args: Fetch, event: ToolProgressEvent) -> None:
        called.append(args)

    presenter = _presenter(view, arguments='{"url": 5}')
    assert GENERIC == presenter.present_progress(_event())
    assert [] == called


def test_a_raising_view_is_reported_and_the_generic_line_shown() -> None:
    errors: list[Exception] = []

    def view(args: Fetch, event: ToolProgressEvent) -> ToolResultView:
        raise RuntimeError("broken view")

    presenter = _presenter(view, errors, arguments='{"url": "u"}')
    assert GENERIC == presenter.present_progress(_event())
    assert ["broken view"] == [str(exc) for exc in errors]


def test_a_terminal_view_for_a_call_without_a_terminal_card_is_reported() -> None:
    errors: list[Exception] = []

    def view(args: Fetch, event: ToolProgressEvent) -> ToolResultView:
        return TerminalResultView(output="x")

    presenter = _presenter(view, errors, arguments='{"url": "u"}')
    assert GENERIC == presenter.present_progress(_event())
    assert [TypeError] == [type(exc) for exc in errors]


def test_a_terminal_call_shows_its_tools_terminal_view() -> None:
    def card(args: Any) -> TerminalCallView:
        return TerminalCallView(title=args.command)

    def progress(args: Any, event: ToolProgressEvent) -> ToolResultView:
        return TerminalResultView(output=f"[{event.output}]")

    @tool(present_call=card, present_progress=progress)
    async def run(command: str) -> str:
        """Run a command."""
        return command

    registry = ToolRegistry()
    registry.register(run)
    presenter = ToolPresenter(registry)
    presenter.present_call(call_event("run", '{"command": "make"}', call_id="c1", turn=1))

    assert TerminalResultView(output="[ok\n]") == presenter.present_progress(_event(output="ok\n"))
