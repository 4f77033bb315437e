"""Tool definitions for the model APIs: names, schemas, selection (no SDK needed)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import mcp_sync
from mcp_sync.llm import ToolSet
from mcp_sync.llm._schema import api_names, drop_nulls, strict_schema
from mcp_sync.testing import Server, demo_server

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


@pytest.fixture
def client():
    with mcp_sync.connect(demo_server()) as c:
        yield c


def named_server(*names: str) -> Server:
    server = Server(name="names")
    for name in names:
        server.tool(name, description=f"tool {name}")(lambda args, ctx, n=name: n)
    return server


def test_importing_the_package_imports_no_sdk():
    code = ("import sys, mcp_sync, mcp_sync.llm; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic', 'httpx', 'pydantic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_api_names_keep_valid_names_and_clean_the_rest():
    mapping = api_names(["echo", "local.echo", "with space", "dash-ok"], 64)
    assert mapping == {"echo": "echo", "local_echo": "local.echo", "with_space": "with space", "dash-ok": "dash-ok"}


def test_api_names_are_collision_safe_deterministic_and_within_the_limit():
    names = ["a.b", "a_b", "a-b.c", "a/b", "x" * 70, "x" * 71, "é.tool", "ü.tool"]
    mapping = api_names(names, 64)
    assert sorted(mapping.values()) == sorted(names)  # every tool once: reversible
    assert all(OPENAI_NAME.fullmatch(n) for n in mapping)
    assert mapping["a_b"] == "a_b"  # a valid name keeps it; the one cleaned into it is hashed
    assert api_names(list(reversed(names)), 64) == mapping
    long_names = {n for n, original in mapping.items() if original.startswith("x")}
    assert len(long_names) == 2 and all(len(n) == 64 for n in long_names)
    assert all(ANTHROPIC_NAME.fullmatch(n) for n in api_names(["y" * 200, "q.q"], 128))
    assert api_names(["x" * 100], 128) == {"x" * 100: "x" * 100}


def test_strict_schema_requires_everything_and_makes_optional_nullable():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1},
            "count": {"type": "integer", "default": 3, "minimum": 0},
            "mode": {"enum": ["a", "b"]},
            "inner": {"type": "object", "properties": {"k": {"type": "string"}}},
            "either": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        },
        "required": ["text"],
    }
    out = strict_schema(schema)
    assert out["additionalProperties"] is False
    assert out["required"] == ["text", "count", "mode", "inner", "either"]
    assert "$schema" not in out
    assert out["properties"]["text"] == {"type": "string"}
    assert out["properties"]["count"] == {"type": ["integer", "null"], "minimum": 0}
    assert out["properties"]["mode"] == {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]}
    assert out["properties"]["inner"]["type"] == ["object", "null"]
    assert out["properties"]["inner"]["additionalProperties"] is False
    assert out["properties"]["inner"]["required"] == ["k"]
    assert out["properties"]["inner"]["properties"]["k"] == {"type": ["string", "null"]}
    assert out["properties"]["either"] == {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]}
    assert schema["properties"]["count"]["default"] == 3  # the original is untouched


def test_strict_mode_leaves_a_free_form_object_to_a_plain_definition():
    # It was closed (no properties, additionalProperties false): the model
    # could pass only {} where the tool takes any labels.
    from mcp_sync.llm._schema import NotStrict

    schema = {"type": "object", "properties": {"labels": {"type": "object", "description": "any labels"}}}
    with pytest.raises(NotStrict, match="names no properties"):
        strict_schema(schema)
    closed = {"type": "object", "properties": {"empty": {"type": "object", "additionalProperties": False}}}
    assert strict_schema(closed)["properties"]["empty"]["properties"] == {}
    assert strict_schema({"type": "object"}) == {"type": "object", "properties": {}, "required": [],
                                                 "additionalProperties": False}  # a tool without arguments


def test_strict_mode_reads_a_one_schema_all_of_as_that_schema():
    # It dropped `allOf`, and with it the property's whole type.
    from mcp_sync.llm._schema import NotStrict

    schema = {"type": "object",
              "properties": {"address": {"allOf": [{"$ref": "#/definitions/Address"}], "description": "where"}},
              "required": ["address"],
              "definitions": {"Address": {"type": "object", "properties": {"street": {"type": "string"}},
                                          "required": ["street"]}}}
    assert strict_schema(schema)["properties"]["address"] == {"$ref": "#/definitions/Address", "description": "where"}
    both = {"type": "object", "properties": {"note": {"allOf": [{"type": "string"}, {"maxLength": 20}]}}}
    with pytest.raises(NotStrict, match="allOf"):
        strict_schema(both)


def test_drop_nulls_removes_what_strict_mode_added_only():
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": ["string", "null"]},
                                               "c": {"type": "object", "properties": {"d": {"type": "integer"}}}},
              "required": ["a"]}
    assert drop_nulls({"a": None, "b": None, "c": {"d": None}, "x": 1}, schema) == {"a": None, "b": None, "c": {},
                                                                                   "x": 1}


def test_drop_nulls_follows_refs_and_items_and_leaves_what_it_cannot_read():
    # A required nullable field of a $ref'd object (pydantic's `str | None`)
    # lost its null, and an optional one inside array items kept it.
    schema = {
        "type": "object",
        "$defs": {"Address": {"type": "object", "properties": {"street": {"type": "string"},
                                                                 "zip": {"type": ["string", "null"]},
                                                                 "floor": {"type": "integer"}},
                              "required": ["street", "zip"]}},
        "properties": {
            "address": {"$ref": "#/$defs/Address"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"},
                                                                                   "note": {"type": "string"}},
                                                 "required": ["sku"]}},
            "either": {"anyOf": [{"type": "object", "properties": {"k": {"type": "string"}}}, {"type": "string"}]},
            "elsewhere": {"$ref": "other.json#/x"},
        },
        "additionalProperties": True,
    }
    arguments = {"address": {"street": "Main St", "zip": None, "floor": None},
                 "items": [{"sku": "A1", "note": None}, {"sku": "B2", "note": "gift"}],
                 "either": {"k": None}, "elsewhere": {"k": None}, "theme": None}
    assert drop_nulls(arguments, schema) == {
        "address": {"street": "Main St", "zip": None},
        "items": [{"sku": "A1"}, {"sku": "B2", "note": "gift"}],
        "either": {"k": None},     # under anyOf: left as sent
        "elsewhere": {"k": None},  # a $ref it cannot resolve: left as sent
        "theme": None,             # not declared (an open object): the model meant it
    }
    looped = {"$defs": {"N": {"$ref": "#/$defs/N"}}, "properties": {"n": {"$ref": "#/$defs/N"}}}
    assert drop_nulls({"n": {"x": None}}, looped) == {"n": {"x": None}}


def test_openai_chat_definitions_from_a_client(client):
    tools = ToolSet(client, tools=["echo", "add", "countdown"])
    defs = tools.openai_chat_tools()
    assert [d["function"]["name"] for d in defs] == ["echo", "add", "countdown"]
    echo = defs[0]
    assert echo == {"type": "function", "function": {
        "name": "echo", "description": "Echo the given text back.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    strict = tools.openai_chat_tools(strict=True)[2]["function"]
    assert strict["strict"] is True
    assert strict["parameters"]["required"] == ["steps", "delay"]
    assert strict["parameters"]["properties"]["steps"] == {"type": ["integer", "null"], "minimum": 0}


def test_responses_and_anthropic_definitions(client):
    tools = ToolSet(client, tools=lambda t: t.tool.annotations is not None and t.tool.annotations.get("readOnlyHint"),
                    strict=True)
    responses = tools.openai_responses_tools()
    assert {d["name"] for d in responses} >= {"echo", "add", "weather"}
    assert "sleep" not in {d["name"] for d in responses}
    add = next(d for d in responses if d["name"] == "add")
    assert add["type"] == "function" and add["strict"] is True and add["description"] == "Add two numbers."
    assert add["parameters"]["additionalProperties"] is False
    anthropic = tools.anthropic_tools()
    echo = next(d for d in anthropic if d["name"] == "echo")
    assert echo == {"name": "echo", "description": "Echo the given text back.",
                    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                                     "required": ["text"]}}


def test_an_open_object_is_sent_non_strict():
    server = Server(name="open")

    @server.tool(input_schema={"type": "object", "additionalProperties": {"type": "string"}})
    def tags(args, ctx):
        return "ok"

    with mcp_sync.connect(server) as client:
        definition = ToolSet(client, strict=True).openai_responses_tools()[0]
    assert definition["strict"] is False
    assert definition["parameters"] == {"type": "object", "additionalProperties": {"type": "string"}, "properties": {}}


def test_group_names_are_qualified_cleaned_and_resolve_back():
    with mcp_sync.ClientGroup({"a": demo_server(), "b.x": named_server("echo", "run.fast")}) as group:
        tools = ToolSet(group, tools=["a.echo", "b.x.echo", "b.x.run.fast"])
        names = tools.names("openai-chat")
        assert list(names) == ["a_echo", "b_x_echo", "b_x_run_fast"]
        assert tools.resolve("b_x_run_fast").name == "b.x.run.fast"
        assert tools.resolve("b_x_run_fast").server == "b.x"
        assert [d["name"] for d in tools.anthropic_tools()] == ["a_echo", "b_x_echo", "b_x_run_fast"]
        with pytest.raises(KeyError):
            tools.resolve("nope")


def test_colliding_tool_names_stay_distinct():
    with mcp_sync.connect(named_server("a.b", "a_b", "a-b")) as client:
        tools = ToolSet(client)
        names = tools.names("openai-chat")
        assert len(names) == 3 and names["a_b"].name == "a_b" and names["a-b"].name == "a-b"
        hashed = next(n for n in names if names[n].name == "a.b")
        assert re.fullmatch(r"a_b_[0-9a-f]{8}", hashed)


def test_bad_arguments_are_refused(client):
    with pytest.raises(TypeError):
        ToolSet(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ToolSet(client, tools="echo")
    with pytest.raises(ValueError, match="no tool named 'nope'"):
        ToolSet(client, tools=["echo", "nope"])
    with pytest.raises(ValueError):
        ToolSet(client, timeout=0)
    with pytest.raises(ValueError):
        ToolSet(client, max_workers=0)
    tools = ToolSet(client)
    with pytest.raises(ValueError):
        tools.definitions("gemini")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a openai-chat response"):
        tools.run({"choices": []}, "openai-chat")
    with pytest.raises(TypeError):
        tools.loop("openai-chat", [])


@pytest.mark.parametrize("value", ["false", "", 0, 1, []])
def test_strict_is_true_or_false(client, value):
    """`strict="false"` made every definition strict (it was `bool()`-ed)."""
    with pytest.raises(TypeError, match="strict must be True or False"):
        ToolSet(client, strict=value)
    tools = ToolSet(client, tools=["echo"])
    with pytest.raises(TypeError, match="strict must be True or False"):
        tools.openai_chat_tools(strict=value)
    with pytest.raises(TypeError, match="strict must be True or False"):
        tools.openai_responses_tools(strict=value)
    assert tools.openai_responses_tools(strict=None)[0]["strict"] is False  # None: the set's own


def test_an_api_name_given_out_stays_with_its_tool_after_a_refresh():
    # A new tool `files_delete` took the API name `files.delete` had, so the
    # model's call from the earlier definitions ran the other tool.
    from mcp_sync.testing import Server

    from .fake_api import chat_completion

    server = Server(name="s")
    server.tool(name="files.delete")(lambda args, ctx: "files.delete ran")
    with mcp_sync.connect(server) as client:
        tools = ToolSet(client)
        given = [d["function"]["name"] for d in tools.openai_chat_tools()]
        assert given == ["files_delete"]
        server.tool(name="files_delete")(lambda args, ctx: "files_delete ran")
        tools.refresh()
        names = tools.names("openai-chat")
        assert names["files_delete"].name == "files.delete"
        assert [name for name, entry in names.items() if entry.name == "files_delete"][0].startswith("files_delete_")
        reply = tools.run_openai_chat(chat_completion(tool_calls=[("1", "files_delete", "{}")]))
        assert reply[0]["content"] == "files.delete ran"
    # A fresh set, in any process, names them by the set alone.
    assert api_names(["files.delete", "files_delete"], 64)["files_delete"] == "files_delete"


def test_a_group_server_that_fails_to_list_is_reported_not_raised():
    broken = [sys.executable, "-c", "import sys; sys.exit(1)"]
    with mcp_sync.ClientGroup({"ok": demo_server(), "down": broken}, timeout=10) as group:
        tools = ToolSet(group, tools=lambda t: t.tool.name == "echo")
        assert [t.name for t in tools.tools] == ["ok.echo"]
        assert list(tools.errors) == ["down"]
        assert isinstance(tools.errors["down"], mcp_sync.McpError)
        # Named: a name the failed server may hold is left out too (it raised
        # "no tool named 'down.search'", with no word of the failure).
        named = ToolSet(group, tools=["ok.echo", "down.search", "search"])
        assert [t.name for t in named.tools] == ["ok.echo"] and list(named.errors) == ["down"]
        with pytest.raises(ValueError, match="no tool named 'ok.search'"):
            ToolSet(group, tools=["ok.echo", "ok.search"])  # the server that answered has none
