"""Answers the server waits for, over Streamable HTTP: the POST of an answer
to a server request (through the engine's sender) is never dropped in
silence.

What is checked: an answer goes out while every request slot is held (the
one-way budget is its own); an answer whose POST is refused with a 5xx, or
whose connection is reset, is sent again within the one-way bound and the
server gets it; one that still cannot be delivered when the bound is spent
is logged at warning and counted.

Servers are real ones on 127.0.0.1: the bundled `HTTPServer` (its `gate`
refuses the POSTs a test arms it for), or `OneWayServer`, a few lines that
answer one-way POSTs and can reset or refuse them.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
import time
from typing import Any

import pytest

import mcp_sync
from mcp_sync import HTTP
from mcp_sync.testing import GateAnswer, HTTPServer, Server
from tests.helpers import GENEROUS, SLACK, wait_until
from tests.servers.raw_http import RawHTTPServer

LEGACY = "2025-11-25"

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def person(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


def answer_posts(httpd: HTTPServer) -> list[Any]:
    """The POSTs of answers (JSON-RPC responses) the server received."""
    return [r for r in httpd.requests if r.method == "POST" and isinstance(r.json, dict)
            and "method" not in r.json and ("result" in r.json or "error" in r.json)]


class Sink:
    def deliver(self, message: dict[str, Any], related_to: Any = None) -> None:
        pass

    def transport_failed(self, error: Exception) -> None:
        pass

    def request_failed(self, request_id: Any, error: Exception) -> None:
        pass

    def session_lost(self, error: Exception) -> None:
        pass

    def events_lost(self, seconds: float) -> None:
        pass


class OneWayServer(RawHTTPServer):
    """Answers every POST with 202 and records its body, except that the
    first `resets` POSTs of a JSON-RPC response get a TCP reset (after
    their body was read), with `hold` they wait (see `release`), and, with
    `refuse` (a status), every POST of the
    `refused` kinds ("answer", "notification") gets that status. Counts
    the POSTs of each kind in `attempts`. One thread per connection;
    `close()` joins them all."""

    def __init__(self, *, resets: int = 0, refuse: int | None = None, refused: tuple[str, ...] = ("answer",),
                 hold: bool = False, refused_ids: tuple[str, ...] | None = None) -> None:
        #: With `refused_ids`, only the answers to those ids are refused.
        self.refused_ids = refused_ids
        self.resets = resets
        self.refuse = refuse
        self.refused = refused
        #: With `hold`, the POST of an answer is read, then answered only
        #: once `release` is set (a server that does not read answers);
        #: `holding` is set once one is held.
        self.hold = hold
        self.holding = threading.Event()
        self.received: list[dict[str, Any]] = []
        self.attempts = {"answer": 0, "notification": 0}
        super().__init__()

    def handle(self, sock: socket.socket, method: bytes, headers: dict[str, str], body: Any) -> bool:
        is_answer = isinstance(body, dict) and "method" not in body
        kind = "answer" if is_answer else "notification"
        with self._lock:
            self.attempts[kind] += 1
            reset = is_answer and self.resets > 0
            if reset:
                self.resets -= 1
            refuse = self.refuse if kind in self.refused and (
                self.refused_ids is None or body.get("id") in self.refused_ids) else None
            if not reset and refuse is None:
                self.received.append(body)
        if is_answer and self.hold:
            self.holding.set()
            self.release.wait(30)
        if reset:
            # SO_LINGER 0: close() sends RST, not FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        status = b"202 Accepted" if refuse is None else b"%d Refused" % refuse
        sock.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
        return True


@pytest.fixture
def one_way_server():
    made: list[OneWayServer] = []

    def make(**options: Any) -> OneWayServer:
        server = OneWayServer(**options)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


ANSWER = {"jsonrpc": "2.0", "id": "s-1", "result": {"action": "accept", "content": {"name": "Ada"}}}


# -- not a defect: the one-way budget is its own --------------------------------------------------


def test_an_answer_goes_out_while_every_request_slot_is_held(no_leaks):
    """pool_size calls in flight, one of them asking the client: its answer
    is POSTed while no request slot is free, and the server gets it before
    any slot is given back."""
    server = Server(name="slots")
    holding = threading.Event()
    release = threading.Event()

    @server.tool()
    def hold(args: dict[str, Any], ctx: Any) -> str:
        holding.set()
        release.wait(30)
        return "held"

    @server.tool()
    def ask(args: dict[str, Any], ctx: Any) -> str:
        return str(ctx.elicit("name?", NAME_FORM, timeout=20)["content"]["name"])

    slots_when_answered: list[int] = []

    clients: list[Any] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        # On the asking call's thread, as the answer is handed to the sender.
        slots_when_answered.append(clients[0]._conn.transport._pool.in_use)
        return person(params)

    with HTTPServer(server) as httpd:
        client = mcp_sync.connect(httpd.url, protocol=LEGACY, pool_size=2, input_handlers={"form": answer})
        clients.append(client)

        results: list[Any] = []
        holder = threading.Thread(target=lambda: results.append(client.call_tool("hold", {}, timeout=30).text))
        try:
            holder.start()
            assert holding.wait(10)
            asked = client.call_tool("ask", {}, timeout=20).text
            still_held = not release.is_set() and holder.is_alive()
        finally:
            release.set()
            holder.join(15)
            client.close()
    assert asked == "Ada"
    assert still_held
    assert slots_when_answered == [2]  # both request slots taken when the answer was handed on
    assert results == ["held"]


# -- item 1: an answer's POST that fails is sent again ---------------------------------------------


def test_an_answer_refused_with_503_is_sent_again_and_reaches_the_server(no_leaks):
    """The gate refuses the first POST after the tool asks (the answer) with
    503: the client sends it again, the tool gets its answer, the call its
    result. (Before: the answer was dropped with a debug line, and the tool
    waited until the call timed out.)"""
    server = Server(name="refusing")
    armed = threading.Event()
    refused = threading.Event()

    @server.tool()
    def ask(args: dict[str, Any], ctx: Any) -> str:
        armed.set()
        return str(ctx.elicit("name?", NAME_FORM, timeout=20)["content"]["name"])

    def gate(request: Any) -> GateAnswer | None:
        if request.method == "POST" and armed.is_set() and not refused.is_set():
            refused.set()
            return GateAnswer(503, {"Content-Type": "text/plain"}, b"busy, try again")
        return None

    with HTTPServer(server, gate=gate) as httpd:
        with mcp_sync.connect(httpd.url, protocol=LEGACY, input_handlers={"form": person}) as client:
            assert client.call_tool("ask", {}, timeout=8).text == "Ada"
        attempts = answer_posts(httpd)
    assert refused.is_set()
    assert len(attempts) == 2  # the refused one, and the one the server took


def test_an_answer_whose_connection_is_reset_is_sent_again(no_leaks, one_way_server):
    server = one_way_server(resets=1)
    transport = HTTP(server.url).open()
    transport.start(Sink())
    transport.request_timeout = 10
    try:
        transport.send(ANSWER)  # returns once delivered; raised before
    finally:
        transport.close()
    assert server.attempts["answer"] == 2
    assert server.received == [ANSWER]


def test_an_answer_the_server_keeps_refusing_is_given_up_with_a_warning(no_leaks, one_way_server, caplog):
    server = one_way_server(refuse=503)
    transport = HTTP(server.url).open()
    transport.start(Sink())
    transport.request_timeout = 1.0
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_sync.transport.http"):
            with pytest.raises(mcp_sync.McpError):
                transport.send(ANSWER)
        undelivered = getattr(transport, "answers_undelivered", None)
    finally:
        transport.close()
    assert server.attempts["answer"] >= 2  # sent again within the bound
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("'s-1'" in text and "503" in text for text in warnings), warnings
    assert undelivered == 1


def test_an_answer_whose_post_is_never_answered_is_given_up_with_a_warning(no_leaks, one_way_server, caplog):
    """The server reads the POST and never answers it: at the bound the
    answer is given up (not sent again: the server does not read), with a
    warning, and counted. (Before: a debug line from the sender.)"""
    server = one_way_server(hold=True)
    transport = HTTP(server.url).open()
    transport.start(Sink())
    transport.request_timeout = 1.0
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_sync.transport.http"):
            with pytest.raises(mcp_sync.TransportError):
                transport.send(ANSWER)
        undelivered = getattr(transport, "answers_undelivered", None)
    finally:
        server.release.set()
        transport.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("'s-1'" in text and "timed out" in text for text in warnings), warnings
    assert undelivered == 1
    assert server.attempts["answer"] == 1


def test_an_answer_that_finds_no_free_one_way_slot_is_given_up_with_a_warning(no_leaks, one_way_server, caplog):
    """pool_size=1: one answer's POST holds the only one-way slot (the
    server does not answer it; its bound is long); another, bounded by
    1 s, never gets the slot: given up at its bound with a warning and
    counted. The first is delivered once the server answers it."""
    server = one_way_server(hold=True)
    transport = HTTP(server.url, pool_size=1).open()
    transport.start(Sink())
    transport.request_timeout = 30.0  # (read at the start of each send)
    outcomes: list[Any] = []

    def send_first() -> None:
        try:
            transport.send(ANSWER)
            outcomes.append("sent")
        except mcp_sync.McpError as exc:
            outcomes.append(exc)

    first = threading.Thread(target=send_first)
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_sync.transport.http"):
            first.start()
            assert server.holding.wait(10)  # the only one-way slot is taken
            transport.request_timeout = 1.0
            with pytest.raises(mcp_sync.TransportError):
                transport.send({**ANSWER, "id": "s-2"})
            server.release.set()
            first.join(10)
        undelivered = getattr(transport, "answers_undelivered", None)
    finally:
        server.release.set()
        first.join(10)
        transport.close()
    assert outcomes == ["sent"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "'s-2'" in warnings[0] and "no connection was free" in warnings[0], warnings
    assert undelivered == 1
    assert server.attempts["answer"] == 1  # the one that waited for a slot was never POSTed


def test_a_notification_that_fails_is_not_sent_again(no_leaks, one_way_server):
    """Only answers are owed: a refused notification (a cancellation the
    server copes without) is one POST, as before."""
    server = one_way_server(refuse=503, refused=("notification",))
    transport = HTTP(server.url).open()
    transport.start(Sink())
    transport.request_timeout = 5
    try:
        with pytest.raises(mcp_sync.HTTPStatusError):
            transport.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    finally:
        transport.close()
    assert server.attempts == {"answer": 0, "notification": 1}


# -- an answer belongs to its session -----------------------------------------------------------


class Restarting(RawHTTPServer):
    """An initialize-era server (sessions "s1", "s2", ...) whose tool
    `whoami` asks `roots/list` with the session's own request id 1 on its
    SSE answer and returns "<session>: <first root>" from the answer it
    takes for that id. While `down`, an answer's POST finds the backend
    restarting: it loses every session, waits until the client has begun
    a new one, and only then gets 503 (so a POST the client sends again
    comes after the new session exists). `answers` logs each answer's
    POST as (session, id, first root)."""

    def __init__(self, fixed: str | None = None) -> None:
        #: With `fixed`, every session is named that (a server keying them by user).
        self.fixed = fixed
        self.sessions: dict[str, dict[Any, Any]] = {}
        self.count = 0
        self.down = False
        self.answers: list[tuple[int, str | None, Any, str]] = []  # (sessions begun then, session, id, first root)
        super().__init__()
        self.changed = threading.Condition(self._lock)

    @staticmethod
    def send(sock: socket.socket, status: str, payload: Any = None, extra: str = "") -> bool:
        data = b"" if payload is None else json.dumps(payload).encode()
        kind = "Content-Type: application/json\r\n" if payload is not None else ""
        sock.sendall(f"HTTP/1.1 {status}\r\n{kind}{extra}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        return True

    def handle(self, sock: socket.socket, method: bytes, headers: dict[str, str], body: Any) -> bool:
        sid = headers.get("mcp-session-id")
        if method != b"POST":
            return self.send(sock, "405 Method Not Allowed" if method == b"GET" else "200 OK")
        rpc = body.get("method")
        with self._lock:
            if rpc == "initialize":
                self.count += 1
                sid = self.fixed or f"s{self.count}"
                self.sessions[sid] = {}
                self.changed.notify_all()
                return self.send(sock, "200 OK", {"jsonrpc": "2.0", "id": body["id"], "result": {
                    "protocolVersion": body["params"]["protocolVersion"], "capabilities": {"tools": {}},
                    "serverInfo": {"name": "restarting", "version": "1"}}}, f"Mcp-Session-Id: {sid}\r\n")
            if rpc is None:
                self.answers.append((self.count, sid, body.get("id"),
                                     body.get("result", {}).get("roots", [{}])[0].get("uri")))
                self.changed.notify_all()
                if self.down:
                    self.down, lost = False, self.count
                    self.sessions.clear()  # restarted
                    self.changed.wait_for(lambda: self.count > lost or self.release.is_set(), 30)
                    return self.send(sock, "503 Service Unavailable")
            session = self.sessions.get(sid)
            if session is None:
                return self.send(sock, "404 Not Found")
            if rpc is None:
                session.setdefault(body["id"], body)  # the first answer for an id is the one taken
                self.changed.notify_all()
                return self.send(sock, "202 Accepted")
        if "id" not in body:
            return self.send(sock, "202 Accepted")
        if rpc != "tools/call":
            return self.send(sock, "200 OK", {"jsonrpc": "2.0", "id": body["id"], "result": {}})
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        ask = {"jsonrpc": "2.0", "id": 1, "method": "roots/list"}
        sock.sendall(f"event: message\ndata: {json.dumps(ask)}\n\n".encode())
        with self._lock:
            self.changed.wait_for(lambda: 1 in session or self.release.is_set(), 30)
            answer = session.get(1)
        if answer is None:
            return False
        text = f"{sid}: {answer['result']['roots'][0]['uri']}"
        result = {"jsonrpc": "2.0", "id": body["id"], "result": {"content": [{"type": "text", "text": text}]}}
        sock.sendall(f"event: message\ndata: {json.dumps(result)}\n\n".encode())
        return False

    def close(self) -> None:
        with self._lock:
            self.release.set()
            self.changed.notify_all()  # (its waits end on `release`)
        super().close()


@pytest.mark.parametrize("fixed", [None, "user-42"])
def test_an_answer_is_never_sent_again_under_a_newer_session(no_leaks, caplog, fixed):
    # The answer to session s1's request 1 fails (503) while the client
    # renews into s2, whose request 1 is another question. Sending it
    # again must not put it into s2: s2's tool would take s1's answer for
    # its own. Also when the server names both sessions the same.
    # (Before: "s2: file:///s1", 4 runs of 4; then "user-42: file:///s1".)
    server = Restarting(fixed)
    given_up = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "its session ended" in record.getMessage():
                with server._lock:
                    given_up.set()
                    server.changed.notify_all()

    def roots(params: Any) -> dict[str, Any]:
        with server._lock:
            first = server.count == 1
        if first:
            server.down = True  # this answer's POST meets the restart
            return {"roots": [{"uri": "file:///s1"}]}
        # s2's own answer goes only once s1's has been sent again or given
        # up, so that a copy under s2's id (the defect) would be taken first.
        with server._lock:
            server.changed.wait_for(lambda: given_up.is_set() or any(
                begun == 2 and uri == "file:///s1" for begun, _, _, uri in server.answers), 30)
        return {"roots": [{"uri": "file:///s2"}]}

    watch = Watch()
    logging.getLogger("mcp_sync").addHandler(watch)
    caplog.set_level(logging.INFO, logger="mcp_sync")
    client = mcp_sync.connect(server.url, protocol=LEGACY, input_handlers={"roots": roots})
    try:
        with pytest.raises(mcp_sync.McpError):
            client.call_tool("whoami", {}, timeout=1.0)  # s1 is lost: its answer never reaches a session
        assert client.call_tool("whoami", {}, timeout=20).text == f"{fixed or 's2'}: file:///s2"
        if fixed is None:  # (a copy may still go out under s1, which the server no longer knows: 404)
            assert not [entry for entry in server.answers if entry[1] == "s2" and entry[3] == "file:///s1"]
    finally:
        logging.getLogger("mcp_sync").removeHandler(watch)
        client.close()
        server.close()


def test_answers_sent_again_hold_the_senders_writers_only_for_a_short_while(no_leaks, one_way_server):
    # Four answers the server keeps refusing (500) take every writer of the
    # sender; the answer queued behind them goes out once their retries
    # end, within `_AGAIN_WINDOW`, not after the whole `request_timeout`
    # (30 s here; before: 7.6 s of an 8 s one).
    from mcp_sync.sender import Sender
    from mcp_sync.transports.http import _AGAIN_WINDOW

    server = one_way_server(refuse=500, refused_ids=("bad-0", "bad-1", "bad-2", "bad-3"))
    transport = HTTP(server.url).open()
    transport.start(Sink())
    transport.request_timeout = 30.0
    sender = Sender(transport.send, writers=transport.parallel_writes)
    try:
        for i in range(transport.parallel_writes):
            sender.put({"jsonrpc": "2.0", "id": f"bad-{i}", "result": {}})
        assert wait_until(lambda: server.attempts["answer"] >= transport.parallel_writes)
        queued = time.monotonic()
        sender.put({"jsonrpc": "2.0", "id": "good", "result": {}})
        assert wait_until(lambda: any(m.get("id") == "good" for m in server.received), timeout=_AGAIN_WINDOW + GENEROUS)
        assert time.monotonic() - queued < _AGAIN_WINDOW + SLACK  # (not the 30 s bound)
    finally:
        sender.close(timeout=5)
        transport.close()
