"""What large listings and tools with an `outputSchema` cost: validators
are compiled once per tool, never per call, however many tools are called
in turn; a paged listing is remembered whole, and a listing that fails half
way leaves what was known before. (Speed itself is measured by the
benchmark suite: `python -m benchmarks --only listing,listing_paged`.)"""

from __future__ import annotations

import sys
from typing import Any

import jsonschema.validators
import pytest

import mcp_sync
from mcp_sync.protocol.headers import InvalidHeaderAnnotation, header_params
from mcp_sync.protocol.schemas import nesting_depth
from mcp_sync.testing import Server, ToolContext, demo_server


@pytest.fixture
def compilations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every validator the client compiles from now on: its schema cache
    picks the validator class with `validator_for` once per compilation.
    (The in-process test server validates what it receives with jsonschema
    too: only the calls from the client's cache are counted.)"""
    compiled: list[Any] = []
    real = jsonschema.validators.validator_for

    def counting(schema: Any, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__") == "mcp_sync.protocol.schemas":
            compiled.append(schema)
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.validators, "validator_for", counting)
    return compiled


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-06-18"])
def test_an_output_schema_is_compiled_once_for_many_calls_and_relistings(
        compilations: list[Any], protocol: str) -> None:
    with mcp_sync.connect(demo_server(), protocol=protocol) as client:
        client.list_tools()
        for i in range(100):
            assert client.call_tool("weather", {"city": f"c{i}"}).structured_content["city"] == f"c{i}"
        assert len(compilations) == 1
        client.list_tools()  # the same tools again: new Tool objects, same schemas
        for i in range(100):
            client.call_tool("weather", {"city": "Oslo"})
        assert len(compilations) == 1
        with pytest.raises(mcp_sync.OutputValidationError):  # still checked
            client.call_tool("bad_weather", {"city": "Oslo"})


def many_tools_server(count: int, page_size: int | None = None) -> Server:
    """`count` tools, each with its own outputSchema (a distinct `title`)."""
    server = Server(name="many", version="1", page_size=page_size)
    for i in range(count):
        schema = {"type": "object", "title": f"result of t{i}", "properties": {"n": {"type": "integer"}},
                  "required": ["n"]}

        @server.tool(f"t{i}", input_schema={"type": "object"}, output_schema=schema)
        def tool(args: dict[str, Any], ctx: ToolContext, i: int = i) -> dict[str, Any]:
            return {"n": i}

    return server


def test_each_tool_is_compiled_once_when_more_tools_are_called_than_the_cache_held(
        compilations: list[Any]) -> None:
    # 300 tools with distinct schemas called in turn: a cache bounded below
    # the catalog would evict each validator before its tool came round
    # again, and compile on every call.
    with mcp_sync.connect(many_tools_server(300)) as client:
        assert len(client.list_tools()) == 300
        for _ in range(2):
            for i in range(300):
                assert client.call_tool(f"t{i}").structured_content == {"n": i}
        assert len(compilations) == 300


def test_a_paged_listing_is_remembered_whole(compilations: list[Any]) -> None:
    with mcp_sync.connect(many_tools_server(250, page_size=10)) as client:
        tools = client.list_tools()
        assert [tool.name for tool in tools] == [f"t{i}" for i in range(250)]
        assert all(client._pipeline.catalog.get(f"t{i}") is tools[i] for i in range(250))
        assert client.call_tool("t249").structured_content == {"n": 249}
        assert len(compilations) == 1  # known from the listing: checked


def test_a_listing_that_fails_half_way_keeps_the_tools_known_before() -> None:
    server = many_tools_server(30, page_size=10)
    with mcp_sync.connect(server) as client:
        client.list_tools()
        known = client._pipeline.catalog.get("t25")
        assert known is not None
        pages = 0
        real = client._pipeline.calls.list_page

        def failing_on_page_two(*args: Any, **kwargs: Any) -> Any:
            nonlocal pages
            pages += 1
            if pages == 2:
                raise mcp_sync.PaginationError("the server lost its place")
            return real(*args, **kwargs)

        client._pipeline.calls.list_page = failing_on_page_two  # type: ignore[method-assign]
        with pytest.raises(mcp_sync.PaginationError):
            client.list_tools()
        assert client._pipeline.catalog.get("t25") is known


def test_list_page_still_remembers_its_tools() -> None:
    with mcp_sync.connect(many_tools_server(30, page_size=10)) as client:
        page = client.list_page("tools")
        assert [tool.name for tool in page.items] == [f"t{i}" for i in range(10)]
        assert client._pipeline.catalog.get("t9") is page.items[9]
        assert client._pipeline.catalog.get("t10") is None


@pytest.mark.parametrize("value, limit, expected", [
    ({"a": {"b": {"c": []}}}, 64, 4), ({"a": {"b": {"c": []}}}, 3, 4), ({"a": {"b": {"c": []}}}, 2, 3),
    ([], 0, 1), ("x", 0, 0), ({"a": [1, (2, {"b": None})]}, 64, 4), ({}, None, 1),
])
def test_nesting_depth_with_and_without_a_limit(value: Any, limit: int | None, expected: int) -> None:
    assert nesting_depth(value, limit) == expected


def test_nesting_depth_of_a_very_deep_value_does_not_run_out_of_stack() -> None:
    deep: Any = {}
    for _ in range(100_000):
        deep = {"not": [deep]}
    assert nesting_depth(deep, 64) == 65
    assert nesting_depth(deep) == 200_001


class _Props(dict):  # type: ignore[type-arg]
    """A Mapping that is not exactly a dict, as a caller may pass."""


class _Items(list):  # type: ignore[type-arg]
    """Likewise a list subclass."""


@pytest.mark.parametrize("schema, found", [
    ({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}}}, ["A"]),
    ({"type": "object", "properties": _Props(a=_Props({"type": "string", "x-mcp-header": "A"}))}, ["A"]),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, []),
    ({"type": "object", "properties": {"a": {"type": "string", "default": {"x-mcp-header": "no"}}}}, []),
])
def test_header_params_found_with_the_quick_walk_first(schema: dict[str, Any], found: list[str]) -> None:
    assert [param.name for param in header_params(schema)] == found


@pytest.mark.parametrize("schema", [
    {"type": "object", "anyOf": _Items([{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}])},
    {"type": "object", "items": {"x-mcp-header": "A"}},
])
def test_an_unreachable_annotation_is_still_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(InvalidHeaderAnnotation):
        header_params(schema)


def test_an_annotation_deeper_than_the_quick_walk_goes_is_still_found() -> None:
    leaf: dict[str, Any] = {"type": "string", "x-mcp-header": "Deep"}
    for i in range(150):
        leaf = {"type": "object", "properties": {f"p{i}": leaf}}
    assert [param.name for param in header_params(leaf)] == ["Deep"]
