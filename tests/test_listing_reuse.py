"""What a listing keeps (issue 19): a listed tool holds the wire objects
rather than copies of them, and listing again gives back the `Tool` already
known for every unchanged definition, so a client that lists 10,000 tools
again and again builds no second catalog for the garbage collector to scan.
Counted here, never timed (the benchmark suite times:
`python -m benchmarks --only listing,listing_paged`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import mcp_sync
from mcp_sync import calls
from mcp_sync.errors import InvalidResult
from mcp_sync.protocol.headers import header_params
from mcp_sync.testing import Server, ToolContext
from mcp_sync.types import Tool, WireModel, tools_from_wire

INPUT: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def add_tool(server: Server, name: str, description: str = "does nothing",
             input_schema: dict[str, Any] | None = None) -> None:
    @server.tool(name, description, input_schema=input_schema or INPUT, annotations={"readOnlyHint": True})
    def tool(args: dict[str, Any], ctx: ToolContext) -> str:
        return name


def tools_server(count: int, page_size: int | None = None) -> Server:
    server = Server(name="many", version="1", page_size=page_size)
    for i in range(count):
        add_tool(server, f"t{i}")
    return server


def containers(value: Any, seen: set[int]) -> None:
    """The ids of the dicts and lists in `value`, nested ones too."""
    if isinstance(value, (dict, list)) and id(value) not in seen:
        seen.add(id(value))
        for child in value.values() if isinstance(value, dict) else value:
            containers(child, seen)


def test_a_listed_tool_keeps_the_wire_objects_not_copies() -> None:
    with mcp_sync.connect(tools_server(20)) as client:
        tools = client.list_tools()
    for tool in tools:
        assert tool.input_schema is tool.raw["inputSchema"]
        assert tool.annotations is tool.raw["annotations"]
        # What the catalog keeps per tool: the Tool, its `extra` dict and the
        # wire dicts themselves; a copy of any of them would be one more.
        kept: set[int] = set()
        containers(tool.raw, kept)
        wire = len(kept)
        for field in (tool.input_schema, tool.annotations, tool.extra, tool.meta, tool.icons):
            containers(field, kept)
        assert len(kept) == wire + 1  # + extra


def test_listing_again_gives_back_the_tools_already_known() -> None:
    with mcp_sync.connect(tools_server(250, page_size=10)) as client:
        first = client.list_tools()
        again = client.list_tools()
        assert len(again) == 250
        assert all(a is b for a, b in zip(first, again))
        assert all(client._pipeline.catalog.get(f"t{i}") is again[i] for i in range(250))
        page = client.list_page("tools")  # one page, remembered page by page
        assert all(tool is first[i] for i, tool in enumerate(page.items))


def test_a_changed_tool_is_built_anew_and_a_removed_one_forgotten() -> None:
    server = tools_server(30, page_size=10)
    with mcp_sync.connect(server) as client:
        first = {tool.name: tool for tool in client.list_tools()}
        server.remove_tool("t5")
        add_tool(server, "t5", description="does something now")
        server.remove_tool("t7")
        again = {tool.name: tool for tool in client.list_tools()}
        assert again["t5"] is not first["t5"]
        assert again["t5"].description == "does something now"
        assert client._pipeline.catalog.get("t5") is again["t5"]
        assert "t7" not in again and client._pipeline.catalog.get("t7") is None
        assert all(again[name] is first[name] for name in again if name != "t5")


def test_an_unchanged_tool_is_still_left_out_where_its_header_annotation_is_invalid() -> None:
    # Listed first where nothing is mirrored into headers, then where it
    # is (the transport may change): the tool known from before is checked
    # all the same, and left out.
    server = tools_server(3)
    bad = {"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}
    add_tool(server, "bad", input_schema=bad)
    with mcp_sync.connect(server) as client:
        assert "bad" in [tool.name for tool in client.list_tools()]
        client._pipeline.catalog.mirrors_headers = True
        assert [tool.name for tool in client.list_tools()] == ["t0", "t1", "t2"]
        assert client._pipeline.catalog.get("bad") is None


def test_a_tool_checked_for_header_annotations_is_not_walked_again_until_it_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[str] = []
    real = header_params

    def counting(schema: Any) -> Any:
        walked.append(str(schema.get("properties", {}).keys()))
        return real(schema)

    monkeypatch.setattr(calls, "header_params", counting)
    server = tools_server(20, page_size=5)
    with mcp_sync.connect(server) as client:
        client._pipeline.catalog.mirrors_headers = True  # as over Streamable HTTP
        client.list_tools()
        assert len(walked) == 20
        client.list_tools()
        assert len(walked) == 20
        server.remove_tool("t3")
        add_tool(server, "t3", input_schema={"type": "object", "properties": {"b": {"type": "string"}}})
        assert len(client.list_tools()) == 20
        assert walked[20:] == ["dict_keys(['b'])"]


def test_a_definition_equal_to_a_known_tool_gives_it_back_and_any_difference_does_not() -> None:
    wire: dict[str, Any] = {"name": "echo", "inputSchema": copy.deepcopy(INPUT), "x-new": [1]}
    known = {"echo": tools_from_wire([copy.deepcopy(wire)])[0]}
    assert tools_from_wire([copy.deepcopy(wire)], known)[0] is known["echo"]
    changes: list[dict[str, Any]] = [{**wire, "title": "Echo"}, {**wire, "x-new": [2]},
                                     {**wire, "inputSchema": {**INPUT, "required": []}}]
    for changed in changes:
        tool = tools_from_wire([changed], known)[0]
        assert tool is not known["echo"] and tool.raw == changed


CASES: list[Any] = [
    {"name": "plain"},
    {"name": "full", "title": "Full", "description": "d", "inputSchema": INPUT, "outputSchema": INPUT,
     "annotations": {"readOnlyHint": True}, "icons": [{"src": "x"}], "_meta": {"k": 1}, "x-new": 1, "y": None},
    {"name": "nulls", "title": None, "inputSchema": None, "annotations": None, "_meta": None},
    {"name": "odd types", "title": 3, "description": ["x"], "icons": "not a list"},
]
BAD: list[Any] = [
    {"title": "no name"}, {"name": None}, {"name": 3}, {"name": "s", "inputSchema": []},
    {"name": "s", "outputSchema": "x"}, {"name": "s", "annotations": 1}, {"name": "s", "_meta": [1]}, 5, None,
]


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for _ in range(levels):
        schema = {"not": schema}
    return schema


@pytest.mark.parametrize("wire", CASES)
def test_from_wire_builds_what_the_generic_path_builds(wire: dict[str, Any]) -> None:
    generic = WireModel.from_wire.__func__(Tool, wire)  # type: ignore[attr-defined]
    tool = Tool.from_wire(wire)
    assert tool == generic and tool.extra == generic.extra and tool.raw == generic.raw
    assert tool.raw is not wire  # from_wire copies the dict it is given; a listing hands its own over


@pytest.mark.parametrize("wire", BAD + [{"name": "s", "inputSchema": deep(70), "outputSchema": deep(70)},
                                        {"name": "s", "outputSchema": deep(70), "inputSchema": []}])
def test_from_wire_refuses_what_the_generic_path_refuses_with_its_words(wire: Any) -> None:
    with pytest.raises(InvalidResult) as generic:
        WireModel.from_wire.__func__(Tool, wire)  # type: ignore[attr-defined]
    with pytest.raises(InvalidResult) as fast:
        Tool.from_wire(wire)
    assert str(fast.value) == str(generic.value)
