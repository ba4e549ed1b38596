"""Failures a developer can see: what the pipeline logs on the ``dsh_tools`` logger.

Every exception a body, hook, guard, wrapper or observer raises is logged once, in one line
naming the tool, the call id and the exception (WARNING; DEBUG for a ``HarnessError``), with
its traceback when the logger is enabled for DEBUG. Every
stage-9 failure and every argument the boundary rejects is logged at WARNING with the detail.
The model-facing texts stay the original's.
"""

from __future__ import annotations

import logging
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, cast

import pytest

from dsh_tools import (
    ExecuteNext,
    HarnessError,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    TextBlock,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
)
from support import execution_input, first_text, ok_body, registry_with, string_tool, tool


def _registry(body: Any = None) -> ToolRegistry:
    return registry_with(tool("t", body or ok_body))


def _input(arguments: object = None) -> ToolExecutionInput:
    return execution_input("t", arguments, call_id="call-7")


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, str, bool]]:
    return [
        (record.name, record.levelno, record.getMessage(), record.exc_info is not None)
        for record in caplog.records
    ]


async def _raise_key_error(*_args: object) -> Any:
    raise KeyError("path")


async def test_a_raising_body_is_logged_once_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="dsh_tools")

    result = await _registry(_raise_key_error).execute(_input())

    expected = [
        (
            "dsh_tools",
            logging.WARNING,
            "tool \"t\" (call-7): the tool body raised KeyError: 'path'",
            True,
        )
    ]
    assert ("Error: 'path'", expected) == (first_text(result), _records(caplog))
    assert caplog.records[0].exc_info is not None
    assert isinstance(caplog.records[0].exc_info[1], KeyError)


async def test_a_harness_error_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="dsh_tools")
    registry = registry_with(string_tool("t", _raise_key_error, field="x"))

    await registry.execute(_input())

    expected = [
        (
            "dsh_tools",
            logging.DEBUG,
            'tool "t" (call-7): the tool body raised ToolArgsError: invalid arguments: missing required property "x"',
            True,
        )
    ]
    assert expected == _records(caplog)


async def test_each_hook_kind_that_raises_is_logged_naming_itself(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="dsh_tools")
    texts: list[str] = []
    for kind in ("pre", "guard", "wrapper", "post", "observer"):
        registry = _registry()
        if kind == "pre":

            async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
                raise ValueError("pre")

            registry.hooks.pre_execute.add(pre)
        elif kind == "guard":

            def guard(execution: ToolExecution) -> str | None:
                raise ValueError("guard")

            registry.guard(guard)
        elif kind == "wrapper":

            async def wrapper(
                execution: ToolDispatchExecution, next: ExecuteNext
            ) -> ToolExecutionResult:
                raise ValueError("wrapper")

            registry.hooks.execute.add(wrapper)
        elif kind == "post":

            async def post(
                execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
            ) -> PostToolDecision:
                raise HarnessError("post", "POLICY")

            registry.hooks.post_execute.add(post)
        else:

            def observer(execution: ToolExecution, result: ToolExecutionResult) -> None:
                raise ValueError("observer")

            registry.hooks.result.add(observer)
        texts.append(first_text(await registry.execute(_input())))

    expected = [
        (
            "dsh_tools",
            logging.WARNING,
            'tool "t" (call-7): a pre_execute listener raised ValueError: pre',
            True,
        ),
        ("dsh_tools", logging.WARNING, 'tool "t" (call-7): a guard raised ValueError: guard', True),
        (
            "dsh_tools",
            logging.WARNING,
            'tool "t" (call-7): an execute wrapper raised ValueError: wrapper',
            True,
        ),
        (
            "dsh_tools",
            logging.DEBUG,
            'tool "t" (call-7): a post_execute listener raised HarnessError: post',
            True,
        ),
        (
            "dsh_tools",
            logging.WARNING,
            'tool "t" (call-7): tools/result observer failed: observer',
            True,
        ),
    ]
    assert (["Error: pre", "Error: guard", "Error: wrapper", "Error: post", "ok"], expected) == (
        texts,
        _records(caplog),
    )


@pytest.mark.parametrize(
    ("returned", "detail"),
    [
        (
            {"x": math.inf},
            "a body returned {'x': inf}, a dict, where str, content blocks, ToolOutput or lossless JSON data belong",
        ),
        (
            None,
            "a body returned None, a NoneType, where str, content blocks, ToolOutput or lossless JSON data belong",
        ),
        ([TextBlock(text="ok"), "x"], 'content[1] is "x", a str, not a content block'),
        (
            ToolOutput(content=(), meta=cast(Any, {"callback": print})),
            "meta: $.callback: a value of type builtin_function_or_method is not JSON data",
        ),
    ],
)
async def test_a_stage_9_failure_is_logged_with_its_detail(
    caplog: pytest.LogCaptureFixture, returned: object, detail: str
) -> None:
    async def body(args: Any, context: ToolRunContext) -> Any:
        return returned

    caplog.set_level(logging.DEBUG, logger="dsh_tools")

    result = await _registry(body).execute(_input())

    expected = [
        (
            "dsh_tools",
            logging.WARNING,
            f'tool "t" (call-7): tool result must be losslessly JSON-serializable: {detail}',
            False,
        )
    ]
    assert ("Error: tool result must be losslessly JSON-serializable", expected) == (
        first_text(result),
        _records(caplog),
    )


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        ({"n": 2**53}, "$.n: integer 9007199254740992 is outside"),
        ({"s": "\ud800"}, "$.s: string contains a lone surrogate"),
    ],
)
async def test_arguments_the_boundary_rejects_keep_the_model_text_and_log_the_detail(
    caplog: pytest.LogCaptureFixture, arguments: object, detail: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="dsh_tools")

    result = await _registry().execute(_input(arguments))

    prefix = f'tool "t" (call-7): arguments rejected at the JSON boundary: {detail}'
    assert (
        "Error: tool execution arguments must be losslessly JSON-serializable",
        [("dsh_tools", logging.WARNING, True, False)],
    ) == (
        first_text(result),
        [
            (name, level, message.startswith(prefix), traced)
            for name, level, message, traced in _records(caplog)
        ],
    )


async def test_a_successful_call_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="dsh_tools")

    await _registry().execute(_input())

    assert [] == _records(caplog)


async def test_without_debug_a_raising_body_is_one_line_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dsh_tools")

    async def multi_line(*_args: object) -> Any:
        raise ValueError("first line\nsecond line")

    await _registry(multi_line).execute(_input())

    expected = [
        (
            "dsh_tools",
            logging.WARNING,
            'tool "t" (call-7): the tool body raised ValueError: first line ...',
            False,
        )
    ]
    assert expected == _records(caplog)


def test_a_program_that_never_configured_logging_gets_one_line_per_failing_tool(
    tmp_path: Path,
) -> None:
    # Python's last-resort handler prints WARNING records on stderr: one line, no traceback
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent(
            """
            import trio
            from dsh_tools import CancelSignal, ToolCallRequest, ToolRegistry, run_tool_calls

            registry = ToolRegistry()

            @registry.tool
            async def fetch(url: str) -> str:
                \"\"\"Fetch a page.\"\"\"
                raise ConnectionError("connection refused")

            async def main() -> None:
                batch = await run_tool_calls(
                    registry,
                    [ToolCallRequest(call_id="c1", name="fetch", arguments='{"url": "u"}')],
                    signal=CancelSignal.never(),
                )
                print(batch.results[0].content[0].text)

            trio.run(main)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert (0, "Error: connection refused\n") == (done.returncode, done.stdout)
    assert [
        'tool "fetch" (c1): the tool body raised ConnectionError: connection refused'
    ] == done.stderr.splitlines()
