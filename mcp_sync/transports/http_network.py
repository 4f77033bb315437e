"""How the client reaches an HTTP server: TLS settings and the proxy.

Owns: `NetworkSettings`, the one description of a client's network path
(`verify`, `cert`, `proxy`, `trust_env`), which the HTTP transport and the
OAuth client of that transport both use, so one client has one network path;
the choice of a proxy for a URL (an explicit one, else the environment's
`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY`, lower case too,
decided by the very functions `requests` uses, loopback included); the
client TLS context; and `ProxyURL`, which keeps proxy credentials out of every
repr, message and log line.

Must not know: sockets, HTTP framing or MCP. Reading the environment and CA
files is all the IO here.

Example::

    >>> settings = NetworkSettings(proxy=parse_proxy("http://user:pw@proxy.corp:3128"), trust_env=False)
    >>> settings.proxy_for("https://mcp.example.com/mcp")
    ProxyURL('http://proxy.corp:3128', credentials=<redacted>)
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
from typing import Any
from urllib.parse import unquote

import attrs
import requests.utils
from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url
from urllib3.util.ssl_ import create_urllib3_context

from ..errors import ConnectError

__all__ = ["NetworkSettings", "ProxyURL", "parse_proxy", "check_tls_options", "environment_ca_bundle"]


@attrs.frozen(repr=False)
class ProxyURL:
    """An `http://` forward proxy: where it is and, maybe, its credentials.

    `str()` and `repr()` never show the credentials; `authorization` is the
    `Proxy-Authorization` value (None without credentials).
    """

    host: str
    port: int
    username: str | None = None
    password: str | None = None

    @property
    def address(self) -> str:
        """"host:port", for messages: what names the proxy to a person."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def authorization(self) -> str | None:
        if self.username is None:
            return None
        pair = f"{self.username}:{self.password or ''}"
        try:
            raw = pair.encode("latin-1")  # what requests sends, for the same proxy
        except UnicodeEncodeError:
            raw = pair.encode("utf-8")
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def __str__(self) -> str:
        return f"http://{self.address}"

    def __repr__(self) -> str:
        credentials = ", credentials=<redacted>" if self.username is not None else ""
        return f"ProxyURL({str(self)!r}{credentials})"


def parse_proxy(url: str, *, source: str = "proxy") -> ProxyURL:
    """An `http://[user:password@]host[:port]` proxy URL (no scheme: http, as
    `requests` reads it). Raises ValueError naming `source` (never the
    credentials) for anything else: `https://` and SOCKS proxies are not
    supported."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{source} must be a proxy URL such as 'http://proxy.example.com:3128'")
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    scheme = text.split("://", 1)[0].lower()
    if scheme != "http":
        raise ValueError(f"{source}: {scheme}:// proxies are not supported; use an http:// proxy URL "
                         "(an https:// server is still reached with TLS end to end, through CONNECT)")
    try:
        parsed = parse_url(text)
    except LocationParseError:
        raise ValueError(f"{source} is not a valid proxy URL") from None
    if not parsed.host:
        raise ValueError(f"{source} is not a valid proxy URL: it names no host")
    if parsed.path not in (None, "", "/") or parsed.query or parsed.fragment:
        raise ValueError(f"{source} must be only a scheme, a host and a port (no path)")
    username = password = None
    if parsed.auth:
        user, _, secret = parsed.auth.partition(":")
        username, password = unquote(user), unquote(secret)
    return ProxyURL(parsed.host.strip("[]"), parsed.port or 80, username, password)


def environment_ca_bundle() -> str | None:
    """The CA bundle the environment names, as `requests` (REQUESTS_CA_BUNDLE)
    and OpenSSL (SSL_CERT_FILE) read it, so a deployment configured for
    either (a corporate CA, a proxy that intercepts TLS) works unchanged."""
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(name)
        if value:
            return value
    return None


def check_tls_options(verify: Any, cert: Any) -> tuple[bool | str | ssl.SSLContext, str | tuple[str, str] | None]:
    """`verify` and `cert` checked and normalised (paths as `str`), so a
    mistake fails at construction rather than at the first request."""
    if isinstance(verify, os.PathLike):
        verify = os.fspath(verify)
    if not isinstance(verify, (bool, str, ssl.SSLContext)):
        raise TypeError("verify must be True, False, a CA bundle path or an ssl.SSLContext")
    if isinstance(verify, str) and not os.path.exists(verify):
        raise ValueError(f"verify names a CA bundle that does not exist: {verify!r}")
    if cert is None:
        return verify, None
    if isinstance(verify, ssl.SSLContext):
        # Loading the certificate would change the caller's context behind its back.
        raise ValueError("cert= cannot be combined with an ssl.SSLContext: load the certificate into "
                         "the context (context.load_cert_chain(...))")
    if isinstance(cert, (str, os.PathLike)):
        paths: tuple[str, ...] = (os.fspath(cert),)
    elif isinstance(cert, tuple) and len(cert) == 2 and all(isinstance(p, (str, os.PathLike)) for p in cert):
        paths = (os.fspath(cert[0]), os.fspath(cert[1]))
    else:
        raise TypeError("cert must be a PEM file path or a (certificate, key) pair of paths")
    for path in paths:
        if not os.path.isfile(path):
            raise ValueError(f"cert names a file that does not exist: {path!r}")
    return verify, paths[0] if len(paths) == 1 else (paths[0], paths[1])


@attrs.frozen(repr=False)
class NetworkSettings:
    """One client's network path: TLS (`verify`, `cert`), the proxy, and
    whether the environment may add to them (`trust_env`). Built by the
    `HTTP` target from its options and handed to its token provider
    (`use_network()`), so the OAuth requests take the same path.

    - `verify`: True (system CAs, or the bundle REQUESTS_CA_BUNDLE or
      SSL_CERT_FILE names when `trust_env`), False, a CA bundle path, or an
      `ssl.SSLContext` used as is.
    - `cert`: a client certificate (a PEM path, or a (certificate, key) pair).
    - `proxy`: an explicit proxy, used for every request; None: the
      environment's, when `trust_env`; else none.
    """

    verify: bool | str | ssl.SSLContext = True
    cert: str | tuple[str, str] | None = None
    proxy: ProxyURL | None = None
    trust_env: bool = True

    def proxy_for(self, url: str) -> ProxyURL | None:
        """The proxy that carries requests to `url`, or None (direct).
        Raises `ConnectError` when the environment names a proxy this client
        cannot use."""
        if self.proxy is not None:
            return self.proxy
        if not self.trust_env:
            return None
        # requests' own functions: NO_PROXY (hosts, domains, CIDR ranges,
        # host:port) and the per-scheme choice exactly as for requests.
        chosen = requests.utils.select_proxy(url, requests.utils.get_environ_proxies(url))
        if not chosen:
            return None
        try:
            return parse_proxy(chosen, source="the proxy the environment names (HTTPS_PROXY, HTTP_PROXY or ALL_PROXY)")
        except ValueError as exc:
            raise ConnectError(f"cannot reach {url}: {exc}") from None

    def tls_context(self) -> ssl.SSLContext:
        """The client TLS context: the caller's `ssl.SSLContext` as is, or
        one with urllib3's defaults and these options (a new one per call)."""
        if isinstance(self.verify, ssl.SSLContext):
            return self.verify  # the caller's trust decisions, untouched
        verify = self.verify is not False
        context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE)
        if verify:
            bundle = self.verify if isinstance(self.verify, str) else (
                environment_ca_bundle() if self.trust_env else None)
            if bundle is None:
                context.load_default_certs()
            elif os.path.isdir(bundle):
                context.load_verify_locations(capath=bundle)
            else:
                context.load_verify_locations(cafile=bundle)
            context.check_hostname = True
        if self.cert is not None:
            cert_file, key_file = (self.cert, None) if isinstance(self.cert, str) else self.cert
            context.load_cert_chain(cert_file, key_file)
        with contextlib.suppress(NotImplementedError):
            context.set_alpn_protocols(["http/1.1"])
        return context

    def __repr__(self) -> str:
        verify = "<SSLContext>" if isinstance(self.verify, ssl.SSLContext) else repr(self.verify)
        return (f"NetworkSettings(verify={verify}, cert={self.cert!r}, proxy={self.proxy!r}, "
                f"trust_env={self.trust_env!r})")
