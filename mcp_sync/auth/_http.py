"""HTTP to authorization servers and metadata endpoints: bounded in size and time.

Every answer is read with a byte limit (a metadata document or token
response has no reason to be large, and an endless one must not exhaust
memory), redirects are never followed (RFC 8414 and RFC 9728 documents
are fetched from exactly the URL the spec names), and a body must be a
JSON object to count as one.

Bounds, whatever the server does:

- Size: the client asks for `identity`; a body encoded anyway with gzip
  or deflate is decoded under the same limit (a small "gzip bomb" never
  grows past it), any other coding is refused.
- Network path: given the `NetworkSettings` of the transport being
  authorized for (see `mcp_sync.transports.http_network`), a request takes its proxy (the
  same choice, environment and NO_PROXY included) and its TLS context (an
  `ssl.SSLContext` too, through the adapter); requests' own environment
  handling is then off, so nothing else decides the path.
- Time: `timeout` is a total for one request, from resolving the host's
  name to the last byte. `requests` only bounds each socket read, so a
  server sending one byte every 100 ms would hold a request for as long as
  it likes; here a watchdog shuts the request's sockets down when its
  deadline passes. A name is resolved on a thread of
  `mcp_sync.transports.resolve`, waited for until that deadline (`socket.getaddrinfo` has no timeout, and no
  socket exists yet for the watchdog to shut down). An
  `AuthHTTP.budget()` bounds a group of requests (one authorization) too.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import attrs
import requests
import requests.adapters
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection

from ..errors import AuthorizationError, ConnectError
from ..transports import resolve as _resolve
from ..transports.http_network import NetworkSettings, ProxyURL
from ..transports.decoding import Decoder, DecodingError, UnsupportedEncoding, coding_of
from ..waiting import remaining

log = logging.getLogger("mcp_sync.auth")

#: Metadata documents and token responses larger than this are refused.
DEFAULT_MAX_BYTES = 256 * 1024

_READ_SIZE = 65536

#: What a request may fail with below this module (turned into AuthorizationError).
_FAILURES = (requests.RequestException, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, ValueError)


# -- the watchdog ----------------------------------------------------------------------------------


class _Watch:
    """The deadline of one request: shuts its sockets down when it passes,
    which ends any read blocked on them (TLS included)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        #: Why the deadline passed, when it is worth saying (a name that
        #: did not resolve); None: the answer was too slow.
        self.why: str | None = None
        self._lock = threading.Lock()
        # Duplicates of the sockets' descriptors, owned here: shutting one
        # down ends the connection, and closing it never touches a
        # descriptor number the process may have reused meanwhile.
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(remaining(deadline), self.expire)
        self._timer.daemon = True
        self._timer.start()

    def add(self, sock: socket.socket) -> None:
        try:
            dup = socket.fromfd(sock.fileno(), sock.family, sock.type)
        except (OSError, ValueError, AttributeError):
            # No duplicate (a closed socket; a platform without fromfd):
            # this request keeps the per-read timeout only.
            return
        with self._lock:
            self._sockets.append(dup)
            expired = self.expired
        if expired:
            _shut(dup)

    def expire(self) -> None:
        """The deadline has passed: end the request's sockets (the timer
        calls it then; a resolution that ran out calls it at once)."""
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def stop(self) -> None:
        self._timer.cancel()
        self._timer.join()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its owner


_active = threading.local()


def _watch_socket(sock: socket.socket | None) -> None:
    watch: _Watch | None = getattr(_active, "watch", None)
    if watch is not None and sock is not None:
        watch.add(sock)


def _open(conn: HTTPConnection) -> socket.socket:
    """A new connection's socket, its host's name resolved within the
    current request's deadline: urllib3 would call `socket.getaddrinfo`
    itself, which nothing can stop. Then each address in the resolver's
    order, as urllib3 does, with urllib3's errors (requests maps them)."""
    watch: _Watch | None = getattr(_active, "watch", None)
    host = conn._dns_host  # the name urllib3 resolves: the origin's, or the proxy's
    if watch is None or _resolve.is_address(host):
        return HTTPConnection._new_conn(conn)  # nothing to resolve, or no deadline to keep
    try:
        family = urllib3_connection.allowed_gai_family()
        infos = _resolve.within(("connect", host, conn.port, family),
                                lambda: socket.getaddrinfo(host, conn.port, family, socket.SOCK_STREAM),
                                watch.deadline, host)
    except _resolve.ResolutionTimeout as exc:
        watch.why = f"the name {host!r} did not resolve: {exc}"
        if remaining(watch.deadline) <= 0:
            watch.expire()  # as the timer would, a moment later
        raise ConnectTimeoutError(conn, f"resolving {host} did not end in time") from None
    except socket.gaierror as exc:
        raise NameResolutionError(conn.host, conn, exc) from exc
    except (OSError, UnicodeError) as exc:
        raise NewConnectionError(conn, f"Failed to resolve {host}: {exc}") from exc
    error: Exception | None = None
    for address in dict.fromkeys(str(info[4][0]) for info in infos):
        try:
            # An address literal: urllib3's own getaddrinfo returns at once.
            sock = urllib3_connection.create_connection(
                (address, conn.port), conn.timeout, source_address=conn.source_address,
                socket_options=conn.socket_options,
            )
        except socket.timeout:
            error = ConnectTimeoutError(conn, f"Connection to {conn.host} timed out. (connect timeout={conn.timeout})")
        except OSError as exc:
            error = NewConnectionError(conn, f"Failed to establish a new connection: {exc}")
        else:
            sys.audit("http.client.connect", conn, conn.host, conn.port)  # as urllib3's own does
            return sock
    raise error if error is not None else NewConnectionError(conn, f"{host} resolved to no address")


class _WatchedHTTPConnection(HTTPConnection):
    """Hands every socket it opens, or reuses, to the current request's
    watch; resolves names within its deadline (`_open`)."""

    def _new_conn(self) -> socket.socket:
        sock = _open(self)
        _watch_socket(sock)  # before TLS: a trickled handshake is bounded too
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch_socket(self.sock)  # a kept-alive connection from the pool
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = _open(self)
        _watch_socket(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch_socket(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_POOLS: dict[str, type[HTTPConnectionPool]] = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class _WatchedAdapter(requests.adapters.HTTPAdapter):
    """With `network`: TLS by its context, built once (requests takes no
    `ssl.SSLContext` of its own, so the pool key carries it instead of
    `verify` and `cert`, and `cert_verify` is off so that requests never
    loads a CA file into it: measured in the proxy tests)."""

    def __init__(self, network: NetworkSettings | None = None) -> None:
        self._network = network
        self._context: ssl.SSLContext | None = None
        self._context_lock = threading.Lock()
        super().__init__()

    def _tls_context(self) -> ssl.SSLContext:
        assert self._network is not None
        with self._context_lock:
            if self._context is None:
                self._context = self._network.tls_context()
            return self._context

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None,
    ) -> Any:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        if self._network is None:
            return host_params, pool_kwargs
        return host_params, ({"ssl_context": self._tls_context()} if host_params["scheme"] == "https" else {})

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        if self._network is None:
            super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]
        # Else the pool's context decides: requests would set a CA file (its
        # certifi bundle) on the pool, which urllib3 loads into that context.

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if type(manager) is urllib3.ProxyManager:  # SOCKS managers have pools of their own
            manager.pool_classes_by_scheme = _POOLS
        return manager


def new_session(network: NetworkSettings | None = None) -> requests.Session:
    """A session whose requests the watchdog can end at their deadline;
    with `network`, on that network path only (see the module docstring)."""
    session = requests.Session()
    if network is not None:
        session.trust_env = False  # the proxy and the CAs are the network's, chosen once
    adapter = _WatchedAdapter(network)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


# -- one request -------------------------------------------------------------------------------------


@attrs.frozen
class RawAnswer:
    """Status, lower-cased headers and the (decoded) body of one answer."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def fetch(
    method: str,
    url: str,
    *,
    timeout: float,
    verify: bool | str = True,
    max_bytes: int = DEFAULT_MAX_BYTES,
    truncate: bool = False,
    session: requests.Session | None = None,
    headers: Mapping[str, str] | None = None,
    data: Mapping[str, str] | None = None,
    json_body: Mapping[str, Any] | None = None,
    why_late: str | None = None,
    label: str | None = None,
    network: NetworkSettings | None = None,
) -> RawAnswer:
    """One request, done within `timeout` seconds in total, its body read
    to at most `max_bytes` (past that: an error, or with `truncate` the
    first `max_bytes`). Redirects are not followed. Raises
    `AuthorizationError` for every failure, naming the request `label`
    (default: the method and URL); `why_late` replaces the message's
    reason when the time runs out. `network`: the network path (ignored
    when `session` is given: a session of the caller's is used as it is)."""
    label = label or f"{method} {url}"
    sent = {"Accept-Encoding": "identity", **(headers or {})}
    own = session is None
    proxy: ProxyURL | None = None
    proxies: dict[str, str] | None = None
    if own and network is not None:
        try:
            proxy = network.proxy_for(url)
        except ConnectError as exc:
            raise AuthorizationError(f"{label} was not sent: {exc}") from None
        scheme = url.split(":", 1)[0].lower()
        proxies = {scheme: _proxy_for_requests(proxy)} if proxy is not None else {}
    active = session if session is not None else new_session(network if own else None)
    watch = _Watch(time.monotonic() + timeout)
    _active.watch = watch
    try:
        with active.request(
            method, url, data=dict(data) if data is not None else None,
            json=dict(json_body) if json_body is not None else None, headers=sent,
            timeout=(timeout, timeout), verify=verify, allow_redirects=False, stream=True, proxies=proxies,
        ) as response:
            # A session of the caller's has no watched pool: watch the
            # socket now, for the body at least.
            connection = getattr(response.raw, "connection", None)
            _watch_socket(getattr(connection, "sock", None))
            body = _read_body(response, label, max_bytes, truncate)
            return RawAnswer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, body)
    except _FAILURES as exc:
        advice = "check the system's DNS resolver (/etc/resolv.conf, the network)"
        if watch.expired:
            why = f": {watch.why}; {advice}" if watch.why else ""
            raise AuthorizationError(
                f"{label} did not complete within {why_late or f'{timeout:g} s (timeout)'}{why}"
            ) from None
        if watch.why:  # no lookup could start: too many wait for the resolver already
            raise AuthorizationError(f"{label} was not sent: {watch.why}; {advice}") from None
        if proxy is not None and isinstance(exc, requests.exceptions.ProxyError):
            # Its text holds the proxy URL, credentials included: never shown.
            raise AuthorizationError(f"{label} failed: the proxy {proxy.address} refused or could not carry it "
                                     "(ProxyError)") from None
        # The exception text can hold the URL but never a form value.
        raise AuthorizationError(f"{label} failed: {type(exc).__name__}") from None
    finally:
        _active.watch = None
        watch.stop()
        if own:
            active.close()


def _proxy_for_requests(proxy: ProxyURL) -> str:
    """The proxy as requests takes it: a URL, credentials percent-encoded."""
    if proxy.username is None:
        return str(proxy)
    secret = f"{quote(proxy.username, safe='')}:{quote(proxy.password or '', safe='')}"
    return f"http://{secret}@{proxy.address}"


def _read_body(response: requests.Response, label: str, limit: int, truncate: bool) -> bytes:
    declared = response.headers.get("content-length")
    too_large = f"the answer to {label} is larger than {limit} bytes"
    # ASCII digits only: "²".isdigit() is True, but int("²") raises ValueError.
    if (not truncate and declared is not None and declared.isascii() and declared.isdigit()
            and int(declared) > limit):
        raise AuthorizationError(too_large)
    coding = response.headers.get("content-encoding")
    try:
        name = coding_of(coding)
    except UnsupportedEncoding:
        raise AuthorizationError(f"the answer to {label} is encoded with {coding!r}, which the client does not "
                                 "decode") from None
    # The transport's decoder: lazy, so a caller that stops at its limit
    # never expands a bomb further than one piece.
    decoder = None if name is None else Decoder(name)
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        data = response.raw.read(_READ_SIZE, decode_content=False)
        if not data:
            break
        try:
            for piece in (data,) if decoder is None else decoder.feed(data):
                size += len(piece)
                chunks.append(piece)
                if size > limit:
                    break
        except DecodingError:
            raise AuthorizationError(f"the answer to {label} is not validly compressed") from None
    body = b"".join(chunks)
    if len(body) > limit:
        if not truncate:
            raise AuthorizationError(too_large)
        body = body[:limit]
    return body


# -- the client of the OAuth flows -----------------------------------------------------------------


@attrs.frozen
class Answer:
    """One HTTP answer: status, lower-cased headers, and the body parsed as
    a JSON object (None when it is not one)."""

    status: int
    headers: Mapping[str, str]
    json: dict[str, Any] | None
    url: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class AuthHTTP:
    """The OAuth flow's own requests: each bounded by `timeout` in total
    and by `max_bytes`, and a group of them by a `budget()`."""

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        verify: bool | str = True,
        max_bytes: int = DEFAULT_MAX_BYTES,
        session: requests.Session | None = None,
        network: NetworkSettings | None = None,
    ) -> None:
        self.timeout = timeout
        self.verify = verify
        #: The network path of every request (replaced by the transport's
        #: through the provider's `use_network()`); default: `verify`, the
        #: environment's proxy.
        self.network = network if network is not None else NetworkSettings(verify=verify)
        self.max_bytes = max_bytes
        # Without a session of the user's, each request gets its own and
        # closes it: the flow talks to an authorization server a few times
        # an hour, and a kept-alive socket would outlive the client.
        self._session = session
        # Per thread: the providers are shared between threads, and each
        # authorization runs on the thread that needs it.
        self._local = threading.local()

    def close(self) -> None:
        """Nothing is kept open between requests; kept for symmetry."""

    @contextlib.contextmanager
    def budget(self, seconds: float) -> Iterator[None]:
        """Bound every request made inside (on this thread) to end within
        `seconds` from now, together. Nested budgets keep the outer one."""
        if getattr(self._local, "deadline", None) is not None:
            yield
            return
        self._local.seconds = seconds
        self._local.deadline = time.monotonic() + seconds
        try:
            yield
        finally:
            self._local.deadline = None

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Stop the budget's clock (while a person authorizes): the requests
        after it get the whole budget again."""
        deadline = getattr(self._local, "deadline", None)
        self._local.deadline = None
        try:
            yield
        finally:
            if deadline is not None:
                self._local.deadline = time.monotonic() + self._local.seconds

    def allowance(self, not_done: str) -> tuple[float, str | None]:
        """How long one step (a request; a name's resolution before one)
        may take now, on this thread: `timeout`, or what the `budget()` has
        left when that is less, with the reason to show (None for
        `timeout`). Raises `AuthorizationError` ("{not_done}: the
        authorization took longer than ...") when the budget is spent."""
        timeout, why_late = self.timeout, None
        deadline = getattr(self._local, "deadline", None)
        if deadline is not None:
            left = remaining(deadline)
            budget = f"{self._local.seconds:g} s, the authorization_timeout of the whole authorization"
            if left <= 0:
                raise AuthorizationError(f"{not_done}: the authorization took longer than {budget}")
            if left < timeout:
                timeout, why_late = left, budget
        return timeout, why_late

    def get(self, url: str, *, headers: Mapping[str, str] | None = None) -> Answer:
        return self._request("GET", url, headers=headers)

    def post(
        self,
        url: str,
        *,
        form: Mapping[str, str] | None = None,
        json_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        return self._request("POST", url, form=form, json_body=json_body, headers=headers)

    def _request(
        self,
        method: str,
        url: str,
        *,
        form: Mapping[str, str] | None = None,
        json_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        timeout, why_late = self.allowance(f"{method} {url} was not sent")
        raw = fetch(method, url, timeout=timeout, verify=self.verify, max_bytes=self.max_bytes,
                    session=self._session, network=self.network, headers={"Accept": "application/json", **(headers or {})},
                    data=form, json_body=json_body, why_late=why_late)
        parsed: Any = None
        if raw.body:
            try:
                parsed = json.loads(raw.body)
            except (ValueError, RecursionError):
                # RecursionError: deeply nested arrays ("[[[[...") fit well
                # within the size limit and exhaust the parser's stack.
                parsed = None
        log.debug("%s %s -> %s", method, url, raw.status)
        return Answer(raw.status, raw.headers, parsed if isinstance(parsed, dict) else None, url)
