"""The presenter: a tool's render intents for the events of a session, with every fallback.

:class:`ToolPresenter` turns a ``tool/call`` event into a call view and the matching
``tool/result`` event into a result view, by calling the tool's own ``present_call`` /
``present_result`` and falling back to a generic card whenever that gives nothing usable:

====================================  ===============================================================
the tool ...                          the view
====================================  ===============================================================
is unknown, has no ``present_call``,  ``GenericCallView(title=<tool name>, kind=other,
returns ``None``, raises, or returns  raw_input=<parsed arguments>)``; a raise (or a value that is
something that is not a call view     not a view) goes to ``on_error(exc, call_id)``, never up
has no remembered call, no            ``GenericResultView(content=<the result's raw content>)``
``present_result``, returns ``None``,
raises, or returns a non-view
returns a generic result without      the same view with the raw content filled in
content
returns a terminal result for a call  ``GenericResultView(content=<raw content>)`` (orphan guard: a
whose card was not a terminal card    terminal result needs the terminal its call opened)
====================================  ===============================================================

Presenters are pure functions of the arguments (and the result), so the views depend only on the
events: presenting a live run and replaying its session log give the same views.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Final, TypeAlias, cast

import attrs

from dsh_tools._errors import JsonSnapshotError
from dsh_tools._pipeline._registry import ToolRegistry
from dsh_tools._sessions._events import ToolCallEvent, ToolProgressEvent, ToolResultEvent
from dsh_tools._texts import debug_traceback, format_js_number, one_line
from dsh_tools._values._arguments import parse_call_arguments
from dsh_tools._values._content import TextBlock
from dsh_tools._values._execution import ToolResult
from dsh_tools._values._json import JsonValue, snapshot_json
from dsh_tools._values._presentation import (
    DiffResultView,
    GenericResultView,
    TerminalCallView,
    TerminalResultView,
    ToolCallView,
    ToolResultView,
    call_view_of,
)

__all__ = [
    "ToolPresenter",
    "console_block",
    "progress_text",
    "tool_result_from_event",
]

logger: Final = logging.getLogger("dsh_tools")

PresenterErrorSink: TypeAlias = Callable[[Exception, str], object]
"""``(exc, call_id) -> None``: told about a presenter that raised or returned a non-view."""

_RESULT_VIEWS: Final = (GenericResultView, TerminalResultView, DiffResultView)
_BACKTICKS: Final = re.compile(r"`+")


def console_block(output: str) -> str:
    r"""The fenced ``console`` block a UI without terminals shows for a command's output.

    Trailing newlines of ``output`` are stripped; ``console_block("ok\n")`` gives::

        ```console
        ok
        ```

    When the output itself contains a run of three or more backticks, the fence is one
    backtick longer than the longest run, so the output cannot close the block early
    (CommonMark's rule).
    """
    longest = max((len(run) for run in _BACKTICKS.findall(output)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}console\n{output.rstrip(chr(10))}\n{fence}"


def tool_result_from_event(event: ToolResultEvent) -> ToolResult:
    """What a tool's ``present_result`` receives for a ``tool/result`` event: its content,
    ``is_error`` and ``meta`` (the body's private presentation payload).
    """
    return ToolResult(content=event.content, is_error=event.is_error, meta=event.meta)


@attrs.frozen
class _Pending:
    name: str
    arguments: JsonValue
    card: ToolCallView


class ToolPresenter:
    """Presents the ``tool/call`` and ``tool/result`` events of one agent's session.

    Args:
        registry: where the tools (and their presenters) are looked up.
        agent: the agent whose view of the registry is used (its scoped tools shadow global
            ones); ``None`` for the global tools.
        on_error: ``(exc, call_id) -> None``, told when a tool's presenter raised or returned
            something that is not a view. Every such failure is also logged (logger
            ``dsh_tools``, WARNING). Whatever ``on_error`` raises is logged and contained.

    Raises:
        TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`, or ``on_error`` is
            neither ``None`` nor callable.

    A presenter remembers ``(name, arguments, call view)`` for each call it presented until it
    presents that call's result, so ``present_result`` sees the same arguments and can check
    the call's card. The methods are synchronous and never raise for anything a tool, a log or
    the model supplied.
    """

    __slots__ = ("_agent", "_on_error", "_pending", "_registry")

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        agent: object | None = None,
        on_error: PresenterErrorSink | None = None,
    ) -> None:
        if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable or None, not {type(on_error).__name__}")
        self._registry = registry
        self._agent = agent
        self._on_error = on_error
        self._pending: dict[str, _Pending] = {}

    @property
    def pending_call_ids(self) -> tuple[str, ...]:
        """The calls presented whose result has not been presented yet, in presentation order."""
        return tuple(self._pending)

    def present_call(self, event: ToolCallEvent) -> ToolCallView:
        """The view of a call that started (its pending state); remembers it for its result.

        The arguments are parsed from the event's raw text with
        :func:`~dsh_tools.parse_call_arguments`, exactly as the scheduler parsed them.
        """
        if not isinstance(event, ToolCallEvent):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"event must be a ToolCallEvent, not {type(event).__name__}")
        name = event.name
        parsed = parse_call_arguments(event.arguments)
        try:
            arguments = snapshot_json(parsed)
        except JsonSnapshotError:
            # JSON the pipeline refuses at its boundary: show the text as the model sent it
            arguments = event.arguments
        card = self._call_view(event.call_id, name, arguments)
        self._pending[event.call_id] = _Pending(name, arguments, card)
        return card

    def _call_view(self, call_id: str, name: str, arguments: JsonValue) -> ToolCallView:
        definition = self._registry.get(name, self._agent)
        presenter = None if definition is None else definition.present_call
        view, error = call_view_of(presenter, name, arguments)
        if error is not None:
            self._report(error, call_id, name, "present_call")
        return view

    def present_result(self, event: ToolResultEvent) -> ToolResultView:
        """The view of a committed call (its completed state); forgets the remembered call."""
        if not isinstance(event, ToolResultEvent):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"event must be a ToolResultEvent, not {type(event).__name__}")
        pending = self._pending.pop(event.call_id, None)
        raw = GenericResultView(content=event.content)
        if pending is None:
            return raw
        definition = self._registry.get(pending.name, self._agent)
        presenter = None if definition is None else definition.present_result
        if presenter is None:
            return raw
        try:
            view = cast(object, presenter(pending.arguments, tool_result_from_event(event)))
        except Exception as exc:
            self._report(exc, event.call_id, pending.name, "present_result")
            return raw
        if view is None:
            return raw
        if isinstance(view, GenericResultView):
            return view if view.content is not None else attrs.evolve(view, content=event.content)
        if isinstance(view, TerminalResultView):
            if not isinstance(pending.card, TerminalCallView):
                logger.debug(
                    "tool %r call %r: a terminal result for a %s call card is shown as raw content",
                    pending.name,
                    event.call_id,
                    type(pending.card).__name__,
                )
                return raw
            return view
        if isinstance(view, DiffResultView):
            return view
        self._report(
            TypeError(f"present_result returned {type(view).__name__}, not a ToolResultView"),
            event.call_id,
            pending.name,
            "present_result",
        )
        return raw

    def present_progress(self, event: ToolProgressEvent) -> ToolResultView:
        """The view of a running call's progress (its call stays pending).

        The tool's own ``present_progress(arguments, event)`` decides first (a terminal result
        view only for a terminal card; ``None``, a raise or anything else: what follows).
        A terminal card's call shows the event's ``output`` chunk as terminal output
        (``TerminalResultView(output=...)``, to be appended to what the terminal shows); any
        other call, or an event without output, a ``GenericResultView`` whose one text block
        is :func:`progress_text`.
        """
        if not isinstance(event, ToolProgressEvent):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"event must be a ToolProgressEvent, not {type(event).__name__}")
        pending = self._pending.get(event.call_id)
        if pending is not None:
            definition = self._registry.get(pending.name, self._agent)
            presenter = None if definition is None else definition.present_progress
            if presenter is not None:
                view = self._tool_progress_view(presenter, pending, event)
                if view is not None:
                    return view
        if (
            event.output is not None
            and pending is not None
            and isinstance(pending.card, TerminalCallView)
        ):
            return TerminalResultView(output=event.output)
        return GenericResultView(content=(TextBlock(text=progress_text(event)),))

    def _tool_progress_view(
        self,
        presenter: Callable[[Any, Any], ToolResultView | None],
        pending: _Pending,
        event: ToolProgressEvent,
    ) -> ToolResultView | None:
        """The tool's own ``present_progress`` view, or ``None`` (it declined, raised, or
        returned what is no view: then the generic one is shown).
        """
        try:
            view = cast(object, presenter(pending.arguments, event))
        except Exception as exc:
            self._report(exc, event.call_id, pending.name, "present_progress")
            return None
        if view is None or isinstance(view, GenericResultView | DiffResultView):
            return view
        if isinstance(view, TerminalResultView) and isinstance(pending.card, TerminalCallView):
            return view
        self._report(
            TypeError(
                f"present_progress returned {type(view).__name__}, not a ToolResultView for "
                f"its {type(pending.card).__name__}"
            ),
            event.call_id,
            pending.name,
            "present_progress",
        )
        return None

    def _report(self, exc: Exception, call_id: str, name: str, what: str) -> None:
        logger.warning(
            "tool %r call %r: %s failed: %s",
            name,
            call_id,
            what,
            one_line(exc),
            exc_info=debug_traceback(logger, exc),
        )
        sink = self._on_error
        if sink is None:
            return
        try:
            sink(exc, call_id)
        except Exception:
            logger.exception("tool %r call %r: the presenter's on_error raised", name, call_id)

    def __repr__(self) -> str:
        return f"<ToolPresenter agent={self._agent!r} pending={len(self._pending)}>"


def progress_text(event: ToolProgressEvent) -> str:
    """One line for a progress event: ``"<message> (<progress>/<total>)"``, with the parts
    it has (``"fetching"``, ``"3/10"``, ``"fetching (3)"``); amounts are shown as given, never
    turned into a percentage. An event with neither shows its output.
    """
    amounts = ""
    if event.progress is not None:
        amounts = format_js_number(event.progress)
        if event.total is not None:
            amounts += "/" + format_js_number(event.total)
    elif event.total is not None:
        amounts = "?/" + format_js_number(event.total)
    if event.message is not None:
        return f"{event.message} ({amounts})" if amounts else event.message
    if amounts:
        return amounts
    return event.output or ""
