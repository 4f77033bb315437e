"""What a hostile server can feed the parsers: each failure is an `McpError`.

Deep nesting, numbers too large to convert, text UTF-8 cannot carry, a
trickled SSE line, a tool schema nested hundreds deep. Each test states the
error (or the bound) the user gets instead of a `RecursionError`,
`OverflowError`, `UnicodeError` or unbounded memory.
"""

import logging
import sys
import time
import tracemalloc

import pytest

import mcp_sync
from mcp_sync.errors import InvalidMessage, InvalidResult, McpError, MessageTooLarge, OutputValidationError
from mcp_sync.protocol import headers, jsonrpc, schemas, sse
from mcp_sync.testing import HTTPServer, Server
from mcp_sync.types import Tool
from tests.helpers import GENEROUS

DEEP = 100_000


def nested_list(depth):
    """[[[...]]] `depth` deep, built without recursion."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_schema(depth, keyword="items"):
    """A subschema `depth` levels deep under `keyword`, at a property of an object schema."""
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {keyword: schema}
    return {"type": "object", "properties": {"x": schema}}


# -- JSON-RPC decoding --------------------------------------------------------


@pytest.mark.parametrize("raw", [
    b"[" * DEEP,
    b'{"a":' * DEEP,
    "[" * DEEP,
    b'{"jsonrpc":"2.0","id":1,"result":{"x":' + b"[" * DEEP + b"]" * DEEP + b"}}",
], ids=["arrays", "objects", "text", "closed-inside-a-response"])
def test_deep_json_is_an_invalid_message(raw):
    with pytest.raises(InvalidMessage, match="nested too deeply") as caught:
        jsonrpc.decode(raw)
    assert len(str(caught.value)) < 400  # a preview, not the 100 kB


@pytest.mark.parametrize("raw", [
    b'{"n":' + b"1" * 5000 + b"}",  # more digits than int() converts
    b'{"a":"\xff"}',  # not UTF-8
    b"\xff\xfe{\x00\x00\xd8",  # a UTF-16 BOM, then a broken surrogate
    b"\x00" * 10,
], ids=["long-number", "bad-utf8", "bad-utf16", "nul"])
def test_undecodable_input_is_an_invalid_message(raw):
    with pytest.raises(InvalidMessage):
        jsonrpc.decode(raw)


@pytest.mark.parametrize("error", [
    RecursionError("maximum recursion depth exceeded"),
    OverflowError("int too large"),
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    ValueError("anything"),
])
def test_every_parser_failure_becomes_invalid_message(monkeypatch, error):
    def parser(data):
        raise error

    monkeypatch.setattr(jsonrpc, "_loads", parser)
    with pytest.raises(InvalidMessage):
        jsonrpc.decode(b"{}")


def test_preview_of_a_deep_or_huge_message_is_bounded():
    message = {"jsonrpc": "1.0", "id": 1, "result": nested_list(DEEP), "pad": "x" * 10_000_000}
    with pytest.raises(InvalidMessage) as caught:
        jsonrpc.classify(message)
    assert len(str(caught.value)) < 400


def test_a_lone_surrogate_goes_back_as_it_came():
    # A server may send a cursor holding a lone surrogate (legal JSON, no UTF-8 form).
    page = jsonrpc.decode(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":"\\ud800x\xc3\xa9"}}')
    cursor = page["result"]["nextCursor"]
    assert cursor == "\ud800x\u00e9"
    wire = jsonrpc.encode(jsonrpc.request(2, "tools/list", {"cursor": cursor}))
    assert wire.isascii() and b"\\ud800" in wire
    assert jsonrpc.decode(wire)["params"]["cursor"] == cursor


# -- SSE ---------------------------------------------------------------------------


def test_retry_with_400_digits_is_clamped_to_an_hour():
    parser = sse.SSEParser()
    parser.feed(b"retry: " + b"9" * 400 + b"\n")
    # The transport turns it into seconds; before, this overflowed a float.
    assert parser.retry_ms / 1000.0 == 3600.0


@pytest.mark.parametrize("line,expected", [
    (b"retry: 3600001", 3_600_000),
    (b"retry: 3600000", 3_600_000),
    (b"retry: 1500", 1500),
    (b"retry: -5", 7),
    (b"retry: 1e3", 7),
    (b"retry: \xd9\xa3", 7),  # ARABIC-INDIC DIGIT THREE: a digit, but not ASCII
    (b"retry: \xff\xfe", 7),
    (b"retry", 7),
])
def test_retry_values(line, expected):
    parser = sse.SSEParser()
    parser.feed(b"retry: 7\n" + line + b"\n")
    assert parser.retry_ms == expected


def test_event_too_large_is_an_mcp_error():
    parser = sse.SSEParser(max_event_bytes=10)
    with pytest.raises(MessageTooLarge) as caught:
        parser.feed(b"data: " + b"x" * 100)
    assert caught.value.limit == 10


def _peak_while(feed):
    tracemalloc.start()
    try:
        result = feed()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_a_trickled_line_costs_about_its_size():
    # 50,000 reads of one 3-byte character each: a string object apiece
    # before (4.2 MB for 150 kB of line); joined in groups now.
    parser = sse.SSEParser(max_event_bytes=16 * 1024 * 1024)
    parser.feed(b"data: ")
    piece = "\u20ac".encode()

    def feed():
        for _ in range(50_000):
            parser.feed(piece)
        return parser.feed(b"\n\n")

    peak, events = _peak_while(feed)
    assert [len(e.data) for e in events] == [50_000] and set(events[0].data) == {"\u20ac"}
    assert peak < 1_000_000, peak


def test_many_short_data_lines_cost_about_their_size():
    parser = sse.SSEParser(max_event_bytes=16 * 1024 * 1024)
    line = "data:\u20ac\n".encode()
    count = 30_000

    def feed():
        for _ in range(count):
            parser.feed(line)
        return parser.feed(b"\n")

    peak, events = _peak_while(feed)
    assert [e.data for e in events] == ["\n".join(["\u20ac"] * count)]
    assert peak < 2 * len(line) * count, peak


# -- headers -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    "a\r\nInjected: 1", "nul\x00", "caf\u00e9", "=?base64?!!!?=", "=?base64?/w==?=", "=?base64?YQ?=",
])
def test_malformed_header_values_raise_an_mcp_error(value):
    with pytest.raises(InvalidMessage) as caught:
        headers.decode_header_value(value)
    assert isinstance(caught.value, ValueError)  # what the function raised before


def test_header_params_walk_any_depth():
    assert headers.header_params(nested_schema(5000)) == ()
    chain: dict = {"type": "string", "x-mcp-header": "Deep"}
    for _ in range(3000):
        chain = {"type": "object", "properties": {"p": chain}}
    (param,) = headers.header_params(chain)
    assert param.path == ("p",) * 3000 and param.header == "Mcp-Param-Deep"
    buried = nested_schema(5000)
    inner = buried["properties"]["x"]
    while "items" in inner:
        inner = inner["items"]
    inner["x-mcp-header"] = "Buried"
    with pytest.raises(headers.InvalidHeaderAnnotation, match="not statically reachable"):
        headers.header_params(buried)


def test_a_deep_annotation_value_is_refused_briefly():
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": nested_list(DEEP)}}}
    with pytest.raises(headers.InvalidHeaderAnnotation, match="not a string") as caught:
        headers.header_params(schema)
    assert len(str(caught.value)) < 300


# -- schemas and tool definitions ----------------------------------------------


def test_nesting_depth():
    from mcp_sync.protocol.schemas import nesting_depth

    assert [nesting_depth(v) for v in (1, "x", {}, [], {"a": []}, [{"a": [1]}, 2])] == [0, 0, 1, 1, 2, 3]
    assert nesting_depth(nested_list(DEEP)) == DEEP
    assert nesting_depth(nested_list(DEEP), limit=64) == 65


@pytest.mark.parametrize("depth", [600, 3000])
def test_validating_against_a_deep_schema_is_a_problem_not_a_crash(depth):
    problems = schemas.SchemaCache().errors(nested_schema(depth), {"x": ["a"]})
    assert len(problems) == 1 and "nested" in problems[0]


def test_a_recursive_ref_over_a_deep_instance_is_a_problem_not_a_crash():
    schema = {"$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
              "$ref": "#/$defs/node"}
    instance: dict = {}
    for _ in range(400):
        instance = {"child": instance}
    assert schemas.SchemaCache().errors(schema, {"child": {"child": {}}}) == []
    assert schemas.SchemaCache().errors(schema, instance) == [
        "the schema and the value are nested too deeply to validate"]


@pytest.mark.parametrize("schema", [
    {"$schema": []},  # TypeError inside jsonschema's dialect lookup
    {"$schema": "http://["},  # ValueError from urlsplit
    {"$id": "urn:a", "$defs": {"a": {"$id": "http://["}}, "$ref": "#/$defs/a"},
])
def test_output_schemas_jsonschema_cannot_run_are_problems(schema):
    problems = schemas.SchemaCache().errors(schema, {"a": 1})
    assert len(problems) == 1 and "schema" in problems[0]


def test_a_tool_schema_may_be_64_deep_not_65():
    def schema(depth):  # `depth` levels of JSON nesting, counting the root
        value: dict = {"type": "string"}
        for _ in range(depth - 1):
            value = {"not": value}
        return value

    assert Tool.from_wire({"name": "t", "inputSchema": schema(64), "outputSchema": schema(64)}).name == "t"
    for field in ("inputSchema", "outputSchema"):
        with pytest.raises(InvalidResult, match=f"{field}.*deeper than 64"):
            Tool.from_wire({"name": "t", field: schema(65)})


def test_bad_tool_definitions_are_left_out_with_a_warning(caplog):
    from mcp_sync.types import tools_from_wire

    items = [
        {"name": "good", "inputSchema": {"type": "object"}},
        {"name": "deep", "inputSchema": nested_schema(600)},
        {"title": "nameless"},
        {"name": 42},
        "not an object",
        {"name": "bad-schema", "outputSchema": [1]},
        {"name": None},
    ]
    with caplog.at_level(logging.WARNING, logger="mcp_sync.client"):
        assert [tool.name for tool in tools_from_wire(items)] == ["good"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 6
    assert "'deep'" in warnings[0] and "deeper than 64" in warnings[0]
    assert "'bad-schema'" in warnings[4]


def deep_tools_server():
    server = Server()

    @server.tool(input_schema=nested_schema(600))
    def deep_in(args, ctx):
        return "deep_in ran"

    @server.tool(output_schema=nested_schema(600))
    def deep_out(args, ctx):
        return {"x": ["a"]}

    @server.tool()
    def fine(args, ctx):
        return "fine"

    return server


@pytest.fixture(params=["memory", "http"])
def deep_target(request):
    server = deep_tools_server()
    if request.param == "memory":
        yield server
        return
    httpd = HTTPServer(server).start()
    try:
        yield httpd.url
    finally:
        httpd.close()


def test_list_tools_leaves_out_tools_with_deep_schemas(deep_target, caplog):
    with mcp_sync.connect(deep_target, timeout=10) as client:
        with caplog.at_level(logging.WARNING, logger="mcp_sync.client"):
            names = [tool.name for tool in client.list_tools()]
        assert names == ["fine"]
        warnings = " ".join(r.getMessage() for r in caplog.records)
        assert "'deep_in'" in warnings and "'deep_out'" in warnings
        # The client stays usable, and the tools left out can still be called by name.
        assert client.call_tool("fine").text == "fine"
        assert client.call_tool("deep_in", {}).text == "deep_in ran"


def test_a_deep_output_schema_given_by_the_caller_fails_validation_not_the_stack():
    definition = Tool(name="deep_out", output_schema=nested_schema(600))
    with mcp_sync.connect(deep_tools_server(), timeout=10) as client:
        with pytest.raises(OutputValidationError, match="nested deeper than 64"):
            client.call_tool(definition, {})
        # The same definition as a mapping is refused as the caller's bad argument.
        with pytest.raises(ValueError, match="not a tool definition"):
            client.call_tool({"name": "deep_out", "outputSchema": nested_schema(600)}, {})


def test_errors_of_this_module_are_mcp_errors():
    for error in (InvalidMessage, MessageTooLarge, OutputValidationError, headers.InvalidHeaderValue):
        assert issubclass(error, McpError)
    assert issubclass(sse.EventTooLarge, MessageTooLarge)


# A stdio server that answers the probe, then writes JSON nested 100,000
# deep as its answer to any call.
DEEP_STDIO_SERVER = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "server/discover":
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}}
        sys.stdout.write(json.dumps(answer) + "\n")
    else:
        sys.stdout.write("[" * 100000 + "\n")
    sys.stdout.flush()
"""


def test_deep_json_from_a_stdio_server_fails_the_call_at_once():
    timeout = 10
    with mcp_sync.connect([sys.executable, "-c", DEEP_STDIO_SERVER], timeout=timeout) as client:
        started = time.monotonic()
        with pytest.raises(InvalidMessage, match="nested too deeply"):
            client.call_tool("anything", {})
        # Not the 10 s timeout: the reader reported the bad line.
        assert time.monotonic() - started < GENEROUS < timeout
