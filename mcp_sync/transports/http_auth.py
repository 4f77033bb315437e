"""Authorization for the HTTP transport, as one flow every request goes
through (POST exchanges, one-way messages, GET streams, DELETE).

Owns: which credentials a request carries, and what happens after the
server refuses them (401, or 403 for step-up authorization and DPoP nonces):
asking the token provider to act, and whether to send the request again.

Must not know: connections, sockets, deadlines or MCP. The transport sends
and reads; this decides.

How it works. `Authorization.flow(method, headers)` is a generator in the
style of `httpx.Auth.auth_flow`: it yields the headers to send, is sent the
response, and either yields the headers for a retry or stops (the response
stands). The transport's one request loop drives it::

    flow = auth.flow("POST", headers)
    sent = next(flow)
    while True:
        response = send(sent)
        try:
            sent = flow.send(response)   # retry with these
        except StopIteration:
            break                        # `response` is the answer

Who a request is made as (`scope()`), for keeping the private results of a
cache apart, is read without fetching: a provider with
`credential_scope()` answers from what it holds (OAuth never refreshes for
it); one without gives its `token()`, whose digest stands for it.

What a provider can do is looked up once, here, not probed per request: a
provider with `auth_headers(method, url)` (OAuth, DPoP) makes per-request
headers, others give a bearer token through `token()`; one with
`handle_challenge(status, headers)` sees 401 and 403 up to
`MAX_AUTH_RETRIES` times per request, one with only `refresh(challenge)` is
asked once, after a 401. One provider call serves every request that failed
with the same credentials: a generation counter, read before the
credentials are, tells a request that another thread already refreshed
while it waited, and it just retries. `AuthorizationError` from the
provider reaches the caller as it is: it says why.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Mapping
from typing import Any, Callable

from ..errors import AuthorizationError

#: How many 401/403 answers one request may act on (refresh, step-up
#: authorization, DPoP nonce) before the status is the caller's error.
MAX_AUTH_RETRIES = 3

#: Headers this flow owns: a caller's are replaced, never sent twice.
_OWN = ("authorization", "dpop")


class Authorization:
    """The authorization flow of one transport (see the module docstring)."""

    def __init__(self, provider: Any, url: str) -> None:
        self._url = url
        self._lock = threading.Lock()
        self._generation = 0
        self.enabled = provider is not None
        self._make: Callable[[str], Mapping[str, str]] | None = None
        self._handle: Callable[[int, Mapping[str, str]], Any] | None = None
        self._refresh: Callable[[str | None], Any] | None = None
        self._scope: Callable[[], str | None] | None = None
        if provider is None:
            return
        scope = getattr(provider, "credential_scope", None)
        token_of = getattr(provider, "token", None)
        if callable(scope):
            self._scope = scope
        elif callable(token_of):
            self._scope = lambda: _digest(token_of())
        make = getattr(provider, "auth_headers", None)
        if make is not None:
            self._make = lambda method: make(method, url)
        else:
            token = provider.token

            def bearer(method: str) -> Mapping[str, str]:
                value = token()
                return {"Authorization": f"Bearer {value}"} if value else {}

            self._make = bearer
        self._handle = getattr(provider, "handle_challenge", None)
        self._refresh = getattr(provider, "refresh", None)

    def scope(self) -> str | None:
        """Who requests are made as now (a string that differs between
        identities), read without network; None: no credentials."""
        return self._scope() if self._scope is not None else None

    def flow(self, method: str, headers: Mapping[str, str]) -> Generator[dict[str, str], Any, None]:
        """Yield the headers for `method`; sent a response, yield the
        headers of a retry, or stop when the response stands."""
        if self._make is None:
            yield dict(headers)
            return
        generation = self._generation  # before the credentials are read
        sent = self._credentials(method, headers)
        for attempt in range(MAX_AUTH_RETRIES + 1):
            response = yield sent
            if response.status not in (401, 403) or not self._act(response, generation, attempt):
                return
            generation = self._generation
            sent = self._credentials(method, headers)

    def _credentials(self, method: str, headers: Mapping[str, str]) -> dict[str, str]:
        assert self._make is not None
        fresh = {k: v for k, v in headers.items() if k.lower() not in _OWN}
        fresh.update(self._make(method))
        return fresh

    def _act(self, response: Any, generation: int, attempt: int) -> bool:
        """Let the provider act on a 401 or 403. True to retry."""
        status = response.status
        if attempt >= MAX_AUTH_RETRIES:
            return False
        handle, refresh = self._handle, self._refresh
        if handle is None and (refresh is None or status != 401 or attempt > 0):
            return False
        with self._lock:
            if self._generation != generation:
                return True  # another request refreshed meanwhile
            try:
                if handle is not None:
                    retry = bool(handle(status, {k.lower(): v for k, v in response.headers.items()}))
                else:
                    assert refresh is not None
                    retry = bool(refresh(response.headers.get("www-authenticate")))
            except AuthorizationError:
                raise
            except Exception as exc:
                # The provider's own failure, not the server's refusal: a
                # bare 401 error would hide it.
                raise AuthorizationError(f"the token provider failed on the server's HTTP {status}: "
                                         f"{type(exc).__name__}: {exc}") from exc
            if not retry:
                return False
            self._generation += 1
            return True


def _digest(secret: str | None) -> str | None:
    """A token's digest: it names the identity without keeping the secret."""
    if not secret:
        return None
    import hashlib  # here: it loads OpenSSL, a cost at import for every program

    return hashlib.sha256(secret.encode()).hexdigest()
