"""Calls answered by an SSE stream give their connection back for reuse.

A server ends a request's SSE stream right after the response (the spec's
SHOULD), often in a write of its own a moment later: the official SDK's
server writes the terminating chunk once its event generator ends. The
client reads that end on the caller's thread before the call returns, so
the next call finds the connection idle instead of dialing a new one."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.transports import pool
from tests.helpers import SLACK


class LateEnd:
    """A loopback front for an `HTTPServer(response_mode="sse")`: relays
    each request and answers with the upstream body as one chunk, then the
    terminating chunk `gap` seconds later. Counts the connections it
    accepted (`accepted`)."""

    def __init__(self, upstream: HTTPServer, gap: float) -> None:
        self.upstream = upstream
        self.gap = gap
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/mcp"

    def __enter__(self) -> LateEnd:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for sock in self._socks:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for thread in self._threads:
            thread.join(5)

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as real servers do
            with self._lock:
                self.accepted += 1
                self._socks.append(sock)
            self._spawn(self._serve, sock)

    def _serve(self, sock: socket.socket) -> None:
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream.port, timeout=10)
        reader = sock.makefile("rb")
        try:
            while True:
                line = reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers = {}
                while (header := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode("latin-1").partition(":")
                    headers[name.strip()] = value.strip()
                body = reader.read(int(headers.get("Content-Length", "0")))
                upstream.request(method, path, body=body or None, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                keep = "".join(f"{name}: {value}\r\n" for name, value in answer.getheaders()
                               if name.lower() in ("content-type", "mcp-session-id"))
                if answer.getheader("Content-Type", "").startswith("text/event-stream"):
                    sock.sendall(f"HTTP/1.1 {answer.status} OK\r\n{keep}Transfer-Encoding: chunked\r\n\r\n".encode()
                                 + b"%x\r\n%s\r\n" % (len(data), data))
                    if self._stopping.wait(self.gap):
                        return
                    sock.sendall(b"0\r\n\r\n")
                else:
                    sock.sendall(f"HTTP/1.1 {answer.status} OK\r\n{keep}Content-Length: {len(data)}\r\n\r\n".encode()
                                 + data)
        except OSError:
            return
        finally:
            reader.close()
            sock.close()
            upstream.close()


@pytest.fixture
def dials(monkeypatch):
    """How many connections the client dialed (a list of one counter)."""
    count = [0]
    original = pool.Dialer.dial

    def counting(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pool.Dialer, "dial", counting)
    return count


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_sequential_sse_answers_reuse_one_connection(dials, protocol):
    with HTTPServer(demo_server(), response_mode="sse") as httpd, \
            mcp_sync.connect(httpd.url, protocol=protocol) as client:
        client.call_tool("echo", {"text": "first"})
        before = dials[0]
        for i in range(50):
            assert client.call_tool("echo", {"text": f"n{i}"}).text == f"n{i}"
        assert dials[0] - before == 0


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_stream_that_ends_a_moment_after_its_response_is_reused(protocol):
    with HTTPServer(demo_server(), response_mode="sse", get_stream=False) as httpd, LateEnd(httpd, 0.005) as front:
        with mcp_sync.connect(front.url, protocol=protocol) as client:
            client.call_tool("echo", {"text": "first"})
            before = front.accepted
            for i in range(50):
                assert client.call_tool("echo", {"text": f"n{i}"}).text == f"n{i}"
            # Reused: a call that starts inside the 5 ms before the stream
            # ends may take a new connection on a slow machine, but not many.
            assert front.accepted - before <= 5


def test_a_stream_left_open_after_its_response_does_not_hold_every_call(dials):
    """A server that keeps its streams open after the response: the caller
    stops waiting for their end once it has seen one that did not come
    soon, and every call returns as soon as its response arrived."""
    with HTTPServer(demo_server(), response_mode="sse", get_stream=False) as httpd, LateEnd(httpd, 3.0) as front:
        with mcp_sync.connect(front.url, protocol="2026-07-28") as client:
            client.call_tool("echo", {"text": "first"})
            client.call_tool("echo", {"text": "second"})
            started = time.monotonic()
            for i in range(10):
                assert client.call_tool("echo", {"text": f"n{i}"}).text == f"n{i}"
            assert time.monotonic() - started < SLACK  # not one 3 s late end per call


def test_progress_before_the_response_still_reaches_the_caller_while_it_waits():
    with HTTPServer(demo_server(), response_mode="sse") as httpd, mcp_sync.connect(httpd.url) as client:
        seen = []
        result = client.call_tool("countdown", {"steps": 3, "delay": 0.01},
                                  progress=lambda p: seen.append((p.progress, threading.get_ident())))
        assert result.text == "liftoff"
        assert [p for p, _ in seen] == [1, 2, 3] and {t for _, t in seen} == {threading.get_ident()}


def test_a_connection_idle_past_max_idle_seconds_is_not_reused(dials, monkeypatch):
    # Servers close idle keep-alives after about 5 s; reusing one as they do
    # loses the request, so one idle past MAX_IDLE_SECONDS is closed instead.
    with HTTPServer(demo_server()) as httpd, mcp_sync.connect(httpd.url) as client:
        client.call_tool("echo", {"text": "first"})
        before = dials[0]
        assert client.call_tool("echo", {"text": "again"}).text == "again"
        assert dials[0] == before  # idle a moment: reused
        monkeypatch.setattr(pool, "MAX_IDLE_SECONDS", -1.0)  # now every idle connection is too old
        assert client.call_tool("echo", {"text": "late"}).text == "late"
        assert dials[0] == before + 1
