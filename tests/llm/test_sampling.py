"""Sampling handlers backed by the real openai and anthropic SDK clients,
against a local fake API, answering real MCP servers in both protocol eras."""

from __future__ import annotations

import inspect
import sys

import pytest

import mcp_sync
from mcp_sync.errors import InputHandlerError
from mcp_sync.llm import anthropic_sampling, choose_model, openai_sampling
from mcp_sync.testing import HTTPServer, demo_server

from .fake_api import (
    FakeAPI,
    anthropic_error,
    anthropic_message,
    chat_completion,
    openai_error,
    tool_use,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

STDIO = [sys.executable, "-m", "mcp_sync.testing.server"]
ERAS = {"2026-07-28": STDIO, "2025-11-25": [*STDIO, "--versions", "2025-11-25"]}


@pytest.mark.parametrize("era", list(ERAS))
def test_openai_backed_sampling_round_trip(era):
    with FakeAPI(lambda path, body: (200, chat_completion("Cats sleep a lot.", model="gpt-test-0001"))) as api:
        handler = openai_sampling(api.openai(), model="gpt-test")
        with mcp_sync.connect(ERAS[era], input_handlers={"sampling": handler}, timeout=30) as client:
            result = client.call_tool("summarize", {"text": "Cats sleep for most of the day."})
            assert client.protocol_version == era
    assert not result.is_error and result.text == "Cats sleep a lot."
    path, body = api.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "gpt-test" and body["max_completion_tokens"] == 100
    assert body["messages"] == [
        {"role": "system", "content": "You summarize text in one sentence."},
        {"role": "user", "content": "Please summarize:\n\nCats sleep for most of the day."},
    ]


@pytest.mark.parametrize("era", list(ERAS))
def test_anthropic_backed_sampling_round_trip(era):
    reply = anthropic_message([{"type": "text", "text": "Dogs "}, {"type": "text", "text": "bark."}])
    with FakeAPI(lambda path, body: (200, reply)) as api:
        handler = anthropic_sampling(api.anthropic(), model="claude-test")
        with mcp_sync.connect(ERAS[era], input_handlers={"sampling": handler}, timeout=30) as client:
            result = client.call_tool("summarize", {"text": "Dogs bark at night."})
            assert client.protocol_version == era
    assert not result.is_error and result.text == "Dogs bark."
    path, body = api.requests[0]
    assert path == "/v1/messages"
    assert body["model"] == "claude-test" and body["max_tokens"] == 100
    assert body["system"] == "You summarize text in one sentence."
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Please summarize:\n\nDogs bark at night."}]}]


def test_sampling_over_http_in_both_eras():
    with FakeAPI(lambda path, body: (200, anthropic_message([{"type": "text", "text": "Short."}]))) as api, \
            HTTPServer(demo_server()) as http:
        handler = anthropic_sampling(api.anthropic(), model="claude-test")
        for version in ("2026-07-28", "2025-11-25"):
            with mcp_sync.connect(http.url, input_handlers={"sampling": handler}, timeout=30,
                                  protocol=version) as client:
                assert client.call_tool("summarize", {"text": "long"}).text == "Short."
    assert len(api.requests) == 2


def test_an_api_error_fails_the_tool_call():
    with FakeAPI(lambda path, body: (401, openai_error("bad key", "authentication_error"))) as api:
        handler = openai_sampling(api.openai(), model="gpt-test")
        with mcp_sync.connect(demo_server(), input_handlers={"sampling": handler}) as client, \
                pytest.raises(InputHandlerError, match="bad key"):
            client.call_tool("summarize", {"text": "x"})


PARAMS = {
    "messages": [
        {"role": "user", "content": {"type": "text", "text": "What is this?"}},
        {"role": "user", "content": {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}},
        {"role": "assistant", "content": {"type": "text", "text": "A picture."}},
        {"role": "user", "content": [{"type": "text", "text": "Say more."}]},
    ],
    "maxTokens": 500,
    "stopSequences": ["END"],
    "temperature": 0.2,
    "modelPreferences": {"hints": [{"name": "sonnet"}, {"name": "mini"}]},
}


def test_openai_request_mapping_and_stop_reasons():
    replies = iter([chat_completion("More.", finish_reason="length"), chat_completion("Done.")])
    with FakeAPI(lambda path, body: (200, next(replies))) as api:
        handler = openai_sampling(api.openai(), model="gpt-big", models=["gpt-big", "gpt-mini"], max_tokens=200)
        first = handler(dict(PARAMS))
        second = handler({"messages": PARAMS["messages"][:1], "maxTokens": 10})
    assert first == {"role": "assistant", "content": {"type": "text", "text": "More."}, "model": "gpt-test",
                     "stopReason": "maxTokens"}
    assert second["stopReason"] == "endTurn"
    body = api.requests[0][1]
    assert body["model"] == "gpt-mini"  # "sonnet" matches none of `models`, "mini" does
    assert body["max_completion_tokens"] == 200 and body["stop"] == ["END"] and body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "user", "content": "What is this?"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}]},
        {"role": "assistant", "content": "A picture."},
        {"role": "user", "content": "Say more."},
    ]
    assert api.requests[1][1]["model"] == "gpt-big"  # no hints: the default


def test_anthropic_request_mapping_and_stop_reasons():
    replies = iter([anthropic_message([{"type": "text", "text": "x"}], stop_reason="stop_sequence"),
                    anthropic_message([{"type": "text", "text": "y"}], stop_reason="max_tokens")])
    with FakeAPI(lambda path, body: (200, next(replies))) as api:
        handler = anthropic_sampling(api.anthropic(), model="claude-haiku", models=["claude-haiku", "claude-sonnet"])
        first = handler(dict(PARAMS))
        second = handler(dict(PARAMS))
    assert first["stopReason"] == "stopSequence" and second["stopReason"] == "maxTokens"
    assert first["model"] == "claude-test" and first["content"] == {"type": "text", "text": "x"}
    body = api.requests[0][1]
    assert body["model"] == "claude-sonnet"
    assert body["stop_sequences"] == ["END"] and body["max_tokens"] == 500
    # anthropic 2.x's Messages API has no temperature: passed on only where the SDK takes it
    takes = "temperature" in inspect.signature(anthropic.Anthropic(api_key="k").messages.create).parameters
    assert body.get("temperature") == (0.2 if takes else None)
    assert body["messages"][1] == {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}}]}


def test_sampling_with_tools_2025_11_25():
    params = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Weather in Oslo?"}}],
        "maxTokens": 100,
        "tools": [{"name": "get_weather", "description": "Weather", "inputSchema": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
        "toolChoice": {"mode": "required"},
    }
    with FakeAPI(lambda path, body: (200, anthropic_message([tool_use("toolu_1", "get_weather", {"city": "Oslo"})]))) \
            as api:
        answer = anthropic_sampling(api.anthropic(), model="claude-test")(params)
        followup = dict(params, messages=[*params["messages"],
                                          {"role": "assistant", "content": [answer["content"]]},
                                          {"role": "user", "content": [{"type": "tool_result", "toolUseId": "toolu_1",
                                                                        "content": [{"type": "text", "text": "-3 C"}]}]}])
        anthropic_sampling(api.anthropic(), model="claude-test")(followup)
    assert answer == {"role": "assistant", "model": "claude-test", "stopReason": "toolUse",
                      "content": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}}
    body = api.requests[0][1]
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"][0]["input_schema"]["required"] == ["city"]
    assert api.requests[1][1]["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3 C"}]}

    with FakeAPI(lambda path, body: (200, chat_completion(tool_calls=[("call_1", "get_weather", '{"city": "Oslo"}')]))) \
            as api:
        answer = openai_sampling(api.openai(), model="gpt-test")(params)
    assert answer["stopReason"] == "toolUse"
    assert answer["content"] == {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}
    assert api.requests[0][1]["tool_choice"] == "required"
    assert api.requests[0][1]["tools"][0]["function"]["name"] == "get_weather"


def test_anthropic_api_error_is_raised_by_the_handler():
    with FakeAPI(lambda path, body: (400, anthropic_error("prompt is too long"))) as api:
        handler = anthropic_sampling(api.anthropic(), model="claude-test")
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
            handler({"messages": [{"role": "user", "content": {"type": "text", "text": "x"}}], "maxTokens": 5})


def test_choose_model_and_bad_arguments():
    assert choose_model({}, "default") == "default"
    assert choose_model({"modelPreferences": {"hints": [{"name": "claude-3"}]}}, "d", ["gpt-4"]) == "d"
    assert choose_model({"modelPreferences": {"hints": [{"name": "GPT"}]}}, "d", ["x", "gpt-4"]) == "gpt-4"
    with pytest.raises(TypeError):
        openai_sampling(object(), model="m")
    with pytest.raises(TypeError):
        anthropic_sampling(object(), model="m")
    with pytest.raises(TypeError):
        openai_sampling(openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9"), model="")
    with pytest.raises(ValueError):
        anthropic_sampling(anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9"), model="m", max_tokens=0)


def test_sampling_with_tools_through_a_server():
    """A 2025-11-25 server samples with tools: the model's tool_use comes back to it."""
    import json

    from mcp_sync.testing import Server

    server = Server(name="agent", versions=["2025-11-25"])

    @server.tool(input_schema={"type": "object"})
    def plan(args, ctx):
        result = ctx.sample([{"role": "user", "content": {"type": "text", "text": "Weather in Oslo?"}}], 50,
                            tools=[{"name": "get_weather", "inputSchema": {"type": "object"}}],
                            tool_choice={"mode": "auto"})
        return json.dumps(result, sort_keys=True)

    reply = anthropic_message([{"type": "text", "text": "Checking."}, tool_use("toolu_5", "get_weather", {"c": 1})])
    with FakeAPI(lambda path, body: (200, reply)) as api:
        handler = anthropic_sampling(api.anthropic(), model="claude-test")
        with mcp_sync.connect(server, input_handlers={"sampling": handler},
                              client_capabilities={"sampling": {"tools": {}}}) as client:
            result = json.loads(client.call_tool("plan", {}).text)
    assert result == {"role": "assistant", "model": "claude-test", "stopReason": "toolUse", "content": [
        {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_5", "name": "get_weather",
                                                "input": {"c": 1}}]}
    assert api.requests[0][1]["tool_choice"] == {"type": "auto"}
    assert api.requests[0][1]["tools"] == [{"name": "get_weather", "description": "",
                                            "input_schema": {"type": "object", "properties": {}}}]
