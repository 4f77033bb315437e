"""The HTTP transport's exchanges, pool slots and threads under stress: no
exchange left behind by an SSE answer, no pool starvation, `close()` during
a connect or a TLS handshake, slots given back on interrupts, cancelled
streams never reused and clean ones reused, aborts before the DELETE,
exchange threads that retire, and a fork child.

Each test drives a real server on 127.0.0.1: the bundled `HTTPServer`, or,
where the transport is driven directly, `RawServer`, a few lines that
answer every POST with its JSON-RPC result.
"""

from __future__ import annotations

import errno
import http.server
import json
import os
import socket
import ssl
import threading
import time
from typing import Any

import pytest

import mcp_sync
from mcp_sync import HTTP
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import NoThread, cyclic_garbage, wait_until

LEGACY = "2025-11-25"


def person(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada", "guests": 2}}


def in_use(pool: Any) -> int:
    """How many slots of a transport pool are taken."""
    count = getattr(pool, "in_use", None)
    return pool._in_use if count is None else count  # the name before the rebuild


def run_exchange(transport: Any, message: dict[str, Any], deadline: float | None) -> None:
    """The caller's exchange (`exchange_on_caller` before the rebuild)."""
    run = getattr(transport, "exchange_on_caller", None) or transport.exchange
    run(message, None, deadline)


class Sink:
    def __init__(self) -> None:
        self.delivered: list[dict[str, Any]] = []
        self.failed: list[tuple[Any, Exception]] = []
        self.changed = threading.Condition()

    def deliver(self, message: dict[str, Any], related_to: Any = None) -> None:
        with self.changed:
            self.delivered.append(message)
            self.changed.notify_all()

    def transport_failed(self, error: Exception) -> None:
        self.failed.append((None, error))

    def request_failed(self, request_id: Any, error: Exception) -> None:
        self.failed.append((request_id, error))

    def answered(self, request_id: Any) -> bool:
        return any(m.get("id") == request_id and "result" in m for m in self.delivered)


class RawHandler(http.server.BaseHTTPRequestHandler):
    """Answers each POSTed request with `{"result": {}}` (after
    `params.delay` seconds), each notification with 202."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in body:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        time.sleep(float(body.get("params", {}).get("delay", 0)))  # the server's latency, not a test wait
        payload = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the interrupt tests) is expected


@pytest.fixture
def raw_server():
    httpd = QuietServer(("127.0.0.1", 0), RawHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


def request(request_id: int, delay: float = 0.0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping", "params": {"delay": delay}}


# -- 1: an exchange leaked per SSE answer -------------------------------------------------------


def test_sse_answered_calls_leave_no_exchange_behind():
    with HTTPServer(demo_server(), response_mode="sse") as httpd:
        with mcp_sync.connect(httpd.url) as client:
            transport = client._conn.transport
            for n in range(30):
                assert client.call_tool("echo", {"text": str(n)}).text == str(n)
            # The exchange thread forgets the exchange right after delivering the answer.
            assert wait_until(lambda: not transport._exchanges, 5), len(transport._exchanges)


# -- 2: pool starvation -----------------------------------------------------------------------------


def test_an_elicitation_with_pool_size_1_in_the_initialize_era_is_answered():
    with HTTPServer(demo_server()) as httpd:
        client = mcp_sync.connect(httpd.url, protocol=LEGACY, pool_size=1, input_handlers={"form": person})
        try:
            outcome: list[Any] = []

            def call() -> None:
                try:
                    outcome.append(client.call_tool("book_table", {"date": "x"}, timeout=5).text)
                except Exception as exc:
                    outcome.append(exc)

            caller = threading.Thread(target=call)
            started = time.monotonic()
            caller.start()
            caller.join(10)
            alive = caller.is_alive()
        finally:
            client.close()  # also frees a caller that deadlocked
            caller.join(10)
        assert not alive, "the call ignored its timeout of 5 s"
        assert outcome == ["Booked for 2 under Ada"]
        assert time.monotonic() - started < 5.5


def test_32_concurrent_elicitation_calls_all_succeed():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol=LEGACY, input_handlers={"form": person}) as client:
            results: list[Any] = []
            barrier = threading.Barrier(32)

            def call() -> None:
                barrier.wait()
                try:
                    results.append(client.call_tool("book_table", {"date": "x"}, timeout=8).text)
                except Exception as exc:
                    results.append(exc)

            callers = [threading.Thread(target=call) for _ in range(32)]
            for t in callers:
                t.start()
            for t in callers:
                t.join(30)
            assert not any(t.is_alive() for t in callers)
    assert results == ["Booked for 2 under Ada"] * 32


def test_listen_streams_do_not_starve_calls():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, pool_size=2) as client:
            with client.listen(tools_list_changed=True), client.listen(resources_list_changed=True):
                for n in range(5):
                    assert client.call_tool("echo", {"text": str(n)}, timeout=5).text == str(n)


def test_a_one_way_post_does_not_wait_for_a_slot_a_request_stream_holds():
    with HTTPServer(demo_server(), response_mode="sse") as httpd:
        with mcp_sync.connect(httpd.url, protocol=LEGACY, pool_size=1) as client:
            def hold() -> None:
                with pytest.raises(mcp_sync.McpError):  # ended by the close() below
                    client.call_tool("sleep", {"seconds": 5}, timeout=10)

            holder = threading.Thread(target=hold)
            holder.start()
            try:
                assert httpd.wait_for(lambda: any((r.json or {}).get("params", {}).get("name") == "sleep"
                                                  for r in httpd.requests), 10)
                transport = client._conn.transport
                started = time.monotonic()
                transport.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
                elapsed = time.monotonic() - started
            finally:
                client.close()
                holder.join(15)
    assert elapsed < 2.5  # not after the 5 s call gave its connection back


def test_a_one_way_post_is_bounded_by_the_request_timeout():
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (backlog) and never answers
    try:
        transport = HTTP(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp").open()
        transport.start(Sink())
        transport.request_timeout = 0.5
        started = time.monotonic()
        with pytest.raises(mcp_sync.TransportError):
            transport.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert time.monotonic() - started < 3
        transport.close()
    finally:
        listener.close()


# -- 6: close() while a caller is still connecting ------------------------------------------------


@pytest.fixture
def server_tls():
    trustme = pytest.importorskip("trustme")  # in the test extra
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


def test_close_stops_a_caller_still_in_its_tls_handshake(server_tls):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    transport = HTTP(f"https://127.0.0.1:{listener.getsockname()[1]}/mcp", verify=False).open()
    transport.start(Sink())
    outcome: list[Any] = []

    def call() -> None:
        try:
            run_exchange(transport, request(1), time.monotonic() + 20)
            outcome.append("returned")
        except Exception as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    conn = None
    try:
        conn, _ = listener.accept()
        conn.settimeout(10)
        assert conn.recv(1, socket.MSG_PEEK)  # the ClientHello: the caller waits in its handshake
        transport.close()
        closed_at = time.monotonic()
        caller.join(3)
        ended_at = time.monotonic()
        # Only now does the server go on with the handshake: nothing may come.
        received = b""
        try:
            tls = server_tls.wrap_socket(conn, server_side=True)
            tls.settimeout(2)
            received = tls.recv(65536)
        except OSError:
            pass  # the client had let go of the connection
        assert received == b"", received[:60]
        assert not caller.is_alive() and ended_at - closed_at < 2.5
        assert len(outcome) == 1 and isinstance(outcome[0], mcp_sync.ConnectionClosed)
    finally:
        if conn is not None:
            conn.close()
        listener.close()
        caller.join(10)


# -- 8: interrupts must not leak pool slots -------------------------------------------------------


class Interrupt(KeyboardInterrupt):
    """A Ctrl-C landing inside the transport."""


def interrupt_once(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...], *, after: bool = False) -> list[bool]:
    """Make the first call (on this thread) of any of `socket.socket`'s
    `names` raise `Interrupt`, before or `after` doing its work."""
    me = threading.current_thread()
    fired: list[bool] = []
    for name in names:
        real = getattr(socket.socket, name)

        def wrapper(self: socket.socket, *args: Any, __real: Any = real, **kwargs: Any) -> Any:
            if threading.current_thread() is me and not fired:
                fired.append(True)
                if after:
                    __real(self, *args, **kwargs)
                raise Interrupt()
            return __real(self, *args, **kwargs)

        monkeypatch.setattr(socket.socket, name, wrapper)
    return fired


@pytest.mark.parametrize("point,names,after,delay", [
    ("connect", ("connect", "connect_ex"), False, 0.0),
    ("send", ("sendall",), False, 0.0),
    ("read", ("recv", "recv_into"), False, 0.0),
    ("close after a timeout", ("close",), True, 2.0),
])
def test_an_interrupt_at_any_point_gives_the_slot_back(raw_server, monkeypatch, point, names, after, delay):
    transport = HTTP(raw_server, pool_size=1).open()
    sink = Sink()
    transport.start(sink)
    try:
        fired = interrupt_once(monkeypatch, names, after=after)
        with pytest.raises(Interrupt):
            # A timeout (when `delay`) makes the transport close the connection.
            run_exchange(transport, request(1, delay), time.monotonic() + (0.3 if delay else 10))
            if not fired:  # the point is reached in the cleanup of a later exchange
                run_exchange(transport, request(2), time.monotonic() + 10)
        monkeypatch.undo()
        assert in_use(transport._pool) == 0
        run_exchange(transport, request(3), time.monotonic() + 3)
        assert sink.answered(3)
    finally:
        monkeypatch.undo()
        transport.close()


def test_pool_slots_come_back_on_any_exception_in_acquire_or_release():
    from mcp_sync.transports.pool import Conn, Exchange, Pool

    class Boom(BaseException):
        pass

    def failing_dial(exchange: Any, deadline: Any) -> socket.socket:
        raise Boom()

    pool = Pool(failing_dial, 2)
    for _ in range(5):
        with pytest.raises(Boom):
            pool.acquire(Exchange(1, pool), time.monotonic() + 1)
    assert pool.in_use == 0

    class ExplodingConn(Conn):
        def close(self) -> None:
            raise Boom()

    a, b = socket.socketpair()
    try:
        pool = Pool(lambda exchange, deadline: a, 1)
        exchange = Exchange(1, pool)
        conn = pool.acquire(exchange, time.monotonic() + 1)
        assert pool.in_use == 1
        exploding = ExplodingConn(conn.sock)
        with pytest.raises(Boom):
            pool.release(exchange, exploding, reusable=False)
        assert pool.in_use == 0
        exchange.release(reusable=False)  # again: idempotent, no negative count
        assert pool.in_use == 0
    finally:
        a.close()
        b.close()


# -- 16: connection reuse around SSE streams, close order, threads ----------------------------


def test_a_cancelled_sse_stream_connection_is_closed_not_reused():
    with HTTPServer(demo_server(), response_mode="sse") as httpd:
        with mcp_sync.connect(httpd.url, pool_size=1) as client:
            transport = client._conn.transport
            with pytest.raises(mcp_sync.RequestTimeout):
                client.call_tool("countdown", {"steps": 50, "delay": 0.1}, timeout=0.5)
            assert wait_until(lambda: in_use(transport._pool) == 0, 5)
            assert transport._pool._idle == []
            assert client.call_tool("echo", {"text": "after"}).text == "after"


def test_sse_answered_calls_reuse_their_connection(monkeypatch):
    with HTTPServer(demo_server(), response_mode="sse") as httpd:
        port = httpd.port
        dials: list[Any] = []
        for name in ("connect", "connect_ex"):
            real = getattr(socket.socket, name)

            def counting(self: socket.socket, address: Any, __real: Any = real) -> Any:
                if isinstance(address, tuple) and address[1] == port:
                    dials.append(address)
                return __real(self, address)

            monkeypatch.setattr(socket.socket, name, counting)
        with mcp_sync.connect(httpd.url, pool_size=2) as client:
            for n in range(20):
                assert client.call_tool("echo", {"text": str(n)}).text == str(n)
        monkeypatch.undo()
    assert len(dials) <= 3, len(dials)


def test_close_aborts_exchanges_before_deleting_the_session(monkeypatch):
    from mcp_sync.transports import http as http_module
    from mcp_sync.transports import pool as pool_module

    events: list[str] = []
    real_abort = pool_module.Exchange.abort
    real_delete = http_module.HTTPTransport._delete_session
    monkeypatch.setattr(pool_module.Exchange, "abort", lambda self: (events.append("abort"), real_abort(self))[1])
    monkeypatch.setattr(http_module.HTTPTransport, "_delete_session",
                        lambda self: (events.append("delete"), real_delete(self))[1])
    with HTTPServer(demo_server(), response_mode="sse") as httpd:
        client = mcp_sync.connect(httpd.url, protocol=LEGACY)
        caller = threading.Thread(target=lambda: pytest.raises(mcp_sync.McpError, client.call_tool, "sleep",
                                                               {"seconds": 5}, timeout=10))
        caller.start()
        try:
            assert httpd.wait_for(lambda: any((r.json or {}).get("params", {}).get("name") == "sleep"
                                              for r in httpd.requests), 10)
            client.close()
        finally:
            caller.join(10)
        assert any(r.method == "DELETE" for r in httpd.requests)
    assert "delete" in events and "abort" in events[: events.index("delete")]


def test_idle_exchange_threads_retire_and_close_joins_the_rest():
    from mcp_sync.transports.pool import ExchangeThreads

    threads = ExchangeThreads("mcp-sync-test-retire", idle_seconds=0.1)
    done = threading.Event()
    for _ in range(3):
        threads.submit(lambda: None)
    assert wait_until(lambda: threads.count == 0, 5)  # every thread retired once idle
    release = threading.Event()
    threads.submit(lambda: (release.wait(10), done.set()))
    threads.submit(lambda: None)
    release.set()
    threads.close()
    assert done.is_set()
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-sync-test-retire")]


def test_close_joins_an_exchange_thread_that_retired_but_has_not_ended():
    # A retiring thread takes itself off the roll and then returns: close()
    # must still join it (a loaded machine can hold it in between; here a
    # patched `_run` lingers there).
    from mcp_sync.transports.pool import ExchangeThreads

    threads = ExchangeThreads("mcp-sync-test-linger", idle_seconds=0.05)
    run = threads._run
    retired: list[threading.Thread] = []

    def run_then_linger() -> None:
        run()
        retired.append(threading.current_thread())
        threading.Event().wait(0.5)  # widens the window; nothing waits for it to pass

    threads._run = run_then_linger  # type: ignore[method-assign]
    threads.submit(lambda: None)
    assert wait_until(lambda: bool(retired), 5) and threads.count == 0
    threads.close()
    assert not retired[0].is_alive(), "a retired exchange thread outlived close()"


def test_an_exchange_thread_that_cannot_start_fails_the_exchange_only(monkeypatch):
    # Out of threads: the exchange fails with an McpError, and no unstarted
    # thread is left on the roll for close() to trip over.
    import mcp_sync.transports.pool as pool_module
    from mcp_sync.transports.pool import ExchangeThreads

    real_thread = threading.Thread
    threads = ExchangeThreads("mcp-sync-test-nothread")
    monkeypatch.setattr(pool_module.threading, "Thread", NoThread)
    with pytest.raises(mcp_sync.ConnectionClosed, match="no thread for the HTTP exchange"):
        threads.submit(lambda: None)
    monkeypatch.setattr(pool_module.threading, "Thread", real_thread)
    assert threads.count == 0
    ran = threading.Event()
    threads.submit(ran.set)  # the next one gets a thread
    assert ran.wait(5)
    threads.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-sync-test-nothread")]


def test_an_interrupt_inside_thread_start_leaves_no_thread_behind_close(monkeypatch, caplog):
    # A Ctrl-C lands in `Thread.start()` while it waits for the new thread
    # to run: the thread runs, the job is not queued, the caller gets the
    # KeyboardInterrupt. close() must still signal and join that thread,
    # and the threads it knew of must each get their own stop signal.
    import mcp_sync.transports.pool as pool_module
    from mcp_sync.transports.pool import ExchangeThreads

    class InterruptedStart(threading.Thread):
        armed = True

        def start(self) -> None:
            super().start()
            if InterruptedStart.armed:
                InterruptedStart.armed = False
                raise KeyboardInterrupt  # where a real Ctrl-C lands: in the wait for the thread to run

    threads = ExchangeThreads("mcp-sync-test-interrupted", idle_seconds=60)
    release, first_ran = threading.Event(), threading.Event()
    InterruptedStart.armed = False
    monkeypatch.setattr(pool_module.threading, "Thread", InterruptedStart)
    threads.submit(lambda: (first_ran.set(), release.wait(10)))  # busy: the next job needs a new thread
    assert first_ran.wait(5)
    InterruptedStart.armed = True
    with pytest.raises(KeyboardInterrupt):
        threads.submit(lambda: None)
    release.set()
    ran = threading.Event()
    threads.submit(ran.set)  # the thread left waiting, or another, runs the next job
    assert ran.wait(5)
    with caplog.at_level("WARNING", logger="mcp_sync"):
        threads.close()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("mcp-sync-test-interrupted")]
    assert "did not end in time" not in caplog.text


# -- one HTTP/1.1 implementation for every request -----------------------------------------------


def test_every_request_kind_is_read_by_the_same_http11_reader(monkeypatch):
    from mcp_sync.transports.http11 import Response

    heads: list[int] = []
    real_begin = Response.begin

    def counting(self: Response) -> None:
        real_begin(self)
        heads.append(self.status)

    monkeypatch.setattr(Response, "begin", counting)
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol=LEGACY) as client:
            assert httpd.wait_for(lambda: any(r.method == "GET" for r in httpd.requests), 10)
            client.call_tool("echo", {"text": "x"})
        kinds = {r.method for r in httpd.requests} | {(r.json or {}).get("method") for r in httpd.requests}
        assert {"POST", "GET", "DELETE", "notifications/initialized"} <= kinds
        assert len(heads) == len(httpd.requests)


# -- fork: discard() --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["2026-07-28", LEGACY])
def test_discard_in_a_forked_child_leaves_the_parent_untouched(protocol):
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol=protocol) as client:
            transport = client._conn.transport
            if protocol == LEGACY:
                assert httpd.wait_for(lambda: any(r.method == "GET" for r in httpd.requests), 10)
                assert wait_until(lambda: transport._get_exchange is not None
                                  and transport._get_exchange.conn is not None, 5)
            assert client.call_tool("echo", {"text": "before"}).text == "before"
            fds = [conn.sock.fileno() for conn in transport._pool._idle]
            if protocol == LEGACY:
                fds.append(transport._get_exchange.conn.sock.fileno())
            assert fds
            pid = os.fork()
            if pid == 0:  # the child: let go, and say whether every copy is closed
                code = 1
                try:
                    transport.discard()
                    closed = 0
                    for fd in fds:
                        try:
                            os.fstat(fd)
                        except OSError:
                            closed += 1
                    code = 0 if closed == len(fds) and transport._closed else 2
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            for n in range(5):  # the parent's sockets, stream and session are untouched
                assert client.call_tool("echo", {"text": str(n)}).text == str(n)
            if protocol == LEGACY:
                assert transport._get_thread.is_alive()
                assert httpd.sessions == 1
        assert [r.method for r in httpd.requests].count("DELETE") == (1 if protocol == LEGACY else 0)


def test_a_connect_the_kernel_has_not_finished_is_stopped_by_an_abort(monkeypatch):
    """A socket that is still connecting cannot be shut down from another
    thread: the dialer looks at the stop flag while it waits."""
    from mcp_sync.transports import pool as pool_module
    from mcp_sync.transports.pool import Dialer, Exchange, Pool, Stopped

    def never_writable(sock: socket.socket, timeout: float | None = None) -> bool:
        time.sleep(timeout or 0)  # as if no SYN-ACK came within `timeout`
        return False

    monkeypatch.setattr(pool_module, "wait_for_write", never_writable)
    monkeypatch.setattr(socket.socket, "connect_ex", lambda self, address: errno.EINPROGRESS)  # never done at once
    listener = socket.create_server(("127.0.0.1", 0))
    pool = Pool(Dialer("127.0.0.1", listener.getsockname()[1], None, 30.0).dial, 1)
    exchange = Exchange(1, pool)
    outcome: list[Any] = []

    def dial() -> None:
        try:
            pool.acquire(exchange, time.monotonic() + 30)
            outcome.append("connected")
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=dial)
    caller.start()
    try:
        assert wait_until(lambda: exchange._dialing is not None, 5)
        exchange.abort()
        caller.join(3)
        assert not caller.is_alive()
    finally:
        exchange.abort()
        caller.join(10)
        listener.close()
    assert len(outcome) == 1 and isinstance(outcome[0], Stopped)
    assert pool.in_use == 0


def test_a_connect_that_succeeds_at_a_later_address_leaves_no_cycle(monkeypatch):
    """The dialer keeps the failure of each address it tried (to raise the
    last one when none connects): when a later address connects (`::1`
    refused, `127.0.0.1` taken, say), the failure it kept must not hold the
    dialer's frame through its traceback."""
    from mcp_sync.transports.pool import Dialer, Exchange, Pool

    listener = socket.create_server(("127.0.0.1", 0))
    # Bound and kept, never listening: a connect to it is refused, and no
    # other process can take its port meanwhile.
    refusing = socket.socket()
    refusing.bind(("127.0.0.1", 0))
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if host != "later.invalid":
            return real_getaddrinfo(host, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", refusing.getsockname()),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", listener.getsockname())]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(refusing.getsockname(), timeout=5)
    dial = Dialer("later.invalid", listener.getsockname()[1], None, 30.0).dial
    pool = Pool(dial, 1)
    try:
        def connect_once() -> None:
            dial(Exchange(1, pool), time.monotonic() + 30).close()

        assert cyclic_garbage(connect_once, warm=1) == 0
    finally:
        listener.close()
        refusing.close()
