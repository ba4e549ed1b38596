"""Any mix of the long-running policies, over random tools and failures: every call still gets
exactly one result, in model order, and no body of a tool that is not idempotent runs twice.
Each example runs under its own ``trio.run`` on a fresh virtual clock."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    CancelController,
    HarnessError,
    MemorySessionLog,
    ToolCallEvent,
    ToolCallRequest,
    ToolDefinition,
    ToolProgressEvent,
    ToolRegistry,
    ToolResultEvent,
    ToolReturn,
    ToolRunContext,
    install_call_budget,
    install_output_budget,
    install_retry_policy,
    run_tool_calls,
)


@attrs.frozen
class Tool:
    idempotent: bool
    parallel: bool
    timeout: float | None
    duration: float
    failures: int  # how many runs fail (transiently) before one succeeds
    output: int
    reports: int


@attrs.frozen
class Mix:
    budget: int | None
    retry: int | None
    call_budget: int | None
    repeat_limit: int | None
    interrupt_at: float | None


tools_strategy = st.lists(
    st.builds(
        Tool,
        idempotent=st.booleans(),
        parallel=st.booleans(),
        timeout=st.sampled_from([None, 0.5, 2.0]),
        duration=st.sampled_from([0, 0.25, 1, 3]),
        failures=st.integers(0, 3),
        output=st.sampled_from([0, 10, 500]),
        reports=st.integers(0, 5),
    ),
    min_size=1,
    max_size=4,
)
mix_strategy = st.builds(
    Mix,
    budget=st.sampled_from([None, 50]),
    retry=st.sampled_from([None, 1, 3]),
    call_budget=st.sampled_from([None, 1, 3]),
    repeat_limit=st.sampled_from([None, 2]),
    interrupt_at=st.sampled_from([None, 0.1, 1.5, 10.0]),
)


def _body(index: int, spec: Tool, runs: list[list[int]]) -> Any:
    async def body(args: Any, context: ToolRunContext) -> ToolReturn:
        runs[index].append(context.attempt)
        for step in range(spec.reports):
            context.report_progress(progress=step, total=spec.reports, output="x")
            await trio.sleep(spec.duration / (spec.reports + 1))
        await trio.sleep(spec.duration / (spec.reports + 1))
        if len(runs[index]) <= spec.failures:
            raise HarnessError("try again", "TRANSIENT")
        return "o" * spec.output

    return body


def _run(tools: list[Tool], calls: list[int], mix: Mix) -> None:
    runs: list[list[int]] = [[] for _ in tools]
    registry = ToolRegistry(progress_interval=0.2)
    for index, spec in enumerate(tools):
        registry.register(
            ToolDefinition(
                name=f"t{index}",
                description="d",
                parameters={},
                execute=_body(index, spec, runs),
                timeout=spec.timeout,
                idempotent=spec.idempotent,
                is_concurrency_safe=(lambda _args: True) if spec.parallel else None,
                transient_errors=["TRANSIENT"],
            )
        )
    # the documented order: budgets first (outermost), then retry; the timeout is innermost
    if mix.call_budget is not None or mix.repeat_limit is not None:
        install_call_budget(registry, per_tool=mix.call_budget, repeat_limit=mix.repeat_limit)
    if mix.budget is not None:
        install_output_budget(registry, max_chars=mix.budget)
    if mix.retry is not None:
        install_retry_policy(registry, attempts=mix.retry, backoff=(0.5, 1.0))
    requests = [
        ToolCallRequest(call_id=f"c{n}", name=f"t{tool}", arguments="{}")
        for n, tool in enumerate(calls)
    ]
    session = MemorySessionLog()

    async def main() -> None:
        controller = CancelController()
        async with trio.open_nursery() as nursery:
            if mix.interrupt_at is not None:
                at = mix.interrupt_at

                async def interrupt() -> None:
                    await trio.sleep(at)
                    controller.cancel("interrupt")

                nursery.start_soon(interrupt)
            batch = await run_tool_calls(
                registry, requests, signal=controller.signal, session=session
            )
            nursery.cancel_scope.cancel()
        results = [event for event in session.events() if isinstance(event, ToolResultEvent)]
        # one result per call, in model order, in the batch and in the log
        assert len(requests) == len(batch.results)
        assert [request.call_id for request in requests] == [r.call_id for r in results]
        # progress only between a call's tool/call and its tool/result
        open_calls: set[str] = set()
        for event in session.events():
            if isinstance(event, ToolCallEvent):
                open_calls.add(event.call_id)
            elif isinstance(event, ToolResultEvent):
                open_calls.discard(event.call_id)
            elif isinstance(event, ToolProgressEvent):
                assert event.call_id in open_calls
        # no body of a tool that is not idempotent ran twice within one call
        for index, spec in enumerate(tools):
            if not spec.idempotent:
                assert all(attempt == 1 for attempt in runs[index])
        # the output budget holds for every successful result
        if mix.budget is not None:
            for result in batch.results:
                if not result.is_error:
                    text = "".join(getattr(block, "text", "") for block in result.content)
                    assert len(text) <= mix.budget + 100

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=150)
@given(
    tools=tools_strategy,
    calls=st.lists(st.integers(0, 3), min_size=1, max_size=6),
    mix=mix_strategy,
)
def test_any_mix_of_policies_gives_one_result_per_call_and_never_retries_a_non_idempotent_tool(
    tools: list[Tool], calls: list[int], mix: Mix
) -> None:
    _run(tools, [call % len(tools) for call in calls], mix)
