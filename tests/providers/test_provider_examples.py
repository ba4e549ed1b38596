"""The provider examples run: the docs page's example prints what the page shows, and the two
agent scripts under ``examples/`` complete a conversation with the scripted endpoint."""

from __future__ import annotations

import inspect
import io
import json

import anthropic
import openai
import pytest
import trio
from PIL import Image
from provider_tools import (
    JsonDict,
    ScriptedEndpoint,
    anthropic_answer,
    anthropic_tool_uses,
    chat_answer,
    chat_tool_calls,
    load_script,
    responses_function_call,
    responses_message,
    responses_output,
)

from support import example_source, load_example


def test_the_connecting_a_model_example_prints_both_providers_shapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    trio.run(load_example("docs/connecting-a-model.md", "Connecting a model: one batch in").main)
    invalid = 'Error: invalid arguments: \\"query\\" must be a string'
    hits = "trio.run, trio.sleep, trio.open_nursery"
    expected = [
        '{"type": "object", "properties": {"query": {"type": "string"}, '
        '"limit": {"type": ["integer", "null"]}}, "required": ["query", "limit"], '
        '"additionalProperties": false}',
        """['{"query":"trio"}', '{"query": 42, "limit": 1}']""",
        f'{{"role": "tool", "tool_call_id": "call_1", "content": "{hits}"}}',
        f'{{"role": "tool", "tool_call_id": "call_2", "content": "{invalid}"}}',
        f'[{{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "call_1", '
        f'"content": "{hits}"}}, {{"type": "tool_result", "tool_use_id": "call_2", '
        f'"content": "{invalid}", "is_error": true}}]}}]',
    ]
    assert expected == capsys.readouterr().out.splitlines()


async def test_the_openai_example_completes_a_conversation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "scripted-gpt")
    example = load_script("examples/openai_agent.py")

    def turn1(body: JsonDict) -> JsonDict:
        assert "scripted-gpt" == body["model"]
        assert ["add", "multiply"] == [t["function"]["name"] for t in body["tools"]]
        return chat_tool_calls(("c1", "add", '{"a": 17, "b": 25}'))

    def turn2(body: JsonDict) -> JsonDict:
        assert {"role": "tool", "tool_call_id": "c1", "content": "42"} == body["messages"][-1]
        return chat_tool_calls(("c2", "multiply", '{"a": 42, "b": 3}'))

    def turn3(body: JsonDict) -> JsonDict:
        assert {"role": "tool", "tool_call_id": "c2", "content": "126"} == body["messages"][-1]
        return chat_answer("It is 126.")

    endpoint = ScriptedEndpoint([turn1, turn2, turn3])
    client = openai.AsyncOpenAI(
        api_key="k", base_url="http://model.test/v1", http_client=endpoint.http_client()
    )
    assert "It is 126." == await example.main(client=client)
    assert [] == endpoint.failures
    expected = [
        '  add({"a": 17, "b": 25}) -> 42',
        '  multiply({"a": 42, "b": 3}) -> 126',
        "It is 126.",
    ]
    assert expected == capsys.readouterr().out.splitlines()


async def test_the_anthropic_example_completes_a_conversation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_MODEL", "scripted-claude")
    example = load_script("examples/anthropic_agent.py")

    def turn1(body: JsonDict) -> JsonDict:
        assert "scripted-claude" == body["model"]
        assert example.SYSTEM == body["system"]
        return anthropic_tool_uses(
            ("t1", "add", {"a": 17, "b": 25}), ("t2", "multiply", {"a": 2, "b": "x"})
        )

    def turn2(body: JsonDict) -> JsonDict:
        [first, second] = body["messages"][-1]["content"]
        assert {"type": "tool_result", "tool_use_id": "t1", "content": "42"} == first
        assert second["is_error"] is True
        return anthropic_answer("It is 42.")

    endpoint = ScriptedEndpoint([turn1, turn2])
    client = anthropic.AsyncAnthropic(
        api_key="k", base_url="http://model.test", http_client=endpoint.http_client()
    )
    assert "It is 42." == await example.main(client=client)
    assert [] == endpoint.failures
    expected = [
        '  add({"a":17,"b":25}) -> 42',
        '  multiply({"a":2,"b":"x"}) -> Error: invalid arguments: "b" must be a number',
        "It is 42.",
    ]
    assert expected == capsys.readouterr().out.splitlines()


def test_the_examples_take_their_server_and_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://local.test:8080/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://claude.test")
    oai = load_script("examples/openai_agent.py").client_from_env()
    ant = load_script("examples/anthropic_agent.py").client_from_env()
    assert ("sk-env", "http://local.test:8080/v1/") == (oai.api_key, str(oai.base_url))
    assert ("ak-env", "http://claude.test") == (ant.api_key, str(ant.base_url))


async def test_the_openai_responses_example_completes_a_conversation_in_strict_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "scripted-gpt")
    example = load_script("examples/openai_responses_agent.py")

    def turn1(body: JsonDict) -> JsonDict:
        assert ("scripted-gpt", example.INSTRUCTIONS) == (body["model"], body["instructions"])
        assert [("add", True), ("multiply", True)] == [
            (t["name"], t["strict"]) for t in body["tools"]
        ]
        return responses_output(
            [
                responses_function_call("c1", "add", '{"a": 17, "b": 25}'),
                responses_function_call("c2", "multiply", '{"a": 2, "b": 3, "round_to": null}'),
            ]
        )

    def turn2(body: JsonDict) -> JsonDict:
        assert [
            {"type": "function_call_output", "call_id": "c1", "output": "42.0"},
            {"type": "function_call_output", "call_id": "c2", "output": "6.0"},
        ] == body["input"][-2:]
        return responses_output(
            [responses_function_call("c3", "multiply", '{"a": 42, "b": 3, "round_to": 0}')]
        )

    def turn3(body: JsonDict) -> JsonDict:
        assert {"type": "function_call_output", "call_id": "c3", "output": "126.0"} == body[
            "input"
        ][-1]
        return responses_output([responses_message("It is 126.")])

    endpoint = ScriptedEndpoint([turn1, turn2, turn3])
    client = openai.AsyncOpenAI(
        api_key="k", base_url="http://model.test/v1", http_client=endpoint.http_client()
    )
    assert "It is 126." == await example.main(client=client)
    assert [] == endpoint.failures
    expected = [
        '  add({"a": 17, "b": 25}) -> 42.0',
        '  multiply({"a":2,"b":3}) -> 6.0',
        '  multiply({"a": 42, "b": 3, "round_to": 0}) -> 126.0',
        "It is 126.",
    ]
    assert expected == capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    ("script", "marker"),
    [
        ("examples/openai_agent.py", "client.chat.completions.create"),
        ("examples/openai_responses_agent.py", "client.responses.create"),
    ],
)
def test_the_page_shows_each_agent_script_s_loop_as_the_script_has_it(
    script: str, marker: str
) -> None:
    shown = example_source("docs/connecting-a-model.md", f"{marker}(\n")  # the multi-line call
    assert inspect.getsource(load_script(script).run_agent) == shown


def test_the_chart_example_draws_a_real_png_and_prints_each_providers_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = load_script("examples/chart_agent.py")
    picture = Image.open(io.BytesIO(example.render_bar_chart([3, 7, 2, 9])))
    assert ("PNG", (320, 200)) == (picture.format, picture.size)
    # the tallest bar (the fourth) reaches higher than the first
    assert picture.getpixel((300, 30)) != picture.getpixel((40, 30))

    no_arguments: list[str] = []
    trio.run(example.main, no_arguments)
    out = capsys.readouterr().out.splitlines()
    assert "the tool returned 'chart: 4 bars, tallest 9' and a image/png picture" == out[0]
    assert ["Anthropic:", "OpenAI Responses:", "OpenAI Chat Completions:"] == [
        line for line in out if not line.startswith(" ")
    ][1:]
    assert '"type": "image", "source": {"type": "base64", "media_type": "image/png"' in out[2]
    assert '"type": "input_image", "image_url": "data:image/png;base64,' in out[4]
    assert '"content": "chart: 4 bars, tallest 9\\n[image/png 320x200, ' in out[6]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
async def test_the_chart_example_sends_the_picture_to_each_provider(api: str) -> None:
    example = load_script("examples/chart_agent.py")
    arguments = {"values": [1, 2]}

    def sees_the_picture(body: JsonDict) -> None:
        text = json.dumps(body)
        assert "iVBORw0KGgo" in text  # the PNG's base64 is in the request

    def turn2(body: JsonDict) -> JsonDict:
        sees_the_picture(body)
        if api == "anthropic":
            return anthropic_answer("two bars")
        if api == "responses":
            return responses_output([responses_message("two bars")])
        return chat_answer("two bars")

    def first(_body: JsonDict) -> JsonDict:
        if api == "anthropic":
            return anthropic_tool_uses(("c1", "chart", arguments))
        if api == "responses":
            return responses_output([responses_function_call("c1", "chart", json.dumps(arguments))])
        return chat_tool_calls(("c1", "chart", json.dumps(arguments)))

    endpoint = ScriptedEndpoint([first, turn2])
    if api == "anthropic":
        client: object = anthropic.AsyncAnthropic(
            api_key="k", base_url="http://model.test", http_client=endpoint.http_client()
        )
        answer = await example.anthropic_loop(client, "chart 1 and 2", model="m")
    else:
        client = openai.AsyncOpenAI(
            api_key="k", base_url="http://model.test/v1", http_client=endpoint.http_client()
        )
        loop = example.responses_loop if api == "responses" else example.chat_loop
        answer = await loop(client, "chart 1 and 2", model="m")
    assert [] == endpoint.failures
    assert "two bars" == answer
