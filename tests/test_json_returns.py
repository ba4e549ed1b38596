"""A body that returns a JSON value or an attrs / dataclass instance gives the model one text
block of compact JSON (a deviation from the original, which accepts content only)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import attrs
import pytest

from dsh_tools import (
    TextBlock,
    ToolExecutionResult,
    ToolRunContext,
    snapshot_json,
)
from support import error_result, execution_input, registry_with, tool


async def _result_of(returned: object) -> ToolExecutionResult:
    async def body(args: Any, context: ToolRunContext) -> Any:
        return returned

    registry = registry_with(tool("t", body, description="d", parameters={"type": "object"}))
    return await registry.execute(execution_input("t", call_id="call-1"))


def _text(text: str) -> ToolExecutionResult:
    return ToolExecutionResult(content=(TextBlock(text=text),), is_error=False)


@attrs.frozen
class Hit:
    path: str
    line: int


@dataclasses.dataclass
class Page:
    hits: list[Hit]
    more: bool


@pytest.mark.parametrize(
    ("returned", "text"),
    [
        ({"b": 1, "a": [1.5, None, "é"]}, '{"b":1,"a":[1.5,null,"é"]}'),
        ([1, 2], "[1,2]"),
        (["x"], '["x"]'),
        ((), None),
        (42, "42"),
        (2.5, "2.5"),
        (True, "true"),
        (False, "false"),
        (Hit(path="a.py", line=3), '{"path":"a.py","line":3}'),
        (
            Page(hits=[Hit(path="a.py", line=3)], more=False),
            '{"hits":[{"path":"a.py","line":3}],"more":false}',
        ),
        (snapshot_json({"frozen": [1]}), '{"frozen":[1]}'),
        (
            [Hit(path="a.py", line=3), Hit(path="b.py", line=1)],
            '[{"path":"a.py","line":3},{"path":"b.py","line":1}]',
        ),
        ({"best": Hit(path="a.py", line=3)}, '{"best":{"path":"a.py","line":3}}'),
    ],
)
async def test_a_json_value_or_an_instance_reaches_the_model_as_compact_json(
    returned: object, text: str | None
) -> None:
    expected = ToolExecutionResult(content=(), is_error=False) if text is None else _text(text)

    assert expected == await _result_of(returned)


@pytest.mark.parametrize(
    "returned",
    [
        None,
        {"x": math.nan},
        {"big": 2**60},
        {1: "non-str key"},
        [TextBlock(text="ok"), "x"],
        {1, 2},
    ],
)
async def test_none_and_values_that_are_not_lossless_json_stay_an_invalid_result(
    returned: object,
) -> None:
    expected = error_result("Error: tool result must be losslessly JSON-serializable")

    assert expected == await _result_of(returned)


async def test_content_blocks_are_still_content() -> None:
    assert _text("ok") == await _result_of([TextBlock(text="ok")])
