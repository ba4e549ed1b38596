"""Session events → ACP ``session/update`` payloads (the original's ``packages/ui/acp`` mapping).

A ``tool/call`` event becomes a ``tool_call`` update (``status: "in_progress"``), a
``tool/progress`` event a ``tool_call_update`` still ``in_progress`` (its text as content, or
with the terminal capability and a terminal card its output chunk as ``_meta.terminal_output``),
an appended ``tool/result`` event a ``tool_call_update`` (``completed`` / ``failed``). The cards come from a
:class:`~dsh_tools.ToolPresenter`, so a tool's own ``present_call`` / ``present_result`` shape
what the editor shows, with the presenter's fallbacks:

=========  ================================================  ==============================================
card       ``tool_call``                                     ``tool_call_update``
=========  ================================================  ==============================================
generic    title (relativized with ``locations[0]``), kind   text content, title if given
           (default ``other``), rawInput / locations if
           given, text content if any
diff       kind ``edit``, title relativized with             diff content if any, title relativized with
           ``locations[0]`` or ``diffs[0]``, locations,       ``diffs[0]`` if given
           one diff block per diff
terminal   kind ``execute``, title and rawInput = the        with the terminal capability: no content,
           command, the description as text; with the        ``_meta.terminal_output`` and
           terminal capability a terminal block and          ``_meta.terminal_exit``; without it: the output
           ``_meta.terminal_info``                           as a fenced ``console`` block
=========  ================================================  ==============================================

The "terminal capability" is the `Zed terminal extension`_ of ACP: the agent streams a command's
output in ``_meta`` keys and the editor renders it in a terminal widget whose id is the call id.

.. _Zed terminal extension: https://agentclientprotocol.com/protocol/extensibility
"""

from __future__ import annotations

import base64
import os.path
from collections.abc import Iterable
from typing import Final, NoReturn, cast

from dsh_tools import (
    AudioBlock,
    ContentBlock,
    DiffCallView,
    DiffResultView,
    FileBlock,
    FileDiff,
    FileLocation,
    GenericCallView,
    GenericResultView,
    ImageBlock,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallEvent,
    ToolCallKind,
    ToolPresenter,
    ToolProgressEvent,
    ToolResultEvent,
    console_block,
    thaw_json,
)
from dsh_tools._for_integrations import block_payload

__all__ = ["AcpSessionBridge", "relativize_title"]

_APPEND: Final = "append"


class AcpSessionBridge:
    """Maps one session's events to the ``update`` objects of ACP ``session/update``
    notifications.

    Args:
        presenter: presents the session's calls and results (it remembers each call until its
            result, so feed the bridge every ``tool/call`` and ``tool/result`` in log order).
        session_cwd: the ACP session's working directory: absolute paths inside it are shown
            relative to it in titles, and a terminal card's relative ``cwd`` is resolved
            against it.
        terminal: whether the client advertised the terminal extension (``_meta`` terminal
            updates instead of a fenced ``console`` block).
    """

    __slots__ = ("_presenter", "_session_cwd", "_terminal")

    def __init__(
        self,
        presenter: ToolPresenter,
        *,
        session_cwd: str | None = None,
        terminal: bool = False,
    ) -> None:
        self._presenter = presenter
        self._session_cwd = session_cwd
        self._terminal = terminal

    @property
    def session_cwd(self) -> str | None:
        """The session's working directory, if any."""
        return self._session_cwd

    @property
    def terminal(self) -> bool:
        """Whether terminal updates use the client's terminal extension."""
        return self._terminal

    def update_for(self, event: object) -> dict[str, object] | None:
        """The ``update`` payload of the ``session/update`` notification for ``event``.

        Returns:
            A fresh JSON object (ACP field names) for a ``tool/call`` event or an appended
            ``tool/result`` event; ``None`` for a result that is not an append (e.g. a pruning
            replacement, which is not a new result for a UI) and for every other event.

        Raises:
            TypeError: the presenter produced a view outside the closed card unions
                (``unreachable variant in ToolCallView: ...``).
        """
        if isinstance(event, ToolCallEvent):
            return self._call_update(event)
        if isinstance(event, ToolResultEvent):
            if event.surface_op is not None and event.surface_op != _APPEND:
                return None
            return self._result_update(event)
        if isinstance(event, ToolProgressEvent):
            return self._progress_update(event)
        return None

    def _progress_update(self, event: ToolProgressEvent) -> dict[str, object]:
        view = self._presenter.present_progress(event)
        update = _update("tool_call_update", event.call_id, "in_progress")
        if isinstance(view, TerminalResultView):
            self._put_output(update, event.call_id, view.output)
        elif isinstance(view, GenericResultView):
            update["content"] = _text_content(view.content or ())
        return update

    def _call_update(self, event: ToolCallEvent) -> dict[str, object]:
        view: object = self._presenter.present_call(event)
        update = _update("tool_call", event.call_id, "in_progress")
        if isinstance(view, GenericCallView):
            anchor = view.locations[0].path if view.locations else None
            update["title"] = self._relativize(view.title, anchor)
            update["kind"] = str(view.kind or ToolCallKind.OTHER)
            if view.raw_input is not None:
                update["rawInput"] = thaw_json(view.raw_input)
            if view.locations is not None:
                update["locations"] = _locations(view.locations)
            content = _text_content(view.content or ())
            if content:
                update["content"] = content
        elif isinstance(view, DiffCallView):
            anchor = (
                view.locations[0].path
                if view.locations
                else view.diffs[0].path
                if view.diffs
                else None
            )
            update["title"] = self._relativize(view.title, anchor)
            update["kind"] = str(ToolCallKind.EDIT)
            if view.locations is not None:
                update["locations"] = _locations(view.locations)
            if view.diffs:
                update["content"] = _diff_content(view.diffs)
        elif isinstance(view, TerminalCallView):  # pyright: ignore[reportUnnecessaryIsInstance]
            update["title"] = view.title
            update["kind"] = str(ToolCallKind.EXECUTE)
            update["rawInput"] = view.title
            content: list[dict[str, object]] = []
            if view.description:
                content.append(_text_item(view.description))
            if self._terminal:
                content.append({"type": "terminal", "terminalId": event.call_id})
                info: dict[str, object] = {"terminal_id": event.call_id}
                cwd = self._terminal_cwd(view.cwd)
                if cwd is not None:
                    info["cwd"] = cwd
                update["_meta"] = {"terminal_info": info}
            if content:
                update["content"] = content
        else:
            _unreachable("ToolCallView", view)
        return update

    def _result_update(self, event: ToolResultEvent) -> dict[str, object]:
        view: object = self._presenter.present_result(event)
        update = _update(
            "tool_call_update", event.call_id, "failed" if event.is_error else "completed"
        )
        if isinstance(view, GenericResultView):
            update["content"] = _text_content(view.content or ())
            if view.title is not None:
                update["title"] = view.title
        elif isinstance(view, TerminalResultView):
            meta = self._put_output(update, event.call_id, view.output)
            ended = _how_it_ended(view)
            if meta is not None and ended is not None:
                meta["terminal_exit"] = {"terminal_id": event.call_id, **ended}
            if view.title is not None:
                update["title"] = view.title
        elif isinstance(view, DiffResultView):  # pyright: ignore[reportUnnecessaryIsInstance]
            if view.diffs:
                update["content"] = _diff_content(view.diffs)
            if view.title is not None:
                anchor = view.diffs[0].path if view.diffs else None
                update["title"] = self._relativize(view.title, anchor)
        else:
            _unreachable("ToolResultView", view)
        return update

    def _put_output(
        self, update: dict[str, object], call_id: str, output: str | None
    ) -> dict[str, object] | None:
        """Put a terminal card's output in ``update``: with the terminal capability as
        ``_meta.terminal_output`` (returns that ``_meta``, for the exit to join), else as a
        fenced ``console`` block of content (returns ``None``).
        """
        if not self._terminal:
            update["content"] = [_text_item(console_block(output or ""))]
            return None
        meta: dict[str, object] = {
            "terminal_output": {"terminal_id": call_id, "data": output or ""}
        }
        update["_meta"] = meta
        return meta

    def _relativize(self, title: str, path: str | None) -> str:
        if path is None or self._session_cwd is None:
            return title
        return relativize_title(title, path, self._session_cwd)

    def _terminal_cwd(self, cwd: str | None) -> str | None:
        if cwd is None:
            return self._session_cwd
        if os.path.isabs(cwd) or self._session_cwd is None:
            return cwd
        return os.path.normpath(os.path.join(self._session_cwd, cwd))

    def __repr__(self) -> str:
        return f"<AcpSessionBridge cwd={self._session_cwd!r} terminal={self._terminal}>"


def relativize_title(title: str, path: str, cwd: str) -> str:
    """``title`` with every occurrence of ``path`` replaced by its form relative to ``cwd``.

    Only when both are absolute and ``path`` is inside ``cwd``: its relative form is not ``..``
    and does not start with a ``..`` *segment* (``..cache/x`` is inside, ``../x`` is not).
    Otherwise ``title`` is returned unchanged. ``cwd`` itself relativizes to ``.``.
    """
    if not path or not os.path.isabs(path) or not os.path.isabs(cwd):
        return title
    try:
        relative = os.path.relpath(path, cwd)
    except ValueError:  # another drive (Windows)
        return title
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return title
    if os.altsep is not None and relative.startswith(os.pardir + os.altsep):
        return title
    return title.replace(path, relative)


def _unreachable(union: str, value: object) -> NoReturn:
    raise TypeError(f"unreachable variant in {union}: {_describe(value)}")


def _describe(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def _how_it_ended(view: TerminalResultView) -> dict[str, object] | None:
    if view.signal is not None:
        return {"signal": view.signal}
    if view.exit_code is not None:
        return {"exit_code": view.exit_code}
    return None


def _update(kind: str, call_id: str, status: str) -> dict[str, object]:
    return {"sessionUpdate": kind, "toolCallId": call_id, "status": status}


def _text_item(text: str) -> dict[str, object]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _media_item(block: ImageBlock | AudioBlock | FileBlock) -> dict[str, object]:
    """A picture, sound or file as ACP tool-call content: an ``image`` or ``audio`` block of
    its bytes, a ``resource`` holding a file's, or a ``resource_link`` to what has a URL.
    """
    payload = block_payload(block)
    name = getattr(block, "name", None) or "attachment"
    if payload is None:  # an https: URL
        url = cast("str", getattr(block, "url", ""))
        link = {"type": "resource_link", "uri": url, "name": name, "mimeType": block.media_type}
        return {"type": "content", "content": link}
    data = base64.b64encode(payload).decode("ascii")
    if isinstance(block, ImageBlock | AudioBlock):
        kind = "image" if isinstance(block, ImageBlock) else "audio"
        return {
            "type": "content",
            "content": {"type": kind, "data": data, "mimeType": block.media_type},
        }
    resource = {"uri": name, "blob": data, "mimeType": block.media_type}
    return {"type": "content", "content": {"type": "resource", "resource": resource}}


def _text_content(blocks: Iterable[ContentBlock]) -> list[dict[str, object]]:
    """Text and media blocks as ACP tool-call content, in order (other blocks are not shown)."""
    items: list[dict[str, object]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            items.append(_text_item(block.text))
        elif isinstance(block, ImageBlock | AudioBlock | FileBlock):
            items.append(_media_item(block))
    return items


def _locations(locations: Iterable[FileLocation]) -> list[dict[str, object]]:
    wire: list[dict[str, object]] = []
    for location in locations:
        item: dict[str, object] = {"path": location.path}
        if location.line is not None:
            item["line"] = location.line
        wire.append(item)
    return wire


def _diff_content(diffs: Iterable[FileDiff]) -> list[dict[str, object]]:
    return [
        {"type": "diff", "path": diff.path, "oldText": diff.old_text, "newText": diff.new_text}
        for diff in diffs
    ]
