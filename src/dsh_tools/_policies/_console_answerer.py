"""The terminal prompt: what a person at a terminal sees of an approval request
(:func:`describe_call`) and the answerer that asks them (:func:`console_answerer`).

Presentation for a person, so it sits with the presenter, above the pipeline whose answerer
type it implements. Every text that came from the model, a tool or a server is shown with its
control characters visible, never interpreted.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final, cast

import trio

from dsh_tools._pipeline._answerers import ApprovalAnswerer, ApprovalNext
from dsh_tools._values._content import TextBlock
from dsh_tools._values._execution import Approval, ApprovalOutcome, ApprovalRequest
from dsh_tools._values._json import thaw_json
from dsh_tools._values._media import AudioBlock, FileBlock, ImageBlock, describe_media
from dsh_tools._values._presentation import DiffCallView, TerminalCallView, unified_diff_lines
from dsh_tools._values._printable import printable

__all__ = ["console_answerer", "describe_call"]

_DEFAULT_PROMPT: Final = 'Allow tool "{tool_name}"{reason}? [y/N/a/e] '


def describe_call(request: ApprovalRequest) -> str:
    """The text a terminal shows of what ``request`` approves: its call card (a diff for an
    edit, the command for a shell tool, the arguments as JSON otherwise), every line made
    printable. Empty when the request carries no card and no arguments.
    """
    view = request.view
    if view is None:
        if request.arguments is None:
            return ""
        return _json_text(request.arguments)
    if isinstance(view, TerminalCallView):
        lines = [f"$ {printable(view.title, multiline=False)}"]
        if view.cwd is not None:
            lines.append(f"  in {printable(view.cwd, multiline=False)}")
        if view.description is not None:
            lines.append(f"  ({printable(view.description, multiline=False)})")
        return "\n".join(lines)
    if isinstance(view, DiffCallView):
        lines = [printable(view.title, multiline=False)]
        for diff in view.diffs:
            lines.extend(unified_diff_lines(diff))
        return "\n".join(lines)
    lines = [printable(view.title, multiline=False)]
    if view.raw_input is not None:
        lines.append(_json_text(view.raw_input))
    for block in view.content or ():
        if isinstance(block, TextBlock):
            lines.append(printable(block.text))
        elif isinstance(block, ImageBlock | AudioBlock | FileBlock):
            lines.append(printable(describe_media(block), multiline=False))
    return "\n".join(lines)


async def _edit(
    request: ApprovalRequest, reader: Callable[[str], str], show: Callable[[str], object]
) -> dict[str, object] | None:
    """The arguments the person wrote instead of the request's, or ``None`` (shown why) when
    there is nothing to edit or what they wrote is not a JSON object.
    """
    await trio.lowlevel.checkpoint()
    if request.arguments is None:
        show("this request has no arguments to edit")
        return None
    current = json.dumps(thaw_json(request.arguments), indent=2, ensure_ascii=False)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if editor:
        with tempfile.TemporaryDirectory(prefix="dsh-tools-edit-") as directory:
            path = Path(directory) / "arguments.json"
            path.write_text(current + "\n", encoding="utf-8")
            finished = await trio.run_process(
                [*shlex.split(editor), str(path)], stdin=None, check=False
            )
            if finished.returncode != 0:
                show(f"the editor exited with status {finished.returncode}: nothing changed")
                return None
            text = path.read_text(encoding="utf-8")
    else:
        show(current)
        try:
            text = await trio.to_thread.run_sync(
                reader, "New arguments (one line of JSON): ", abandon_on_cancel=True
            )
        except EOFError:
            return None
    try:
        edited = json.loads(text)
    except ValueError as exc:
        show(f"not JSON ({exc}): nothing changed")
        return None
    if not isinstance(edited, dict):
        show(f"the arguments must be a JSON object, not {type(edited).__name__}: nothing changed")
        return None
    return cast("dict[str, object]", edited)


def _json_text(value: object) -> str:
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return printable(text)


def read_terminal_line(prompt: str) -> str:
    """Write ``prompt`` to stdout and read one line from standard input's file descriptor
    (without its newline); ``EOFError`` at the end of input. A ``sys.stdin`` replaced by an
    object without a descriptor (an ``io.StringIO``) is read with its ``readline()``.

    It reads the descriptor itself, not ``sys.stdin``: a thread blocked in :func:`input` holds
    ``sys.stdin``'s buffer lock, and Ctrl-C while it waits ends the interpreter with
    ``Fatal Python error: _enter_buffered_busy``. The terminal's own line editing (erase,
    kill) still applies.
    """
    sys.stdout.write(prompt)
    sys.stdout.flush()
    stdin = sys.stdin
    try:
        fd = stdin.fileno()
    except (AttributeError, ValueError, OSError):  # replaced by an object without a descriptor
        line = stdin.readline()
        if not line:
            raise EOFError from None
        return line.rstrip("\r\n")
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            if not data:
                raise EOFError
            break
        data += chunk
    return data.decode(sys.stdin.encoding or "utf-8", errors="replace").rstrip("\r\n")


def console_answerer(
    *,
    prompt: str = _DEFAULT_PROMPT,
    read_line: Callable[[str], str] | None = None,
    show: Callable[[str], object] = print,
) -> ApprovalAnswerer:
    r"""An answerer that asks on the terminal: it shows the call (its card: a diff for an
    edit, the command for a shell tool, the arguments otherwise), then reads ``y`` / ``yes``
    (allow this call once), ``a`` / ``always`` (allow it, and this tool for the rest of the
    session: ``allowed-session``), ``e`` / ``edit`` (edit the arguments, then allow the edited
    call once), ``n`` / ``no`` / an empty line (reject); anything else asks again.

    ``e`` opens the arguments as indented JSON in ``$VISUAL`` (else ``$EDITOR``) and reads the
    file back when the editor exits; with neither set it reads the new arguments as one line of
    JSON. What is not a JSON object (or an editor that fails) is shown, and the question is
    asked again; the edited arguments are validated again by the pipeline before anything runs
    (an :class:`~dsh_tools.Approval` with ``arguments``).

    The line is read in a worker thread (``trio.to_thread.run_sync``), so the event loop keeps
    running while the user thinks. When the request is cancelled the answerer returns at once
    (the thread is abandoned: it ends when its read does, and that answer is dropped). At the
    end of input (``EOFError``: no terminal) it delegates with ``next()``. One question is
    asked at a time.

    Args:
        prompt: a :meth:`str.format` template with ``{tool_name}``, ``{call_id}`` and
            ``{reason}`` (the request's reason as ``" (<reason>)"``, or empty). Each value is
            put in with its control characters (newlines too) written as visible escapes
            (``\x1b``), so a terminal never acts on them.
        read_line: ``(prompt) -> line``, called in the worker thread; ``None`` (the default)
            writes the prompt and reads standard input's file descriptor (not through :func:`input`, whose lock on
            ``sys.stdin`` turns a Ctrl-C at the prompt into an interpreter abort).
        show: ``(text) -> None``, shows the call before the question (:func:`print` by
            default; called on the trio thread).
    """
    lock = trio.Lock()
    reader = read_terminal_line if read_line is None else read_line

    async def answer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome | Approval:
        # the request's texts come from the model, a tool or a server: shown, never interpreted
        text = prompt.format(
            tool_name=printable(request.tool_name, multiline=False),
            call_id="" if request.call_id is None else printable(request.call_id, multiline=False),
            reason=""
            if request.reason is None
            else f" ({printable(request.reason, multiline=False)})",
        )
        async with lock:
            card = describe_call(request)
            if card:
                show(card)
            while True:
                try:
                    line = await trio.to_thread.run_sync(reader, text, abandon_on_cancel=True)
                except EOFError:
                    break
                reply = line.strip().lower()
                if reply in ("y", "yes"):
                    return ApprovalOutcome.ALLOWED_ONCE
                if reply in ("a", "always"):
                    return ApprovalOutcome.ALLOWED_SESSION
                if reply in ("", "n", "no"):
                    return ApprovalOutcome.REJECTED
                if reply in ("e", "edit"):
                    edited = await _edit(request, reader, show)
                    if edited is not None:
                        return Approval(ApprovalOutcome.ALLOWED_ONCE, edited)
        return await next()

    return answer
