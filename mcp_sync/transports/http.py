"""The Streamable HTTP transport, for both protocol eras.

Owns: a bounded pool of keep-alive connections to one origin, a small set of
reusable *exchange* threads, and (initialize era only) the session id and
the standalone GET stream's reader thread. It moves JSON-RPC messages; what
they mean is the engine's and the client's business.

How it works. Every request is its own POST. A caller that is about to wait
for its answer does the exchange itself (`exchange_on_caller()`, which the
engine uses): it POSTs and reads the answer on its own thread, socket reads
bounded by its deadline, so the common JSON answer costs no thread hand-off.
When the answer is an SSE stream (progress, log messages, server requests
may come before the response), the rest of the stream goes to an exchange
thread and the caller waits on its inbox, where its callbacks run.
`send()` (a request nobody waits on at once: `subscriptions/listen`) hands
the whole exchange to an idle exchange thread; threads are reused, never
created per call. Every message read is delivered to the sink tagged with
the request it belongs to. Cancelling a request (timeout, abandon, close
from another thread) shuts down the socket of its exchange, which unblocks
the blocked read at once, on either kind of thread.

An answer with no JSON-RPC message in it fails that one request with
`HTTPStatusError` (401/403: `AuthenticationError`; 404 on a session:
`SessionExpired`); a JSON-RPC error body of any status is delivered as the
error response it is, which is how the client tells a modern server's 400
from a legacy server's.

Why urllib3 and not requests: urllib3's connection objects expose the
socket (to shut it down from another thread), stream with `read1`, and cost
less per call; a `requests.Session` is not documented as thread-safe and
adds adapters and hooks the hot path does not need.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3
import urllib3.connection
import urllib3.exceptions
from urllib3.util import parse_url

from .._version import __version__
from ..auth import TokenProvider, as_token_provider
from ..errors import (
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    ConnectionClosed,
    HTTPStatusError,
    InvalidMessage,
    MessageTooLarge,
    SessionExpired,
    TransportError,
)
from ..protocol import jsonrpc
from ..protocol.headers import check_user_headers, standard_headers
from ..protocol.sse import EventTooLarge, SSEParser
from .base import MessageSink, Target, Transport
from .http11 import Response
from .pool import Conn, Exchange, ExchangeThreads, Pool

# Read timeouts only: urllib3 files a refused connection under its timeout errors too.
_TIMEOUTS = (socket.timeout, urllib3.exceptions.ReadTimeoutError)
_USER_AGENT = f"mcp-sync/{__version__}"

log = logging.getLogger("mcp_sync.transport.http")

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
DEFAULT_RETRY_MS = 1000
_READ_CHUNK = 65536
_ERROR_BODY_PREVIEW = 500

class HTTP(Target):
    """Target a Streamable HTTP server: `connect(HTTP(url, ...))`, or pass the
    URL string and these options straight to `connect()`.

    Example::

        client = mcp_sync.connect(HTTP("https://example.com/mcp",
                                       headers={"X-Tenant": "acme"}, auth="my-token",
                                       verify="/etc/ssl/internal-ca.pem"))

    - `headers`: extra headers for every request (the transport's own headers,
      and values with CR, LF or NUL, are refused).
    - `auth`: a bearer token string, a function returning one, or a token
      provider (see `mcp_sync.auth`); refreshed once after a 401.
    - `verify`: True (system CAs), False (no verification), or a CA bundle path.
    - `cert`: a client certificate file, or a (certificate, key) pair.
    - `connect_timeout`: seconds to open a TCP/TLS connection.
    - `max_response_bytes`: the most one JSON body or one SSE event may hold.
    - `pool_size`: the most connections (and so concurrent requests) at once.
    - `max_resume_attempts`: initialize era, how often a broken SSE stream is
      resumed with `Last-Event-ID`.
    - `session_close_timeout`: the longest `close()` waits for the session DELETE.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        connect_timeout: float = 10.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        pool_size: int = 32,
        max_resume_attempts: int = 3,
        session_close_timeout: float = 5.0,
    ) -> None:
        if not isinstance(url, str):
            raise TypeError("the HTTP target needs a URL string")
        parsed = parse_url(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not an http(s) URL: {url!r}")
        if not isinstance(max_response_bytes, int) or isinstance(max_response_bytes, bool) or max_response_bytes < 1:
            raise ValueError("max_response_bytes must be a positive integer")
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise ValueError("pool_size must be a positive integer")
        for name, value in (("connect_timeout", connect_timeout), ("session_close_timeout", session_close_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        if not isinstance(verify, (bool, str)):
            raise TypeError("verify must be True, False or a CA bundle path")
        self.url = url
        self.scheme = parsed.scheme
        self.host = parsed.host
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.path = parsed.request_uri or "/"
        self.headers = check_user_headers(headers or {})
        self.auth: TokenProvider | None = as_token_provider(auth)
        attach = getattr(self.auth, "attach", None)
        if attach is not None:
            attach(url)  # an OAuth provider learns the server it authorizes for
        self.verify = verify
        self.cert = cert
        self.connect_timeout = float(connect_timeout)
        self.max_response_bytes = max_response_bytes
        self.pool_size = pool_size
        self.max_resume_attempts = max_resume_attempts
        self.session_close_timeout = float(session_close_timeout)

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def post_head(self) -> str:
        """The start of every POST's head: request line and fixed headers."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        authority = host if self.port == default else f"{host}:{self.port}"
        return (f"POST {self.path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {_USER_AGENT}\r\n"
                "Accept-Encoding: identity\r\n")

    def new_connection(self, timeout: float | None) -> Conn:
        if self.scheme == "https":
            cert_file, key_file = (self.cert, None) if isinstance(self.cert, str) or self.cert is None else self.cert
            ca = self.verify if isinstance(self.verify, str) else None
            return urllib3.connection.HTTPSConnection(
                self.host, self.port, timeout=timeout,
                cert_reqs="CERT_REQUIRED" if self.verify is not False else "CERT_NONE",
                assert_hostname=None if self.verify is not False else False,
                ca_certs=ca, cert_file=cert_file, key_file=key_file,
            )
        return urllib3.connection.HTTPConnection(self.host, self.port, timeout=timeout)

    def open(self) -> Transport:
        return HTTPTransport(self)

    def __repr__(self) -> str:
        return f"HTTP({self.url!r})"


class HTTPTransport(Transport):
    restarts_server = False
    mirrors_headers = True

    def __init__(self, target: HTTP) -> None:
        self._target = target
        self._post_head = target.post_head
        self._sink: MessageSink | None = None
        self._pool = Pool(self._new_connection, target.pool_size)
        self._threads = ExchangeThreads("mcp-sync-http")
        self._lock = threading.Lock()
        self._exchanges: dict[int | str, Exchange] = {}
        self._closing = False
        self._closed = False
        self._close_lock = threading.Lock()
        # Initialize-era state.
        self._legacy = False
        self._version: str | None = None
        self._session_id: str | None = None
        self._get_thread: threading.Thread | None = None
        self._get_exchange: Exchange | None = None
        self._get_offered = True
        self._auth_lock = threading.Lock()
        self._auth_generation = 0

    # -- lifecycle -------------------------------------------------------------------

    def start(self, sink: MessageSink) -> None:
        self._sink = sink

    @property
    def cancels_by_notification(self) -> bool:  # type: ignore[override]
        # 2026-07-28: closing the stream is the cancellation. Before it, a
        # disconnect is not a cancellation and the notification is needed.
        return self._legacy

    def negotiated(self, protocol_version: str, stateless: bool) -> None:
        with self._lock:
            self._version = protocol_version
            self._legacy = not stateless

    def _open_get_stream(self) -> None:
        """After `notifications/initialized`: listen on the session's GET
        stream, if the server offers one (a 405 says it does not)."""
        with self._lock:
            start_get = self._legacy and self._get_offered and not self._closing
            if start_get and self._get_thread is not None and self._get_thread.is_alive():
                start_get = False
        if start_get:
            opened = threading.Event()
            thread = threading.Thread(target=self._read_get_stream, args=(opened,), name="mcp-sync-http-get",
                                      daemon=True)
            with self._lock:
                self._get_thread = thread
            thread.start()
            # Wait (briefly) until the server has answered the GET, so the
            # stream exists before the first request is sent: a server may
            # otherwise take a late GET for something else, such as the
            # resumption of a request's stream.
            opened.wait(min(_GET_OPEN_WAIT, self._target.connect_timeout))

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def describe(self) -> str:
        return f"Streamable HTTP server {self._target.url}"

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            with self._lock:
                self._closing = True
                exchanges = list(self._exchanges.values())
                get_exchange = self._get_exchange
                get_thread = self._get_thread
            if self._legacy and self._session_id is not None:
                self._delete_session()
            for exchange in exchanges:
                exchange.abort()
            if get_exchange is not None:
                get_exchange.abort()
            self._pool.close()
            self._threads.close()
            if get_thread is not None and get_thread is not threading.current_thread():
                get_thread.join()
            self._closed = True

    def _delete_session(self) -> None:
        """End the session; its outcome is never an error (the spec lets a
        server refuse with 405, and we are leaving anyway)."""
        limit = self._target.session_close_timeout
        if self.request_timeout is not None:
            limit = min(limit, self.request_timeout)
        conn = self._target.new_connection(timeout=limit)
        try:
            conn.request("DELETE", self._target.path, headers=self._base_headers(legacy_session=True, method="DELETE"))
            response = conn.getresponse()
            response.read()
            log.debug("session DELETE answered %s", response.status)
        except (OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
            log.debug("session DELETE failed: %s", exc)
        finally:
            conn.close()

    # -- sending ---------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        if self._closing:
            raise ConnectionClosed("the connection is closed")
        if "method" in message and "id" in message:
            request_id = message["id"]
            exchange = Exchange(request_id)
            with self._lock:
                if self._closing:
                    raise ConnectionClosed("the connection is closed")
                self._exchanges[request_id] = exchange
            body = jsonrpc.encode(message)
            generation = self._auth_generation  # before the credentials are read
            request_headers = self._request_headers(message, headers)
            try:
                self._threads.submit(lambda: self._exchange(exchange, message, body, request_headers, generation))
            except ConnectionClosed:
                with self._lock:
                    self._exchanges.pop(request_id, None)
                raise
        else:
            self._post_one_way(message)

    def exchange_on_caller(
        self, message: Mapping[str, Any], headers: Mapping[str, str] | None, deadline: float | None,
    ) -> float:
        """POST a request and read its answer on this (the caller's) thread.

        Returns once the answer was delivered to the sink, failed, or timed
        out at `deadline` (then nothing is delivered and the caller's own
        deadline check reports the timeout), or once an SSE answer was handed
        to an exchange thread. Returns the seconds spent getting
        authorization, which do not count against the deadline.
        """
        if self._closing:
            raise ConnectionClosed("the connection is closed")
        request_id = message["id"]
        exchange = Exchange(request_id, on_caller=True, deadline=deadline)
        with self._lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            self._exchanges[request_id] = exchange
        generation = self._auth_generation  # before the credentials are read
        self._exchange(exchange, message, jsonrpc.encode(message), self._request_headers(message, headers), generation)
        return exchange.auth_pause

    def cancel(self, request_id: int | str) -> None:
        with self._lock:
            exchange = self._exchanges.pop(request_id, None)
        if exchange is not None:
            exchange.abort()
            self._pool.wake()

    def _new_connection(self) -> Conn:
        return self._target.new_connection(timeout=self._target.connect_timeout)

    def _base_headers(self, *, legacy_session: bool, method: str = "POST") -> dict[str, str]:
        headers = dict(self._target.headers)
        if legacy_session:
            if self._version is not None:
                headers["MCP-Protocol-Version"] = self._version
            if self._session_id is not None:
                headers["Mcp-Session-Id"] = self._session_id
        if self._target.auth is not None:
            headers.update(self._auth_header(method))
        return headers

    def _request_headers(self, message: Mapping[str, Any], extra: Mapping[str, str] | None) -> dict[str, str]:
        is_initialize = message.get("method") == "initialize"
        headers = self._base_headers(legacy_session=self._legacy and not is_initialize)
        headers["Accept"] = "application/json, text/event-stream"
        headers["Content-Type"] = "application/json"
        if not self._legacy and not is_initialize:
            headers.update(standard_headers(message))
        if extra:
            headers.update(extra)
        return headers

    def _post_one_way(self, message: Mapping[str, Any]) -> None:
        """A notification or a response to a server request: POSTed on the
        caller's thread; the server answers 202 (or 200) with no message."""
        generation = self._auth_generation  # before the credentials are read
        headers = self._base_headers(legacy_session=self._legacy)
        headers["Accept"] = "application/json, text/event-stream"
        headers["Content-Type"] = "application/json"
        stop = threading.Event()
        body = jsonrpc.encode(message)
        for attempt in range(1 + _MAX_AUTH_RETRIES):
            conn = self._pool.acquire(stop)
            reusable = False
            try:
                # Not cancellable from another thread, so bounded by the client's timeout.
                self._ready(conn, self.request_timeout)
                conn.request("POST", self._target.path, body=body, headers=headers)
                response = conn.getresponse()
                answer = self._read_body(response, _ERROR_BODY_PREVIEW * 4, truncate=True)
                reusable = True
            except (OSError, urllib3.exceptions.HTTPError) as exc:
                raise ConnectError(f"POST to {self._target.url} failed: {exc}") from exc
            finally:
                self._pool.release(conn, reusable)
            if response.status in (401, 403) and self._refresh_auth(response, generation, attempt):
                generation = self._auth_generation
                headers = self._with_auth(headers)
                continue
            if response.status >= 300:
                raise self._status_error(response, answer, session=self._session_id is not None)
            break
        if message.get("method") == "notifications/initialized":
            self._open_get_stream()

    # -- one exchange (on an exchange thread) -------------------------------------------

    def _exchange(self, exchange: Exchange, message: Mapping[str, Any], body: bytes, headers: dict[str, str],
                  generation: int) -> None:
        """`generation` is the auth generation read before `headers` were
        made: a 401 for credentials older than a refresh just retries."""
        sent_session = "Mcp-Session-Id" in headers
        with self._reporting(exchange):
            for attempt in range(1 + _MAX_AUTH_RETRIES):
                response = self._post(exchange, body, headers)
                if response is None:
                    return
                if response.status in (401, 403):
                    started = time.monotonic()
                    retry = self._refresh_auth(response, generation, attempt)
                    if exchange.deadline is not None:
                        # The call's clock stops while authorization runs
                        # (a person may be approving in a browser).
                        paused = time.monotonic() - started
                        exchange.deadline += paused
                        exchange.auth_pause += paused
                    if retry:
                        self._finish(exchange, reusable=self._drain(response))
                        generation = self._auth_generation
                        headers = self._with_auth(headers)
                        continue
                self._handle(exchange, message, response, sent_session)
                return

    @contextlib.contextmanager
    def _reporting(self, exchange: Exchange) -> Iterator[None]:
        """Report an exchange's failure to its caller, then forget the
        exchange and drop its connection unless a stream was handed off."""
        try:
            yield
        except TransportError as exc:
            self._fail(exchange, exc)
        except (OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
            if exchange.deadline is not None and isinstance(exc, _TIMEOUTS) and not isinstance(
                exc, urllib3.exceptions.NewConnectionError
            ):
                # The caller's deadline passed during a read on its own
                # thread: it reports the timeout itself; deliver nothing.
                exchange.stop.set()
            self._fail(exchange, ConnectError(f"POST to {self._target.url} failed: {exc}"))
        finally:
            if not exchange.handed_off:
                with self._lock:
                    if self._exchanges.get(exchange.request_id) is exchange:
                        del self._exchanges[exchange.request_id]
                if exchange.conn is not None:
                    self._finish(exchange, reusable=False)

    def _stream_on_thread(self, exchange: Exchange, response: Any) -> None:
        """The rest of an SSE answer, read on an exchange thread."""
        with self._reporting(exchange):
            self._read_request_stream(exchange, response)

    def _ready(self, conn: Conn, read_timeout: float | None) -> None:
        """Connect with the connect timeout, then read with `read_timeout`
        (None for exchanges: their deadline is the caller's, enforced by
        shutting the socket down)."""
        if conn.sock is None:
            conn.timeout = self._target.connect_timeout
            conn.connect()
        conn.timeout = read_timeout

    def _post(self, exchange: Exchange, body: bytes, headers: Mapping[str, str]) -> Any:
        deadline = exchange.deadline
        try:
            conn = self._pool.acquire(exchange.stop, deadline)
        except ConnectionClosed:
            return None
        exchange.conn = conn
        if exchange.stop.is_set():
            return None
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        self._ready(conn, timeout)
        response = self._send_post(conn, body, headers, timeout)
        exchange.response = response
        return response

    def _send_post(self, conn: Conn, body: bytes, headers: Mapping[str, str], timeout: float | None) -> Any:
        """Write one POST in a single `sendall` and read the answer's head
        (`http11.Response`).

        The bytes are what urllib3 would send; what is skipped is its
        per-header validation, its response wrapper and http.client's
        email-based header parsing, together most of the client's CPU for a
        small answer (docs/benchmarks.md). The validation is kept
        in one pass over the whole head: a CR, LF or NUL inside any header
        value (a token provider's, say) is refused, so nothing can add a
        header or split the request.
        """
        lines = [self._post_head]
        for name, value in headers.items():
            lines.append(f"{name}: {value}\r\n")
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        text = "".join(lines)
        breaks = len(headers) + 6  # the request line, 4 fixed headers, the blank line
        if text.count("\n") != breaks or text.count("\r") != breaks or "\0" in text:
            raise ValueError("a request header value holds CR, LF or NUL")
        try:
            head = text.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError("a request header value is not Latin-1 text") from None
        sock = conn.sock
        assert sock is not None  # connected by _ready
        sock.settimeout(timeout)
        if len(body) < 65536:
            sock.sendall(head + body)
        else:  # no copy of a large body just to join it to the head
            sock.sendall(head)
            sock.sendall(body)
        response = Response(sock)
        response.begin()
        if response.will_close:
            # The server ends the connection after this answer: the pool
            # must open a new one (the socket really closes with the reader).
            conn.close()
        return response

    def _finish(self, exchange: Exchange, *, reusable: bool) -> None:
        conn, response = exchange.conn, exchange.response
        exchange.conn = exchange.response = None
        if response is not None and not reusable:
            # The response holds its own reference to the socket's file.
            try:
                response.close()
            except (OSError, RuntimeError):
                pass
        if conn is None:
            return
        if exchange.pooled:
            self._pool.release(conn, reusable)
        else:
            conn.close()

    def _fail(self, exchange: Exchange, error: TransportError) -> None:
        if exchange.stop.is_set() or self._closing:
            return  # cancelled: the caller has gone, nobody to tell
        if self._sink is not None:
            self._sink.request_failed(exchange.request_id, error)

    def _handle(self, exchange: Exchange, message: Mapping[str, Any], response: Any, sent_session: bool) -> None:
        status = response.status
        if message.get("method") == "initialize" and status == 200:
            session = response.headers.get("mcp-session-id")
            if session:
                self._session_id = session
        if 200 <= status < 300 and status != 202:
            content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
            if content_type == "text/event-stream":
                conn = exchange.conn
                if exchange.on_caller and conn is not None:
                    # Events before the response must reach the caller while
                    # the stream is open: it waits on its inbox meanwhile.
                    conn.timeout = None
                    if conn.sock is not None:
                        conn.sock.settimeout(None)
                    exchange.on_caller, exchange.deadline = False, None
                    self._threads.submit(lambda: self._stream_on_thread(exchange, response))
                    exchange.handed_off = True
                    return
                self._read_request_stream(exchange, response)
                return
            if content_type == "application/json":
                payload = self._read_body(response, self._target.max_response_bytes)
                self._finish(exchange, reusable=True)
                self._deliver_json(exchange, payload)
                return
            self._drain(response)
            raise InvalidMessage(f"the server answered with content type {content_type or 'none'!r}")
        preview = self._read_body(response, _ERROR_BODY_PREVIEW * 8, truncate=True)
        self._finish(exchange, reusable=True)
        if status == 404 and sent_session and self._legacy:
            raise self._status_error(response, preview, session=True)
        error_message = _json_rpc_error(preview)
        if error_message is not None and status not in (401, 403):
            error_message["id"] = exchange.request_id
            self._deliver(exchange, error_message)
            return
        raise self._status_error(response, preview, session=False)

    def _status_error(self, response: Any, body: bytes, *, session: bool) -> HTTPStatusError:
        status = response.status
        text = body.decode("utf-8", "replace")[:_ERROR_BODY_PREVIEW]
        headers = {k.lower(): v for k, v in response.headers.items()}
        where = f"{self._target.url} answered HTTP {status}"
        detail = f": {text}" if text.strip() else ""
        if status in (401, 403):
            return AuthenticationError(f"{where} (authentication required or refused){detail}",
                                       status=status, body=text, headers=headers)
        if status == 404 and session and self._legacy:
            return SessionExpired(f"{where} for the session", status=status, body=text, headers=headers)
        return HTTPStatusError(f"{where}{detail}", status=status, body=text, headers=headers)

    def _deliver_json(self, exchange: Exchange, payload: bytes) -> None:
        message = jsonrpc.decode(payload)
        # Checked before delivery: a wrong id must never reach another caller.
        if message.get("id") != exchange.request_id or not ("result" in message or "error" in message):
            raise InvalidMessage(
                f"the server answered request {exchange.request_id!r} with something else: "
                f"{payload[:200].decode('utf-8', 'replace')}"
            )
        self._deliver(exchange, message)

    def _deliver(self, exchange: Exchange, message: dict[str, Any]) -> None:
        if exchange.stop.is_set() or self._sink is None:
            return
        self._sink.deliver(message, related_to=exchange.request_id)

    # -- SSE ---------------------------------------------------------------------------------

    def _read_request_stream(self, exchange: Exchange, response: Any) -> None:
        """Read a POST's SSE stream until its response; resume it with GET and
        `Last-Event-ID` (initialize era) if it breaks after an event id."""
        parser = SSEParser(max_event_bytes=self._target.max_response_bytes)
        done = self._read_events(exchange, response, parser)
        self._finish(exchange, reusable=done == "eof")
        attempts = 0
        while done != "response" and self._legacy and parser.last_event_id is not None:
            if attempts >= self._target.max_resume_attempts:
                break
            attempts += 1
            delay = (parser.retry_ms if parser.retry_ms is not None else DEFAULT_RETRY_MS) / 1000.0
            if exchange.stop.wait(delay) or self._closing:
                return
            log.debug("resuming the stream of request %r after event %r", exchange.request_id, parser.last_event_id)
            resumed = self._get(exchange, {"Last-Event-ID": parser.last_event_id})
            if resumed is None:
                return
            if resumed.status != 200:
                preview = self._read_body(resumed, _ERROR_BODY_PREVIEW, truncate=True)
                self._finish(exchange, reusable=True)
                raise self._status_error(resumed, preview, session=True)
            done = self._read_events(exchange, resumed, parser)
            self._finish(exchange, reusable=done == "eof")
        if done != "response" and not exchange.stop.is_set():
            raise ConnectionClosed(f"the response stream of request {exchange.request_id!r} ended before the response")

    def _read_events(self, exchange: Exchange, response: Any, parser: SSEParser) -> str:
        """Feed the stream to the parser; 'response' once this request's
        response arrived (reading stops there), else 'eof'."""
        try:
            while True:
                chunk = response.read1(_READ_CHUNK)
                events = parser.feed(chunk) if chunk else parser.close()
                for event in events:
                    if not event.data.strip():
                        continue  # a priming event: an id and no message
                    try:
                        message = jsonrpc.decode(event.data)
                    except InvalidMessage as exc:
                        raise InvalidMessage(f"an SSE event of request {exchange.request_id!r} is not JSON-RPC: {exc}") from None
                    is_response = "method" not in message and ("result" in message or "error" in message)
                    if is_response and message.get("id") != exchange.request_id:
                        log.warning("dropped a response for %r on the stream of request %r",
                                    message.get("id"), exchange.request_id)
                        continue
                    self._deliver(exchange, message)
                    if is_response:
                        return "response"
                if not chunk:
                    return "eof"
        except EventTooLarge as exc:
            raise MessageTooLarge(
                f"an SSE event of request {exchange.request_id!r} is larger than max_response_bytes={exc.limit}",
                limit=exc.limit,
            ) from None
        except (OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
            if exchange.stop.is_set() or self._closing:
                return "eof"
            if self._legacy and parser.last_event_id is not None:
                log.debug("the stream of request %r broke: %s", exchange.request_id, exc)
                parser.reconnect()  # drop the half-received line; resume from the last id
                return "eof"
            raise ConnectionClosed(f"the response stream of request {exchange.request_id!r} broke: {exc}") from exc

    def _get(self, exchange: Exchange, extra: Mapping[str, str]) -> Any:
        if exchange.pooled:
            try:
                conn = self._pool.acquire(exchange.stop)
            except ConnectionClosed:
                return None
        else:
            # A long-lived stream must not hold one of the pool's connections.
            if exchange.stop.is_set() or self._closing:
                return None
            conn = self._target.new_connection(timeout=self._target.connect_timeout)
        exchange.conn = conn
        self._ready(conn, None)
        headers = self._base_headers(legacy_session=True, method="GET")
        headers["Accept"] = "text/event-stream"
        headers.update(extra)
        conn.request("GET", self._target.path, headers=headers, preload_content=False)
        response = conn.getresponse()
        exchange.response = response
        return response

    def _read_get_stream(self, opened: threading.Event) -> None:
        """The initialize era's standalone GET stream: messages related to no
        request. Reconnects after the server's retry interval while events
        keep coming; gives up after repeated empty attempts, 405 or 404.
        `opened` is set once the first GET has an answer (or failed)."""
        try:
            self._get_stream_loop(opened)
        finally:
            opened.set()

    def _get_stream_loop(self, opened: threading.Event) -> None:
        exchange = Exchange("get", pooled=False)
        with self._lock:
            self._get_exchange = exchange
        failures = 0
        last_id: str | None = None
        retry_ms = DEFAULT_RETRY_MS
        while not self._closing and failures < 3:
            extra = {"Last-Event-ID": last_id} if last_id else {}
            try:
                try:
                    response = self._get(exchange, extra)
                finally:
                    opened.set()
                if response is None:
                    return
                if response.status == 405:
                    self._get_offered = False
                    log.debug("the server offers no GET stream (405)")
                    self._finish(exchange, reusable=self._drain(response))
                    return
                if response.status != 200:
                    log.debug("the GET stream answered %s", response.status)
                    self._finish(exchange, reusable=self._drain(response))
                    return
                parser = SSEParser(max_event_bytes=self._target.max_response_bytes)
                got_any = False
                while True:
                    chunk = response.read1(_READ_CHUNK)
                    for event in parser.feed(chunk) if chunk else parser.close():
                        if not event.data.strip():
                            continue
                        got_any = True
                        if self._sink is not None:
                            self._sink.deliver(jsonrpc.decode(event.data))
                    if not chunk:
                        break
                self._finish(exchange, reusable=True)
                last_id = parser.last_event_id or last_id
                retry_ms = parser.retry_ms if parser.retry_ms is not None else retry_ms
                failures = 0 if got_any else failures + 1
            except (TransportError, EventTooLarge, OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
                if self._closing:
                    return
                log.debug("the GET stream failed: %s", exc)
                self._finish(exchange, reusable=False)
                failures += 1
            if exchange.stop.wait(retry_ms / 1000.0):
                return

    # -- bodies and auth -----------------------------------------------------------------------

    def _read_body(self, response: Any, limit: int, *, truncate: bool = False) -> bytes:
        length = response.headers.get("content-length")
        if not truncate and length is not None and length.isdigit() and int(length) > limit:
            self._drain_no_more(response)
            raise MessageTooLarge(
                f"the response is {length} bytes, over max_response_bytes={limit}", limit=limit
            )
        if not truncate and length is not None and length.isdigit():
            # The common answer: its length is known and within the limit, so
            # read exactly that much, in one call when the socket allows.
            expected = int(length)
            data = response.read(expected)
            while len(data) < expected:
                chunk = response.read(expected - len(data))
                if not chunk:
                    break
                data += chunk
            return data  # type: ignore[no-any-return]
        parts: list[bytes] = []
        size = 0
        while True:
            chunk = response.read(_READ_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                if truncate:
                    parts.append(chunk)
                    self._drain_no_more(response)
                    break
                self._drain_no_more(response)
                raise MessageTooLarge(f"the response is over max_response_bytes={limit}", limit=limit)
            parts.append(chunk)
        return b"".join(parts)[: limit if truncate else None]

    @staticmethod
    def _drain_no_more(response: Any) -> None:
        try:
            response.shutdown()
        except (OSError, AttributeError, RuntimeError):
            pass

    @staticmethod
    def _drain(response: Any) -> bool:
        """Read what is left (small bodies) so the connection can be reused."""
        try:
            response.read(_ERROR_BODY_PREVIEW * 8)
            return bool(response.isclosed()) if hasattr(response, "isclosed") else False
        except (OSError, urllib3.exceptions.HTTPError, ValueError):  # ValueError: http11.ResponseError
            return False

    def _auth_header(self, method: str = "POST") -> dict[str, str]:
        """The credentials for one request. A provider with `auth_headers()`
        (OAuth, DPoP) makes them per request; others give a bearer token."""
        provider = self._target.auth
        if provider is None:
            return {}
        make = getattr(provider, "auth_headers", None)
        if make is not None:
            return dict(make(method, self._target.url))
        token = provider.token()
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _with_auth(self, headers: Mapping[str, str]) -> dict[str, str]:
        fresh = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "dpop")}
        fresh.update(self._auth_header("POST"))
        return fresh

    def _refresh_auth(self, response: Any, generation: int, attempt: int) -> bool:
        """After a 401 or 403: let the token provider act on the challenge.
        True to retry the request.

        One provider call serves every request that failed with the same
        credentials: the generation counter tells a request that another
        thread already refreshed (or re-authorized) while it waited. A
        provider with `handle_challenge()` sees 401 and 403 (step-up, DPoP
        nonces) up to `_MAX_AUTH_RETRIES` times per request; a provider with
        only `refresh()` is asked once, after a 401. `AuthorizationError`
        from the provider reaches the caller as it is: it says why.
        """
        if attempt >= _MAX_AUTH_RETRIES:
            return False
        provider = self._target.auth
        handle = getattr(provider, "handle_challenge", None)
        refresh = getattr(provider, "refresh", None)
        if provider is None or (handle is None and (refresh is None or response.status != 401 or attempt > 0)):
            return False
        with self._auth_lock:
            if self._auth_generation != generation:
                return True  # another request refreshed meanwhile
            try:
                if handle is not None:
                    headers = {k.lower(): v for k, v in response.headers.items()}
                    retry = bool(handle(response.status, headers))
                else:
                    assert refresh is not None
                    retry = bool(refresh(response.headers.get("www-authenticate")))
            except AuthorizationError:
                raise
            except Exception:
                log.exception("the token provider failed to act on HTTP %s", response.status)
                return False
            if not retry:
                return False
            self._auth_generation += 1
            return True


#: The longest `_open_get_stream` waits for the server to answer the GET.
_GET_OPEN_WAIT = 2.0

#: How many 401/403 answers one request may act on (refresh, step-up
#: authorization, DPoP nonce) before the status is the caller's error.
_MAX_AUTH_RETRIES = 3


def _json_rpc_error(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error response in an HTTP error body, if it holds one."""
    try:
        message = jsonrpc.decode(body)
    except InvalidMessage:
        return None
    if isinstance(message.get("error"), dict) and "code" in message["error"]:
        return message
    return None
