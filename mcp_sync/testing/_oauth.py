"""The OAuth vocabulary shared by the test authorization server and protected resource.

It owns the grant and token type URNs, the discovery styles and client
authentication methods, lifetimes, `OAuthError` (an error answer: code,
description, status, headers), the records tests read (`Recorded`: one
request to the authorization server; `Grant`: one access token issued),
the server's private records of clients, codes and refresh tokens, and the
small helpers of answers (`json_answer`) and parameters. Plain data: no
sockets, no threads, no locks.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

JSONDict = dict[str, Any]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_JAG_TYP = "oauth-id-jag+jwt"

DISCOVERY_STYLES = ("oauth", "openid", "openid-append")
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
AUTH_METHODS = (*SECRET_METHODS, "none", "private_key_jwt")

#: How long an authorization code and an ID-JAG stay good (seconds).
CODE_LIFETIME = 60
ID_JAG_LIFETIME = 300

MAX_BODY = 1 << 20
#: RFC 7636: a code_verifier is 43-128 unreserved characters; an S256 challenge is 43 base64url ones.
VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
_LOOPBACK_IPS = ("127.0.0.1", "[::1]")


class OAuthError(Exception):
    """An OAuth error answer: `error` code, `description`, HTTP status and extra headers."""

    def __init__(self, error: str, description: str, status: int = 400, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status
        self.headers = dict(headers or {})


# Records


@dataclass(frozen=True)
class Recorded:
    """One HTTP request as the authorization server received it.

    `path` is without the query; `query` and `form` map each parameter to its
    first value (`body` has the raw bytes for anything finer); `headers` has
    lower-cased names; `json` is the parsed body of an application/json
    request (else None)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    form: dict[str, str]
    json: Any
    body: bytes


@dataclass
class Grant:
    """One access token the authorization server issued and what it stands for."""

    token: str
    client_id: str | None
    scope: frozenset[str]
    resource: str | None
    expires_at: float | None  # time.time() seconds; None: never
    issuer: str
    grant_type: str
    jkt: str | None = None  # DPoP: the thumbprint of the key the token is bound to
    subject: str | None = None
    revoked: bool = False

    @property
    def token_type(self) -> str:
        return "DPoP" if self.jkt else "Bearer"

    def valid(self, now: float | None = None) -> bool:
        """Not revoked and not expired."""
        now = time.time() if now is None else now
        return not self.revoked and (self.expires_at is None or now < self.expires_at)


@dataclass
class Client:
    client_id: str
    secret: str | None  # None: a public client
    #: The registered token_endpoint_auth_method; None: a pre-registered confidential
    #: client, which may use any secret method the server advertises.
    method: str | None
    redirect_uris: tuple[str, ...] | None  # None: any redirect URI is accepted
    key: Any = None  # private_key_jwt: a JWK dict or a cryptography public key


@dataclass
class Code:
    client_id: str
    redirect_uri: str | None  # as sent in the authorization request (None: omitted)
    challenge: str
    resource: str | None
    scope: frozenset[str]
    expires_at: float
    tokens: list[str] = field(default_factory=list)  # issued from it: revoked if it is replayed


@dataclass
class Refresh:
    client_id: str | None
    scope: frozenset[str]
    resource: str | None
    jkt: str | None
    subject: str | None




Answer = tuple[int, dict[str, str], bytes]


def http_get(url: str) -> tuple[int, str | None]:
    """GET `url` (http only) as a browser would, without following a
    redirect: the status and the `Location` header."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise RuntimeError(f"only http URLs can be visited here: {url!r}")
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=10)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("Location")
    finally:
        conn.close()


def json_answer(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Answer:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode("utf-8")


def first_values(multi: Mapping[str, list[str]]) -> dict[str, str]:
    return {name: values[0] for name, values in multi.items()}


def scopes(text: str | None) -> frozenset[str]:
    return frozenset((text or "").split())


def audiences(claims: Mapping[str, Any]) -> list[Any]:
    aud = claims.get("aud")
    return aud if isinstance(aud, list) else [aud]


def same_redirect(registered: str, sent: str) -> bool:
    """Exact match, except that a loopback IP redirect may use any port (RFC 8252 §7.3)."""
    if registered == sent:
        return True
    a, b = urlsplit(registered), urlsplit(sent)
    loopback = a.scheme == b.scheme == "http" and a.netloc.rsplit(":", 1)[0] in _LOOPBACK_IPS
    return loopback and a.hostname == b.hostname and (a.path, a.query) == (b.path, b.query)


