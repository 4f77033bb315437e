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

A resolution takes at most what the request it precedes may take (the
provider's `timeout`, or less when its `authorization_timeout` has less
left: `time_left`): the resolver runs on a thread of
`mcp_sync.transports.resolve`, and a name that has not resolved by then is
refused like one that cannot be (see that module for the bound on the
threads a hanging resolver holds).

Example::

    >>> address_class("169.254.169.254")
    'link-local'
    >>> policy = NetworkPolicy(resolver=lambda host, port: ["93.184.216.34"])
    >>> policy.check("https://auth.example.com", named_by="http://127.0.0.1:8000/mcp", what="the issuer")
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from ..errors import AuthorizationError, McpError
from ..transports import resolve as _resolve
from ..transports.http_network import NetworkSettings

__all__ = ["EndpointNotAllowed", "NetworkPolicy", "address_class", "resolve_host",
           "LOOPBACK", "PRIVATE", "LINK_LOCAL", "PUBLIC"]

LOOPBACK, PRIVATE, LINK_LOCAL, PUBLIC = "loopback", "private", "link-local", "public"

#: A resolver: (host, port) -> the IP addresses it stands for, as strings.
Resolver = Callable[[str, "int | None"], Sequence[str]]

#: The time a step may take now: given the phrase for what was not done,
#: (seconds, why that many: None for the provider's own `timeout`, else
#: the reason to show), or AuthorizationError when no time is left.
TimeLeft = Callable[[str], "tuple[float, str | None]"]

#: How long a resolution may take when the policy is given no `time_left`
#: (the providers' default `timeout`).
RESOLVE_TIMEOUT = 30.0

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


class NotResolvedInTime(AuthorizationError):
    """A name a server named did not resolve within the time allowed: the
    system's resolver is not answering. Nothing was sent to it. (Raised as
    an `AuthorizationError`; its own class lets discovery stop at once: the
    next well-known URL would wait for the same resolver.)"""


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
    """The addresses `host` resolves to (what a connection may go to), in
    the resolver's order. Blocks for as long as the resolver takes: the
    policy runs it within a deadline."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


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
    `time_left` bounds the resolutions of one check (default:
    `RESOLVE_TIMEOUT` seconds); a provider passes its HTTP client's
    `allowance`, so a check takes no longer than the request after it may.
    """

    def __init__(self, *, allow_private_network: bool = False, resolver: Resolver | None = None,
                 proxy_for: Callable[[str], object] | None = None, time_left: TimeLeft | None = None) -> None:
        self.allow_private_network = allow_private_network
        self._resolver = resolver
        self.proxy_for = proxy_for if proxy_for is not None else NetworkSettings().proxy_for
        self._time_left: TimeLeft = time_left if time_left is not None else (lambda what: (RESOLVE_TIMEOUT, None))

    def _proxied(self, url: str) -> bool:
        try:
            return self.proxy_for(url) is not None
        except McpError:
            return False  # a proxy the client cannot use carries nothing

    def _addresses(self, host: str, port: int | None, deadline: float) -> list[str]:
        """`host`'s addresses by `deadline`, else `_resolve.ResolutionTimeout`
        (an OSError, like the resolver's own failures)."""
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            return [host]
        except ValueError:
            pass
        resolve = self._resolver or resolve_host  # looked up now, so tests may replace it
        # Keyed by the resolver too: a lookup under way is shared only by
        # callers that would have asked the same resolver.
        return _resolve.within(("policy", resolve, host, port), lambda: list(resolve(host, port)), deadline, host)

    def _deadline(self, not_done: str) -> tuple[float, str]:
        """The deadline of one check's resolutions, and how to say it."""
        seconds, why = self._time_left(not_done)
        return time.monotonic() + seconds, why or f"{seconds:g} s (the token provider's timeout)"

    def server_class(self, url: str) -> str:
        """The class of the server at `url`: its addresses' class when they
        all share one, else (mixed, or not resolvable) "public", the class
        allowed the least. Raises `AuthorizationError` when its name does
        not resolve in the time allowed."""
        deadline, limit = self._deadline(f"the host of {url!r} was not resolved")
        return self._server_class(url, deadline, limit)

    def _server_class(self, url: str, deadline: float, limit: str) -> str:
        host, port = _host_port(url)
        try:
            kinds = {address_class(a) for a in self._addresses(host, port, deadline)}
        except _resolve.ResolutionTimeout as exc:
            # Not "public": the check would then refuse its endpoint with a
            # reason that is not the real one.
            raise _late(f"the server {url!r}", host, limit, exc) from None
        except (OSError, ValueError):
            return PUBLIC
        return kinds.pop() if len(kinds) == 1 else PUBLIC

    def check(self, url: str, *, named_by: str, what: str) -> None:
        if self.allow_private_network:
            return
        host, port = _host_port(url)
        deadline, limit = self._deadline(f"the host of {what} {url!r} was not resolved")
        try:
            addresses = self._addresses(host, port, deadline)
        except (OSError, UnicodeError) as exc:
            if self._proxied(url):
                return  # the proxy resolves the name, in its own network
            if isinstance(exc, _resolve.ResolutionTimeout):
                raise _late(f"{what} {url!r}", host, limit, exc) from None
            raise AuthorizationError(f"cannot resolve the host of {what} {url!r}: {exc}") from None
        server = None
        for address in addresses:
            kind = address_class(address)
            if kind == PUBLIC:
                continue
            if server is None:
                server = self._server_class(named_by, deadline, limit)
            if kind != server:
                raise EndpointNotAllowed(
                    f"refusing {what} {url!r}: it is on a {kind} address ({address}), and {named_by}, which "
                    f"named it, is not. A server may send the client only to public addresses and to addresses of "
                    f"its own kind; to allow it anyway, pass allow_private_network=True to the token provider",
                    url=url, address=address, address_class=kind, named_by=named_by,
                )


def _late(whose: str, host: str, limit: str, exc: _resolve.ResolutionTimeout) -> NotResolvedInTime:
    if isinstance(exc, _resolve.ResolverBusy):
        return NotResolvedInTime(
            f"cannot resolve the host of {whose}: {host!r} was not looked up: {exc} (it is not answering). Check "
            "the system's DNS resolver (/etc/resolv.conf, the network); more time would not help")
    return NotResolvedInTime(
        f"cannot resolve the host of {whose} in time: {host!r} did not resolve within {limit}: {exc}. Check the "
        "system's DNS resolver (/etc/resolv.conf, the network), or give the token provider more time (timeout=, "
        "authorization_timeout=)"
    )
