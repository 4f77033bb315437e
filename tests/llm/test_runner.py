"""Running the tool calls of model responses, with the real openai and anthropic
SDK clients against a local fake API, and real MCP servers (stdio, HTTP, in-process)."""

from __future__ import annotations

import base64
import json
import sys
import threading

import pytest

import mcp_sync
from mcp_sync.llm import MaxRoundsExceeded, ToolSet
from mcp_sync.testing import HTTPServer, Server, demo_server

from .fake_api import (
    FakeAPI,
    anthropic_error,
    anthropic_message,
    chat_completion,
    function_call,
    openai_error,
    output_text,
    responses_response,
    tool_use,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

STDIO_DEMO = [sys.executable, "-m", "mcp_sync.testing.server"]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


@pytest.fixture(scope="module")
def stdio_client():
    with mcp_sync.connect(STDIO_DEMO, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def http_client():
    with HTTPServer(demo_server()).start() as http, mcp_sync.connect(http.url, timeout=30) as client:
        yield client


def parallel_server(n: int) -> Server:
    """A tool that returns only once `n` calls are inside it at the same time
    (a barrier): a runner that calls one at a time makes each call fail."""
    server = Server(name="parallel")
    barrier = threading.Barrier(n, timeout=10)

    @server.tool(input_schema={"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]})
    def meet(args, ctx):
        barrier.wait()
        return f"met {args['i']}"

    @server.tool(input_schema={"type": "object"})
    def picture(args, ctx):
        return [{"type": "text", "text": "a picture"}, {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "image", "data": PNG, "mimeType": "image/tiff"}]

    return server


def test_twenty_parallel_chat_tool_calls_each_reach_their_own_id(stdio_client):
    calls = [(f"call_{i:02d}", "echo", json.dumps({"text": f"text number {i}"})) for i in range(20)]
    with FakeAPI(lambda path, body: (200, chat_completion(tool_calls=calls))) as api:
        completion = api.openai().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "go"}],
                                                          tools=ToolSet(stdio_client).openai_chat_tools())
    assert api.requests[0][0] == "/v1/chat/completions"
    assert [t["function"]["name"] for t in api.requests[0][1]["tools"]][:2] == ["echo", "add"]
    results = ToolSet(stdio_client, max_workers=20).run_openai_chat(completion)
    assert results == [{"role": "tool", "tool_call_id": f"call_{i:02d}", "content": f"text number {i}"}
                       for i in range(20)]


def test_calls_run_at_the_same_time():
    with mcp_sync.connect(parallel_server(8)) as client:
        tools = ToolSet(client, max_workers=8, timeout=20)
        response = chat_completion(tool_calls=[(f"c{i}", "meet", json.dumps({"i": i})) for i in range(8)])
        results = tools.run_openai_chat(response)
    assert [r["content"] for r in results] == [f"met {i}" for i in range(8)]


def test_responses_api_function_calls_over_http(http_client):
    output = [function_call(f"call_{i}", "add", json.dumps({"a": i, "b": 100})) for i in range(12)]
    output.insert(0, {"type": "reasoning", "id": "rs_1", "summary": []})
    with FakeAPI(lambda path, body: (200, responses_response(output))) as api:
        tools = ToolSet(http_client)
        response = api.openai().responses.create(model="gpt-test", input="add them",
                                                 tools=tools.openai_responses_tools())
    assert api.requests[0][0] == "/v1/responses"
    assert {"type": "function", "name": "echo"}.items() <= api.requests[0][1]["tools"][0].items()
    results = tools.run_openai_responses(response)
    # add's text "i+100" and its structured content {"sum": ...}, which the text does not say, as JSON
    assert results == [{"type": "function_call_output", "call_id": f"call_{i}",
                        "output": f"{i + 100}\n{json.dumps({'sum': i + 100})}"} for i in range(12)]


def test_anthropic_tool_use_blocks(stdio_client):
    content = [{"type": "text", "text": "Let me check."},
               tool_use("toolu_1", "weather", {"city": "Paris"}),
               tool_use("toolu_2", "fail", {"message": "out of coffee"}),
               tool_use("toolu_3", "echo", {"text": "hi"})]
    with FakeAPI(lambda path, body: (200, anthropic_message(content))) as api:
        tools = ToolSet(stdio_client)
        message = api.anthropic().messages.create(model="claude-test", max_tokens=100, tools=tools.anthropic_tools(),
                                                  messages=[{"role": "user", "content": "weather?"}])
    assert api.requests[0][0] == "/v1/messages"
    assert api.requests[0][1]["tools"][0] == {"name": "echo", "description": "Echo the given text back.",
                                              "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                                                               "required": ["text"]}}
    reply = tools.run_anthropic(message)
    assert reply is not None and reply["role"] == "user"
    first, second, third = reply["content"]
    assert first["type"] == "tool_result" and first["tool_use_id"] == "toolu_1" and "is_error" not in first
    assert json.loads(first["content"][0]["text"])["city"] == "Paris"  # structured content, as JSON text
    assert second == {"type": "tool_result", "tool_use_id": "toolu_2",
                      "content": [{"type": "text", "text": "out of coffee"}], "is_error": True}
    assert third == {"type": "tool_result", "tool_use_id": "toolu_3", "content": [{"type": "text", "text": "hi"}]}
    assert tools.run_anthropic(anthropic_message([{"type": "text", "text": "done"}])) is None


def test_images_where_the_api_takes_them():
    with mcp_sync.connect(parallel_server(1)) as client:
        tools = ToolSet(client)
        anthropic_reply = tools.run_anthropic(anthropic_message([tool_use("t1", "picture", {})]))
        responses = tools.run_openai_responses(responses_response([function_call("c1", "picture", "{}")]))
        chat = tools.run_openai_chat(chat_completion(tool_calls=[("c1", "picture", "{}")]))
    assert anthropic_reply is not None
    blocks = anthropic_reply["content"][0]["content"]
    assert blocks[0] == {"type": "text", "text": "a picture"}
    assert blocks[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert blocks[2]["type"] == "text" and "image/tiff" in blocks[2]["text"]  # a type Anthropic does not take
    output = responses[0]["output"]
    assert output[1] == {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
    assert chat[0]["content"].startswith("a picture\n[image (image/png, 24 bytes) not shown]")


def test_what_the_model_got_wrong_becomes_an_error_result(stdio_client):
    tools = ToolSet(stdio_client, tools=["echo", "sleep"], timeout=0.5)
    response = chat_completion(tool_calls=[
        ("bad_json", "echo", '{"text": "unclosed'),
        ("not_object", "echo", "[1, 2]"),
        ("unknown", "delete_everything", "{}"),
        ("slow", "sleep", json.dumps({"seconds": 30})),
        ("invalid", "echo", json.dumps({"text": 5})),
        ("fine", "echo", json.dumps({"text": "still here"})),
    ])
    results = {r["tool_call_id"]: r["content"] for r in tools.run_openai_chat(response)}
    assert results["bad_json"].startswith("Error: the arguments of echo are not valid JSON")
    assert results["not_object"] == "Error: the arguments of echo must be a JSON object, not list"
    assert results["unknown"] == "Error: there is no tool named 'delete_everything'; the tools are echo, sleep"
    assert results["slow"] == "Error: sleep did not finish within 0.5 s, and was cancelled"
    assert results["invalid"].startswith("Error: ")
    assert results["fine"] == "still here"
    anthropic_reply = tools.run_anthropic(anthropic_message([tool_use("t", "nope", {})]))
    assert anthropic_reply is not None and anthropic_reply["content"][0]["is_error"] is True


def test_numbers_json_cannot_carry_and_deep_nesting_become_error_results(stdio_client):
    # They raised out of run() (ValueError, RecursionError), losing the other calls' results.
    tools = ToolSet(stdio_client, tools=["echo", "add"])
    response = chat_completion(tool_calls=[
        ("nan", "add", '{"a": NaN, "b": 1}'),
        ("infinity", "add", '{"a": -Infinity, "b": 1}'),
        ("huge", "add", '{"a": 1e999, "b": 1}'),
        ("deep", "echo", "[" * 100_000 + "]" * 100_000),
        ("fine", "echo", json.dumps({"text": "still here"})),
    ])
    results = {r["tool_call_id"]: r["content"] for r in tools.run_openai_chat(response)}
    assert results["nan"] == ("Error: the arguments of add are not valid JSON (NaN is not a JSON value); "
                              "send a JSON object")
    assert results["infinity"].startswith("Error: the arguments of add are not valid JSON (-Infinity is not")
    assert results["huge"].startswith("Error: the arguments of add cannot be sent as JSON (Out of range float "
                                      "values are not JSON compliant")  # (3.12 adds ": inf")
    assert results["huge"].endswith("); send finite numbers")
    assert results["deep"].startswith("Error: the arguments of echo are not valid JSON (maximum recursion depth")
    assert results["fine"] == "still here"


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
def test_an_interrupt_during_parallel_calls_is_raised_at_once():
    # It waited for every call to end (up to its timeout) first.
    import concurrent.futures
    import time

    from mcp_sync.waiting import MAIN_THREAD_SLICE
    from tests.helpers import SLACK, interrupt_inside

    with mcp_sync.connect(demo_server()) as client:
        tools = ToolSet(client, tools=["sleep"])
        response = chat_completion(tool_calls=[(f"c{i}", "sleep", json.dumps({"seconds": 30})) for i in range(2)])
        at = interrupt_inside(concurrent.futures.wait.__code__)
        with pytest.raises(KeyboardInterrupt):
            tools.run_openai_chat(response)
        assert time.monotonic() - at[0] < MAIN_THREAD_SLICE + SLACK  # not after the 30 s calls


def test_strict_mode_nulls_are_dropped_before_the_call(stdio_client):
    tools = ToolSet(stdio_client, tools=["countdown"], strict=True)
    response = chat_completion(tool_calls=[("c", "countdown", json.dumps({"steps": 1, "delay": None}))])
    assert tools.run_openai_chat(response)[0]["content"] == "liftoff"


def test_group_tools_are_called_on_their_server():
    with mcp_sync.ClientGroup({"one": demo_server(name="one"), "two": STDIO_DEMO}) as group:
        tools = ToolSet(group, tools=["one.echo", "two.echo"])
        response = chat_completion(tool_calls=[("a", "one_echo", '{"text": "1"}'), ("b", "two_echo", '{"text": "2"}')])
        assert [r["content"] for r in tools.run_openai_chat(response)] == ["1", "2"]
        assert group.client("two").server_info.name == "mcp-sync-demo"


def test_chat_loop_with_the_sdk_client(stdio_client):
    def answer(path, body):
        last = body["messages"][-1]
        if last["role"] == "tool":
            said = [m["content"] for m in body["messages"] if m["role"] == "tool"]
            return 200, chat_completion(f"the sum is {said[0]}")
        return 200, chat_completion(tool_calls=[("call_1", "add", '{"a": 2, "b": 3}')])

    with FakeAPI(answer) as api:
        tools = ToolSet(stdio_client, tools=["add"])
        result = tools.loop("openai-chat", [{"role": "user", "content": "2+3?"}], client=api.openai(),
                            model="gpt-test", temperature=0)
    assert result.finished and result.rounds == 2
    assert result.response.choices[0].message.content == 'the sum is 5\n{"sum": 5}'
    second = api.requests[1][1]
    assert second["model"] == "gpt-test" and second["temperature"] == 0
    assert second["messages"][1]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": '5\n{"sum": 5}'}
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]


def test_responses_loop_with_the_sdk_client(stdio_client):
    def answer(path, body):
        outputs = [i for i in body["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if outputs:
            return 200, responses_response([output_text("echoed: " + outputs[0]["output"])])
        return 200, responses_response([function_call("call_9", "echo", '{"text": "ping"}')])

    with FakeAPI(answer) as api:
        result = ToolSet(stdio_client).loop("openai-responses", [{"role": "user", "content": "echo ping"}],
                                            client=api.openai(), model="gpt-test")
    assert result.finished and result.rounds == 2
    assert result.response.output_text == "echoed: ping"
    assert api.requests[1][1]["input"][1]["call_id"] == "call_9"


def test_anthropic_loop_with_a_callable_and_max_rounds(stdio_client):
    tools = ToolSet(stdio_client, tools=["echo"])
    seen = []

    def model(messages, definitions):
        seen.append(len(messages))
        return anthropic_message([tool_use(f"t{len(seen)}", "echo", {"text": "again"})])

    with pytest.raises(MaxRoundsExceeded) as raised:
        tools.loop("anthropic", [{"role": "user", "content": "loop"}], call_model=model, max_rounds=3)
    assert seen == [1, 3, 5]
    result = raised.value.result
    assert not result.finished and result.rounds == 3 and len(result.messages) == 7
    assert result.messages[-1]["content"][0] == {"type": "tool_result", "tool_use_id": "t3",
                                                 "content": [{"type": "text", "text": "again"}]}
    returned = tools.loop("anthropic", [{"role": "user", "content": "loop"}], call_model=model, max_rounds=2,
                          on_max_rounds="return")
    assert not returned.finished and returned.rounds == 2


def test_anthropic_loop_with_the_sdk_client(stdio_client):
    def answer(path, body):
        if body["messages"][-1]["role"] == "user" and isinstance(body["messages"][-1]["content"], list):
            result = body["messages"][-1]["content"][0]
            return 200, anthropic_message([{"type": "text", "text": "got " + result["content"][0]["text"]}])
        return 200, anthropic_message([tool_use("toolu_7", "echo", {"text": "pong"})])

    with FakeAPI(answer) as api:
        result = ToolSet(stdio_client).loop("anthropic", [{"role": "user", "content": "echo pong"}],
                                            client=api.anthropic(), model="claude-test", max_tokens=50)
    assert result.finished and result.response.content[0].text == "got pong"
    assert api.requests[1][1]["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_7", "name": "echo", "input": {"text": "pong"}}]}


def test_api_errors_are_raised_as_the_sdk_raises_them(stdio_client):
    tools = ToolSet(stdio_client)
    with FakeAPI(lambda path, body: (400, openai_error("bad tools"))) as api, \
            pytest.raises(openai.BadRequestError, match="bad tools"):
        tools.loop("openai-chat", [{"role": "user", "content": "x"}], client=api.openai(), model="gpt-test")
    with FakeAPI(lambda path, body: (529, anthropic_error("busy", "overloaded_error"))) as api, \
            pytest.raises(anthropic.APIStatusError, match="busy"):
        tools.loop("anthropic", [{"role": "user", "content": "x"}], client=api.anthropic(), model="claude-test",
                   max_tokens=5)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_each_api_loop_in_both_eras_over_stdio_and_http(era, transport):
    """The three APIs' loops with their SDK clients, against a server in
    each protocol era over each transport: the tool results the model
    gets back are the server's answers."""

    def answer(path, body):
        if path == "/v1/chat/completions":
            if body["messages"][-1]["role"] == "tool":
                return 200, chat_completion("done: " + body["messages"][-1]["content"])
            return 200, chat_completion(tool_calls=[("c1", "add", '{"a": 20, "b": 22}')])
        if path == "/v1/responses":
            outputs = [i for i in body["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if outputs:
                return 200, responses_response([output_text("done: " + outputs[0]["output"])])
            return 200, responses_response([function_call("r1", "echo", '{"text": "' + era + '"}')])
        last = body["messages"][-1]
        if last["role"] == "user" and isinstance(last["content"], list):
            return 200, anthropic_message([{"type": "text", "text": "done: " + last["content"][0]["content"][0]["text"]}])
        return 200, anthropic_message([tool_use("t1", "echo", {"text": transport})])

    with FakeAPI(answer) as api:
        if transport == "stdio":
            server = mcp_sync.connect([*STDIO_DEMO, "--versions", era], timeout=30)
        else:
            http = HTTPServer(demo_server()).start()
            server = mcp_sync.connect(http.url, protocol=era, timeout=30)
        try:
            with server as client:
                assert client.protocol_version == era
                tools = ToolSet(client)
                chat = tools.loop("openai-chat", [{"role": "user", "content": "add"}], client=api.openai(),
                                  model="gpt-test")
                responses = tools.loop("openai-responses", [{"role": "user", "content": "echo"}],
                                       client=api.openai(), model="gpt-test")
                claude = tools.loop("anthropic", [{"role": "user", "content": "echo"}], client=api.anthropic(),
                                    model="claude-test", max_tokens=50)
        finally:
            if transport == "http":
                http.close()
    assert chat.finished and chat.response.choices[0].message.content == 'done: 42\n{"sum": 42}'
    assert responses.finished and responses.response.output_text == f"done: {era}"
    assert claude.finished and claude.response.content[0].text == f"done: {transport}"
