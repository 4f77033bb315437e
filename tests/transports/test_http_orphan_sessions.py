"""Initialize-era sessions the client opened but will never use: a renewal
of a lost session whose `initialize` the client gave up on while the server
was still working on it (slow, not dead) leaves a session on the server,
which the client must end (DELETE) once it can know its id.

Servers are real ones on 127.0.0.1. `LateSessions` is a small
initialize-era server that, like the SDKs' servers, keeps a session from
its `initialize` until a DELETE whether or not the client read the answer;
it holds one `initialize` until the test lets it through. The bundled
`HTTPServer` ends a session itself when its `initialize` answer cannot be
delivered, so it shows no orphan (see the last test).
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import GENEROUS, wait_until
from tests.servers.raw_http import RawHTTPServer

LEGACY = "2025-11-25"


class LateSessions(RawHTTPServer):
    """An initialize-era MCP server (HTTP/1.1, one thread per connection)
    whose sessions live from `initialize` until a DELETE: ids "s1", "s2",
    ... in `sessions`, the ended ones in `deleted`. The `hold`th
    `initialize` (from 1) waits for `release` before it answers: in mode
    "json" the whole answer waits; in mode "sse" the head, with the
    session id, goes out at once and the result event waits. `expire()`
    forgets every session (later requests with its id get 404), as a
    restarted server does. GET is refused (405): no GET stream."""

    def __init__(self, *, hold: int, mode: str, fixed_id: str | None = None) -> None:
        #: With `fixed_id`, every `initialize` names that one session (a
        #: server that keys sessions by user, not by handshake).
        self.fixed_id = fixed_id
        self.hold = hold
        self.mode = mode
        self.held = threading.Event()
        self.sessions: set[str] = set()
        self.deleted: list[str] = []
        self.initializes = 0
        super().__init__()

    def expire(self) -> None:
        with self._lock:
            self.sessions.clear()

    def handle(self, sock: socket.socket, method: bytes, headers: dict[str, str], body: Any) -> bool:
        return self._answer(sock, method, headers.get("mcp-session-id"), body)

    @staticmethod
    def _send(sock: socket.socket, status: str, payload: Any = None, extra: str = "") -> bool:
        data = b"" if payload is None else json.dumps(payload).encode()
        kind = "Content-Type: application/json\r\n" if payload is not None else ""
        sock.sendall(f"HTTP/1.1 {status}\r\n{kind}{extra}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        return True

    def _answer(self, sock: socket.socket, method: bytes, session: str | None, body: Any) -> bool:
        if method == b"GET":
            return self._send(sock, "405 Method Not Allowed", extra="Allow: POST, DELETE\r\n")
        if method == b"DELETE":
            with self._lock:
                known = session in self.sessions
                if known:
                    self.sessions.discard(session)  # type: ignore[arg-type]
                    self.deleted.append(session)  # type: ignore[arg-type]
            return self._send(sock, "200 OK" if known else "404 Not Found")
        rpc = body.get("method")
        if session is None and rpc == "initialize":
            return self._initialize(sock, body)
        with self._lock:
            known = session in self.sessions
        if not known:
            return self._send(sock, "404 Not Found", {"jsonrpc": "2.0", "id": body.get("id"),
                                                      "error": {"code": -32001, "message": "Session not found"}})
        if "id" not in body or rpc is None:
            return self._send(sock, "202 Accepted")
        if rpc == "tools/call":
            text = body["params"]["arguments"]["text"]
            result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        else:
            result = {}
        return self._send(sock, "200 OK", {"jsonrpc": "2.0", "id": body["id"], "result": result})

    def _initialize(self, sock: socket.socket, body: Any) -> bool:
        with self._lock:
            self.initializes += 1
            number = self.initializes
            session = self.fixed_id or f"s{number}"
            self.sessions.add(session)  # the server made it, whoever reads the answer
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": {
            "protocolVersion": body["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "late", "version": "1"}}}
        if number != self.hold:
            return self._send(sock, "200 OK", answer, f"Mcp-Session-Id: {session}\r\n")
        self.held.set()
        if self.mode == "json":
            self.release.wait(30)  # slow, not dead: it answers once let through
            return self._send(sock, "200 OK", answer, f"Mcp-Session-Id: {session}\r\nConnection: close\r\n")
        sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: {session}\r\n"
                     "Connection: close\r\n\r\n".encode())
        self.release.wait(30)
        sock.sendall(f"event: message\ndata: {json.dumps(answer)}\n\n".encode())
        return False


@pytest.fixture
def late_sessions():
    made: list[LateSessions] = []

    def make(**options: Any) -> LateSessions:
        server = LateSessions(**options)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


def give_up_on_a_renewal(client: Any, server: LateSessions) -> None:
    """Lose the session, and let a call's renewal time out on the held
    `initialize`; then the healer renews it (the next `initialize`)."""
    server.expire()
    with pytest.raises(mcp_sync.McpError):
        client.call_tool("echo", {"text": "x"}, timeout=1.0)  # 404, then the renewal outlasts the call
    assert server.held.is_set()
    assert client.call_tool("echo", {"text": "y"}, timeout=20).text == "y"  # in the healer's new session


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_a_session_whose_initialize_the_client_gave_up_on_is_deleted(no_leaks, late_sessions, mode):
    """json: the answer (and its session id) comes after the client gave
    up: it is still read, and the session it names ended. sse: the head
    named the session before the client gave up: it is ended once the
    next renewal replaced it. (Before: never; the session stayed open on
    the server until it expired it.)"""
    server = late_sessions(hold=2, mode=mode)
    client = mcp_sync.connect(server.url, protocol=LEGACY)
    try:
        give_up_on_a_renewal(client, server)
        server.release.set()  # the late answer goes out
        ended = wait_until(lambda: "s2" in server.deleted, 10)
        live = set(server.sessions)
    finally:
        client.close()
    assert ended, f"sessions {sorted(server.sessions)}, deleted {server.deleted}"
    assert live == {"s3"}
    assert server.sessions == set()  # s3 too, by close()


def test_close_while_a_late_answer_is_awaited_ends_at_once(no_leaks, late_sessions):
    """The late answer never comes before close(): close() stops the wait
    for it (no thread left); that session's id cannot be known, and the
    server keeps it until it expires it."""
    server = late_sessions(hold=2, mode="json")
    client = mcp_sync.connect(server.url, protocol=LEGACY)
    try:
        give_up_on_a_renewal(client, server)
    finally:
        client.close()
    assert server.sessions == {"s2"}
    assert server.deleted == ["s3"]


def test_the_bundled_server_ends_a_session_whose_initialize_answer_was_not_read(no_leaks):
    """Not a defect of the client with this server: `HTTPServer` ends a
    session whose initialize answer it could not deliver."""
    held, release, seen = threading.Event(), threading.Event(), []

    def gate(request: Any) -> None:
        if request.method == "POST" and request.headers.get("Mcp-Session-Id") is None:
            seen.append(1)
            if len(seen) == 2:
                held.set()
                release.wait(30)
        return None

    with HTTPServer(demo_server(), gate=gate, response_mode="json") as httpd:
        client = mcp_sync.connect(httpd.url, protocol=LEGACY)
        try:
            httpd.expire_sessions()
            with pytest.raises(mcp_sync.McpError):
                client.call_tool("echo", {"text": "x"}, timeout=1.0)
            assert held.is_set()
            assert client.call_tool("echo", {"text": "y"}, timeout=20).text == "y"
            release.set()
            assert wait_until(lambda: httpd.server.served("initialize") == 3, 10)
            assert wait_until(lambda: httpd.sessions == 1, 10)
        finally:
            release.set()
            client.close()
        assert httpd.sessions == 0


def test_the_session_in_use_is_not_ended_when_a_late_answer_names_it(no_leaks, late_sessions, monkeypatch):
    """A server naming one session for every `initialize`: the late answer
    names the session the client renewed into, which it must not DELETE.
    (Before: it was deleted under the client, and the next call had to
    renew again.)"""
    from mcp_sync.transports.http import HTTPTransport

    read, ended = threading.Event(), []
    late, end = HTTPTransport._late_session, HTTPTransport._end_orphan

    def observed(self: Any, exchange: Any, response: Any) -> None:
        try:
            late(self, exchange, response)
        finally:
            read.set()

    def ending(self: Any, session: str, origin: Any) -> None:
        ended.append(session)
        end(self, session, origin)

    monkeypatch.setattr(HTTPTransport, "_late_session", observed)
    monkeypatch.setattr(HTTPTransport, "_end_orphan", ending)
    server = late_sessions(hold=2, mode="json", fixed_id="user-42")
    client = mcp_sync.connect(server.url, protocol=LEGACY)
    try:
        give_up_on_a_renewal(client, server)
        server.release.set()  # the late answer goes out, naming "user-42"
        assert read.wait(GENEROUS)
        assert ended == [] and server.sessions == {"user-42"}
        assert client.call_tool("echo", {"text": "z"}, timeout=20).text == "z"
        assert server.deleted == []
    finally:
        client.close()
