"""The old HTTP+SSE transport (2024-11-05): an explicit `SSE(url)` target and
the automatic fallback of `connect(url)`, against the test server's
`SSEServer` on loopback."""

import functools
import logging
import os
import queue
import threading
import time

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.servers.http_sse import SSEServer
from tests.helpers import demo_command, wait_until


@pytest.fixture
def serve(serve):
    """The shared `serve` fixture, serving HTTP+SSE in this module."""
    return functools.partial(serve, using=SSEServer)


def posts(sse, path):
    return [r for r in sse.requests if r.method == "POST" and r.path.split("?")[0] == path]


def form(params):
    form.threads.append(threading.current_thread().name)
    return {"action": "accept", "content": {"name": "Ada", "guests": 3}}


form.threads = []


def sampling(params):
    return {"role": "assistant", "content": {"type": "text", "text": "a short summary"}, "model": "test-model"}


# -- an explicit SSE target ------------------------------------------------------------------


@pytest.mark.parametrize("version", [None, "2025-03-26", "2024-11-05"])
def test_tools_progress_resources_and_prompts(serve, version):
    sse = serve(demo_server(versions=[version] if version else None))
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        assert client.transport_kind == "sse"
        assert not client.stateless
        assert client.protocol_version == (version or "2025-11-25")
        assert "add" in {tool.name for tool in client.list_tools()}
        added = client.call_tool("add", {"a": 2, "b": 40})
        if version is None:
            assert added.structured_content == {"sum": 42}
        else:  # structured output arrived in 2025-06-18
            assert added.structured_content is None and "42" in added.text
        seen = []
        result = client.call_tool("countdown", {"steps": 3, "delay": 0},
                                  progress=lambda p: seen.append((p.progress, threading.current_thread())))
        assert result.text == "liftoff"
        assert [p for p, _ in seen] == [1, 2, 3]
        assert {t for _, t in seen} == {threading.current_thread()}  # routed to the caller by its token
        assert client.read_resource("demo://readme").contents
        assert client.get_prompt("greet", {"name": "Ada"}).messages
        endpoint = client._conn.transport.endpoint
        stats = client.stats()
    # No server/discover probe: the transport only carries the initialize era.
    methods = [r.json.get("method") for r in posts(sse, "/messages") if isinstance(r.json, dict)]
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert "server/discover" not in methods
    assert [r.method for r in sse.requests if r.path == "/sse"] == ["GET"]
    assert endpoint.startswith(sse.url.replace("/sse", "/messages?session_id="))
    assert stats.bytes_sent > 0 and stats.bytes_received > 0


def test_notifications_related_to_no_call_reach_the_client(serve):
    server = demo_server()
    sse = serve(server)
    got: queue.Queue = queue.Queue()
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        client.on_notification(got.put)
        server.notify_changed("tools")
        note = got.get(timeout=5)
        assert note.method == "notifications/tools/list_changed"


def test_server_requests_are_answered_by_the_handlers(serve):
    sse = serve()
    form.threads.clear()
    with mcp_sync.connect(mcp_sync.SSE(sse.url), input_handlers={"form": form, "sampling": sampling}) as client:
        assert client.call_tool("book_table", {"date": "friday"}).text == "Booked for 3 under Ada"
        assert client.call_tool("summarize", {"text": "long text"}).text == "a short summary"
    # One shared stream: the question names no call, so the client's own
    # handler answers it, on the thread of the one call waiting, and the
    # answer is POSTed to the endpoint.
    assert form.threads == [threading.current_thread().name]
    answers = [r.json for r in posts(sse, "/messages") if isinstance(r.json, dict) and "result" in r.json]
    assert len(answers) == 2


def test_errors(serve):
    sse = serve()
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        assert client.call_tool("fail", {"message": "no"}).is_error
        with pytest.raises(mcp_sync.MethodNotFound):
            client.request("no/such/method")
        with pytest.raises(mcp_sync.ServerError):
            client.call_tool("add", {"a": "not a number"})
        assert client.call_tool("add", {"a": 1, "b": 1}).structured_content == {"sum": 2}  # still usable


def test_sixteen_threads_each_get_their_own_answers(serve):
    sse = serve()
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        errors = []

        def work(n):
            try:
                for i in range(10):
                    assert client.call_tool("add", {"a": n, "b": i}).structured_content == {"sum": n + i}
            except Exception as exc:  # reported below, with the thread's number
                errors.append((n, exc))

        threads = [threading.Thread(target=work, args=(n * 1000,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads), "a caller never returned"
        assert not errors


def test_a_timed_out_call_is_cancelled_by_notification(serve):
    sse = serve()
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("sleep", {"seconds": 30}, timeout=0.3)
        assert sse.wait_for(lambda: any(isinstance(r.json, dict) and r.json.get("method") == "notifications/cancelled"
                                        for r in sse.requests), 5)
        assert client.call_tool("echo", {"text": "after"}).text == "after"


@pytest.mark.parametrize("endpoint", [
    "http://127.0.0.2:{port}/messages?session_id={{session_id}}",  # another host
    "http://127.0.0.1:1/messages?session_id={{session_id}}",  # another port
    "https://127.0.0.1:{port}/messages?session_id={{session_id}}",  # another scheme
    "//example.invalid/messages?session_id={{session_id}}",  # scheme-relative: another host
])
def test_an_endpoint_on_another_origin_is_refused(serve, endpoint):
    sse = serve()
    sse.endpoint = endpoint.format(port=sse.port)
    with pytest.raises(mcp_sync.ConnectError, match="not on the stream's origin"):
        mcp_sync.connect(mcp_sync.SSE(sse.url))
    assert posts(sse, "/messages") == []  # nothing was sent anywhere


def test_an_absolute_endpoint_on_the_same_origin_is_used(serve):
    sse = serve()
    sse.endpoint = f"http://127.0.0.1:{sse.port}/messages?session_id={{session_id}}"
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"


def test_a_stream_without_an_endpoint_event_fails_within_connect_timeout(serve):
    sse = serve(send_endpoint=False)
    started = time.monotonic()
    with pytest.raises(mcp_sync.ConnectError, match="no endpoint event within connect_timeout=0.5"):
        mcp_sync.connect(mcp_sync.SSE(sse.url, connect_timeout=0.5))
    assert time.monotonic() - started < 3


def test_a_url_that_is_no_event_stream_is_a_clear_error():
    with HTTPServer(demo_server()) as http:
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(mcp_sync.SSE(http.url.replace("/mcp", "/elsewhere")))
        assert info.value.status == 404
    with pytest.raises(mcp_sync.ConnectError):
        mcp_sync.connect(mcp_sync.SSE("http://127.0.0.1:1/sse", connect_timeout=1))


def test_the_stream_dying_mid_call_fails_it_and_the_client_reconnects(serve):
    sse = serve()
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        failed: queue.Queue = queue.Queue()

        def call():
            try:
                client.call_tool("sleep", {"seconds": 30}, timeout=20)
            except mcp_sync.McpError as exc:
                failed.put(exc)

        caller = threading.Thread(target=call)
        caller.start()
        assert sse.wait_for(lambda: any(isinstance(r.json, dict) and r.json.get("params", {}).get("name") == "sleep"
                                        for r in sse.requests), 5)
        assert sse.end_streams() == 1
        error = failed.get(timeout=5)
        caller.join(5)
        assert isinstance(error, mcp_sync.ConnectionClosed)
        # The next call opens a new stream, gets a new endpoint, initializes again.
        assert client.call_tool("echo", {"text": "again"}).text == "again"
        assert client.transport_kind == "sse"
    gets = [r for r in sse.requests if r.method == "GET"]
    initializes = [r for r in posts(sse, "/messages")
                   if isinstance(r.json, dict) and r.json.get("method") == "initialize"]
    assert len(gets) == 2 and len(initializes) == 2
    assert len({r.path for r in initializes}) == 2  # each on its own session's endpoint


def test_without_reconnect_the_connection_stays_failed(serve):
    sse = serve()
    with mcp_sync.connect(mcp_sync.SSE(sse.url), reconnect=False) as client:
        assert client.call_tool("echo", {"text": "x"}).text == "x"
        sse.end_streams()
        assert wait_until(lambda: client._conn.failure is not None, 5)
        with pytest.raises(mcp_sync.ConnectionClosed):
            client.call_tool("echo", {"text": "x"})


def test_an_oversize_event_is_message_too_large(serve):
    sse = serve()
    with mcp_sync.connect(mcp_sync.SSE(sse.url, max_response_bytes=4096)) as client:
        with pytest.raises(mcp_sync.MessageTooLarge):
            client.call_tool("echo", {"text": "x" * 10_000})


def test_close_leaves_no_thread_and_no_file_descriptor(serve):
    sse = serve()
    fds: set = set()
    for _ in range(2):
        # The second cycle measures from after the first: what the process
        # sets up once (an epoll instance of the interpreter) is not a leak.
        fds = set(os.listdir("/proc/self/fd"))
        client = mcp_sync.connect(mcp_sync.SSE(sse.url), input_handlers={"form": form})
        assert client.call_tool("book_table", {"date": "friday"}).text == "Booked for 3 under Ada"
        assert any(t.name == "mcp-sync-sse-reader" for t in threading.enumerate())
        client.close()
        assert [t for t in threading.enumerate() if t.name.startswith("mcp-sync")] == []
        assert sse.wait_for(lambda: sse.connections == 0 and sse.sessions == 0, 5)
    assert wait_until(lambda: set(os.listdir("/proc/self/fd")) <= fds, 5), \
        sorted(set(os.listdir("/proc/self/fd")) - fds)


def test_close_from_another_thread_during_a_call(serve):
    sse = serve()
    client = mcp_sync.connect(mcp_sync.SSE(sse.url))
    failed: queue.Queue = queue.Queue()

    def call():
        try:
            client.call_tool("sleep", {"seconds": 30}, timeout=None)
        except mcp_sync.McpError as exc:
            failed.put(exc)

    caller = threading.Thread(target=call)
    caller.start()
    assert sse.wait_for(lambda: any(isinstance(r.json, dict) and r.json.get("params", {}).get("name") == "sleep"
                                    for r in sse.requests), 5)
    client.close()
    assert isinstance(failed.get(timeout=5), mcp_sync.ConnectionClosed)
    caller.join(5)
    assert [t for t in threading.enumerate() if t.name.startswith("mcp-sync")] == []


def test_the_sse_target_checks_options_like_http():
    with pytest.raises(ValueError, match="max_response_bytes"):
        mcp_sync.SSE("http://127.0.0.1:1/sse", max_response_bytes=0)
    with pytest.raises(ValueError, match="not an http"):
        mcp_sync.SSE("ftp://127.0.0.1/sse")
    assert repr(mcp_sync.SSE("http://127.0.0.1:1/sse")) == "SSE('http://127.0.0.1:1/sse')"


# -- the automatic fallback of a URL --------------------------------------------------------


def test_a_url_of_an_sse_only_server_falls_back_to_sse(serve, caplog):
    sse = serve()
    with caplog.at_level(logging.INFO, logger="mcp_sync.client"):
        with mcp_sync.connect(sse.url) as client:
            assert client.transport_kind == "sse"
            assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
            assert isinstance(client._supervisor.settled.target, mcp_sync.SSE)
    assert any("HTTP+SSE" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    # The POSTs to the stream's URL were refused (405), then the GET opened the stream.
    assert [(r.method, r.path) for r in sse.requests[:3]] == [("POST", "/sse"), ("POST", "/sse"), ("GET", "/sse")]


def test_a_later_connect_goes_straight_to_sse(serve):
    sse = serve()
    mcp_sync.connect(sse.url).close()
    first = len(sse.requests)
    with mcp_sync.connect(sse.url) as client:
        assert client.transport_kind == "sse"
        assert client.call_tool("echo", {"text": "again"}).text == "again"
    # Remembered for the process: no refused POSTs to the stream's URL this time.
    assert [(r.method, r.path) for r in sse.requests[first:first + 1]] == [("GET", "/sse")]
    assert len(posts(sse, "/sse")) == 2  # the first connect's two only
    mcp_sync.forget_eras(sse.url)
    mcp_sync.connect(sse.url).close()
    assert len(posts(sse, "/sse")) == 4


def test_after_the_fallback_reconnects_use_sse(serve):
    sse = serve()
    with mcp_sync.connect(sse.url, headers={"X-Tenant": "acme"}) as client:
        refused = len(posts(sse, "/sse"))
        ended = client._conn
        sse.end_streams()
        assert wait_until(lambda: ended.failure is not None, 5)
        assert client.call_tool("echo", {"text": "back"}).text == "back"
        assert client.transport_kind == "sse"
    assert len(posts(sse, "/sse")) == refused  # no Streamable HTTP attempt again
    assert {r.headers.get("X-Tenant") for r in sse.requests} == {"acme"}  # the options carried over


def test_a_streamable_http_server_stays_streamable_http():
    with HTTPServer(demo_server()) as http:
        with mcp_sync.connect(http.url) as client:
            assert client.transport_kind == "streamable-http"
        with mcp_sync.connect(http.url, protocol="2025-11-25") as client:
            assert client.transport_kind == "streamable-http"
        assert all(r.method != "GET" or r.headers.get("Mcp-Session-Id") for r in http.requests)


def test_sse_fallback_false_keeps_the_status_error(serve):
    sse = serve()
    with pytest.raises(mcp_sync.HTTPStatusError) as info:
        mcp_sync.connect(sse.url, sse_fallback=False)
    assert info.value.status == 405
    assert [r.method for r in sse.requests] == ["POST", "POST"]


def test_a_failed_fallback_raises_the_original_error_with_a_note():
    with HTTPServer(demo_server()) as http:
        url = http.url.replace("/mcp", "/nowhere")
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(url)
        assert info.value.status == 404
        assert "HTTP+SSE fallback failed too" in str(info.value)
        assert [r.method for r in http.requests] == ["POST", "POST", "GET"]


def test_transport_kind_of_the_other_transports():
    with mcp_sync.connect(demo_server()) as client:
        assert client.transport_kind == "memory"
    with mcp_sync.connect(demo_command()) as client:
        assert client.transport_kind == "stdio"
    with mcp_sync.connect(mcp_sync.Custom(lambda: mcp_sync.Memory(demo_server()).open())) as client:
        assert client.transport_kind == "custom"


def test_children_after_fork_open_streams_of_their_own(serve):
    from tests.test_fork import OK, _calls_in_parent, _fork_children, _reap

    sse = serve()
    with mcp_sync.connect(mcp_sync.SSE(sse.url), timeout=20) as client:
        assert client.call_tool("echo", {"text": "before"}).text == "before"
        children = _fork_children(client, ["a", "b"])
        _calls_in_parent(client)
        assert _reap(children) == [OK, OK]
        _calls_in_parent(client, "after")
    # One stream for the parent (never reopened), one for each child.
    assert [r.method for r in sse.requests].count("GET") == 3


def test_an_endpoint_with_spaces_and_non_ascii_is_percent_encoded(serve):
    sse = serve(messages_path="/my messages/é")
    with mcp_sync.connect(mcp_sync.SSE(sse.url)) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        assert client._conn.transport.endpoint.startswith(sse.url.replace("/sse", "/my%20messages/%C3%A9?session_id="))


@pytest.fixture
def silent_poster():
    """A raw HTTP+SSE server that opens the stream and names its endpoint,
    then never answers a POST: yields its stream URL."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    conns, stop = [], threading.Event()

    def serve_one(conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            if head.startswith(b"GET"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                             b"event: endpoint\ndata: /messages?session_id=1\n\n")
            stop.wait(30)  # a POST is never answered; the stream never ends

    def accept():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=serve_one, args=(conn,), daemon=True)
            conns.append(thread)
            thread.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/sse"
    stop.set()
    listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
    listener.close()
    acceptor.join(5)
    for thread in conns:
        thread.join(5)


def test_an_unanswered_post_is_bounded_by_the_deadline(silent_poster):
    started = time.monotonic()
    with pytest.raises(mcp_sync.RequestTimeout):
        mcp_sync.connect(mcp_sync.SSE(silent_poster), timeout=0.5)
    assert time.monotonic() - started < 3
    assert [t for t in threading.enumerate() if t.name.startswith("mcp-sync")] == []


@pytest.mark.parametrize("explicit", [True, False])
def test_through_a_forward_proxy_stream_and_posts_go_in_absolute_form(serve, explicit):
    from tests.servers.forward_proxy import ForwardProxy

    sse = serve()
    with ForwardProxy() as proxy:
        target = mcp_sync.SSE(sse.url, proxy=proxy.url(), trust_env=False) if explicit else sse.url
        options = {} if explicit else {"proxy": proxy.url(), "trust_env": False}
        with mcp_sync.connect(target, timeout=5, **options) as client:
            assert client.transport_kind == "sse"
            assert client.call_tool("echo", {"text": "via proxy"}).text == "via proxy"
            endpoint = client._conn.transport.endpoint
        carried = {(r.method, r.target) for r in proxy.forwarded()}
    assert ("GET", sse.url) in carried
    assert ("POST", endpoint) in carried  # http://127.0.0.1:PORT/messages?session_id=...


def test_over_https_with_a_custom_ca(tmp_path):
    import ssl

    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    with SSEServer(demo_server(), ssl_context=context) as sse:
        assert sse.url.startswith("https://")
        with mcp_sync.connect(sse.url, verify=str(bundle)) as client:
            assert client.transport_kind == "sse"
            assert client.call_tool("echo", {"text": "tls"}).text == "tls"
        with pytest.raises(mcp_sync.ConnectError, match="certificate verify failed"):
            mcp_sync.connect(mcp_sync.SSE(sse.url))  # the system CAs do not know this one


def _vault_down():
    raise RuntimeError("vault down")


def test_sse_token_function_failure_is_an_mcp_error():
    """A token function that raises: Streamable HTTP reports an mcp_sync.McpError
    (`InvalidMessage`), HTTP+SSE lets the RuntimeError out of connect()."""
    http = HTTPServer(demo_server()).start()
    sse = SSEServer(demo_server()).start()
    try:
        with pytest.raises(mcp_sync.McpError):
            mcp_sync.connect(mcp_sync.HTTP(http.url, auth=_vault_down), timeout=3)
        with pytest.raises(mcp_sync.McpError):  # RuntimeError today
            mcp_sync.connect(mcp_sync.SSE(sse.url, auth=_vault_down), timeout=3)
    finally:
        sse.close()
        http.close()


def test_remembered_sse_era_heals_when_the_get_is_an_endpointless_stream():
    """The era memory says a URL chose HTTP+SSE (an earlier connect in this
    process, when it was SSE-only). It now serves Streamable HTTP, whose GET
    without a session is a plain event stream (as a stateless TypeScript SDK
    server's is). `forget_eras` promises such an upgrade "is noticed by
    itself", but the remembered branch of `_settle_era` only re-settles on
    ServerError/VersionNegotiationError/HTTPStatusError: the SSE start's
    ConnectError ("ended before its endpoint event") fails connect(), and
    every later connect() in the process, until `forget_eras()`."""
    from mcp_sync import negotiation as era_memory
    from mcp_sync.testing import GateAnswer

    def gate(request):
        if request.method == "GET" and request.headers.get("Mcp-Session-Id") is None:
            return GateAnswer(200, {"Content-Type": "text/event-stream"}, b": a stream of no session\n\n")
        return None

    http = HTTPServer(demo_server(), gate=gate).start()
    try:
        era_memory.remember(mcp_sync.HTTP(http.url).server_key(), "sse")
        with mcp_sync.connect(http.url, timeout=3) as client:  # ConnectError today
            assert client.transport_kind == "streamable-http"
    finally:
        mcp_sync.forget_eras()
        http.close()


def test_close_while_waiting_for_the_endpoint_event_is_connection_closed():
    # It was a ConnectError blaming the server: "ended before its endpoint
    # event: it does not serve the HTTP+SSE transport".
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    asked = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n: no endpoint yet\n\n")
        asked.set()

    server = threading.Thread(target=serve)
    server.start()
    client = mcp_sync.Client(mcp_sync.SSE(f"http://127.0.0.1:{listener.getsockname()[1]}/sse"))
    raised: list[BaseException] = []

    def open_it() -> None:
        try:
            client.open()
        except BaseException as exc:  # noqa: BLE001 - what it raised is the test
            raised.append(exc)

    opener = threading.Thread(target=open_it)
    opener.start()
    try:
        assert asked.wait(10)
        client.close()
        opener.join(10)
    finally:
        server.join(10)
        for conn in held:
            conn.close()
        listener.close()
    assert [type(exc) for exc in raised] == [mcp_sync.ConnectionClosed]


def test_sse_with_only_stateless_versions_allowed_is_refused_before_anything_is_sent():
    # The conflict is in the arguments: it was found after the GET that
    # opens the stream (a ConnectError for a server that was not there, or
    # VersionNegotiationError, "the server's", once connected).
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/sse"
        with pytest.raises(ValueError, match="carries only initialize-era protocol versions"):
            mcp_sync.connect(mcp_sync.SSE(url), protocol="2026-07-28")
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection was made
        # One initialize-era version allowed is enough.
        mcp_sync.Client(mcp_sync.SSE(url), protocol=["2026-07-28", "2025-11-25"]).close()
    finally:
        listener.close()
