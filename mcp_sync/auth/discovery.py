"""Finding the authorization server: pure functions, no network IO.

What the MCP authorization spec asks a client to work out from a 401:

- `parse_challenges` reads a `WWW-Authenticate` header (RFC 9110 §11.6.1)
  into schemes and parameters (`resource_metadata`, `scope`, `error`).
- `resource_metadata_urls` lists where protected resource metadata
  (RFC 9728) may live, in the spec's order: the challenge's URL, else the
  path-based well-known URL, then the root one.
- `authorization_server_metadata_urls` lists the RFC 8414 and OpenID
  Connect discovery URLs for an issuer, path-insertion forms first.
- `check_resource` and `check_issuer` are the two identity checks: the
  metadata's `resource` must name the server we talk to, and an
  authorization server's `issuer` must be the one we looked up.
- `canonical_resource` is the RFC 8707 `resource` value for a server URL.
- `check_endpoint_url` enforces HTTPS for authorization servers (loopback
  addresses excepted, for development and tests).

Example::

    >>> parse_challenges('Bearer resource_metadata="https://x/prm", scope="a b"')
    [Challenge(scheme='bearer', params={'resource_metadata': 'https://x/prm', 'scope': 'a b'})]
    >>> authorization_server_metadata_urls("https://auth.example.com/tenant1")[0]
    'https://auth.example.com/.well-known/oauth-authorization-server/tenant1'
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs

from ..errors import AuthorizationError

__all__ = [
    "Challenge",
    "parse_challenges",
    "find_challenge",
    "resource_metadata_urls",
    "authorization_server_metadata_urls",
    "canonical_resource",
    "check_resource",
    "check_issuer",
    "check_endpoint_url",
    "is_loopback",
]


@attrs.frozen
class Challenge:
    """One challenge of a `WWW-Authenticate` header: the scheme (lower-case)
    and its parameters (names lower-case, values unquoted)."""

    scheme: str
    params: dict[str, str] = attrs.field(factory=dict)

    @property
    def scopes(self) -> list[str] | None:
        """The `scope` parameter split on spaces, or None when absent."""
        value = self.params.get("scope")
        return None if value is None else value.split()

    @property
    def error(self) -> str | None:
        return self.params.get("error")


_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_SCHEME = re.compile(rf"\s*({_TOKEN})")
_PARAM = re.compile(rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))\s*')
_PARAM_START = re.compile(rf"\s*{_TOKEN}\s*=")
_TOKEN68 = re.compile(r"\s*([A-Za-z0-9\-._~+/]+=*)\s*(?=,|$)")


def parse_challenges(header: str | None) -> list[Challenge]:
    """Parse a `WWW-Authenticate` value into its challenges.

    Tolerant the way a client must be: unknown schemes are kept, a token68
    credential is skipped, empty list elements (",,") are ignored (RFC 9110
    §5.6.1), and a malformed tail ends parsing without an error (what was
    read so far is still returned).
    """
    challenges: list[Challenge] = []
    if not header:
        return challenges
    text, pos = header, 0
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t,":
            pos += 1
        match = _SCHEME.match(text, pos)
        if match is None:
            break
        scheme, pos = match.group(1).lower(), match.end()
        params: dict[str, str] = {}
        token68 = _TOKEN68.match(text, pos)
        if token68 is not None and not _PARAM.match(text, pos):
            pos = token68.end()
        else:
            while True:
                param = _PARAM.match(text, pos)
                if param is None:
                    break
                name = param.group(1).lower()
                value = param.group(3) if param.group(2) is None else re.sub(r"\\(.)", r"\1", param.group(2))
                params.setdefault(name, value)
                pos = param.end()
                # After a comma (or several: empty list elements) comes
                # either the next parameter or the next challenge's scheme.
                after = pos
                while after < len(text) and text[after] in " \t,":
                    after += 1
                if "," in text[pos:after] and _PARAM.match(text, after):
                    pos = after
                    continue
                if "," in text[pos:after] and _PARAM_START.match(text, after):
                    pos = len(text)  # `name=` with a broken value: a malformed tail
                break
        challenges.append(Challenge(scheme, params))
        # A challenge ends at a comma or the end. Anything else (an
        # unterminated quote, a stray character) is a malformed tail: stop,
        # rather than read a parameter's name as another scheme.
        rest = text[pos:].lstrip(" \t")
        if rest and not rest.startswith(","):
            break
    return challenges


def find_challenge(header: str | None, schemes: Sequence[str] = ("bearer", "dpop")) -> Challenge | None:
    """The first challenge with one of `schemes` (lower-case), if any."""
    for challenge in parse_challenges(header):
        if challenge.scheme in schemes:
            return challenge
    return None


def is_loopback(host: str | None) -> bool:
    """True for localhost and loopback IP addresses (127.0.0.0/8, ::1)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint_url(url: Any, what: str) -> str:
    """An authorization-server URL must be absolute HTTPS (HTTP only on a
    loopback address), without a fragment. Returns it unchanged."""
    if not isinstance(url, str) or not url:
        raise AuthorizationError(f"{what} is missing or not a string")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError:
        # A server's metadata is untrusted input: a bad URL in it is an
        # authorization failure, never an unexpected ValueError.
        raise AuthorizationError(f"{what} is not a valid URL: {url!r}") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise AuthorizationError(f"{what} is not an absolute http(s) URL: {url!r}")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise AuthorizationError(f"{what} must use HTTPS (plain HTTP is allowed only on loopback): {url!r}")
    # "#" alone is an (empty) fragment too, which `parts.fragment` cannot show.
    if "#" in url:
        raise AuthorizationError(f"{what} must not have a fragment: {url!r}")
    return url


def canonical_resource(server_url: str) -> str:
    """The RFC 8707 resource indicator for an MCP server URL: scheme and
    host lower-cased, default port and fragment dropped, and no trailing
    slash on an empty path (the form the spec recommends)."""
    parts = urlsplit(server_url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("https", 443), ("http", 80)) else f"{host}:{port}"
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def _origin(url: str) -> str:
    parts = urlsplit(canonical_resource(url))
    return f"{parts.scheme}://{parts.netloc}"


def resource_metadata_urls(server_url: str, challenge_url: str | None = None) -> list[str]:
    """Where to look for protected resource metadata, in order (RFC 9728
    and the MCP spec): the challenge's `resource_metadata` URL when given,
    then `/.well-known/oauth-protected-resource<path>`, then the root."""
    urls: list[str] = []
    if challenge_url:
        urls.append(challenge_url)
    parts = urlsplit(server_url)
    origin = _origin(server_url)
    path = parts.path.rstrip("/")
    if path:
        urls.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{origin}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """The metadata URLs to try for an issuer, in the spec's order.

    With a path (`https://a.example/tenant1`): OAuth path insertion, OpenID
    path insertion, OpenID path appending. Without: OAuth, then OpenID.
    """
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


def check_resource(metadata: Mapping[str, Any], server_url: str) -> str:
    """The metadata's `resource` must identify the server we are talking to
    (RFC 9728 §3.3): same origin, and its path the server's path or a
    parent of it on a segment boundary. Returns the resource to request
    tokens for (the metadata's, when it is valid)."""
    resource = metadata.get("resource")
    if resource is None:
        return canonical_resource(server_url)
    # RFC 8707 §2: a resource indicator has no fragment. The value is sent
    # as it is, so one that canonical_resource would mend is still refused.
    if not isinstance(resource, str) or not resource or "#" in resource:
        raise AuthorizationError("the protected resource metadata has an invalid 'resource'")
    try:
        got = urlsplit(canonical_resource(resource))
    except ValueError:  # a bad port or IPv6 literal, from an untrusted document
        raise AuthorizationError(f"the protected resource metadata has an invalid 'resource': {resource!r}") from None
    want = urlsplit(canonical_resource(server_url))
    same_origin = (want.scheme, want.netloc) == (got.scheme, got.netloc)
    want_path, got_path = want.path.rstrip("/") + "/", got.path.rstrip("/") + "/"
    if not same_origin or not want_path.startswith(got_path) or got.query:
        raise AuthorizationError(
            f"the protected resource metadata is for {resource!r}, not for this server "
            f"({canonical_resource(server_url)!r}); refusing to authorize"
        )
    return resource


def check_issuer(metadata: Mapping[str, Any], issuer: str) -> None:
    """RFC 8414 §3.3: the document's `issuer` must be identical to the
    issuer whose well-known URL we fetched (no normalization at all)."""
    found = metadata.get("issuer")
    if found != issuer:
        raise AuthorizationError(
            f"the authorization server metadata names issuer {found!r}, but it was fetched for {issuer!r}"
        )
