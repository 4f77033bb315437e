"""The Streamable HTTP transport, for both protocol eras: the protocol part.

Owns: what goes over HTTP for MCP: each request's exchange (a POST and its
answer, JSON or an SSE stream), the resumption of a broken stream
(`Last-Event-ID`), the initialize era's session (its id, the standalone GET
stream, `_GetStream`, the DELETE that ends it), and the one-way
POSTs (notifications, answers to server requests). It moves JSON-RPC
messages; what they mean is the engine's and the client's business.

Must not know: how connections are dialed, counted, reused or stopped
(`pool`), how HTTP/1.1 is framed (`http11`), how a compressed body is
decoded (`decoding`), how credentials are made and refreshed
(`http_auth`), or how long-lived streams are read without a thread each
(`streams`).

How it works. Every request is its own POST. A caller that is about to wait
for its answer does the exchange itself (`exchange()`): it POSTs and reads
the answer on its own thread, socket reads bounded by its deadline, so the
common JSON answer costs one read and no thread hand-off. An SSE answer
is read on the caller's thread too while nothing but its response comes,
and so is the stream's end, which follows the response at once: the
connection is back in the pool, for the next call to reuse, before the
call returns. Once something else comes first (progress, log messages,
server requests), the rest of the stream goes to an exchange thread and the
caller waits on its inbox, where its callbacks run; the thread owns the
exchange from then on and forgets it when the stream is done, and a stream
that ended cleanly gives its connection back for reuse. `send()` of a
request nobody waits on at once (`subscriptions/listen`) hands the whole
exchange to an exchange thread. Every message read is delivered to the sink
tagged with the request it belongs to.

Three budgets, so that nothing waits for a slot something else it needs
holds: request exchanges share `pool_size` keep-alive connections; one-way
POSTs have their own `pool_size` (a request's SSE stream may be holding
the last request slot while its server request's answer must go out), each
bounded by `request_timeout`; long-lived streams (the session's GET stream,
`listen()`, resumptions, the DELETE) get connections of their own, outside
any budget. Every request of every kind goes through `_request()`: one
authorization flow, one HTTP/1.1 writer and reader, one set of errors.

Cancelling a request (timeout, abandon, `close()` from another thread)
aborts its exchange, which shuts its socket down under a blocked connect,
handshake or read, on either kind of thread. `close()` aborts every
exchange first, then sends the session's DELETE.

An answer with no JSON-RPC message in it fails that one request with
`HTTPStatusError` (401/403: `AuthenticationError`; 404 on a session:
`SessionExpired`); a JSON-RPC error body of any status is delivered as the
error response it is, which is how the client tells a modern server's 400
from a legacy server's.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any, Callable

from urllib3.util import parse_url

from .._version import __version__
from ..auth import TokenProvider, as_token_provider
from ..network import NetworkSettings, ProxyURL, check_tls_options, parse_proxy
from ..errors import (
    AuthenticationError,
    ConnectError,
    ConnectionClosed,
    HTTPStatusError,
    InvalidMessage,
    MessageTooLarge,
    SessionExpired,
    TransportError,
)
from ..protocol import jsonrpc, versions
from ..protocol.headers import check_user_headers, standard_headers
from ..protocol.sse import Event, EventTooLarge, SSEParser
from .base import MessageSink, Target, Transport
from .decoding import ACCEPT_ENCODING, Decoder, DecodingError, UnsupportedEncoding, coding_of, raw_bound
from .http11 import RequestHead, Response
from .http_auth import Authorization
from .pool import Dialer, Exchange, ExchangeThreads, NoFreeSlot, Pool, Stopped
from .streams import READER, TURN_BYTES, BodyFrames, take_body
from .tunnel import credentials_refused, open_tunnel

_USER_AGENT = f"mcp-sync/{__version__}"

log = logging.getLogger("mcp_sync.transport.http")

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
DEFAULT_RETRY_MS = 1000
_READ_CHUNK = 65536
_ERROR_BODY_PREVIEW = 500

#: The most redirects (307/308, same origin) one request follows.
MAX_REDIRECTS = 5

#: The bound of a one-way POST when the client has no timeout.
_ONE_WAY_SECONDS = 30.0

#: How long the rest of an SSE stream may take to end after its response
#: (a server SHOULD close it then) for its connection to be reused.
_STREAM_END_SECONDS = 0.5

#: How long a caller waits for the end of an SSE stream after its response
#: before handing the rest to an exchange thread: the end usually follows
#: at once (another write of the server's), and read here, it gives the
#: connection back before the call returns, for the next call to reuse.
_CALLER_END_SECONDS = 0.05

#: After a stream that did not end that soon, this many streams' ends are
#: left to exchange threads at once: a server that keeps streams open after
#: the response must not cost every call the wait.
_SKIP_END_WAITS = 100

#: The longest `_open_get_stream` waits for the server to answer the GET.
_GET_OPEN_WAIT = 2.0

#: The longest `close()` waits for the GET stream's reader to end.
_GET_JOIN_SECONDS = 5.0

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
    - `verify`: True (system CAs, or the bundle `REQUESTS_CA_BUNDLE` or
      `SSL_CERT_FILE` names), False (no verification), a CA bundle path (a
      file or a directory), or an `ssl.SSLContext` used as is (for example
      `truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)` for the system's
      trust store).
    - `cert`: a client certificate for mutual TLS: a PEM file holding the
      certificate and its key, or a (certificate, key) pair of paths.
    - `proxy`: an `http://[user:password@]host:port` forward proxy for every
      request (https:// servers through `CONNECT`, TLS end to end). None:
      the proxy the environment names, as `requests` reads it
      (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, lower case
      too), when `trust_env`.
    - `trust_env`: read the proxy and the CA bundle (`REQUESTS_CA_BUNDLE`,
      `SSL_CERT_FILE`) from the environment. False with `proxy=None`:
      always direct.
    - `connect_timeout`: seconds to open a TCP/TLS connection (and a
      proxy's tunnel).
    - `max_response_bytes`: the most one JSON body or one SSE event may hold.
    - `pool_size`: the most requests in flight at once (each holds a
      keep-alive connection); one-way messages have a budget of the same
      size of their own, and long-lived streams (`listen()`, the session's
      GET stream) get connections outside both.
    - `max_resume_attempts`: initialize era, how often a broken SSE stream is
      resumed with `Last-Event-ID`.
    - `session_close_timeout`: the longest `close()` waits for the session DELETE.
    - `compress`: ask for gzip or deflate answers (`Accept-Encoding`); they
      are decoded as they arrive, the decoded size bounded by
      `max_response_bytes`. False asks for identity.
    - `follow_redirects`: also follow a 307 or 308 to another origin (never
      from https to http), without the credentials, cookies, session id,
      `Mcp-Param-*` and `headers` meant for this one. Same-origin ones are
      always followed.
    - `sse_fallback`: when the server refuses the POST of `initialize` with
      400, 404 or 405, try the old HTTP+SSE transport at the same URL (a
      GET expecting an `endpoint` event) and use it if the server offers it
      (see `SSE`). False: the status error stands.

    The URL and its parts are kept as attributes:

    Attributes:
        url: The URL as given.
        scheme: `"http"` or `"https"`.
        host: The host, as in the URL (an IPv6 address keeps its brackets).
        port: The URL's port, else 443 for https and 80 for http.
        path: The path and query requests go to (`"/"` when the URL has no
            path).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        verify: bool | str | os.PathLike[str] | ssl.SSLContext = True,
        cert: str | os.PathLike[str] | tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
        connect_timeout: float = 10.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        pool_size: int = 32,
        max_resume_attempts: int = 3,
        session_close_timeout: float = 5.0,
        compress: bool = True,
        follow_redirects: bool = False,
        proxy: str | None = None,
        trust_env: bool = True,
        sse_fallback: bool = True,
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
        verify, cert = check_tls_options(verify, cert)
        if not isinstance(trust_env, bool):
            raise TypeError("trust_env must be True or False")
        proxy_url = None if proxy is None else parse_proxy(proxy, source="proxy")
        #: The network path (TLS, proxy), shared with the token provider.
        self.network = NetworkSettings(verify=verify, cert=cert, proxy=proxy_url, trust_env=trust_env)
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
        use_network = getattr(self.auth, "use_network", None)
        if use_network is not None:
            use_network(self.network)  # ... and takes the same network path (proxy, TLS)
        self.verify: bool | str | ssl.SSLContext = verify
        self.cert: str | tuple[str, str] | None = cert
        self.connect_timeout = float(connect_timeout)
        self.max_response_bytes = max_response_bytes
        self.pool_size = pool_size
        self.max_resume_attempts = max_resume_attempts
        self.session_close_timeout = float(session_close_timeout)
        for name, flag in (("compress", compress), ("follow_redirects", follow_redirects)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False")
        self.compress = compress
        self.follow_redirects = follow_redirects
        if not isinstance(sse_fallback, bool):
            raise TypeError("sse_fallback must be True or False")
        self.sse_fallback = sse_fallback

    @property
    def origin(self) -> str:
        """`scheme://host:port`, always with the port, such as
        `"https://example.com:443"`."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def authority(self) -> str:
        """The `Host` header's value."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return host if self.port == default else f"{host}:{self.port}"

    def tls_context(self) -> ssl.SSLContext:
        """The client TLS context: the caller's `ssl.SSLContext` as is, or
        one with urllib3's defaults and these options."""
        return self.network.tls_context()

    def open(self) -> Transport:
        """A new Streamable HTTP transport to this server (not yet started)."""
        return HTTPTransport(self)

    def server_key(self) -> Hashable:
        """The origin and path: one endpoint is one server, whatever the
        headers or credentials."""
        return ("http", self.origin, self.path)

    def __repr__(self) -> str:
        return f"HTTP({self.url!r})"



def _dialer_for(host: str, port: int, tls: ssl.SSLContext | None, timeout: float, proxy: ProxyURL | None,
                forwarded: bool) -> Dialer:
    """How to reach `host:port`: directly, or through `proxy`, which either
    forwards plain-HTTP requests itself (`forwarded`) or opens a CONNECT
    tunnel that TLS then goes through."""
    if proxy is None:
        return Dialer(host, port, tls, timeout)
    tunnel = None if forwarded else (lambda sock, limit: open_tunnel(sock, proxy, host, port, limit))
    return Dialer(host, port, tls, timeout, via=(proxy.host, proxy.port), tunnel=tunnel)


class HTTPTransport(Transport):
    restarts_server = False
    mirrors_headers = True

    def __init__(self, target: HTTP) -> None:
        self._target = target
        proxy = target.network.proxy_for(target.url)
        #: Plain http:// through a proxy: each request goes to the proxy,
        #: in absolute form and with its credentials (https:// tunnels).
        self._forward: ProxyURL | None = proxy if proxy is not None and target.scheme == "http" else None
        self._head = self._new_head(target.path)
        # Where requests go: the target's URL until the server redirects
        # (307/308 on the same origin, see `_follow`).
        self._path = target.path
        self._url = target.url
        self._auth = Authorization(target.auth, target.url)
        self._sink: MessageSink | None = None
        self._tls_lock = threading.Lock()
        if proxy is not None:
            log.debug("requests to %s go through the proxy %s", target.url, proxy)
        # TLS is set on first use (`_dial`): building the context reads CA files.
        self._dialer = _dialer_for(target.host.strip("[]"), target.port, None, target.connect_timeout, proxy,
                                   self._forward is not None)
        self._count_lock = threading.Lock()
        #: Request exchanges: keep-alive connections, at most `pool_size`.
        self._pool = Pool(self._dial, target.pool_size)
        #: One-way POSTs: a budget of their own, so they never wait for a
        #: slot that a request's stream (maybe their own request's) holds.
        self._one_way = Pool(self._dial, target.pool_size)
        #: Long-lived streams and the DELETE: a connection each, no budget.
        self._streams = Pool(self._dial, None, keep_idle=False)
        self._threads = ExchangeThreads("mcp-sync-http")
        self._lock = threading.Lock()
        self._exchanges: dict[int | str, Exchange] = {}
        #: One-way POSTs, resumptions and the DELETE in progress: close() aborts them too.
        self._others: set[Exchange] = set()
        self._closing = False
        self._closed = False
        #: Streams whose end callers will not wait for (see `_stream_on_caller`).
        self._skip_end_waits = 0
        self._close_lock = threading.Lock()
        # Initialize-era state.
        self._legacy = False
        self._version: str | None = None
        self._session_id: str | None = None
        #: The origin that issued the session id when it was another one (a
        #: followed redirect): the only other origin it is ever sent to.
        self._session_origin: tuple[str, str, int] | None = None
        #: The session's GET stream (read by the process's stream reader).
        self._get_stream: _GetStream | None = None
        self._get_offered = True

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

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def describe(self) -> str:
        return f"Streamable HTTP server {self._target.url}"

    @property
    def close_budget(self) -> float:  # type: ignore[override]
        """`close()`'s bound: the session DELETE, the GET stream's end, and
        a margin for the pools' and helper threads' ends."""
        return self._target.session_close_timeout + _GET_JOIN_SECONDS + 2.0

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            with self._lock:
                self._closing = True
                exchanges = [*self._exchanges.values(), *self._others]
                get_stream = self._get_stream
            # Abort first: no exchange may go on (or start) once the
            # session is deleted, and none may wait behind the DELETE.
            for exchange in exchanges:
                exchange.abort()
            if get_stream is not None:
                get_stream.abort()
            if self._legacy and self._session_id is not None:
                self._delete_session()
            for pool in (self._pool, self._one_way, self._streams):
                pool.close()
            self._threads.close()
            if get_stream is not None:
                get_stream.close(_GET_JOIN_SECONDS)
            self._closed = True

    def discard(self) -> None:
        """In a child after `os.fork()`: close this process's copies of every
        socket (idle, in use, the GET stream), with no IO: no shutdown, no
        DELETE, no lock (a parent thread may have held one at the fork), no
        join (the threads were not copied). The transport is closed after."""
        self._count_lock = threading.Lock()
        self._closing = True
        self._closed = True
        self._sink = None
        # The GET stream's reader thread was not copied either, and the
        # stream reader of this process forgot it (`streams`).
        for exchange in [*list(self._exchanges.values()), *list(self._others), self._get_exchange]:
            if exchange is not None:
                exchange.discard()
        for pool in (self._pool, self._one_way, self._streams):
            pool.discard()
        self._threads.discard()

    def _delete_session(self) -> None:
        """End the session; its outcome is never an error (the spec lets a
        server refuse with 405, and we are leaving anyway)."""
        limit = self._target.session_close_timeout
        if self.request_timeout is not None:
            limit = min(limit, self.request_timeout)
        exchange = Exchange("delete", self._streams, deadline=time.monotonic() + limit)
        try:
            response = self._request(exchange, "DELETE", self._base_headers(session=True), None)
            self._drain(response)
            log.debug("session DELETE answered %s", response.status)
        except (TransportError, OSError, ValueError) as exc:
            log.debug("session DELETE failed: %s", exc)
        finally:
            exchange.release(reusable=False)

    # -- sending ---------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        if self._closing:
            raise ConnectionClosed("the connection is closed")
        if "method" in message and "id" in message:
            # A request nobody waits on at once: a long-lived stream
            # (`subscriptions/listen`), so a connection outside the budget.
            request_id = message["id"]
            exchange = Exchange(request_id, self._streams)
            self._register(exchange)
            body = jsonrpc.encode(message)
            request_headers = self._request_headers(message, headers)
            try:
                self._threads.submit(lambda: self._run(exchange, message, body, request_headers))
            except BaseException:
                self._forget(exchange)
                raise
        else:
            self._post_one_way(message)

    def exchange(
        self, message: Mapping[str, Any], headers: Mapping[str, str] | None, deadline: float | None,
    ) -> float:
        """POST a request and read its answer on this (the caller's) thread.

        Returns once the answer was delivered to the sink, failed, or timed
        out at `deadline` (then nothing is delivered and the caller's own
        deadline check reports the timeout), or once an SSE answer was handed
        to an exchange thread. Raises `ConnectionClosed` when `close()` ran
        meanwhile. Returns the seconds spent getting authorization, which do
        not count against the deadline.
        """
        exchange = Exchange(message["id"], self._pool, on_caller=True, deadline=deadline)
        self._register(exchange)
        self._run(exchange, message, jsonrpc.encode(message), self._request_headers(message, headers))
        return exchange.auth_pause

    def cancel(self, request_id: int | str) -> None:
        with self._lock:
            exchange = self._exchanges.pop(request_id, None)
        if exchange is not None:
            exchange.abort()

    def _register(self, exchange: Exchange) -> None:
        with self._lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            self._exchanges[exchange.request_id] = exchange

    def _forget(self, exchange: Exchange) -> None:
        """The exchange is over: out of the table, slot and connection back
        (the connection was already given back for reuse if it could be)."""
        try:
            with self._lock:
                if self._exchanges.get(exchange.request_id) is exchange:
                    del self._exchanges[exchange.request_id]
                self._others.discard(exchange)
        finally:
            exchange.release(reusable=False)

    def _dial(self, exchange: Exchange, deadline: float | None) -> socket.socket:
        if self._target.scheme == "https" and self._dialer.tls is None:
            with self._tls_lock:
                if self._dialer.tls is None:
                    self._dialer.tls = self._target.tls_context()
        return self._dialer.dial(exchange, deadline)

    def _base_headers(self, *, session: bool) -> dict[str, str]:
        headers = dict(self._target.headers)
        if self._forward is not None and self._forward.authorization is not None:
            headers["Proxy-Authorization"] = self._forward.authorization  # only ever sent to the proxy
        if session:
            # Revisions before 2025-06-18 had no such header.
            if self._version is not None and versions.dialect_for(self._version).protocol_version_header:
                headers["MCP-Protocol-Version"] = self._version
            if self._session_id is not None:
                headers["Mcp-Session-Id"] = self._session_id
        return headers

    def _request_headers(self, message: Mapping[str, Any], extra: Mapping[str, str] | None) -> dict[str, str]:
        is_initialize = message.get("method") == "initialize"
        headers = self._base_headers(session=self._legacy and not is_initialize)
        headers["Accept"] = "application/json, text/event-stream"
        headers["Content-Type"] = "application/json"
        if not self._legacy and not is_initialize:
            headers.update(standard_headers(message))
        if extra:
            headers.update(extra)
        return headers

    # -- the one request loop ----------------------------------------------------------------

    def _request(self, exchange: Exchange, method: str, headers: Mapping[str, str], body: bytes | None) -> Response:
        """Send one request on a connection of the exchange's pool and read
        the head of its answer, under the authorization flow (a refused
        request is sent again when the provider acted). The exchange then
        holds the connection and the response; `exchange.release()` gives
        them back. Socket reads are bounded by the exchange's deadline (None:
        only an abort stops them). A 307 or 308 is followed when `_follow`
        says so; to another origin, the exchange holds a connection of that
        hop's own pool until its next request, which starts at home again."""
        flow = self._auth.flow(method, headers)
        sent = next(flow)
        if isinstance(exchange.pool, _Elsewhere):
            exchange.pool = exchange.pool.home  # every request starts at this transport's URL
        home = exchange.pool
        redirects: list[str] = []  # the URLs redirected from, for this request
        hop: _Hop | None = None  # where it goes once redirected to another origin
        while True:
            conn = exchange.pool.acquire(exchange, exchange.deadline)
            sock = conn.sock
            assert sock is not None  # connected by the pool
            deadline = exchange.deadline
            sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
            if hop is None:
                head = self._head.encode(method, sent, None if body is None else len(body))
            else:
                head = hop.head.encode(method, hop.headers, None if body is None else len(body))
            if body is None:
                sock.sendall(head)
            elif len(body) < 65536:
                sock.sendall(head + body)
            else:  # no copy of a large body just to join it to the head
                sock.sendall(head)
                sock.sendall(body)
            if body:
                self._count(sent=len(body))
            response = Response(sock, deadline=deadline) if hop is None else _ForeignResponse(sock, hop, deadline)
            exchange.set_response(response)
            response.begin()
            if response.status == 407 and self._forward is not None:
                self._drain(response)
                raise self._proxy_refused()
            if response.status in (307, 308):
                followed, hop = self._follow(response, redirects, hop, sent, home)
                if followed:
                    # Sent again, method and body kept, to the new URL (the
                    # connection given back for reuse if it can be).
                    self._done(exchange, response)
                    if hop is not None:
                        exchange.pool = hop.pool
                    continue
            if hop is not None or response.status not in (401, 403) or not self._auth.enabled:
                # Another origin's challenge is not for this server's
                # credentials: it is reported, never answered with them.
                return response
            started = time.monotonic()
            try:
                sent = flow.send(response)
            except StopIteration:
                return response
            finally:
                # The request's clock stops while authorization runs (a
                # person may be approving in a browser).
                paused = time.monotonic() - started
                exchange.auth_pause += paused
                if exchange.deadline is not None:
                    exchange.deadline += paused
                    response.deadline = exchange.deadline
            self._drain(response)
            self._done(exchange, response)

    def _follow(self, response: Response, redirects: list[str], hop: _Hop | None, sent: Mapping[str, str],
                home: Pool) -> tuple[bool, _Hop | None]:
        """A 307 or 308: whether to send the request again (method and body
        kept, at most `MAX_REDIRECTS` hops, no loop), and where to.

        On this origin: to the new path, which then serves every later
        request of this transport too. To another origin, only with
        `follow_redirects`: for this request only, through a hop (`_hop`)
        without the headers meant for this origin. From https to http:
        never (an error). Not followed: (False, hop), and the caller gets
        the status error, which names the `Location`."""
        location = response.headers.get("location")
        if not location:
            return False, hop
        here = self._url if hop is None else hop.url
        target = urllib.parse.urljoin(here, location)
        parts = urllib.parse.urlsplit(target)
        scheme = parts.scheme.lower()
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:  # a port that is not a number
            return False, hop
        host = parts.hostname
        if scheme not in ("http", "https") or not host:
            return False, hop
        if (self._target.scheme if hop is None else hop.scheme) == "https" and scheme == "http":
            self._drain(response)
            raise HTTPStatusError(
                f"{here} redirected to {target}, from https to http: not followed, as the request would travel "
                "unencrypted", status=response.status, body="", headers={k.lower(): v for k, v in response.headers.items()})
        same = hop is None and (scheme, host, port) == (self._target.scheme, self._target.host.strip("[]").lower(),
                                                         self._target.port)
        if not same and not self._target.follow_redirects:
            return False, hop
        redirects.append(_normal_url(here))
        if len(redirects) > MAX_REDIRECTS or _normal_url(target) in redirects:
            self._drain(response)
            raise HTTPStatusError(
                f"{self._url} redirected in a loop or more than {MAX_REDIRECTS} times (last to {location})",
                status=response.status, body="", headers={k.lower(): v for k, v in response.headers.items()})
        self._drain(response)
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        url = urllib.parse.urlunsplit((scheme, parts.netloc, parts.path or "/", parts.query, ""))
        if not same:
            log.info("following the server's redirect (%d) from %s to another origin, %s, for this request only",
                     response.status, here, url)
            return True, self._hop(url, scheme, host, port, path, sent, home)
        log.info("following the server's redirect (%d) from %s to %s", response.status, self._url, url)
        self._path, self._url = path, url
        self._head = self._new_head(path)
        return True, None

    def _hop(self, url: str, scheme: str, host: str, port: int, path: str, sent: Mapping[str, str],
             home: Pool) -> _Hop:
        """Where a request goes after a redirect to another origin: a pool
        dialing that origin (through the proxy that carries requests there,
        TLS for https), its request heads, and the headers it may be sent
        with there. Credentials, cookies, the session id, `Mcp-Param-*`
        (tool arguments) and the caller's own `headers` are meant for this
        origin and never go to another."""
        target = self._target
        proxy = target.network.proxy_for(url)
        forward = proxy if proxy is not None and scheme == "http" else None
        tls = None
        if scheme == "https":
            tls = self._dialer.tls if self._dialer.tls is not None else target.tls_context()
        dialer = _dialer_for(host, port, tls, target.connect_timeout, proxy, forward is not None)
        name = f"[{host}]" if ":" in host else host
        authority = name if port == (443 if scheme == "https" else 80) else f"{name}:{port}"
        form = f"{scheme}://{authority}{path}" if forward is not None else path
        own = {key.lower() for key in target.headers}
        headers = {k: v for k, v in sent.items() if not _origin_bound(k) and k.lower() not in own}
        if "Mcp-Session-Id" in sent and self._session_origin == (scheme, host, port):
            headers["Mcp-Session-Id"] = sent["Mcp-Session-Id"]  # that origin's own session
        if forward is not None and forward.authorization is not None:
            headers["Proxy-Authorization"] = forward.authorization  # only ever sent to the proxy
        head = RequestHead(form, authority, _USER_AGENT, _accept_encoding(target))
        return _Hop(url, (scheme, host, port), _Elsewhere(dialer.dial, home), head, headers)

    def _proxy_refused(self) -> ConnectError:
        """A 407 from the proxy that forwards plain-HTTP requests (an https://
        server's tunnel reports its own, see `tunnel`)."""
        proxy = self._forward
        assert proxy is not None
        return ConnectError(f"the proxy {proxy.address} {credentials_refused(proxy)} "
                            f"(HTTP 407 to a request for {self._url})")

    def _new_head(self, path: str) -> RequestHead:
        """Request heads for `path`: in absolute form when a proxy forwards them."""
        target = self._target
        form = f"{target.scheme}://{target.authority}{path}" if self._forward is not None else path
        return RequestHead(form, target.authority, _USER_AGENT, _accept_encoding(target))

    @staticmethod
    def _done(exchange: Exchange, response: Response) -> None:
        """Give the exchange's connection back: for reuse only when the
        answer was read to its end and the server keeps the connection."""
        exchange.release(reusable=response.isclosed() and not response.will_close)

    def _side_bound(self) -> float:
        """The bound of a side request (a one-way POST, setting the GET
        stream up): no caller waits on it, so it has its own deadline."""
        return self.request_timeout if self.request_timeout is not None else _ONE_WAY_SECONDS

    def _post_one_way(self, message: Mapping[str, Any]) -> None:
        """A notification or a response to a server request: the server
        answers 202 (or 200) with no message. Bounded by `request_timeout`
        from waiting for a slot (of the one-way budget) to the last read."""
        bound = self._side_bound()
        exchange = Exchange("one-way", self._one_way, deadline=time.monotonic() + bound)
        with self._lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            self._others.add(exchange)
        headers = self._base_headers(session=self._legacy)
        headers["Accept"] = "application/json, text/event-stream"
        headers["Content-Type"] = "application/json"
        try:
            response = self._request(exchange, "POST", headers, jsonrpc.encode(message))
            answer = self._read_body(response, _ERROR_BODY_PREVIEW * 4, truncate=True)
            self._done(exchange, response)
        except Stopped:
            raise ConnectionClosed("the connection is closed") from None
        except NoFreeSlot:
            raise ConnectError(f"POST to {self._target.url}: no connection was free within {bound:g} s") from None
        except (OSError, ValueError) as exc:
            raise ConnectError(f"POST to {self._target.url} failed: {exc}") from exc
        except (TransportError, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            raise ConnectError(f"POST to {self._target.url} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            self._forget(exchange)
        if response.status >= 300:
            raise self._status_error(response, answer, session=self._session_id is not None)
        if message.get("method") == "notifications/initialized":
            self._open_get_stream()

    # -- one exchange ----------------------------------------------------------------------------

    def _run(self, exchange: Exchange, message: Mapping[str, Any], body: bytes, headers: dict[str, str]) -> None:
        """One request's exchange, on the caller's thread or an exchange
        thread. Forgets the exchange when done, unless its stream was handed
        to an exchange thread (which then does)."""
        sent_session = "Mcp-Session-Id" in headers
        handed_off = False
        try:
            with self._reporting(exchange):
                response = self._request(exchange, "POST", headers, body)
                handed_off = self._handle(exchange, message, response, sent_session)
        finally:
            if not handed_off:
                self._forget(exchange)

    @contextlib.contextmanager
    def _reporting(self, exchange: Exchange) -> Iterator[None]:
        """Report an exchange's failure to its caller: through the sink, or,
        for a caller's own exchange that `close()` stopped, as
        `ConnectionClosed` (nothing was delivered for it). Nobody is told of
        an exchange that was cancelled."""
        try:
            yield
        except NoFreeSlot:
            exchange.stop.set()  # the caller's deadline passed: it reports the timeout
        except TransportError as exc:
            if exchange.on_caller and self._closing:
                raise ConnectionClosed("the connection was closed") from None
            self._fail(exchange, exc)
        except (OSError, ValueError) as exc:
            if exchange.on_caller and self._closing:
                raise ConnectionClosed("the connection was closed") from None
            if (exchange.deadline is not None and isinstance(exc, socket.timeout)
                    and time.monotonic() >= exchange.deadline - 0.01):
                # The caller's deadline passed during a read on its own
                # thread: it reports the timeout itself; deliver nothing.
                exchange.stop.set()
            self._fail(exchange, ConnectError(f"POST to {self._target.url} failed: {exc}"))
        except Exception as exc:
            # Anything else (RecursionError from a pathological answer, a
            # bug) fails this request, never the thread silently: a caller
            # with no timeout would otherwise wait forever.
            log.warning("request %r failed unexpectedly", exchange.request_id, exc_info=True)
            if exchange.on_caller and self._closing:
                raise ConnectionClosed("the connection was closed") from None
            self._fail(exchange, InvalidMessage(
                f"the answer to request {exchange.request_id!r} could not be read: {type(exc).__name__}: {exc}"))

    def _fail(self, exchange: Exchange, error: TransportError) -> None:
        if exchange.stop.is_set() or self._closing:
            return  # cancelled: the caller has gone, nobody to tell
        if self._sink is not None:
            self._sink.request_failed(exchange.request_id, error)

    def _handle(self, exchange: Exchange, message: Mapping[str, Any], response: Response, sent_session: bool) -> bool:
        """Act on the answer's head. True when its stream was handed off."""
        status = response.status
        if message.get("method") == "initialize" and status == 200:
            session = response.headers.get("mcp-session-id")
            if session:
                if not _visible_ascii(session):
                    # It goes back in every request's head: anything else
                    # could split a header or be refused there.
                    self._drain(response)
                    raise InvalidMessage(f"the server's Mcp-Session-Id is not visible ASCII: {session[:80]!r}")
                self._session_id = session
                self._session_origin = response.origin if isinstance(response, _ForeignResponse) else None
        if 200 <= status < 300 and status != 202:
            try:
                coding_of(response.headers.get("content-encoding"))  # gzip and deflate are decoded
            except UnsupportedEncoding as exc:
                response.shutdown()
                raise InvalidMessage(f"the server answered with {exc}") from None
            content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
            if content_type == "application/json":
                payload = self._read_body(response, self._target.max_response_bytes)
                self._done(exchange, response)
                self._deliver_json(exchange, payload)
                return False
            if content_type == "text/event-stream":
                if not exchange.on_caller:
                    self._read_request_stream(exchange, response)
                    return False
                return self._stream_on_caller(exchange, response)
            self._drain(response)
            raise InvalidMessage(f"the server answered with content type {content_type or 'none'!r}")
        preview = self._read_body(response, _ERROR_BODY_PREVIEW * 8, truncate=True)
        self._done(exchange, response)
        if status == 404 and sent_session and self._legacy:
            raise self._status_error(response, preview, session=True)
        error_message = _json_rpc_error(preview)
        if error_message is not None and status not in (401, 403):
            error_message["id"] = exchange.request_id
            self._deliver(exchange, error_message)
            return False
        raise self._status_error(response, preview, session=False)

    def _status_error(self, response: Response, body: bytes, *, session: bool) -> HTTPStatusError:
        status = response.status
        text = body.decode("utf-8", "replace")[:_ERROR_BODY_PREVIEW]
        headers = {k.lower(): v for k, v in response.headers.items()}
        foreign = response.url if isinstance(response, _ForeignResponse) else None
        if isinstance(response, _ForeignResponse) and response.origin != self._session_origin:
            session = False  # that origin never saw the session
        where = f"{foreign or self._url} answered HTTP {status}"
        location = response.headers.get("location")
        if 300 <= status < 400 and location:
            if status not in (307, 308):
                why = "only 307 and 308 are followed (they keep the method and body)"
            elif not self._target.follow_redirects:
                why = "307 and 308 to another origin are followed only with follow_redirects=True"
            else:
                why = "its Location is not an http(s) URL"
            where += f" (a redirect to {location} that was not followed: {why})"
        detail = f": {text}" if text.strip() else ""
        if status in (401, 403):
            return AuthenticationError(f"{where} (authentication required or refused){detail}",
                                       status=status, body=text, headers=headers)
        if status == 404 and session and self._legacy:
            return SessionExpired(f"{where} for the session", status=status, body=text, headers=headers)
        return HTTPStatusError(f"{where}{detail}", status=status, body=text, headers=headers)

    def _deliver_json(self, exchange: Exchange, payload: bytes) -> None:
        message = jsonrpc.parse(payload)
        # Checked before delivery: a wrong id must never reach another caller.
        if isinstance(message, list):  # a batch (2025-03-26), which must hold the response
            message, answered = _batch_for(exchange.request_id, message)
        else:
            answered = message.get("id") == exchange.request_id and _is_response(message)
        if not answered:
            raise InvalidMessage(
                f"the server answered request {exchange.request_id!r} with something else: "
                f"{payload[:200].decode('utf-8', 'replace')}"
            )
        self._deliver(exchange, message)

    def _deliver(self, exchange: Exchange, message: dict[str, Any] | list[Any]) -> None:
        sink = self._sink
        if exchange.stop.is_set() or sink is None:
            return
        sink.deliver(message, related_to=exchange.request_id)

    # -- SSE ---------------------------------------------------------------------------------

    def _stream_on_caller(self, exchange: Exchange, response: Response) -> bool:
        """An SSE answer, read on the caller's thread for as long as nothing
        but its response arrives (the common stream: maybe a priming event,
        the response, the end). The stream's end is read here too, so its
        connection is back in the pool before the call returns and the next
        call reuses it. True when the rest was handed to an exchange thread:
        when a message before the response (progress, a log message, a
        server request) must reach the caller while the stream is open (it
        waits on its inbox meanwhile, and its deadline is kept by cancelling
        the exchange), when the stream broke and may be resumed, or when the
        stream stays open after the response (then it may end later)."""
        parser = SSEParser(max_event_bytes=self._target.max_response_bytes)
        decoder = _stream_decoder(response)
        done = self._read_events(exchange, response, parser, decoder, on_caller=True)
        if done == "response":
            if self._skip_end_waits > 0:
                self._skip_end_waits -= 1  # approximate under threads, which is all it needs
            elif not self._end_stream(exchange, response, done, wait=_CALLER_END_SECONDS):
                return False  # ended (or not reusable): given back either way
            else:
                # Not ended soon: this server may keep its streams open after
                # the response, so the next ones are not waited for here.
                self._skip_end_waits = _SKIP_END_WAITS
        exchange.on_caller, exchange.deadline = False, None
        response.deadline = None
        self._threads.submit(lambda: self._stream_on_thread(exchange, response, parser, decoder, done))
        return True

    def _stream_on_thread(self, exchange: Exchange, response: Response, parser: SSEParser,
                          decoder: Decoder | None, done: str) -> None:
        """The rest of an SSE answer, read on an exchange thread, which owns
        the exchange from the hand-off on (`done`: how reading on the
        caller's thread stopped)."""
        try:
            with self._reporting(exchange):
                self._read_request_stream(exchange, response, parser, decoder, done)
        finally:
            self._forget(exchange)

    def _read_request_stream(self, exchange: Exchange, response: Response, parser: SSEParser | None = None,
                             decoder: Decoder | None = None, done: str = "delivered") -> None:
        """Read a POST's SSE stream until its response; resume it with GET and
        `Last-Event-ID` (initialize era) if it breaks after an event id.
        `parser`, `decoder` and `done` carry on where the caller's thread
        stopped ("delivered": reading goes on; "response": only the stream's
        end is left; "eof", "broken": resume)."""
        if parser is None:
            parser = SSEParser(max_event_bytes=self._target.max_response_bytes)
            decoder = _stream_decoder(response)
        if done == "delivered":
            done = self._read_events(exchange, response, parser, decoder)
        self._end_stream(exchange, response, done)
        attempts = 0
        while done != "response" and self._legacy and parser.last_event_id is not None:
            if attempts >= self._target.max_resume_attempts:
                break
            attempts += 1
            delay = (parser.retry_ms if parser.retry_ms is not None else DEFAULT_RETRY_MS) / 1000.0
            if exchange.stop.wait(delay) or self._closing:
                return
            log.debug("resuming the stream of request %r after event %r", exchange.request_id, parser.last_event_id)
            exchange.pool = self._streams  # the request's slot was given back with its first stream
            resumed = self._get(exchange, {"Last-Event-ID": parser.last_event_id})
            if resumed.status != 200:
                preview = self._read_body(resumed, _ERROR_BODY_PREVIEW, truncate=True)
                exchange.release(reusable=False)
                raise self._status_error(resumed, preview, session=True)
            done = self._read_events(exchange, resumed, parser, _stream_decoder(resumed))
            self._end_stream(exchange, resumed, done)
        if done != "response" and not exchange.stop.is_set():
            raise ConnectionClosed(f"the response stream of request {exchange.request_id!r} ended before the response")

    def _end_stream(self, exchange: Exchange, response: Response, done: str, wait: float | None = None) -> bool:
        """Give the stream's connection back: for reuse when the stream ended
        cleanly (a server ends it right after the response: with chunked
        framing, the terminating chunk), else closed. With `wait` (on the
        caller's thread, after the response): when the end has not come
        within `wait` seconds, nothing is given back and True says the
        stream is still open (the caller hands it to an exchange thread)."""
        if done == "response" and not response.isclosed() and not exchange.stop.is_set():
            try:
                response.deadline = time.monotonic() + _STREAM_END_SECONDS
                waited = None if wait is None else time.monotonic() + wait
                left = _READ_CHUNK
                while left > 0 and not response.isclosed():
                    # The caller reads only what has come (within `wait`).
                    if waited is not None and not response.ready(waited - time.monotonic()):
                        return True
                    chunk = response.read1(left)
                    if not chunk:
                        break
                    left -= len(chunk)
            except (OSError, ValueError):
                pass  # not ended in time, or broken: the connection is closed, not reused
        if done == "broken":
            exchange.release(reusable=False)
        else:
            self._done(exchange, response)
        return False

    def _read_events(self, exchange: Exchange, response: Response, parser: SSEParser, decoder: Decoder | None, *,
                     on_caller: bool = False) -> str:
        """Feed the stream to the parser: 'response' once this request's
        response arrived (reading stops there), 'eof' at the stream's end,
        'broken' when it broke (or the exchange was aborted). On the
        caller's thread (`on_caller`), also 'delivered' once a chunk brought
        a message other than the response (the caller must see it while the
        stream is open); a read that failed because the exchange stopped,
        the transport closed or the caller's deadline passed is raised, as
        on the JSON path."""
        try:
            delivered = False
            while True:
                chunk = response.read1(_READ_CHUNK)
                self._count(received=len(chunk))
                for event in _sse_events(parser, decoder, chunk):
                    if not event.data.strip():
                        continue  # a priming event: an id and no message
                    try:
                        message = jsonrpc.parse(event.data)
                    except InvalidMessage as exc:
                        raise InvalidMessage(f"an SSE event of request {exchange.request_id!r} is not JSON-RPC: {exc}") from None
                    if isinstance(message, list):  # a batch (2025-03-26): its items, minus others' responses
                        items, answered = _batch_for(exchange.request_id, message)
                        if items:
                            self._deliver(exchange, items)
                        if answered:
                            return "response"
                        delivered = delivered or bool(items)
                        continue
                    is_response = "method" not in message and ("result" in message or "error" in message)
                    if is_response and message.get("id") != exchange.request_id:
                        log.warning("dropped a response for %r on the stream of request %r",
                                    message.get("id"), exchange.request_id)
                        continue
                    self._deliver(exchange, message)
                    if is_response:
                        return "response"
                    delivered = True
                if not chunk:
                    return "eof"
                if on_caller and delivered:
                    return "delivered"
        except EventTooLarge as exc:
            raise MessageTooLarge(
                f"an SSE event of request {exchange.request_id!r} is larger than max_response_bytes={exc.limit}",
                limit=exc.limit,
            ) from None
        except (DecodingError, UnsupportedEncoding) as exc:
            raise InvalidMessage(f"the response stream of request {exchange.request_id!r} could not be decoded: "
                                 f"{exc}") from None
        except (OSError, ValueError) as exc:
            if on_caller and (exchange.stop.is_set() or self._closing or isinstance(exc, socket.timeout)):
                raise
            if exchange.stop.is_set() or self._closing:
                return "broken"
            if self._legacy and parser.last_event_id is not None:
                log.debug("the stream of request %r broke: %s", exchange.request_id, exc)
                parser.reconnect()  # drop the half-received line; resume from the last id
                return "broken"
            raise ConnectionClosed(f"the response stream of request {exchange.request_id!r} broke: {exc}") from exc

    def _get(self, exchange: Exchange, extra: Mapping[str, str]) -> Response:
        headers = self._base_headers(session=True)
        headers["Accept"] = "text/event-stream"
        headers.update(extra)
        return self._request(exchange, "GET", headers, None)

    def _open_get_stream(self) -> None:
        """After `notifications/initialized`: listen on the session's GET
        stream, if the server offers one (a 405 says it does not)."""
        with self._lock:
            start_get = self._legacy and self._get_offered and not self._closing
            if start_get and self._get_stream is not None and not self._get_stream.ended:
                start_get = False
            if start_get:
                try:
                    stream = _GetStream(self)
                except ConnectionClosed as exc:
                    # The GET stream is optional: without a reader for it the
                    # session goes on as after a 405, with no GET stream.
                    log.warning("no GET stream for this session: %s", exc)
                    start_get = False
                else:
                    self._get_stream = stream
        if start_get:
            stream.start()
            # Wait (briefly) until the server has answered the GET, so the
            # stream exists before the first request is sent: a server may
            # otherwise take a late GET for something else, such as the
            # resumption of a request's stream.
            stream.opened.wait(min(_GET_OPEN_WAIT, self._target.connect_timeout))

    @property
    def _get_exchange(self) -> Exchange | None:
        stream = self._get_stream
        return None if stream is None else stream.exchange

    @property
    def _get_thread(self) -> threading.Thread | None:
        """The thread at work on the GET stream: the one opening it, else the
        process's stream reader while the stream is open."""
        stream = self._get_stream
        return None if stream is None else stream.thread

    # -- bodies ------------------------------------------------------------------------------------

    def _count(self, sent: int = 0, received: int = 0) -> None:
        """Bytes of message bodies, for `Client.stats()`; exchanges run on
        many threads, so the sums are kept under a lock."""
        with self._count_lock:
            self.bytes_sent += sent
            self.bytes_received += received

    def _read_body(self, response: Response, limit: int, *, truncate: bool = False) -> bytes:
        """The body, at most `limit` bytes once decoded (`truncate`: a preview
        cut at `limit`, else `MessageTooLarge` beyond it)."""
        try:
            decoder = _decoder(response)
        except UnsupportedEncoding as exc:
            if not truncate:
                response.shutdown()
                raise InvalidMessage(f"the server answered with {exc}") from None
            decoder = None  # the preview of an error body: shown as it came
        if decoder is not None:
            return self._read_decoded(response, decoder, limit, truncate=truncate)
        data = self._read_body_bytes(response, limit, truncate=truncate)
        self._count(received=len(data))
        return data

    def _read_decoded(self, response: Response, decoder: Decoder, limit: int, *, truncate: bool) -> bytes:
        """A compressed body, decoded as it arrives. `limit` bounds the decoded
        size: a decompression bomb stops at `limit` plus one piece, never
        expanded further. The compressed size is bounded too (`raw_bound`),
        and it is what counts as received (bytes on the wire)."""
        raw_limit = raw_bound(limit)
        length = response.headers.get("content-length")
        if (not truncate and length is not None and length.isascii() and length.isdigit()
                and int(length) > raw_limit):
            response.shutdown()
            raise MessageTooLarge(f"the response is {length} bytes compressed, more than max_response_bytes={limit} "
                                  "can need", limit=limit)
        parts: list[bytes] = []
        size = raw = 0
        try:
            while True:
                chunk = response.read1(_READ_CHUNK)
                if not chunk:
                    if not truncate:
                        decoder.finish()
                    return b"".join(parts)
                raw += len(chunk)
                self._count(received=len(chunk))
                if raw > raw_limit:
                    response.shutdown()  # the rest is not wanted: the connection is not reused
                    if truncate:
                        return b"".join(parts)[:limit]
                    raise MessageTooLarge(f"the compressed response is over {raw_limit} bytes, more than "
                                          f"max_response_bytes={limit} can need", limit=limit)
                for piece in decoder.feed(chunk):
                    size += len(piece)
                    parts.append(piece)
                    if size > limit:
                        response.shutdown()
                        if truncate:
                            return b"".join(parts)[:limit]
                        raise MessageTooLarge(f"the response decodes ({decoder.coding}) to more than "
                                              f"max_response_bytes={limit}", limit=limit)
        except DecodingError as exc:
            response.shutdown()
            if truncate:
                return b"".join(parts)[:limit]
            raise InvalidMessage(f"the server's answer could not be decoded: {exc}") from None

    def _read_body_bytes(self, response: Response, limit: int, *, truncate: bool = False) -> bytes:
        length = response.headers.get("content-length")
        if not truncate and length is not None and length.isdigit() and int(length) > limit:
            response.shutdown()
            raise MessageTooLarge(
                f"the response is {length} bytes, over max_response_bytes={limit}", limit=limit
            )
        if not truncate and length is not None and length.isdigit():
            # The common answer: its length is known and within the limit, so
            # read exactly that much, in one call when the socket allows.
            # `read(n)` blocks until n bytes or the body's end (cut short: ResponseError).
            return response.read(int(length))
        parts: list[bytes] = []
        size = 0
        while True:
            chunk = response.read(_READ_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                response.shutdown()  # the rest is not wanted: the connection is not reused
                if truncate:
                    parts.append(chunk)
                    break
                raise MessageTooLarge(f"the response is over max_response_bytes={limit}", limit=limit)
            parts.append(chunk)
        return b"".join(parts)[: limit if truncate else None]

    @staticmethod
    def _drain(response: Response) -> None:
        """Read what is left of a small body so the connection can be reused."""
        try:
            response.read(_ERROR_BODY_PREVIEW * 8)
        except (OSError, ValueError):  # ValueError: http11.ResponseError
            response.will_close = True


class _GetStream:
    """The initialize era's standalone GET stream of one session: messages
    related to no request, handed to the sink as they come. Reconnects after
    the server's retry interval (with `Last-Event-ID`) while events keep
    coming; gives up after three attempts in a row that failed or brought
    nothing, after 405 (the server offers no GET stream) or another status.

    Threads. Opening the stream (the GET and its answer's head: maybe a
    dial, TLS and authorization) blocks, so it runs on a thread of its own
    (`mcp-sync-http-get`) that ends once the head came. The stream is then
    read by the process's stream reader (`streams.READER`), one thread for
    every session's GET stream: an idle session costs no thread. The delay
    before a reconnection is the reader's timer, which starts the next
    opener.

    Ownership. The connection's reading state (`_frames`, `_decoder`,
    `_parser`, `_got_any`) and the counters (`_failures`, `_last_id`,
    `_retry_ms`) have one owner at a time: the opener until it hands the
    socket to the reader (through the reader's lock), then the reader
    thread, which starts the next opener only once the connection is
    given back. `_lock` guards `_closing` and `_opener`.
    """

    def __init__(self, transport: HTTPTransport) -> None:
        self._transport = transport
        #: One exchange for every connection of the stream: close() aborts it.
        self.exchange = Exchange("get", transport._streams)
        #: Set once the first GET has an answer (or failed).
        self.opened = threading.Event()
        self._lock = threading.Lock()
        self._closing = False
        self._opener: threading.Thread | None = None
        self._failures = 0
        self._last_id: str | None = None
        self._retry_ms = DEFAULT_RETRY_MS
        self._frames = BodyFrames(done=True)
        self._decoder: Decoder | None = None
        self._parser = SSEParser()
        self._got_any = False
        #: The work of what was read that is still to do (a compressed
        #: burst is done a slice per turn of the reader): bytes decoded by each step.
        self._backlog: Iterator[int] | None = None
        try:
            self._stream = READER.open(self._on_data, self._on_end, self._on_timer, self._on_close)
        except (OSError, RuntimeError) as exc:  # no thread or descriptor left for the reader
            raise ConnectionClosed(f"the GET stream cannot be read: {exc}") from exc

    @property
    def ended(self) -> bool:
        """Whether the stream is over for good (given up, or closed)."""
        return self._stream.done

    @property
    def thread(self) -> threading.Thread | None:
        """The thread at work on it: the opener's, else the stream reader
        while the stream lasts."""
        opener = self._opener
        if opener is not None and opener.is_alive():
            return opener
        return None if self._stream.done else READER.thread

    def start(self) -> None:
        if not self._start_opener():
            self.opened.set()

    def abort(self) -> None:
        """(close(), first.) No reconnection from now on; a GET being opened
        or read fails at once."""
        with self._lock:
            self._closing = True
        self.exchange.abort()

    def close(self, timeout: float) -> None:
        """(close(), after `abort`.) Wait, at most `timeout` seconds in all,
        until the opener has ended and the reader let go of the stream (and
        ended, if this was its last stream)."""
        limit = time.monotonic() + timeout
        with self._lock:
            self._closing = True
            opener = self._opener
        if opener is not None and opener is not threading.current_thread():
            opener.join(max(limit - time.monotonic(), 0.0))
        if not self._stream.close(max(limit - time.monotonic(), 0.0)):
            log.warning("the GET stream was not let go of within %g s", timeout)

    def _start_opener(self) -> bool:
        """Start the opener's thread; False if closing, or if it could not be
        started (a failed attempt then: retried, or given up)."""
        with self._lock:
            if self._closing:
                return False
            thread = threading.Thread(target=self._open, name="mcp-sync-http-get", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # no thread left: close() must not join this one
                refused: RuntimeError | None = exc
            else:
                refused = None
                self._opener = thread
        if refused is not None:
            self._failed(ConnectionClosed(f"the GET stream's opener could not start: {refused}"))
            return False
        return True

    # -- the opener's thread ---------------------------------------------------------------------

    def _open(self) -> None:
        transport = self._transport
        exchange = self.exchange
        extra = {"Last-Event-ID": self._last_id} if self._last_id else {}
        try:
            # Setting the stream up is bounded like a one-way POST; the
            # stream itself then lasts as long as the session.
            exchange.deadline = time.monotonic() + transport._side_bound()
            try:
                response = transport._get(exchange, extra)
            finally:
                self.opened.set()
            exchange.deadline = response.deadline = None
            if response.status != 200:
                if response.status == 405:
                    transport._get_offered = False
                    log.debug("the server offers no GET stream (405)")
                else:
                    log.debug("the GET stream answered %s", response.status)
                transport._drain(response)
                exchange.release(reusable=False)
                self._stream.close(_GET_JOIN_SECONDS)  # over for good
                return
            self._decoder = _decoder(response)
            self._parser = SSEParser(max_event_bytes=transport._target.max_response_bytes)
            self._got_any = False
            self._backlog = None
            self._frames, first = take_body(response)
            conn = exchange.conn
            sock = None if conn is None else conn.sock
            if sock is None:
                raise ConnectionClosed("the GET stream's connection was closed")
        except Exception as exc:  # the stream is retried, never left dead silently
            self._failed(exc)
            return
        if not self._stream.watch(sock, first):
            exchange.release(reusable=False)  # closed meanwhile

    # -- the reader's thread (or the opener's, before the hand-over) -------------------------------

    def _on_data(self, data: bytes) -> bool:
        """What the socket had (b"": go on with the backlog). True when work
        was kept back: a reader's turn's worth of decoded bytes was done,
        so that one session's compressed burst cannot hold the others up."""
        try:
            if data:
                work = self._work(self._frames.feed(data))
                self._backlog = work if self._backlog is None else itertools.chain(self._backlog, work)
            if self._backlog is not None:
                done = 0
                for size in self._backlog:
                    done += size
                    if done >= TURN_BYTES:
                        return True
                self._backlog = None
            if self._frames.done:
                self._stream.unwatch()
                self._ended()
        except Exception as exc:
            self._backlog = None
            self._stream.unwatch()
            self._failed(exc)
        return False

    def _work(self, pieces: list[bytes]) -> Iterator[int]:
        """Deliver the events of body `pieces`, a step at a time: each step
        decodes one piece (at most `decoding.PIECE` bytes) and yields its
        size (0 for a body not compressed: the reader's own count of the
        bytes read bounds that work)."""
        transport, decoder, parser = self._transport, self._decoder, self._parser
        for chunk in pieces:
            transport._count(received=len(chunk))
            if decoder is None:
                self._deliver(parser.feed(chunk))
                yield 0
                continue
            for piece in decoder.feed(chunk):
                self._deliver(parser.feed(piece))
                yield len(piece)

    def _on_end(self, error: OSError | None) -> None:
        """The socket ended (no longer watched)."""
        try:
            if error is not None:
                raise error
            self._frames.end()
        except Exception as exc:
            self._failed(exc)
            return
        self._ended()

    def _events(self, chunk: bytes) -> None:
        """Deliver the events `chunk` of the body completes (b"": its end)."""
        self._transport._count(received=len(chunk))
        self._deliver(_sse_events(self._parser, self._decoder, chunk))

    def _deliver(self, events: Iterable[Event]) -> None:
        """Hand `events` on, noting the id of each once it was: a reconnection
        names the last event delivered, never one parsed but lost with a
        failure after it (an event too large, or not JSON-RPC, further on)."""
        transport = self._transport
        for event in events:
            if event.data.strip():
                self._got_any = True
                sink = transport._sink
                if sink is not None:
                    sink.deliver(jsonrpc.parse(event.data))  # a batch is split by the sink
            if event.id is not None:  # "" too: SSE's reset of the last event id
                self._last_id = event.id
        # Every event the parser completed was handed on: an id it took from
        # an event without data (dispatched by SSE, not returned) counts too.
        if self._parser.last_event_id is not None:
            self._last_id = self._parser.last_event_id

    def _ended(self) -> None:
        """The body ended cleanly: reconnect after the retry interval."""
        if self._transport._closing or self.exchange.stop.is_set():
            self.exchange.release(reusable=False)
            return
        try:
            self._events(b"")
        except Exception as exc:
            self._failed(exc)
            return
        self.exchange.release(reusable=False)  # a stream's connection is its own
        self._take_resumption()
        self._failures = 0 if self._got_any else self._failures + 1
        self._again()

    def _take_resumption(self) -> None:
        """The retry interval the connection set (it takes effect at once;
        the parser of an earlier connection gives what was taken already).
        The last event id is `_deliver`'s: the parser's may name events
        parsed with the one that failed, and never delivered."""
        parser = self._parser
        self._retry_ms = parser.retry_ms if parser.retry_ms is not None else self._retry_ms

    def _failed(self, exc: BaseException) -> None:
        """The GET or its stream failed: logged as it always was, retried
        from the last event delivered (the events before the failure were)."""
        self.exchange.release(reusable=False)
        self._backlog = None
        self._take_resumption()
        if self._transport._closing or self.exchange.stop.is_set():
            return
        expected = isinstance(exc, (TransportError, EventTooLarge, OSError, ValueError))
        log.log(logging.DEBUG if expected else logging.WARNING, "the GET stream failed: %s", exc,
                exc_info=None if expected else exc)
        self._failures += 1
        self._again()

    def _again(self) -> None:
        if self._failures >= 3:
            self._stream.close(_GET_JOIN_SECONDS)  # given up
        else:
            self._stream.later(self._retry_ms / 1000.0)

    def _on_timer(self) -> None:
        self._start_opener()

    def _on_close(self) -> None:
        self.exchange.release(reusable=False)


#: Headers meant for the server's own origin, never sent to another (after a
#: redirect): credentials, cookies, the session, tool arguments.
_ORIGIN_BOUND = frozenset({"authorization", "proxy-authorization", "cookie", "mcp-session-id"})


def _origin_bound(name: str) -> bool:
    lower = name.lower()
    return lower in _ORIGIN_BOUND or lower.startswith("mcp-param-")


def _normal_url(url: str) -> str:
    """A URL in one spelling (scheme and host lower case, the port always
    given, no fragment), to tell a redirect loop."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        port = 0
    return f"{parts.scheme.lower()}://{parts.hostname}:{port}{parts.path or '/'}{'?' if parts.query else ''}{parts.query}"


class _Elsewhere(Pool):
    """The connection of one request redirected to another origin: dialed
    for it, never kept. `home` is the pool it came from, where the
    exchange's next request starts again."""

    def __init__(self, dial: Callable[[Exchange, float | None], socket.socket], home: Pool) -> None:
        super().__init__(dial, None, keep_idle=False)
        self.home = home


class _Hop:
    """Where one request goes after a redirect to another origin (`_hop`)."""

    __slots__ = ("url", "origin", "scheme", "pool", "head", "headers")

    def __init__(self, url: str, origin: tuple[str, str, int], pool: _Elsewhere, head: RequestHead,
                 headers: dict[str, str]) -> None:
        self.url = url
        self.origin = origin  # (scheme, host, port)
        self.scheme = origin[0]
        self.pool = pool
        self.head = head
        self.headers = headers


class _ForeignResponse(Response):
    """An answer from another origin (a followed redirect): errors name its URL."""

    def __init__(self, sock: socket.socket, hop: _Hop, deadline: float | None) -> None:
        super().__init__(sock, deadline=deadline)
        self.url = hop.url
        self.origin = hop.origin


def _accept_encoding(target: HTTP) -> str:
    # Always offered when on, whatever max_response_bytes: the decoded size
    # is what the limit bounds, so no limit makes a compressed answer riskier.
    return ACCEPT_ENCODING if target.compress else "identity"


def _sse_events(parser: SSEParser, decoder: Decoder | None, chunk: bytes) -> Iterable[Event]:
    """The events a chunk of a stream completes (b"": its end). A compressed
    stream is decoded before the parser, a piece at a time and only as the
    events are taken, so the parser's event limit bounds it as it bounds a
    plain one."""
    if not chunk:
        return parser.close()
    if decoder is None:
        return parser.feed(chunk)
    return (event for piece in decoder.feed(chunk) for event in parser.feed(piece))


def _stream_decoder(response: Response) -> Decoder | None:
    """`_decoder` of an SSE stream: a coding the client does not decode is
    the server's fault (`InvalidMessage`), and the stream is not read on."""
    try:
        return _decoder(response)
    except UnsupportedEncoding as exc:
        response.shutdown()
        raise InvalidMessage(f"the server answered with {exc}") from None


def _decoder(response: Response) -> Decoder | None:
    """The decoder of a response's body (None: identity); `UnsupportedEncoding`
    for a coding the client does not decode."""
    coding = coding_of(response.headers.get("content-encoding"))
    return None if coding is None else Decoder(coding, _READ_CHUNK)


def _visible_ascii(text: str) -> bool:
    """Only 0x21-0x7E, as the spec requires of a session id."""
    return all("!" <= char <= "~" for char in text)


def _is_response(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)


def _batch_for(request_id: Any, batch: list[Any]) -> tuple[list[Any], bool]:
    """A batch that came on the answer channel of `request_id`: its items
    minus responses to other requests (dropped, as a wrong id must never
    reach another caller), and whether it holds this request's response.
    Other items, invalid ones included, are left for the sink to route."""
    kept: list[Any] = []
    answered = False
    for item in batch:
        if _is_response(item):
            if item.get("id") != request_id:
                log.warning("dropped a response for %r in a batch on the stream of request %r",
                            item.get("id"), request_id)
                continue
            answered = True
        kept.append(item)
    return kept, answered


def _json_rpc_error(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error response in an HTTP error body, if it holds one."""
    try:
        message = jsonrpc.decode(body)
    except InvalidMessage:
        return None
    if isinstance(message.get("error"), dict) and "code" in message["error"]:
        return message
    return None
