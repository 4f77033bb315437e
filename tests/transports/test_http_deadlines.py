"""Deadlines are absolute over HTTP: a server that trickles or stalls cannot
keep a call past its `timeout` (plus 0.5 s), in either era, and the server
is told (its stream is closed; in the initialize era a cancellation is sent).

Each test puts a `HostileFront` before a real test server: every request is
relayed, except `tools/call`, whose answer misbehaves in one way.
"""

from __future__ import annotations

import _thread
import threading
import time

import pytest

import mcp_sync
from mcp_sync.errors import McpError, RequestTimeout
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import SLACK, wait_until
from tests.servers.hostile_http import FAULTS, HostileFront

ERAS = ["2026-07-28", "2025-11-25"]
TIMEOUT = 0.6


@pytest.fixture
def upstream():
    httpd = HTTPServer(demo_server()).start()
    yield httpd
    httpd.close()


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_call_times_out_on_time_whatever_the_server_trickles(upstream, fault, protocol):
    with HostileFront(upstream.url, {"tools/call": FAULTS[fault]}) as front:
        with mcp_sync.connect(front.url, protocol=protocol) as client:
            started = time.monotonic()
            with pytest.raises(RequestTimeout):
                client.call_tool("echo", {"text": "x"}, timeout=TIMEOUT)
            took = time.monotonic() - started
            assert took < TIMEOUT + SLACK, f"{fault}: the call raised after {took:.2f} s"
            # The server is told: its answer's connection is closed.
            assert front.hung_up.wait(5), f"{fault}: the client kept the hostile connection open"
            if protocol != "2026-07-28":
                assert wait_until(lambda: "notifications/cancelled" in front.methods, 5)
            # The client is still usable.
            assert client.list_tools()


@pytest.mark.parametrize("fault", ["trickle_body", "trickle_head", "endless_continue"])
def test_the_probe_is_bounded_by_probe_timeout_against_a_trickling_server(upstream, fault):
    """The version probe (`server/discover`) trickles: connect() gives up on
    it at `probe_timeout` and settles the era with initialize instead."""
    with HostileFront(upstream.url, {"server/discover": FAULTS[fault]}) as front:
        started = time.monotonic()
        client = mcp_sync.connect(front.url, timeout=5, probe_timeout=TIMEOUT)
        took = time.monotonic() - started
        try:
            assert front.hostile_started.is_set()
            assert client.protocol_version == "2025-11-25"
            assert took < TIMEOUT + SLACK, f"connect() returned after {took:.2f} s"
        finally:
            client.close()


@pytest.mark.parametrize("fault", ["trickle_body", "trickle_head", "endless_continue"])
def test_initialize_is_bounded_by_the_timeout_against_a_trickling_server(upstream, fault):
    with HostileFront(upstream.url, {"initialize": FAULTS[fault]}) as front:
        started = time.monotonic()
        with pytest.raises(McpError):
            mcp_sync.connect(front.url, protocol="2025-11-25", timeout=TIMEOUT).close()
        took = time.monotonic() - started
        assert front.hostile_started.is_set()
        assert took < TIMEOUT + SLACK, f"connect() raised after {took:.2f} s"


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("fault", ["hang_after_headers", "trickle_body", "trickle_sse"])
def test_interrupt_main_lands_during_an_http_call(upstream, fault, protocol):
    """`_thread.interrupt_main()` (IDLE, some notebook front ends) raises no
    signal that would cut a blocked read short: the read must wake for it."""
    assert threading.current_thread() is threading.main_thread()
    with HostileFront(upstream.url, {"tools/call": FAULTS[fault]}) as front:
        with mcp_sync.connect(front.url, protocol=protocol) as client:
            fired: list[float] = []

            def interrupt() -> None:
                front.hostile_started.wait(10)
                fired.append(time.monotonic())
                _thread.interrupt_main()

            timer = threading.Thread(target=interrupt)
            timer.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    client.call_tool("echo", {"text": "x"}, timeout=30)
                landed = time.monotonic()
            finally:
                timer.join()
            assert landed - fired[0] < 0.2 + 0.1, f"the interrupt landed {landed - fired[0]:.2f} s late"
            # Cancelled like Ctrl-C: the hostile answer's connection is closed.
            assert front.hung_up.wait(5)
            assert client.list_tools()


@pytest.mark.parametrize("protocol", ERAS)
def test_endless_interim_answers_are_refused_even_without_a_deadline(upstream, protocol):
    from tests.servers.hostile_http import many_continues

    with HostileFront(upstream.url, {"tools/call": many_continues}) as front:
        with mcp_sync.connect(front.url, protocol=protocol) as client:
            with pytest.raises(mcp_sync.ConnectError, match="interim"):
                client.call_tool("echo", {"text": "x"}, timeout=None)
            assert front.hung_up.wait(5)
            assert client.list_tools()


def test_a_session_id_that_is_not_visible_ascii_is_refused(upstream):
    def bad_session(front, sock, message):
        body = (b'{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25",'
                b'"capabilities":{},"serverInfo":{"name":"x","version":"1"}}}' % str(message["id"]).encode())
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: a b\x7f\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"initialize": bad_session}) as front:
        with pytest.raises(mcp_sync.InvalidMessage, match="not visible ASCII"):
            mcp_sync.connect(front.url, protocol="2025-11-25", timeout=5)


def test_an_encoded_answer_is_refused_not_decoded(upstream):
    # gzip and deflate are decoded (tests/transports/test_http_compression.py).
    import gzip
    import json

    def gzipped(front, sock, message):
        body = gzip.compress(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                         "result": {"content": []}}).encode())
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: br\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": gzipped}) as front:
        with mcp_sync.connect(front.url) as client:
            with pytest.raises(mcp_sync.InvalidMessage, match="Content-Encoding 'br'"):
                client.call_tool("echo", {"text": "x"}, timeout=5)
            assert client.list_tools()



@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_request_sent_again_times_out_naming_the_calls_own_timeout(upstream, protocol):
    # The first attempt's connection is closed without an answer 0.3 s
    # into the call, and a tools/list (safe to send again) is sent again,
    # with what is left of the call's time. It timed out saying "timed out
    # after 0.69 s" (`timeout` 0.69): not what the caller passed.
    attempts: list[dict] = []

    def close_then_hang(front, sock, message):
        attempts.append(message)
        if len(attempts) == 1:
            front.stopping.wait(0.3)  # part of the call's time goes to the first attempt
            return  # the front then closes the connection: no answer
        front.stopping.wait(30)  # the attempt sent again is never answered

    with HostileFront(upstream.url, {"tools/list": close_then_hang}) as front:
        with mcp_sync.connect(front.url, protocol=protocol, timeout=10) as client:
            with pytest.raises(RequestTimeout) as caught:
                client.list_tools(timeout=1)
    assert len(attempts) == 2
    assert caught.value.timeout == 1 and "after 1 s" in str(caught.value), caught.value
