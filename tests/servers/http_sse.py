"""The old HTTP+SSE transport (protocol 2024-11-05) for the test server: `SSEServer`.

It serves a `Server` the way servers built on SDK releases before Streamable
HTTP do (the official Python SDK's `SseServerTransport`, the TypeScript
SDK's `SSEServerTransport`): `GET /sse` opens a session and its event
stream, whose first event is `endpoint` (data: `/messages?session_id=<id>`);
every client message is `POST /messages?session_id=<id>`, answered 202
`Accepted`; every server message (responses, notifications, requests) is a
`message` event on that session's one stream. A POST for an unknown session
gets 404, a body that is not JSON 400, any other path 404 and any other
method 405 (so the `POST /sse` of a client trying Streamable HTTP first gets
405, as from the official SDK). The session ends when its stream does. The
`Server` decides the protocol revision: `Server(versions=["2024-11-05"])`
(or `demo_server(versions=...)`) makes a server of that era.

It owns the sessions and the writing of their streams; the lifecycle and
the knobs it shares with `HTTPServer` are `_loopback`'s, the socket and its
threads `_listener`'s, HTTP framing is `_framing`'s, a stream's message
queue is `_streams.Stream`, and serving MCP is the `ServerSession`'s.

Test knobs: `endpoint` (the endpoint event's data, a template with
`{session_id}`: another origin, say), `send_endpoint=False` (a stream that
never names one), `end_streams()` (every stream ends, as when the server
restarts), `requests`, `sessions` and `wait_for()`. `close()` ends every
session, shuts every connection down and joins every thread.
"""

from __future__ import annotations

import logging
import ssl
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mcp_sync.testing._framing import RequestHandler, SSEWriter, encode, media_types
from mcp_sync.testing._listener import DEFAULT_MAX_RECORDS
from mcp_sync.testing._loopback import LoopbackServer
from mcp_sync.testing._protocol import JSONDict
from mcp_sync.testing._registry import Server
from mcp_sync.testing._responses import _wait
from mcp_sync.testing._session import ServerSession
from mcp_sync.testing._streams import Stream

_log = logging.getLogger("mcp_sync.testing.sse")


class _NamedEvents(SSEWriter):
    """An SSE writer that can also name an event's type (`endpoint`)."""

    def named(self, event: str, data: str) -> None:
        self._write(f"event: {event}\ndata: {data}\n\n".encode())


class _Session:
    """One client: its `ServerSession` and the stream its messages go out on."""

    def __init__(self, server: Server) -> None:
        self.id = uuid.uuid4().hex
        self.stream = Stream(0, None, resumable=False)
        self.session: ServerSession = server.open_session(self._send)

    def _send(self, message: JSONDict) -> None:
        if not self.stream.push(message):
            _log.debug("session %s: stream ended; dropped %r", self.id, message.get("method") or message.get("id"))


class SSEServer(LoopbackServer):
    """Serve a `Server` over the old HTTP+SSE transport on 127.0.0.1, for tests and docs.

    Example::

        with SSEServer(demo_server(versions=["2024-11-05"])) as sse:
            client = mcp_sync.connect(sse.url)  # "http://127.0.0.1:PORT/sse"
            assert client.transport_kind == "sse" and client.protocol_version == "2024-11-05"

    Arguments: `path` (the stream, default "/sse"), `messages_path` (where
    messages are POSTed, default "/messages"), `endpoint` (the data of the
    endpoint event, a template with `{session_id}`; default
    "<messages_path>?session_id={session_id}"), `send_endpoint` (False: the
    stream never names one), `ssl_context` (serve HTTPS), `max_records`
    (how many requests `requests` keeps). See the module docstring.
    """

    _thread_name = "mcp-testing-sse"

    def __init__(
        self,
        server: Server,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        path: str = "/sse",
        messages_path: str = "/messages",
        endpoint: str | None = None,
        send_endpoint: bool = True,
        ssl_context: ssl.SSLContext | None = None,
        max_records: int = DEFAULT_MAX_RECORDS,
    ) -> None:
        if not messages_path.startswith("/"):
            raise ValueError("messages_path must start with '/'")
        super().__init__(server, host, port, path=path, ssl_context=ssl_context, max_records=max_records)
        self.messages_path = messages_path
        self.endpoint = endpoint if endpoint is not None else messages_path + "?session_id={session_id}"
        self.send_endpoint = send_endpoint
        self._sessions: dict[str, _Session] = {}

    def _end_all(self) -> None:
        self.end_streams()

    # -- test knobs ---------------------------------------------------------------------

    @property
    def sessions(self) -> int:
        """How many sessions (open streams) are live."""
        with self._lock:
            return len(self._sessions)

    def end_streams(self) -> int:
        """End every session's stream (its session with it), as a server
        restarting would; returns how many ended."""
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.stream.end("ended by the test server")
        return len(sessions)

    # -- serving ------------------------------------------------------------------------

    def _serve(self, h: RequestHandler, method: str) -> None:
        body = self._read_body(h)
        if body is None:
            return
        with self._lock:
            parsed = self._record(h, method, body)
        target = urlsplit(h.path)
        path = unquote(target.path)
        if path == self.path and method == "GET":
            self._stream(h)
        elif path == self.messages_path and method == "POST":
            self._message(h, target.query, parsed)
        elif path in (self.path, self.messages_path):
            h.send_body(405, b"Method Not Allowed", "text/plain; charset=utf-8",
                        {"Allow": "GET" if path == self.path else "POST"})
        else:
            h.send_body(404, b"Not Found", "text/plain; charset=utf-8")

    def _stream(self, h: RequestHandler) -> None:
        """A new session: its stream, the endpoint event first, then every
        server message until the stream ends or the client goes away."""
        session = _Session(self.server)
        with self._lock:
            if self._closing:
                session.session.close()
                h.send_body(503, b"Service Unavailable", "text/plain; charset=utf-8", {"Connection": "close"})
                return
            self._sessions[session.id] = session
            self._changed.notify_all()
        stream, waker = session.stream, h.waker()
        stream.attach(waker)
        cursor = 0
        watch = [True]
        try:
            writer = _NamedEvents(h, {})
            if self.send_endpoint:
                writer.named("endpoint", self.endpoint.format(session_id=session.id))
            while True:
                waker.drain()
                events, ended = stream.take(cursor)
                for seq, message in events:
                    writer.event(encode(message).decode("utf-8"))
                    cursor = seq
                if ended is not None:
                    writer.end()
                    h.close_connection = True
                    return
                if not _wait(h, waker, watch):
                    h.close_connection = True
                    return
        except OSError:
            h.close_connection = True  # the client went away
        finally:
            stream.detach(waker, cursor)
            with self._lock:
                self._sessions.pop(session.id, None)
                self._changed.notify_all()
            session.session.close()

    def _message(self, h: RequestHandler, query: str, message: Any) -> None:
        session_id = (parse_qs(query).get("session_id") or [""])[0]
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            h.send_body(404, b"Could not find session", "text/plain; charset=utf-8")
            return
        if "application/json" not in media_types(h.headers.get("Content-Type")):
            h.send_body(400, b"Bad Request: Content-Type must be application/json", "text/plain; charset=utf-8")
            return
        if not isinstance(message, dict):
            h.send_body(400, b"Could not parse message", "text/plain; charset=utf-8")
            return
        session.session.receive(message)
        h.send_body(202, b"Accepted", "text/plain; charset=utf-8")
