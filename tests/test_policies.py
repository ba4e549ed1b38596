"""The output budget, the retry policy and the call budget, on trio's virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelController,
    HarnessError,
    TextBlock,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    install_call_budget,
    install_output_budget,
    install_retry_policy,
)
from support import execution_input, request, run_calls


def _tool(name: str, body: Any, **options: Any) -> ToolDefinition:
    return ToolDefinition(name=name, description="d", parameters={}, execute=body, **options)


def _registry(*definitions: ToolDefinition) -> ToolRegistry:
    registry = ToolRegistry()
    for definition in definitions:
        registry.register(definition)
    return registry


def _text(result: ToolExecutionResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


def _returns(text: str, meta: Any = None) -> Any:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        if meta is None:
            return text
        return ToolOutput(content=[TextBlock(text=text)], meta=meta)

    return body


# --- output budget ------------------------------------------------------------------------------


async def test_a_result_within_the_budget_passes_untouched() -> None:
    registry = _registry(_tool("t", _returns("x" * 100)))
    install_output_budget(registry, max_chars=100)

    result = await registry.execute(execution_input("t"))

    assert ("x" * 100, None) == (_text(result), result.meta)


async def test_a_long_result_keeps_its_head_and_tail_around_one_omission_line() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    registry = _registry(_tool("t", _returns(text)))
    install_output_budget(registry, max_chars=100, head=0.3)

    result = await registry.execute(execution_input("t"))

    expected = (
        f"{text[:30]}\n[... 900 characters omitted ...]\n{text[-70:]}",
        {"truncated": {"originalChars": 1000, "path": None}},
    )
    assert expected == (_text(result), result.meta)


async def test_a_tools_own_budget_wins_over_the_policys() -> None:
    registry = _registry(_tool("t", _returns("y" * 50), max_output_chars=10))
    install_output_budget(registry, max_chars=1000)

    result = await registry.execute(execution_input("t"))

    assert "yyyyy\n[... 40 characters omitted ...]\nyyyyy" == _text(result)


async def test_the_truncation_joins_the_results_own_meta() -> None:
    registry = _registry(_tool("t", _returns("z" * 20, meta={"source": "web"})))
    install_output_budget(registry, max_chars=10)

    result = await registry.execute(execution_input("t"))

    expected = {"source": "web", "truncated": {"originalChars": 20, "path": None}}
    assert expected == result.meta


async def test_a_spilled_result_names_the_file_that_holds_all_of_it(tmp_path: Path) -> None:
    text = "0123456789" * 10
    registry = _registry(_tool("t", _returns(text)))
    install_output_budget(registry, max_chars=20, spill_dir=tmp_path)

    result = await registry.execute(execution_input("t", call_id="call/1"))

    meta: Any = result.meta
    path = meta["truncated"]["path"]
    assert isinstance(path, str)
    expected = (
        f"0123456789\n[... 80 characters omitted ...]\nfull output: {path}\n0123456789",
        text,
        tmp_path,
    )
    spilled = await trio.Path(path).read_text(encoding="utf-8")
    assert expected == (_text(result), spilled, Path(path).parent)


async def test_an_error_result_is_capped_too() -> None:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        raise RuntimeError("e" * 100)

    registry = _registry(_tool("t", body))
    install_output_budget(registry, max_chars=10, head=1.0)

    result = await registry.execute(execution_input("t"))

    assert (True, "Error: eee\n[... 97 characters omitted ...]\n") == (
        result.is_error,
        _text(result),
    )


def test_a_spill_dir_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="spill_dir must be an existing directory"):
        install_output_budget(ToolRegistry(), spill_dir=tmp_path / "missing")


def test_a_spill_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("not a directory", encoding="utf-8")

    with pytest.raises(ValueError, match="spill_dir must be an existing directory"):
        install_output_budget(ToolRegistry(), spill_dir=file)


async def test_a_spill_that_fails_later_caps_the_result_without_a_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    registry = _registry(_tool("t", _returns("q" * 30)))
    install_output_budget(registry, max_chars=10, spill_dir=spill)
    spill.rmdir()

    result = await registry.execute(execution_input("t"))

    expected = ({"truncated": {"originalChars": 30, "path": None}}, True)
    assert expected == (
        result.meta,
        "could not spill a capped tool result" in caplog.text,
    )


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-5, ValueError), (1.5, ValueError), (None, ValueError)]
)
def test_a_bad_max_chars_is_refused(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_chars must be a positive integer number of characters"):
        install_output_budget(ToolRegistry(), max_chars=value)


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan")])
def test_a_head_share_outside_zero_to_one_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="head must be a number between 0 and 1"):
        install_output_budget(ToolRegistry(), head=value)


# --- retry --------------------------------------------------------------------------------------


def _flaky(failures: int, runs: list[tuple[int, float]], error: Exception) -> Any:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        runs.append((context.attempt, trio.current_time()))
        if len(runs) <= failures:
            raise error
        return "ok"

    return body


_TRANSIENT = HarnessError("rate limited", "RATE_LIMITED")


async def test_an_idempotent_tools_transient_error_is_retried_after_the_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[tuple[int, float]] = []
    registry = _registry(
        _tool(
            "t",
            _flaky(2, runs, _TRANSIENT),
            idempotent=True,
            transient_errors=["RATE_LIMITED"],
        )
    )
    install_retry_policy(registry, attempts=3, backoff=(0.5, 2.0))

    result = await registry.execute(execution_input("t"))

    assert ("ok", [(1, 0.0), (2, 0.5), (3, 2.5)]) == (
        _text(result),
        [(attempt, pytest.approx(at)) for attempt, at in runs],
    )


async def test_a_tool_that_is_not_idempotent_is_never_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[tuple[int, float]] = []
    registry = _registry(_tool("t", _flaky(2, runs, _TRANSIENT), transient_errors=["RATE_LIMITED"]))
    install_retry_policy(registry, attempts=5, backoff=(0.1,))

    result = await registry.execute(execution_input("t"))

    assert ("Error: rate limited", 1) == (_text(result), len(runs))


async def test_the_last_attempts_result_is_the_calls_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[tuple[int, float]] = []
    registry = _registry(
        _tool("t", _flaky(10, runs, _TRANSIENT), idempotent=True, transient_errors=["RATE_LIMITED"])
    )
    install_retry_policy(registry, attempts=4, backoff=())

    result = await registry.execute(execution_input("t"))

    assert (
        ToolExecutionResult(
            content=(TextBlock(text="Error: rate limited"),),
            is_error=True,
            error=ToolErrorInfo(name="HarnessError", code="RATE_LIMITED"),
        ),
        [1, 2, 3, 4],
    ) == (result, [attempt for attempt, _ in runs])


async def test_an_error_the_tool_does_not_mark_transient_is_not_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[tuple[int, float]] = []
    registry = _registry(_tool("t", _flaky(2, runs, RuntimeError("bug")), idempotent=True))
    install_retry_policy(registry)

    await registry.execute(execution_input("t"))

    assert 1 == len(runs)


async def test_a_timed_out_attempt_is_retried_with_a_fresh_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts: list[float] = []

    async def slow_then_fast(args: Any, context: ToolRunContext) -> ToolReturn:
        starts.append(trio.current_time())
        await trio.sleep(1 if context.attempt == 1 else 0.1)
        return "ok"

    registry = _registry(_tool("t", slow_then_fast, idempotent=True, timeout=0.5))
    install_retry_policy(registry, backoff=(0.25,))

    result = await registry.execute(execution_input("t"))

    assert ("ok", [0.0, 0.75]) == (_text(result), [pytest.approx(at) for at in starts])


async def test_a_retry_on_predicate_decides_what_is_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[tuple[int, float]] = []
    registry = _registry(_tool("t", _flaky(1, runs, RuntimeError("flaky")), idempotent=True))
    install_retry_policy(registry, backoff=(0,), retry_on=lambda result: "flaky" in _text(result))

    result = await registry.execute(execution_input("t"))

    assert ("ok", 2) == (_text(result), len(runs))


async def test_cancelling_during_a_backoff_aborts_the_call_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[tuple[int, float]] = []
    controller = CancelController()
    registry = _registry(
        _tool("t", _flaky(5, runs, _TRANSIENT), idempotent=True, transient_errors=["RATE_LIMITED"])
    )
    install_retry_policy(registry, backoff=(100,))

    async def cancel_soon() -> None:
        await trio.sleep(1)
        controller.cancel("user pressed Esc")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_soon)
        result = await registry.execute(execution_input("t", signal=controller.signal))

    error = result.error
    assert error is not None
    assert ("ABORTED", 1.0, 1) == (error.code, pytest.approx(trio.current_time()), len(runs))


@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        ({"attempts": 0}, ValueError, "attempts must be a positive int, not 0"),
        ({"attempts": 2.0}, TypeError, "attempts must be a positive int, not 2.0"),
        ({"backoff": (1, -1)}, ValueError, r"backoff\[1\] must be a finite number"),
        ({"backoff": (float("inf"),)}, ValueError, r"backoff\[0\] must be a finite number"),
        ({"backoff": ("1",)}, TypeError, r"backoff\[0\] must be a finite number of seconds >= 0"),
        ({"backoff": 1}, TypeError, "backoff must be a sequence"),
        ({"retry_on": "TOOL_TIMEOUT"}, TypeError, "retry_on must be a predicate"),
    ],
)
def test_a_bad_retry_option_is_refused(
    options: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        install_retry_policy(ToolRegistry(), **options)


# --- call budget --------------------------------------------------------------------------------


async def _ok(args: Any, context: ToolRunContext) -> ToolReturn:
    return "ok"


async def test_calls_beyond_a_tools_budget_are_denied_with_a_text_the_model_can_act_on() -> None:
    registry = _registry(_tool("search", _ok), _tool("read", _ok))
    install_call_budget(registry, per_tool=2)

    batch = await run_calls(
        registry,
        *(request(f"c{n}", "search", f'{{"q": {n}}}') for n in range(3)),
        request("c3", "read"),
    )

    expected = [
        "ok",
        "ok",
        'Error: tool "search" has reached its limit of 2 calls this turn; use the results you '
        "have, or answer without calling it again",
        "ok",
    ]
    assert expected == [_text(result) for result in batch.results]


async def test_a_per_tool_mapping_budgets_only_the_tools_it_names() -> None:
    registry = _registry(_tool("search", _ok), _tool("read", _ok))
    install_call_budget(registry, per_tool={"search": 1})

    batch = await run_calls(
        registry,
        request("a", "search"),
        request("b", "search"),
        request("c", "read"),
        request("d", "read"),
    )

    assert [False, True, False, False] == [result.is_error for result in batch.results]


async def test_calls_beyond_the_turns_total_are_denied() -> None:
    registry = _registry(_tool("t", _ok))
    install_call_budget(registry, per_turn=2)

    batch = await run_calls(registry, *(request(f"c{n}", "t", f'{{"n": {n}}}') for n in range(3)))

    assert (
        "Error: this turn has reached its limit of 2 tool calls; answer with what you have so far"
    ) == _text(batch.results[2])


async def test_the_repeat_limit_denies_the_nth_identical_call() -> None:
    registry = _registry(_tool("t", _ok))
    install_call_budget(registry, repeat_limit=3)

    batch = await run_calls(
        registry,
        request("a", "t", '{"q": 1, "p": 2}'),
        request("b", "t", '{"p": 2, "q": 1}'),
        request("c", "t", '{"q": 2}'),
        request("d", "t", '{"q": 1,"p":2}'),
    )

    expected = [
        "ok",
        "ok",
        "ok",
        'Error: tool "t" was already called 2 times this turn with exactly these arguments; '
        "its result will not change: use it, or change the arguments",
    ]
    assert expected == [_text(result) for result in batch.results]


async def test_the_budget_starts_again_in_the_next_turn() -> None:
    registry = _registry(_tool("t", _ok))
    install_call_budget(registry, per_tool=1)
    from dsh_tools import CancelSignal, run_tool_calls

    first = await run_tool_calls(registry, [request("a", "t")], signal=CancelSignal.never(), turn=1)
    second = await run_tool_calls(
        registry, [request("b", "t")], signal=CancelSignal.never(), turn=2
    )
    same = await run_tool_calls(registry, [request("c", "t")], signal=CancelSignal.never(), turn=2)

    assert [False, False, True] == [batch.results[0].is_error for batch in (first, second, same)]


async def test_concurrent_batches_behind_an_awaiting_listener_share_one_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    registry = _registry(_tool("t", _ok))
    install_call_budget(registry, per_tool=3)

    async def slow_approval(execution: Any, next: Any) -> Any:
        await trio.sleep(1)  # a listener after the budget that waits (a user deciding)
        return await next()

    registry.hooks.pre_execute.add(slow_approval)
    from dsh_tools import CancelSignal, run_tool_calls

    batches: list[Any] = []

    async def one_batch(prefix: str) -> None:
        calls = [request(f"{prefix}{n}", "t", f'{{"n": {n}}}') for n in range(5)]
        batches.append(await run_tool_calls(registry, calls, signal=CancelSignal.never(), turn=1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one_batch, "a")
        nursery.start_soon(one_batch, "b")

    allowed = [r for batch in batches for r in batch.results if not r.is_error]
    assert 3 == len(allowed)


async def test_a_call_the_rest_of_the_waterfall_denies_gives_its_place_back() -> None:
    registry = _registry(_tool("t", _ok))
    install_call_budget(registry, per_tool=1)
    from dsh_tools import Deny

    async def deny_first(execution: Any, next: Any) -> Any:
        if execution.call_id == "a":
            return Deny("not this one")
        return await next()

    registry.hooks.pre_execute.add(deny_first)

    batch = await run_calls(registry, request("a", "t", '{"n": 1}'), request("b", "t", '{"n": 2}'))

    assert ["Error: not this one", "ok"] == [_text(result) for result in batch.results]


@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        ({"per_tool": 0}, ValueError, "per_tool must be a positive int, not 0"),
        ({"per_turn": -1}, ValueError, "per_turn must be a positive int, not -1"),
        ({"repeat_limit": 1}, ValueError, "repeat_limit must be an int >= 2, not 1"),
        ({"per_turn": 2.5}, TypeError, "per_turn must be a positive int, not 2.5"),
        ({"per_tool": {"t": True}}, TypeError, r"per_tool\['t'\] must be a positive int, not True"),
    ],
)
def test_a_bad_budget_is_refused(
    options: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        install_call_budget(ToolRegistry(), **options)
