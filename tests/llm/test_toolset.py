"""`ToolSet.run`: what a model's call or a tool's result holds never raises
to the user (no SDK needed: the responses are dicts)."""

from __future__ import annotations

import json
import threading

import mcp_sync
from mcp_sync.llm import ToolSet
from mcp_sync.testing import HTTPServer, Server


def chat(*calls: tuple[str, str, object]) -> dict:
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for call_id, name, arguments in calls]}}]}


def test_arguments_a_header_cannot_carry_are_an_error_for_the_model_not_the_user():
    # Streamable HTTP (2026-07-28) mirrors an x-mcp-header property into a
    # header; the client refuses a value no header can carry with
    # TypeError/ValueError before sending, which run() raised to the user,
    # losing every other call's result with it.
    server = Server(name="regions")

    @server.tool(input_schema={"type": "object", "required": ["region"],
                               "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})
    def where(args, ctx):
        return f"in {args['region']}"

    with HTTPServer(server).start() as http, mcp_sync.connect(http.url, protocol="2026-07-28", timeout=30) as client:
        tools = ToolSet(client)
        results = tools.run(chat(("c1", "where", {"region": "eu"}), ("c2", "where", {"region": {"x": 1}}),
                                 ("c3", "where", {"region": 2 ** 60}), ("c4", "where", {"region": "us"})),
                            "openai-chat")
    assert [r["tool_call_id"] for r in results] == ["c1", "c2", "c3", "c4"]
    assert results[0]["content"] == "in eu" and results[3]["content"] == "in us"
    for refused in results[1:3]:
        assert refused["content"].startswith("Error: the arguments of where were refused before sending")
        assert "Mcp-Param-Region" in refused["content"]


def test_a_text_nested_too_deeply_to_parse_beside_structured_content_is_shown():
    # The text is compared with the structured content to say it once; a
    # text too deeply nested for json.loads raised RecursionError to the user.
    server = Server(name="deep")
    deep_text = "[" * 100_000

    @server.tool(input_schema={"type": "object"})
    def deep(args, ctx):
        return {"content": [{"type": "text", "text": deep_text}], "structuredContent": {"a": 1}}

    with mcp_sync.connect(server, timeout=30) as client:
        tools = ToolSet(client)
        (message,) = tools.run({"content": [{"type": "tool_use", "id": "t1", "name": "deep", "input": {}}]},
                               "anthropic")
        assert message["content"][0]["content"] == [{"type": "text", "text": deep_text},
                                                     {"type": "text", "text": '{"a": 1}'}]
        (reply,) = tools.run(chat(("c1", "deep", {})), "openai-chat")
        assert reply["content"] == deep_text + '\n{"a": 1}'


def test_names_first_given_out_while_a_refresh_runs_stay_with_their_tools(monkeypatch):
    # The API names of one name limit were made on first use, into the dict
    # a refresh was reading: the refresh failed ("dictionary changed size
    # during iteration"), or, had it not, the names the model was just given
    # were not kept, so "files_delete" could run another tool that took it.
    from mcp_sync.llm import _toolset

    server = Server(name="files")
    server.tool("files.delete", description="delete a file")(lambda args, ctx: "deleted by files.delete")
    with mcp_sync.connect(server) as client:
        tools = ToolSet(client)
        tools.openai_chat_tools()
        server.tool("files_delete", description="another tool")(lambda args, ctx: "deleted by files_delete")
        entered, go = threading.Event(), threading.Event()
        original = _toolset.api_names
        refresher: list[threading.Thread] = []

        def paused(*args, **kwargs):
            if refresher and threading.current_thread() is refresher[0] and not entered.is_set():
                entered.set()
                assert go.wait(30)
            return original(*args, **kwargs)

        monkeypatch.setattr(_toolset, "api_names", paused)
        failed: list[BaseException] = []

        def refresh():
            try:
                tools.refresh()
            except BaseException as exc:  # reported below
                failed.append(exc)

        refresher.append(threading.Thread(target=refresh))
        refresher[0].start()
        assert entered.wait(30)
        given = [definition["name"] for definition in tools.anthropic_tools()]  # the model sees these
        go.set()
        refresher[0].join(30)
        assert not refresher[0].is_alive() and failed == []
        assert given == ["files_delete"]
        assert tools.resolve("files_delete", "anthropic").name == "files.delete"
        reply = tools.run({"content": [{"type": "tool_use", "id": "t1", "name": "files_delete", "input": {}}]},
                          "anthropic")
        assert reply[0]["content"][0]["content"] == [{"type": "text", "text": "deleted by files.delete"}]
        assert len(tools.tools) == 2
