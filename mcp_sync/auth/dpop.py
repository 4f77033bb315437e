"""DPoP proofs (RFC 9449): sender-constrained tokens for OAuth.

What it holds: `DPoP`, which owns one asymmetric key, makes a signed proof
for each HTTP request and remembers the nonces servers hand out; and
`is_use_dpop_nonce()`, which tells whether a response asks for a retry with
a fresh nonce. Nothing here does network IO: the caller adds the `DPoP`
header, and feeds response headers back with `nonce_from()`.

Example::

    dpop = DPoP()                                   # a fresh ES256 key
    headers = {"DPoP": dpop.proof("POST", token_url)}
    ...                                             # POST, read `response`
    if is_use_dpop_nonce(response.status, response.headers, body) and dpop.nonce_from(token_url, response.headers):
        headers = {"DPoP": dpop.proof("POST", token_url)}   # retry once, now with the nonce

Needs the optional `cryptography` package (``pip install 'mcp-sync-client[jwt]'``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .jwt import SigningKey, b64url

__all__ = ["DPoP", "is_use_dpop_nonce"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 9449 §8.1: nonce = 1*NQCHAR; NQCHAR = %x21 / %x23-5B / %x5D-7E
# (visible ASCII without '"' and '\'), so it can never break a header.
_NONCE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def _origin(url: str) -> str:
    """scheme://host:port, lower-cased, with the default port spelled out,
    so that every spelling of one origin finds the same nonce."""
    parts = urlsplit(url)
    host = parts.hostname  # lower-cased, IPv6 brackets removed
    if not parts.scheme or not host:
        raise ValueError("a DPoP URL must be absolute (scheme://host/...)")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError("the URL has an invalid port") from exc
    if port is None:
        port = _DEFAULT_PORTS.get(parts.scheme)
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" if port is None else f"{parts.scheme}://{host}:{port}"


def _header(headers: Mapping[str, str], name: str) -> list[str]:
    # Header names are case-insensitive, and a plain dict may hold several spellings.
    return [value for key, value in headers.items() if isinstance(key, str) and key.lower() == name]


class DPoP:
    """A DPoP key and the proofs made with it (RFC 9449).

    `proof()` signs one proof per request; `remember_nonce()` /
    `nonce_from()` keep the latest `DPoP-Nonce` of each origin, which later
    proofs for that origin carry. `jkt` is the key's thumbprint, for the
    `dpop_jkt` authorization request parameter. Safe to share between
    threads.

    Example::

        dpop = DPoP()                       # or DPoP(SigningKey.from_pem(pem))
        dpop.proof("GET", "https://mcp.example.com/mcp?x=1", access_token=token)
        dpop.jkt                            # e.g. "mAZEmlJGrLLf..." (base64url SHA-256)
        dpop                                # DPoP(ES256, jkt='mAZEmlJGrLLf...')
    """

    def __init__(self, key: SigningKey | None = None) -> None:
        if key is None:
            key = SigningKey.generate("ES256")
        if not isinstance(key, SigningKey):
            raise TypeError("key must be a SigningKey")
        if key.algorithm.startswith("HS"):
            raise ValueError("DPoP needs an asymmetric key: the server checks proofs with the public key in them")
        self._key = key
        # The embedded JWK carries the public members only: a `kid` means
        # nothing to the server here, and the thumbprint ignores it anyway.
        self._jwk = {name: value for name, value in key.public_jwk().items() if name != "kid"}
        self._jkt = key.thumbprint()
        # Server nonces are the only shared mutable state: many threads make
        # proofs and read answers at once, so one lock guards this dict
        # (origin -> latest nonce). Signing itself needs no lock.
        self._lock = threading.Lock()
        self._nonces: dict[str, str] = {}

    @property
    def key(self) -> SigningKey:
        """The signing key (its repr never shows the private key)."""
        return self._key

    @property
    def jkt(self) -> str:
        """The RFC 7638 thumbprint of the public key: the `dpop_jkt`
        parameter, and the `cnf.jkt` a server binds tokens to."""
        return self._jkt

    def proof(self, method: str, url: str, *, access_token: str | None = None, now: float | None = None) -> str:
        """A DPoP proof JWT for one request (RFC 9449 §4.2).

        `htu` is `url` without its query and fragment; `nonce` is the last
        one remembered for the URL's origin, if any; `ath` (the SHA-256 of
        the token) is added when `access_token` is given, as resource
        servers require. Every proof has a fresh random `jti`.

        Args:
            method: The request's HTTP method (`htm`).
            url: The request's URL.
            access_token: The token the request carries, for `ath`; None
                for a request to the authorization server.
            now: The proof's `iat`, as a `time.time()` timestamp; None: now.

        Returns:
            The proof, for the `DPoP` header.
        """
        if not isinstance(method, str) or not method:
            raise ValueError("method must be a non-empty string")
        origin = _origin(url)
        parts = urlsplit(url)
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
            "iat": int(time.time() if now is None else now),
        }
        with self._lock:
            nonce = self._nonces.get(origin)
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            try:
                token_bytes = access_token.encode("ascii")
            except UnicodeEncodeError:
                raise ValueError("an access token must be ASCII") from None  # never echo the token
            claims["ath"] = b64url(hashlib.sha256(token_bytes).digest())
        # kid=None: the key travels in `jwk`, so leave any `kid` out of the header.
        return self._key.sign(claims, {"typ": "dpop+jwt", "jwk": self._jwk, "kid": None})

    def remember_nonce(self, url: str, nonce: str) -> None:
        """Remember a server's `DPoP-Nonce` for the origin of `url`. A value
        that is not a valid nonce (RFC 9449 §8.1 NQCHAR) is ignored.

        Args:
            url: A URL of the server that sent it.
            nonce: The `DPoP-Nonce` value.
        """
        self._store(_origin(url), nonce)

    def nonce_from(self, url: str, headers: Mapping[str, str]) -> bool:
        """Remember the `DPoP-Nonce` header of a response from `url`, if any.

        True when that stored a nonce the client did not have, which is when
        one retry is worth making; False for no header, an invalid value, or
        the nonce already in use.

        Args:
            url: The URL the response came from.
            headers: The response's headers (lower-case names).

        Returns:
            Whether a new nonce was stored.
        """
        origin = _origin(url)
        stored = False
        for value in _header(headers, "dpop-nonce"):
            stored = self._store(origin, value) or stored
        return stored

    def _store(self, origin: str, nonce: Any) -> bool:
        if not isinstance(nonce, str):
            return False
        nonce = nonce.strip(" \t")  # optional whitespace around a header value
        if not _NONCE.fullmatch(nonce):
            return False
        with self._lock:
            if self._nonces.get(origin) == nonce:
                return False
            self._nonces[origin] = nonce
            return True

    def __repr__(self) -> str:
        return f"DPoP({self._key.algorithm}, jkt={self._jkt!r})"


# -- WWW-Authenticate, parsed tolerantly (RFC 9110 §11.6.1) ------------------------

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(rf'({_TOKEN})[ \t]*=[ \t]*("(?:[^"\\]|\\.)*"?|[^\s,]*)')
_SCHEME = re.compile(rf"({_TOKEN})")
_TOKEN68 = re.compile(r"[ \t]+[A-Za-z0-9\-._~+/]+=*[ \t]*(?=,|$)")


def _challenges(value: str) -> list[tuple[str, dict[str, str]]]:
    """(scheme, params) for each challenge, names lower-cased. Anything it
    cannot make sense of is skipped, never an error: servers get this
    header wrong often enough that a strict parser would miss real nonces."""
    found: list[tuple[str, dict[str, str]]] = []
    pos = 0
    while True:
        while pos < len(value) and value[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(value):
            return found
        param = _PARAM.match(value, pos)
        if param and found:
            raw = param.group(2)
            if raw.startswith('"'):
                raw = re.sub(r"\\(.)", r"\1", raw[1:-1] if raw.endswith('"') and len(raw) > 1 else raw[1:])
            found[-1][1].setdefault(param.group(1).lower(), raw)
            pos = param.end()
            continue
        scheme = _SCHEME.match(value, pos)
        if scheme:
            found.append((scheme.group(1).lower(), {}))
            pos = scheme.end()
            token68 = _TOKEN68.match(value, pos)  # e.g. "Basic dXNlcg==": no params follow
            if token68:
                pos = token68.end()
            continue
        pos += 1  # a stray character: step over it


def is_use_dpop_nonce(status: int, headers: Mapping[str, str], body: Mapping[str, Any] | None = None) -> bool:
    """Whether a response asks the client to retry with a server nonce.

    True for an authorization server's 400 whose JSON body has
    ``"error": "use_dpop_nonce"`` (RFC 9449 §8), and for a resource server's
    401 with a ``WWW-Authenticate: DPoP error="use_dpop_nonce"`` challenge
    (§9). Header names are case-insensitive.
    """
    if status == 400:
        return isinstance(body, Mapping) and body.get("error") == "use_dpop_nonce"
    if status == 401:
        for value in _header(headers, "www-authenticate"):
            if not isinstance(value, str):
                continue
            for scheme, params in _challenges(value):
                if scheme == "dpop" and params.get("error") == "use_dpop_nonce":
                    return True
    return False
