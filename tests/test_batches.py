"""JSON-RPC batches from the server (revision 2025-03-26 allows them).

A batch is one JSON array of responses, notifications and server requests;
the client routes its items one by one, on every transport (stdio: a line
holding an array; Streamable HTTP: a JSON body or an SSE event whose data is
an array). Invalid items are reported as any invalid message is (the channel
fails) once the valid ones have been routed; an empty batch, or one over
`jsonrpc.MAX_BATCH_ITEMS`, is invalid. The client answers a batched server
request with a message of its own (2025-03-26: implementations MAY send
batches, so need not), which the servers here record.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync.protocol import jsonrpc
from tests.helpers import wait_until

HERE = Path(__file__).parent
BATCHING = [sys.executable, str(HERE / "servers" / "batching.py")]
VERSION = "2025-03-26"
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}


def recorded(record):
    """The JSON lines the server received (its `batch N` notes left out)."""
    lines = [line.partition(" ")[2] for line in record.read_text().splitlines()]
    return [json.loads(line) for line in lines if not line.startswith("batch ")]


# -- jsonrpc.parse ------------------------------------------------------------------


def test_parse_returns_a_batch_as_a_list_and_one_message_as_a_dict():
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","method":"m"}') == {"jsonrpc": "2.0", "method": "m"}
    assert jsonrpc.parse('[{"jsonrpc":"2.0","method":"m"},7]') == [{"jsonrpc": "2.0", "method": "m"}, 7]


@pytest.mark.parametrize(("raw", "match"), [
    (b"[]", "empty JSON-RPC batch"),
    (b"[" + b",".join([b"{}"] * (jsonrpc.MAX_BATCH_ITEMS + 1)) + b"]", "at most 1000"),
    (b"42", "a JSON int"),
    (b"[1,", "not JSON"),
])
def test_parse_refuses(raw, match):
    with pytest.raises(mcp_sync.InvalidMessage, match=match):
        jsonrpc.parse(raw)


def test_a_batch_at_the_bound_parses():
    assert len(jsonrpc.parse("[" + ",".join(["{}"] * jsonrpc.MAX_BATCH_ITEMS) + "]")) == jsonrpc.MAX_BATCH_ITEMS


def test_decode_still_wants_one_message():
    # Callers that expect one message (an HTTP error body) keep refusing arrays.
    with pytest.raises(mcp_sync.InvalidMessage, match="a JSON list"):
        jsonrpc.decode(b'[{"jsonrpc":"2.0","method":"m"}]')


# -- stdio ------------------------------------------------------------------------------


def test_stdio_batched_answers_negotiated(tmp_path):
    # Every answer of this server is a batch: the probe's refusal, the
    # initialize result (a batch of one) and each tool's progress + response.
    record = tmp_path / "record"
    seen = []
    with mcp_sync.connect(BATCHING + ["--record", str(record)]) as client:
        assert client.protocol_version == VERSION
        result = client.call_tool("echo", {"text": "hi"}, progress=seen.append)
    assert result.text == "hi"
    assert [p.progress for p in seen] == [1]


def test_stdio_mixed_batch(tmp_path):
    # One batch: a roots/list request, a list_changed notification, progress,
    # a log message and the call's response. Each goes where it belongs.
    record = tmp_path / "record"
    changed = threading.Event()
    asked = []
    seen = []

    def roots(params):
        asked.append(params)
        return ROOTS

    with mcp_sync.connect(BATCHING + ["--record", str(record)], protocol=VERSION,
                          input_handlers={"roots": roots}) as client:
        client.on_notification(lambda n: changed.set(), methods=["notifications/tools/list_changed"])
        result = client.call_tool("mixed", {"text": "all of it"}, progress=seen.append)
        assert result.text == "all of it"
        assert [p.progress for p in seen] == [1]
        assert changed.wait(5)
        # The answer to the batched request goes out on its own (allowed:
        # 2025-03-26 lets implementations send batches, it does not require it).
        assert wait_until(lambda: any(m.get("id") == "s-1" for m in recorded(record)), timeout=5)
    assert len(asked) == 1
    assert [m for m in recorded(record) if m.get("id") == "s-1"] == [{"jsonrpc": "2.0", "id": "s-1", "result": ROOTS}]


@pytest.mark.parametrize(("tool", "index"), [("invalid", 1), ("invalid-first", 0)])
def test_stdio_invalid_item_keeps_the_valid_ones(tool, index):
    # [response, {"neither": ...}] or the other way round: the response
    # reaches its caller either way (valid items are routed first); the
    # invalid item then fails the channel, as any invalid message does.
    with mcp_sync.connect(BATCHING, protocol=VERSION, reconnect=False) as client:
        assert client.call_tool(tool, {"text": "kept"}).text == "kept"
        with pytest.raises(mcp_sync.InvalidMessage, match=rf"1 of them invalid: item {index}: not JSON-RPC 2.0"):
            client.call_tool("echo", {"text": "after"})


@pytest.mark.parametrize(("tool", "match"), [
    ("empty", r"empty JSON-RPC batch"),
    ("too-big", r"a JSON-RPC batch of 1001 messages; at most 1000"),
])
def test_stdio_invalid_batch_fails_the_channel(tool, match):
    with mcp_sync.connect(BATCHING, protocol=VERSION, reconnect=False) as client:
        with pytest.raises(mcp_sync.InvalidMessage, match=match):
            client.call_tool(tool, {})


def test_stdio_16_threads_batched_answers_reach_their_own_callers(tmp_path):
    # The server holds answers back until four wait, then sends them in one
    # batch: 16 concurrent calls get 4 batches of 4 mixed responses.
    record = tmp_path / "record"
    results = {}
    progress = {}
    barrier = threading.Barrier(16)
    with mcp_sync.connect(BATCHING + ["--record", str(record)], protocol=VERSION, timeout=10) as client:
        def call(n):
            barrier.wait(5)
            seen = []
            results[n] = client.call_tool("echo4", {"text": f"caller {n}"}, progress=seen.append).text
            progress[n] = [p.progress for p in seen]

        threads = [threading.Thread(target=call, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(15)
    assert results == {n: f"caller {n}" for n in range(16)}
    assert progress == {n: [1] for n in range(16)}
    notes = [line.split()[-1] for line in record.read_text().splitlines() if " batch " in line]
    assert notes == ["4"] * 4


# -- Streamable HTTP ---------------------------------------------------------------


class _BatchHTTPServer(ThreadingHTTPServer):
    """A 2025-03-26 Streamable HTTP server on loopback whose tools answer in
    batches, as a JSON body or as one SSE event; records every POST."""

    daemon_threads = True
    request_queue_size = 64  # 16 callers connect at once

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _BatchHandler)
        self.posts = []
        self.posted = threading.Condition()
        self.get_batch = False  # serve one batch on the first GET stream
        self.get_served = False

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"


def _progress(token):
    return {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1, "total": 1}}


class _BatchHandler(BaseHTTPRequestHandler):
    server: _BatchHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.posted:
            self.server.posts.append(message)
            self.server.posted.notify_all()
        if "method" not in message or "id" not in message:
            self._send(202, None, b"")
            return
        request_id = message["id"]
        params = message.get("params") or {}
        if message["method"] == "initialize":
            body = json.dumps([{"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": VERSION, "capabilities": {"tools": {}},
                "serverInfo": {"name": "batching-http", "version": "1"}}}]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Mcp-Session-Id", "batch-session")  # a session, so the client opens a GET stream
            self.end_headers()
            self.wfile.write(body)
            return
        name = params.get("name")
        token = (params.get("_meta") or {}).get("progressToken")
        text = (params.get("arguments") or {}).get("text", "")
        answer = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}
        other = {"jsonrpc": "2.0", "id": 987654, "result": {"content": []}}  # another request's: dropped
        if name == "json":
            self._json([_progress(token), answer] if token is not None else [other, answer])
        elif name == "sse":
            self._sse([[_progress(token)] if token is not None else [other], [answer]])
        elif name == "sse-mixed":
            self._sse([[{"jsonrpc": "2.0", "id": "s-1", "method": "roots/list"},
                        {"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "info", "data": "batched"}},
                        _progress(token), answer]])
        elif name == "sse-invalid":
            self._sse([[answer, "not a message"]])
        elif name == "json-empty":
            self._send(200, "application/json", b"[]")
        else:
            self._json({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": name}})

    def _json(self, value):
        self._send(200, "application/json", json.dumps(value).encode())

    def _sse(self, batches):
        body = b"".join(b"event: message\ndata: " + json.dumps(b).encode() + b"\n\n" for b in batches)
        self._send(200, "text/event-stream", body)

    def _send(self, status, content_type, body):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        # The first GET stream carries one batch related to no request (a
        # list_changed notification and a roots/list request), then ends;
        # later GETs get 405, so the client stops reopening it.
        with self.server.posted:
            first, self.server.get_served = not self.server.get_served, True
        if not first or not self.server.get_batch:
            self._send(405, None, b"")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")  # the stream ends when the connection does
        self.end_headers()
        self.wfile.flush()
        # The event waits until the client makes a call, so its callbacks are in place.
        with self.server.posted:
            self.server.posted.wait_for(lambda: any(m.get("method") == "tools/call" for m in self.server.posts), 5)
        batch = [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
                 {"jsonrpc": "2.0", "id": "g-1", "method": "roots/list"}]
        self.wfile.write(b"event: message\ndata: " + json.dumps(batch).encode() + b"\n\n")
        self.close_connection = True

    def do_DELETE(self):
        self._send(405, None, b"")


@pytest.fixture
def batch_http():
    server = _BatchHTTPServer()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("tool", ["json", "sse"])
@pytest.mark.parametrize("with_progress", [True, False])
def test_http_batched_answer(batch_http, tool, with_progress):
    # A JSON body that is an array, or SSE events whose data are arrays;
    # without progress the batch carries another request's response, which
    # is dropped (never delivered to another caller).
    seen = []
    options = {"progress": seen.append} if with_progress else {}
    with mcp_sync.connect(batch_http.url, protocol=VERSION) as client:
        assert client.call_tool(tool, {"text": tool}, **options).text == tool
    assert [p.progress for p in seen] == ([1] if with_progress else [])


def test_http_sse_mixed_batch(batch_http):
    asked = []
    seen = []

    def roots(params):
        asked.append(threading.get_ident())
        return ROOTS

    with mcp_sync.connect(batch_http.url, protocol=VERSION, input_handlers={"roots": roots}) as client:
        assert client.call_tool("sse-mixed", {"text": "mixed"}, progress=seen.append).text == "mixed"
        with batch_http.posted:
            assert batch_http.posted.wait_for(
                lambda: any(m.get("id") == "s-1" for m in batch_http.posts), timeout=5)
    # The roots request came on the call's own stream: the caller answered it
    # on its own thread, before taking the response that followed it.
    assert asked == [threading.get_ident()]
    assert [p.progress for p in seen] == [1]
    answer = next(m for m in batch_http.posts if m.get("id") == "s-1")
    assert answer == {"jsonrpc": "2.0", "id": "s-1", "result": ROOTS}


def test_http_get_stream_batch(batch_http):
    # A batch on the standalone GET stream: the notification goes to the
    # notification callbacks, the request (related to no call) to the
    # client's handlers, whose answer is POSTed on its own.
    batch_http.get_batch = True
    changed = threading.Event()
    with mcp_sync.connect(batch_http.url, protocol=VERSION, input_handlers={"roots": lambda params: ROOTS}) as client:
        client.on_notification(lambda n: changed.set(), methods=["notifications/tools/list_changed"])
        assert client.call_tool("json", {"text": "go"}).text == "go"  # releases the GET stream's batch
        with batch_http.posted:
            assert batch_http.posted.wait_for(
                lambda: any(m.get("id") == "g-1" for m in batch_http.posts), timeout=5)
        assert changed.wait(5)
    assert next(m for m in batch_http.posts if m.get("id") == "g-1") == {"jsonrpc": "2.0", "id": "g-1",
                                                                          "result": ROOTS}


def test_http_invalid_item_keeps_the_valid_ones(batch_http):
    with mcp_sync.connect(batch_http.url, protocol=VERSION, reconnect=False) as client:
        assert client.call_tool("sse-invalid", {"text": "kept"}).text == "kept"
        with pytest.raises(mcp_sync.InvalidMessage, match=r"item 1: not a JSON object: str"):
            client.call_tool("json", {"text": "after"})


def test_http_empty_batch(batch_http):
    with mcp_sync.connect(batch_http.url, protocol=VERSION) as client:
        with pytest.raises(mcp_sync.InvalidMessage, match="empty JSON-RPC batch"):
            client.call_tool("json-empty", {})
        # An HTTP answer fails only its own request: the next call works.
        assert client.call_tool("json", {"text": "still"}).text == "still"


def test_http_16_threads(batch_http):
    results = {}
    barrier = threading.Barrier(16)
    with mcp_sync.connect(batch_http.url, protocol=VERSION, timeout=10) as client:
        def call(n):
            barrier.wait(5)
            seen = []
            tool = "json" if n % 2 else "sse"
            results[n] = (client.call_tool(tool, {"text": f"caller {n}"}, progress=seen.append).text,
                          [p.progress for p in seen])

        threads = [threading.Thread(target=call, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(15)
    assert results == {n: (f"caller {n}", [1]) for n in range(16)}
