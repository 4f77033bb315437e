"""Authorization requests are bounded in time and size, whatever the server sends.

`OAuth(timeout=T)` is a total for one request to an authorization server
or metadata URL (not a limit per socket read), `authorization_timeout`
bounds all the requests of one authorization, and every body is read to a
byte limit, compressed or not. The hostile servers here are raw sockets on
127.0.0.1.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import tracemalloc
import zlib

import pytest

import mcp_sync
from mcp_sync.auth import AuthorizationError, AuthorizationRequired, HeadlessRedirect, OAuth
from mcp_sync.auth._http import fetch
from mcp_sync.testing.auth import AuthServer, ProtectedMCP
from tests.helpers import SLACK

TRICKLE_GAP = 0.1  # seconds between two bytes
TRICKLED = 40      # bytes: a trickle lasts 4 s, so a request not bounded in total takes that long


class RawServer:
    """A TCP server on 127.0.0.1 that answers every connection with `answer(conn)`."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.stop = threading.Event()
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> RawServer:
        self._accepter.start()
        return self

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(5)
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(65536)
                    if not data:
                        return
                    head += data
                self.answer(self, conn)
            except OSError:
                pass  # the client gave up: what these tests want

    def trickle(self, conn: socket.socket, data: bytes) -> None:
        for byte in data:
            if self.stop.wait(TRICKLE_GAP):
                return
            conn.sendall(bytes([byte]))

    def close(self) -> None:
        self.stop.set()
        self._accepter.join()
        for thread in self._threads:
            thread.join()
        self._sock.close()


def trickled_head(server: RawServer, conn: socket.socket) -> None:
    server.trickle(conn, b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (TRICKLED - 26) + b"\r\n\r\n")


def trickled_body(server: RawServer, conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % TRICKLED)
    server.trickle(conn, b'{"pad": "' + b"a" * (TRICKLED - 11) + b'"}')


def answer_with(status: bytes, headers: dict[str, str], body: bytes):
    def answer(server: RawServer, conn: socket.socket) -> None:
        lines = [b"HTTP/1.1 " + status] + [f"{k}: {v}".encode() for k, v in headers.items()]
        conn.sendall(b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body)
    return answer


@pytest.fixture
def raw(serve):
    def start(answer) -> RawServer:
        return serve(RawServer(answer))
    return start


def protected_by(serve, issuer: str) -> ProtectedMCP:
    """A protected MCP server whose metadata names `issuer` as its authorization server."""
    mcp = serve(ProtectedMCP(serve(AuthServer())))
    mcp.prm_override = {"resource": mcp.url, "authorization_servers": [issuer]}
    return mcp


def timed(fn):
    start = time.monotonic()
    try:
        fn()
    except Exception as exc:
        return exc, time.monotonic() - start
    return None, time.monotonic() - start


# -- time ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [trickled_head, trickled_body], ids=["head", "body"])
def test_the_timeout_bounds_a_whole_request_to_the_authorization_server(serve, raw, answer):
    slow = raw(answer)
    mcp = protected_by(serve, slow.url)
    error, elapsed = timed(lambda: mcp_sync.connect(mcp.url, auth=OAuth(redirect=HeadlessRedirect(), timeout=1)))
    assert isinstance(error, AuthorizationError), error
    assert "did not complete within 1 s" in str(error) and slow.url in str(error)
    assert elapsed < 1 + SLACK, elapsed


@pytest.mark.parametrize("answer", [trickled_head, trickled_body], ids=["head", "body"])
def test_the_headless_redirect_timeout_bounds_the_whole_request(raw, answer):
    slow = raw(answer)
    error, elapsed = timed(lambda: HeadlessRedirect(timeout=1).authorize(slow.url + "/authorize?x=1"))
    assert isinstance(error, AuthorizationError) and "did not complete within 1 s" in str(error), error
    assert elapsed < 1 + SLACK, elapsed


def test_the_authorization_timeout_bounds_all_the_requests_of_an_authorization(serve, raw):
    slow = raw(trickled_body)
    mcp = protected_by(serve, slow.url)
    oauth = OAuth(redirect=HeadlessRedirect(), timeout=10, authorization_timeout=1)
    error, elapsed = timed(lambda: mcp_sync.connect(mcp.url, auth=oauth))
    assert isinstance(error, AuthorizationError), error
    assert "authorization_timeout" in str(error) and "1 s" in str(error)
    assert elapsed < 1 + SLACK, elapsed


def test_the_time_a_person_takes_does_not_count_against_the_authorization_timeout(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))

    class SlowPerson(HeadlessRedirect):
        def authorize(self, authorization_url: str) -> str:
            time.sleep(1.2)  # the person reading the consent page (longer than the whole budget)
            return super().authorize(authorization_url)

    with mcp_sync.connect(mcp.url, auth=OAuth(redirect=SlowPerson(), authorization_timeout=1)) as client:
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"


@pytest.mark.parametrize("value,error", [(0, ValueError), (-1, ValueError), (float("inf"), ValueError),
                                         (float("nan"), ValueError), (True, TypeError), ("30", TypeError)])
def test_timeouts_must_be_positive_numbers(value, error):
    with pytest.raises(error, match="timeout"):
        OAuth(timeout=value)
    with pytest.raises(error, match="authorization_timeout"):
        OAuth(authorization_timeout=value)


# -- size ------------------------------------------------------------------------------------------

BOMB_SIZE = 64 * 1024 * 1024  # decoded; about 64 KiB on the wire


@pytest.fixture(scope="module")
def bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    return b"".join(packer.compress(zeros) for _ in range(BOMB_SIZE // len(zeros))) + packer.flush()


def peak_memory(fn):
    """(the exception `fn` raised, the peak of Python allocations while it ran, in bytes)."""
    tracemalloc.start()
    try:
        error, _ = timed(fn)
        return error, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_bomb_from_the_authorization_server_is_refused_without_decoding_it(serve, raw, bomb):
    sender = raw(answer_with(b"200 OK", {"Content-Type": "application/json", "Content-Encoding": "gzip",
                                         "Content-Length": str(len(bomb))}, bomb))
    mcp = protected_by(serve, sender.url)
    error, peak = peak_memory(lambda: mcp_sync.connect(mcp.url, auth=OAuth(redirect=HeadlessRedirect())))
    assert isinstance(error, AuthorizationError) and "larger than 262144 bytes" in str(error), error
    assert peak < 16 * 1024 * 1024, peak


def test_a_gzip_bomb_at_the_authorization_endpoint_is_read_no_further_than_the_preview(raw, bomb):
    sender = raw(answer_with(b"200 OK", {"Content-Type": "text/html", "Content-Encoding": "gzip",
                                         "Content-Length": str(len(bomb))}, bomb))
    error, peak = peak_memory(lambda: HeadlessRedirect(timeout=5).authorize(sender.url + "/authorize"))
    assert isinstance(error, AuthorizationRequired) and "HTTP 200 without a redirect" in str(error), error
    assert peak < 16 * 1024 * 1024, peak


def test_a_long_page_at_the_authorization_endpoint_is_read_no_further_than_the_preview(raw):
    def long_page(server, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (65536, b"<p>" * 21845 + b"x")
        for _ in range(512):  # 32 MiB: long enough to show, and finite (a client reading it all survives)
            if server.stop.is_set():
                return
            conn.sendall(chunk)
        conn.sendall(b"0\r\n\r\n")

    sender = raw(long_page)
    error, peak = peak_memory(lambda: HeadlessRedirect(timeout=5).authorize(sender.url + "/authorize"))
    assert isinstance(error, AuthorizationRequired) and "<p><p>" in str(error), error
    assert peak < 16 * 1024 * 1024, peak


def test_an_answer_in_an_encoding_the_client_cannot_decode_is_refused(serve, raw):
    sender = raw(answer_with(b"200 OK", {"Content-Type": "application/json", "Content-Encoding": "br",
                                         "Content-Length": "4"}, b"\x0b\x01\x80{"))
    mcp = protected_by(serve, sender.url)
    with pytest.raises(AuthorizationError, match="encoded with 'br'"):
        mcp_sync.connect(mcp.url, auth=OAuth(redirect=HeadlessRedirect()))


def test_a_small_compressed_answer_is_decoded(raw):
    """A server that compresses although the client asked for identity still works."""
    document = {"issuer": "x", "list": list(range(1000))}
    body = gzip.compress(json.dumps(document).encode())
    sender = raw(answer_with(b"200 OK", {"Content-Encoding": "gzip", "Content-Length": str(len(body))}, body))
    assert json.loads(fetch("GET", sender.url + "/doc", timeout=5).body) == document
