"""A local OAuth 2.1 authorization server for tests: `AuthServer`.

It owns the server's lifecycle (a `_listener.Listener` on 127.0.0.1, one
tracked thread per connection), its configuration and run-time knobs, the
metadata document at the well-known URL of each `discovery` style, the
routing of requests, `GET /authorize` (answered at once with a 302, no
person involved), `POST /register` (RFC 7591), the played person
(`redirect_for`, `approve`) and what tests read (`requests`, `issued`,
`client_auth`, `assertions`, `registered`, `id_jags`, `introspect`). The
token endpoint, its client authentication and grant types live in
`_token_endpoint`; JWT and DPoP checks in `_jwt`.

Every request is recorded before it is answered; the logs keep the newest
`max_records` entries. All state is guarded by one re-entrant `_lock`;
nothing blocks while holding it. See `mcp_sync.testing.auth` for the
overview.
"""

from __future__ import annotations

import collections
import http.client
import http.server
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from . import _token_endpoint
from ._jwt import SIGNING_ALGS
from ._listener import DEFAULT_MAX_RECORDS, Listener, SocketServer
from ._oauth import (
    AUTH_METHODS,
    CODE_LIFETIME,
    DISCOVERY_STYLES,
    JWT_BEARER,
    MAX_BODY,
    S256_CHALLENGE,
    SECRET_METHODS,
    TOKEN_EXCHANGE,
    Answer,
    Client,
    Code,
    Grant,
    JSONDict,
    Recorded,
    Refresh,
    first_values,
    http_get,
    json_answer,
    same_redirect,
    scopes,
)


class _Handler(http.server.BaseHTTPRequestHandler):
    """Hands every request of a connection to its `AuthServer`."""

    protocol_version = "HTTP/1.1"  # keep-alive, like a real server
    server_version = "mcp-sync-test-authserver"
    server: SocketServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self) -> None:
        owner: AuthServer = self.server.owner
        owner._handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _dispatch

    def reply(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


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
    * `max_records`: how many entries each log keeps (`requests`,
      `client_auth`, `assertions`, `id_jags`: the newest; default 1000).
      `issued`, `registered` and the codes and refresh tokens are state, not
      logs: they keep everything, for introspection and replay checks.

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
        max_records: int = DEFAULT_MAX_RECORDS,
    ) -> None:
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
            raise ValueError("max_records must be a positive integer")
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
        # The logs (`requests`, `client_auth`, `assertions`, `id_jags`) keep the newest `max_records`.
        self._requests: collections.deque[Recorded] = collections.deque(maxlen=max_records)
        #: Every access token issued (also the expired and revoked ones): introspection needs them all.
        self.issued: dict[str, Grant] = {}
        self._client_auth: collections.deque[tuple[str, str]] = collections.deque(maxlen=max_records)
        self._assertions: collections.deque[JSONDict] = collections.deque(maxlen=max_records)
        #: client_id -> the metadata registered with /register (as sent).
        self.registered: dict[str, JSONDict] = {}
        self._id_jags: collections.deque[str] = collections.deque(maxlen=max_records)
        self._clients: dict[str, Client] = {}
        for client_id, secret in (clients or {}).items():
            self._clients[client_id] = Client(client_id, secret, None if secret is not None else "none", None)
        for client_id, key in (jwt_clients or {}).items():
            self._clients[client_id] = Client(client_id, None, "private_key_jwt", None, key)
        self._codes: dict[str, Code] = {}
        self._used_codes: dict[str, Code] = {}
        self._refreshes: dict[str, Refresh] = {}
        self._jtis: set[str] = set()  # assertion jtis, for replay checks
        self._dpop_jtis: set[str] = set()
        self.dpop_nonce_value = secrets.token_urlsafe(16)
        #: The secret this server signs its ID-JAGs with (shared with the ASes trusting it).
        self.jag_secret = secrets.token_bytes(32)

        self._listener: Listener | None = None
        #: The threads of `approve()` (the listener tracks the connection threads).
        self._threads: set[threading.Thread] = set()
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> AuthServer:
        """Listen on 127.0.0.1 (a free port) and serve on background threads; returns self."""
        with self._lock:
            if self._listener is not None or self._closed:
                raise RuntimeError("an AuthServer starts once")
            self._listener = Listener(self, ("127.0.0.1", 0), _Handler, lock=self._lock, name="test-authserver")
            self._listener.start()
        return self

    def close(self) -> None:
        """Stop listening, shut every connection down and join every thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            listener = self._listener
        if listener is None:
            return
        listener.stop_accepting()
        listener.shutdown_connections()  # wakes handlers waiting for a keep-alive connection's next request
        listener.join()
        while True:
            with self._lock:
                threads = list(self._threads)
            if not threads:
                break
            for t in threads:
                t.join()

    def __enter__(self) -> AuthServer:
        return self.start() if self._listener is None else self

    # -- a person, played -------------------------------------------------------------

    def redirect_for(self, authorization_url: str) -> str:
        """Approve `authorization_url` as a person would, and return the
        address the browser is then sent to (the redirect, not followed).

        Example::

            callback_url = auth_server.redirect_for(oauth.start().url)
            oauth.finish(callback_url)
        """
        status, location = http_get(authorization_url)
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
                http_get(self.redirect_for(authorization_url))
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

    # -- addresses ------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The origin, "http://127.0.0.1:PORT" (after start())."""
        if self._listener is None:
            raise RuntimeError("start() the AuthServer first")
        return f"http://127.0.0.1:{self._listener.port}"

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
        """The requests received, oldest first (a copy): all of them, or the
        newest `max_records` once more arrived."""
        with self._lock:
            return list(self._requests)

    @property
    def client_auth(self) -> list[tuple[str, str]]:
        """(client_id, auth method) of each token request whose client
        authenticated, oldest first (a copy of the newest `max_records`)."""
        with self._lock:
            return list(self._client_auth)

    @property
    def assertions(self) -> list[JSONDict]:
        """Claims of each jwt-bearer grant assertion accepted, oldest first
        (a copy of the newest `max_records`)."""
        with self._lock:
            return list(self._assertions)

    @property
    def id_jags(self) -> list[str]:
        """The ID-JAGs issued when playing an IdP, oldest first (a copy of the newest `max_records`)."""
        with self._lock:
            return list(self._id_jags)

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
        if length > MAX_BODY or "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
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
        record = Recorded(h.command, split.path, first_values(query), {k.lower(): v for k, v in h.headers.items()},
                          first_values(form), parsed, body)
        with self._lock:
            self._requests.append(record)
        # OAuth 2.1 §3.1: a parameter must not be sent more than once.
        repeated = sorted(name for name, values in (*query.items(), *form.items()) if len(values) > 1)
        try:
            status, headers, payload = self._route(h.command, record, repeated)
        except Exception as exc:  # a bug here should fail the test loudly, not hang the client
            status, headers, payload = 500, {"Content-Type": "text/plain"}, repr(exc).encode()
        h.reply(status, payload, headers)

    def _route(self, method: str, r: Recorded, repeated: list[str]) -> Answer:
        path, base = r.path, self.issuer_path
        if method == "GET" and self.url + path in self.metadata_urls:
            override = self.metadata_override
            if isinstance(override, bytes):
                return 200, {"Content-Type": "application/json"}, override
            return json_answer(200, self.metadata if override is None else override)
        if method == "GET" and path == base + "/jwks" and any(s.startswith("openid") for s in self.discovery):
            return json_answer(200, {"keys": []})
        if path == base + "/authorize" and method == "GET":
            return self._authorize(r.query, repeated)
        if path == base + "/token" and method == "POST":
            return self._token(r, repeated)
        if path == base + "/register" and method == "POST" and self.registration:
            return self._register(r)
        if path in (base + "/authorize", base + "/token") or (path == base + "/register" and self.registration):
            return 405, {"Allow": "GET" if path.endswith("/authorize") else "POST"}, b""
        return json_answer(404, {"error": "not_found"})

    # -- /authorize -----------------------------------------------------------------

    def _iss(self) -> str | None:
        if self.iss_override is not None:
            return self.iss_override or None
        return self.issuer if self.iss_parameter else None

    def _client(self, client_id: str | None) -> Client | None:
        """A known client: pre-registered, registered, or (with cimd) an https URL client_id."""
        if not client_id:
            return None
        with self._lock:
            client = self._clients.get(client_id)
        if client is None and self.cimd:
            url = urlsplit(client_id)
            if url.scheme == "https" and url.hostname and url.path not in ("", "/") and not url.fragment:
                return Client(client_id, None, "none", None)
        return client

    def _authorize(self, q: dict[str, str], repeated: list[str]) -> Answer:
        client = self._client(q.get("client_id"))
        if client is None:
            return json_answer(400, {"error": "invalid_request", "error_description": "unknown client_id"})
        redirect_uri = q.get("redirect_uri")
        allowed = client.redirect_uris
        if redirect_uri is None:
            # Only a client with exactly one registered redirect URI may omit it.
            target = allowed[0] if allowed is not None and len(allowed) == 1 else None
        elif allowed is None or any(same_redirect(uri, redirect_uri) for uri in allowed):
            target = redirect_uri
        else:
            target = None
        if target is None or urlsplit(target).fragment or not urlsplit(target).scheme:
            # Never redirect to a URI the client has not registered (open redirector).
            return json_answer(400, {"error": "invalid_request", "error_description": "invalid or unregistered redirect_uri"})
        state = q.get("state")

        def redirect(params: dict[str, str]) -> Answer:
            if state is not None:
                params["state"] = state
            iss = self._iss()
            if iss is not None:
                params["iss"] = iss
            separator = "&" if urlsplit(target).query else "?"
            return 302, {"Location": target + separator + urlencode(params), "Cache-Control": "no-store"}, b""

        def error(code: str, description: str) -> Answer:
            return redirect({"error": code, "error_description": description})

        if repeated:
            return error("invalid_request", f"repeated parameters: {', '.join(repeated)}")
        if q.get("response_type") != "code":
            return error("unsupported_response_type", "response_type must be code")
        if not q.get("code_challenge"):
            return error("invalid_request", "code_challenge is required (PKCE)")
        if q.get("code_challenge_method") != "S256":
            return error("invalid_request", "code_challenge_method must be S256")
        if S256_CHALLENGE.fullmatch(q["code_challenge"]) is None:
            return error("invalid_request", "an S256 code_challenge is 43 base64url characters")
        if not state:
            return error("invalid_request", "state is required")
        if self.deny:
            return error("access_denied", "the user denied the request")
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = Code(client.client_id, redirect_uri, q["code_challenge"], q.get("resource"),
                                     self._granted(scopes(q.get("scope"))), time.time() + CODE_LIFETIME)
        return redirect({"code": code})

    def _granted(self, requested: frozenset[str]) -> frozenset[str]:
        return frozenset(self.grant_scopes(set(requested))) if self.grant_scopes is not None else requested

    # -- /token ---------------------------------------------------------------------

    def _token(self, r: Recorded, repeated: list[str]) -> Answer:
        return _token_endpoint.answer(self, r, repeated)

    # -- /register ------------------------------------------------------------------

    def _register(self, r: Recorded) -> Answer:
        headers = {"Cache-Control": "no-store"}
        with self._lock:
            failure = self.registration_error
        if failure is not None:
            return json_answer(failure[0], failure[1], headers)

        def invalid(error: str, description: str) -> Answer:
            return json_answer(400, {"error": error, "error_description": description}, headers)

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
            self._clients[client_id] = Client(client_id, secret, method, tuple(redirect_uris), key)
            self.registered[client_id] = doc
        return json_answer(201, answer, headers)
