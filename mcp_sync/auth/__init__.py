"""Credentials for HTTP servers: token providers, and the OAuth 2.1 client.

The HTTP transport asks a `TokenProvider` for the credentials of each
request. Anything that can produce a token fits: a fixed string, a
function, or an object. An object may also offer:

- `refresh(challenge)`: called once after a 401 with the server's
  `WWW-Authenticate` value; return a new token, or None to give up;
- `auth_headers(method, url)`: the headers for one request (used instead
  of `token()`; DPoP needs a proof per request);
- `handle_challenge(status, headers)`: called on a 401 or 403 (at most 3
  times per request); return True to retry with fresh headers;
- `attach(server_url)`: told which server it authorizes for;
- `use_network(settings)`: given the target's `mcp_sync.transports.http_network.NetworkSettings`
  (proxy, TLS), so its own requests take the same network path.

The OAuth client is made of such providers (imported on first use, so
`import mcp_sync` stays light):

- `OAuth`: the authorization code flow with PKCE, for a person; with a
  `LoopbackRedirect` (scripts), `PasteRedirect` (notebooks),
  `HeadlessRedirect` (no person), or `start()`/`finish()` (web apps);
- `ClientCredentials`, `JwtBearer`, `EnterpriseManaged`: grants without a
  person (see `mcp_sync.auth.grants`);
- `MemoryStorage`, `FileStorage`, or your own `TokenStorage`;
- `DPoP` and `SigningKey` (`pip install 'mcp-sync-client[jwt]'` for keys);
- `EndpointNotAllowed`: raised when a server names a URL on an address it
  may not make the client reach (see `mcp_sync.auth.network`).

Example::

    mcp_sync.connect("https://example.com/mcp", auth="my-token")
    mcp_sync.connect("https://example.com/mcp", auth=lambda: vault.read("mcp-token"))

    from mcp_sync.auth import OAuth, LoopbackRedirect
    mcp_sync.connect("https://example.com/mcp", auth=OAuth(redirect=LoopbackRedirect()))
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from ..errors import AuthorizationError, AuthorizationRequired, OAuthError

__all__ = [
    "TokenProvider", "BearerToken", "CallableToken", "as_token_provider",
    "AuthorizationError", "AuthorizationRequired", "OAuthError",
    "OAuth", "AuthorizationStart", "TokenFlow", "ClientCredentials", "JwtBearer", "EnterpriseManaged",
    "RedirectHandler", "LoopbackRedirect", "PasteRedirect", "HeadlessRedirect",
    "TokenStorage", "MemoryStorage", "FileStorage", "Tokens", "ClientInfo", "DPoP", "SigningKey",
    "EndpointNotAllowed",
]

#: Where each lazily imported name lives.
_LAZY = {
    "OAuth": "oauth", "AuthorizationStart": "oauth", "TokenFlow": "flow",
    "ClientCredentials": "grants", "JwtBearer": "grants", "EnterpriseManaged": "grants",
    "RedirectHandler": "redirect", "LoopbackRedirect": "redirect", "PasteRedirect": "redirect",
    "HeadlessRedirect": "redirect", "TokenStorage": "storage", "MemoryStorage": "storage",
    "FileStorage": "storage", "Tokens": "tokens", "ClientInfo": "tokens", "DPoP": "dpop", "SigningKey": "jwt",
    "EndpointNotAllowed": "network",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .dpop import DPoP
    from .flow import TokenFlow
    from .grants import ClientCredentials, EnterpriseManaged, JwtBearer
    from .jwt import SigningKey
    from .network import EndpointNotAllowed
    from .oauth import AuthorizationStart, OAuth
    from .redirect import HeadlessRedirect, LoopbackRedirect, PasteRedirect, RedirectHandler
    from .storage import FileStorage, MemoryStorage, TokenStorage
    from .tokens import ClientInfo, Tokens


@runtime_checkable
class TokenProvider(Protocol):
    """Supplies the bearer token for each request.

    `token()` returns the current token (None sends no Authorization header).
    `refresh(challenge)` is optional: called at most once per 401 with the
    server's `WWW-Authenticate` value (or None); return a new token to retry
    with, or None to give up and let the call fail with AuthenticationError.
    `credential_scope()` is optional: who requests are made as now, as a
    string that differs between identities, read without network (a
    client with `cache=` keeps private results apart by it); without it the
    digest of `token()` is used.
    """

    def token(self) -> str | None:
        """The token for the next request, sent as `Authorization: Bearer
        <token>`; None (or an empty string) sends no Authorization header.
        Called for every request, from any thread."""
        ...


class BearerToken:
    """A fixed token. It cannot refresh, so a 401 fails the call with
    `AuthenticationError`. Passing a string as `auth=` makes one.

    Raises `ValueError` for an empty token or one holding CR, LF or NUL
    (which would split the header). Its `repr` never shows the token.

    Args:
        token: The token, sent as `Authorization: Bearer <token>`.

    Raises:
        ValueError: An empty token, or one holding CR, LF or NUL.

    Example::

        client = mcp_sync.connect("https://example.com/mcp", auth=BearerToken(os.environ["MCP_TOKEN"]))
    """

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token or any(c in token for c in "\r\n\0"):
            raise ValueError("a bearer token must be a non-empty string without CR, LF or NUL")
        self._token = token

    def token(self) -> str:
        """The token given."""
        return self._token

    def __repr__(self) -> str:
        return "BearerToken(<redacted>)"


class CallableToken:
    """A token from a function, called for every request; refresh calls it again.

    The function takes no argument and returns the token (or None for no
    Authorization header); calls to it never overlap, so it need not be
    thread-safe. Passing a function as `auth=` makes one.

    Args:
        fn: Returns the current token, or None for no Authorization header.

    Example::

        client = mcp_sync.connect("https://example.com/mcp", auth=lambda: vault.read("mcp-token"))
    """

    def __init__(self, fn: Callable[[], str | None]) -> None:
        self._fn = fn
        self._lock = threading.Lock()

    def token(self) -> str | None:
        """The function's answer, now."""
        with self._lock:
            return self._fn()

    def refresh(self, challenge: str | None) -> str | None:
        """After a 401: call the function again; the request is retried when
        it gives a token, and fails with `AuthenticationError` when it gives
        None. `challenge` (the `WWW-Authenticate` value) is not used.

        Args:
            challenge: The server's `WWW-Authenticate` value (unused).

        Returns:
            The function's new answer; None gives up.
        """
        return self.token()


def as_token_provider(auth: Any) -> TokenProvider | None:
    """Accept None, a token string, a zero-argument callable, or a TokenProvider.

    Args:
        auth: What `auth=` was given.

    Returns:
        A `BearerToken` for a string, a `CallableToken` for a callable, the
        provider itself, or None for None.

    Raises:
        TypeError: `auth` is none of these.
        ValueError: An empty token string, or one holding CR, LF or NUL.
    """
    if auth is None:
        return None
    if isinstance(auth, str):
        return BearerToken(auth)
    if isinstance(auth, TokenProvider):
        return auth
    if callable(auth):
        return CallableToken(auth)
    raise TypeError("auth must be a token string, a callable returning one, or an object with token()")
