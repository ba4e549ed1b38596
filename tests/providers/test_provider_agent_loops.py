"""Full agent loops on trio with the real ``openai.AsyncOpenAI`` and ``anthropic.AsyncAnthropic``
clients, talking to a scripted model through a mock transport of the SDKs' own HTTP client
(``httpx2``): no network, the SDKs' request building and response parsing are real."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import trio
import trio.testing
from provider_tools import (
    JsonDict,
    ScriptedEndpoint,
    ToolLog,
    anthropic_answer,
    anthropic_tool_uses,
    build_registry,
    chat_answer,
    chat_tool_calls,
    responses_output,
)

from dsh_tools import CancelController, CancelSignal, ToolRegistry, run_tool_calls
from dsh_tools.providers import anthropic as anthropic_adapter
from dsh_tools.providers import openai as openai_adapter

FILES = {"a.txt": "alpha", "b.txt": "beta"}
INVALID_A = 'Error: invalid arguments: "a" must be an integer'
ABORTED = "Error: tool call aborted"


def openai_client(endpoint: ScriptedEndpoint) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="test-key",
        base_url="http://model.test/v1",
        http_client=endpoint.http_client(),
        max_retries=0,
    )


def anthropic_client(endpoint: ScriptedEndpoint) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="test-key",
        base_url="http://model.test",
        http_client=endpoint.http_client(),
        max_retries=0,
    )


async def chat_loop(
    client: openai.AsyncOpenAI,
    registry: ToolRegistry,
    signal: CancelSignal,
    *,
    strict: bool = False,
) -> str:
    schemas = registry.schemas()
    tools: list[Any] = openai_adapter.tool_params(schemas, strict=strict)
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for _ in range(5):
        completion = await client.chat.completions.create(
            model="scripted", messages=messages, tools=tools
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        calls = openai_adapter.tool_calls(message, strict_schemas=schemas if strict else None)
        batch = await run_tool_calls(registry, calls, signal=signal)
        messages.extend(openai_adapter.tool_messages(calls, batch))
    raise AssertionError("the loop did not finish")


async def responses_loop(
    client: openai.AsyncOpenAI, registry: ToolRegistry, signal: CancelSignal
) -> str:
    tools: list[Any] = openai_adapter.responses_tool_params(registry.schemas())
    items: list[Any] = [{"role": "user", "content": "go"}]
    for _ in range(5):
        response = await client.responses.create(model="scripted", input=items, tools=tools)
        if not any(item.type == "function_call" for item in response.output):
            return response.output_text
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        calls = openai_adapter.responses_tool_calls(response)
        batch = await run_tool_calls(registry, calls, signal=signal)
        items.extend(openai_adapter.responses_tool_messages(calls, batch))
    raise AssertionError("the loop did not finish")


async def anthropic_loop(
    client: anthropic.AsyncAnthropic, registry: ToolRegistry, signal: CancelSignal
) -> str:
    tools: list[Any] = anthropic_adapter.tool_params(registry.schemas())
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for _ in range(5):
        response = await client.messages.create(
            model="scripted", max_tokens=1024, messages=messages, tools=tools
        )
        if response.stop_reason != "tool_use":
            return "".join(block.text for block in response.content if block.type == "text")
        messages.append(
            {
                "role": "assistant",
                "content": [block.model_dump(exclude_none=True) for block in response.content],
            }
        )
        calls = anthropic_adapter.tool_calls(response)
        batch = await run_tool_calls(registry, calls, signal=signal)
        messages.extend(anthropic_adapter.tool_messages(calls, batch))
    raise AssertionError("the loop did not finish")


def assert_reads_ran_in_one_pool(log: ToolLog) -> None:
    starts = {name: t for name, event, t in log.events if event == "start"}
    ends = {name: t for name, event, t in log.events if event == "end"}
    t0 = starts["read a.txt"]
    assert t0 == starts["read b.txt"]
    assert [t0 + 1, t0 + 1] == [ends["read a.txt"], ends["read b.txt"]]


async def cancel_when_wait_runs(log: ToolLog, controller: CancelController) -> None:
    """Interrupt the batch once the ``wait`` call and every other call have started."""
    await log.wait_started.wait()
    await trio.testing.wait_all_tasks_blocked()
    controller.cancel()


# --- OpenAI Chat Completions ---------------------------------------------------------------


async def test_openai_chat_loop_runs_parallel_calls_and_a_corrected_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = ToolLog()
    registry = build_registry(FILES, log)

    def turn1(body: JsonDict) -> JsonDict:
        assert openai_adapter.tool_params(registry.schemas()) == body["tools"]
        assert [{"role": "user", "content": "go"}] == body["messages"]
        return chat_tool_calls(
            ("c1", "read", '{"path": "a.txt"}'),
            ("c2", "read", '{"path": "b.txt"}'),
            ("c3", "add", '{"a": "one", "b": 2}'),
        )

    def turn2(body: JsonDict) -> JsonDict:
        assert ["c1", "c2", "c3"] == [c["id"] for c in body["messages"][1]["tool_calls"]]
        assert [
            {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
            {"role": "tool", "tool_call_id": "c2", "content": "beta"},
            {"role": "tool", "tool_call_id": "c3", "content": INVALID_A},
        ] == body["messages"][2:]
        return chat_tool_calls(("c4", "add", '{"a": 1, "b": 2}'))

    def turn3(body: JsonDict) -> JsonDict:
        assert {"role": "tool", "tool_call_id": "c4", "content": "3"} == body["messages"][-1]
        return chat_answer("alpha, beta, 3")

    endpoint = ScriptedEndpoint([turn1, turn2, turn3])
    answer = await chat_loop(openai_client(endpoint), registry, CancelController().signal)
    assert [] == endpoint.failures
    assert "alpha, beta, 3" == answer
    assert ["/v1/chat/completions"] * 3 == endpoint.paths
    assert ["trio"] * 3 == endpoint.async_libraries  # the SDK's I/O ran on trio
    starts = [name for name, event, _ in log.events if event == "start"]
    # the two reads (in either order), then only the corrected add: the invalid one never ran
    assert (["read a.txt", "read b.txt"], ["add"]) == (sorted(starts[:2]), starts[2:])
    assert_reads_ran_in_one_pool(log)


async def test_openai_chat_loop_sends_aborted_results_after_an_interrupt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = ToolLog()
    registry = build_registry(FILES, log)

    def turn1(body: JsonDict) -> JsonDict:
        return chat_tool_calls(
            ("c1", "wait", '{"seconds": 60}'), ("c2", "read", '{"path": "a.txt"}')
        )

    def turn2(body: JsonDict) -> JsonDict:
        assert [
            {"role": "tool", "tool_call_id": "c1", "content": ABORTED},
            {"role": "tool", "tool_call_id": "c2", "content": ABORTED},
        ] == body["messages"][2:]
        return chat_answer("stopped")

    endpoint = ScriptedEndpoint([turn1, turn2])
    controller = CancelController()
    answers: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_when_wait_runs, log, controller)
        answers.append(await chat_loop(openai_client(endpoint), registry, controller.signal))
    assert [] == endpoint.failures
    assert ["stopped"] == answers
    times = {(name, event): t for name, event, t in log.events}
    assert times[("wait", "start")] == times[("wait", "end")]  # cut short, not 60 s later
    assert ("read a.txt", "end") not in times


async def test_openai_chat_loop_in_strict_mode_reads_nulls_as_absent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = ToolLog()
    registry = build_registry(FILES, log)

    def turn1(body: JsonDict) -> JsonDict:
        assert openai_adapter.tool_params(registry.schemas(), strict=True) == body["tools"]
        read = next(t for t in body["tools"] if t["function"]["name"] == "read")
        assert ["path", "max_chars"] == read["function"]["parameters"]["required"]
        return chat_tool_calls(
            ("c1", "read", '{"path": "a.txt", "max_chars": null}'),
            ("c2", "read", '{"path": "b.txt", "max_chars": 2}'),
        )

    def turn2(body: JsonDict) -> JsonDict:
        assert [
            {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
            {"role": "tool", "tool_call_id": "c2", "content": "be"},
        ] == body["messages"][2:]
        return chat_answer("done")

    endpoint = ScriptedEndpoint([turn1, turn2])
    answer = await chat_loop(
        openai_client(endpoint), registry, CancelController().signal, strict=True
    )
    assert [] == endpoint.failures
    assert "done" == answer


# --- OpenAI Responses ----------------------------------------------------------------------


def function_call(call_id: str, name: str, arguments: str) -> JsonDict:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


async def test_openai_responses_loop_runs_parallel_calls_and_a_corrected_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = ToolLog()
    registry = build_registry(FILES, log)

    def turn1(body: JsonDict) -> JsonDict:
        assert openai_adapter.responses_tool_params(registry.schemas()) == body["tools"]
        return responses_output(
            [
                function_call("c1", "read", '{"path": "a.txt"}'),
                function_call("c2", "read", '{"path": "b.txt"}'),
                function_call("c3", "add", '{"a": "one", "b": 2}'),
            ]
        )

    def turn2(body: JsonDict) -> JsonDict:
        outputs = [item for item in body["input"] if item.get("type") == "function_call_output"]
        assert [
            {"type": "function_call_output", "call_id": "c1", "output": "alpha"},
            {"type": "function_call_output", "call_id": "c2", "output": "beta"},
            {"type": "function_call_output", "call_id": "c3", "output": INVALID_A},
        ] == outputs
        # the calls are echoed back before their outputs
        assert ["c1", "c2", "c3"] == [
            item["call_id"] for item in body["input"] if item.get("type") == "function_call"
        ]
        return responses_output([function_call("c4", "add", '{"a": 1, "b": 2}')])

    def turn3(body: JsonDict) -> JsonDict:
        assert {"type": "function_call_output", "call_id": "c4", "output": "3"} == body["input"][-1]
        return responses_output(
            [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "alpha, beta, 3", "annotations": []}
                    ],
                }
            ]
        )

    endpoint = ScriptedEndpoint([turn1, turn2, turn3])
    answer = await responses_loop(openai_client(endpoint), registry, CancelController().signal)
    assert [] == endpoint.failures
    assert "alpha, beta, 3" == answer
    assert ["/v1/responses"] * 3 == endpoint.paths
    assert_reads_ran_in_one_pool(log)


# --- Anthropic Messages --------------------------------------------------------------------


async def test_anthropic_loop_runs_parallel_calls_and_a_corrected_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = ToolLog()
    registry = build_registry(FILES, log)

    def turn1(body: JsonDict) -> JsonDict:
        assert anthropic_adapter.tool_params(registry.schemas()) == body["tools"]
        return anthropic_tool_uses(
            ("toolu_1", "read", {"path": "a.txt"}),
            ("toolu_2", "read", {"path": "b.txt"}),
            ("toolu_3", "add", {"a": "one", "b": 2}),
        )

    def turn2(body: JsonDict) -> JsonDict:
        assistant, results = body["messages"][1:]
        assert ["toolu_1", "toolu_2", "toolu_3"] == [b["id"] for b in assistant["content"]]
        assert {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "alpha"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "beta"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_3",
                    "content": INVALID_A,
                    "is_error": True,
                },
            ],
        } == results
        return anthropic_tool_uses(("toolu_4", "add", {"a": 1, "b": 2}))

    def turn3(body: JsonDict) -> JsonDict:
        assert [{"type": "tool_result", "tool_use_id": "toolu_4", "content": "3"}] == body[
            "messages"
        ][-1]["content"]
        return anthropic_answer("alpha, beta, 3")

    endpoint = ScriptedEndpoint([turn1, turn2, turn3])
    answer = await anthropic_loop(anthropic_client(endpoint), registry, CancelController().signal)
    assert [] == endpoint.failures
    assert "alpha, beta, 3" == answer
    assert ["/v1/messages"] * 3 == endpoint.paths
    assert ["trio"] * 3 == endpoint.async_libraries  # the SDK's I/O ran on trio
    assert_reads_ran_in_one_pool(log)


async def test_anthropic_loop_sends_aborted_error_results_after_an_interrupt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = ToolLog()
    registry = build_registry(FILES, log)

    def turn1(body: JsonDict) -> JsonDict:
        return anthropic_tool_uses(
            ("toolu_1", "wait", {"seconds": 60}), ("toolu_2", "read", {"path": "a.txt"})
        )

    def turn2(body: JsonDict) -> JsonDict:
        assert [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": ABORTED, "is_error": True},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": ABORTED, "is_error": True},
        ] == body["messages"][-1]["content"]
        return anthropic_answer("stopped")

    endpoint = ScriptedEndpoint([turn1, turn2])
    controller = CancelController()
    answers: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_when_wait_runs, log, controller)
        answers.append(
            await anthropic_loop(anthropic_client(endpoint), registry, controller.signal)
        )
    assert [] == endpoint.failures
    assert ["stopped"] == answers
    times = {(name, event): t for name, event, t in log.events}
    assert times[("wait", "start")] == times[("wait", "end")]
    assert ("read a.txt", "end") not in times
