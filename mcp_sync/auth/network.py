"""Which addresses a server may make the client reach while authorizing.

An MCP server's 401 challenge and metadata name URLs the client then
fetches or hands to a browser: the protected resource metadata URL, the
authorization servers, and their endpoints. Without a rule, a remote
server could aim the client at the user's own machine or network (a
server-side request forgery: an admin page on 127.0.0.1, a router on
192.168.0.1, the cloud metadata service on 169.254.169.254).

The rule: every address a named URL resolves to is classified as
loopback, private (RFC 1918, 100.64.0.0/10, IPv6 unique-local), link-local
(169.254.0.0/16, fe80::/10) or public. A public address may always be
named; any other only by a server of the same class: a loopback MCP
server may name loopback endpoints, a server on the private network
private ones. Endpoints in an authorization server's metadata are judged
against that authorization server (an authorization server you configured
yourself with `authorization_server=` is trusted like the MCP server).
`allow_private_network=True` on a provider turns the rule off.

Resolved addresses are checked, not only literal ones, with
`resolve_host` (`socket.getaddrinfo`). A host that cannot be resolved is
refused unless a proxy carries the request (the proxy resolves it, in its
own network): the proxy of the client's network path (`proxy_for`), by
default the environment's. The check runs just before the
URL is used; a DNS server that answers differently a moment later (DNS
rebinding) is not caught by it.

Example::

    >>> address_class("169.254.169.254")
    'link-local'
    >>> policy = NetworkPolicy(resolver=lambda host, port: ["93.184.216.34"])
    >>> policy.check("https://auth.example.com", named_by="http://127.0.0.1:8000/mcp", what="the issuer")
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from ..errors import AuthorizationError, McpError
from ..transports.http_network import NetworkSettings

__all__ = ["EndpointNotAllowed", "NetworkPolicy", "address_class", "resolve_host",
           "LOOPBACK", "PRIVATE", "LINK_LOCAL", "PUBLIC"]

LOOPBACK, PRIVATE, LINK_LOCAL, PUBLIC = "loopback", "private", "link-local", "public"

#: A resolver: (host, port) -> the IP addresses it stands for, as strings.
Resolver = Callable[[str, "int | None"], Sequence[str]]

_NETWORKS = [
    # The unspecified addresses reach this machine when connected to.
    (LOOPBACK, ("127.0.0.0/8", "::1/128", "0.0.0.0/8", "::/128")),
    (LINK_LOCAL, ("169.254.0.0/16", "fe80::/10")),
    # 100.64.0.0/10 (carrier-grade NAT, also overlay networks) and the
    # deprecated site-local fec0::/10 are as internal as RFC 1918.
    (PRIVATE, ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7", "fec0::/10")),
]
_CLASSES = [(kind, [ipaddress.ip_network(n) for n in nets]) for kind, nets in _NETWORKS]


class EndpointNotAllowed(AuthorizationError):
    """A server named a URL on an address it may not make the client reach
    (see `mcp_sync.auth.network`). Nothing was sent to it.

    `url` is the URL, `address` the address it resolved to,
    `address_class` that address's class ("loopback", "private",
    "link-local"), `named_by` the server that named it.

    Attributes:
        url (str): The URL that was refused.
        address (str): The IP address it resolved to that is not allowed.
        address_class (str): That address's class: ``"loopback"``,
            ``"private"`` or ``"link-local"``.
        named_by (str): The URL of the server (MCP or authorization server)
            whose challenge or metadata named it.
    """

    def __init__(self, message: str, *, url: str, address: str, address_class: str, named_by: str) -> None:
        self.url = url
        self.address = address
        self.address_class = address_class
        self.named_by = named_by
        super().__init__(message)


def address_class(address: str) -> str:
    """The class of one IP address: "loopback", "private", "link-local" or "public".

    An IPv4-mapped IPv6 address is classed as the IPv4 address it maps
    (the kernel connects to that one); an IPv6 zone (`%eth0`) is ignored.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, networks in _CLASSES:
        if any(ip in network for network in networks):
            return kind
    return PUBLIC


def resolve_host(host: str, port: int | None) -> list[str]:
    """The addresses `host` resolves to (what a connection may go to)."""
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})


def _host_port(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        raise AuthorizationError(f"not an absolute URL: {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise AuthorizationError(f"not a valid URL: {url!r}") from None
    return host, port if port is not None else {"https": 443, "http": 80}.get(parts.scheme)


class NetworkPolicy:
    """The rule of this module for one token provider.

    `check(url, named_by=..., what=...)` raises `EndpointNotAllowed` when
    the server at `named_by` may not make the client reach `url`.
    `resolver` replaces `resolve_host` (tests inject one). `proxy_for`
    (url -> a proxy or None) says whether a proxy carries a request, so
    a name only it can resolve is allowed (default: the environment's).
    """

    def __init__(self, *, allow_private_network: bool = False, resolver: Resolver | None = None,
                 proxy_for: Callable[[str], object] | None = None) -> None:
        self.allow_private_network = allow_private_network
        self._resolver = resolver
        self.proxy_for = proxy_for if proxy_for is not None else NetworkSettings().proxy_for

    def _proxied(self, url: str) -> bool:
        try:
            return self.proxy_for(url) is not None
        except McpError:
            return False  # a proxy the client cannot use carries nothing

    def _addresses(self, host: str, port: int | None) -> list[str]:
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            return [host]
        except ValueError:
            pass
        resolve = self._resolver or resolve_host  # looked up now, so tests may replace it
        return list(resolve(host, port))

    def server_class(self, url: str) -> str:
        """The class of the server at `url`: its addresses' class when they
        all share one, else (mixed, or not resolvable) "public", the class
        allowed the least."""
        host, port = _host_port(url)
        try:
            kinds = {address_class(a) for a in self._addresses(host, port)}
        except (OSError, ValueError):
            return PUBLIC
        return kinds.pop() if len(kinds) == 1 else PUBLIC

    def check(self, url: str, *, named_by: str, what: str) -> None:
        if self.allow_private_network:
            return
        host, port = _host_port(url)
        try:
            addresses = self._addresses(host, port)
        except (OSError, UnicodeError) as exc:
            if self._proxied(url):
                return  # the proxy resolves the name, in its own network
            raise AuthorizationError(f"cannot resolve the host of {what} {url!r}: {exc}") from None
        server = None
        for address in addresses:
            kind = address_class(address)
            if kind == PUBLIC:
                continue
            if server is None:
                server = self.server_class(named_by)
            if kind != server:
                raise EndpointNotAllowed(
                    f"refusing {what} {url!r}: it is on a {kind} address ({address}), and {named_by}, which "
                    f"named it, is not. A server may send the client only to public addresses and to addresses of "
                    f"its own kind; to allow it anyway, pass allow_private_network=True to the token provider",
                    url=url, address=address, address_class=kind, named_by=named_by,
                )
