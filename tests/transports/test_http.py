"""The Streamable HTTP transport against real local HTTP servers.

Most tests use `mcp_sync.testing.HTTPServer`, which validates what it
receives like a strict server and records every request for the asserts.
"""

import gc
import http.server
import json
import logging
import ssl
import threading

import pytest

import mcp_sync
from mcp_sync import HTTP
from mcp_sync.testing import HTTPServer, RpcError, Server, demo_server
from tests.helpers import SLACK
from tests.servers.canned import Canned

STATELESS = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18")


def called(httpd, tool):
    """Whether the server has received a call of `tool`."""
    return any((r.json or {}).get("params", {}).get("name") == tool for r in httpd.requests)


def open_fds():
    import os

    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass  # the descriptor listdir itself used
    return found


def posts(httpd, method=None):
    return [r for r in httpd.requests if r.method == "POST" and (method is None or (r.json or {}).get("method") == method)]


# -- the stateless era ---------------------------------------------------------------------


def test_every_request_carries_the_standard_headers(serve):
    server = demo_server()

    @server.tool(name="météo")
    def meteo(args, ctx):
        return "sunny"

    @server.resource("demo://ünïcode", "unicode")
    def unicode_resource():
        return "ü"

    httpd = serve(server)
    with mcp_sync.connect(httpd.url) as client:
        client.list_tools()
        client.call_tool("echo", {"text": "x"})
        assert client.call_tool("météo", {}).text == "sunny"
        assert client.read_resource("demo://ünïcode").text == "ü"
        client.get_prompt("greet", {"name": "Ada"})
    for request in posts(httpd):
        body = request.json
        assert request.headers["Accept"] == "application/json, text/event-stream"
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["MCP-Protocol-Version"] == body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        assert request.headers["Mcp-Method"] == body["method"]
        assert request.headers.get("Mcp-Session-Id") is None
    names = {(r.json["method"], r.headers.get("Mcp-Name")) for r in posts(httpd)}
    assert ("tools/call", "echo") in names
    assert ("tools/call", "=?base64?bcOpdMOpbw==?=") in names
    assert ("resources/read", "=?base64?ZGVtbzovL8O8bsOvY29kZQ==?=") in names
    assert ("prompts/get", "greet") in names
    assert ("tools/list", None) in names


@pytest.mark.parametrize("mode", ["json", "sse", "auto"])
def test_json_and_sse_answers_with_progress_on_the_calling_thread(serve, mode):
    httpd = serve(response_mode=mode)
    with mcp_sync.connect(httpd.url) as client:
        seen = []
        result = client.call_tool("countdown", {"steps": 3, "delay": 0},
                                  progress=lambda p: seen.append((p.progress, threading.current_thread())))
        assert result.text == "liftoff"
        assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
    if mode == "json":
        assert seen == []  # a JSON answer has no room for progress
    else:
        assert [p for p, _ in seen] == [1, 2, 3]
        assert {t for _, t in seen} == {threading.current_thread()}


def test_log_messages_on_the_stream_reach_logging(serve, caplog):
    httpd = serve()
    with mcp_sync.connect(httpd.url, log_level="info") as client:
        with caplog.at_level(logging.INFO, logger="mcp_sync.server"):
            client.call_tool("log", {"level": "error", "message": "over http"})
    assert [r.getMessage() for r in caplog.records if r.name.startswith("mcp_sync.server") and r.name != "mcp_sync.server.stderr"][0].endswith("over http")


def test_a_404_with_a_json_rpc_body_is_method_not_found(serve):
    httpd = serve()
    with mcp_sync.connect(httpd.url) as client:
        with pytest.raises(mcp_sync.MethodNotFound):
            client.request("vendor/nothing", {})
    assert any(r.json and r.json.get("method") == "vendor/nothing" for r in httpd.requests)


def test_a_404_without_a_json_rpc_body_is_an_http_error(serve):
    canned = Canned()
    httpd = serve(gate=canned)
    with mcp_sync.connect(httpd.url) as client:
        canned.add(404, b"<html>not here</html>")
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            client.call_tool("echo", {"text": "x"})
        assert info.value.status == 404 and "not here" in info.value.body
        assert client.call_tool("echo", {"text": "still fine"}).text == "still fine"


@pytest.mark.parametrize("status,body,content_type,exc", [
    (200, b"not json", "application/json", mcp_sync.InvalidMessage),
    (200, b'{"jsonrpc": "2.0", "id": 999999, "result": {}}', "application/json", mcp_sync.InvalidMessage),
    (200, b"<html></html>", "text/html", mcp_sync.InvalidMessage),
    (202, b"", "application/json", mcp_sync.HTTPStatusError),
    (500, b"boom", "text/plain", mcp_sync.HTTPStatusError),
])
def test_bad_answers_fail_only_that_call(serve, status, body, content_type, exc):
    canned = Canned()
    httpd = serve(gate=canned)
    with mcp_sync.connect(httpd.url) as client:
        canned.add(status, body, {"Content-Type": content_type})
        with pytest.raises(exc):
            client.call_tool("echo", {"text": "x"})
        assert client.call_tool("echo", {"text": "next"}).text == "next"


def test_timeout_closes_the_stream_and_the_server_sees_the_cancellation(serve):
    server = Server()
    cancelled = threading.Event()

    @server.tool()
    def hang(args, ctx):
        ctx.progress(1, 2)  # makes the answer an SSE stream
        if ctx.cancelled.wait(30):
            cancelled.set()
        return "late"

    httpd = serve(server)
    with mcp_sync.connect(httpd.url) as client:
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("hang", {}, timeout=0.5, progress=lambda p: None)
        assert cancelled.wait(10)
    # Stateless HTTP cancels by closing the stream only: no notification is POSTed.
    assert not posts(httpd, "notifications/cancelled")


def test_close_fails_pending_calls_at_once_and_leaves_nothing(serve):
    # Clients other tests dropped unclosed are finalized now, not while this
    # test counts descriptors (a finalizer opens and closes sockets of its own).
    gc.collect()
    httpd = serve()
    with mcp_sync.connect(httpd.url) as warm_up:  # the server's own lazily made descriptors exist now
        warm_up.list_tools()
    assert httpd.wait_for(lambda: httpd.connections == 0, 10)
    fds_before = open_fds()
    client = mcp_sync.connect(httpd.url)
    errors = []
    started = threading.Event()

    def call():
        started.set()
        try:
            client.call_tool("sleep", {"seconds": 30}, timeout=60)
        except mcp_sync.ConnectionClosed as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    started.wait()
    assert httpd.wait_for(lambda: called(httpd, "sleep"), 10)
    client.close()
    caller.join(timeout=10)
    assert not caller.is_alive() and len(errors) == 1
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-sync")]
    # Once the server has seen every connection close, no descriptor is left.
    assert httpd.wait_for(lambda: httpd.connections == 0, 10)
    after = open_fds()
    assert set(after) <= set(fds_before), {fd: after[fd] for fd in set(after) - set(fds_before)}


def test_response_size_limit_for_json_and_for_sse_events(serve):
    httpd = serve(response_mode="json")
    with mcp_sync.connect(httpd.url, max_response_bytes=4000) as client:
        assert client.call_tool("echo", {"text": "y" * 1000}).text == "y" * 1000
        with pytest.raises(mcp_sync.MessageTooLarge) as info:
            client.call_tool("echo", {"text": "y" * 20000})
        assert info.value.limit == 4000
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"
    sse = serve(response_mode="sse")
    with mcp_sync.connect(sse.url, max_response_bytes=4000) as client:
        with pytest.raises(mcp_sync.MessageTooLarge):
            client.call_tool("echo", {"text": "y" * 20000})


def test_user_headers_are_sent_and_checked(serve):
    httpd = serve()
    with mcp_sync.connect(httpd.url, headers={"X-Tenant": "acme"}) as client:
        client.list_tools()
    assert {r.headers["X-Tenant"] for r in httpd.requests} == {"acme"}
    for bad in ({"Mcp-Method": "x"}, {"accept": "x"}, {"Mcp-Param-Region": "x"}, {"X-Evil": "a\r\nb"},
                {"X-Nul": "a\0b"}, {"Bad Name": "x"}):
        with pytest.raises(ValueError):
            HTTP(httpd.url, headers=bad)


def test_http_options_only_for_url_targets():
    with pytest.raises(TypeError):
        mcp_sync.connect(demo_server(), headers={"X-A": "b"})
    with pytest.raises(ValueError):
        HTTP("ftp://example.com/mcp")
    with pytest.raises(ValueError):
        HTTP("http://127.0.0.1/mcp", pool_size=0)


@pytest.mark.parametrize("target", [HTTP, mcp_sync.SSE])
@pytest.mark.parametrize("options,exc,says", [
    # Before: AttributeError ('str' object has no attribute 'items').
    ({"headers": "X-A: b"}, TypeError, "headers must be a mapping"),
    ({"headers": [("X-A", "b")]}, TypeError, "headers must be a mapping"),  # before: taken as no headers
    ({"headers": 0}, TypeError, "headers must be a mapping"),
    # Before: anything, found out when a stream broke.
    ({"max_resume_attempts": "3"}, ValueError, "max_resume_attempts must be an integer"),
    ({"max_resume_attempts": -1}, ValueError, "max_resume_attempts"),
    ({"max_resume_attempts": True}, ValueError, "max_resume_attempts"),
    ({"connect_timeout": float("nan")}, ValueError, "connect_timeout must be a positive, finite number"),
    ({"connect_timeout": float("inf")}, ValueError, "connect_timeout"),
    ({"session_close_timeout": float("nan")}, ValueError, "session_close_timeout"),
    # A switch is True or False: "false" is truthy, and None or 0 may mean "not given".
    ({"trust_env": "false"}, TypeError, "trust_env must be True or False, not 'false'"),
    ({"compress": 1}, TypeError, "compress must be True or False, not 1"),
    ({"follow_redirects": None}, TypeError, "follow_redirects must be True or False, not None"),
    ({"sse_fallback": "no"}, TypeError, "sse_fallback must be True or False, not 'no'"),
])
def test_bad_http_options_are_refused_when_the_target_is_made(target, options, exc, says):
    with pytest.raises(exc, match=says):
        target("http://127.0.0.1/mcp", **options)


def test_zero_resume_attempts_is_a_setting():
    assert HTTP("http://127.0.0.1/mcp", max_resume_attempts=0).max_resume_attempts == 0


# -- x-mcp-header ------------------------------------------------------------------------------------


def region_server():
    server = Server()
    schema = {"type": "object", "properties": {
        "region": {"type": ["string", "null"], "x-mcp-header": "Region"},
        "opts": {"type": "object", "properties": {"verbose": {"type": "boolean", "x-mcp-header": "Verbose"}}},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "query": {"type": "string"},
    }}

    @server.tool(input_schema=schema)
    def run_query(args, ctx):
        return json.dumps(args, sort_keys=True)

    @server.tool(input_schema={"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}})
    def broken_number(args, ctx):
        return "never listed"

    @server.tool(input_schema={"type": "object", "properties": {
        "a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "string", "x-mcp-header": "dup"}}})
    def broken_duplicate(args, ctx):
        return "never listed"

    return server


def test_annotated_arguments_are_mirrored_into_headers(serve):
    httpd = serve(region_server())
    with mcp_sync.connect(httpd.url) as client:
        client.list_tools()
        client.call_tool("run_query", {"region": "Zürich ", "opts": {"verbose": False}, "count": 7, "query": "q"})
        client.call_tool("run_query", {"region": None, "query": "q"})
    calls = posts(httpd, "tools/call")
    assert calls[0].headers["Mcp-Param-Region"] == "=?base64?WsO8cmljaCA=?="
    assert calls[0].headers["Mcp-Param-Verbose"] == "false"
    assert calls[0].headers["Mcp-Param-Count"] == "7"
    assert calls[1].headers.get("Mcp-Param-Region") is None
    assert calls[1].headers.get("Mcp-Param-Count") is None


def test_tools_with_invalid_annotations_are_left_out_with_a_warning(serve, caplog):
    httpd = serve(region_server())
    with mcp_sync.connect(httpd.url) as client:
        with caplog.at_level(logging.WARNING, logger="mcp_sync.client"):
            names = [t.name for t in client.list_tools()]
    assert names == ["run_query"]
    warnings = " ".join(r.getMessage() for r in caplog.records)
    assert "broken_number" in warnings and "broken_duplicate" in warnings
    # Over stdio the annotations are not used, so nothing is left out.
    with mcp_sync.connect(region_server()) as client:
        assert len(client.list_tools()) == 3


def test_header_mismatch_lists_the_tools_again_and_retries_once(serve):
    server = Server()

    @server.tool(input_schema={"type": "object", "properties": {"region": {"type": "string"}}})
    def place(args, ctx):
        return args.get("region", "")

    httpd = serve(server)
    with mcp_sync.connect(httpd.url) as client:
        client.list_tools()

        # The server's definition changes: region is now mirrored into a header.
        @server.tool(name="place", input_schema={"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}})
        def place_v2(args, ctx):
            return "v2:" + args.get("region", "")

        assert client.call_tool("place", {"region": "eu"}).text == "v2:eu"
    methods = [(r.json["method"], r.headers.get("Mcp-Param-Region")) for r in posts(httpd)]
    assert methods[-3:] == [("tools/call", None), ("tools/list", None), ("tools/call", "eu")]


def test_header_mismatch_twice_is_an_error(serve):
    server = Server()

    @server.tool()
    def refuse(args, ctx):
        raise RpcError(-32020, "Header mismatch")

    httpd = serve(server)
    with mcp_sync.connect(httpd.url) as client:
        with pytest.raises(mcp_sync.HeaderMismatch):
            client.call_tool("refuse", {})
    assert [r.json["method"] for r in posts(httpd)][-3:] == ["tools/call", "tools/list", "tools/call"]


# -- era detection -------------------------------------------------------------------------------------


def test_a_legacy_server_is_detected_from_its_400_and_initialized(serve):
    httpd = serve(demo_server(versions=list(LEGACY)))
    with mcp_sync.connect(httpd.url) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.call_tool("echo", {"text": "legacy"}).text == "legacy"
    methods = [r.json["method"] for r in posts(httpd) if r.json]
    assert methods[:3] == ["server/discover", "initialize", "notifications/initialized"]


@pytest.mark.parametrize("status,body,exc", [
    (401, b"", mcp_sync.AuthenticationError),
    (403, b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"forbidden"}}', mcp_sync.AuthenticationError),
    (500, b"oops", mcp_sync.HTTPStatusError),
    (503, b"", mcp_sync.HTTPStatusError),
])
def test_auth_and_server_failures_are_not_era_evidence(serve, status, body, exc):
    canned = Canned()
    httpd = serve(gate=canned)
    canned.add(status, body)
    with pytest.raises(exc) as info:
        mcp_sync.connect(httpd.url)
    assert info.value.status == status
    assert not posts(httpd, "initialize")


@pytest.mark.parametrize("body", [b"", b"Bad Request", b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"no session"}}'])
def test_any_other_4xx_means_initialize(serve, body):
    canned = Canned()
    httpd = serve(gate=canned)
    canned.add(400, body)
    with mcp_sync.connect(httpd.url) as client:
        assert client.protocol_version == "2025-11-25"


def test_a_modern_400_keeps_the_client_modern_and_retries(serve):
    canned = Canned()
    httpd = serve(gate=canned)
    canned.add(400, json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": -32022, "message": "Unsupported protocol version",
        "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"}}}))
    with mcp_sync.connect(httpd.url) as client:
        assert client.protocol_version == "2026-07-28"
    assert not posts(httpd, "initialize")
    assert len(posts(httpd, "server/discover")) == 2


def test_a_modern_400_with_no_shared_version_is_an_error(serve):
    canned = Canned()
    httpd = serve(gate=canned)
    canned.add(400, json.dumps({"jsonrpc": "2.0", "error": {
        "code": -32022, "message": "Unsupported", "data": {"supported": ["2099-01-01"]}}}))
    with pytest.raises(mcp_sync.VersionNegotiationError):
        mcp_sync.connect(httpd.url)
    assert not posts(httpd, "initialize")


def test_an_unreachable_server_is_a_connect_error():
    with socket_port() as port:
        pass
    with pytest.raises(mcp_sync.ConnectError):
        mcp_sync.connect(f"http://127.0.0.1:{port}/mcp", timeout=5)


class socket_port:
    """A port that nothing listens on (bound, then released)."""

    def __enter__(self):
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


# -- the initialize era: sessions, GET stream, resumption -------------------------------------------------


@pytest.mark.parametrize("version", LEGACY)
def test_session_headers_get_stream_and_delete(serve, version):
    httpd = serve()
    with mcp_sync.connect(httpd.url, protocol=version) as client:
        session = client.session_id
        assert session and httpd.sessions == 1
        assert all(r.headers.get("mcp-session-id") == session for r in httpd.requests[1:])
        client.call_tool("echo", {"text": "x"})
        client.ping()
        assert httpd.wait_for(lambda: any(r.method == "GET" for r in httpd.requests), 10)
    later = [r for r in httpd.requests if not (r.json or {}).get("method") == "initialize"]
    for request in later:
        assert request.headers["Mcp-Session-Id"] == session
        assert request.headers["MCP-Protocol-Version"] == version
    assert [r.method for r in httpd.requests][-1] == "DELETE"
    assert httpd.sessions == 0


def test_server_messages_on_the_get_stream_reach_the_client_log_thread(serve):
    seen = []
    arrived = threading.Event()

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append((record.getMessage(), record.threadName))
            arrived.set()

    handler = Catch()
    logger = logging.getLogger("mcp_sync.server")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    httpd = serve()
    try:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25"):
            assert httpd.wait_for(lambda: any(r.method == "GET" for r in httpd.requests), 10)
            assert httpd.wait_for(lambda: httpd.notify("notifications/message", {"level": "warning", "data": "pushed"}) == 1, 10)
            assert arrived.wait(10)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    # It came for no call, so the connection's log thread handled it (never the GET reader).
    assert seen == [("pushed", "mcp-sync-log-1")]


def test_no_get_stream_when_the_server_offers_none(serve):
    httpd = serve(get_stream=False)
    with mcp_sync.connect(httpd.url, protocol="2025-11-25") as client:
        assert httpd.wait_for(lambda: any(r.method == "GET" for r in httpd.requests), 10)
        client.call_tool("echo", {"text": "x"})
    assert len([r for r in httpd.requests if r.method == "GET"]) == 1


def test_legacy_cancellation_sends_the_notification_too(serve):
    server = Server()
    cancelled = threading.Event()

    @server.tool()
    def hang(args, ctx):
        if ctx.cancelled.wait(30):
            cancelled.set()
        return "late"

    httpd = serve(server)
    with mcp_sync.connect(httpd.url, protocol="2025-11-25") as client:
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("hang", {}, timeout=0.3)
        assert cancelled.wait(10)
    assert posts(httpd, "notifications/cancelled")


def test_an_expired_session_is_renewed_once_for_all_callers(serve):
    httpd = serve()
    with mcp_sync.connect(httpd.url, protocol="2025-11-25") as client:
        first = client.session_id
        httpd.expire_sessions()
        errors, results = [], []

        def call(n):
            try:
                results.append(client.call_tool("echo", {"text": str(n)}).text == str(n))
            except Exception as exc:
                errors.append(exc)

        pool = [threading.Thread(target=call, args=(n,)) for n in range(8)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=60)
        assert errors == [] and results == [True] * 8
        assert client.session_id not in (None, first)
    assert len(posts(httpd, "initialize")) == 2


class AlwaysExpired(http.server.BaseHTTPRequestHandler):
    """A server whose sessions are gone at once: initialize works, then 404."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("method") == "initialize":
            payload = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Mcp-Session-Id", "s-" + str(body["id"]))
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())
        elif "id" not in body:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_DELETE = do_GET

    def log_message(self, *args):
        pass


def test_a_second_404_is_an_error():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), AlwaysExpired)
    thread = threading.Thread(target=httpd.serve_forever)
    thread.start()
    try:
        with mcp_sync.connect(f"http://127.0.0.1:{httpd.server_address[1]}/mcp", protocol="2025-11-25") as client:
            with pytest.raises(mcp_sync.SessionExpired) as info:
                client.call_tool("echo", {})
            assert info.value.status == 404
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_broken_stream_is_resumed_with_last_event_id(serve):
    httpd = serve(sse_ids=True, retry_ms=100, response_mode="sse")
    with mcp_sync.connect(httpd.url, protocol="2025-11-25") as client:
        httpd.drop_after_first_event()
        assert client.call_tool("echo", {"text": "resumed"}).text == "resumed"
    resumes = [r for r in httpd.requests if r.method == "GET" and r.headers.get("Last-Event-ID")]
    assert len(resumes) == 1


def test_a_servers_retry_hint_is_bounded_by_the_reconnect_policy(serve):
    # The server asks to be left alone for an hour before the stream is
    # resumed; the client waits no longer than its own policy's ceiling.
    httpd = serve(sse_ids=True, retry_ms=3_600_000, response_mode="sse")
    with mcp_sync.connect(httpd.url, protocol="2025-11-25", timeout=20,
                          reconnect=mcp_sync.Reconnect(initial_delay=0.1, max_delay=0.2)) as client:
        httpd.drop_after_first_event()
        assert client.call_tool("echo", {"text": "soon"}).text == "soon"
    resumes = [r for r in httpd.requests if r.method == "GET" and r.headers.get("Last-Event-ID")]
    assert len(resumes) == 1


# -- auth -----------------------------------------------------------------------------------------------------


def test_a_token_is_sent_as_bearer(serve):
    httpd = serve()
    with mcp_sync.connect(httpd.url, auth="s3cret") as client:
        client.list_tools()
    assert {r.headers["Authorization"] for r in httpd.requests} == {"Bearer s3cret"}


def test_a_token_provider_that_fails_on_a_401_is_named_in_the_error(serve):
    # Its exception was logged and the call failed with the server's bare
    # 401 (AuthenticationError: authentication required or refused).
    class Provider:
        def token(self):
            return "old"

        def refresh(self, challenge):
            raise OverflowError("int too large to convert to float")

    canned = Canned()
    httpd = serve(gate=canned)
    with mcp_sync.connect(httpd.url, auth=Provider()) as client:
        canned.add(401, b"", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        with pytest.raises(mcp_sync.AuthorizationError,
                           match="the token provider failed on the server's HTTP 401: OverflowError: int too large"):
            client.call_tool("echo", {"text": "x"})


def test_a_401_refreshes_the_token_once_and_retries(serve):
    class Provider:
        def __init__(self):
            self.current, self.challenges = "old", []

        def token(self):
            return self.current

        def refresh(self, challenge):
            self.challenges.append(challenge)
            self.current = "new"
            return self.current

    provider = Provider()
    canned = Canned()
    httpd = serve(gate=canned)
    with mcp_sync.connect(httpd.url, auth=provider) as client:
        canned.add(401, b"", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        assert client.call_tool("echo", {"text": "after refresh"}).text == "after refresh"
    assert provider.challenges == ['Bearer error="invalid_token"']
    calls = posts(httpd, "tools/call")
    assert [r.headers["Authorization"] for r in calls] == ["Bearer old", "Bearer new"]


def test_a_401_without_a_refresh_fails_with_the_challenge(serve):
    canned = Canned()
    httpd = serve(gate=canned)
    with mcp_sync.connect(httpd.url, auth=lambda: None) as client:
        canned.add(401, b"", {"WWW-Authenticate": 'Bearer resource_metadata="x"'}, times=2)
        with pytest.raises(mcp_sync.AuthenticationError) as info:
            client.call_tool("echo", {"text": "x"})
    assert info.value.www_authenticate == 'Bearer resource_metadata="x"'


def test_bad_auth_values():
    for bad in (42, "", "a\nb"):
        with pytest.raises((TypeError, ValueError)):
            HTTP("http://127.0.0.1/mcp", auth=bad)


# -- TLS -------------------------------------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path):
    trustme = pytest.importorskip("trustme")  # in the test extra; imported lazily for speed
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return server_context, str(ca_file)


def test_https_with_a_private_ca(serve, tls):
    server_context, ca_file = tls
    httpd = serve(ssl_context=server_context)
    assert httpd.url.startswith("https://")
    with mcp_sync.connect(httpd.url, verify=ca_file) as client:
        assert client.call_tool("echo", {"text": "secure"}).text == "secure"
    with pytest.raises(mcp_sync.ConnectError, match="(?i)certificate"):
        mcp_sync.connect(httpd.url, timeout=5)
    with mcp_sync.connect(httpd.url, verify=False) as client:
        assert client.call_tool("echo", {"text": "unverified"}).text == "unverified"


def test_plain_http_to_an_https_server_says_to_try_https(serve, tls):
    # Python's TLS server resets a plain-HTTP request: the error said only
    # "Connection reset by peer".
    server_context, _ = tls
    httpd = serve(ssl_context=server_context)
    with pytest.raises(mcp_sync.ConnectError) as caught:
        mcp_sync.connect(httpd.url.replace("https://", "http://"), timeout=10)
    assert "if it speaks HTTPS, try https://" in str(caught.value)


class _NotHttpServer:
    """A TCP server on loopback that reads a request head and then, instead
    of answering: sends a TLS alert record ("alert"), closes ("close"), or
    resets the connection ("reset"), as TLS servers of several kinds do."""

    def __init__(self, how):
        import socket

        self.how = how
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import socket
        import struct

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if self.how == "alert":
                    conn.sendall(b"\x15\x03\x01\x00\x02\x02\x46")  # fatal: protocol_version
                elif self.how == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def close(self):
        self.sock.close()
        self.thread.join(10)


@pytest.mark.parametrize("how, says", [
    ("alert", "the server answered in TLS, not plain HTTP (it speaks HTTPS: try https://)"),
    ("close", "the server closed the connection without answering (the server never answered: "
              "if it speaks HTTPS, try https://)"),
    ("reset", "(the server never answered: if it speaks HTTPS, try https://)"),
])
def test_a_server_answering_plain_http_with_tls_or_nothing_says_to_try_https(how, says):
    server = _NotHttpServer(how)
    try:
        with pytest.raises(mcp_sync.ConnectError) as caught:
            mcp_sync.connect(server.url, protocol="2026-07-28", timeout=10)
        assert says in str(caught.value)
    finally:
        server.close()


# -- many threads ------------------------------------------------------------------------------------------------


def test_64_threads_x_200_calls_over_http(serve, no_leaks_after):
    import time

    httpd = serve()
    started = time.monotonic()
    errors, counts = [], [0] * 64
    # The subject is that every answer reaches its own caller. The test
    # server starts a session and a worker thread per stateless request, so
    # on a loaded two-core machine a call can queue behind thread starts for
    # more than the default 30 s (8 to 16 of the 12,800 calls, with the
    # client as it was before too): the client-level timeout is made long
    # enough for that, and a call that never gets its answer still fails.
    with mcp_sync.connect(httpd.url, pool_size=16, timeout=120) as client:
        barrier = threading.Barrier(64)

        def work(n):
            barrier.wait()
            try:
                for i in range(200):
                    text = f"{n}:{i}"
                    got = client.call_tool("echo", {"text": text}).text
                    if got != text:
                        errors.append((text, got))
                    counts[n] += 1
            except Exception as exc:
                errors.append(exc)

        pool = [threading.Thread(target=work, args=(n,)) for n in range(64)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=600)
        assert not any(t.is_alive() for t in pool)
    assert errors == [] and counts == [200] * 64
    elapsed = time.monotonic() - started
    print(f"\n12800 calls from 64 threads over HTTP in {elapsed:.1f} s ({12800 / elapsed:.0f} calls/s)")


@pytest.fixture
def no_leaks_after():
    """Threads the client started are gone after close (the server's are the fixture's)."""
    yield
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-sync")]


def test_a_json_answer_is_read_on_the_calling_thread(serve):
    httpd = serve()
    with mcp_sync.connect(httpd.url) as client:
        for i in range(20):
            assert client.call_tool("echo", {"text": f"t{i}"}).text == f"t{i}"
        # No exchange thread was needed: every answer was JSON.
        assert not [t for t in threading.enumerate() if t.name.startswith("mcp-sync-http")]


def test_a_late_json_answer_times_out_at_the_deadline_and_the_client_goes_on(serve):
    import time

    httpd = serve()
    with mcp_sync.connect(httpd.url) as client:
        started = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("sleep", {"seconds": 5}, timeout=0.5)
        assert time.monotonic() - started < 4  # the blocked read was bounded by the deadline
        assert client.call_tool("echo", {"text": "after"}).text == "after"


def test_a_call_waiting_for_a_free_connection_times_out_at_its_deadline(serve):
    import time

    httpd = serve()
    with mcp_sync.connect(httpd.url, pool_size=1) as client:
        holder = threading.Thread(target=lambda: client.call_tool("sleep", {"seconds": 2}, timeout=10))
        holder.start()
        assert httpd.wait_for(lambda: called(httpd, "sleep"), 10)
        started = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("echo", {"text": "queued"}, timeout=0.3)
        assert time.monotonic() - started < 0.3 + SLACK  # not after the 2 s call
        holder.join(timeout=10)
        assert not holder.is_alive()
        assert client.call_tool("echo", {"text": "free"}).text == "free"


@pytest.mark.parametrize("body, lost", [
    ('{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}',
     True),
    ("Session not found", True),
    ("Invalid or expired session", True),
    ("unknown session", True),
    ('{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}', False),
    ("Bad request: the session field is required in params", False),
    ("Unknown tool: create_session", False),
    ("Invalid params: session_name must be a string", False),
    ("session_id parameter is invalid", False),
    ("", False),
])
def test_which_400_bodies_say_the_session_is_unknown(body, lost):
    # A 400 that says so is a lost session (the TypeScript SDK example
    # servers' answer); any other 400 stays the server's error.
    from mcp_sync.transports.http_request import session_unknown

    assert session_unknown(body) is lost


# -- the URL ----------------------------------------------------------------------------------


def test_a_user_and_password_in_the_url_are_sent_as_basic_auth_and_never_shown():
    # They were dropped (no Authorization header), and the password was
    # echoed in every error message and in repr(HTTP).
    import base64

    with HTTPServer(demo_server()) as http:
        url = http.url.replace("http://", "http://alice:s3cret%21pw@")
        target = HTTP(url)
        assert target.url == http.url and "s3cret" not in repr(target)
        with mcp_sync.connect(target) as client:
            assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        sent = {r.headers.get("Authorization") for r in http.requests}
    assert sent == {"Basic " + base64.b64encode(b"alice:s3cret!pw").decode()}
    with pytest.raises(mcp_sync.McpError) as info:
        mcp_sync.connect("http://alice:s3cret@127.0.0.1:1/mcp", connect_timeout=5)
    assert "s3cret" not in str(info.value) and "127.0.0.1:1/mcp" in str(info.value)


@pytest.mark.parametrize("options", [{"auth": "token"}, {"headers": {"authorization": "Bearer token"}}])
def test_a_url_with_a_password_and_other_credentials_is_refused(options):
    with pytest.raises(ValueError, match="the URL holds a user name and password, and") as info:
        HTTP("http://alice:s3cret@127.0.0.1:1/mcp", **options)
    assert "s3cret" not in str(info.value)


def test_a_url_that_cannot_be_parsed_is_refused_without_its_password():
    with pytest.raises(ValueError) as info:
        HTTP("http://alice:s3cret@127.0.0.1:99999/mcp")
    assert str(info.value) == "not an http(s) URL: 'http://***@127.0.0.1:99999/mcp'"


def test_port_0_is_refused_rather_than_taken_for_80():
    with pytest.raises(ValueError, match="port 0"):
        HTTP("http://127.0.0.1:0/mcp")


def _listen_and_end_the_get_stream(server, http, client, *, gets_after):
    """A listen that heard one update on the session's GET stream, which
    the server then ended; returns once the client sent `gets_after` GETs
    in all. Returns the listen and a function listing the GETs'
    Last-Event-ID headers."""
    from tests.helpers import wait_until

    sub = client.listen(resource_subscriptions=["demo://readme"])

    def gets():
        return [r.headers.get("Last-Event-ID") for r in http.requests if r.method == "GET"]

    wait_until(lambda: len(gets()) == 1)
    server.notify_updated("demo://readme")
    assert isinstance(sub.next(timeout=10), mcp_sync.Notification)
    assert http.end_get_streams() == 1
    wait_until(lambda: len(gets()) == gets_after)
    return sub, gets


def test_a_refused_resumption_of_the_get_stream_opens_a_fresh_one():
    # The server ended the session's GET stream and then refused to resume
    # it from the last event id (400): the client gave the stream up for
    # good, and listens and notifications went silent with nothing to say so.
    server = demo_server()
    with HTTPServer(server, sse_ids=True) as http, \
            mcp_sync.connect(http.url, protocol="2025-11-25") as client:
        sub, gets = _listen_and_end_the_get_stream(server, http, client, gets_after=3)
        first, resumed, fresh = gets()
        assert first is None and resumed is not None and fresh is None
        # What the server sent between the streams is lost, and the listen says so.
        gap = sub.next(timeout=10)
        assert isinstance(gap, mcp_sync.SubscriptionResumed) and gap.gap >= 0
        server.notify_updated("demo://readme")
        assert sub.next(timeout=10).params == {"uri": "demo://readme"}
        assert client.status == "ready"


def test_a_get_stream_that_keeps_ending_with_nothing_is_never_given_up(monkeypatch):
    # Ended by the server with no event, three times in a row, the GET
    # stream was given up for good, and the listens heard nothing more,
    # with nothing to say so. Now each such end in a row doubles the wait
    # before the next GET (from the retry interval, 50 ms here: never a
    # loop), and the stream stays.
    from mcp_sync.transports import http_session
    from tests.helpers import wait_until

    monkeypatch.setattr(http_session, "DEFAULT_RETRY_MS", 50)  # (this server sends no `retry`)
    server = demo_server()
    with HTTPServer(server) as http, mcp_sync.connect(http.url, protocol="2025-11-25") as client:
        sub = client.listen(resource_subscriptions=["demo://readme"])

        def gets():
            return [r for r in http.requests if r.method == "GET"]

        assert wait_until(lambda: len(http._standalone_streams()) == 1, 10)
        for _ in range(4):
            sent = len(gets())
            assert http.end_get_streams() == 1
            assert wait_until(lambda: len(gets()) == sent + 1 and len(http._standalone_streams()) == 1, 10), \
                "the GET stream was given up"
        server.notify_updated("demo://readme")
        events = [sub.next(timeout=10) for _ in range(5)]
        assert [type(event) for event in events] == [mcp_sync.SubscriptionResumed] * 4 + [mcp_sync.Notification]


def test_a_get_stream_that_worked_starts_the_count_of_failures_again():
    # Two GET streams cut short with nothing on them, then one that brought
    # an event before it was cut: that was the third failure "in a row",
    # and the stream was given up for good, with nothing to say so.
    from tests.helpers import wait_until
    from tests.servers.get_streams import ScriptedGetStreams

    with ScriptedGetStreams(["cut", "cut", "event_cut", "hold"]) as server, \
            mcp_sync.connect(server.url, protocol="2025-11-25", timeout=10):
        assert wait_until(lambda: len(server.gets) == 4, 20), [action for _, action in server.gets]


def test_get_streams_that_end_at_once_are_never_opened_in_a_loop():
    # A server that says `retry: 0` and ends each GET stream right after an
    # event: the client opened GETs back to back (about 1,000 a second).
    # After a stream that lasted less than 5 s it waits at least 0.1 s.
    from tests.helpers import wait_until
    from tests.servers.get_streams import ScriptedGetStreams

    with ScriptedGetStreams(["event_end:0"]) as server, \
            mcp_sync.connect(server.url, protocol="2025-11-25", timeout=10):
        assert wait_until(lambda: len(server.gets) >= 3, 10)
        times = [at for at, _ in server.gets[:3]]
    assert min(later - earlier for earlier, later in zip(times, times[1:])) >= 0.09


def test_a_session_renewed_by_a_call_tells_the_listens_of_one_gap():
    # The server forgot the session and a call found out first: the new
    # session's listens are opened again and told of the gap once; the GET
    # stream opened again afterwards in the new session tells nothing more.
    from tests.helpers import wait_until

    server = demo_server()
    with HTTPServer(server) as http, mcp_sync.connect(http.url, protocol="2025-11-25") as client:
        sub = client.listen(resource_subscriptions=["demo://readme"])
        assert wait_until(lambda: len(http._standalone_streams()) == 1, 10)
        first_session = client.session_id
        http.expire_sessions()
        client.list_tools(timeout=10)  # a new session
        assert client.session_id != first_session
        assert wait_until(lambda: any(r.method == "GET" and r.headers.get("Mcp-Session-Id") == client.session_id
                                      for r in http.requests) and len(http._standalone_streams()) == 1, 10)
        server.notify_updated("demo://readme")
        events = [sub.next(timeout=10)]
        while not isinstance(events[-1], mcp_sync.Notification):
            events.append(sub.next(timeout=10))
        assert [type(event) for event in events] == [mcp_sync.SubscriptionResumed, mcp_sync.Notification]


def test_a_get_stream_opened_again_without_event_ids_tells_the_listens_of_the_gap():
    # A server that gives its events no id cannot resume a stream: each
    # new GET stream starts after a gap, which the open listens are told
    # of; the session's subscriptions stand (no resources/subscribe again).
    server = demo_server()
    with HTTPServer(server) as http, mcp_sync.connect(http.url, protocol="2025-11-25") as client:
        sub, gets = _listen_and_end_the_get_stream(server, http, client, gets_after=2)
        assert gets() == [None, None]
        event = sub.next(timeout=10)
        assert isinstance(event, mcp_sync.SubscriptionResumed), event
        server.notify_updated("demo://readme")
        assert sub.next(timeout=10).params == {"uri": "demo://readme"}
        subscribes = [r for r in http.requests if r.json and r.json.get("method") == "resources/subscribe"]
        assert len(subscribes) == 1
        assert client.status == "ready"

