"""End-to-end tests of the OAuth authorization code flow, continued (see
`test_oauth.py`): tokens and refresh, step-up, where the person is (no
handler, web apps, loopback, paste), threads, secrecy, and storage."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import socket
import stat
import threading
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

import mcp_sync
from mcp_sync.auth.oauth import PENDING_LIFETIME
from mcp_sync.auth import (
    AuthorizationStart,
    ClientInfo,
    FileStorage,
    HeadlessRedirect,
    LoopbackRedirect,
    MemoryStorage,
    OAuth,
    PasteRedirect,
    Tokens,
)
from mcp_sync.testing.auth import AuthServer, ProtectedMCP
from mcp_sync.testing.auth import OAuthError as ServerOAuthError
from tests.auth.flows import (
    Recording,
    authorize_queries,
    bearer_tokens,
    token_forms,
    use,
)

WEB_REDIRECT = "https://app.example.com/oauth/callback"
#: Threads of the test servers (a connection's thread ends when the server notices the client left).
SERVER_THREADS = ("test-authserver", "mcp-testing")



def browse(url: str) -> str:
    """Play the browser of a person who approves: the Location the authorization endpoint redirects to."""
    answer = requests.get(url, allow_redirects=False, timeout=5)
    assert answer.status_code == 302, answer.text
    return answer.headers["Location"]


def grants(auth: AuthServer, grant_type: str) -> int:
    return len(token_forms(auth, grant_type))


# -- 5. tokens --------------------------------------------------------------------------------------


def test_access_token_is_sent_as_a_bearer_header_on_every_request(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect()))
    [token] = auth.issued
    # The first request had nothing; every later one the token, in the header, never in the URL.
    assert mcp.seen_tokens[0] is None
    assert mcp.seen_tokens[1:] == [f"Bearer {token}"] * (len(mcp.seen_tokens) - 1)
    assert len(mcp.seen_tokens) >= 3
    assert all(token not in request.path for request in mcp.http.requests)
    assert auth.issued[token].resource == mcp.url


def test_a_token_about_to_expire_is_refreshed_before_use(serve, tmp_path):
    """A worker finds stored tokens with a few seconds left: it refreshes
    before sending anything, so the server never sees a stale token."""
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    path = tmp_path / "tokens.json"
    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=FileStorage(path)))
    [old] = auth.issued
    # An hour-long token with five seconds left: as if the worker had been idle meanwhile.
    edit_stored_token(path, old, expires_at=time.time() + 5, issued_at=time.time() - 3595)
    seen = len(mcp.seen_tokens)
    redirect = Recording()
    use(mcp, OAuth(redirect=redirect, storage=FileStorage(path)))
    [refresh] = token_forms(auth, "refresh_token")
    new = oauth_token(path)
    assert new != old and auth.issued[new].grant_type == "refresh_token"
    assert refresh["resource"] == mcp.url
    # Every request of the new worker carried the refreshed token: no 401, no authorization.
    assert mcp.seen_tokens[seen:] == [f"Bearer {new}"] * (len(mcp.seen_tokens) - seen)
    assert auth.introspect(old) is not None  # the old one was still good: the refresh came first
    assert redirect.urls == [] and auth.authorization_requests == 1


def edit_stored_token(path, access_token: str, **fields) -> None:
    """Change the stored entry of `access_token` in a FileStorage file, as
    time passing (or another worker) would."""
    stored = json.loads(path.read_text())
    [entry] = [value for value in stored.values() if value.get("access_token") == access_token]
    entry.update(fields)
    path.write_text(json.dumps(stored))


def oauth_token(path) -> str:
    """The access token a FileStorage holds."""
    [token] = [value["access_token"] for value in json.loads(path.read_text()).values() if "access_token" in value]
    return token


@pytest.mark.parametrize("how", ["expire_all", "revoke"])
def test_a_rejected_access_token_is_refreshed_once(serve, how):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        old_access, old_refresh = oauth.tokens.access_token, oauth.tokens.refresh_token
        auth.expire_all() if how == "expire_all" else auth.revoke(old_access)
        assert client.call_tool("echo", {"text": "again"}).text == "again"
        assert client.call_tool("echo", {"text": "and again"}).text == "and again"
    [refresh] = token_forms(auth, "refresh_token")
    assert refresh["refresh_token"] == old_refresh and refresh["resource"] == mcp.url
    new_access = oauth.tokens.access_token
    assert new_access != old_access and auth.issued[new_access].grant_type == "refresh_token"
    assert mcp.seen_tokens[-3:] == [f"Bearer {old_access}", f"Bearer {new_access}", f"Bearer {new_access}"]
    assert auth.authorization_requests == 1


def test_every_later_401_is_served_by_a_refresh_not_a_new_authorization(serve):
    # Tokens without expires_in: the client learns of each expiry from a 401 only.
    auth = serve(AuthServer(access_token_lifetime=None))
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(mcp.url, redirect_uri=WEB_REDIRECT)  # a web app: no way to reach the person mid-call
    oauth.finish(browse(oauth.start().url))
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        for n in range(3):
            auth.revoke(oauth.tokens.access_token)
            assert client.call_tool("echo", {"text": f"call {n}"}).text == f"call {n}"
    assert grants(auth, "refresh_token") == 3 and auth.authorization_requests == 1


class RejectsRefreshed(ProtectedMCP):
    """A resource server that refuses (401) every access token obtained by a refresh."""

    def _authorize(self, request, authorization):
        super()._authorize(request, authorization)
        token = (authorization or "").partition(" ")[2]
        grant = next(a.issued[token] for a in self.authorization_servers if token in a.issued)
        if grant.grant_type == "refresh_token":
            raise ServerOAuthError("invalid_token", "refreshed tokens are not accepted here", 401)


def test_a_refreshed_token_that_is_rejected_too_leads_to_a_new_authorization(serve):
    auth = serve(AuthServer())
    mcp = serve(RejectsRefreshed(auth))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        auth.revoke(oauth.tokens.access_token)
        assert client.call_tool("echo", {"text": "x"}).text == "x"
    # 401 -> refresh -> 401 again -> a new authorization, within the same call.
    assert [f["grant_type"] for f in token_forms(auth)] == ["authorization_code", "refresh_token",
                                                            "authorization_code"]
    assert auth.authorization_requests == 2


def test_a_refused_refresh_leads_to_a_new_authorization(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    redirect = Recording()
    oauth = OAuth(redirect=redirect)
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        auth.revoke(oauth.tokens.access_token)
        auth.revoke(oauth.tokens.refresh_token)
        assert client.call_tool("echo", {"text": "back"}).text == "back"
    assert [f["grant_type"] for f in token_forms(auth)] == ["authorization_code", "refresh_token",
                                                            "authorization_code"]
    assert auth.authorization_requests == 2 and len(redirect.callbacks) == 2
    assert auth.issued[oauth.tokens.access_token].grant_type == "authorization_code"


def test_step_up_authorization_asks_for_the_union_of_scopes(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, challenge_scope="read", tool_scopes={"echo": ["write"]}))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}  # no extra scope needed
        assert auth.authorization_requests == 1
        assert client.call_tool("echo", {"text": "written"}).text == "written"
    assert [q["scope"] for q in authorize_queries(auth)] == ["read", "read write"]
    assert auth.issued[bearer_tokens(mcp)[-1]].scope == {"read", "write"}
    assert oauth.tokens.scopes == {"read", "write"}


def test_a_new_authorization_keeps_the_scopes_of_a_step_up(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, challenge_scope="read", tool_scopes={"echo": ["write"]}))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        client.call_tool("echo", {"text": "step up"})
        auth.revoke(oauth.tokens.access_token)
        auth.revoke(oauth.tokens.refresh_token)  # the next 401 needs a new authorization
        assert client.call_tool("echo", {"text": "still allowed"}).text == "still allowed"
    # The spec: re-authorizing asks for the challenge's scopes beside those asked for before,
    # so the step-up's "write" is not lost (and echo needs no second step-up).
    assert [q["scope"] for q in authorize_queries(auth)] == ["read", "read write", "read write"]


def test_after_clear_the_scopes_start_over(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, challenge_scope="read", tool_scopes={"echo": ["write"]}))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.call_tool("echo", {"text": "step up"})
        oauth.clear()
        client.list_tools()
    assert [q["scope"] for q in authorize_queries(auth)] == ["read", "read write", "read"]


def test_a_403_that_never_ends_stops_after_three_authorizations(serve):
    # The server needs "admin" for echo; the authorization server never grants it.
    auth = serve(AuthServer(grant_scopes=lambda requested: requested - {"admin"}))
    mcp = serve(ProtectedMCP(auth, challenge_scope="read", tool_scopes={"echo": ["admin"]}))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        before = auth.authorization_requests
        with pytest.raises(mcp_sync.AuthenticationError) as info:
            client.call_tool("echo", {"text": "never"})
        assert info.value.status == 403
        assert auth.authorization_requests - before == 3
        assert all(q["scope"] == "read admin" for q in authorize_queries(auth)[before:])
        # The client still works for what it may do.
        assert client.call_tool("add", {"a": 2, "b": 2}).structured_content == {"sum": 4}
    assert all(token not in str(info.value) for token in auth.issued)


# -- 6. where the person is -------------------------------------------------------------------------


def test_without_a_redirect_handler_authorization_is_required(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    with pytest.raises(mcp_sync.AuthorizationRequired) as info:
        use(mcp, OAuth())
    message = str(info.value)
    assert "redirect=LoopbackRedirect()" in message and "oauth.start()" in message
    assert auth.authorization_requests == 0 and auth.requests_to("/register") == []


def test_web_app_start_then_finish(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, scopes_supported=["read"]))
    oauth = OAuth(mcp.url, redirect_uri=WEB_REDIRECT)
    start = oauth.start()
    assert isinstance(start, AuthorizationStart)
    [(client_id, doc)] = auth.registered.items()
    assert doc["application_type"] == "web" and doc["redirect_uris"] == [WEB_REDIRECT]
    url = urlsplit(start.url)
    assert f"{url.scheme}://{url.netloc}{url.path}" == auth.authorization_endpoint
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert query == {
        "response_type": "code", "client_id": client_id, "redirect_uri": WEB_REDIRECT, "state": start.state,
        "code_challenge": query["code_challenge"], "code_challenge_method": "S256", "resource": mcp.url,
        "scope": "read",
    }
    assert auth.authorization_requests == 0  # start() only builds the URL

    callback = browse(start.url)
    assert callback.startswith(WEB_REDIRECT + "?")
    tokens = oauth.finish(callback)
    assert isinstance(tokens, Tokens) and tokens.access_token in auth.issued
    [form] = token_forms(auth, "authorization_code")
    verifier = form["code_verifier"]
    assert base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode() == \
        query["code_challenge"]
    assert form["redirect_uri"] == WEB_REDIRECT and form["resource"] == mcp.url

    use(mcp, oauth)
    # Already authorized: not one request went out without the token.
    assert None not in mcp.seen_tokens and set(bearer_tokens(mcp)) == {tokens.access_token}
    assert auth.authorization_requests == 1 and auth.token_requests == 1


def test_web_app_starts_after_the_call_that_needed_authorization(serve):
    """The usual web-app order: a call fails with AuthorizationRequired, the
    app sends the user to start().url (with the challenge's scope), the
    callback view finishes, and the same call then works."""
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, challenge_scope="files:read", scopes_supported=["other"]))
    oauth = OAuth(mcp.url, redirect_uri=WEB_REDIRECT)
    with pytest.raises(mcp_sync.AuthorizationRequired):
        use(mcp, oauth)
    start = oauth.start()
    assert parse_qs(urlsplit(start.url).query)["scope"] == ["files:read"]
    oauth.finish(browse(start.url))
    use(mcp, oauth)
    assert auth.authorization_requests == 1 and auth.token_requests == 1
    assert auth.issued[bearer_tokens(mcp)[-1]].scope == {"files:read"}


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_finish_in_another_worker_sharing_the_storage(serve, tmp_path, kind):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))

    def storage():
        return FileStorage(tmp_path / "oauth.json") if kind == "file" else shared

    shared = MemoryStorage()
    start = OAuth(mcp.url, redirect_uri=WEB_REDIRECT, storage=storage()).start()
    callback = browse(start.url)
    other = OAuth(mcp.url, redirect_uri=WEB_REDIRECT, storage=storage())
    tokens = other.finish(callback)
    [client_id] = auth.registered
    assert auth.client_auth == [(client_id, "client_secret_basic")]  # the stored registration's secret
    use(mcp, other)
    assert set(bearer_tokens(mcp)) == {tokens.access_token} and None not in mcp.seen_tokens
    # A third worker finds the tokens too.
    use(mcp, OAuth(mcp.url, redirect_uri=WEB_REDIRECT, storage=storage()))
    assert auth.authorization_requests == 1 and auth.token_requests == 1 and len(auth.registered) == 1


def test_a_replayed_callback_is_refused(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(mcp.url, redirect_uri=WEB_REDIRECT)
    callback = browse(oauth.start().url)
    first = oauth.finish(callback)
    with pytest.raises(mcp_sync.AuthorizationError, match="no authorization in progress"):
        oauth.finish(callback)
    assert auth.token_requests == 1
    assert oauth.tokens.access_token == first.access_token  # the refused replay kept nothing


def test_finish_with_a_state_never_started_is_refused(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(mcp.url, redirect_uri=WEB_REDIRECT)
    callback = browse(OAuth(mcp.url, redirect_uri=WEB_REDIRECT).start().url)  # another storage
    with pytest.raises(mcp_sync.AuthorizationError, match="unknown state"):
        oauth.finish(callback)
    assert auth.token_requests == 0 and oauth.tokens is None


class ListingStorage:
    """A web app's own store that can list its keys (the optional `keys()`)."""

    def __init__(self):
        self.table = {}

    def load(self, key):
        return self.table.get(key)

    def save(self, key, value):
        self.table[key] = dict(value)

    def delete(self, key):
        self.table.pop(key, None)

    def keys(self):
        return list(self.table)


@pytest.mark.parametrize("kind", ["memory", "file", "own"])
def test_abandoned_authorizations_are_dropped_when_another_starts(serve, tmp_path, kind):
    """A person who leaves the consent page never comes back to finish():
    a web app running for weeks must not keep one entry per such start."""
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    storage = {"memory": MemoryStorage, "file": lambda: FileStorage(tmp_path / "oauth.json"),
               "own": ListingStorage}[kind]()
    long_ago = time.time() - PENDING_LIFETIME - 1
    for i in range(50):
        storage.save(f"pending old{i}", {"state": f"old{i}", "created": long_ago})
    storage.save("pending odd", {"state": "odd", "created": "not a time"})
    storage.save("pending recent", {"state": "recent", "created": time.time() - 60})
    storage.save("tokens elsewhere", {"created": long_ago})  # not an authorization: kept
    oauth = OAuth(mcp.url, redirect_uri=WEB_REDIRECT, storage=storage)
    start = oauth.start()
    assert [i for i in range(50) if storage.load(f"pending old{i}") is not None] == []
    assert storage.load("pending odd") is None
    assert storage.load("pending recent") is not None and storage.load("tokens elsewhere") is not None
    # The new one is there and finishes.
    oauth.finish(browse(start.url))
    assert oauth.tokens is not None and storage.load(f"pending {start.state}") is None


def test_a_pending_entry_with_a_malformed_start_time_is_refused_as_too_old(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    storage = MemoryStorage()
    oauth = OAuth(mcp.url, redirect_uri=WEB_REDIRECT, storage=storage)
    start = oauth.start()
    entry = storage.load(f"pending {start.state}")
    storage.save(f"pending {start.state}", {**entry, "created": "yesterday"})
    with pytest.raises(mcp_sync.AuthorizationError, match="took too long"):
        oauth.finish(browse(start.url))
    assert auth.token_requests == 0


def _closed(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_loopback_redirect_with_a_browser_on_another_thread(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    browsers: list[threading.Thread] = []
    reached: list[int] = []

    def show(url: str) -> None:
        def browser() -> None:
            # Follows the authorization server's redirect to the loopback listener.
            answer = requests.get(url, timeout=5)
            reached.append(answer.status_code)

        thread = threading.Thread(target=browser, name="test-browser")
        browsers.append(thread)
        thread.start()

    redirect = LoopbackRedirect(open_browser=False, show=show, timeout=10)
    before = set(threading.enumerate())
    use(mcp, OAuth(redirect=redirect))
    for thread in browsers:
        thread.join(5)
    assert reached == [200] and len(browsers) == 1
    [doc] = auth.registered.values()
    assert doc["redirect_uris"] == [f"http://127.0.0.1:{redirect.port}/callback"]
    assert doc["application_type"] == "native"
    assert auth.token_requests == 1 and oauth_tokens_used(mcp, auth)
    # No thread (but the test servers' own) and no listening socket outlive the call.
    assert not any(t.is_alive() for t in browsers)
    left = [t for t in threading.enumerate() if t not in before and not t.name.startswith(SERVER_THREADS)]
    assert left == []
    assert _closed(redirect.port)


def oauth_tokens_used(mcp: ProtectedMCP, auth: AuthServer) -> bool:
    return bool(bearer_tokens(mcp)) and all(token in auth.issued for token in bearer_tokens(mcp))


def test_loopback_redirect_times_out(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    shown: list[str] = []
    redirect = LoopbackRedirect(open_browser=False, show=shown.append, timeout=0.2)
    with pytest.raises(mcp_sync.AuthorizationError, match="no redirect reached"):
        use(mcp, OAuth(redirect=redirect))
    assert len(shown) == 1 and shown[0].startswith(auth.authorization_endpoint + "?")
    assert auth.authorization_requests == 0 and auth.token_requests == 0
    assert _closed(redirect.port)


@pytest.mark.parametrize("pasted", ["address", "query"])
def test_paste_redirect(serve, pasted):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    shown: list[str] = []
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        location = browse(shown[-1])
        if pasted == "query":
            location = "?" + urlsplit(location).query  # only the part with the code
        return "  " + location + "\n"  # what a person pastes, with stray whitespace

    use(mcp, OAuth(redirect=PasteRedirect(show=shown.append, ask=ask)))
    assert len(shown) == len(prompts) == 1
    assert authorize_queries(auth)[0]["redirect_uri"] == "http://localhost:8976/callback"
    assert auth.token_requests == 1 and oauth_tokens_used(mcp, auth)


def test_paste_redirect_with_nothing_pasted(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    with pytest.raises(mcp_sync.AuthorizationRequired, match="nothing was pasted"):
        use(mcp, OAuth(redirect=PasteRedirect(show=lambda url: None, ask=lambda prompt: "")))
    assert auth.token_requests == 0


# -- 7. threads -------------------------------------------------------------------------------------


class Holding(ProtectedMCP):
    """Holds the answers to requests carrying `hold` until `parties` of them
    have arrived, so that they all fail together before any refresh or
    authorization can change the credentials."""

    def __init__(self, auth: AuthServer, parties: int) -> None:
        super().__init__(auth)
        self.hold: str | None = "nothing held"
        self.barrier = threading.Barrier(parties, timeout=10)

    def _gate(self, request):
        if urlsplit(request.path).path == self.http.path and request.headers.get("Authorization") == self.hold:
            try:
                self.barrier.wait()
            except threading.BrokenBarrierError:
                pass
        return super()._gate(request)


def on_threads(count: int, work, *, together: bool = False) -> tuple[dict[int, object], list[BaseException]]:
    """Run work(n) on `count` threads (released at once when `together`);
    their results by n, and what they raised."""
    results: dict[int, object] = {}
    errors: list[BaseException] = []
    go = threading.Barrier(count, timeout=10)

    def run(n: int) -> None:
        try:
            if together:
                go.wait()
            results[n] = work(n)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results, errors


def test_64_threads_with_a_token_the_server_expired_cause_one_refresh(serve):
    auth = serve(AuthServer())
    mcp = serve(Holding(auth, 64))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth, pool_size=64) as client:
        client.list_tools()
        auth.expire_all()
        mcp.hold = f"Bearer {oauth.tokens.access_token}"
        mark = len(mcp.seen_tokens)
        results, errors = on_threads(64, lambda n: client.call_tool("echo", {"text": f"thread {n}"}).text)
    assert not errors and not mcp.barrier.broken
    assert results == {n: f"thread {n}" for n in range(64)}
    assert grants(auth, "refresh_token") == 1 and auth.authorization_requests == 1
    # Every thread failed once with the expired token, then retried with the refreshed one.
    assert sorted(mcp.seen_tokens[mark:]) == sorted([mcp.hold] * 64 + [f"Bearer {oauth.tokens.access_token}"] * 64)


def servers_and_a_stored_token(serve, tmp_path):
    """An authorization server, its protected MCP server, and the path of a
    FileStorage file holding the one token a first use obtained."""
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    path = tmp_path / "tokens.json"
    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=FileStorage(path)))
    [token] = auth.issued
    return auth, mcp, path, token


def test_64_threads_finding_an_expired_token_before_sending_cause_one_refresh(serve, tmp_path):
    auth, mcp, path, old = servers_and_a_stored_token(serve, tmp_path)
    edit_stored_token(path, old, expires_at=time.time() - 1)  # the client knows it expired
    oauth = OAuth(redirect=Recording(), storage=FileStorage(path))
    with mcp_sync.connect(mcp.url, auth=oauth, pool_size=64, protocol="2026-07-28") as client:
        # All 64 ask for the token at once.
        results, errors = on_threads(64, lambda n: client.call_tool("echo", {"text": str(n)}).text, together=True)
    assert not errors
    assert results == {n: str(n) for n in range(64)}
    assert grants(auth, "refresh_token") == 1 and auth.authorization_requests == 1
    new = oauth.tokens.access_token
    assert new != old and set(mcp.seen_tokens[-64:]) == {f"Bearer {new}"}


def test_16_threads_hitting_the_401_together_cause_one_authorization(serve):
    auth = serve(AuthServer())
    mcp = serve(Holding(auth, 16))
    redirect = Recording()
    oauth = OAuth(redirect=redirect)
    with mcp_sync.connect(mcp.url, auth=oauth, pool_size=16) as client:
        client.list_tools()
        oauth.clear()  # logged out: the next requests carry no token, as the very first one did
        mcp.hold = None
        results, errors = on_threads(
            16, lambda n: client.call_tool("add", {"a": n, "b": 1}).structured_content["sum"], together=True)
    assert not errors and not mcp.barrier.broken
    assert results == {n: n + 1 for n in range(16)}
    assert auth.authorization_requests == 2 and len(redirect.callbacks) == 2
    assert grants(auth, "refresh_token") == 0 and len(auth.registered) == 1


def test_an_expiring_token_is_renewed_once_while_the_authorization_server_fails(serve, tmp_path):
    # A token inside its expiry margin (still good at the server) and an
    # authorization server that fails: every request asked it again, one
    # after another under the provider's lock (160 token requests for 160
    # calls; with a hanging server a call with a 2 s timeout returned after
    # 96 s). Now one asks, and the requests go with the token held.
    auth, mcp, path, token = servers_and_a_stored_token(serve, tmp_path)
    edit_stored_token(path, token, issued_at=time.time() - 3600, expires_at=time.time() + 20)  # within the 30 s margin
    auth.token_body_override = b"<html>maintenance</html>"
    before = auth.token_requests
    oauth = OAuth(redirect=Recording(), storage=FileStorage(path))
    with mcp_sync.connect(mcp.url, auth=oauth, pool_size=16, protocol="2026-07-28") as client:
        results, errors = on_threads(
            16, lambda n: [client.call_tool("echo", {"text": str(n)}).text for _ in range(5)][-1], together=True)
    assert not errors and results == {n: str(n) for n in range(16)}
    assert auth.token_requests - before == 1
    assert set(mcp.seen_tokens[-80:]) == {f"Bearer {token}"}


def test_a_failing_authorization_server_answers_every_401_with_its_error_at_once(serve):
    # The server refuses the token, and refreshing it fails: each of the
    # requests refused together asked the authorization server in turn.
    # Now the first failure is every such request's error.
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth, pool_size=16) as client:
        client.list_tools()
        auth.expire_all()
        auth.token_body_override = b"<html>maintenance</html>"
        before = auth.token_requests
        results, errors = on_threads(16, lambda n: client.call_tool("echo", {"text": "x"}), together=True)
    assert not results and len(errors) == 16
    assert all(isinstance(error, mcp_sync.AuthorizationError) and "not a JSON object" in str(error)
               for error in errors), errors
    assert auth.token_requests - before == 1


class PausingOAuth(OAuth):
    """Holds `paused` (a thread) right after it took its headers, until `go` is set."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.paused: threading.Thread | None = None
        self.taken = threading.Event()
        self.go = threading.Event()

    def auth_headers(self, method: str, url: str) -> dict[str, str]:
        headers = super().auth_headers(method, url)
        if threading.current_thread() is self.paused:
            self.paused = None
            self.taken.set()
            assert self.go.wait(10)
        return headers


def test_a_request_that_left_with_the_old_token_does_not_cause_an_authorization(serve):
    """Thread A takes the token, then thread B meets the 401 and refreshes;
    A's request then fails with the old token. That 401 is old news: A
    retries with the refreshed token, without a second refresh, and no
    person is asked to authorize again."""
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    oauth = PausingOAuth(redirect=HeadlessRedirect())
    answers: list[str] = []
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        old = oauth.tokens.access_token
        auth.revoke(old)
        mark = len(mcp.seen_tokens)
        a = threading.Thread(target=lambda: answers.append(client.call_tool("echo", {"text": "A"}).text))
        oauth.paused = a
        a.start()
        assert oauth.taken.wait(10)
        answers.append(client.call_tool("echo", {"text": "B"}).text)  # 401, refresh, retry
        oauth.go.set()
        a.join(10)
    assert sorted(answers) == ["A", "B"]
    assert mcp.seen_tokens[mark:].count(f"Bearer {old}") == 2  # both left with the old token
    assert auth.authorization_requests == 1 and grants(auth, "refresh_token") == 1
    assert mcp.seen_tokens[mark:].count(f"Bearer {oauth.tokens.access_token}") == 2  # both retried with the new one


# -- 8. secrecy and limits --------------------------------------------------------------------------


def test_secrets_never_reach_reprs_logs_or_errors(serve, caplog):
    caplog.set_level(logging.DEBUG)  # the root logger: every library's records
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    storage = MemoryStorage()
    oauth = OAuth(redirect=HeadlessRedirect(), storage=storage)  # registers: a client secret is issued
    errors: list[BaseException] = []
    refresh_tokens: set[str] = set()
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        refresh_tokens.add(oauth.tokens.refresh_token)
        auth.revoke(oauth.tokens.access_token)  # a refresh
        client.call_tool("echo", {"text": "one"})
        refresh_tokens.add(oauth.tokens.refresh_token)
        auth.revoke(oauth.tokens.access_token)  # a refused refresh, then a new authorization
        auth.fail_next_token = (400, {"error": "invalid_grant", "error_description": "refresh token expired"})
        client.call_tool("echo", {"text": "two"})
        refresh_tokens.add(oauth.tokens.refresh_token)
        oauth.clear()  # a new authorization whose code exchange fails
        auth.fail_next_token = (400, {"error": "invalid_grant", "error_description": "the code expired"})
        with pytest.raises(mcp_sync.OAuthError) as failed_code:
            client.call_tool("echo", {"text": "three"})
        errors.append(failed_code.value)
        client.call_tool("echo", {"text": "four"})
        refresh_tokens.add(oauth.tokens.refresh_token)
        auth.revoke(oauth.tokens.access_token)  # a refresh answered with nonsense
        auth.token_body_override = b'{"access_token": 42, "token_type": "Bearer"}'
        with pytest.raises(mcp_sync.AuthorizationError) as nonsense:
            client.call_tool("echo", {"text": "five"})
        errors.append(nonsense.value)
        auth.token_body_override = None
    client_info = ClientInfo.from_dict(storage.load(f"client {auth.issuer}"))
    start = OAuth(mcp.url, redirect=HeadlessRedirect(), storage=storage).start()  # pending, with a verifier

    codes = token_forms(auth, "authorization_code")
    client_secrets = {base64.b64decode(r.headers["authorization"][6:]).decode().partition(":")[2]
                      for r in auth.requests_to("/token")}
    assert client_secrets == {client_info.client_secret}
    secrets = {
        *auth.issued, *refresh_tokens, client_info.client_secret, storage.load(f"pending {start.state}")["verifier"],
        *(f["code"] for f in codes), *(f["code_verifier"] for f in codes),
    }
    assert len(codes) == 4 and len(auth.issued) == 4 and len(refresh_tokens) == 4
    assert None not in secrets and len(secrets) == 4 + 4 + 1 + 1 + 4 + 4
    texts = [repr(oauth), repr(oauth.tokens), repr(client_info), repr(start), repr(storage),
             repr(OAuth(client_id="app", client_secret="pre-registered-s3cret", client_issuer=auth.issuer))]
    texts += [str(exc) for exc in errors] + [repr(exc) for exc in errors]
    texts += [record.getMessage() for record in caplog.records] + [caplog.text]
    for text in texts:
        for secret in [*secrets, "pre-registered-s3cret"]:
            assert secret not in text, (secret, text)
    assert "the code expired" in str(errors[0]) and "access_token" in str(errors[1])
    assert any(record.name == "mcp_sync.auth" for record in caplog.records)


@pytest.mark.parametrize("limit, size", [(None, 300 * 1024), (4096, 5000)])
def test_a_token_response_over_the_size_limit_is_refused(serve, limit, size):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    huge = b'{"access_token": "' + b"x" * size + b'", "token_type": "Bearer"}'
    auth.token_body_override = huge
    options = {} if limit is None else {"max_response_bytes": limit}
    with pytest.raises(mcp_sync.AuthorizationError) as info:
        use(mcp, OAuth(redirect=HeadlessRedirect(), **options))
    assert f"larger than {limit or 256 * 1024} bytes" in str(info.value)
    assert "xxxx" not in str(info.value)
    assert auth.token_requests == 1 and mcp.seen_tokens == [None]


@pytest.mark.parametrize("body, complaint", [
    (b'{"access_token": "abc", "token_type": "Bearer"', "not a JSON object"),  # cut short
    (b'["access_token", "abc"]', "not a JSON object"),
    (b"<html>maintenance</html>", "not a JSON object"),
    (b'{"token_type": "Bearer"}', "no valid 'access_token'"),
    (b'{"access_token": "a b", "token_type": "Bearer"}', "no valid 'access_token'"),
    (b'{"access_token": "abc", "token_type": "mac"}', "unsupported token_type"),
    (b'{"access_token": "abc", "expires_in": "soon"}', "invalid 'expires_in'"),
    # Past a float's range, and past int()'s 4,300 digits: OverflowError and
    # ValueError escaped, and a 401 hid them.
    (b'{"access_token": "abc", "expires_in": 1' + b"0" * 400 + b"}", "invalid 'expires_in'"),
    (b'{"access_token": "abc", "expires_in": "' + b"9" * 5000 + b'"}', "invalid 'expires_in'"),
    (b'{"access_token": "abc", "expires_in": 1e999}', "invalid 'expires_in'"),
    # Not visible ASCII (RFC 6749 A.12): kept, it failed every later request
    # with a ConnectError about a header that is "not Latin-1 text".
    ('{"access_token": "tok\u4e2d", "token_type": "Bearer"}'.encode(), "no valid 'access_token'"),
])
def test_a_malformed_token_response_is_a_clear_error(serve, body, complaint):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    auth.token_body_override = body
    oauth = OAuth(redirect=HeadlessRedirect())
    with pytest.raises(mcp_sync.AuthorizationError, match=complaint):
        use(mcp, oauth)
    assert oauth.tokens is None and mcp.seen_tokens == [None]


@pytest.mark.parametrize("fields", [{"expires_at": "soon"}, {"issued_at": "x"}, {"refresh_token": ["r"], "expires_at": 1.0}])
def test_stored_tokens_of_the_wrong_types_are_ignored_not_an_error_on_every_call(serve, tmp_path, fields, caplog):
    # A token file edited by hand or written by another program: the flow
    # says it ignores unreadable stored tokens, but a wrong type raised
    # TypeError inside every request ("the answer to request 1 could not be
    # read"), for as long as the file held them.
    auth, mcp, path, token = servers_and_a_stored_token(serve, tmp_path)
    edit_stored_token(path, token, **fields)
    redirect = Recording()
    with caplog.at_level(logging.WARNING, logger="mcp_sync.auth"):
        use(mcp, OAuth(redirect=redirect, storage=FileStorage(path)))
    assert "ignoring unreadable stored tokens" in caplog.text
    assert len(redirect.urls) == 1 and auth.authorization_requests == 2  # authorized again, once
    assert oauth_token(path) != token and oauth_token(path) in auth.issued


@pytest.mark.parametrize("expired_at", ["server", "client"])
@pytest.mark.parametrize("kind", ["memory", "file"])
def test_tokens_another_worker_refreshed_are_used_not_refreshed_again(serve, tmp_path, kind, expired_at):
    # Two providers sharing one storage (two worker processes, or an OAuth
    # made per web request as the web-app guide does) both hold the same
    # tokens. One refreshes them; the refresh token rotates. The other then
    # refreshed with the used-up refresh token, was refused, deleted the
    # fresh tokens from the shared storage and sent the user to authorize
    # again. It takes the tokens the storage holds now instead.
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    path = tmp_path / "tokens.json"
    shared = MemoryStorage()

    def storage():
        return FileStorage(path) if kind == "file" else shared

    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=storage()))
    [old] = auth.issued
    if expired_at == "client":
        key = f"tokens {mcp.url}"
        storage().save(key, {**storage().load(key), "expires_at": time.time() - 1})
    first_redirect, second_redirect = Recording(), Recording()
    first = OAuth(mcp.url, redirect=first_redirect, storage=storage())
    second = OAuth(mcp.url, redirect=second_redirect, storage=storage())
    assert first.tokens.access_token == second.tokens.access_token == old  # both hold them
    if expired_at == "server":
        auth.expire_all()
    use(mcp, first)
    [refresh] = token_forms(auth, "refresh_token")
    renewed = first.tokens.access_token
    assert renewed != old
    seen = len(mcp.seen_tokens)
    use(mcp, second)
    assert second_redirect.urls == [] and first_redirect.urls == [] and auth.authorization_requests == 1
    assert token_forms(auth, "refresh_token") == [refresh]  # no second refresh, with the used-up token
    assert set(mcp.seen_tokens[seen:]) <= {f"Bearer {old}", f"Bearer {renewed}"}
    assert mcp.seen_tokens[-1] == f"Bearer {renewed}"
    assert second.tokens.access_token == renewed and OAuth(mcp.url, storage=storage()).tokens.access_token == renewed


def test_a_refresh_refused_because_another_worker_refreshed_first_takes_its_tokens(serve):
    # The race itself: the second worker reads the storage before the
    # first one's refresh is saved, and sends its own refresh after the
    # first's used the refresh token up. Its refusal must not delete the
    # first worker's fresh tokens, nor ask the user again.
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    shared = MemoryStorage()
    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=shared))
    key = f"tokens {mcp.url}"
    before = shared.load(key)

    requests_before = auth.token_requests
    # The tokens as they were before, until its own refresh has reached the server.
    lagging = StaleView(shared, key, before, stale=lambda: auth.token_requests <= requests_before + 1)
    redirect = Recording()
    second = OAuth(mcp.url, redirect=redirect, storage=lagging)
    assert second.tokens.access_token == before["access_token"]
    auth.expire_all()
    use(mcp, OAuth(mcp.url, redirect=Recording(), storage=shared))  # the first worker refreshes
    renewed = shared.load(key)["access_token"]
    use(mcp, second)
    [first_refresh, second_refresh] = token_forms(auth, "refresh_token")
    assert second_refresh["refresh_token"] == first_refresh["refresh_token"]  # refused: used up
    assert redirect.urls == [] and auth.authorization_requests == 1
    assert shared.load(key)["access_token"] == renewed and mcp.seen_tokens[-1] == f"Bearer {renewed}"


def test_file_storage_is_private_and_outlives_the_provider(serve, tmp_path):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    path = tmp_path / "config" / "mcp-tokens.json"
    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=FileStorage(path)))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [name for name in os.listdir(path.parent)] == ["mcp-tokens.json"]  # no temporary file left
    [token] = auth.issued
    seen = len(mcp.seen_tokens)
    redirect = Recording()
    use(mcp, OAuth(redirect=redirect, storage=FileStorage(str(path))))  # a new process, say
    assert mcp.seen_tokens[seen:] == [f"Bearer {token}"] * (len(mcp.seen_tokens) - seen)
    assert redirect.urls == [] and auth.authorization_requests == 1 and len(auth.registered) == 1
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


# -- 9. storage ---------------------------------------------------------------------------------------


def test_an_authorization_that_failed_keeps_no_pending_verifier(serve):
    # A redirect handler that raised (the person declined, the wait timed
    # out) left its pending authorization, PKCE verifier and all, in the
    # storage for good: 50 failed authorizations, 50 entries.
    class Keys(MemoryStorage):
        def __init__(self) -> None:
            super().__init__()
            self.held: set[str] = set()

        def save(self, key, value) -> None:
            super().save(key, value)
            self.held.add(key)

        def delete(self, key) -> None:
            super().delete(key)
            self.held.discard(key)

        def pop(self, key):
            self.held.discard(key)
            return super().pop(key)

    class Declining:
        redirect_uri = "http://127.0.0.1:9/callback"

        def authorize(self, url: str) -> str:
            raise mcp_sync.AuthorizationError("the person declined")

    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    storage = Keys()
    for _ in range(3):
        with pytest.raises(mcp_sync.AuthorizationError, match="declined"):
            use(mcp, OAuth(redirect=Declining(), storage=storage))
    assert auth.authorization_requests == 0
    assert not [key for key in storage.held if key.startswith("pending ")], storage.held


def test_clear_logs_out(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    storage = MemoryStorage()
    oauth = OAuth(redirect=HeadlessRedirect(), storage=storage)
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        first = oauth.tokens
        oauth.clear()
        assert oauth.tokens is None
        assert OAuth(mcp.url, redirect=HeadlessRedirect(), storage=storage).tokens is None  # gone from storage too
        seen = len(mcp.seen_tokens)
        assert client.call_tool("echo", {"text": "again"}).text == "again"
    # The next call went without a token, and a new authorization followed; the refresh
    # token of the cleared tokens was not used, and the registration was kept.
    assert mcp.seen_tokens[seen] is None
    assert auth.authorization_requests == 2 and grants(auth, "refresh_token") == 0
    assert len(auth.registered) == 1 and len(auth.requests_to("/register")) == 1
    assert oauth.tokens.access_token != first.access_token
    assert first.refresh_token not in {f.get("refresh_token") for f in token_forms(auth)}


class PopAtOnce(MemoryStorage):
    """Holds each worker right after it read the pending entry (by `pop`,
    or by a `load` meant to be followed by `delete`) until both have read
    it: the worst interleaving of two workers taking it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.both = threading.Barrier(2, timeout=10)

    def load(self, key: str) -> dict | None:
        value = super().load(key)
        if key.startswith("pending "):
            self.both.wait()
        return value

    def pop(self, key: str) -> dict | None:
        value = super().pop(key)
        if key.startswith("pending "):
            self.both.wait()
        return value


def test_two_workers_finishing_the_same_callback_at_once_exchange_the_code_once(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    storage = PopAtOnce()
    callback = browse(OAuth(mcp.url, redirect_uri=WEB_REDIRECT, storage=storage).start().url)
    outcomes: list[object] = []

    def worker() -> None:
        try:
            outcomes.append(OAuth(mcp.url, redirect_uri=WEB_REDIRECT, storage=storage).finish(callback))
        except mcp_sync.AuthorizationError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(type(o).__name__ for o in outcomes) == ["AuthorizationError", "Tokens"]
    assert auth.token_requests == 1


def client_sockets_to(port: int) -> list[str]:
    """This process's open sockets whose far end is `port` on 127.0.0.1:
    client sides only (a server's accepted sockets have it as their near end)."""
    far_ends = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            far_ends[fields[9]] = int(fields[2].rsplit(":", 1)[1], 16)
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and far_ends.get(target[8:-1]) == port:
            found.append(fd)
    return found


def test_a_finished_flow_leaves_no_socket_open_while_the_provider_lives(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.call_tool("echo", {"text": "hi"})
        auth.expire_all()
        client.call_tool("echo", {"text": "after a refresh"})
        assert grants(auth, "refresh_token") == 1
        # The provider is still referenced: nothing it used may stay open.
        assert client_sockets_to(urlsplit(auth.url).port) == []
    assert client_sockets_to(urlsplit(mcp.url).port) == []


def test_who_a_client_is_made_as_is_read_without_a_refresh(serve, tmp_path):
    """`credential_scope()`, which a client with a cache reads before each
    cached request, names the held token and never refreshes it: a refresh
    happens inside the request that needs it."""
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    path = tmp_path / "tokens.json"
    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=FileStorage(path)))
    [old] = auth.issued
    edit_stored_token(path, old, expires_at=time.time() - 1)  # expired: token() would refresh now
    oauth = OAuth(redirect=Recording(), storage=FileStorage(path), server_url=mcp.url)
    first = oauth.credential_scope()
    assert first is not None and old not in first and first == oauth.credential_scope()
    assert grants(auth, "refresh_token") == 0
    oauth.token()  # the request's own path refreshes it
    assert grants(auth, "refresh_token") == 1
    assert oauth.credential_scope() not in (None, first)  # another token, another identity for the cache


def test_a_refused_refresh_leaves_the_shared_storage_to_the_worker_that_saved_in_it(serve):
    # The second worker's view of the storage lags (a replica, or the first
    # worker's save landing just after its re-read): its refresh is refused
    # and it still sees its own old tokens. It deleted the storage's entry,
    # the first worker's fresh tokens. It forgets its own tokens only.
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    shared = MemoryStorage()
    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=shared))
    key = f"tokens {mcp.url}"
    before = shared.load(key)

    class NobodyAnswers(HeadlessRedirect):
        def authorize(self, authorization_url: str) -> str:
            raise mcp_sync.AuthorizationError("nobody answered (the test)")

    second = OAuth(mcp.url, redirect=NobodyAnswers(), storage=StaleView(shared, key, before))
    assert second.tokens.access_token == before["access_token"]
    auth.expire_all()
    use(mcp, OAuth(mcp.url, redirect=Recording(), storage=shared))  # the first worker refreshes
    renewed = shared.load(key)["access_token"]
    with pytest.raises(mcp_sync.McpError):
        use(mcp, second)  # refused, then asks again: nobody answers
    assert len(token_forms(auth, "refresh_token")) == 2
    assert shared.load(key)["access_token"] == renewed  # the first worker's tokens are still there


def test_credential_scope_reads_without_waiting_while_a_refresh_reads_the_storage(serve):
    # `credential_scope()` must not wait for a refresh in progress (the
    # cache asks it on every call): the refresh's second look at the
    # storage marked the tokens unloaded, and a scope asked meanwhile took
    # the lock and waited out the whole refresh.
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    shared = MemoryStorage()
    use(mcp, OAuth(redirect=HeadlessRedirect(), storage=shared))
    key = f"tokens {mcp.url}"
    shared.save(key, {**shared.load(key), "expires_at": time.time() - 1})
    reading, release = threading.Event(), threading.Event()

    class Held(MemoryStorage):
        armed = False

        def load(self, name):
            if self.armed and name == key:
                reading.set()
                release.wait(30)  # the refresh holds the provider's lock meanwhile
            return shared.load(name)

        def save(self, name, value):
            shared.save(name, value)

    storage = Held()
    oauth = OAuth(mcp.url, redirect=Recording(), storage=storage)
    scope = oauth.credential_scope()
    storage.armed = True
    refresher = threading.Thread(target=oauth.token)
    asked: list[object] = []
    asker = threading.Thread(target=lambda: asked.append(oauth.credential_scope()))
    refresher.start()
    try:
        assert reading.wait(10)
        asker.start()
        asker.join(10)
        assert asked == [scope]  # at once, while the storage read is still held
    finally:
        release.set()
        refresher.join(30)
        if asker.is_alive():
            asker.join(10)


class StaleView:
    """A shared storage as another worker sees it: the tokens under `key`
    as they were (`before`) while `stale()` says so; writes go through."""

    def __init__(self, shared, key, before, stale=lambda: True) -> None:
        self.shared, self.key, self.before, self.stale = shared, key, before, stale

    def load(self, name):
        return dict(self.before) if name == self.key and self.stale() else self.shared.load(name)

    def save(self, name, value):
        self.shared.save(name, value)

    def delete(self, name):
        self.shared.delete(name)
