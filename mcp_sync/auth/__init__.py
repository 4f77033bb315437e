"""Credentials for HTTP servers: the token-provider seam.

The HTTP transport asks a `TokenProvider` for the bearer token to send and,
once after a 401, asks it to refresh. Anything that can produce a token
fits: a fixed string, a function, or an object (the OAuth client of a later
release will be one). Nothing here does network IO of its own.

Example::

    mcp_sync.connect("https://example.com/mcp", auth="my-token")
    mcp_sync.connect("https://example.com/mcp", auth=lambda: vault.read("mcp-token"))

    class Refreshing:
        def token(self):
            return self.current
        def refresh(self, challenge):
            self.current = fetch_new_token()   # or None to give up
            return self.current
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["TokenProvider", "BearerToken", "CallableToken", "as_token_provider"]


@runtime_checkable
class TokenProvider(Protocol):
    """Supplies the bearer token for each request.

    `token()` returns the current token (None sends no Authorization header).
    `refresh(challenge)` is optional: called at most once per 401 with the
    server's `WWW-Authenticate` value (or None); return a new token to retry
    with, or None to give up and let the call fail with AuthenticationError.
    """

    def token(self) -> str | None: ...


class BearerToken:
    """A fixed token. It cannot refresh."""

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token or any(c in token for c in "\r\n\0"):
            raise ValueError("a bearer token must be a non-empty string without CR, LF or NUL")
        self._token = token

    def token(self) -> str:
        return self._token

    def __repr__(self) -> str:
        return "BearerToken(<redacted>)"


class CallableToken:
    """A token from a function, called for every request; refresh calls it again."""

    def __init__(self, fn: Callable[[], str | None]) -> None:
        self._fn = fn
        self._lock = threading.Lock()

    def token(self) -> str | None:
        with self._lock:
            return self._fn()

    def refresh(self, challenge: str | None) -> str | None:
        return self.token()


def as_token_provider(auth: Any) -> TokenProvider | None:
    """Accept None, a token string, a zero-argument callable, or a TokenProvider."""
    if auth is None:
        return None
    if isinstance(auth, str):
        return BearerToken(auth)
    if isinstance(auth, TokenProvider):
        return auth
    if callable(auth):
        return CallableToken(auth)
    raise TypeError("auth must be a token string, a callable returning one, or an object with token()")
