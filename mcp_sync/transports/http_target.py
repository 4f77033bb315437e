"""The HTTP targets: `HTTP` (a Streamable HTTP server and the options to
reach it) and `SSE` (the same, on the old HTTP+SSE transport).

Owns: checking the options once, when a target is made (a bad one raises
`TypeError`/`ValueError` before anything is sent), the server's identity
(`server_key`), the TLS and proxy settings (`network`), and which
transport a target opens, including the fallback from Streamable HTTP to
HTTP+SSE. It sits above both transports (`http`, `sse`), which know a
target only by the attributes they read.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Hashable, Mapping
from typing import Any

from urllib3.util import parse_url

from ..auth import TokenProvider, as_token_provider
from ..errors import HTTPStatusError, McpError, copy_error
from ..options import check_flag
from .http_network import NetworkSettings, check_tls_options, parse_proxy
from ..protocol.headers import check_user_headers
from .base import Target, Transport
from .http import HTTPTransport
from .sse import SSETransport

#: A URL's user information (`//user:password@`), to keep out of messages.
_USERINFO = re.compile(r"//[^/?#@]*@")
#: The default of `max_response_bytes`.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024


def usual_endpoints(url: str) -> tuple[str, str]:
    """Where servers usually serve Streamable HTTP and HTTP+SSE, for a
    user who gave `url`: beside its last path segment when that is `mcp`
    or `sse` (a server mounted under a prefix), else at the root. Neither
    the query nor any user name and password of `url` is repeated.

    Example::

        >>> usual_endpoints("http://127.0.0.1:8000/api/sse")
        ('http://127.0.0.1:8000/api/mcp', 'http://127.0.0.1:8000/api/sse')

    Args:
        url: An `http://` or `https://` URL.

    Returns:
        The (Streamable HTTP, HTTP+SSE) URLs.
    """
    origin, path = _origin_and_path(url)
    parent, _, last = path.rpartition("/")
    prefix = parent if last in ("mcp", "sse") else ""
    return f"{origin}{prefix}/mcp", f"{origin}{prefix}/sse"


def usual_streamable_endpoint(target: object) -> str | None:
    """Where servers usually serve Streamable HTTP, for an `HTTP` target
    whose URL is elsewhere (None: not an `HTTP` target, or its URL is
    that place already).

    Args:
        target: The target the client was connecting to.

    Returns:
        The usual URL (`usual_endpoints`), or None.
    """
    if not isinstance(target, HTTP):
        return None
    streamable, _ = usual_endpoints(target.url)
    return None if "".join(_origin_and_path(target.url)) == streamable else streamable


def _origin_and_path(url: str) -> tuple[str, str]:
    """`url`'s scheme and host (no user name or password) and its path
    (no trailing slash, no query)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}", parts.path.rstrip("/")


def explain_not_found(target: object, error: BaseException) -> BaseException:
    """`error`, or a copy that says where servers usually listen when it is
    an HTTP target's 404 before any session and nothing else answered
    either (the POST, and the HTTP+SSE fallback's GET when it tried one, or
    an `SSE` target's GET): nothing serves that path, most often a mistyped
    or missing `/mcp`. A fallback that failed otherwise (a 401: something
    is there) keeps its error as it is. The copy is new, so an error
    object another thread holds is never changed.

    Args:
        target: The target the client was connecting to.
        error: What its first connection failed with.

    Returns:
        The error to raise.
    """
    if type(error) is not HTTPStatusError or error.status != 404 or not isinstance(target, HTTP):
        return error
    fallback = error.__cause__  # (set when the HTTP+SSE fallback was tried and failed)
    if fallback is not None and not (type(fallback) is HTTPStatusError and fallback.status == 404):
        return error
    streamable, sse = usual_endpoints(target.url)
    given = "".join(_origin_and_path(target.url))  # (as `usual_endpoints` writes them)
    slashed = parse_url(target.url).path or ""
    if given in (streamable, sse) and slashed.endswith("/") and slashed != "/":
        said = (f"; nothing serves MCP at that path: try it without the trailing slash, {given} (servers tell "
                "the two apart)")
    elif given in (streamable, sse):
        meant, other, other_url = (("Streamable HTTP", "HTTP+SSE", sse) if given == streamable
                                   else ("HTTP+SSE", "Streamable HTTP", streamable))
        said = (f"; nothing serves MCP there, although it is the usual path for {meant} (and {other_url} for "
                f"{other}): the server may be mounted elsewhere, or another part of the URL may be wrong (its "
                "documentation or start-up log says where it listens)")
    else:
        said = (f"; nothing serves MCP at that path: servers usually serve Streamable HTTP at {streamable} and "
                f"HTTP+SSE at {sse} (the server's documentation or start-up log says which)")
    better = copy_error(error)
    better.args = (f"{error}{said}",)
    return better


def _basic_auth_from_url(parsed: Any, headers: Mapping[str, str] | None, auth: Any) -> tuple[dict[str, str], str]:
    """The headers with `Authorization: Basic ...` made from the URL's user
    name and password (percent-decoded), and the URL without them. Raises `ValueError` when other credentials are given too
    (the message never holds the password)."""
    import base64
    from urllib.parse import unquote

    given = dict(headers or {})
    if auth is not None or any(isinstance(name, str) and name.lower() == "authorization" for name in given):
        raise ValueError("the URL holds a user name and password, and auth= or an Authorization header is given "
                         "too: give the credentials one way")
    user, _, password = parsed.auth.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return {**given, "Authorization": f"Basic {token}"}, parsed._replace(auth=None).url


class HTTP(Target):
    """Target a Streamable HTTP server: `connect(HTTP(url, ...))`, or pass the
    URL string and these options straight to `connect()`.

    Example::

        client = mcp_sync.connect(HTTP("https://example.com/mcp",
                                       headers={"X-Tenant": "acme"}, auth="my-token",
                                       verify="/etc/ssl/internal-ca.pem"))

    Each option is also kept as an attribute of the same name.

    Args:
        url: The server's `http://` or `https://` URL.
        headers: Extra headers for every request (the transport's own headers,
            and values with CR, LF or NUL, are refused).
        auth: A bearer token string, a function returning one, or a token
            provider (see `mcp_sync.auth`); refreshed once after a 401.
        verify: True (system CAs, or the bundle `REQUESTS_CA_BUNDLE` or
            `SSL_CERT_FILE` names), False (no verification), a CA bundle path (a
            file or a directory), or an `ssl.SSLContext` used as is (for example
            `truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)` for the system's
            trust store).
        cert: A client certificate for mutual TLS: a PEM file holding the
            certificate and its key, or a (certificate, key) pair of paths.
        connect_timeout: Seconds to open a TCP/TLS connection (and a
            proxy's tunnel).
        max_response_bytes: The most one JSON body or one SSE event may hold.
        pool_size: The most requests in flight at once (each holds a
            keep-alive connection); one-way messages have a budget of the same
            size of their own, and long-lived streams (`listen()`, the session's
            GET stream) get connections outside both.
        max_resume_attempts: Initialize era, how often a broken SSE stream is
            resumed with `Last-Event-ID`.
        session_close_timeout: The longest `close()` waits for the session DELETE.
        compress: Ask for gzip or deflate answers (`Accept-Encoding`); they
            are decoded as they arrive, the decoded size bounded by
            `max_response_bytes`. False asks for identity.
        follow_redirects: Also follow a 307 or 308 to another origin (never
            from https to http), without the credentials, cookies, session id,
            `Mcp-Param-*` and `headers` meant for this one. Same-origin ones are
            always followed.
        proxy: An `http://[user:password@]host:port` forward proxy for every
            request (https:// servers through `CONNECT`, TLS end to end). None:
            the proxy the environment names, as `requests` reads it
            (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, lower case
            too), when `trust_env`.
        trust_env: Read the proxy and the CA bundle (`REQUESTS_CA_BUNDLE`,
            `SSL_CERT_FILE`) from the environment. False with `proxy=None`:
            always direct.
        sse_fallback: When the server refuses the POST of `initialize` with
            400, 404 or 405, try the old HTTP+SSE transport at the same URL (a
            GET expecting an `endpoint` event) and use it if the server offers it
            (see `SSE`). False: the status error stands.

    The URL and its parts are kept as attributes:

    Attributes:
        url (str): The URL as given.
        scheme (str): `"http"` or `"https"`.
        host (str): The host, as in the URL (an IPv6 address keeps its brackets).
        port (int): The URL's port, else 443 for https and 80 for http.
        path (str): The path and query requests go to (`"/"` when the URL has no
            path).

    Raises:
        TypeError: `url` is not a string, `verify` or `cert` is of a kind
            not listed above, or a flag (`trust_env`, `compress`,
            `follow_redirects`, `sse_fallback`) is not a bool.
        ValueError: Not an http(s) URL, a header the transport refuses, a
            CA bundle or certificate file that does not exist, a proxy URL
            that is not `http://host:port`, or a size, count or timeout
            that is not positive.
    """

    kind = "streamable-http"
    """Always "streamable-http" (see `Target.kind` and `Transport.kind`)."""

    def fallback(self, refusal: McpError | None = None) -> Target | None:
        """The HTTP+SSE transport at the same URL, with the same options,
        when `sse_fallback` allows it (see `Target.fallback`).

        Args:
            refusal: The error the first exchange failed with (unused: any
                refusal falls back).

        Returns:
            The `SSE` target, or None when `sse_fallback` is False.
        """
        if not self.sse_fallback:
            return None
        return SSE.from_http(self)

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
        try:
            parsed = parse_url(url)
        except ValueError:  # (urllib3's LocationParseError: its message quotes the URL, password and all)
            raise ValueError(f"not an http(s) URL: {_USERINFO.sub('//***@', url)!r}") from None
        if parsed.auth is not None:
            # `user:password@`, as requests and httpx read it: Basic auth,
            # and a URL without it for every message and repr.
            headers, url = _basic_auth_from_url(parsed, headers, auth)
            parsed = parse_url(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not an http(s) URL: {url!r}")
        if parsed.port == 0:
            raise ValueError(f"port 0 in {url!r}: the URL needs the port the server listens on")
        if not isinstance(max_response_bytes, int) or isinstance(max_response_bytes, bool) or max_response_bytes < 1:
            raise ValueError("max_response_bytes must be a positive integer")
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise ValueError("pool_size must be a positive integer")
        if not isinstance(max_resume_attempts, int) or isinstance(max_resume_attempts, bool) or max_resume_attempts < 0:
            raise ValueError(f"max_resume_attempts must be an integer, 0 or more, not {max_resume_attempts!r}")
        for name, value in (("connect_timeout", connect_timeout), ("session_close_timeout", session_close_timeout)):
            # Finite (a socket's timeout cannot be infinite) and not NaN.
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"{name} must be a positive, finite number of seconds, not {value!r}")
        verify, cert = check_tls_options(verify, cert)
        check_flag("trust_env", trust_env)
        proxy_url = None if proxy is None else parse_proxy(proxy, source="proxy")
        #: The network path (TLS, proxy), shared with the token provider.
        self.network = NetworkSettings(verify=verify, cert=cert, proxy=proxy_url, trust_env=trust_env)
        self.url = url
        self.scheme = parsed.scheme
        self.host = parsed.host
        self.port = parsed.port if parsed.port is not None else (443 if parsed.scheme == "https" else 80)
        self.path = parsed.request_uri or "/"
        self.headers = check_user_headers({} if headers is None else headers)
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
        check_flag("compress", compress)
        check_flag("follow_redirects", follow_redirects)
        self.compress = compress
        self.follow_redirects = follow_redirects
        check_flag("sse_fallback", sse_fallback)
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


class SSE(HTTP):
    """Target a server on the old HTTP+SSE transport (protocol 2024-11-05):
    `connect(SSE("https://example.com/sse"))`.

    It takes the same options as `HTTP` (`headers`, `auth`, `verify`,
    `cert`, `connect_timeout`, `max_response_bytes`, `pool_size`, ...), with
    the same meaning; `connect_timeout` also bounds the wait for the
    stream's `endpoint` event, and `max_response_bytes` bounds each event.
    A plain URL given to `connect()` tries Streamable HTTP first and falls
    back to this transport by itself, so `SSE(...)` is only needed to skip
    that first attempt. Only initialize-era protocol versions travel over it.

    Example::

        client = mcp_sync.connect(SSE("http://127.0.0.1:8000/sse", auth="my-token"))
        assert client.transport_kind == "sse"
    """

    kind = "sse"
    """Always "sse" (see `Target.kind` and `Transport.kind`)."""

    def fallback(self, refusal: McpError | None = None) -> Target | None:
        """None: the HTTP+SSE transport is the last resort.

        Args:
            refusal: The error the first exchange failed with (unused).

        Returns:
            Always None.
        """
        return None

    @classmethod
    def from_http(cls, target: HTTP) -> SSE:
        """The same server and options as `target`, over HTTP+SSE (what the
        client's automatic fallback switches to). The options are taken as
        they are, already checked, with nothing re-attached.

        Args:
            target: The Streamable HTTP target to copy.

        Returns:
            A new `SSE` target with `target`'s URL and options.
        """
        sse = cls.__new__(cls)
        sse.__dict__.update(vars(target))
        sse.automatic = True
        return sse

    #: Made by the client's fallback from an `HTTP` target (`from_http`),
    #: not given by the user.
    automatic = False

    def open(self) -> Transport:
        """A new HTTP+SSE transport to this server (not yet started: its
        `start()` opens the event stream)."""
        return SSETransport(self)

    def __repr__(self) -> str:
        return f"SSE({self.url!r})"
