"""One HTTP request of the Streamable HTTP transport, of any kind: the request
loop every POST, GET and DELETE goes through, and the reading of bodies.

Owns: where requests go (the target's URL, or the path a same-origin 307 or
308 moved it to: `url`, `path`), how a request reaches it (the dialer:
directly, or through the proxy the network settings name, TLS built on first
use), the one authorization flow, following redirects (to another origin:
one request's `_Hop`, without the headers meant for this origin), reading a
body within a size limit (decoded as it arrives when compressed), and the
error an HTTP status makes (`status_error`).

Must not know: JSON-RPC or MCP (a body is bytes, an answer a status and
headers), which request or stream a connection serves, or the session. Of
the session it knows one rule, given with each request: its id goes to no
other origin than the one that issued it (`session_origin`).

How it works. `request()` takes a connection of the exchange's pool, writes
the head and body, reads the answer's head, and then either returns it or,
for a 307/308 that `_follow` takes, or an authorization retry, gives the
connection back and goes round again. Every socket read is bounded by the
exchange's deadline; the clock stops while the token provider acts (a
person may be approving in a browser), and the time is kept on the
exchange (`auth_pause`). Bytes of bodies are counted through the
`ByteCounter` the transport gives.

Locks: `_tls_lock` only, so that the TLS context (which reads CA files) is
built once. The route (`url`, `path`, `_head`) is rewritten by a
same-origin redirect (or `retarget`) with no lock: a request reads the head
once per send, so one already under way is unaffected and one sent
meanwhile goes to the old path or the new one, both the server's.
"""

from __future__ import annotations

import logging
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Callable, Protocol

from .._version import __version__
from ..errors import AuthenticationError, ConnectError, HTTPStatusError, InvalidMessage, MessageTooLarge, SessionExpired
from .http_network import ProxyURL
from ..protocol.sse import Event, SSEParser
from ..waiting import remaining
from .decoding import ACCEPT_ENCODING, Decoder, DecodingError, UnsupportedEncoding, coding_of, raw_bound
from .http11 import RequestHead, Response
from .http_auth import Authorization
from .pool import Dialer, Exchange, Pool
from .tunnel import credentials_refused, open_tunnel

if TYPE_CHECKING:
    from .http_target import HTTP

USER_AGENT = f"mcp-sync/{__version__}"

log = logging.getLogger("mcp_sync.transport.http")

READ_CHUNK = 65536
ERROR_BODY_PREVIEW = 500

#: The most redirects (307/308, same origin) one request follows.
MAX_REDIRECTS = 5

#: An origin: (scheme, host, port).
Origin = tuple[str, str, int]



#: The most characters of a body an error message quotes (`one_line`).
ERROR_DETAIL_CHARS = 200
_HTML_HIDDEN = re.compile(r"<(head|script|style)\b.*?</\1\s*>", re.I | re.S)
_HTML_TAG = re.compile(r"<[^>]*>")
_HTML_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.I | re.S)


def one_line(text: str, *, html: bool = False) -> str:
    """A body's text as an error message quotes it: one line (a message is
    shown one line long: a log line, the CLI's error), at most
    `ERROR_DETAIL_CHARS`; an HTML page's visible text (else its title),
    not its markup (an Express or nginx error page said only
    `<!DOCTYPE html>`).

        >>> one_line("<!DOCTYPE html><html><head><title>Error</title></head>"
        ...          "<body><pre>Cannot POST /mcp</pre></body></html>", html=True)
        'Cannot POST /mcp'
    """
    if html or text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        import html as markup

        title = _HTML_TITLE.search(text)
        visible = " ".join(_HTML_TAG.sub(" ", _HTML_HIDDEN.sub(" ", text)).split())
        text = markup.unescape(visible or (title.group(1) if title else ""))
    words = " ".join(text.split())
    return words if len(words) <= ERROR_DETAIL_CHARS else words[:ERROR_DETAIL_CHARS - 3] + "..."


class ByteCounter(Protocol):
    """Adds the bytes of message bodies to the transport's sums."""

    def __call__(self, sent: int = 0, received: int = 0) -> None: ...


def dialer_for(host: str, port: int, tls: ssl.SSLContext | None, timeout: float, proxy: ProxyURL | None,
               forwarded: bool) -> Dialer:
    """How to reach `host:port`: directly, or through `proxy`, which either
    forwards plain-HTTP requests itself (`forwarded`) or opens a CONNECT
    tunnel that TLS then goes through."""
    if proxy is None:
        return Dialer(host, port, tls, timeout)
    tunnel = None if forwarded else (lambda sock, limit: open_tunnel(sock, proxy, host, port, limit))
    return Dialer(host, port, tls, timeout, via=(proxy.host, proxy.port), tunnel=tunnel)


class Requester:
    """Sends the requests of one transport to its target's server: see the
    module's docstring. `dial` is what the transport's pools dial with."""

    def __init__(self, target: HTTP, count: ByteCounter) -> None:
        self.target = target
        self.count = count
        proxy = target.network.proxy_for(target.url)
        #: Plain http:// through a proxy: each request goes to the proxy,
        #: in absolute form and with its credentials (https:// tunnels).
        self._forward: ProxyURL | None = proxy if proxy is not None and target.scheme == "http" else None
        self._auth = Authorization(target.auth, target.url)
        self._tls_lock = threading.Lock()
        if proxy is not None:
            log.debug("requests to %s go through the proxy %s", target.url, proxy)
        # TLS is set on first use (`dial`): building the context reads CA files.
        self._dialer = dialer_for(target.host.strip("[]"), target.port, None, target.connect_timeout, proxy,
                                  self._forward is not None)
        # Where requests go: the target's URL until the server redirects
        # (307/308 on the same origin, see `_follow`) or `retarget` moves it.
        self.path = target.path
        self.url = target.url
        self._head = self._new_head(target.path)

    def credential_scope(self) -> str | None:
        """Who requests are made as now, read without network (see `Authorization.scope`)."""
        return self._auth.scope()

    def dial(self, exchange: Exchange, deadline: float | None) -> socket.socket:
        if self.target.scheme == "https" and self._dialer.tls is None:
            with self._tls_lock:
                if self._dialer.tls is None:
                    self._dialer.tls = self.target.tls_context()
        return self._dialer.dial(exchange, deadline)

    def retarget(self, path: str, url: str) -> None:
        """Send every later request to `path` (`url` in full), on the same origin."""
        self.path, self.url = path, url
        self._head = self._new_head(path)

    def base_headers(self) -> dict[str, str]:
        """The headers of every request: the user's, and the forwarding proxy's credentials."""
        headers = dict(self.target.headers)
        if self._forward is not None and self._forward.authorization is not None:
            headers["Proxy-Authorization"] = self._forward.authorization  # only ever sent to the proxy
        return headers

    # -- the one request loop ----------------------------------------------------------------

    def request(self, exchange: Exchange, method: str, headers: Mapping[str, str], body: bytes | None, *,
                session_origin: Origin | None = None) -> Response:
        """Send one request on a connection of the exchange's pool and read
        the head of its answer, under the authorization flow (a refused
        request is sent again when the provider acted). The exchange then
        holds the connection and the response; `exchange.release()` gives
        them back. Socket reads are bounded by the exchange's deadline (None:
        only an abort stops them). A 307 or 308 is followed when `_follow`
        says so; to another origin, the exchange holds a connection of that
        hop's own pool until its next request, which starts at home again.
        `session_origin`: the other origin that issued the session id in
        `headers`, the only one it may be sent to after a redirect."""
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
            sock.settimeout(remaining(deadline, at_least=0.001))
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
                self.count(sent=len(body))
            response = Response(sock, deadline=deadline) if hop is None else _ForeignResponse(sock, hop, deadline)
            exchange.set_response(response)
            response.begin()
            if response.status == 407 and self._forward is not None:
                self.drain(response)
                raise self._proxy_refused()
            if response.status in (307, 308):
                followed, hop = self._follow(response, redirects, hop, sent, home, session_origin)
                if followed:
                    # Sent again, method and body kept, to the new URL (the
                    # connection given back for reuse if it can be).
                    self.done(exchange, response)
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
            self.drain(response)
            self.done(exchange, response)

    def _follow(self, response: Response, redirects: list[str], hop: _Hop | None, sent: Mapping[str, str],
                home: Pool, session_origin: Origin | None) -> tuple[bool, _Hop | None]:
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
        here = self.url if hop is None else hop.url
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
        if (self.target.scheme if hop is None else hop.scheme) == "https" and scheme == "http":
            self.drain(response)
            raise HTTPStatusError(
                f"{here} redirected to {target}, from https to http: not followed, as the request would travel "
                "unencrypted", status=response.status, body="", headers={k.lower(): v for k, v in response.headers.items()})
        same = hop is None and (scheme, host, port) == (self.target.scheme, self.target.host.strip("[]").lower(),
                                                         self.target.port)
        if not same and not self.target.follow_redirects:
            return False, hop
        redirects.append(_normal_url(here))
        if len(redirects) > MAX_REDIRECTS or _normal_url(target) in redirects:
            self.drain(response)
            raise HTTPStatusError(
                f"{self.url} redirected in a loop or more than {MAX_REDIRECTS} times (last to {location})",
                status=response.status, body="", headers={k.lower(): v for k, v in response.headers.items()})
        self.drain(response)
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        url = urllib.parse.urlunsplit((scheme, parts.netloc, parts.path or "/", parts.query, ""))
        if not same:
            log.info("following the server's redirect (%d) from %s to another origin, %s, for this request only",
                     response.status, here, url)
            return True, self._hop(url, (scheme, host, port), path, sent, home, session_origin)
        log.info("following the server's redirect (%d) from %s to %s", response.status, self.url, url)
        self.retarget(path, url)
        return True, None

    def _hop(self, url: str, origin: Origin, path: str, sent: Mapping[str, str], home: Pool,
             session_origin: Origin | None) -> _Hop:
        """Where a request goes after a redirect to another origin: a pool
        dialing that origin (through the proxy that carries requests there,
        TLS for https), its request heads, and the headers it may be sent
        with there. Credentials, cookies, the session id, `Mcp-Param-*`
        (tool arguments) and the caller's own `headers` are meant for this
        origin and never go to another."""
        target = self.target
        scheme, host, port = origin
        proxy = target.network.proxy_for(url)
        forward = proxy if proxy is not None and scheme == "http" else None
        tls = None
        if scheme == "https":
            tls = self._dialer.tls if self._dialer.tls is not None else target.tls_context()
        dialer = dialer_for(host, port, tls, target.connect_timeout, proxy, forward is not None)
        name = f"[{host}]" if ":" in host else host
        authority = name if port == (443 if scheme == "https" else 80) else f"{name}:{port}"
        form = f"{scheme}://{authority}{path}" if forward is not None else path
        own = {key.lower() for key in target.headers}
        headers = {k: v for k, v in sent.items() if not _origin_bound(k) and k.lower() not in own}
        if "Mcp-Session-Id" in sent and session_origin == origin:
            headers["Mcp-Session-Id"] = sent["Mcp-Session-Id"]  # that origin's own session
        if forward is not None and forward.authorization is not None:
            headers["Proxy-Authorization"] = forward.authorization  # only ever sent to the proxy
        head = RequestHead(form, authority, USER_AGENT, accept_encoding(target))
        return _Hop(url, origin, _Elsewhere(dialer.dial, home), head, headers)

    def _proxy_refused(self) -> ConnectError:
        """A 407 from the proxy that forwards plain-HTTP requests (an https://
        server's tunnel reports its own, see `tunnel`)."""
        proxy = self._forward
        assert proxy is not None
        return ConnectError(f"the proxy {proxy.address} {credentials_refused(proxy)} "
                            f"(HTTP 407 to a request for {self.url})")

    def _new_head(self, path: str) -> RequestHead:
        """Request heads for `path`: in absolute form when a proxy forwards them."""
        target = self.target
        form = f"{target.scheme}://{target.authority}{path}" if self._forward is not None else path
        return RequestHead(form, target.authority, USER_AGENT, accept_encoding(target))

    @staticmethod
    def origin_of(response: Response) -> Origin | None:
        """The other origin that answered (after a followed redirect); None: this one."""
        return response.origin if isinstance(response, _ForeignResponse) else None

    def status_error(self, response: Response, body: bytes, *, expired: bool = False) -> HTTPStatusError:
        """The error an answer with no message in it makes (`body`: a preview
        of its body). `expired`: the request carried a session id its
        origin issued, so a 404 says the session is gone (`SessionExpired`)."""
        status = response.status
        text = body.decode("utf-8", "replace")[:ERROR_BODY_PREVIEW]
        headers = {k.lower(): v for k, v in response.headers.items()}
        foreign = response.url if isinstance(response, _ForeignResponse) else None
        where = f"{foreign or self.url} answered HTTP {status}"
        location = response.headers.get("location")
        if 300 <= status < 400 and location:
            if status not in (307, 308):
                why = "only 307 and 308 are followed (they keep the method and body)"
            elif not self.target.follow_redirects:
                why = "307 and 308 to another origin are followed only with follow_redirects=True"
            else:
                why = "its Location is not an http(s) URL"
            where += f" (a redirect to {location} that was not followed: {why})"
        elif status == 101:
            where += (" (Switching Protocols, an upgrade the client did not ask for; the connection was closed: "
                      "check that the URL is the server's MCP endpoint, not a WebSocket one)")
        summary = one_line(text, html="html" in headers.get("content-type", "").lower())
        detail = f": {summary}" if summary else ""
        if status in (401, 403):
            return AuthenticationError(f"{where} (authentication required or refused){detail}",
                                       status=status, body=text, headers=headers)
        if expired and (status == 404 or (status == 400 and session_unknown(text))):
            return SessionExpired(f"{where} for the session{detail if status == 400 else ''}", status=status,
                                  body=text, headers=headers)
        return HTTPStatusError(f"{where}{detail}", status=status, body=text, headers=headers)

    # -- bodies ------------------------------------------------------------------------------------

    def read_body(self, response: Response, limit: int, *, truncate: bool = False) -> bytes:
        """The body, at most `limit` bytes once decoded (`truncate`: a preview
        cut at `limit`, else `MessageTooLarge` beyond it)."""
        try:
            decoder = decoder_for(response)
        except UnsupportedEncoding as exc:
            if not truncate:
                response.shutdown()
                raise InvalidMessage(f"the server answered with {exc}") from None
            decoder = None  # the preview of an error body: shown as it came
        if decoder is not None:
            return self._read_decoded(response, decoder, limit, truncate=truncate)
        data = _read_body_bytes(response, limit, truncate=truncate)
        self.count(received=len(data))
        return data

    def _read_decoded(self, response: Response, decoder: Decoder, limit: int, *, truncate: bool) -> bytes:
        """A compressed body, decoded as it arrives. `limit` bounds the decoded
        size: a decompression bomb stops at `limit` plus one piece, never
        expanded further. The compressed size is bounded too (`raw_bound`),
        and it is what counts as received (bytes on the wire)."""
        raw_limit = raw_bound(limit)
        length = response.length  # the framing's, not the header's (see `_read_body_bytes`)
        if not truncate and length is not None and length > raw_limit:
            response.shutdown()
            raise MessageTooLarge(f"the response is {length} bytes compressed, more than max_response_bytes={limit} "
                                  "can need", limit=limit)
        parts: list[bytes] = []
        size = raw = 0
        try:
            while True:
                chunk = response.read1(READ_CHUNK)
                if not chunk:
                    if not truncate:
                        decoder.finish()
                    return b"".join(parts)
                raw += len(chunk)
                self.count(received=len(chunk))
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

    @staticmethod
    def drain(response: Response) -> None:
        """Read what is left of a small body so the connection can be reused."""
        try:
            response.read(ERROR_BODY_PREVIEW * 8)
        except (OSError, ValueError):  # ValueError: http11.ResponseError
            response.will_close = True

    @staticmethod
    def done(exchange: Exchange, response: Response) -> None:
        """Give the exchange's connection back: for reuse only when the
        answer was read to its end and the server keeps the connection."""
        exchange.release(reusable=response.isclosed() and not response.will_close)


def _read_body_bytes(response: Response, limit: int, *, truncate: bool = False) -> bytes:
    # The length the body is framed by, not the Content-Length header: a
    # chunked body overrides the header (RFC 9112 §6.3), which then means
    # nothing (the reader reads the chunks; the connection is not reused).
    length = response.length
    if not truncate and length is not None and length > limit:
        response.shutdown()
        raise MessageTooLarge(
            f"the response is {length} bytes, over max_response_bytes={limit}", limit=limit
        )
    if not truncate and length is not None:
        # The common answer: its length is known and within the limit, so
        # read exactly that much, in one call when the socket allows.
        # `read(n)` blocks until n bytes or the body's end (cut short: ResponseError).
        return response.read(length)
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(READ_CHUNK)
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


# -- redirects to another origin --------------------------------------------------------------------

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

    def __init__(self, url: str, origin: Origin, pool: _Elsewhere, head: RequestHead,
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


# -- codings and event streams --------------------------------------------------------------------


#: What a 400 says when the server does not know the session a request
#: carried: the spec's answer is 404, but the TypeScript SDK's example
#: servers, which many deployed servers copy, answer 400 "Bad Request: No
#: valid session ID provided" (and others "Session not found", "Invalid or
#: expired session"). Only phrases about the session itself: "Unknown tool:
#: create_session" or "session_name must be a string" are the server's errors.
_SESSION_UNKNOWN = re.compile(
    r"no valid session|session(?: id)? not found|\b(?:unknown|invalid|expired)(?: or expired)? session\b"
    r"|\bsession (?:has )?expired|\bsession (?:id )?(?:is )?(?:unknown|invalid)\b", re.IGNORECASE)


def session_unknown(body: str) -> bool:
    """Whether an error body says the server does not know the session."""
    return _SESSION_UNKNOWN.search(body[:ERROR_BODY_PREVIEW]) is not None


def accept_encoding(target: HTTP) -> str:
    # Always offered when on, whatever max_response_bytes: the decoded size
    # is what the limit bounds, so no limit makes a compressed answer riskier.
    return ACCEPT_ENCODING if target.compress else "identity"


def sse_events(parser: SSEParser, decoder: Decoder | None, chunk: bytes) -> Iterable[Event]:
    """The events a chunk of a stream completes (b"": its end). A compressed
    stream is decoded before the parser, a piece at a time and only as the
    events are taken, so the parser's event limit bounds it as it bounds a
    plain one."""
    if not chunk:
        return parser.close()
    if decoder is None:
        return parser.feed(chunk)
    return (event for piece in decoder.feed(chunk) for event in parser.feed(piece))


def stream_decoder(response: Response) -> Decoder | None:
    """`decoder_for` an SSE stream: a coding the client does not decode is
    the server's fault (`InvalidMessage`), and the stream is not read on."""
    try:
        return decoder_for(response)
    except UnsupportedEncoding as exc:
        response.shutdown()
        raise InvalidMessage(f"the server answered with {exc}") from None


def decoder_for(response: Response) -> Decoder | None:
    """The decoder of a response's body (None: identity); `UnsupportedEncoding`
    for a coding the client does not decode."""
    header = response.headers.get("content-encoding")
    coding = None if header is None else coding_of(header)
    return None if coding is None else Decoder(coding, READ_CHUNK)
