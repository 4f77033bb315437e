"""`_schema`: schemas a server lists with keywords of the wrong type or in
`allOf`, as strict mode and `drop_nulls` read them (no SDK needed)."""

from __future__ import annotations

import pytest

import mcp_sync
from mcp_sync.llm import ToolSet
from mcp_sync.llm._schema import NotStrict, drop_nulls, strict_schema
from mcp_sync.testing import Server

MALFORMED_REQUIRED = [5, [["x"]], "x", {"x": True}, [1]]


@pytest.mark.parametrize("required", MALFORMED_REQUIRED, ids=repr)
def test_a_required_that_is_not_a_list_of_names_cannot_be_made_strict(required):
    # It said which properties are optional, and strict mode makes the
    # optional ones nullable: read wrongly, it made a required one nullable
    # (the string "x" read as its letters) or raised TypeError to the user.
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": required}
    with pytest.raises(NotStrict):
        strict_schema(schema)
    nested = {"type": "object", "properties": {"inner": schema}, "required": ["inner"]}
    with pytest.raises(NotStrict):
        strict_schema(nested)


@pytest.mark.parametrize("required", MALFORMED_REQUIRED, ids=repr)
def test_drop_nulls_leaves_the_arguments_of_a_malformed_required_as_sent(required):
    schema = {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
              "required": required}
    assert drop_nulls({"x": None, "y": "kept"}, schema) == {"x": None, "y": "kept"}


def test_a_tool_with_a_malformed_required_is_listed_non_strict_and_runs():
    server = Server(name="odd")
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": [["x"]]}

    @server.tool(input_schema=schema)
    def odd(args, ctx):
        return f"got {args.get('x')}"

    with mcp_sync.connect(server) as client:
        tools = ToolSet(client, strict=True)
        (definition,) = tools.openai_chat_tools()
        assert "strict" not in definition["function"]
        assert definition["function"]["parameters"]["required"] == [["x"]]
        reply = tools.run({"content": [{"type": "tool_use", "id": "t1", "name": "odd", "input": {"x": "a"}}]},
                          "anthropic")
        assert reply == [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                       "content": [{"type": "text", "text": "got a"}]}]}]


def test_the_properties_of_a_single_all_of_stay_in_strict_mode():
    # The top level's `properties: {}` (added for OpenAI) took the place of
    # those in the `allOf`: the model could send nothing.
    schema = {"type": "object", "allOf": [{"properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                                           "required": ["a"]}]}
    assert strict_schema(schema) == {
        "type": "object", "additionalProperties": False, "required": ["a", "b"],
        "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}}}
    nested = {"type": "object", "properties": {"p": {"description": "a point", "allOf": [
        {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}]}}, "required": ["p"]}
    assert strict_schema(nested)["properties"]["p"] == {
        "type": "object", "description": "a point", "properties": {"x": {"type": "number"}}, "required": ["x"],
        "additionalProperties": False}


@pytest.mark.parametrize("inner", [{"properties": {}, "additionalProperties": True},
                                   {"properties": {}, "additionalProperties": {"type": "integer"}},
                                   {"properties": {}, "patternProperties": {"^p": {}}}])
def test_an_open_object_inside_a_single_all_of_is_not_strict(inner):
    # It admits properties it does not name: strict mode would close it.
    with pytest.raises(NotStrict):
        strict_schema({"type": "object", "properties": {"o": {"allOf": [{"type": "object", **inner}]}}})
    with pytest.raises(NotStrict):
        strict_schema({"type": "object", "allOf": [inner]})


# `oneOf` beside `anyOf`: both must hold. Each became `anyOf`, so the one
# later in the schema silently replaced the other: here the model could
# send "x", which the tool refuses (an integer is all `v` takes).
BOTH = {"anyOf": [{"type": "integer"}], "oneOf": [{"type": "string"}, {"type": "integer"}]}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"v": BOTH}, "required": ["v"]},
    {"type": "object", "properties": {"v": {"type": "array", "items": BOTH}}, "required": ["v"]},
    {"type": "object", "properties": {"v": {"$ref": "#/$defs/V"}}, "required": ["v"], "$defs": {"V": BOTH}},
    {"type": "object", "properties": {"v": {"allOf": [{"anyOf": BOTH["anyOf"]}], "oneOf": BOTH["oneOf"]}}},
    {"type": "object", "properties": {"v": {"allOf": [{"anyOf": BOTH["anyOf"]}], "anyOf": BOTH["oneOf"]}}},
], ids=["property", "items", "$defs", "oneOf beside an allOf with anyOf", "anyOf beside an allOf with anyOf"])
def test_one_of_beside_any_of_cannot_be_made_strict(schema):
    with pytest.raises(NotStrict, match="oneOf beside anyOf|anyOf both beside and inside allOf"):
        strict_schema(schema)


def test_either_alone_still_becomes_any_of():
    one = {"type": "object", "properties": {"v": {"oneOf": BOTH["oneOf"]}}, "required": ["v"]}
    assert strict_schema(one)["properties"]["v"] == {"anyOf": BOTH["oneOf"]}
    any_ = {"type": "object", "properties": {"v": {"anyOf": BOTH["anyOf"]}}, "required": ["v"]}
    assert strict_schema(any_)["properties"]["v"] == {"anyOf": BOTH["anyOf"]}


def test_a_tool_with_one_of_beside_any_of_is_listed_non_strict_with_both_and_the_others_stay_strict():
    server = Server(name="both")
    schema = {"type": "object", "properties": {"v": BOTH}, "required": ["v"]}

    @server.tool(input_schema=schema)
    def pick(args, ctx):
        return f"got {args['v']!r}"

    @server.tool(input_schema={"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]})
    def plain(args, ctx):
        return "plain"

    with mcp_sync.connect(server) as client:
        tools = ToolSet(client, strict=True)
        definitions = {d["function"]["name"]: d["function"] for d in tools.openai_chat_tools()}
        assert "strict" not in definitions["pick"]
        assert definitions["pick"]["parameters"]["properties"]["v"] == BOTH  # as the server said it
        assert definitions["plain"]["strict"] is True
        responses = {d["name"]: d["strict"] for d in tools.openai_responses_tools()}
        assert responses == {"pick": False, "plain": True}
