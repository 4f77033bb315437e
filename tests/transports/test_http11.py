"""The HTTP/1.1 response reader of the POST fast path, byte by byte, and the
request head the transport writes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.transports.http11 import MAX_HEADERS, MAX_LINE, Response, ResponseError


@pytest.fixture
def wire() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(server end, client end) of a connected socket pair."""
    server, client = socket.socketpair()
    client.settimeout(5)
    yield server, client
    server.close()
    client.close()


def answer(wire: tuple[socket.socket, socket.socket], data: bytes, *, close: bool = False) -> Response:
    server, client = wire
    server.sendall(data)
    if close:
        server.shutdown(socket.SHUT_WR)
    response = Response(client)
    response.begin()
    return response


def test_a_content_length_body_is_read_exactly_and_the_response_ends(wire):
    response = answer(wire, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhelloEXTRA")
    assert (response.status, response.reason) == (200, "OK")
    assert response.headers.get("content-type") == "application/json"
    assert response.headers.get("CONTENT-TYPE") == "application/json"
    assert not response.isclosed()
    assert response.read(100) == b"hello"  # never past the body: EXTRA belongs to the next answer
    assert response.isclosed() and response.read(1) == b""
    assert not response.will_close


def test_read1_returns_what_arrived_and_read_waits_for_the_rest(wire):
    server, _ = wire
    response = answer(wire, b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabc")
    assert response.read1(100) == b"abc"
    server.sendall(b"def")
    assert response.read(10) == b"def"
    assert response.isclosed()


def test_a_chunked_body_with_extensions_and_trailers(wire):
    body = b"4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n"
    response = answer(wire, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    assert response.read(6) == b"Wikipe"
    assert response.read() == b"dia in\r\n\r\nchunks."
    assert response.isclosed()


def test_a_body_without_length_runs_until_the_server_closes(wire):
    response = answer(wire, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n", close=True)
    assert response.will_close
    assert response.read() == b"data: 1\n\n"
    assert response.isclosed()


@pytest.mark.parametrize("status", [204, 304])
def test_no_body_statuses(wire, status):
    response = answer(wire, f"HTTP/1.1 {status} X\r\nContent-Length: 10\r\n\r\n".encode())
    assert response.isclosed() and response.read() == b""


def test_an_interim_100_answer_is_skipped(wire):
    response = answer(wire, b"HTTP/1.1 100 Continue\r\nX-Interim: yes\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
    assert response.status == 202
    assert "x-interim" not in response.headers
    assert response.isclosed()


def test_repeated_fields_are_joined_and_connection_close_is_noted(wire):
    response = answer(wire, b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer a=1\r\n"
                            b"www-authenticate: DPoP b=2\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert response.headers.get("www-authenticate") == "Bearer a=1, DPoP b=2"
    assert list(response.headers.items()) == [("WWW-Authenticate", "Bearer a=1, DPoP b=2"), ("Connection", "close"),
                                              ("Content-Length", "0")]
    assert response.will_close


@pytest.mark.parametrize("raw, message", [
    (b"", "without answering"),
    (b"ICY 200 OK\r\n\r\n", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 20 OK\r\n\r\n", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line"),
    (b"HTTP/1.1 200 OK\r\n folded: value\r\n\r\n", "malformed header line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", "invalid Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "invalid Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: a", "ended inside its header block"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n", "more than"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"y" * MAX_LINE + b"\r\n\r\n", "longer than"),
])
def test_a_malformed_head_is_a_clear_error(wire, raw, message):
    with pytest.raises(ResponseError, match=message):
        answer(wire, raw, close=True)


@pytest.mark.parametrize("raw, message", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "10 bytes short|5 bytes short"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "invalid chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "inside a chunk"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX", "not followed by CRLF"),
])
def test_a_malformed_body_is_a_clear_error(wire, raw, message):
    response = answer(wire, raw, close=True)
    with pytest.raises(ResponseError, match=message):
        response.read()


def test_shutdown_unblocks_a_read_waiting_on_another_thread(wire):
    response = answer(wire, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    got: list[object] = []

    def reader() -> None:
        try:
            got.append(response.read1(100))
        except (OSError, ValueError) as exc:
            got.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    response.shutdown()
    thread.join(5)
    assert not thread.is_alive()
    assert got == [b""] or isinstance(got[0], (OSError, ValueError))


# -- the request head the transport writes -------------------------------------------------


class Injecting:
    """A token provider whose token would add a header, if let through."""

    def token(self) -> str:
        return "abc\r\nX-Injected: yes"


def test_a_token_that_would_add_a_header_is_refused_and_never_sent():
    with HTTPServer(demo_server()) as httpd:
        # The pin's probe is the first request: connect() refuses.
        with pytest.raises(mcp_sync.ConnectError, match="CR, LF or NUL"):
            mcp_sync.connect(httpd.url, auth=Injecting(), protocol="2026-07-28")
        assert httpd.requests == []  # nothing at all was sent


def test_the_request_head_carries_host_user_agent_and_length():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url) as client:
            client.call_tool("echo", {"text": "é"})
        post = [r for r in httpd.requests if r.method == "POST"][-1]
        assert post.headers.get("Host") == f"127.0.0.1:{httpd.url.split(':')[2].split('/')[0]}"
        assert post.headers.get("User-Agent").startswith("mcp-sync/")
        assert int(post.headers.get("Content-Length")) == len(post.body)
        assert post.json["params"]["arguments"] == {"text": "é"}


def test_an_answer_saying_connection_close_makes_the_next_request_open_a_new_connection(monkeypatch):
    from mcp_sync.transports.pool import Dialer

    connects = []
    real_dial = Dialer.dial
    real_begin = Response.begin

    def counting_dial(self, exchange, deadline):
        connects.append(exchange)
        return real_dial(self, exchange, deadline)

    def closing_begin(self):
        real_begin(self)
        self.will_close = True  # as if the server had sent "Connection: close"

    with HTTPServer(demo_server()) as httpd:
        monkeypatch.setattr(Dialer, "dial", counting_dial)
        monkeypatch.setattr(Response, "begin", closing_begin)
        with mcp_sync.connect(httpd.url, protocol="2026-07-28") as client:
            for n in range(4):
                assert client.call_tool("echo", {"text": str(n)}).text == str(n)
    assert len(connects) == 5  # the pin's probe, then the four calls


@pytest.mark.parametrize("head,closes", [
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", True),  # 1.0 closes by default
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", False),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", False),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", True),
])
def test_an_http10_answer_without_keep_alive_is_not_reused(wire, head, closes):
    """A connection an HTTP/1.0 server closes after its answer must not go
    back to the pool (the next request would find it closed)."""
    response = answer(wire, head)
    assert response.read(10) == b"ok"
    assert response.will_close is closes


# -- answers the client did not ask for, and conflicting framing -------------------------------


def test_an_unrequested_101_answer_is_final_and_its_connection_is_never_reused(wire):
    # The client never asks for an upgrade: after a 101 the connection
    # speaks something else (or nothing), so it must not go back to the pool.
    response = answer(wire, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n")
    assert response.status == 101
    assert response.isclosed() and response.read() == b""
    assert response.will_close


@pytest.mark.parametrize("length", [b"5", b"999999999999"])
def test_transfer_encoding_overrides_content_length_and_the_connection_is_not_reused(wire, length):
    # RFC 9112 §6.3: with both, the chunked coding frames the body, and
    # the connection is closed after the message (a smuggling attempt).
    body = b"7\r\nchunked\r\n5\r\n wins\r\n0\r\n\r\n"
    response = answer(wire, b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
                      + body + b"NEXT")
    assert response.will_close
    assert response.length is None  # no Content-Length frames this body
    assert response.read() == b"chunked wins"
    assert response.isclosed()


def _hold_until_hangup(head: bytes, body: bytes = b""):
    """A `HostileFront` fault: this answer, then nothing more on the
    connection until the client closes it (`front.hung_up` then says so)."""
    from tests.servers.hostile_http import wait_for_hangup

    def fault(front, sock, message):
        sock.sendall(head + body)
        wait_for_hangup(front, sock)

    return fault


def _json_answer(message, text: str) -> bytes:
    import json

    return json.dumps({"jsonrpc": "2.0", "id": message["id"],
                       "result": {"content": [{"type": "text", "text": text}], "resultType": "complete"}}).encode()


def test_an_unrequested_101_to_a_post_is_an_error_and_the_next_request_gets_a_new_connection():
    from tests.servers.hostile_http import HostileFront

    fault = _hold_until_hangup(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n")
    with HTTPServer(demo_server()) as upstream, HostileFront(upstream.url, {"tools/call": fault}) as front:
        with mcp_sync.connect(front.url, protocol="2026-07-28", pool_size=1) as client:
            with pytest.raises(mcp_sync.HTTPStatusError, match="101 .*did not ask for") as caught:
                client.call_tool("echo", {"text": "x"}, timeout=5)
            assert caught.value.status == 101
            # Written on the upgraded connection, this would wait its whole timeout.
            assert [tool.name for tool in client.list_tools(timeout=5)]
            assert front.hung_up.wait(5), "the upgraded connection was kept open"


@pytest.mark.parametrize("length, coding", [("5", None), ("999999999999", None), ("999999999999", "gzip")])
def test_a_chunked_json_answer_with_a_content_length_too_is_read_chunked_and_its_connection_closed(length, coding):
    import gzip

    from tests.servers.hostile_http import HostileFront

    def fault(front, sock, message):
        body = _json_answer(message, "chunked wins")
        if coding is not None:
            body = gzip.compress(body)
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %s\r\n"
                b"Transfer-Encoding: chunked\r\n" % length.encode())
        if coding is not None:
            head += b"Content-Encoding: %s\r\n" % coding.encode()
        _hold_until_hangup(head + b"\r\n", b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))(front, sock, message)

    with HTTPServer(demo_server()) as upstream, HostileFront(upstream.url, {"tools/call": fault}) as front:
        with mcp_sync.connect(front.url, protocol="2026-07-28", pool_size=1) as client:
            assert client.call_tool("echo", {"text": "x"}, timeout=5).text == "chunked wins"
            assert [tool.name for tool in client.list_tools(timeout=5)]
            assert front.hung_up.wait(5), "a connection whose answer had both framings was kept"
