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
* JWT helpers for tests: `sign_jwt`, `verify_jwt`, `unverified`, `public_jwk`,
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

The code lives in one module per concept: `_authserver` (`AuthServer`),
`_token_endpoint` (client authentication and grants), `_protected`
(`ProtectedMCP`), `_jwt` (JWTs, JWKs, DPoP proofs) and `_oauth` (the shared
vocabulary and records). Their per-request logs keep the newest
`max_records` entries (1000 by default).
"""

from __future__ import annotations

from ._authserver import AuthServer
from ._jwt import (
    jwk_thumbprint,
    make_dpop_proof,
    public_jwk,
    sign_jwt,
    unverified,
    verify_jwt,
)
from ._oauth import (
    CLIENT_ASSERTION_TYPE,
    ID_JAG_TYPE,
    ID_TOKEN_TYPE,
    JWT_BEARER,
    TOKEN_EXCHANGE,
    Grant,
    OAuthError,
    Recorded,
)
from ._protected import ProtectedMCP

__all__ = [
    "AuthServer", "Grant", "OAuthError", "ProtectedMCP", "Recorded",
    "jwk_thumbprint", "make_dpop_proof", "public_jwk", "sign_jwt", "unverified", "verify_jwt",
    "CLIENT_ASSERTION_TYPE", "ID_JAG_TYPE", "ID_TOKEN_TYPE", "JWT_BEARER", "TOKEN_EXCHANGE",
]
