"""Streamable HTTP for the test server: `HTTPServer` serves a `Server` on a real socket.

Standard library only (`http.server`). One endpoint (`path`, default `/mcp`)
speaks both protocol eras, the way a dual-era server does; `Server(versions=...)`
narrows it to one era, and then it answers the other era the way real
single-era servers do.

How each era is served (validation, sessions, streams, status codes) is
documented in `_eras`.

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

A `gate` (a constructor argument) sees every request first, whatever its
method or path, before the path check: returning a `GateAnswer` sends that
answer instead of serving the request (the request is still recorded),
returning None serves it as usual. It is the one place to intercept
requests: `ProtectedMCP` checks tokens there, and the client's own tests
put raw answers (404 pages, 401 challenges, bodies that are not JSON-RPC)
in front of a real server with it.

Test knobs (thread-safe): `requests` (the requests received, as
`RecordedRequest`: the newest `max_records`, 1000 by default),
`expire_sessions()`, `drop_after_first_event()`, `end_get_streams()`, `notify()` (a message
related to no request, on each session's GET stream), `sessions`,
`connections` and `wait_for()` (wait until a predicate over those holds).
`close()` stops the listener, ends every session and stream, shuts every
connection down and joins every thread it started.

This module owns `HTTPServer`: its test knobs, what closing ends and the
routing of each request to an era, served by `_eras` (which documents
both eras). The pieces live next to it: the lifecycle and knobs it shares
with other loopback servers (and `RecordedRequest`) in `_loopback`, the socket and
its threads in `_listener`, HTTP framing in `_framing`, request checks
and rejections in `_validation`, streams and legacy sessions in `_streams`,
writing a stream as a response in `_responses`.
"""

from __future__ import annotations

import email.message
import json
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from . import _eras
from ._framing import RequestHandler, media_types
from ._listener import DEFAULT_MAX_RECORDS
from ._loopback import LoopbackServer
from ._protocol import (
    INVALID_REQUEST,
    META_PROTOCOL_VERSION,
    PARSE_ERROR,
    JSONDict,
    is_request_id,
)
from ._registry import Server
from ._session import ServerSession
from ._streams import LegacySession, Stream
from ._validation import LEGACY_TRANSPORT_ERROR, HTTPError, rpc_error

#: close(): how long (seconds) to let open subscriptions write their completion result.
_CLOSE_GRACE = 5.0

_log = logging.getLogger("mcp_sync.testing.http")

RESPONSE_MODES = ("auto", "json", "sse")

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


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


class HTTPServer(LoopbackServer):
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
    * `max_records`: how many requests `requests` keeps (the newest; default
      1000), so a long-running server's memory stays flat.

    See the module docstring for the behaviour and status codes."""

    _thread_name = "mcp-testing-http"

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
        max_records: int = DEFAULT_MAX_RECORDS,
    ) -> None:
        if response_mode not in RESPONSE_MODES:
            raise ValueError(f"response_mode must be one of {', '.join(RESPONSE_MODES)}, not {response_mode!r}")
        if retry_ms is not None and (isinstance(retry_ms, bool) or not isinstance(retry_ms, int) or retry_ms < 0):
            raise ValueError("retry_ms must be None or a non-negative integer")
        super().__init__(server, host, port, path=path, ssl_context=ssl_context, max_records=max_records)
        self.response_mode = response_mode
        self.sse_ids = sse_ids
        self.get_stream = get_stream
        self.retry_ms = retry_ms
        self.gate = gate
        self._sessions: dict[str, LegacySession] = {}
        self._live: set[Stream] = set()
        #: Stateless sessions serving a subscriptions/listen POST.
        self._listen_sessions: set[ServerSession] = set()
        self._drops = 0

    # -- lifecycle --------------------------------------------------------------

    def _end_all(self) -> None:
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

    # -- test knobs -------------------------------------------------------------

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

    def end_get_streams(self) -> int:
        """End every live legacy session's standalone GET stream, as a server
        restarting its streams (or a proxy cutting idle ones) would; the
        sessions stay. Returns how many were ended."""
        streams = self._standalone_streams()
        for stream in streams:
            stream.end("the test server ended the GET stream")
        return len(streams)

    def _standalone_streams(self) -> list[Any]:
        """The live legacy sessions' standalone GET streams, now."""
        with self._lock:
            sessions = list(self._sessions.values())
        streams = []
        for session in sessions:
            with session.lock:
                stream = session.standalone
            if stream is not None:
                streams.append(stream)
        return streams

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        """Send a notification related to no request to every live legacy
        session, on its standalone GET stream; returns how many sessions took
        it (a session without a GET stream drops it)."""
        message: JSONDict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        return sum(1 for stream in self._standalone_streams() if stream.push(dict(message)))

    @property
    def sessions(self) -> int:
        """How many legacy sessions are live."""
        with self._lock:
            return len(self._sessions)

    # -- serving ------------------------------------------------------------------

    def _serve(self, h: RequestHandler, method: str) -> None:
        if self.gate is not None and self._gated(h, method, self.gate):
            return
        body = self._read_body(h)
        if body is None:
            return
        with self._lock:
            self._record(h, method, body)
        try:
            self._check_request(h)
            if method == "POST":
                self._post(h, body)
            elif method == "GET":
                _eras.serve_get(self, h)
            elif method == "DELETE":
                _eras.serve_delete(self, h)
            else:
                raise HTTPError(405, headers={"Allow": self._allowed()})
        except HTTPError as exc:
            self._reject(h, exc)

    def _gated(self, h: RequestHandler, method: str, gate: Callable[[Gated], GateAnswer | None]) -> bool:
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

    def _reject(self, h: RequestHandler, exc: HTTPError) -> None:
        if exc.body is None:
            h.send_body(exc.status, b"", None, exc.headers)
        else:
            h.send_json(exc.status, exc.body, exc.headers)

    def _allowed(self) -> str:
        if not self.server.legacy_versions:
            return "POST"
        return "GET, POST, DELETE" if self.get_stream else "POST, DELETE"

    def _check_request(self, h: RequestHandler) -> None:
        if urlsplit(h.path).path != self.path:
            raise HTTPError(404)
        origin = h.headers.get("Origin")
        if origin is not None:
            try:
                host = urlsplit(origin).hostname
            except ValueError:
                host = None
            if host not in _LOOPBACK_HOSTS and host != self.host:
                raise rpc_error(403, LEGACY_TRANSPORT_ERROR, f"Forbidden: invalid Origin {origin!r}")

    # -- POST -----------------------------------------------------------------------

    def _post(self, h: RequestHandler, body: bytes) -> None:
        accept = media_types(h.headers.get("Accept"))
        if not {"application/json", "text/event-stream"} <= accept:
            raise rpc_error(400, INVALID_REQUEST,
                            "Bad Request: Accept must list both application/json and text/event-stream")
        if "application/json" not in media_types(h.headers.get("Content-Type")):
            raise rpc_error(415, INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json")
        try:
            message = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise rpc_error(400, PARSE_ERROR, f"Parse error: {exc}") from None
        if not isinstance(message, dict):
            raise rpc_error(400, INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC message object")
        method = message.get("method")
        session_header = h.headers.get("Mcp-Session-Id")
        legacy = bool(self.server.legacy_versions)
        stateless = bool(self.server.stateless_versions)
        if method is None:
            if "result" in message or "error" in message:
                if session_header is not None and legacy:
                    _eras.serve_legacy_message(self, h, message)
                    return
                if legacy and not stateless:
                    raise self._no_session()
                raise rpc_error(400, INVALID_REQUEST, "Invalid Request: clients must not POST responses")
            raise rpc_error(400, INVALID_REQUEST, "Invalid Request: no method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            request_id = message.get("id")
            raise rpc_error(400, INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a string method',
                            request_id if is_request_id(request_id) else None)
        if "id" not in message:  # a notification
            if session_header is not None and legacy:
                _eras.serve_legacy_message(self, h, message)
                return
            if not stateless:
                raise self._no_session()
            h.send_body(202, b"", None)
            return
        request_id = message["id"]
        if not is_request_id(request_id):
            raise rpc_error(400, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        has_version = isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
        if has_version and stateless:
            _eras.serve_stateless(self, h, message, request_id)
        elif method == "initialize":
            _eras.serve_initialize(self, h, message, request_id)
        elif session_header is not None and legacy:
            _eras.serve_legacy_message(self, h, message)
        elif stateless:
            _eras.serve_stateless(self, h, message, request_id)
        else:
            raise self._no_session()

    def _no_session(self) -> HTTPError:
        # What a legacy SDK answers a request without a session.
        return rpc_error(400, LEGACY_TRANSPORT_ERROR, "Bad Request: No valid session ID provided")

    def _forget(self, legacy: LegacySession) -> None:
        """Drop a session from the table (its id answers 404 from now on)."""
        with self._lock:
            if self._sessions.get(legacy.id) is legacy:
                del self._sessions[legacy.id]
                self._changed.notify_all()

    # -- writing a stream -------------------------------------------------------------

    def _register(self, stream: Stream) -> bool:
        with self._lock:
            if self._closing:
                return False
            self._live.add(stream)
            return True

    def _unregister(self, stream: Stream) -> None:
        with self._lock:
            self._live.discard(stream)

    def _take_drop(self) -> bool:
        with self._lock:
            if self._drops > 0:
                self._drops -= 1
                return True
            return False

