"""RFC 7591 `client_secret_expires_at`: a registration is made once, and
made again only when a secret it issued has really expired.

The test authorization server registers clients for real (so their
secrets work at its token endpoint); `ExpiringSecrets` only rewrites the
`client_secret_expires_at` of its registration answers. Each test counts
the `/register` requests across several connects and refreshes.
"""

from __future__ import annotations

import json
import time

import pytest

import mcp_sync
from mcp_sync.auth import ClientInfo, HeadlessRedirect, MemoryStorage, OAuth
from mcp_sync.testing.auth import AuthServer, ProtectedMCP
from tests.auth.flows import token_forms

#: How many connects each test makes; each one also refreshes once.
CONNECTS = 3


class ExpiringSecrets(AuthServer):
    """An `AuthServer` whose registration answers carry `expires_at` as
    their `client_secret_expires_at` (the client is registered as usual)."""

    def __init__(self, expires_at: object, **options: object) -> None:
        super().__init__(**options)
        self.expires_at = expires_at

    def _register(self, r):
        status, headers, payload = super()._register(r)
        if status == 201:
            answer = json.loads(payload)
            answer["client_secret_expires_at"] = self.expires_at
            payload = json.dumps(answer).encode()
        return status, headers, payload


def connect_and_refresh(auth: AuthServer, mcp: ProtectedMCP, oauth: OAuth) -> None:
    """`CONNECTS` connects, each calling a tool, then (the server having
    expired every token) calling again, which refreshes."""
    for n in range(CONNECTS):
        with mcp_sync.connect(mcp.url, auth=oauth, timeout=30) as client:
            assert client.call_tool("echo", {"text": f"call {n}"}).text == f"call {n}"
            auth.expire_all()
            assert client.call_tool("echo", {"text": f"again {n}"}).text == f"again {n}"


@pytest.mark.parametrize("expires_at", [
    -1,              # before 1970: RFC 7591 allows 0 or a time, never a negative number
    -1_700_000_000,
    1,               # 1970-01-01T00:00:01Z: long before the registration that issued the secret
    1.5,
    "1999999999",    # a number in a string
    True,
    10**400,         # past a float's range
    1e17,            # a time in the year 3 billion: practically never
], ids=["minus-one", "large-negative", "1970", "float-1970", "string", "bool", "past-a-float", "far-future"])
@pytest.mark.parametrize("method", ["client_secret_basic", "none"])
def test_a_secret_expiry_that_is_no_future_time_registers_once(serve, expires_at, method):
    # Before: a negative (or past) expiry counted as expired at once, so
    # the confidential client's first token request went without its secret
    # (invalid_client, every connect registering again and failing), and a
    # public client registered, and re-authorized, on every refresh: 4
    # registrations in 3 connects.
    auth = serve(ExpiringSecrets(expires_at, auth_methods=(method,)))
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(redirect=HeadlessRedirect(), storage=MemoryStorage())
    connect_and_refresh(auth, mcp, oauth)
    assert len(auth.requests_to("/register")) == 1
    assert auth.authorization_requests == 1
    [client_id] = auth.registered
    refreshes = token_forms(auth, "refresh_token")
    assert len(refreshes) == CONNECTS
    # Every token request was made as the one registered client.
    assert [who for who, _ in auth.client_auth] == [client_id] * (1 + CONNECTS)
    if method == "client_secret_basic":
        assert {how for _, how in auth.client_auth} == {"client_secret_basic"}


def test_a_secret_that_expires_later_is_kept_until_then_and_replaced_after(serve):
    # The fix must not turn real expiries off: a future expiry is kept, and
    # once it has passed the next authorization registers a new client.
    auth = serve(ExpiringSecrets(int(time.time()) + 3600))
    mcp = serve(ProtectedMCP(auth))
    storage = MemoryStorage()
    oauth = OAuth(redirect=HeadlessRedirect(), storage=storage)
    connect_and_refresh(auth, mcp, oauth)
    assert len(auth.requests_to("/register")) == 1
    key = f"client {auth.issuer}"
    stored = storage.load(key)
    assert stored["secret_expires_at"] == auth.expires_at
    storage.save(key, {**stored, "secret_expires_at": time.time() - 1})  # as an hour passing would
    oauth.clear()  # tokens forgotten, the registration kept: the next call authorizes anew
    with mcp_sync.connect(mcp.url, auth=oauth, timeout=30) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    assert len(auth.requests_to("/register")) == 2
    assert len(auth.registered) == 2


def test_a_negative_expiry_an_earlier_release_stored_is_not_expired():
    # An earlier release stored the server's negative value as it came; read
    # as expired, it sent every use to a new registration.
    stored = ClientInfo("cid", "https://as.example", client_secret="s", secret_expires_at=-1.0).to_dict()
    client = ClientInfo.from_dict(stored)
    assert not client.secret_expired()
    assert not client.secret_expired(now=0.0)
    assert ClientInfo("cid", "https://as.example", secret_expires_at=100.0).secret_expired(now=100.0)
