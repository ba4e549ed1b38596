"""The output budget: a cap on how much result text reaches the model.

One ``execute`` wrapper. A result whose text (its text blocks, joined) is longer than the
budget reaches the model as its head and its tail around one line
``[... <n> characters omitted ...]`` (and ``full output: <path>`` when the whole text was
spilled to a file); ``meta["truncated"]`` records it. Results within the budget pass untouched.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import attrs
import trio

from dsh_tools._pipeline._hooks import ExecuteNext
from dsh_tools._pipeline._registry import ToolRegistry
from dsh_tools._texts import output_omitted, output_spilled
from dsh_tools._values._content import ContentBlock, TextBlock, text_block
from dsh_tools._values._definition import check_char_budget
from dsh_tools._values._disposer import Disposer
from dsh_tools._values._execution import ToolDispatchExecution, ToolExecutionResult
from dsh_tools._values._json import JsonValue

__all__ = ["install_output_budget"]

logger: Final = logging.getLogger("dsh_tools")

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")


def install_output_budget(
    registry: ToolRegistry,
    *,
    max_chars: int = 40_000,
    head: float = 0.5,
    spill_dir: str | os.PathLike[str] | None = None,
) -> Disposer:
    """Cap the text of every result the model reads.

    Registers one ``execute`` wrapper (register it first, so it sees the final outcome of the
    wrappers inside it: a retry policy's last attempt). A result whose text blocks hold more
    than the tool's budget (``ToolDefinition.max_output_chars``, else ``max_chars``)
    characters in all becomes one text block: the first ``round(budget * head)`` characters,
    the line ``[... <n> characters omitted ...]`` (plus ``full output: <path>`` when spilled),
    and the last characters of the budget; its other blocks (images, ...) follow unchanged.
    ``meta["truncated"] = {"originalChars": <n>, "path": <path or None>}`` (a ``meta`` that is
    not a JSON object is kept under ``meta["meta"]``). Error results are capped too.

    Args:
        registry: the registry whose calls are capped.
        max_chars: the budget of tools without their own (a positive ``int``).
        head: the share of the budget given to the head (``0.0``: only the tail, ``1.0``: only
            the head).
        spill_dir: a directory where the whole text of a capped result is written (one file
            per capped result, named after the call id); ``None``: nothing is written. A file
            that cannot be written is logged, and the result is capped without a path.

    Returns:
        A :class:`~dsh_tools.Disposer` that removes the budget.

    Raises:
        TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`, or ``head`` is not
            a number.
        ValueError: ``max_chars`` is not a positive ``int``, ``head`` is outside ``[0, 1]``,
            or ``spill_dir`` is not a writable directory.
    """
    if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
    # a tool's own budget may be None (none); the registry's may not
    if max_chars is None:  # pyright: ignore[reportUnnecessaryComparison]
        raise ValueError("max_chars must be a positive integer number of characters (got None)")
    check_char_budget("max_chars", max_chars)
    if isinstance(head, bool) or not isinstance(head, int | float):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"head must be a number between 0 and 1, not {type(head).__name__}")
    if not 0.0 <= head <= 1.0:  # NaN fails too
        raise ValueError(f"head must be a number between 0 and 1, not {head!r}")
    spill = None if spill_dir is None else _writable_dir(spill_dir)
    share = float(head)

    async def cap_output(
        execution: ToolDispatchExecution, next: ExecuteNext
    ) -> ToolExecutionResult:
        result = await next()
        tool = registry.get(execution.name, execution.agent)
        budget = max_chars
        if tool is not None and tool.max_output_chars is not None:
            budget = tool.max_output_chars
        text = _over_budget(result, budget)
        if text is None:
            return result
        path = None if spill is None else await _spill(spill, execution.call_id, text)
        return _capped(result, text, budget, share, path)

    return registry.hooks.execute.add(cap_output)


def _writable_dir(value: str | os.PathLike[str]) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise ValueError(f"spill_dir must be an existing directory: {str(path)!r} is not one")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"spill_dir must be a directory this process can write: {str(path)!r}")
    return path


def _over_budget(result: ToolExecutionResult, budget: int) -> str | None:
    """The whole text of ``result`` when it is longer than ``budget``, else ``None``."""
    size = 0
    for block in result.content:
        if type(block) is TextBlock:
            size += len(block.text)
    if size <= budget:
        return None
    return "".join(block.text for block in result.content if type(block) is TextBlock)


def _capped(
    result: ToolExecutionResult, text: str, budget: int, head: float, path: str | None
) -> ToolExecutionResult:
    content = result.content
    size = len(text)
    head_chars = round(budget * head)
    tail_chars = budget - head_chars
    marker = output_omitted(size - budget)
    if path is not None:
        marker += "\n" + output_spilled(path)
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    capped = f"{text[:head_chars]}\n{marker}\n{tail}"
    blocks: list[ContentBlock] = [text_block(capped)]
    blocks.extend(block for block in content if type(block) is not TextBlock)
    truncated: dict[str, JsonValue] = {"originalChars": size, "path": path}
    meta = result.meta
    new_meta: dict[str, object]
    if meta is None:
        new_meta = {"truncated": truncated}
    elif isinstance(meta, Mapping):
        new_meta = {**meta, "truncated": truncated}
    else:
        new_meta = {"meta": meta, "truncated": truncated}
    return attrs.evolve(result, content=tuple(blocks), meta=new_meta)


async def _spill(directory: Path, call_id: str, text: str) -> str | None:
    name = f"{_UNSAFE.sub('_', call_id)[:64]}-{uuid.uuid4().hex[:12]}.txt"
    path = directory / name

    def write() -> None:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")

    try:
        # the outcome is decided: the file is written whole or not at all
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(write)
    except OSError as exc:
        logger.warning("could not spill a capped tool result to %s: %s", path, exc)
        return None  # noqa: ASYNC910 (run_sync checkpointed, or raised)
    return str(path)
