"""Streamable HTTP for the test server: `HTTPServer` serves a `Server` on a real socket.

Standard library only (`http.server`). One endpoint (`path`, default `/mcp`)
speaks both protocol eras, the way a dual-era server does; `Server(versions=...)`
narrows it to one era, and then it answers the other era the way real
single-era servers do.

Stateless era (2026-07-28, a request whose `params._meta` carries
`io.modelcontextprotocol/protocolVersion`): every POST is served by a fresh
`ServerSession`, closed when the exchange ends. The request is validated like
a real server, in this order (first failure wins):

1. `Accept` lists `application/json` and `text/event-stream` (else 400),
   `Content-Type` is `application/json` (else 415), the body parses (else 400,
   -32700) and is one JSON-RPC request or notification (else 400, -32600).
2. `params._meta` carries the protocol version and the client capabilities
   (else 400, -32602).
3. Routing headers (else 400, -32020 HeaderMismatch): `MCP-Protocol-Version`,
   `Mcp-Method` and, for `tools/call`/`prompts/get`/`resources/read`,
   `Mcp-Name` are present once each, hold header-safe characters and equal the
   body's version, `method` and `params.name`/`params.uri` (`Mcp-Name` after
   decoding the `=?base64?...?=` sentinel).
4. The version is one the server speaks (else 400, -32022 with
   `data.supported`/`data.requested`).
5. `tools/call`: every `x-mcp-header` annotated property of the tool's
   inputSchema (reached through `properties` keys only) whose argument is
   present and not null arrives as `Mcp-Param-{Name}` (string as-is, integer
   compared numerically, boolean `true`/`false`, sentinel decoded); one whose
   argument is absent or null must not (else 400, -32020).

A JSON answer's status follows its error code: -32601 -> 404;
-32700/-32600/-32020/-32021/-32022 -> 400; anything else (results, tool
errors, unknown tools, bad arguments) -> 200. An SSE answer is always 200. A
notification POST gets 202 and is dropped. A client that closes the
connection before the response cancels the request (`notifications/cancelled`
is delivered to its session, so the tool's `ctx.cancelled` is set). GET and
DELETE get 405 from a server without legacy versions; `Mcp-Session-Id` and
`Last-Event-ID` are ignored there.

`subscriptions/listen` is answered with a long-lived SSE stream (in every
response mode; an error answer is JSON): the acknowledgement, then the
subscription's notifications. The client closing it cancels the
subscription; `Server.end_subscriptions()` writes the completion result (or,
`graceful=False`, `notifications/cancelled`) and ends the stream; `close()`
ends every open subscription gracefully first (waiting at most 5 s for the
results to be written).

Legacy era (2025-11-25, 2025-06-18): POST `initialize` creates a session and
its response carries `Mcp-Session-Id` (uuid4 hex); a failed `initialize`
(400 when answered in JSON) creates none. Later requests must carry the id
(missing: 400; unknown or ended: 404, JSON-RPC -32001) and
`MCP-Protocol-Version` equal to the negotiated version (missing or different:
400). A posted notification or response gets 202; `notifications/cancelled`
also ends the cancelled request's POST stream without a response (an empty
SSE stream when nothing was sent yet). A request id already in flight gets
400 (-32600). JSON-RPC errors of legacy requests are answered with 200. A
request's progress and log notifications travel on its own POST stream;
messages related to no request go to the session's standalone GET stream
(`Accept: text/event-stream` required, else 400; `get_stream=False`: 405; a
second concurrent GET stream: 409). DELETE ends the session (200) and its
streams (a request still waiting for its JSON answer gets 404).
Disconnecting does not cancel a legacy request. With `sse_ids=True` every
SSE event has an id `"<stream>-<seq>"`, each SSE stream starts with a priming
event (that id and empty data, plus `retry` when `retry_ms` is set), events
are kept per stream, and GET with `Last-Event-ID` replays the rest of that
stream and continues it live, ending after the response (an id of no
resumable stream: 400; a stream being read: 409); `drop_after_first_event()`
cuts POST streams right after the priming event to make clients do that.

Era detection like real servers: a request with the `_meta` version is
served statelessly (a stray `Mcp-Session-Id` is ignored); `initialize` starts
a legacy session; a request with `Mcp-Session-Id` belongs to its session;
anything else is served statelessly (and so fails validation). A legacy-only
`Server(versions=[...])` answers a session-less request as a legacy SDK
does: 400 with a non-modern JSON-RPC body (`-32000`, "Bad Request: No valid
session ID provided"). A stateless-only server answers `initialize` with 400
and a -32602 error naming its supported versions, and GET/DELETE with 405.

Responses: JSON with `Content-Length`, or SSE (`text/event-stream`,
`Cache-Control: no-cache`, `X-Accel-Buffering: no`, chunked on HTTP/1.1 and
close-delimited on HTTP/1.0, one flush per event) chosen by `response_mode`:
"auto" answers in JSON unless the request produced notifications before its
response, "json" answers in JSON (dropping such notifications) unless the
request's handler sends a request to the client, "sse" always streams.

Servers that ask back, legacy era: a tool's `elicitation/create`,
`sampling/createMessage`, `roots/list` or `ping` request to the client goes
out on the SSE stream of the POST that started the tool (it forces SSE for
that POST, in every response mode); the client answers by POSTing the
JSON-RPC response with its `Mcp-Session-Id` (202), which is routed to the
session. A `notifications/cancelled` the server sends for its own request
travels on the same POST stream, or on the GET stream when the POST's request
was itself cancelled. Stateless era: such questions are answered with an
`InputRequiredResult` (200, JSON unless notifications came first); a client
lacking the capability gets -32021 (400). Connections are kept alive between requests. An `Origin`
header that is not a loopback origin gets 403 (DNS rebinding protection);
other paths get 404, other HTTP methods 405 (with `Allow`).

A `gate` (a constructor argument) sees every request first, whatever its
method or path, before the path check and canned answers: returning a
`GateAnswer` sends that answer instead of serving the request (the request
is still recorded), returning None serves it as usual. It is how tests put
OAuth in front of the server (`tests/auth/authserver.py`).

Test knobs (thread-safe): `requests` (every request received, as
`RecordedRequest`), `canned()` (raw answers instead of serving),
`expire_sessions()`, `drop_after_first_event()`, `notify()` (a message
related to no request, on each session's GET stream), `sessions`,
`connections` and `wait_for()` (wait until a predicate over those holds).
`close()` stops the listener, ends every session and stream, shuts every
connection down and joins every thread it started.
"""

from __future__ import annotations

import base64
import binascii
import collections
import decimal
import email.message
import http.server
import itertools
import json
import logging
import re
import select
import selectors
import socket
import socketserver
import ssl
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from .core import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    RequestId,
    Server,
    ServerSession,
)

__all__ = ["GateAnswer", "Gated", "HTTPServer", "RecordedRequest"]

#: close(): how long (seconds) to let open subscriptions write their completion result.
_CLOSE_GRACE = 5.0

_log = logging.getLogger("mcp_sync.testing.http")

JSONDict = dict[str, Any]

HEADER_MISMATCH = -32020
#: The non-standard code legacy SDKs use for transport-level rejections.
_LEGACY_TRANSPORT_ERROR = -32000
_SESSION_NOT_FOUND = -32001

RESPONSE_MODES = ("auto", "json", "sse")

#: JSON-RPC error code -> HTTP status of a stateless answer (others: 200).
_STATELESS_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}

#: Method -> the params key mirrored in `Mcp-Name`.
_NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

_SENTINEL = re.compile(r"=\?base64\?(?P<payload>.*)\?=", re.DOTALL)
_HEADER_SAFE = re.compile(r"[\x20-\x7e\t]*")
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_DEFAULT_RETRY_MS = 500

_DONE, _DISCONNECTED, _ENDED, _CUT = "done", "disconnected", "ended", "cut"


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the server received it.

    `headers` is the `http.client.HTTPMessage` parsed by `http.server` (an
    `email.message.Message`): `headers.get(name)` and `headers.get_all(name)`
    are case-insensitive. `path` is the request target as sent (with any
    query). `json` is the parsed body, or None when it is empty or not JSON."""

    method: str
    path: str
    headers: email.message.Message
    body: bytes
    json: Any


@dataclass(frozen=True)
class Gated:
    """What a `gate` sees of a request: its method, its target as sent (path
    and query) and its headers, the `http.client.HTTPMessage` of
    `http.server` (`headers.get(name)` is case-insensitive). The body is not
    read yet: a gate decides on the request line and headers alone."""

    method: str
    path: str
    headers: email.message.Message


@dataclass(frozen=True)
class GateAnswer:
    """The raw answer a `gate` sends instead of serving the request: exactly
    these headers (plus Content-Length) and body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class _Canned:
    status: int
    body: bytes
    headers: dict[str, str]
    times: int


class _HTTPError(Exception):
    """A rejection answered before (or instead of) serving the message."""

    def __init__(self, status: int, body: JSONDict | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


def _error_body(code: int, message: str, request_id: RequestId | None = None, data: Any = None) -> JSONDict:
    body: JSONDict = {"jsonrpc": "2.0"}
    if request_id is not None:
        body["id"] = request_id
    error: JSONDict = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body["error"] = error
    return body


def _rpc_error(status: int, code: int, message: str, request_id: RequestId | None = None, data: Any = None) -> _HTTPError:
    return _HTTPError(status, _error_body(code, message, request_id, data))


def _encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _is_request_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def decode_header_value(value: str) -> str | None:
    """A header value with the `=?base64?...?=` sentinel decoded (None when
    the sentinel is malformed: bad or non-canonical base64, or not UTF-8)."""
    found = _SENTINEL.fullmatch(value)
    if found is None:
        return value
    payload = found.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def mcp_param_annotations(input_schema: Any) -> list[tuple[tuple[str, ...], str]]:
    """`(property path, header name)` of every `x-mcp-header` annotation
    reachable from the schema root through `properties` keys only."""
    found: list[tuple[tuple[str, ...], str]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), input_schema)]
    while stack:
        path, schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        header = schema.get("x-mcp-header")
        if path and isinstance(header, str) and header:
            found.append((path, header))
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for key, sub in properties.items():
                stack.append(((*path, key), sub))
    return sorted(found)


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _param_matches(value: Any, decoded: str) -> bool:
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, (int, float)):
        if _DECIMAL.fullmatch(decoded) is None:
            return False
        expected = decimal.Decimal(value) if isinstance(value, int) else decimal.Decimal(repr(value))
        return decimal.Decimal(decoded) == expected
    return isinstance(value, str) and decoded == value


def _media_types(header: str | None) -> set[str]:
    return {part.split(";", 1)[0].strip().lower() for part in (header or "").split(",") if part.strip()}


# --------------------------------------------------------------------------
# Streams: the messages of one HTTP response (a POST's request, or a GET stream)


class _Waker:
    """A socketpair a stream writes to so its consumer's `poll` returns."""

    def __init__(self) -> None:
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)

    def fileno(self) -> int:
        return self._r.fileno()

    def wake(self) -> None:
        try:
            self._w.send(b"\0")
        except OSError:  # full (already awake) or closed
            pass

    def drain(self) -> None:
        try:
            while self._r.recv(4096):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self._r.close()
        self._w.close()


class _Stream:
    """The server messages of one HTTP response stream, kept in order.

    A POST stream (`request_id` set) is finished by its request's response; a
    session's standalone stream (`request_id` None) never finishes. Events are
    numbered 1, 2, ... (the priming event is 0); a resumable stream keeps them
    all so a client can resume after any event id."""

    def __init__(self, number: int, request_id: RequestId | None, resumable: bool) -> None:
        self.number = number
        self.request_id = request_id
        self.resumable = resumable
        self.lock = threading.Lock()
        self.events: list[JSONDict] = []
        self.finished = False
        self.ended: str | None = None  # "terminated", "closing" or "cancelled"
        self.consumer: _Waker | None = None
        self.delivered = 0

    def event_id(self, seq: int) -> str:
        return f"{self.number}-{seq}"

    def push(self, message: JSONDict) -> bool:
        """Queue a message; False when the stream no longer takes any."""
        with self.lock:
            if self.ended is not None or self.finished:
                return False
            self.events.append(message)
            if self.request_id is not None and "method" not in message:
                self.finished = True
            consumer = self.consumer
        if consumer is not None:
            consumer.wake()
        return True

    def end(self, reason: str) -> None:
        with self.lock:
            if self.ended is None:
                self.ended = reason
            consumer = self.consumer
        if consumer is not None:
            consumer.wake()

    def take(self, after: int) -> tuple[list[tuple[int, JSONDict]], str | None]:
        with self.lock:
            return [(seq, msg) for seq, msg in enumerate(self.events[after:], after + 1)], self.ended

    def attach(self, waker: _Waker) -> bool:
        with self.lock:
            if self.consumer is not None:
                return False
            self.consumer = waker
            return True

    def detach(self, waker: _Waker, delivered: int) -> None:
        with self.lock:
            if self.consumer is waker:
                self.consumer = None
            self.delivered = max(self.delivered, delivered)

    def delivering(self, seq: int) -> None:
        """Count events up to `seq` as delivered (called just before writing
        the response, so a finished stream is never found for resumption)."""
        with self.lock:
            self.delivered = max(self.delivered, seq)

    @property
    def complete(self) -> bool:
        """The response was written to some consumer."""
        with self.lock:
            return self.finished and self.delivered >= len(self.events)


class _LegacySession:
    """One `initialize`-based session: its `ServerSession` and its streams."""

    def __init__(self, owner: HTTPServer, server: Server) -> None:
        self.owner = owner
        self.id = uuid.uuid4().hex
        self.lock = threading.Lock()
        self.streams: dict[int, _Stream] = {}
        self.by_request: dict[RequestId, _Stream] = {}
        self.standalone: _Stream | None = None
        self.ended = False
        self.initialize_id: RequestId | None = None
        self._numbers = itertools.count(1)
        self.session: ServerSession = server.open_session(self._send, related=True)

    @property
    def version(self) -> str | None:
        return self.session.protocol_version

    def _send(self, message: JSONDict, related: RequestId | None) -> None:
        if related is not None and related == self.initialize_id and "error" in message:
            # A failed initialize creates no session: unknown before the client can see the error.
            self.owner._forget(self)
        with self.lock:
            if related is None:
                stream = self.standalone
            else:
                stream = self.by_request.get(related)
                if stream is not None and "method" not in message:
                    del self.by_request[related]
        if stream is not None:
            stream.push(message)
        else:
            _log.debug("session %s: no stream for %r (related to %r); dropped", self.id, message.get("method"), related)

    def open_request_stream(self, request_id: RequestId) -> _Stream | None:
        """A new POST stream for `request_id`; None if that id is in flight."""
        with self.lock:
            if self.ended or request_id in self.by_request:
                return None
            stream = _Stream(next(self._numbers), request_id, self.owner.sse_ids)
            self.streams[stream.number] = stream
            self.by_request[request_id] = stream
            return stream

    def open_standalone(self) -> _Stream | None:
        """A new standalone stream; None if one is being consumed."""
        with self.lock:
            if self.ended:
                return None
            old = self.standalone
            if old is not None:
                with old.lock:
                    busy = old.consumer is not None
                if busy:
                    return None
                self.streams.pop(old.number, None)
            stream = _Stream(next(self._numbers), None, self.owner.sse_ids)
            self.streams[stream.number] = stream
            self.standalone = stream
            return stream

    def find(self, event_id: str) -> tuple[_Stream, int] | None:
        number, sep, seq = event_id.partition("-")
        if not sep or not number.isdigit() or not seq.isdigit():
            return None
        with self.lock:
            stream = self.streams.get(int(number))
        if stream is None or not stream.resumable or stream.complete:
            return None
        with stream.lock:
            if int(seq) > len(stream.events):
                return None
        return stream, int(seq)

    def release(self, stream: _Stream, outcome: str) -> None:
        """Forget a stream its consumer is done with, unless it can still be resumed."""
        keep = stream.resumable and outcome in (_DISCONNECTED, _CUT) and not stream.complete
        if stream.request_id is None:
            keep = keep or (stream.resumable and outcome == _DISCONNECTED)
        with self.lock:
            if keep and not self.ended:
                return
            if self.streams.get(stream.number) is stream:
                del self.streams[stream.number]
            if stream.request_id is not None and self.by_request.get(stream.request_id) is stream:
                del self.by_request[stream.request_id]
            if self.standalone is stream:
                self.standalone = None

    def cancel(self, request_id: Any) -> None:
        with self.lock:
            stream = self.by_request.pop(request_id, None) if _is_request_id(request_id) else None
        if stream is not None:
            stream.end("cancelled")

    def terminate(self, reason: str = "terminated") -> None:
        with self.lock:
            if self.ended:
                return
            self.ended = True
            streams = list(self.streams.values())
            self.streams.clear()
            self.by_request.clear()
            self.standalone = None
        for stream in streams:
            stream.end(reason)
        self.session.close()


# --------------------------------------------------------------------------
# The HTTP machinery


class _ThreadingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 overflows when a client pool opens
    # many connections at once (the kernel may then reset one).
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], owner: HTTPServer) -> None:
        self.owner = owner
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can be slow.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        # ThreadingMixIn's threads are not tracked when daemonic: track them.
        self.owner._start_connection(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        _log.debug("error serving %s", client_address, exc_info=True)


class _SSEWriter:
    """Writes one SSE response: chunked on HTTP/1.1, close-delimited otherwise."""

    def __init__(self, handler: _Handler, headers: Mapping[str, str]) -> None:
        self._handler = handler
        self._chunked = handler.request_version == "HTTP/1.1"
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("X-Accel-Buffering", "no")
        if self._chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Connection", "close")
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()

    def _write(self, data: bytes) -> None:
        out = self._handler.wfile
        if self._chunked:
            out.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            out.write(data)
        out.flush()

    def event(self, data: str, event_id: str | None = None, retry: int | None = None) -> None:
        lines = []
        if event_id is not None:
            lines.append(f"id: {event_id}")
        if retry is not None:
            lines.append(f"retry: {retry}")
        lines.append(f"data: {data}")
        self._write(("\n".join(lines) + "\n\n").encode("utf-8"))

    def retry(self, ms: int) -> None:
        self._write(f"retry: {ms}\n\n".encode("ascii"))

    def end(self) -> None:
        if self._chunked:
            self._handler.wfile.write(b"0\r\n\r\n")
            self._handler.wfile.flush()
        else:
            self._handler.close_connection = True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mcp-sync-testing"
    server: _ThreadingServer

    _waker: _Waker | None = None

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s - " + format, self.address_string(), *args)

    def waker(self) -> _Waker:
        if self._waker is None:
            self._waker = _Waker()
        return self._waker

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self._waker is not None:
                self._waker.close()
                self._waker = None

    def do_POST(self) -> None:
        self.server.owner._serve(self, "POST")

    def do_GET(self) -> None:
        self.server.owner._serve(self, "GET")

    def do_DELETE(self) -> None:
        self.server.owner._serve(self, "DELETE")

    def do_PUT(self) -> None:
        self.server.owner._serve(self, "PUT")

    def do_PATCH(self) -> None:
        self.server.owner._serve(self, "PATCH")

    def do_HEAD(self) -> None:
        self.server.owner._serve(self, "HEAD")

    def do_OPTIONS(self) -> None:
        self.server.owner._serve(self, "OPTIONS")

    # -- plain responses ------------------------------------------------------

    def send_body(self, status: int, body: bytes, content_type: str | None, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        names = {name.lower() for name in (headers or {})}
        if content_type is not None and "content-type" not in names:
            self.send_header("Content-Type", content_type)
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def send_json(self, status: int, message: Any, headers: Mapping[str, str] | None = None) -> None:
        self.send_body(status, _encode(message), "application/json", headers)

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        return self.rfile.read(int(length))


# --------------------------------------------------------------------------


class HTTPServer:
    """Serve a `Server` over Streamable HTTP on 127.0.0.1 (a real socket), for tests and the demo.

    Example::

        with HTTPServer(demo_server()) as http:
            ...  # POST JSON-RPC to http.url

    Arguments:

    * `response_mode`: "auto" (JSON unless the request produced notifications
      before its response, then SSE), "json" (always JSON) or "sse" (always SSE).
    * `sse_ids`: legacy era: give every SSE event an id, prime each SSE stream
      with an id and empty data, and keep events so `GET` + `Last-Event-ID`
      can resume a stream.
    * `get_stream`: legacy era: offer the standalone GET SSE stream (False: 405).
    * `retry_ms`: when set, sent as the SSE `retry` field with each priming event.
    * `ssl_context`: serve HTTPS with this server-side `ssl.SSLContext`.
    * `gate`: called with a `Gated` for every request, on its connection's
      thread, before anything else; a `GateAnswer` it returns is sent
      instead of serving the request (whose body is read and dropped, so
      the connection stays usable), None lets the request through. An
      exception it raises is answered with 500.

    See the module docstring for the behaviour and status codes."""

    def __init__(
        self,
        server: Server,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        path: str = "/mcp",
        response_mode: str = "auto",
        sse_ids: bool = False,
        get_stream: bool = True,
        retry_ms: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
        gate: Callable[[Gated], GateAnswer | None] | None = None,
    ) -> None:
        if response_mode not in RESPONSE_MODES:
            raise ValueError(f"response_mode must be one of {', '.join(RESPONSE_MODES)}, not {response_mode!r}")
        if retry_ms is not None and (isinstance(retry_ms, bool) or not isinstance(retry_ms, int) or retry_ms < 0):
            raise ValueError("retry_ms must be None or a non-negative integer")
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        self.server = server
        self.host = host
        self.path = path
        self.response_mode = response_mode
        self.sse_ids = sse_ids
        self.get_stream = get_stream
        self.retry_ms = retry_ms
        self.ssl_context = ssl_context
        self.gate = gate
        self._port = port
        self._lock = threading.RLock()
        #: Notified whenever `requests`, `sessions` or `connections` change.
        self._changed = threading.Condition(self._lock)
        self._close_lock = threading.Lock()
        self._httpd: _ThreadingServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._accept_waker: _Waker | None = None
        self._threads: set[threading.Thread] = set()
        self._connections: set[socket.socket] = set()
        self._sessions: dict[str, _LegacySession] = {}
        self._live: set[_Stream] = set()
        #: Stateless sessions serving a subscriptions/listen POST.
        self._listen_sessions: set[ServerSession] = set()
        self._requests: list[RecordedRequest] = []
        self._canned: dict[str, collections.deque[_Canned]] = {}
        self._drops = 0
        self._closing = False
        self._closed = False

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> HTTPServer:
        """Bind, listen and serve on a background thread; returns self."""
        with self._close_lock:
            if self._closing:
                raise RuntimeError("this HTTPServer is closed")
            if self._httpd is not None:
                raise RuntimeError("this HTTPServer is already started")
            self._httpd = _ThreadingServer((self.host, self._port), self)
            self._accept_waker = _Waker()
            self._serve_thread = threading.Thread(target=self._accept_loop, name="mcp-testing-http", daemon=True)
            self._serve_thread.start()
        return self

    def _accept_loop(self) -> None:
        """Accept connections until close() wakes it (no polling, unlike serve_forever)."""
        httpd, waker = self._httpd, self._accept_waker
        assert httpd is not None and waker is not None
        with selectors.DefaultSelector() as selector:
            selector.register(httpd.socket, selectors.EVENT_READ)
            selector.register(waker.fileno(), selectors.EVENT_READ)
            while True:
                ready = selector.select()
                with self._lock:
                    if self._closing:
                        return
                if any(key.fileobj is httpd.socket for key, _ in ready):
                    try:
                        request, client_address = httpd.get_request()
                    except OSError:
                        continue
                    if httpd.verify_request(request, client_address):
                        httpd.process_request(request, client_address)
                    else:
                        httpd.shutdown_request(request)

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("start() the server first")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The endpoint URL, e.g. "http://127.0.0.1:PORT/mcp" (after start())."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{self.port}{self.path}"

    def close(self) -> None:
        """Stop serving: end every session and stream, shut every connection
        down, join every thread started. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            with self._lock:
                self._closing = True
            httpd, thread, waker = self._httpd, self._serve_thread, self._accept_waker
            if httpd is not None and thread is not None and waker is not None:
                waker.wake()
                thread.join()
                httpd.server_close()
                waker.close()
            with self._lock:
                listening = list(self._listen_sessions)
            # Shutdown ends each subscription gracefully: its completion result
            # is written before the stream closes (bounded, in case a client stalls).
            ended = {listener for listener in listening if listener.end_subscriptions(graceful=True, wait=True)}
            with self._changed:
                self._changed.wait_for(lambda: not (ended & self._listen_sessions), _CLOSE_GRACE)
            with self._lock:
                sessions = list(self._sessions.values())
                self._sessions.clear()
                self._changed.notify_all()
                streams = list(self._live)
            for stream in streams:
                stream.end("closing")
            for session in sessions:
                session.terminate("closing")
            with self._lock:
                connections = list(self._connections)
            for conn in connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            while True:
                with self._lock:
                    threads = [t for t in self._threads if t is not threading.current_thread()]
                if not threads:
                    break
                for t in threads:
                    t.join()
            self._closed = True

    def __enter__(self) -> HTTPServer:
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start_connection(self, request: socket.socket, client_address: Any) -> None:
        try:  # small writes (headers, then a body or an event) must not wait for delayed ACKs
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        thread = threading.Thread(
            target=self._connection, args=(request, client_address), name="mcp-testing-http-conn", daemon=True
        )
        with self._lock:
            if self._closing:
                closing = True
            else:
                closing = False
                self._threads.add(thread)
                self._connections.add(request)
                self._changed.notify_all()
        if closing:
            assert self._httpd is not None
            self._httpd.shutdown_request(request)
            return
        thread.start()

    def _connection(self, request: socket.socket, client_address: Any) -> None:
        httpd = self._httpd
        assert httpd is not None
        try:
            if self.ssl_context is not None:
                # The handshake runs here, on the connection's own thread, so a
                # client that never completes it blocks nothing else.
                request = self.ssl_context.wrap_socket(request, server_side=True)
            httpd.finish_request(request, client_address)
        except Exception:
            httpd.handle_error(request, client_address)
        finally:
            httpd.shutdown_request(request)
            with self._lock:
                self._connections.discard(request)
                self._threads.discard(threading.current_thread())
                self._changed.notify_all()

    # -- test knobs -------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every HTTP request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def canned(
        self,
        status: int,
        body: bytes | str = b"",
        headers: Mapping[str, str] | None = None,
        *,
        times: int = 1,
        method: str = "POST",
    ) -> None:
        """Answer the next `times` requests of HTTP `method` with this raw
        response instead of serving them (they are still recorded). Without
        a Content-Type in `headers`, a non-empty body is sent as
        application/json when it parses as JSON, else as text/plain."""
        if times < 1:
            raise ValueError("times must be at least 1")
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        with self._lock:
            self._canned.setdefault(method.upper(), collections.deque()).append(
                _Canned(status, data, dict(headers or {}), times)
            )

    def expire_sessions(self) -> None:
        """Terminate every legacy session: later requests carrying its id get 404."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            self._changed.notify_all()
        for session in sessions:
            session.terminate()

    def drop_after_first_event(self, times: int = 1) -> None:
        """Cut the next `times` legacy POST SSE streams right after their
        priming event (needs `sse_ids`): send `retry: <retry_ms or 500>`, end
        the response and close the connection. The client resumes with GET +
        Last-Event-ID and gets the rest of the stream there."""
        if not self.sse_ids:
            raise RuntimeError("drop_after_first_event needs sse_ids=True")
        with self._lock:
            self._drops += times

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        """Send a notification related to no request to every live legacy
        session, on its standalone GET stream; returns how many sessions took
        it (a session without a GET stream drops it)."""
        message: JSONDict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        with self._lock:
            sessions = list(self._sessions.values())
        taken = 0
        for session in sessions:
            with session.lock:
                stream = session.standalone
            if stream is not None and stream.push(dict(message)):
                taken += 1
        return taken

    @property
    def sessions(self) -> int:
        """How many legacy sessions are live."""
        with self._lock:
            return len(self._sessions)

    @property
    def connections(self) -> int:
        """How many client connections are open (a connection counts until
        the server has noticed its end and its thread is finishing)."""
        with self._lock:
            return len(self._connections)

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until `predicate()` is true; it is re-checked whenever
        `requests`, `sessions` or `connections` change (it may read them).
        Returns its last value (False after `timeout` seconds)."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    # -- serving ------------------------------------------------------------------

    def _serve(self, h: _Handler, method: str) -> None:
        if self.gate is not None and self._gated(h, method, self.gate):
            return
        try:
            body = h.read_body()
        except (ValueError, OSError):
            h.close_connection = True
            h.send_body(400, b"Bad Request: unreadable body", "text/plain; charset=utf-8", {"Connection": "close"})
            return
        with self._lock:
            self._record(h, method, body)
            canned = self._take_canned(method)
        if canned is not None:
            content_type = None
            if canned.body and not any(name.lower() == "content-type" for name in canned.headers):
                content_type = "text/plain; charset=utf-8"
                try:
                    if isinstance(json.loads(canned.body), (dict, list)):
                        content_type = "application/json"
                except ValueError:
                    pass
            h.send_body(canned.status, canned.body, content_type, canned.headers)
            return
        try:
            self._check_request(h)
            if method == "POST":
                self._post(h, body)
            elif method == "GET":
                self._get(h)
            elif method == "DELETE":
                self._delete(h)
            else:
                raise _HTTPError(405, headers={"Allow": self._allowed()})
        except _HTTPError as exc:
            self._reject(h, exc)

    def _gated(self, h: _Handler, method: str, gate: Callable[[Gated], GateAnswer | None]) -> bool:
        """Ask the gate about this request; True when it answered instead of serving."""
        try:
            answer = gate(Gated(method, h.path, h.headers))
        except Exception as exc:  # a broken gate shows up as a 500 in the test, not as a dropped connection
            _log.exception("the gate failed")
            answer = GateAnswer(500, {"Content-Type": "text/plain; charset=utf-8"}, f"gate failed: {exc!r}".encode())
        if answer is None:
            return False
        headers = dict(answer.headers)
        try:
            body = h.read_body()  # drained so the next request on this connection starts where it should
        except (ValueError, OSError):
            body = b""
            h.close_connection = True
            headers["Connection"] = "close"
        with self._lock:
            self._record(h, method, body)
        h.send_body(answer.status, answer.body, None, headers)
        return True

    def _record(self, h: Any, method: str, body: bytes) -> None:
        """Keep one received request (callers hold `_lock`)."""
        try:
            parsed: Any = json.loads(body) if body else None
        except (ValueError, RecursionError):
            parsed = None
        self._requests.append(RecordedRequest(method, h.path, h.headers, body, parsed))
        self._changed.notify_all()

    def _take_canned(self, method: str) -> _Canned | None:
        queue = self._canned.get(method)
        if not queue:
            return None
        canned = queue[0]
        canned.times -= 1
        if canned.times <= 0:
            queue.popleft()
        return canned

    def _reject(self, h: _Handler, exc: _HTTPError) -> None:
        if exc.body is None:
            h.send_body(exc.status, b"", None, exc.headers)
        else:
            h.send_json(exc.status, exc.body, exc.headers)

    def _allowed(self) -> str:
        if not self.server.legacy_versions:
            return "POST"
        return "GET, POST, DELETE" if self.get_stream else "POST, DELETE"

    def _check_request(self, h: _Handler) -> None:
        if urlsplit(h.path).path != self.path:
            raise _HTTPError(404)
        origin = h.headers.get("Origin")
        if origin is not None:
            try:
                host = urlsplit(origin).hostname
            except ValueError:
                host = None
            if host not in _LOOPBACK_HOSTS and host != self.host:
                raise _rpc_error(403, _LEGACY_TRANSPORT_ERROR, f"Forbidden: invalid Origin {origin!r}")

    # -- POST -----------------------------------------------------------------------

    def _post(self, h: _Handler, body: bytes) -> None:
        accept = _media_types(h.headers.get("Accept"))
        if not {"application/json", "text/event-stream"} <= accept:
            raise _rpc_error(400, INVALID_REQUEST,
                             "Bad Request: Accept must list both application/json and text/event-stream")
        if "application/json" not in _media_types(h.headers.get("Content-Type")):
            raise _rpc_error(415, INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json")
        try:
            message = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise _rpc_error(400, PARSE_ERROR, f"Parse error: {exc}") from None
        if not isinstance(message, dict):
            raise _rpc_error(400, INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC message object")
        method = message.get("method")
        session_header = h.headers.get("Mcp-Session-Id")
        legacy = bool(self.server.legacy_versions)
        stateless = bool(self.server.stateless_versions)
        if method is None:
            if "result" in message or "error" in message:
                if session_header is not None and legacy:
                    self._legacy_message(h, message)
                    return
                if legacy and not stateless:
                    raise self._no_session()
                raise _rpc_error(400, INVALID_REQUEST, "Invalid Request: clients must not POST responses")
            raise _rpc_error(400, INVALID_REQUEST, "Invalid Request: no method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            request_id = message.get("id")
            raise _rpc_error(400, INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a string method',
                             request_id if _is_request_id(request_id) else None)
        if "id" not in message:  # a notification
            if session_header is not None and legacy:
                self._legacy_message(h, message)
                return
            if not stateless:
                raise self._no_session()
            h.send_body(202, b"", None)
            return
        request_id = message["id"]
        if not _is_request_id(request_id):
            raise _rpc_error(400, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        has_version = isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
        if has_version and stateless:
            self._stateless(h, message, request_id)
        elif method == "initialize":
            self._initialize(h, message, request_id)
        elif session_header is not None and legacy:
            self._legacy_message(h, message)
        elif stateless:
            self._stateless(h, message, request_id)
        else:
            raise self._no_session()

    def _no_session(self) -> _HTTPError:
        # What a legacy SDK answers a request without a session.
        return _rpc_error(400, _LEGACY_TRANSPORT_ERROR, "Bad Request: No valid session ID provided")

    # -- stateless era --------------------------------------------------------------

    def _stateless(self, h: _Handler, message: JSONDict, request_id: RequestId) -> None:
        self._validate_stateless(h, message, request_id)
        stream = _Stream(0, request_id, resumable=False)

        def send(msg: JSONDict, related: RequestId | None) -> None:
            if related == request_id:
                stream.push(msg)
                params = msg.get("params")
                if msg.get("method") == "notifications/cancelled" and isinstance(params, dict) \
                        and params.get("requestId") == request_id:
                    stream.end("cancelled")  # the server tore its subscription down: close the stream

        if not self._register(stream):
            raise _rpc_error(503, INVALID_REQUEST, "Service Unavailable: the server is closing", request_id)
        session = self.server.open_session(send, related=True)
        listen = message.get("method") == "subscriptions/listen"
        if listen:
            with self._lock:
                self._listen_sessions.add(session)
        try:
            session.receive(message)
            # A subscription is a long-lived SSE stream opened by its acknowledgement
            # whatever the response mode (a listen answered with an error gets JSON).
            mode = ("auto" if self.response_mode == "json" else self.response_mode) if listen else self.response_mode
            outcome = self._pump(h, stream, mode=mode,
                                 reply=lambda m: (_stateless_status(m), {}))
            if outcome == _DISCONNECTED:
                session.receive({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": request_id, "reason": "client disconnected"}})
        finally:
            if listen:
                with self._lock:
                    self._listen_sessions.discard(session)
                    self._changed.notify_all()
            session.close()
            self._unregister(stream)

    def _validate_stateless(self, h: _Handler, message: JSONDict, request_id: RequestId) -> None:
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(meta, dict):
            raise _rpc_error(400, INVALID_PARAMS, "Invalid params: params._meta must be an object carrying "
                             f"{META_PROTOCOL_VERSION!r} and {META_CLIENT_CAPABILITIES!r}", request_id)
        missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
        if missing:
            raise _rpc_error(400, INVALID_PARAMS,
                             f"Invalid params: missing required _meta field(s) {', '.join(map(repr, missing))}",
                             request_id)

        def mismatch(text: str) -> _HTTPError:
            return _rpc_error(400, HEADER_MISMATCH, f"Header mismatch: {text}", request_id)

        def header(name: str, required: bool = True) -> str | None:
            values = h.headers.get_all(name) or []
            if len(values) > 1:
                raise mismatch(f"{name} appears more than once")
            if not values:
                if required:
                    raise mismatch(f"the {name} header is required")
                return None
            value = str(values[0])
            if _HEADER_SAFE.fullmatch(value) is None:
                raise mismatch(f"{name} contains invalid characters")
            return value

        version = meta[META_PROTOCOL_VERSION]
        method = message["method"]
        sent_version = header("MCP-Protocol-Version")
        if sent_version != version:
            raise mismatch(f"MCP-Protocol-Version header value {sent_version!r} does not match body value {version!r}")
        sent_method = header("Mcp-Method")
        if sent_method != method:
            raise mismatch(f"Mcp-Method header value {sent_method!r} does not match body value {method!r}")
        name_key = _NAME_BEARING.get(method)
        if name_key is not None:
            raw_name = header("Mcp-Name")
            assert raw_name is not None
            decoded = decode_header_value(raw_name)
            if decoded is None:
                raise mismatch("Mcp-Name has a malformed base64 sentinel")
            if decoded != params.get(name_key):
                raise mismatch(f"Mcp-Name header value {decoded!r} does not match body value {params.get(name_key)!r}")
        if not isinstance(version, str):
            raise _rpc_error(400, INVALID_PARAMS, f"Invalid params: _meta {META_PROTOCOL_VERSION!r} must be a string",
                             request_id)
        if version not in self.server.stateless_versions:
            raise _rpc_error(400, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", request_id,
                             {"supported": list(self.server.stateless_versions), "requested": version})
        if method == "tools/call" and isinstance(params.get("name"), str):
            schema = self.server.input_schema(params["name"])
            if schema is not None:
                arguments = params.get("arguments")
                for path, token in mcp_param_annotations(schema):
                    name = f"Mcp-Param-{token}"
                    value = _value_at(arguments, path)
                    if value is None or isinstance(value, (dict, list)):
                        if h.headers.get_all(name):
                            raise mismatch(f"{name} must be omitted when {'.'.join(path)!r} has no value")
                        continue
                    raw = header(name)
                    assert raw is not None
                    decoded = decode_header_value(raw)
                    if decoded is None:
                        raise mismatch(f"{name} has a malformed base64 sentinel")
                    if not _param_matches(value, decoded):
                        raise mismatch(f"{name} header value {decoded!r} does not match body value {value!r}")

    # -- legacy era -------------------------------------------------------------------

    def _initialize(self, h: _Handler, message: JSONDict, request_id: RequestId) -> None:
        if not self.server.legacy_versions:
            # A stateless-only server: answer with its error naming its versions.
            stream = _Stream(0, request_id, resumable=False)

            def send(msg: JSONDict, related: RequestId | None) -> None:
                if related == request_id:
                    stream.push(msg)

            session = self.server.open_session(send, related=True)
            if not self._register(stream):
                session.close()
                raise _rpc_error(503, INVALID_REQUEST, "Service Unavailable: the server is closing", request_id)
            try:
                session.receive(message)
                self._pump(h, stream, mode="json", reply=lambda m: (400 if "error" in m else 200, {}))
            finally:
                session.close()
                self._unregister(stream)
            return
        legacy = _LegacySession(self, self.server)
        with self._lock:
            if self._closing:
                closing = True
            else:
                closing = False
                self._sessions[legacy.id] = legacy
                self._changed.notify_all()
        if closing:
            legacy.terminate()
            raise _rpc_error(503, INVALID_REQUEST, "Service Unavailable: the server is closing", request_id)
        opened = legacy.open_request_stream(request_id)
        assert opened is not None
        stream = opened
        legacy.initialize_id = request_id
        legacy.session.receive(message)
        # A failed initialize creates no session: its JSON answer is a 400
        # without Mcp-Session-Id (an SSE answer has sent the header already).
        outcome = self._pump(h, stream, mode=self.response_mode,
                             reply=lambda m: (400, {}) if "error" in m else (200, {"Mcp-Session-Id": legacy.id}),
                             headers={"Mcp-Session-Id": legacy.id} if self.response_mode == "sse" else None)
        legacy.release(stream, outcome)
        response = next((m for m in stream.events if "method" not in m), None)
        if outcome != _DONE or response is None or "error" in response:
            self._end_session(legacy)

    def _end_session(self, legacy: _LegacySession) -> None:
        self._forget(legacy)
        legacy.terminate()

    def _forget(self, legacy: _LegacySession) -> None:
        with self._lock:
            if self._sessions.get(legacy.id) is legacy:
                del self._sessions[legacy.id]
                self._changed.notify_all()

    def _session_for(self, h: _Handler) -> _LegacySession:
        """The live session a legacy request names, after checking its headers."""
        session_id = h.headers.get("Mcp-Session-Id")
        if session_id is None:
            raise _rpc_error(400, _LEGACY_TRANSPORT_ERROR, "Bad Request: Mcp-Session-Id header is required")
        with self._lock:
            legacy = self._sessions.get(session_id)
        if legacy is None:
            raise _rpc_error(404, _SESSION_NOT_FOUND, "Session not found")
        version = h.headers.get("MCP-Protocol-Version")
        if version is None or version != legacy.version:
            raise _rpc_error(
                400, _LEGACY_TRANSPORT_ERROR,
                f"Bad Request: MCP-Protocol-Version {version!r} is not the session's version {legacy.version!r}",
            )
        return legacy

    def _legacy_message(self, h: _Handler, message: JSONDict) -> None:
        legacy = self._session_for(h)
        headers = {"Mcp-Session-Id": legacy.id}
        if "id" not in message or "method" not in message:  # a notification or a response
            legacy.session.receive(message)
            if message.get("method") == "notifications/cancelled":
                params = message.get("params")
                legacy.cancel(params.get("requestId") if isinstance(params, dict) else None)
            h.send_body(202, b"", None, headers)
            return
        request_id = message["id"]
        stream = legacy.open_request_stream(request_id)
        if stream is None:
            if legacy.ended:
                raise _rpc_error(404, _SESSION_NOT_FOUND, "Session not found")
            raise _rpc_error(400, INVALID_REQUEST, f"Invalid Request: request id {request_id!r} is already in flight",
                             request_id)
        legacy.session.receive(message)
        outcome = self._pump(h, stream, mode=self.response_mode, reply=lambda m: (200, headers),
                             headers=headers, may_drop=True)
        legacy.release(stream, outcome)

    def _get(self, h: _Handler) -> None:
        if not self.server.legacy_versions or not self.get_stream:
            raise _HTTPError(405, headers={"Allow": self._allowed()})
        if "text/event-stream" not in _media_types(h.headers.get("Accept")):
            raise _rpc_error(400, INVALID_REQUEST, "Bad Request: Accept must list text/event-stream")
        legacy = self._session_for(h)
        headers = {"Mcp-Session-Id": legacy.id}
        last_event_id = h.headers.get("Last-Event-ID")
        if last_event_id is not None:
            found = legacy.find(last_event_id.strip())
            if found is None:
                raise _rpc_error(400, INVALID_REQUEST, f"Bad Request: unknown Last-Event-ID {last_event_id!r}")
            stream, after = found
            outcome = self._pump(h, stream, mode="sse", reply=lambda m: (200, headers), headers=headers,
                                 resume_after=after)
            if outcome == "busy":
                raise _rpc_error(409, INVALID_REQUEST, "Conflict: that stream is already being read")
            legacy.release(stream, outcome)
            return
        standalone = legacy.open_standalone()
        if standalone is None:
            if legacy.ended:
                raise _rpc_error(404, _SESSION_NOT_FOUND, "Session not found")
            raise _rpc_error(409, INVALID_REQUEST, "Conflict: only one GET stream per session is allowed")
        outcome = self._pump(h, standalone, mode="sse", reply=lambda m: (200, headers), headers=headers)
        legacy.release(standalone, outcome)

    def _delete(self, h: _Handler) -> None:
        if not self.server.legacy_versions:
            raise _HTTPError(405, headers={"Allow": self._allowed()})
        legacy = self._session_for(h)
        self._end_session(legacy)
        h.send_body(200, b"", None)

    # -- writing a stream -------------------------------------------------------------

    def _register(self, stream: _Stream) -> bool:
        with self._lock:
            if self._closing:
                return False
            self._live.add(stream)
            return True

    def _unregister(self, stream: _Stream) -> None:
        with self._lock:
            self._live.discard(stream)

    def _take_drop(self) -> bool:
        with self._lock:
            if self._drops > 0:
                self._drops -= 1
                return True
            return False

    def _pump(
        self,
        h: _Handler,
        stream: _Stream,
        *,
        mode: str,
        reply: Callable[[JSONDict], tuple[int, dict[str, str]]],
        headers: Mapping[str, str] | None = None,
        resume_after: int | None = None,
        may_drop: bool = False,
    ) -> str:
        """Write `stream` as this request's HTTP response until its response
        went out (_DONE), the client went away (_DISCONNECTED), the stream was
        cut on purpose (_CUT) or ended (_ENDED: cancelled, session gone,
        server closing)."""
        waker = h.waker()
        if not stream.attach(waker):
            return "busy"
        sse: _SSEWriter | None = None
        cursor = resume_after or 0
        watch = [True]
        try:
            if mode == "sse" or resume_after is not None:
                sse, cut = self._open_sse(h, stream, headers, prime=resume_after is None, may_drop=may_drop)
                if cut:
                    return self._cut(h, sse, stream, waker, cursor)
            while True:
                waker.drain()
                events, ended = stream.take(cursor)
                for seq, message in events:
                    is_response = stream.request_id is not None and "method" not in message
                    if sse is None:
                        if is_response:
                            status, extra = reply(message)
                            stream.delivering(seq)
                            h.send_json(status, message, {**(headers or {}), **extra})
                            cursor = seq
                            return _DONE
                        if mode == "json" and "id" not in message:
                            cursor = seq  # JSON mode: notifications before the response are dropped
                            continue
                        # A server-to-client request (or, in auto/sse mode, any
                        # message before the response) needs an SSE stream.
                        sse, cut = self._open_sse(h, stream, headers, prime=True, may_drop=may_drop)
                        if cut:
                            return self._cut(h, sse, stream, waker, cursor)
                    data = _encode(message).decode("utf-8")
                    if is_response:
                        stream.delivering(seq)
                    sse.event(data, stream.event_id(seq) if stream.resumable else None)
                    cursor = seq
                    if is_response:
                        sse.end()
                        return _DONE
                if ended is not None:
                    if sse is not None:
                        sse.end()
                    elif ended == "cancelled":
                        _SSEWriter(h, headers or {}).end()
                    elif ended == "terminated":
                        h.send_json(404, _error_body(_SESSION_NOT_FOUND, "Session not found"), headers)
                    else:
                        h.close_connection = True
                        h.send_json(503, _error_body(INVALID_REQUEST, "Service Unavailable: the server is closing",
                                                     stream.request_id), {"Connection": "close"})
                    return _ENDED
                if not self._wait(h, waker, watch):
                    h.close_connection = True
                    return _DISCONNECTED
        except OSError:
            _log.debug("client went away while writing a response", exc_info=True)
            h.close_connection = True
            return _DISCONNECTED
        finally:
            stream.detach(waker, cursor)

    def _open_sse(
        self, h: _Handler, stream: _Stream, headers: Mapping[str, str] | None, *, prime: bool, may_drop: bool
    ) -> tuple[_SSEWriter, bool]:
        cut = may_drop and stream.resumable and self._take_drop()
        extra = dict(headers or {})
        if cut:
            extra["Connection"] = "close"
        sse = _SSEWriter(h, extra)
        if prime and stream.resumable:
            sse.event("", stream.event_id(0), self.retry_ms)
        return sse, cut

    def _cut(self, h: _Handler, sse: _SSEWriter, stream: _Stream, waker: _Waker, cursor: int) -> str:
        sse.retry(self.retry_ms if self.retry_ms is not None else _DEFAULT_RETRY_MS)
        # Let go of the stream before the client can see the cut, so its
        # resuming GET never finds the stream still attached.
        stream.detach(waker, cursor)
        sse.end()
        h.close_connection = True
        return _CUT

    def _wait(self, h: _Handler, waker: _Waker, watch: list[bool]) -> bool:
        """Wait for the stream's waker or the client closing; False once the client is gone."""
        conn: socket.socket = h.connection
        poller = select.poll()
        poller.register(waker.fileno(), select.POLLIN)
        if watch[0]:
            poller.register(conn.fileno(), select.POLLIN)
        for fd, flags in poller.poll(1000):
            if fd != conn.fileno():
                continue
            if flags & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return False
            try:
                peeked = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return False
            if not peeked:
                return False
            watch[0] = False  # the client sent more (pipelining): stop watching, it is not a close
        return True


def _stateless_status(message: JSONDict) -> int:
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return _STATELESS_STATUS.get(code, 200) if isinstance(code, int) else 200

