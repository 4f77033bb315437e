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

import logging
import socket
import struct
import threading
from typing import Any

import pytest

import mcp_sync
from mcp_sync import HTTP
from mcp_sync.testing import GateAnswer, HTTPServer, Server
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
                 hold: bool = False) -> None:
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
            refuse = self.refuse if kind in self.refused else None
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
