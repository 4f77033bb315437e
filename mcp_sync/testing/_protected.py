"""The test MCP server behind OAuth: `ProtectedMCP`, an OAuth resource server in front of `HTTPServer`.

It owns the protected resource's side of authorization: the protected
resource metadata (RFC 9728) at the chosen location, the gate that sees
every request before the MCP server does, token checks against its
authorization servers (`AuthServer.introspect`), audience, scopes (per
request and per tool, read from `Mcp-Name`) and DPoP proofs bound to the
token (RFC 9449), and the 401/403 challenges (RFC 6750 §3, MCP scope
challenges, `DPoP-Nonce`). The MCP server itself is an `HTTPServer`
(`self.http`); the authorization servers are the caller's.

`seen_tokens` logs the Authorization header of each request to the MCP
endpoint, keeping the newest `max_records`. State is guarded by `_lock`;
introspection runs outside it.
"""

from __future__ import annotations

import collections
import json
import secrets
import threading
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ._authserver import AuthServer
from ._jwt import SIGNING_ALGS, check_dpop_proof
from ._listener import DEFAULT_MAX_RECORDS
from ._oauth import JSONDict, OAuthError
from ._registry import Server
from ._streamable import GateAnswer, Gated, HTTPServer
from ._validation import decode_header_value
from .demo import demo_server

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
    * `max_records`: how many entries `seen_tokens` keeps (the newest;
      default 1000); also passed to the `HTTPServer` (`http.requests`).
    * other keyword arguments go to `HTTPServer` (e.g. `response_mode`).

    Settable at run time: `authorization_servers` (see `switch_to`),
    `challenge_scope`, `tool_scopes`, `required_scopes`, `prm_override`
    (a dict or raw bytes served as the PRM).
    Recorded: `seen_tokens` (the Authorization header of each request to the
    MCP endpoint, None when absent: the newest `max_records`); `http.requests`
    has the requests."""

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
        max_records: int = DEFAULT_MAX_RECORDS,
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
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
            raise ValueError("max_records must be a positive integer")
        self._seen_tokens: collections.deque[str | None] = collections.deque(maxlen=max_records)
        self._dpop_jtis: set[str] = set()
        self._lock = threading.Lock()
        self.http = HTTPServer(server or demo_server(), gate=self._gate, max_records=max_records, **http_options)

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
    def seen_tokens(self) -> list[str | None]:
        """The Authorization header of each request to the MCP endpoint (None
        when absent), oldest first: a copy of the newest `max_records`."""
        with self._lock:
            return list(self._seen_tokens)

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
            self._seen_tokens.append(authorization)
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
