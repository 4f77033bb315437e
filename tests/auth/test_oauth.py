"""End-to-end tests of the OAuth authorization code flow (`mcp_sync.auth.OAuth`).

Everything goes through the public API: `mcp_sync.connect(mcp.url,
auth=OAuth(...))`, then calls, against the test authorization server and
protected MCP server of `mcp_sync.testing.auth` on real sockets. The
assertions look at what crossed the wire (`AuthServer.requests`, `issued`,
`registered`, `client_auth`, `ProtectedMCP.seen_tokens`).

This file: discovery, scopes, client identity, and the checks of the
authorization response. `test_oauth_tokens.py`: tokens, refresh, step-up,
where the person is, threads, secrecy and storage.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest

import mcp_sync
from mcp_sync.auth import HeadlessRedirect, MemoryStorage, OAuth
from mcp_sync.testing.auth import AuthServer, ProtectedMCP
from tests.auth.flows import (
    REDIRECT,
    Recording,
    authorize_queries,
    basic_client_id,
    bearer_tokens,
    everything_sent,
    mcp_gets,
    metadata_gets,
    paths,
    token_forms,
    use,
)

CIMD_URL = "https://app.example.com/oauth/client.json"


# -- 1. discovery ---------------------------------------------------------------------------------


def test_protected_resource_metadata_from_the_challenge_url(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, prm="header-only"))
    use(mcp, OAuth(redirect=HeadlessRedirect()))
    # Only the URL the 401 named was fetched: no well-known guessing.
    assert mcp_gets(mcp) == ["/metadata/mcp-resource.json"]
    assert [q["resource"] for q in authorize_queries(auth)] == [mcp.url]


def test_protected_resource_metadata_at_the_path_based_well_known_url(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, prm="path", prm_in_header=False))
    use(mcp, OAuth(redirect=HeadlessRedirect()))
    assert mcp_gets(mcp) == ["/.well-known/oauth-protected-resource/mcp"]
    assert [q["resource"] for q in authorize_queries(auth)] == [mcp.url]


def test_root_protected_resource_metadata_whose_resource_is_the_origin(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, prm="root", prm_in_header=False))
    mcp.resource_override = mcp.origin  # "http://127.0.0.1:PORT", no path, no slash
    use(mcp, OAuth(redirect=HeadlessRedirect()))
    # The path-based URL first (404), then the root one.
    assert mcp_gets(mcp) == ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
    # The resource is the metadata's, exactly: not the endpoint URL, no slash added.
    assert [q["resource"] for q in authorize_queries(auth)] == [mcp.origin]
    assert [f["resource"] for f in token_forms(auth)] == [mcp.origin]
    assert {grant.resource for grant in auth.issued.values()} == {mcp.origin}


ISSUER_PATH_URLS = ["/.well-known/oauth-authorization-server/tenant1", "/.well-known/openid-configuration/tenant1",
                    "/tenant1/.well-known/openid-configuration"]
ROOT_URLS = ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]


@pytest.mark.parametrize("issuer_path", ["", "/tenant1"])
@pytest.mark.parametrize("style", ["oauth", "openid", "openid-append"])
def test_authorization_server_metadata_urls_are_tried_in_the_spec_order(serve, style, issuer_path):
    auth = serve(AuthServer(discovery=style, issuer_path=issuer_path))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect()))
    candidates = [auth.url + path for path in (ISSUER_PATH_URLS if issuer_path else ROOT_URLS)]
    served = auth.metadata_urls[0]
    # Every URL before the served one (each a 404), then the served one, and nothing after it.
    assert metadata_gets(auth) == candidates[:candidates.index(served) + 1]
    if issuer_path:
        # The origin's own metadata belongs to another issuer: never asked for.
        assert not set(metadata_gets(auth)) & {auth.url + path for path in ROOT_URLS}
    assert auth.authorization_requests == 1 and auth.token_requests == 1


def test_resource_metadata_for_another_server_is_refused_before_authorizing(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    mcp.resource_override = "http://evil.example/mcp"
    with pytest.raises(mcp_sync.AuthorizationError, match="evil.example"):
        use(mcp, OAuth(redirect=HeadlessRedirect()))
    assert auth.requests == []  # not even the authorization server's metadata


def test_resource_metadata_for_another_port_of_the_same_host_is_refused(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    parts = urlsplit(mcp.url)
    mcp.resource_override = urlunsplit((parts.scheme, f"127.0.0.1:{parts.port + 1}", parts.path, "", ""))
    with pytest.raises(mcp_sync.AuthorizationError, match="not for this server"):
        use(mcp, OAuth(redirect=HeadlessRedirect()))
    assert auth.authorization_requests == 0 and auth.token_requests == 0


@pytest.mark.parametrize("named", ["http://127.0.0.1:1/elsewhere", "TRAILING-SLASH"])
def test_metadata_naming_another_issuer_is_never_used(serve, named):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    auth.issuer_override = auth.issuer + "/" if named == "TRAILING-SLASH" else named
    with pytest.raises(mcp_sync.AuthorizationError, match="issuer"):
        use(mcp, OAuth(redirect=HeadlessRedirect()))
    # Both well-known URLs were tried (the first one's document failed validation);
    # nothing else reached the authorization server.
    assert paths(auth) == [("GET", "/.well-known/oauth-authorization-server"),
                           ("GET", "/.well-known/openid-configuration")]
    assert auth.registered == {}


@pytest.mark.parametrize("methods", [None, ["plain"]])
def test_metadata_without_s256_pkce_is_refused_before_authorizing(serve, methods):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    doc = dict(auth.metadata)
    if methods is None:
        del doc["code_challenge_methods_supported"]
    else:
        doc["code_challenge_methods_supported"] = methods
    auth.metadata_override = doc
    with pytest.raises(mcp_sync.AuthorizationError, match="S256"):
        use(mcp, OAuth(redirect=Recording()))
    assert paths(auth) == [("GET", "/.well-known/oauth-authorization-server")]


def test_plain_http_authorization_server_is_refused(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    mcp.prm_override = {"resource": mcp.url, "authorization_servers": ["http://auth.example.com"]}
    redirect = Recording()
    with pytest.raises(mcp_sync.AuthorizationError, match="HTTPS") as info:
        use(mcp, OAuth(redirect=redirect))
    assert "http://auth.example.com" in str(info.value)
    assert redirect.urls == [] and auth.requests == []


def test_configured_authorization_server_must_be_one_the_resource_lists(serve):
    auth, other = serve(AuthServer()), serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    with pytest.raises(mcp_sync.AuthorizationError, match="not one the server accepts"):
        use(mcp, OAuth(redirect=HeadlessRedirect(), authorization_server=other.issuer))
    assert other.requests == [] and auth.requests == []


# -- 2. scopes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("challenge, supported, explicit, expected", [
    ("files:read", ["a", "b"], None, "files:read"),  # the challenge wins over scopes_supported
    (None, ["a", "b"], None, "a b"),                 # else all of scopes_supported
    (None, None, None, None),                        # else no scope parameter at all
    ("files:read", ["a"], "x y", "x y"),             # an explicit setting wins over both
    (None, None, ["x"], "x"),
])
def test_scope_selection(serve, challenge, supported, explicit, expected):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, challenge_scope=challenge, scopes_supported=supported))
    use(mcp, OAuth(redirect=HeadlessRedirect(), scopes=explicit))
    [query] = authorize_queries(auth)
    assert query.get("scope") == expected
    [grant] = auth.issued.values()
    assert grant.scope == frozenset((expected or "").split())


@pytest.mark.parametrize("advertised, setting, expected", [
    (["files:read", "offline_access"], True, "files:read offline_access"),
    (["files:read"], True, "files:read"),
    (None, True, "files:read"),
    (["files:read", "offline_access"], False, "files:read"),
])
def test_offline_access_is_added_only_when_the_authorization_server_advertises_it(serve, advertised, setting,
                                                                                  expected):
    auth = serve(AuthServer(scopes_supported=advertised))
    mcp = serve(ProtectedMCP(auth, challenge_scope="files:read"))
    use(mcp, OAuth(redirect=HeadlessRedirect(), offline_access=setting))
    assert [q["scope"] for q in authorize_queries(auth)] == [expected]


def test_offline_access_alone_is_not_requested_when_no_scope_is_known(serve):
    auth = serve(AuthServer(scopes_supported=["offline_access"]))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect()))
    # Omitting scope asks for the server's default; "offline_access" alone would narrow it.
    assert "scope" not in authorize_queries(auth)[0]


def test_dynamic_registration_metadata(serve):
    # strict_application_type: the server refuses a "web" client with a loopback redirect URI.
    auth = serve(AuthServer(strict_application_type=True))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect(REDIRECT), client_name="my tool"))
    [(client_id, doc)] = auth.registered.items()
    assert doc["grant_types"] == ["authorization_code", "refresh_token"]
    assert doc["application_type"] == "native"
    assert doc["redirect_uris"] == [REDIRECT] and doc["response_types"] == ["code"]
    assert doc["client_name"] == "my tool"
    assert doc["token_endpoint_auth_method"] == "client_secret_basic"
    assert authorize_queries(auth)[0]["client_id"] == client_id


def test_registration_without_refresh_grant_when_the_server_has_none(serve):
    auth = serve(AuthServer(refresh_tokens=False))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect()))
    [doc] = auth.registered.values()
    assert doc["grant_types"] == ["authorization_code"]


def test_refused_registration_is_reported_with_the_servers_error(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    auth.registration_error = (400, {"error": "invalid_redirect_uri", "error_description": "no loopback here"})
    with pytest.raises(mcp_sync.OAuthError, match="no loopback here") as info:
        use(mcp, OAuth(redirect=HeadlessRedirect()))
    assert info.value.error == "invalid_redirect_uri"
    assert auth.authorization_requests == 0


@pytest.mark.parametrize("expires_at", [10**400, "soon", True, None], ids=["past-a-float", "text", "bool", "null"])
def test_a_registration_with_an_unusable_secret_expiry_still_authorizes(serve, expires_at):
    # RFC 7591's client_secret_expires_at past a float's range raised
    # OverflowError from start() (and, through a call, an error blaming
    # "the token provider"). An expiry that is no usable number is taken as
    # none given.
    auth = serve(AuthServer(auth_methods=("client_secret_basic", "none")))
    mcp = serve(ProtectedMCP(auth))
    auth.registration_error = (201, {"client_id": "given-id", "client_secret": "given-secret",
                                     "client_secret_expires_at": expires_at})
    storage = MemoryStorage()
    start = OAuth(mcp.url, redirect_uri=REDIRECT, storage=storage).start()
    assert parse_qs(urlsplit(start.url).query)["client_id"] == ["given-id"]
    assert storage.load(f"client {auth.issuer}")["secret_expires_at"] is None


# -- 3. client identity ---------------------------------------------------------------------------


def test_dynamic_registration_happens_once_per_authorization_server(serve):
    """Two MCP servers behind one authorization server, two OAuth providers
    sharing a storage: the registration is stored per issuer and reused."""
    auth = serve(AuthServer())
    first, second = serve(ProtectedMCP(auth)), serve(ProtectedMCP(auth))
    storage = MemoryStorage()
    use(first, OAuth(redirect=HeadlessRedirect(), storage=storage))
    use(second, OAuth(redirect=HeadlessRedirect(), storage=storage))
    [client_id] = auth.registered
    assert len(auth.requests_to("/register")) == 1
    assert [q["client_id"] for q in authorize_queries(auth)] == [client_id, client_id]
    assert [q["resource"] for q in authorize_queries(auth)] == [first.url, second.url]
    assert auth.client_auth == [(client_id, "client_secret_basic")] * 2


def test_client_id_metadata_document_instead_of_registration(serve):
    auth = serve(AuthServer(cimd=True))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect(), client_metadata_url=CIMD_URL))
    assert auth.registered == {} and auth.requests_to("/register") == []
    assert [q["client_id"] for q in authorize_queries(auth)] == [CIMD_URL]
    assert [f["client_id"] for f in token_forms(auth)] == [CIMD_URL]
    assert auth.client_auth == [(CIMD_URL, "none")]


def test_client_metadata_url_falls_back_to_registration_without_server_support(serve):
    auth = serve(AuthServer(cimd=False))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect(), client_metadata_url=CIMD_URL))
    [client_id] = auth.registered
    assert CIMD_URL not in everything_sent(auth)
    assert [q["client_id"] for q in authorize_queries(auth)] == [client_id]


def test_pre_registered_client_authenticates_with_basic(serve):
    auth = serve(AuthServer(clients={"app": "s3cret:/+%"}))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect(), client_id="app", client_secret="s3cret:/+%", client_issuer=auth.issuer))
    assert auth.requests_to("/register") == [] and auth.registered == {}
    assert [q["client_id"] for q in authorize_queries(auth)] == ["app"]
    [token] = auth.requests_to("/token")
    assert "client_secret" not in token.form and basic_client_id(token.headers) == "app"
    assert auth.client_auth == [("app", "client_secret_basic")]


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
def test_token_endpoint_authentication_follows_the_advertised_method(serve, method):
    auth = serve(AuthServer(auth_methods=[method]))
    mcp = serve(ProtectedMCP(auth))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        auth.revoke(bearer_tokens(mcp)[-1])  # the next call refreshes: the client authenticates again
        assert client.call_tool("echo", {"text": "again"}).text == "again"
    [(client_id, doc)] = auth.registered.items()
    assert doc["token_endpoint_auth_method"] == method
    assert auth.client_auth == [(client_id, method)] * 2
    assert [f["grant_type"] for f in token_forms(auth)] == ["authorization_code", "refresh_token"]
    for request in auth.requests_to("/token"):
        assert ("client_secret" in request.form) == (method == "client_secret_post")
        assert (basic_client_id(request.headers) is not None) == (method == "client_secret_basic")


def test_pre_registered_client_uses_post_when_only_post_is_advertised(serve):
    auth = serve(AuthServer(clients={"app": "s3cret"}, auth_methods=["client_secret_post"]))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect(), client_id="app", client_secret="s3cret", client_issuer=auth.issuer))
    assert auth.client_auth == [("app", "client_secret_post")]


def test_authorization_server_migration_registers_again_and_never_leaks_the_old_client(serve):
    old, new = serve(AuthServer()), serve(AuthServer())
    mcp = serve(ProtectedMCP(old))
    oauth = OAuth(redirect=HeadlessRedirect())
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        assert client.call_tool("echo", {"text": "before"}).text == "before"
        [old_id] = old.registered
        old_refresh = oauth.tokens.refresh_token
        mcp.switch_to(new)
        assert client.call_tool("echo", {"text": "after"}).text == "after"
    [new_id] = new.registered
    assert new_id != old_id
    sent_to_new = everything_sent(new)
    assert old_id not in sent_to_new and old_refresh not in sent_to_new
    # Rediscovered, registered, authorized and got tokens at the new server; no refresh there.
    assert [path for method, path in paths(new)] == [
        "/.well-known/oauth-authorization-server", "/register", "/authorize", "/token"]
    assert [q["client_id"] for q in authorize_queries(new)] == [new_id]
    assert bearer_tokens(mcp)[-1] in new.issued and oauth.tokens.issuer == new.issuer
    # The old server saw one authorization and nothing after the switch.
    assert old.authorization_requests == 1 and old.token_requests == 1


def test_pre_registered_credentials_stay_with_their_authorization_server(serve):
    old = serve(AuthServer(clients={"app": "s3cret"}))
    new = serve(AuthServer(clients={"app": "other-secret"}))
    mcp = serve(ProtectedMCP(old))
    oauth = OAuth(redirect=HeadlessRedirect(), client_id="app", client_secret="s3cret", client_issuer=old.issuer)
    with mcp_sync.connect(mcp.url, auth=oauth) as client:
        client.list_tools()
        mcp.switch_to(new)
        assert client.call_tool("echo", {"text": "moved"}).text == "moved"
    assert old.client_auth == [("app", "client_secret_basic")]
    [new_id] = new.registered
    assert "s3cret" not in everything_sent(new) and new.client_auth == [(new_id, "client_secret_basic")]
    assert [q["client_id"] for q in authorize_queries(new)] == [new_id]


# -- 4. the authorization response ----------------------------------------------------------------


def _iss_value(auth: AuthServer, choice: str | None) -> str | None:
    return {"ISSUER": auth.issuer, "SLASH": auth.issuer + "/", "UPPER": auth.issuer.upper(),
            "ABSENT": "", None: None}.get(choice, choice)


@pytest.mark.parametrize("advertised, sent, accepted", [
    (True, None, True),                          # the server's own iss
    (True, "ABSENT", False),                     # advertised but missing
    (True, "https://evil.example", False),       # another issuer
    (True, "SLASH", False),                      # no trailing-slash normalization
    (True, "UPPER", False),                      # no case folding
    (False, "https://evil.example", False),      # not advertised, present and wrong
    (False, "ISSUER", True),                     # not advertised, present and right
    (False, None, True),                         # not advertised and absent
])
def test_iss_in_the_authorization_response(serve, advertised, sent, accepted):
    auth = serve(AuthServer(iss_parameter=advertised))
    mcp = serve(ProtectedMCP(auth))
    auth.iss_override = _iss_value(auth, sent)
    redirect = Recording()
    if accepted:
        use(mcp, OAuth(redirect=redirect))
        assert auth.token_requests == 1
    else:
        with pytest.raises(mcp_sync.AuthorizationError, match="iss") as info:
            use(mcp, OAuth(redirect=redirect))
        assert not isinstance(info.value, mcp_sync.OAuthError)
        # Refused before the code went anywhere.
        assert auth.token_requests == 0
        code = parse_qs(urlsplit(redirect.callbacks[0]).query)["code"][0]
        assert code not in str(info.value)
    # The server did send what the case is about.
    [callback] = redirect.callbacks
    if sent is None:
        expected = [auth.issuer] if advertised else None
    else:
        expected = None if sent == "ABSENT" else [_iss_value(auth, sent)]
    assert parse_qs(urlsplit(callback).query).get("iss") == expected


def test_access_denied_is_an_oauth_error(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    auth.deny = True
    with pytest.raises(mcp_sync.OAuthError) as info:
        use(mcp, OAuth(redirect=HeadlessRedirect()))
    assert info.value.error == "access_denied" and info.value.status is None
    assert info.value.description == "the user denied the request"
    assert auth.token_requests == 0 and auth.authorization_requests == 1


def test_an_error_response_from_the_wrong_issuer_is_not_believed(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    auth.deny = True
    auth.iss_override = "https://evil.example"
    with pytest.raises(mcp_sync.AuthorizationError) as info:
        use(mcp, OAuth(redirect=HeadlessRedirect()))
    # The spec: on an iss mismatch the error and its description are neither acted on nor shown.
    assert not isinstance(info.value, mcp_sync.OAuthError)
    assert "access_denied" not in str(info.value) and "denied" not in str(info.value)


class TamperingRedirect:
    """A custom RedirectHandler: approves like HeadlessRedirect, then puts
    `state` (or a made-up one) in the callback instead of the real one."""

    redirect_uri = REDIRECT

    def __init__(self, state: str | None = None) -> None:
        self.state = state
        self.callbacks: list[str] = []

    def authorize(self, authorization_url: str) -> str:
        callback = HeadlessRedirect(self.redirect_uri, timeout=5).authorize(authorization_url)
        parts = urlsplit(callback)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        query["state"] = self.state or "forged-" + query["state"]
        self.callbacks.append(callback)
        return urlunsplit(parts._replace(query=urlencode(query)))


def test_a_state_mismatch_is_refused(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    redirect = TamperingRedirect()
    with pytest.raises(mcp_sync.AuthorizationError, match="state"):
        use(mcp, OAuth(redirect=redirect))
    assert len(redirect.callbacks) == 1 and auth.token_requests == 0


def test_the_state_of_another_authorization_in_progress_is_refused(serve):
    """The callback must carry this authorization's state, not merely one the storage knows."""
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    redirect = TamperingRedirect()
    oauth = OAuth(mcp.url, redirect=redirect)
    redirect.state = oauth.start().state  # pending, never finished
    with pytest.raises(mcp_sync.AuthorizationError, match="does not match the request"):
        use(mcp, oauth)
    assert len(redirect.callbacks) == 1 and auth.token_requests == 0


def test_repeated_parameters_in_the_callback_are_refused(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    redirect = Recording(tamper=lambda callback: callback + "&code=injected")
    with pytest.raises(mcp_sync.AuthorizationError, match="repeats 'code'"):
        use(mcp, OAuth(redirect=redirect))
    assert auth.token_requests == 0


@pytest.mark.parametrize("value", ["no", "", 0, 1, None])
def test_the_providers_switches_are_true_or_false(value):
    """A look-alike was taken for its truth value: `offline_access="no"`
    asked for a refresh token, `open_browser="no"` opened the browser, and
    `dpop="no"` was kept as the provider's DPoP key."""
    from mcp_sync.auth import LoopbackRedirect

    with pytest.raises(TypeError, match="offline_access must be True or False"):
        OAuth("https://mcp.example.com/mcp", offline_access=value)
    with pytest.raises(TypeError, match="open_browser must be True or False"):
        LoopbackRedirect(open_browser=value)
    with pytest.raises(TypeError, match="dpop must be True, False or a mcp_sync.auth.DPoP"):
        OAuth("https://mcp.example.com/mcp", dpop=value)
