"""Fuzzing every parser the network feeds, with hypothesis.

The property is the same everywhere: whatever the bytes, a parser returns a
normal result or raises its one documented error. That error is an
`McpError` (`InvalidMessage`, `MessageTooLarge`, `InvalidHeaderValue`), with
two exceptions the callers convert: the HTTP/1.1 reader's `ResponseError`
and `InvalidHeaderAnnotation` (which leaves a tool out). `WWW-Authenticate`
parsing, tool lists and output validation never raise. Nothing else may
escape: no `RecursionError`, `OverflowError`, `UnicodeError`, `TypeError`,
`IndexError`, bare `ValueError`.

Parsers covered: JSON-RPC decoding and classification (with nesting up to
200,000 deep), the SSE parser (arbitrary chunkings), the HTTP/1.1 response
reader of the HTTP transport (status line, headers, body framing: fed
through a fake socket in arbitrary pieces), header value decoding and the
`x-mcp-header` schema walk, `WWW-Authenticate` parsing, and tool
definitions with their output schemas.

The default run is derandomized (the same cases every run): about 6,000
cases, some 12 s of CPU. A long, random run, 10^5 cases per test::

    MCP_SYNC_FUZZ_EXAMPLES=100000 python -m pytest tests/protocol/test_fuzz.py -p no:cacheprovider

`MCP_SYNC_FUZZ_EXAMPLES` sets the number of cases of every test (12 tests;
5,000 each take about 2.5 minutes, 10^5 each under an hour). When it is set
the run is random (add ``--hypothesis-seed=N`` to repeat one), and a
failure prints the smallest input that fails.
"""

import io
import json
import os
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_sync.auth.discovery import Challenge, parse_challenges
from mcp_sync.errors import InvalidMessage, McpError, MessageTooLarge
from mcp_sync.protocol import headers, jsonrpc, schemas, sse
from mcp_sync.transports import http11
from mcp_sync.types import Tool

_LONG_RUN = os.environ.get("MCP_SYNC_FUZZ_EXAMPLES")


def fuzz(default: int):
    """Hypothesis settings for one fuzz test: `default` cases (derandomized)
    unless MCP_SYNC_FUZZ_EXAMPLES asks for a long, random run."""
    return settings(
        max_examples=int(_LONG_RUN) if _LONG_RUN else default,
        derandomize=not _LONG_RUN,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


# -- JSON-RPC -----------------------------------------------------------------------


def _decode_and_classify(data):
    """The property of every JSON-RPC test: a dict and a Kind, or InvalidMessage."""
    try:
        message = jsonrpc.decode(data)
    except InvalidMessage:
        return
    assert isinstance(message, dict)
    try:
        assert isinstance(jsonrpc.classify(message), jsonrpc.Kind)
    except InvalidMessage:
        pass


@fuzz(600)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_jsonrpc_decode_arbitrary_input(data):
    _decode_and_classify(data)


@st.composite
def mangled_messages(draw):
    """Plausible messages, then cut, spliced or corrupted."""
    message = draw(st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0", 2])},
        optional={"id": st.integers() | st.text(max_size=5) | st.none() | st.floats(),
                  "method": st.text(max_size=10) | st.integers(),
                  "params": json_values, "result": json_values, "error": json_values}))
    raw = json.dumps(message).encode()
    cut = draw(st.integers(0, len(raw)))
    action = draw(st.sampled_from(["keep", "truncate", "insert", "replace"]))
    if action == "truncate":
        raw = raw[:cut]
    elif action == "insert":
        raw = raw[:cut] + draw(st.binary(min_size=1, max_size=8)) + raw[cut:]
    elif action == "replace" and raw:
        raw = raw[:cut] + draw(st.sampled_from([b"\xff", b"NaN", b"1e999", b"\\ud800", b"[", b"{", b'"'])) + raw[cut + 1:]
    return raw


@fuzz(400)
@given(mangled_messages())
def test_jsonrpc_decode_mangled_messages(raw):
    _decode_and_classify(raw)


@st.composite
def deep_json(draw):
    """Nesting from 1 to 200,000 deep, closed or not, bare or inside a message."""
    depth = draw(st.integers(1, 2000) | st.integers(2000, 200_000))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}"), ('[{"b":', "}]"), ('{"":[', "]}")]))
    body = opener * depth + draw(st.sampled_from(["1", '"x"', "", "null"]))
    if draw(st.booleans()):
        body += closer * depth
    if draw(st.booleans()):
        body = '{"jsonrpc":"2.0","id":1,"result":{"v":' + body + "}}"
    return body.encode() if draw(st.booleans()) else body


@fuzz(150)
@given(deep_json())
def test_jsonrpc_decode_deep_nesting(data):
    _decode_and_classify(data)


# Text a server can put in JSON, lone surrogates (escaped "\ud800") included.
server_texts = st.text(st.characters(categories=["Cs", "Ll", "Lo", "Nd", "Zs", "So", "Cc"]), max_size=30)


@fuzz(200)
@given(server_texts)
def test_jsonrpc_text_from_the_server_can_be_sent_back(text):
    # Any string a server can send (lone surrogates included) can be echoed
    # in a request, and reads back the same.
    wire = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"nextCursor": text}}).encode()
    cursor = jsonrpc.decode(wire)["result"]["nextCursor"]
    assert jsonrpc.decode(jsonrpc.encode(jsonrpc.request(2, "tools/list", {"cursor": cursor})))["params"] == {
        "cursor": text}


# -- SSE ----------------------------------------------------------------------------------


_SSE_TOKENS = [b"data:", b"data: ", b"event:", b"id:", b"retry:", b"retry: ", b":", b" ", b"\r", b"\n", b"\r\n",
               b"\n\n", b"\xef\xbb\xbf", b"\xe2\x82", b"\xac", b"\xff", b"\x00", b"0", b"9" * 400, b"12",
               b"x", b"{}", b"\xd9\xa3"]
sse_streams = st.lists(st.sampled_from(_SSE_TOKENS) | st.binary(max_size=12), max_size=40).map(b"".join)


def _parse(chunks, limit):
    """(events, too_large) for one stream fed in `chunks`, checking the
    parser's state after each step."""
    parser = sse.SSEParser(max_event_bytes=limit)
    events = []
    try:
        for chunk in chunks:
            events += parser.feed(chunk)
            _check_sse_state(parser)
        events += parser.close()
    except sse.EventTooLarge as exc:
        assert isinstance(exc, MessageTooLarge) and exc.limit == limit
        return events, True
    _check_sse_state(parser)
    return events, False


def _check_sse_state(parser):
    retry = parser.retry_ms
    assert retry is None or 0 <= retry <= sse.MAX_RETRY_MS
    if retry is not None:
        assert retry / 1000.0 <= 3600.0  # what the transport computes: no OverflowError
    assert parser.last_event_id is None or "\0" not in parser.last_event_id


@fuzz(1000)
@given(sse_streams, st.data(), st.none() | st.integers(1, 64))
def test_sse_any_chunking_of_any_stream(stream, data, limit):
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    bounds = [0, *cuts, len(stream)]
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    chunked = _parse(chunks, limit)
    whole = _parse([stream], limit)
    # EventTooLarge is raised or not whatever the chunking, and the events are the same.
    assert chunked[1] == whole[1]
    if not chunked[1]:
        assert chunked[0] == whole[0]
    if limit is not None:
        for event in chunked[0]:
            assert len(event.data.encode("utf-8", "surrogatepass")) <= limit


# -- HTTP/1.1 responses -----------------------------------------------------------------


class FakeSocket:
    """A socket's read side that hands out the given pieces, one per
    `recv` (or per read of its `makefile()`): the reader must cope with any
    split of the stream."""

    def __init__(self, pieces):
        self._pieces = deque(p for p in pieces if p)

    def recv(self, size):
        if not self._pieces:
            return b""
        piece = self._pieces.popleft()
        if len(piece) > size:
            self._pieces.appendleft(piece[size:])
        return piece[:size]

    def settimeout(self, timeout):
        pass

    def makefile(self, mode):
        socket = self

        class Raw(io.RawIOBase):
            def readable(self):
                return True

            def readinto(self, buffer):
                data = socket.recv(len(buffer))
                buffer[: len(data)] = data
                return len(data)

        return io.BufferedReader(Raw(), buffer_size=64)

    def shutdown(self, how):
        pass


_STATUS = [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 100 Continue\r\n", b"HTTP/1.0 204 No Content\r\n",
           b"HTTP/1.1 304\r\n", b"HTTP/1.1 101 Switching\r\n", b"HTTP/1.1 2000 X\r\n", b"HTTP/2 200\r\n",
           b"HTTP/1.1 \xb2\xb2\xb2 X\r\n", b"ICY 200 OK\r\n", b"HTTP/1.1 200 OK\n", b"\r\n", b""]
_HEADER = [b"Content-Length: 5\r\n", b"Content-Length: 0\r\n", b"Content-Length: 5, 5\r\n", b"Content-Length: 5, 6\r\n",
           b"Content-Length: -1\r\n", b"Content-Length: \xb9\r\n", b"Content-Length: 99999999999999999999\r\n",
           b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding: gzip\r\n", b"Transfer-Encoding: gzip, chunked\r\n",
           b"Connection: close\r\n", b"X: \xff\xfe\r\n", b" Folded: x\r\n", b": empty\r\n", b"NoColon\r\n",
           b"Content-Type: text/event-stream\r\n", b"\r\n", b"\n"]
_BODY = [b"hello", b"5\r\nhello\r\n", b"0\r\n\r\n", b"0\r\nTrailer: x\r\n\r\n", b"ffffffffffffffffffff\r\n",
         b"5;ext=1\r\nab", b"z\r\n", b"\r\n", b"-1\r\n", b"5\r\nhelloXX", b"\xb2\r\n", b" 5 \r\n"]


# Strategies built once: building them per example costs more than the parsing.
_valid_status = st.sampled_from([b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 202 Accepted\r\n", b"HTTP/1.1 404 Not Found\r\n"])
_structured_response = st.builds(
    lambda interim, status, fields, end, body: b"".join(interim) + status + b"".join(fields) + end + b"".join(body),
    st.lists(st.just(b"HTTP/1.1 100 Continue\r\n\r\n"), max_size=12),
    _valid_status | st.sampled_from(_STATUS),
    st.lists(st.sampled_from(_HEADER) | st.binary(max_size=10), max_size=6),
    st.sampled_from([b"\r\n", b"\n", b""]),
    st.lists(st.sampled_from(_BODY) | st.binary(max_size=10), max_size=5),
)
http_responses = st.binary(max_size=300) | _structured_response | _structured_response
read_sizes = st.lists(st.integers(1, 70_000), min_size=1, max_size=3)


def _split(raw, cuts):
    bounds = [0, *sorted(min(cut, len(raw)) for cut in cuts), len(raw)]
    return [raw[a:b] for a, b in zip(bounds, bounds[1:])]


def _read_response(pieces, head_only, amounts):
    response = http11.Response(FakeSocket(pieces), head_only=head_only)
    response.begin()
    assert 100 <= response.status <= 999
    body = bytearray()
    for _ in range(10_000):  # a body from finite input ends; more reads mean a loop
        chunk = response.read1(amounts[len(body) % len(amounts)])
        if not chunk:
            break
        body += chunk
    else:
        pytest.fail("read1 never reached the end of a finite body")
    return bytes(body)


@fuzz(1000)
@given(http_responses, st.lists(st.integers(0, 400), max_size=6), st.booleans(), read_sizes)
def test_http11_response_any_bytes(raw, cuts, head_only, amounts):
    try:
        body = _read_response(_split(raw, cuts), head_only, amounts)
    except http11.ResponseError:
        return
    assert len(body) <= len(raw)


def test_http11_status_code_of_non_ascii_digits_is_a_response_error():
    with pytest.raises(http11.ResponseError):
        _read_response([b"HTTP/1.1 \xb2\xb2\xb2 OK\r\n\r\n"], False, [100])


def test_http11_content_length_of_5000_digits_is_a_response_error():
    with pytest.raises(http11.ResponseError):
        _read_response([b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n"], False, [100])


def test_http11_overlong_lines_are_response_errors():
    for raw in (b"HTTP/1.1 200 " + b"x" * 70_000 + b"\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n",
                b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 70_000 + b"\r\n"):
        with pytest.raises(http11.ResponseError):
            _read_response([raw], False, [65536])


# -- header values and x-mcp-header ---------------------------------------------------------


header_texts = (
    st.text(max_size=40)
    | st.binary(max_size=40).map(lambda b: b.decode("latin-1"))  # what the HTTP reader makes of any bytes
    | st.builds(lambda body: headers.SENTINEL_PREFIX + body + headers.SENTINEL_SUFFIX,
                st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_- \t\x00\xff",
                        max_size=24))
)


@fuzz(800)
@given(header_texts)
def test_header_value_decoding(value):
    try:
        decoded = headers.decode_header_value(value)
    except headers.InvalidHeaderValue as exc:
        assert isinstance(exc, McpError)
        return
    assert isinstance(decoded, str)
    assert headers.decode_header_value(headers.encode_header_value(decoded)) == decoded


_SCHEMA_KEYS = ["type", "properties", "items", "x-mcp-header", "anyOf", "$defs", "enum", "not", "a", "b"]
schema_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6)
    | st.sampled_from(["string", "integer", "boolean", "number", "null", "Region", "x y", ""]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(_SCHEMA_KEYS) | st.text(max_size=4), children, max_size=4),
    max_leaves=16,
)


@st.composite
def buried(draw):
    """A schema-like value under up to 3,000 levels of one keyword."""
    value = draw(schema_like)
    keyword = draw(st.sampled_from(["items", "properties", "not", "anyOf"]))
    for _ in range(draw(st.integers(0, 3000))):
        if keyword == "properties":
            value = {"type": "object", "properties": {"p": value}}
        elif keyword == "anyOf":
            value = {"anyOf": [value]}
        else:
            value = {keyword: value}
    return value


@fuzz(300)
@given(schema_like | buried())
def test_header_params_of_any_schema(schema):
    try:
        found = headers.header_params(schema)
    except headers.InvalidHeaderAnnotation as exc:
        assert len(str(exc)) < 50_000
        return
    assert all(isinstance(param, headers.HeaderParam) for param in found)


# -- WWW-Authenticate -------------------------------------------------------------------------


challenge_texts = st.text(max_size=80) | st.lists(st.sampled_from(
    ["Bearer", "DPoP", "Basic", " ", ",", ", ", "=", '"', '\\"', "\\", "realm", "scope", "error",
     "resource_metadata", '"https://x/prm"', '"a b"', "abc==", "token68/+", "\t", "\u00e9", "\x00"]),
    max_size=20).map("".join)


@fuzz(1200)
@given(challenge_texts)
def test_www_authenticate_never_raises(header):
    challenges = parse_challenges(header)
    for challenge in challenges:
        assert isinstance(challenge, Challenge)
        assert challenge.scheme and challenge.scheme == challenge.scheme.lower()
        assert all(isinstance(v, str) for v in challenge.params.values())


# -- tool definitions and output schemas ------------------------------------------------------


@fuzz(120)
@given(st.lists(st.dictionaries(st.sampled_from(["name", "inputSchema", "outputSchema", "title"]),
                                schema_like | buried(), max_size=4) | json_values, max_size=4))
def test_tools_from_wire_never_raises(items):
    from mcp_sync.types import tools_from_wire

    for tool in tools_from_wire(items):
        assert isinstance(tool, Tool) and isinstance(tool.name, str)
        for schema in (tool.input_schema, tool.output_schema):
            assert schema is None or schemas.nesting_depth(schema) <= schemas.MAX_SCHEMA_DEPTH


_KEYWORDS = ["$schema", "$id", "$ref", "$defs", "$anchor", "$dynamicRef", "$dynamicAnchor", "type", "enum", "const",
             "multipleOf", "maximum", "exclusiveMinimum", "minLength", "pattern", "items", "prefixItems", "contains",
             "minContains", "uniqueItems", "properties", "patternProperties", "additionalProperties", "propertyNames",
             "required", "dependentRequired", "dependentSchemas", "allOf", "anyOf", "oneOf", "not", "if", "then",
             "else", "unevaluatedItems", "unevaluatedProperties", "format", "definitions", "dependencies", "id"]
_SCHEMA_SCALARS = st.none() | st.booleans() | st.integers(-3, 10) | st.integers() | st.floats() | st.sampled_from([
    "#", "#/$defs/a", "#a", "a", "(", "[", "string", "object", "array", "integer", "http://[", "urn:x", "",
    "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-03/schema#", "date-time", "regex"])
output_schemas = st.dictionaries(st.sampled_from(_KEYWORDS), st.recursive(
    _SCHEMA_SCALARS,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(_KEYWORDS) | st.sampled_from(["a", "b"]), children, max_size=4),
    max_leaves=15,
), max_size=5)


@fuzz(200)
@given(output_schemas | buried().map(lambda schema: {"items": schema}), json_values)
def test_output_validation_of_any_schema_never_raises(schema, instance):
    problems = schemas.SchemaCache().errors(schema, instance)
    assert isinstance(problems, list) and all(isinstance(p, str) and len(p) < 1000 for p in problems)
