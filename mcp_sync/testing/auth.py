"""A local OAuth 2.1 authorization server and a protected MCP server, for tests.

For testing code that uses `mcp_sync.auth` (this library's own tests, and
yours) and for the runnable examples of the authorization docs. Standard
library only, except that
checking an asymmetric JWT signature (and making one) imports
`cryptography` inside the function that needs it. Its JWT code is its own,
not `mcp_sync.auth.jwt`: it is the other side of the wire, written from the
RFCs, so it can check the client rather than agree with it.

* `AuthServer`: an authorization server on 127.0.0.1 (a real socket, one
  thread per connection). Metadata per RFC 8414 / OpenID Connect Discovery at
  the well-known URL of the chosen `discovery` style (every other well-known
  URL is 404), `GET /authorize` (answers at once with a 302, no person
  involved), `POST /token` (authorization_code + PKCE S256, refresh_token
  with rotation, client_credentials, RFC 7523 jwt-bearer including ID-JAGs,
  RFC 8693 token exchange to ID-JAG when it plays an enterprise IdP, DPoP per
  RFC 9449) and `POST /register` (RFC 7591). Every endpoint lives under the
  issuer's path. It records every request and everything it issued, and has
  knobs to fail on purpose (`deny`, `fail_next_token`, `token_body_override`,
  `metadata_override`, `registration_error`, `expire_all()`, `revoke()`).
* `ProtectedMCP`: the test MCP server (`mcp_sync.testing.HTTPServer`) behind
  a gate that acts as an OAuth resource server: protected resource metadata
  (RFC 9728), 401/403 challenges (RFC 6750, MCP scope challenges), token
  introspection at its `AuthServer`s, audience and DPoP checks.
* JWT helpers for tests: `sign_jwt`, `verify_jwt`, `public_jwk`,
  `jwk_thumbprint`, `make_dpop_proof`.
* A person, played: `AuthServer.redirect_for(url)` approves an
  authorization URL and returns where the browser is sent;
  `AuthServer.approve(url)` does that in a background thread and delivers
  the redirect (for `LoopbackRedirect(show=auth_server.approve)`).

Example::

    with AuthServer(clients={"app": "s3cret"}) as auth, ProtectedMCP(auth) as mcp:
        ...  # point the client at mcp.url; assert on auth.requests, auth.issued, mcp.seen_tokens

Everything is thread-safe. `close()` joins every thread the server started
and closes every socket it opened.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import http.server
import json
import re
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote_plus, urlencode, urlsplit

from .core import Server
from .demo import demo_server
from .http import GateAnswer, Gated, HTTPServer, decode_header_value

__all__ = [
    "AuthServer", "Grant", "OAuthError", "ProtectedMCP", "Recorded",
    "jwk_thumbprint", "make_dpop_proof", "public_jwk", "sign_jwt", "verify_jwt",
    "CLIENT_ASSERTION_TYPE", "ID_JAG_TYPE", "ID_TOKEN_TYPE", "JWT_BEARER", "TOKEN_EXCHANGE",
]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_JAG_TYP = "oauth-id-jag+jwt"

DISCOVERY_STYLES = ("oauth", "openid", "openid-append")
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
AUTH_METHODS = (*SECRET_METHODS, "none", "private_key_jwt")
#: The asymmetric algorithms accepted for DPoP proofs and client/grant assertions.
SIGNING_ALGS = ("ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA")

#: How long an authorization code, an ID-JAG and a DPoP proof's `iat` stay good (seconds).
CODE_LIFETIME = 60
ID_JAG_LIFETIME = 300
DPOP_IAT_WINDOW = 60

_MAX_BODY = 1 << 20
#: RFC 7636: a code_verifier is 43-128 unreserved characters; an S256 challenge is 43 base64url ones.
_VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_LOOPBACK_IPS = ("127.0.0.1", "[::1]")

JSONDict = dict[str, Any]


# --------------------------------------------------------------------------
# JWTs (RFC 7515/7519), JWKs (RFC 7517/7638), DPoP proofs (RFC 9449)

#: alg -> (key family, hash name in cryptography.hazmat.primitives.hashes).
_ALGS: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", "SHA256"), "RS384": ("RSA", "SHA384"), "RS512": ("RSA", "SHA512"),
    "PS256": ("PSS", "SHA256"), "PS384": ("PSS", "SHA384"), "PS512": ("PSS", "SHA512"),
    "ES256": ("EC", "SHA256"), "ES384": ("EC", "SHA384"), "ES512": ("EC", "SHA512"),
    "EdDSA": ("OKP", None), "HS256": ("HMAC", "SHA256"),
}
#: An ES* alg only goes with its own curve (RFC 7518 §3.4).
_EC_ALG_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_CURVE_NAMES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode unpadded base64url; ValueError on anything else."""
    if not isinstance(text, str) or _B64URL.fullmatch(text) is None:
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json_part(text: str) -> JSONDict:
    try:
        value = json.loads(b64url_decode(text))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"a JWT part is not base64url JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("a JWT part is not a JSON object")
    return value


def unverified(token: str) -> tuple[JSONDict, JSONDict]:
    """The header and claims of a compact JWS, NOT verified (to pick the key)."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    return _json_part(parts[0]), _json_part(parts[1])


def jwk_public_key(jwk: Mapping[str, Any]) -> Any:
    """The `cryptography` public key of an EC (P-256/384/521), RSA or OKP (Ed25519) JWK."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    def number(name: str) -> int:
        return int.from_bytes(b64url_decode(jwk[name]), "big")

    try:
        kty = jwk.get("kty")
        if kty == "EC":
            curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
            curve = curves[jwk["crv"]]
            return ec.EllipticCurvePublicNumbers(number("x"), number("y"), curve).public_key()
        if kty == "RSA":
            return rsa.RSAPublicNumbers(number("e"), number("n")).public_key()
        if kty == "OKP" and jwk.get("crv") == "Ed25519":
            return ed25519.Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"unusable JWK: {exc!r}") from None
    raise ValueError(f"unsupported JWK kty {jwk.get('kty')!r}")


def public_jwk(key: Any) -> JSONDict:
    """The public JWK of a `cryptography` EC, RSA or Ed25519 key (private or public)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey, ed25519.Ed25519PrivateKey)):
        key = key.public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        size = (key.curve.key_size + 7) // 8
        numbers = key.public_numbers()
        return {"kty": "EC", "crv": _CURVE_NAMES[key.curve.name],
                "x": b64url(numbers.x.to_bytes(size, "big")), "y": b64url(numbers.y.to_bytes(size, "big"))}
    if isinstance(key, rsa.RSAPublicKey):
        n, e = key.public_numbers().n, key.public_numbers().e
        return {"kty": "RSA", "n": b64url(n.to_bytes((n.bit_length() + 7) // 8, "big")),
                "e": b64url(e.to_bytes((e.bit_length() + 7) // 8, "big"))}
    if isinstance(key, ed25519.Ed25519PublicKey):
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
    raise TypeError(f"unsupported key {type(key).__name__}")


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638: base64url(SHA-256) of the JWK's required members, sorted, without whitespace."""
    required = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}
    members = required.get(str(jwk.get("kty")))
    if members is None or any(not isinstance(jwk.get(name), str) for name in members):
        raise ValueError("a JWK thumbprint needs an EC, RSA or OKP key with its required members")
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def _key_alg(key: Any) -> str:
    """The natural JWS alg for a signing key."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, (bytes, bytearray)):
        return "HS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[_CURVE_NAMES[key.curve.name]]
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    raise TypeError(f"cannot sign with {type(key).__name__}")


def sign_jwt(claims: Mapping[str, Any], key: Any, *, header: Mapping[str, Any] | None = None) -> str:
    """A compact JWS of `claims` signed with `key`: bytes (HS256) or a `cryptography`
    EC/RSA/Ed25519 private key (ES*/RS256/EdDSA; `header={"alg": "PS256"}` picks another)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, utils

    head = {"alg": _key_alg(key), **(header or {})}
    signing_input = (b64url(json.dumps(head).encode()) + "." + b64url(json.dumps(dict(claims)).encode())).encode("ascii")
    family, hash_name = _ALGS[head["alg"]]
    digest: Any = getattr(hashes, hash_name)() if hash_name else None
    if family == "HMAC":
        signature = hmac.new(bytes(key), signing_input, hashlib.sha256).digest()
    elif family == "EC":
        r, s = utils.decode_dss_signature(key.sign(signing_input, ec.ECDSA(digest)))
        size = (key.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    elif family == "RSA":
        signature = key.sign(signing_input, padding.PKCS1v15(), digest)
    elif family == "PSS":
        signature = key.sign(signing_input, padding.PSS(padding.MGF1(digest), padding.PSS.DIGEST_LENGTH), digest)
    else:
        signature = key.sign(signing_input)
    return signing_input.decode("ascii") + "." + b64url(signature)


def verify_jwt(token: str, key: Any, *, algs: Collection[str] = SIGNING_ALGS) -> tuple[JSONDict, JSONDict]:
    """Check a compact JWS's signature; its (header, claims). `key` is a JWK
    dict, a `cryptography` public key, or bytes for HS256 (which `algs` must
    then allow). Claims are not checked here. ValueError on any failure."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

    header, claims = unverified(token)
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in _ALGS or alg not in algs:
        raise ValueError(f"alg {alg!r} is not accepted")
    head, payload, sig = token.split(".")
    signing_input = f"{head}.{payload}".encode("ascii")
    signature = b64url_decode(sig)
    family, hash_name = _ALGS[alg]
    if family == "HMAC":
        # Only a shared secret may verify an HMAC: a public key must never be used as one.
        if not isinstance(key, (bytes, bytearray)):
            raise ValueError("HS256 needs a shared secret")
        if not hmac.compare_digest(hmac.new(bytes(key), signing_input, hashlib.sha256).digest(), signature):
            raise ValueError("bad signature")
        return header, claims
    if isinstance(key, Mapping):
        key = jwk_public_key(key)
    digest: Any = getattr(hashes, hash_name)() if hash_name else None
    try:
        if family in ("RSA", "PSS"):
            if not isinstance(key, rsa.RSAPublicKey):
                raise ValueError(f"{alg} needs an RSA key")
            pad = padding.PKCS1v15() if family == "RSA" else padding.PSS(padding.MGF1(digest), padding.PSS.DIGEST_LENGTH)
            key.verify(signature, signing_input, pad, digest)
        elif family == "EC":
            if not isinstance(key, ec.EllipticCurvePublicKey) or _CURVE_NAMES.get(key.curve.name) != _EC_ALG_CURVE[alg]:
                raise ValueError(f"{alg} needs an EC key on {_EC_ALG_CURVE[alg]}")
            size = (key.curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                raise ValueError("an ECDSA JWS signature is r || s of the curve's size")
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            key.verify(utils.encode_dss_signature(r, s), signing_input, ec.ECDSA(digest))
        else:
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise ValueError("EdDSA needs an Ed25519 key")
            key.verify(signature, signing_input)
    except InvalidSignature:
        raise ValueError("bad signature") from None
    return header, claims


def _ath(access_token: str) -> str:
    """RFC 9449 §4.2: the access token hash a proof carries at a resource server."""
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest())


def make_dpop_proof(key: Any, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None,
                    iat: float | None = None, jti: str | None = None) -> str:
    """A DPoP proof JWT (RFC 9449 §4.2) signed by the `cryptography` private `key`."""
    claims: JSONDict = {"jti": jti or secrets.token_urlsafe(16), "htm": method, "htu": url,
                        "iat": int(time.time() if iat is None else iat)}
    if access_token is not None:
        claims["ath"] = _ath(access_token)
    if nonce is not None:
        claims["nonce"] = nonce
    return sign_jwt(claims, key, header={"typ": "dpop+jwt", "jwk": public_jwk(key)})


class OAuthError(Exception):
    """An OAuth error answer: `error` code, `description`, HTTP status and extra headers."""

    def __init__(self, error: str, description: str, status: int = 400, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status
        self.headers = dict(headers or {})


def check_dpop_proof(proof: str | None, *, method: str, url: str, seen: set[str], nonce: str | None = None,
                     access_token: str | None = None) -> str:
    """Validate a DPoP proof per RFC 9449 §4.3; the JWK thumbprint of its key.

    Raises OAuthError "invalid_dpop_proof", or "use_dpop_nonce" when the proof
    is fine but lacks `nonce`. A proof's `jti` goes into `seen` (replays fail)."""
    if not proof:
        raise OAuthError("invalid_dpop_proof", "a DPoP proof is required")
    try:
        header, _ = unverified(proof)
        jwk = header.get("jwk")
        if header.get("typ") != "dpop+jwt":
            raise ValueError("typ must be dpop+jwt")
        if not isinstance(jwk, dict) or any(name in jwk for name in ("d", "p", "q", "dp", "dq", "qi", "k")):
            raise ValueError("jwk must be a public key")
        _, claims = verify_jwt(proof, jwk, algs=SIGNING_ALGS)
    except ValueError as exc:
        raise OAuthError("invalid_dpop_proof", str(exc)) from None
    htu = claims.get("htu")
    if claims.get("htm") != method:
        raise OAuthError("invalid_dpop_proof", f"htm {claims.get('htm')!r} is not {method!r}")
    if not isinstance(htu, str) or urlsplit(htu)._replace(query="", fragment="").geturl() != url:
        raise OAuthError("invalid_dpop_proof", f"htu {htu!r} is not {url!r}")
    iat = claims.get("iat")
    if not isinstance(iat, (int, float)) or isinstance(iat, bool) or abs(time.time() - iat) > DPOP_IAT_WINDOW:
        raise OAuthError("invalid_dpop_proof", "iat is missing or too far from now")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise OAuthError("invalid_dpop_proof", "jti is missing")
    if access_token is not None and claims.get("ath") != _ath(access_token):
        raise OAuthError("invalid_dpop_proof", "ath does not match the access token")
    if nonce is not None and claims.get("nonce") != nonce:
        raise OAuthError("use_dpop_nonce", "use the DPoP nonce the server sent")
    if jti in seen:
        raise OAuthError("invalid_dpop_proof", "jti replayed")
    seen.add(jti)
    return jwk_thumbprint(jwk)


# --------------------------------------------------------------------------
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
class _Client:
    client_id: str
    secret: str | None  # None: a public client
    #: The registered token_endpoint_auth_method; None: a pre-registered confidential
    #: client, which may use any secret method the server advertises.
    method: str | None
    redirect_uris: tuple[str, ...] | None  # None: any redirect URI is accepted
    key: Any = None  # private_key_jwt: a JWK dict or a cryptography public key


@dataclass
class _Code:
    client_id: str
    redirect_uri: str | None  # as sent in the authorization request (None: omitted)
    challenge: str
    resource: str | None
    scope: frozenset[str]
    expires_at: float
    tokens: list[str] = field(default_factory=list)  # issued from it: revoked if it is replayed


@dataclass
class _Refresh:
    client_id: str | None
    scope: frozenset[str]
    resource: str | None
    jkt: str | None
    subject: str | None


# --------------------------------------------------------------------------
# The HTTP plumbing


class _Listener(http.server.ThreadingHTTPServer):
    def __init__(self, owner: AuthServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can be slow.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        # Our own tracked thread per connection, so close() can join them all.
        self.owner._spawn(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real server
    server_version = "mcp-sync-test-authserver"
    server: _Listener

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self) -> None:
        self.server.owner._handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _dispatch

    def reply(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


_Answer = tuple[int, dict[str, str], bytes]


def _get(url: str) -> tuple[int, str | None]:
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


def _json(status: int, body: Any, headers: Mapping[str, str] | None = None) -> _Answer:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode("utf-8")


def _first(multi: Mapping[str, list[str]]) -> dict[str, str]:
    return {name: values[0] for name, values in multi.items()}


def _scopes(text: str | None) -> frozenset[str]:
    return frozenset((text or "").split())


def _audiences(claims: Mapping[str, Any]) -> list[Any]:
    aud = claims.get("aud")
    return aud if isinstance(aud, list) else [aud]


def _same_redirect(registered: str, sent: str) -> bool:
    """Exact match, except that a loopback IP redirect may use any port (RFC 8252 §7.3)."""
    if registered == sent:
        return True
    a, b = urlsplit(registered), urlsplit(sent)
    loopback = a.scheme == b.scheme == "http" and a.netloc.rsplit(":", 1)[0] in _LOOPBACK_IPS
    return loopback and a.hostname == b.hostname and (a.path, a.query) == (b.path, b.query)


# --------------------------------------------------------------------------
# The authorization server


class AuthServer:
    """An OAuth 2.1 authorization server on 127.0.0.1 for tests (see the module docstring).

    Arguments (all keyword-only):

    * `issuer_path`: the issuer's path ("" or like "/tenant1"); the issuer is
      `url + issuer_path` and the endpoints live under it.
    * `discovery`: where the metadata is served: "oauth"
      (`/.well-known/oauth-authorization-server{issuer_path}`), "openid"
      (`/.well-known/openid-configuration{issuer_path}`) or "openid-append"
      (`{issuer_path}/.well-known/openid-configuration`); a sequence serves
      several. Every other well-known URL answers 404.
    * `cimd`: advertise `client_id_metadata_document_supported` and accept an
      https URL with a path as client_id (public, any redirect URI; the
      document is not fetched).
    * `registration`: offer `/register` (RFC 7591) and advertise it.
    * `auth_methods`: `token_endpoint_auth_methods_supported`; registration
      refuses others, and a pre-registered confidential client may use any
      of its secret methods.
    * `scopes_supported`: advertised when given (never enforced).
    * `grant_types`: the grant types served and advertised (default: all of
      authorization_code, refresh_token when `refresh_tokens`,
      client_credentials, jwt-bearer, and token-exchange for an IdP).
    * `iss_parameter`: advertise `authorization_response_iss_parameter_supported`
      and send `iss` in authorization responses (RFC 9207).
    * `iss_override`: send this `iss` instead ("" omits it), whatever `iss_parameter` says.
    * `issuer_override`: the metadata's `issuer` (the real one stays in use elsewhere).
    * `clients`: pre-registered client_id -> secret (None: a public client);
      any redirect URI is accepted for them.
    * `jwt_clients`: client_id -> public key (JWK dict or `cryptography` key):
      clients authenticating with private_key_jwt, and issuers of RFC 7523
      jwt-bearer grant assertions.
    * `access_token_lifetime`: `expires_in` (None: omitted, tokens never expire).
    * `refresh_tokens`: issue refresh tokens (authorization_code, refresh, jwt-bearer grants).
    * `grant_scopes`: requested scopes -> granted scopes (default: all requested).
    * `dpop`: bind tokens to DPoP keys (a proof is required at the token
      endpoint; token_type "DPoP"); advertises `dpop_signing_alg_values_supported`.
    * `dpop_nonce`: also require the server's current nonce in proofs (first
      answer: 400 use_dpop_nonce with a `DPoP-Nonce` header).
    * `idp_id_tokens`: play an enterprise IdP: these ID token strings (a
      mapping gives each one's subject) can be exchanged (RFC 8693) for an
      ID-JAG (HS256 with a secret shared in-process).
    * `trusted_idps`: `AuthServer`s playing IdPs whose ID-JAGs this server accepts as jwt-bearer grants.
    * `strict_application_type`: refuse, like OIDC servers do, to register a
      client without `application_type: "native"` whose redirect URIs are
      http loopback ones.

    Settable at run time: `deny` (authorization requests get access_denied),
    `fail_next_token` ((status, JSON) answered once by the token endpoint),
    `token_body_override` (raw bytes the token endpoint answers with 200
    until reset), `metadata_override` (a dict or raw bytes served as the
    metadata), `registration_error` ((status, JSON) answered by /register
    until reset), `iss_override`, `issuer_override`, `grant_scopes`.
    Those answering instead of the token endpoint do so before any
    processing: no code or refresh token is used up.
    """

    def __init__(
        self,
        *,
        issuer_path: str = "",
        discovery: str | Sequence[str] = "oauth",
        cimd: bool = False,
        registration: bool = True,
        auth_methods: Sequence[str] = ("client_secret_basic",),
        scopes_supported: Sequence[str] | None = None,
        grant_types: Sequence[str] | None = None,
        iss_parameter: bool = True,
        iss_override: str | None = None,
        issuer_override: str | None = None,
        clients: Mapping[str, str | None] | None = None,
        jwt_clients: Mapping[str, Any] | None = None,
        access_token_lifetime: int | None = 3600,
        refresh_tokens: bool = True,
        grant_scopes: Callable[[set[str]], set[str]] | None = None,
        dpop: bool = False,
        dpop_nonce: bool = False,
        idp_id_tokens: Mapping[str, str] | Iterable[str] | None = None,
        trusted_idps: Sequence[AuthServer] = (),
        strict_application_type: bool = False,
    ) -> None:
        if issuer_path and (not issuer_path.startswith("/") or issuer_path.endswith("/")):
            raise ValueError("issuer_path must be empty or like '/tenant1'")
        styles = (discovery,) if isinstance(discovery, str) else tuple(discovery)
        if not styles or any(style not in DISCOVERY_STYLES for style in styles):
            raise ValueError(f"discovery must be among {DISCOVERY_STYLES}")
        unknown = set(auth_methods) - set(AUTH_METHODS)
        if unknown:
            raise ValueError(f"unsupported auth methods {sorted(unknown)}")
        self.issuer_path = issuer_path
        self.discovery = styles
        self.cimd = cimd
        self.registration = registration
        self.auth_methods = tuple(auth_methods)
        self.scopes_supported = None if scopes_supported is None else list(scopes_supported)
        self.iss_parameter = iss_parameter
        self.iss_override = iss_override
        self.issuer_override = issuer_override
        self.access_token_lifetime = access_token_lifetime
        self.refresh_tokens = refresh_tokens
        self.grant_scopes = grant_scopes
        self.dpop = dpop or dpop_nonce
        self.dpop_nonce = dpop_nonce
        if idp_id_tokens is None:
            self.idp_id_tokens: dict[str, str] = {}
        elif isinstance(idp_id_tokens, Mapping):
            self.idp_id_tokens = dict(idp_id_tokens)
        else:
            self.idp_id_tokens = {token: f"user-{n}" for n, token in enumerate(idp_id_tokens, 1)}
        self.trusted_idps = list(trusted_idps)
        self.strict_application_type = strict_application_type
        if grant_types is None:
            grant_types = ["authorization_code", *(["refresh_token"] if refresh_tokens else []), "client_credentials",
                           JWT_BEARER, *([TOKEN_EXCHANGE] if self.idp_id_tokens else [])]
        self.grant_types = list(grant_types)

        # Knobs for failure tests.
        self.deny = False
        self.fail_next_token: tuple[int, JSONDict] | None = None
        self.token_body_override: bytes | None = None
        self.metadata_override: JSONDict | bytes | None = None
        self.registration_error: tuple[int, JSONDict] | None = None

        self._lock = threading.RLock()
        self._requests: list[Recorded] = []
        #: Every access token issued (also the expired and revoked ones).
        self.issued: dict[str, Grant] = {}
        #: (client_id, auth method) of each token request whose client authenticated.
        self.client_auth: list[tuple[str, str]] = []
        #: Claims of every jwt-bearer grant assertion accepted.
        self.assertions: list[JSONDict] = []
        #: client_id -> the metadata registered with /register (as sent).
        self.registered: dict[str, JSONDict] = {}
        #: Every ID-JAG issued when playing an IdP.
        self.id_jags: list[str] = []
        self._clients: dict[str, _Client] = {}
        for client_id, secret in (clients or {}).items():
            self._clients[client_id] = _Client(client_id, secret, None if secret is not None else "none", None)
        for client_id, key in (jwt_clients or {}).items():
            self._clients[client_id] = _Client(client_id, None, "private_key_jwt", None, key)
        self._codes: dict[str, _Code] = {}
        self._used_codes: dict[str, _Code] = {}
        self._refreshes: dict[str, _Refresh] = {}
        self._jtis: set[str] = set()  # assertion jtis, for replay checks
        self._dpop_jtis: set[str] = set()
        self.dpop_nonce_value = secrets.token_urlsafe(16)
        #: The secret this server signs its ID-JAGs with (shared with the ASes trusting it).
        self.jag_secret = secrets.token_bytes(32)

        self._httpd: _Listener | None = None
        self._serve_thread: threading.Thread | None = None
        self._threads: set[threading.Thread] = set()
        self._conns: set[socket.socket] = set()
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> AuthServer:
        """Listen on 127.0.0.1 (a free port) and serve on background threads; returns self."""
        with self._lock:
            if self._httpd is not None or self._closed:
                raise RuntimeError("an AuthServer starts once")
            self._httpd = _Listener(self)
            # A short poll interval keeps close() (shutdown waits for the loop) fast.
            self._serve_thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                                  name="test-authserver", daemon=True)
            self._serve_thread.start()
        return self

    def close(self) -> None:
        """Stop listening, shut every connection down and join every thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            httpd, thread = self._httpd, self._serve_thread
        if httpd is None or thread is None:
            return
        httpd.shutdown()
        thread.join()
        httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # wakes handlers waiting for a keep-alive connection's next request
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        while True:
            with self._lock:
                threads = list(self._threads)
            if not threads:
                break
            for t in threads:
                t.join()

    def __enter__(self) -> AuthServer:
        return self.start() if self._httpd is None else self

    # -- a person, played -------------------------------------------------------------

    def redirect_for(self, authorization_url: str) -> str:
        """Approve `authorization_url` as a person would, and return the
        address the browser is then sent to (the redirect, not followed).

        Example::

            callback_url = auth_server.redirect_for(oauth.start().url)
            oauth.finish(callback_url)
        """
        status, location = _get(authorization_url)
        if status != 302 or not location:
            raise RuntimeError(f"the authorization request was answered {status}, not with a redirect")
        return location

    def approve(self, authorization_url: str) -> None:
        """Play the person at the browser in a background thread: approve
        and follow the redirect to the client's redirect URI (a loopback
        listener). Returns at once; `close()` joins the thread.

        Example::

            oauth = OAuth(redirect=LoopbackRedirect(open_browser=False, show=auth_server.approve))
        """
        def browse() -> None:
            try:
                _get(self.redirect_for(authorization_url))
            except (OSError, http.client.HTTPException, RuntimeError):
                pass  # the client's listener times out and says so
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=browse, name="test-authserver-browser", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self, request: socket.socket, client_address: Any) -> None:
        thread = threading.Thread(target=self._connection, args=(request, client_address),
                                  name="test-authserver-conn", daemon=True)
        with self._lock:
            self._threads.add(thread)
            self._conns.add(request)
        thread.start()

    def _connection(self, request: socket.socket, client_address: Any) -> None:
        httpd = self._httpd
        assert httpd is not None
        try:
            httpd.finish_request(request, client_address)
        except Exception:
            pass  # the client went away; nothing to report
        finally:
            httpd.shutdown_request(request)
            with self._lock:
                self._conns.discard(request)
                self._threads.discard(threading.current_thread())

    # -- addresses ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The origin, "http://127.0.0.1:PORT" (after start())."""
        if self._httpd is None:
            raise RuntimeError("start() the AuthServer first")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def issuer(self) -> str:
        return self.url + self.issuer_path

    @property
    def authorization_endpoint(self) -> str:
        return self.issuer + "/authorize"

    @property
    def token_endpoint(self) -> str:
        return self.issuer + "/token"

    @property
    def registration_endpoint(self) -> str:
        return self.issuer + "/register"

    @property
    def metadata_urls(self) -> list[str]:
        """The URLs the metadata is served at, one per `discovery` style."""
        path = self.issuer_path
        where = {"oauth": f"/.well-known/oauth-authorization-server{path}",
                 "openid": f"/.well-known/openid-configuration{path}",
                 "openid-append": f"{path}/.well-known/openid-configuration"}
        return [self.url + where[style] for style in self.discovery]

    @property
    def metadata(self) -> JSONDict:
        """The metadata document served (before `metadata_override`)."""
        doc: JSONDict = {
            "issuer": self.issuer if self.issuer_override is None else self.issuer_override,
            "authorization_endpoint": self.authorization_endpoint,
            "token_endpoint": self.token_endpoint,
        }
        if self.registration:
            doc["registration_endpoint"] = self.registration_endpoint
        if self.scopes_supported is not None:
            doc["scopes_supported"] = list(self.scopes_supported)
        doc["response_types_supported"] = ["code"]
        doc["grant_types_supported"] = list(self.grant_types)
        doc["code_challenge_methods_supported"] = ["S256"]
        doc["token_endpoint_auth_methods_supported"] = list(self.auth_methods)
        if "private_key_jwt" in self.auth_methods:
            doc["token_endpoint_auth_signing_alg_values_supported"] = list(SIGNING_ALGS)
        if self.cimd:
            doc["client_id_metadata_document_supported"] = True
        if self.iss_parameter:
            doc["authorization_response_iss_parameter_supported"] = True
        if self.dpop:
            doc["dpop_signing_alg_values_supported"] = list(SIGNING_ALGS)
        if any(style.startswith("openid") for style in self.discovery):
            # What OpenID Connect Discovery requires besides the OAuth fields.
            doc["jwks_uri"] = self.issuer + "/jwks"
            doc["subject_types_supported"] = ["public"]
            doc["id_token_signing_alg_values_supported"] = ["RS256"]
        return doc

    # -- what tests look at ---------------------------------------------------------

    @property
    def requests(self) -> list[Recorded]:
        """Every request received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[Recorded]:
        """The requests to `path` (relative to the issuer, e.g. "/token", or absolute from the origin)."""
        wanted = {path, self.issuer_path + path}
        return [r for r in self.requests if r.path in wanted]

    @property
    def token_requests(self) -> int:
        return len(self.requests_to("/token"))

    @property
    def authorization_requests(self) -> int:
        return len(self.requests_to("/authorize"))

    def introspect(self, token: str) -> Grant | None:
        """The grant of a valid (known, unrevoked, unexpired) access token, else None."""
        with self._lock:
            grant = self.issued.get(token)
            return grant if grant is not None and grant.valid() else None

    def expire_all(self) -> None:
        """Make every access token issued so far expired (refresh tokens stay good)."""
        now = time.time()
        with self._lock:
            for grant in self.issued.values():
                grant.expires_at = now - 1

    def revoke(self, token: str) -> None:
        """Revoke an access token or a refresh token."""
        with self._lock:
            self._refreshes.pop(token, None)
            if token in self.issued:
                self.issued[token].revoked = True

    def rotate_dpop_nonce(self) -> str:
        """Pick a new DPoP nonce (proofs with the old one get use_dpop_nonce); returns it."""
        with self._lock:
            self.dpop_nonce_value = secrets.token_urlsafe(16)
            return self.dpop_nonce_value

    # -- serving --------------------------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        split = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        if length > _MAX_BODY or "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
            h.close_connection = True
            h.reply(413, b"", {"Connection": "close"})
            return
        body = h.rfile.read(length) if length else b""
        content_type = (h.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        query = parse_qs(split.query, keep_blank_values=True)
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True) \
            if content_type == "application/x-www-form-urlencoded" else {}
        parsed: Any = None
        if content_type == "application/json":
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        record = Recorded(h.command, split.path, _first(query), {k.lower(): v for k, v in h.headers.items()},
                          _first(form), parsed, body)
        with self._lock:
            self._requests.append(record)
        # OAuth 2.1 §3.1: a parameter must not be sent more than once.
        repeated = sorted(name for name, values in (*query.items(), *form.items()) if len(values) > 1)
        try:
            status, headers, payload = self._route(h.command, record, repeated)
        except Exception as exc:  # a bug here should fail the test loudly, not hang the client
            status, headers, payload = 500, {"Content-Type": "text/plain"}, repr(exc).encode()
        h.reply(status, payload, headers)

    def _route(self, method: str, r: Recorded, repeated: list[str]) -> _Answer:
        path, base = r.path, self.issuer_path
        if method == "GET" and self.url + path in self.metadata_urls:
            override = self.metadata_override
            if isinstance(override, bytes):
                return 200, {"Content-Type": "application/json"}, override
            return _json(200, self.metadata if override is None else override)
        if method == "GET" and path == base + "/jwks" and any(s.startswith("openid") for s in self.discovery):
            return _json(200, {"keys": []})
        if path == base + "/authorize" and method == "GET":
            return self._authorize(r.query, repeated)
        if path == base + "/token" and method == "POST":
            return self._token(r, repeated)
        if path == base + "/register" and method == "POST" and self.registration:
            return self._register(r)
        if path in (base + "/authorize", base + "/token") or (path == base + "/register" and self.registration):
            return 405, {"Allow": "GET" if path.endswith("/authorize") else "POST"}, b""
        return _json(404, {"error": "not_found"})

    # -- /authorize -----------------------------------------------------------------

    def _iss(self) -> str | None:
        if self.iss_override is not None:
            return self.iss_override or None
        return self.issuer if self.iss_parameter else None

    def _client(self, client_id: str | None) -> _Client | None:
        """A known client: pre-registered, registered, or (with cimd) an https URL client_id."""
        if not client_id:
            return None
        with self._lock:
            client = self._clients.get(client_id)
        if client is None and self.cimd:
            url = urlsplit(client_id)
            if url.scheme == "https" and url.hostname and url.path not in ("", "/") and not url.fragment:
                return _Client(client_id, None, "none", None)
        return client

    def _authorize(self, q: dict[str, str], repeated: list[str]) -> _Answer:
        client = self._client(q.get("client_id"))
        if client is None:
            return _json(400, {"error": "invalid_request", "error_description": "unknown client_id"})
        redirect_uri = q.get("redirect_uri")
        allowed = client.redirect_uris
        if redirect_uri is None:
            # Only a client with exactly one registered redirect URI may omit it.
            target = allowed[0] if allowed is not None and len(allowed) == 1 else None
        elif allowed is None or any(_same_redirect(uri, redirect_uri) for uri in allowed):
            target = redirect_uri
        else:
            target = None
        if target is None or urlsplit(target).fragment or not urlsplit(target).scheme:
            # Never redirect to a URI the client has not registered (open redirector).
            return _json(400, {"error": "invalid_request", "error_description": "invalid or unregistered redirect_uri"})
        state = q.get("state")

        def redirect(params: dict[str, str]) -> _Answer:
            if state is not None:
                params["state"] = state
            iss = self._iss()
            if iss is not None:
                params["iss"] = iss
            separator = "&" if urlsplit(target).query else "?"
            return 302, {"Location": target + separator + urlencode(params), "Cache-Control": "no-store"}, b""

        def error(code: str, description: str) -> _Answer:
            return redirect({"error": code, "error_description": description})

        if repeated:
            return error("invalid_request", f"repeated parameters: {', '.join(repeated)}")
        if q.get("response_type") != "code":
            return error("unsupported_response_type", "response_type must be code")
        if not q.get("code_challenge"):
            return error("invalid_request", "code_challenge is required (PKCE)")
        if q.get("code_challenge_method") != "S256":
            return error("invalid_request", "code_challenge_method must be S256")
        if _S256_CHALLENGE.fullmatch(q["code_challenge"]) is None:
            return error("invalid_request", "an S256 code_challenge is 43 base64url characters")
        if not state:
            return error("invalid_request", "state is required")
        if self.deny:
            return error("access_denied", "the user denied the request")
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = _Code(client.client_id, redirect_uri, q["code_challenge"], q.get("resource"),
                                      self._granted(_scopes(q.get("scope"))), time.time() + CODE_LIFETIME)
        return redirect({"code": code})

    def _granted(self, requested: frozenset[str]) -> frozenset[str]:
        return frozenset(self.grant_scopes(set(requested))) if self.grant_scopes is not None else requested

    # -- /token ---------------------------------------------------------------------

    def _token(self, r: Recorded, repeated: list[str]) -> _Answer:
        headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
        with self._lock:
            failure, self.fail_next_token = self.fail_next_token, None
            raw = self.token_body_override
            if self.dpop_nonce:
                headers["DPoP-Nonce"] = self.dpop_nonce_value
        if failure is not None:
            return _json(failure[0], failure[1], headers)
        if raw is not None:
            return 200, {"Content-Type": "application/json", **headers}, raw
        try:
            if r.headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/x-www-form-urlencoded":
                raise OAuthError("invalid_request", "the token request must be application/x-www-form-urlencoded")
            if repeated:
                raise OAuthError("invalid_request", f"repeated parameters: {', '.join(repeated)}")
            grant_type = r.form.get("grant_type")
            if grant_type not in self.grant_types:
                raise OAuthError("unsupported_grant_type", f"grant_type {grant_type!r} is not supported")
            client = self._authenticate(r)
            jkt = None
            if self.dpop:
                with self._lock:
                    nonce = self.dpop_nonce_value if self.dpop_nonce else None
                    jkt = check_dpop_proof(r.headers.get("dpop"), method="POST", url=self.token_endpoint,
                                           seen=self._dpop_jtis, nonce=nonce)
            handler = {
                "authorization_code": self._authorization_code,
                "refresh_token": self._refresh,
                "client_credentials": self._client_credentials,
                JWT_BEARER: self._jwt_bearer,
                TOKEN_EXCHANGE: self._token_exchange,
            }[grant_type]
            with self._lock:
                return _json(200, handler(client, r.form, jkt), headers)
        except OAuthError as exc:
            return _json(exc.status, {"error": exc.error, "error_description": exc.description},
                         {**headers, **exc.headers})

    def _authenticate(self, r: Recorded) -> _Client | None:
        """The client authenticated by this token request (None when it sent no
        credentials nor client_id); records the method used."""
        form = r.form
        used: list[tuple[str, str, str | None]] = []  # (method, client_id, secret)
        authorization = r.headers.get("authorization", "")
        if authorization[:6].lower() == "basic ":
            try:
                decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
                raw_id, _, raw_secret = decoded.partition(":")
            except ValueError:
                raise OAuthError("invalid_client", "malformed Basic credentials", 401) from None
            # RFC 6749 §2.3.1: both halves are form-urlencoded before base64.
            used.append(("client_secret_basic", unquote_plus(raw_id), unquote_plus(raw_secret)))
        if "client_secret" in form:
            used.append(("client_secret_post", form.get("client_id", ""), form["client_secret"]))
        if "client_assertion" in form or "client_assertion_type" in form:
            used.append(("private_key_jwt", "", None))
        if len(used) > 1:
            raise OAuthError("invalid_request", "more than one client authentication method")
        if not used:
            if "client_id" not in form:
                return None
            used.append(("none", form["client_id"], None))
        method, client_id, secret = used[0]
        if method == "private_key_jwt":
            client = self._check_client_assertion(form)
        else:
            basic = {"WWW-Authenticate": 'Basic realm="token"'} if method == "client_secret_basic" else {}
            known = self._client(client_id)
            if known is None:
                raise OAuthError("invalid_client", f"unknown client {client_id!r}", 401, basic)
            client = known
            if method == "none":
                if client.secret is not None or client.method not in (None, "none"):
                    raise OAuthError("invalid_client", "this client must authenticate", 401)
            else:
                allowed = client.method == method or (client.method is None and method in self.auth_methods)
                if client.secret is None or not allowed:
                    raise OAuthError("invalid_client", f"{method} is not this client's auth method", 401, basic)
                if not hmac.compare_digest(client.secret.encode(), (secret or "").encode()):
                    raise OAuthError("invalid_client", "wrong client secret", 401, basic)
        if "client_id" in form and form["client_id"] != client.client_id:
            raise OAuthError("invalid_client", "client_id does not match the authenticated client", 401)
        with self._lock:
            self.client_auth.append((client.client_id, method))
        return client

    def _check_assertion_claims(self, claims: JSONDict, what: str) -> None:
        """aud is this server, exp is in the future, jti is new (RFC 7523 §3)."""
        if not any(aud in (self.issuer, self.token_endpoint) for aud in _audiences(claims)):
            raise ValueError(f"{what} aud {claims.get('aud')!r} is neither the issuer nor the token endpoint")
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool) or exp <= time.time():
            raise ValueError(f"{what} is expired or has no exp")
        jti = claims.get("jti")
        if jti is not None:
            key = f"{claims.get('iss')}\0{jti}"
            with self._lock:
                if key in self._jtis:
                    raise ValueError(f"{what} jti replayed")
                self._jtis.add(key)

    def _check_client_assertion(self, form: Mapping[str, str]) -> _Client:
        if form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE:
            raise OAuthError("invalid_client", f"client_assertion_type must be {CLIENT_ASSERTION_TYPE}", 401)
        assertion = form.get("client_assertion", "")
        try:
            _, claimed = unverified(assertion)
            client = self._client(claimed.get("iss"))
            if client is None or client.key is None:
                raise ValueError(f"no key for client {claimed.get('iss')!r}")
            if client.method not in (None, "private_key_jwt") or "private_key_jwt" not in self.auth_methods:
                raise ValueError("private_key_jwt is not this client's auth method")
            _, claims = verify_jwt(assertion, client.key)
            if claims.get("sub") != client.client_id:
                raise ValueError("the client assertion's sub must equal its iss, the client_id")
            if claims.get("jti") is None:
                raise ValueError("the client assertion has no jti")
            self._check_assertion_claims(claims, "the client assertion")
        except ValueError as exc:
            raise OAuthError("invalid_client", str(exc), 401) from None
        return client

    def _issue(self, *, client_id: str | None, scope: frozenset[str], resource: str | None, grant_type: str,
               jkt: str | None, subject: str | None, refresh: bool, refresh_scope: frozenset[str] | None = None) -> JSONDict:
        """Mint an access token (and a refresh token when asked and enabled); the token response."""
        token = secrets.token_urlsafe(24)
        lifetime = self.access_token_lifetime
        self.issued[token] = Grant(token, client_id, scope, resource, None if lifetime is None else time.time() + lifetime,
                                   self.issuer, grant_type, jkt, subject)
        answer: JSONDict = {"access_token": token, "token_type": "DPoP" if jkt else "Bearer"}
        if lifetime is not None:
            answer["expires_in"] = lifetime
        if refresh and self.refresh_tokens:
            refresh_token = secrets.token_urlsafe(24)
            self._refreshes[refresh_token] = _Refresh(client_id, scope if refresh_scope is None else refresh_scope,
                                                      resource, jkt, subject)
            answer["refresh_token"] = refresh_token
        if scope:
            answer["scope"] = " ".join(sorted(scope))
        return answer

    def _authorization_code(self, client: _Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
        code = form.get("code", "")
        state = self._codes.pop(code, None)
        if state is None:
            replayed = self._used_codes.get(code)
            if replayed is not None:
                # RFC 6749 §4.1.2: a replayed code revokes what it was exchanged for.
                for token in replayed.tokens:
                    self.issued[token].revoked = True
                raise OAuthError("invalid_grant", "the authorization code was already used")
            raise OAuthError("invalid_grant", "unknown authorization code")
        self._used_codes[code] = state
        if client is None or client.client_id != state.client_id:
            raise OAuthError("invalid_grant", "the code was issued to another client")
        if time.time() > state.expires_at:
            raise OAuthError("invalid_grant", "the authorization code expired")
        if form.get("redirect_uri") != state.redirect_uri:
            raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = form.get("code_verifier", "")
        if _VERIFIER.fullmatch(verifier) is None or b64url(hashlib.sha256(verifier.encode()).digest()) != state.challenge:
            raise OAuthError("invalid_grant", "PKCE verification failed")
        if form.get("resource") != state.resource:
            raise OAuthError("invalid_target", "resource differs from the authorization request's")
        answer = self._issue(client_id=client.client_id, scope=state.scope, resource=state.resource,
                             grant_type="authorization_code", jkt=jkt, subject="user", refresh=True)
        state.tokens.append(answer["access_token"])
        return answer

    def _refresh(self, client: _Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
        refresh_token = form.get("refresh_token", "")
        state = self._refreshes.get(refresh_token)
        if state is None:
            raise OAuthError("invalid_grant", "unknown, used or revoked refresh token")
        if (client.client_id if client else None) != state.client_id:
            raise OAuthError("invalid_grant", "the refresh token was issued to another client")
        if "resource" in form and form["resource"] != state.resource:
            raise OAuthError("invalid_target", "resource differs from the original grant's")
        scope = _scopes(form["scope"]) if "scope" in form else state.scope
        if not scope <= state.scope:
            raise OAuthError("invalid_scope", "a refresh cannot widen the scope")
        if state.jkt is not None and jkt != state.jkt and (client is None or client.secret is None):
            # RFC 9449 §5: a public client's refresh token is bound to its DPoP key.
            raise OAuthError("invalid_grant", "the refresh token is bound to another DPoP key")
        del self._refreshes[refresh_token]  # rotation: the old refresh token is now invalid
        return self._issue(client_id=state.client_id, scope=scope, resource=state.resource, grant_type="refresh_token",
                           jkt=jkt, subject=state.subject, refresh=True, refresh_scope=state.scope)

    def _client_credentials(self, client: _Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
        if client is None:
            raise OAuthError("invalid_client", "client authentication is required", 401)
        if client.secret is None and client.key is None:
            raise OAuthError("unauthorized_client", "a public client cannot use client_credentials")
        return self._issue(client_id=client.client_id, scope=self._granted(_scopes(form.get("scope"))),
                           resource=form.get("resource"), grant_type="client_credentials", jkt=jkt,
                           subject=client.client_id, refresh=False)

    def _jwt_bearer(self, client: _Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
        assertion = form.get("assertion", "")
        try:
            header, claimed = unverified(assertion)
            if header.get("typ") == ID_JAG_TYP:
                idp = next((idp for idp in self.trusted_idps if idp.issuer == claimed.get("iss")), None)
                if idp is None:
                    raise ValueError(f"ID-JAG from an untrusted issuer {claimed.get('iss')!r}")
                _, claims = verify_jwt(assertion, idp.jag_secret, algs=("HS256",))
                if client is not None and claims.get("client_id") != client.client_id:
                    raise ValueError("the ID-JAG was issued for another client")
            else:
                issuer = self._client(claimed.get("iss"))
                if issuer is None or issuer.key is None:
                    raise ValueError(f"no key for assertion issuer {claimed.get('iss')!r}")
                _, claims = verify_jwt(assertion, issuer.key)
            if not claims.get("sub"):
                raise ValueError("the assertion has no sub")
            self._check_assertion_claims(claims, "the assertion")
        except ValueError as exc:
            raise OAuthError("invalid_grant", str(exc)) from None
        resource = form.get("resource", claims.get("resource"))
        if "resource" in form and claims.get("resource") not in (None, form["resource"]):
            raise OAuthError("invalid_target", "resource differs from the ID-JAG's")
        scope = _scopes(claims["scope"]) if isinstance(claims.get("scope"), str) else _scopes(form.get("scope"))
        self.assertions.append(claims)
        client_id = client.client_id if client else claims.get("client_id", claims.get("iss"))
        return self._issue(client_id=client_id, scope=self._granted(scope), resource=resource, grant_type=JWT_BEARER,
                           jkt=jkt, subject=claims["sub"], refresh=False)

    def _token_exchange(self, client: _Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
        """Play the enterprise IdP: an ID token for an ID-JAG (RFC 8693, ID-JAG draft §4.3)."""
        if client is None:
            raise OAuthError("invalid_client", "client authentication is required", 401)
        if form.get("requested_token_type") != ID_JAG_TYPE:
            raise OAuthError("invalid_request", f"requested_token_type must be {ID_JAG_TYPE}")
        if form.get("subject_token_type") != ID_TOKEN_TYPE:
            raise OAuthError("invalid_request", f"subject_token_type must be {ID_TOKEN_TYPE}")
        if not form.get("audience"):
            raise OAuthError("invalid_request", "audience (the authorization server's issuer) is required")
        subject = self.idp_id_tokens.get(form.get("subject_token", ""))
        if subject is None:
            raise OAuthError("invalid_grant", "unknown subject_token")
        now = int(time.time())
        claims: JSONDict = {"iss": self.issuer, "sub": subject, "aud": form["audience"], "client_id": client.client_id,
                            "jti": secrets.token_urlsafe(16), "iat": now, "exp": now + ID_JAG_LIFETIME}
        if "resource" in form:
            claims["resource"] = form["resource"]
        if "scope" in form:
            claims["scope"] = " ".join(sorted(self._granted(_scopes(form["scope"]))))
        jag = sign_jwt(claims, self.jag_secret, header={"typ": ID_JAG_TYP})
        self.id_jags.append(jag)
        answer: JSONDict = {"issued_token_type": ID_JAG_TYPE, "access_token": jag, "token_type": "N_A",
                            "expires_in": ID_JAG_LIFETIME}
        if "scope" in claims:
            answer["scope"] = claims["scope"]
        return answer

    # -- /register ------------------------------------------------------------------

    def _register(self, r: Recorded) -> _Answer:
        headers = {"Cache-Control": "no-store"}
        with self._lock:
            failure = self.registration_error
        if failure is not None:
            return _json(failure[0], failure[1], headers)

        def invalid(error: str, description: str) -> _Answer:
            return _json(400, {"error": error, "error_description": description}, headers)

        doc = r.json
        if not isinstance(doc, dict):
            return invalid("invalid_client_metadata", "the body must be a JSON object (application/json)")
        grant_types = doc.get("grant_types", ["authorization_code"])
        method = doc.get("token_endpoint_auth_method", "client_secret_basic")
        redirect_uris = doc.get("redirect_uris", [])
        if not isinstance(grant_types, list) or not all(isinstance(g, str) for g in grant_types):
            return invalid("invalid_client_metadata", "grant_types must be a list of strings")
        if method not in self.auth_methods:
            return invalid("invalid_client_metadata", f"token_endpoint_auth_method {method!r} is not supported")
        if not isinstance(redirect_uris, list) or not all(isinstance(u, str) and urlsplit(u).scheme for u in redirect_uris):
            return invalid("invalid_redirect_uri", "redirect_uris must be a list of absolute URIs")
        if "authorization_code" in grant_types and not redirect_uris:
            return invalid("invalid_redirect_uri", "redirect_uris are required for authorization_code")
        if any(urlsplit(u).fragment for u in redirect_uris):
            return invalid("invalid_redirect_uri", "a redirect URI must not have a fragment")
        if self.strict_application_type and doc.get("application_type", "web") != "native" and any(
                urlsplit(u).scheme == "http" and urlsplit(u).hostname in ("localhost", "127.0.0.1", "::1")
                for u in redirect_uris):
            # OpenID Connect Registration: web clients must not use http loopback redirect URIs.
            return invalid("invalid_redirect_uri", "http loopback redirect URIs need application_type native")
        key = None
        if method == "private_key_jwt":
            keys = doc.get("jwks", {}).get("keys") if isinstance(doc.get("jwks"), dict) else None
            if not keys or not isinstance(keys[0], dict):
                return invalid("invalid_client_metadata", "private_key_jwt needs an inline jwks")
            key = keys[0]
        client_id = secrets.token_urlsafe(12)
        secret = secrets.token_urlsafe(24) if method in SECRET_METHODS else None
        answer: JSONDict = {**doc, "client_id": client_id, "client_id_issued_at": int(time.time()),
                            "grant_types": grant_types, "token_endpoint_auth_method": method}
        if secret is not None:
            answer["client_secret"] = secret
            answer["client_secret_expires_at"] = 0
        with self._lock:
            self._clients[client_id] = _Client(client_id, secret, method, tuple(redirect_uris), key)
            self.registered[client_id] = doc
        return _json(201, answer, headers)


# --------------------------------------------------------------------------
# The protected MCP server


PRM_STYLES = ("path", "root", "header-only")
_CUSTOM_PRM_PATH = "/metadata/mcp-resource.json"


class ProtectedMCP:
    """The test MCP server behind OAuth: a resource server in front of `HTTPServer`.

    Arguments:

    * `auth`: the authorization server(s) listed in the protected resource
      metadata; tokens are valid when one of them issued them (`introspect`).
    * `server`: the MCP server (default: `demo_server()`).
    * `prm`: where the protected resource metadata (RFC 9728) is served:
      "path" (`/.well-known/oauth-protected-resource/mcp`), "root"
      (`/.well-known/oauth-protected-resource`) or "header-only" (a custom
      URL only the 401 challenge names).
    * `prm_in_header`: name the metadata URL in challenges (`resource_metadata`).
    * `resource`: the PRM's `resource` (default: `url`), for mismatch tests;
      tokens for either are accepted.
    * `challenge_scope`: the `scope` of 401 challenges.
    * `scopes_supported`: the PRM's `scopes_supported`.
    * `required_scopes`: scopes every request needs (else 403).
    * `tool_scopes`: tool name -> scopes a `tools/call` of it needs (else 403
      insufficient_scope naming all the scopes the call needs). The tool is
      read from the `Mcp-Name` header, so this applies to 2026-07-28 requests.
    * `check_audience`: refuse tokens whose `resource` is not this server (401).
    * `dpop`: require `Authorization: DPoP <token>` with a valid proof per
      request (htm, htu = `url`, ath, bound to the token's key); challenges
      use the DPoP scheme. `dpop_nonce`: proofs also need this server's
      current nonce (401 `DPoP error="use_dpop_nonce"` + `DPoP-Nonce`).
    * other keyword arguments go to `HTTPServer` (e.g. `response_mode`).

    Settable at run time: `authorization_servers` (see `switch_to`),
    `challenge_scope`, `tool_scopes`, `required_scopes`, `prm_override`
    (a dict or raw bytes served as the PRM).
    Recorded: `seen_tokens` (the Authorization header of every request to the
    MCP endpoint, None when absent); `http.requests` has every request."""

    def __init__(
        self,
        auth: AuthServer | Sequence[AuthServer],
        *,
        server: Server | None = None,
        prm: str = "path",
        prm_in_header: bool = True,
        resource: str | None = None,
        challenge_scope: str | None = None,
        scopes_supported: Sequence[str] | None = None,
        required_scopes: Collection[str] = (),
        tool_scopes: Mapping[str, Collection[str]] | None = None,
        check_audience: bool = True,
        dpop: bool = False,
        dpop_nonce: bool = False,
        **http_options: Any,
    ) -> None:
        if prm not in PRM_STYLES:
            raise ValueError(f"prm must be one of {PRM_STYLES}")
        if prm == "header-only" and not prm_in_header:
            raise ValueError("prm='header-only' needs prm_in_header: nothing else leads to it")
        self.authorization_servers: list[AuthServer] = [auth] if isinstance(auth, AuthServer) else list(auth)
        self.prm = prm
        self.prm_in_header = prm_in_header
        self.resource_override = resource
        self.challenge_scope = challenge_scope
        self.scopes_supported = None if scopes_supported is None else list(scopes_supported)
        self.required_scopes = frozenset(required_scopes)
        self.tool_scopes = {name: frozenset(scopes) for name, scopes in (tool_scopes or {}).items()}
        self.check_audience = check_audience
        self.dpop = dpop or dpop_nonce
        self.dpop_nonce = dpop_nonce
        self.dpop_nonce_value = secrets.token_urlsafe(16)
        self.prm_override: JSONDict | bytes | None = None
        self.seen_tokens: list[str | None] = []
        self._dpop_jtis: set[str] = set()
        self._lock = threading.Lock()
        self.http = HTTPServer(server or demo_server(), gate=self._gate, **http_options)

    def start(self) -> ProtectedMCP:
        self.http.start()
        return self

    def close(self) -> None:
        """Close the MCP server (the authorization servers are the caller's)."""
        self.http.close()

    def __enter__(self) -> ProtectedMCP:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The MCP endpoint, e.g. "http://127.0.0.1:PORT/mcp"."""
        return self.http.url

    @property
    def origin(self) -> str:
        split = urlsplit(self.url)
        return f"{split.scheme}://{split.netloc}"

    @property
    def resource(self) -> str:
        """The PRM's `resource`."""
        return self.url if self.resource_override is None else self.resource_override

    @property
    def _prm_path(self) -> str:
        return {"path": "/.well-known/oauth-protected-resource" + self.http.path,
                "root": "/.well-known/oauth-protected-resource", "header-only": _CUSTOM_PRM_PATH}[self.prm]

    @property
    def prm_url(self) -> str:
        return self.origin + self._prm_path

    @property
    def prm_document(self) -> JSONDict:
        """The protected resource metadata served (before `prm_override`)."""
        doc: JSONDict = {"resource": self.resource,
                         "authorization_servers": [a.issuer for a in self.authorization_servers],
                         "bearer_methods_supported": ["header"]}
        if self.scopes_supported is not None:
            doc["scopes_supported"] = list(self.scopes_supported)
        if self.dpop:
            doc["dpop_signing_alg_values_supported"] = list(SIGNING_ALGS)
            doc["dpop_bound_access_tokens_required"] = True
        return doc

    def switch_to(self, *auth: AuthServer) -> None:
        """Migrate to other authorization server(s): the PRM lists them, and
        tokens of the previous ones stop being accepted."""
        with self._lock:
            self.authorization_servers = list(auth)

    def rotate_dpop_nonce(self) -> str:
        with self._lock:
            self.dpop_nonce_value = secrets.token_urlsafe(16)
            return self.dpop_nonce_value

    # -- the gate -------------------------------------------------------------------

    def _gate(self, request: Gated) -> GateAnswer | None:
        path = urlsplit(request.path).path
        if path == self._prm_path and request.method == "GET":
            override = self.prm_override
            if isinstance(override, bytes):
                return GateAnswer(200, {"Content-Type": "application/json"}, override)
            body = self.prm_document if override is None else override
            return GateAnswer(200, {"Content-Type": "application/json"}, json.dumps(body).encode())
        if path != self.http.path:
            return None  # the HTTPServer answers 404
        authorization = request.headers.get("Authorization")
        with self._lock:
            self.seen_tokens.append(authorization)
        try:
            self._authorize(request, authorization)
        except OAuthError as exc:
            return self._challenge(exc)
        return None

    def _authorize(self, request: Gated, authorization: str | None) -> None:
        """Let the request through, or raise the OAuthError to challenge with."""
        scheme = "DPoP" if self.dpop else "Bearer"
        if not authorization:
            raise OAuthError("", "authorization required", 401)
        given, _, token = authorization.partition(" ")
        token = token.strip()
        if given.lower() != scheme.lower() or not token:
            raise OAuthError("invalid_token", f"use the {scheme} authorization scheme", 401)
        with self._lock:
            servers = list(self.authorization_servers)
        grant = next((g for g in (a.introspect(token) for a in servers) if g is not None), None)
        if grant is None:
            raise OAuthError("invalid_token", "unknown, expired or revoked access token", 401)
        if self.check_audience and grant.resource not in (self.url, self.resource):
            raise OAuthError("invalid_token", f"the token is for {grant.resource!r}, not this server", 401)
        if self.dpop:
            with self._lock:
                nonce = self.dpop_nonce_value if self.dpop_nonce else None
                jkt = check_dpop_proof(request.headers.get("DPoP"), method=request.method, url=self.url,
                                       seen=self._dpop_jtis, nonce=nonce, access_token=token)
            if jkt != grant.jkt:
                raise OAuthError("invalid_token", "the token is not bound to the proof's key", 401)
        needed = set(self.required_scopes)
        if request.headers.get("Mcp-Method") == "tools/call":
            name = decode_header_value(request.headers.get("Mcp-Name") or "")
            needed |= self.tool_scopes.get(name or "", frozenset())
        if not needed <= grant.scope:
            raise OAuthError("insufficient_scope", "the token lacks scopes this request needs", 403,
                             {"scope": " ".join(sorted(needed))})

    def _challenge(self, exc: OAuthError) -> GateAnswer:
        """The 401/403 answer with its WWW-Authenticate challenge (RFC 6750 §3, RFC 9449 §7.1)."""
        params: list[tuple[str, str]] = []
        scope = exc.headers.get("scope") or (self.challenge_scope if exc.status == 401 else None)
        if exc.status == 403:
            params += [("error", exc.error), ("scope", scope or "")]
            if self.prm_in_header:
                params.append(("resource_metadata", self.prm_url))
        else:
            if self.prm_in_header:
                params.append(("resource_metadata", self.prm_url))
            if scope:
                params.append(("scope", scope))
            if exc.error:
                params.append(("error", exc.error))
        if exc.error:
            params.append(("error_description", exc.description))
        if self.dpop:
            params.append(("algs", " ".join(SIGNING_ALGS)))
        scheme = "DPoP" if self.dpop else "Bearer"
        challenge = scheme + (" " + ", ".join(f'{k}="{v}"' for k, v in params) if params else "")
        headers = {"WWW-Authenticate": challenge, "Content-Type": "application/json"}
        if self.dpop_nonce and exc.error in ("use_dpop_nonce", "invalid_dpop_proof"):
            headers["DPoP-Nonce"] = self.dpop_nonce_value
        status = 401 if exc.error in ("use_dpop_nonce", "invalid_dpop_proof") else exc.status
        body = {"error": exc.error or "invalid_token", "error_description": exc.description}
        return GateAnswer(status, headers, json.dumps(body).encode())
