"""End-to-end tests of the grants without a person (`mcp_sync.auth.grants`), DPoP, and the
transport's token-provider seam, through `mcp_sync.connect()` against `mcp_sync.testing.auth`."""

from __future__ import annotations

import base64
import hashlib
import threading
import time
from urllib.parse import unquote_plus, urlsplit

import pytest

import mcp_sync
import mcp_sync.auth.tokens as tokens_module
from mcp_sync.auth import (
    DPoP,
    EnterpriseManaged,
    HeadlessRedirect,
    JwtBearer,
    MemoryStorage,
    OAuth,
    SigningKey,
)
from mcp_sync.auth.grants import ClientCredentials
from mcp_sync.errors import AuthorizationError, AuthorizationRequired
from mcp_sync.testing import demo_server
from mcp_sync.testing.auth import (
    CLIENT_ASSERTION_TYPE,
    ID_JAG_TYPE,
    ID_TOKEN_TYPE,
    JWT_BEARER,
    TOKEN_EXCHANGE,
    AuthServer,
    ProtectedMCP,
    jwk_thumbprint,
    public_jwk,
    sign_jwt,
    unverified,
    verify_jwt,
)
from mcp_sync.testing import GateAnswer, HTTPServer


def ec_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def b64url_sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode("ascii")).digest()).rstrip(b"=").decode()


def mcp_posts(server) -> list:
    """The POSTs to the MCP endpoint of a ProtectedMCP or an HTTPServer."""
    http = getattr(server, "http", server)
    return [r for r in http.requests if r.method == "POST" and urlsplit(r.path).path == http.path]


def token_forms(auth: AuthServer) -> list[dict]:
    return [r.form for r in auth.requests_to("/token")]


def basic_credentials(request) -> tuple[str, str]:
    """(client_id, secret) of a recorded request's Basic Authorization header."""
    scheme, _, value = request.headers["authorization"].partition(" ")
    assert scheme == "Basic"
    client_id, _, secret = base64.b64decode(value).decode().partition(":")
    return unquote_plus(client_id), unquote_plus(secret)


# -- ClientCredentials -------------------------------------------------------------------------


@pytest.mark.parametrize("advertised, expected", [
    (["client_secret_basic"], "client_secret_basic"),
    (["client_secret_post"], "client_secret_post"),
    (["private_key_jwt", "client_secret_post"], "client_secret_post"),
    (["client_secret_post", "client_secret_basic"], "client_secret_basic"),
])
def test_client_credentials_with_a_secret_uses_an_advertised_method(serve, advertised, expected):
    secret = "p@ss:w+rd %"  # form-urlencoded inside Basic (RFC 6749 §2.3.1)
    auth = serve(AuthServer(clients={"m2m:1": secret}, auth_methods=advertised))
    mcp = serve(ProtectedMCP(auth, challenge_scope="tools:read"))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m:1", secret, authorization_server=auth.issuer)) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    assert auth.client_auth == [("m2m:1", expected)]
    assert auth.authorization_requests == 0 and auth.token_requests == 1
    [request] = auth.requests_to("/token")
    grant = {"grant_type": "client_credentials", "resource": mcp.url, "scope": "tools:read"}
    if expected == "client_secret_basic":
        assert request.form == grant and basic_credentials(request) == ("m2m:1", secret)
    else:
        assert request.form == {**grant, "client_id": "m2m:1", "client_secret": secret}
        assert "authorization" not in request.headers
    [issued] = auth.issued.values()
    assert issued.resource == mcp.url and issued.grant_type == "client_credentials"
    assert mcp.seen_tokens[0] is None and set(mcp.seen_tokens[1:]) == {f"Bearer {issued.token}"}


def test_client_credentials_honours_a_forced_auth_method(serve):
    auth = serve(AuthServer(clients={"m2m": "s"}, auth_methods=["client_secret_basic", "client_secret_post"]))
    mcp = serve(ProtectedMCP(auth))
    provider = ClientCredentials("m2m", "s", authorization_server=auth.issuer, token_endpoint_auth_method="client_secret_post")
    with mcp_sync.connect(mcp.url, auth=provider) as client:
        client.list_tools()
    assert auth.client_auth == [("m2m", "client_secret_post")]


@pytest.mark.parametrize("as_pem", [False, True])
def test_client_credentials_with_private_key_jwt(serve, as_pem):
    from cryptography.hazmat.primitives import serialization

    raw = ec_key()
    pem = raw.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    key = pem if as_pem else SigningKey.from_pem(pem)
    auth = serve(AuthServer(jwt_clients={"svc": public_jwk(raw)}, auth_methods=["private_key_jwt"]))
    mcp = serve(ProtectedMCP(auth))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("svc", private_key=key)) as client:
        client.list_tools()
    assert auth.client_auth == [("svc", "private_key_jwt")] and auth.authorization_requests == 0
    [form] = token_forms(auth)
    assert set(form) == {"grant_type", "resource", "client_id", "client_assertion_type", "client_assertion"}
    assert (form["grant_type"], form["resource"], form["client_id"], form["client_assertion_type"]) == \
        ("client_credentials", mcp.url, "svc", CLIENT_ASSERTION_TYPE)
    header, claims = verify_jwt(form["client_assertion"], public_jwk(raw))
    assert header["alg"] == "ES256"
    assert (claims["iss"], claims["sub"], claims["aud"]) == ("svc", "svc", auth.issuer)
    assert claims["exp"] > claims["iat"] >= int(time.time()) - 5 and claims["jti"]


def test_client_credentials_obtains_a_new_token_after_the_server_expires_it(serve):
    auth = serve(AuthServer(clients={"m2m": "s"}))
    mcp = serve(ProtectedMCP(auth))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m", "s", authorization_server=auth.issuer)) as client:
        client.list_tools()
        [first] = auth.issued
        auth.expire_all()
        client.list_tools()
        client.list_tools()
    assert auth.token_requests == 2 and auth.authorization_requests == 0
    second = next(token for token in auth.issued if token != first)
    assert mcp.seen_tokens[-3:] == [f"Bearer {first}", f"Bearer {second}", f"Bearer {second}"]


def test_client_credentials_renews_an_expiring_token_before_sending_it(serve, monkeypatch):
    auth = serve(AuthServer(clients={"m2m": "s"}))
    mcp = serve(ProtectedMCP(auth))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m", "s", authorization_server=auth.issuer)) as client:
        client.list_tools()
        sent = len(mcp_posts(mcp))

        class Later:  # the client's clock only: one hour later, the token is at its expiry
            @staticmethod
            def time():
                return time.time() + 3600

        monkeypatch.setattr(tokens_module, "time", Later)
        client.list_tools()
    assert auth.token_requests == 2 and auth.authorization_requests == 0
    # No 401 first: the new token went out with the one request.
    assert len(mcp_posts(mcp)) == sent + 1 and mcp.seen_tokens[-1] == f"Bearer {list(auth.issued)[-1]}"


def test_a_short_lived_token_is_not_fetched_again_for_every_request(serve):
    auth = serve(AuthServer(clients={"m2m": "s"}, access_token_lifetime=20))  # under the 30 s margin
    mcp = serve(ProtectedMCP(auth))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m", "s", authorization_server=auth.issuer)) as client:
        for _ in range(3):
            client.list_tools()
    assert auth.token_requests == 1


def test_client_credentials_with_a_wrong_secret_raises_oauth_error(serve):
    auth = serve(AuthServer(clients={"m2m": "the-right-one"}))
    mcp = serve(ProtectedMCP(auth))
    provider = ClientCredentials("m2m", "WRONG-SECRET-VALUE", authorization_server=auth.issuer)
    with pytest.raises(mcp_sync.OAuthError) as caught:
        mcp_sync.connect(mcp.url, auth=provider)
    err = caught.value
    assert (err.error, err.status) == ("invalid_client", 401)
    assert "client credentials" in str(err)
    for text in (str(err), repr(err), repr(provider), str(err.description)):
        assert "WRONG-SECRET-VALUE" not in text
    assert auth.token_requests == 1  # no retry loop against the token endpoint


def test_two_client_identities_sharing_a_storage_keep_their_own_tokens(serve):
    auth = serve(AuthServer(clients={"reader": "s1", "admin": "s2"}))
    mcp = serve(ProtectedMCP(auth))
    storage = MemoryStorage()
    for client_id, secret in (("reader", "s1"), ("admin", "s2"), ("reader", "s1")):
        with mcp_sync.connect(mcp.url, auth=ClientCredentials(client_id, secret, storage=storage, authorization_server=auth.issuer)) as client:
            client.list_tools()
        token = mcp.seen_tokens[-1].removeprefix("Bearer ")
        assert auth.issued[token].client_id == client_id  # never the other identity's token
    assert auth.token_requests == 2  # the second "reader" found its own stored token


@pytest.mark.parametrize("challenge_scope, supported, explicit, sent", [
    ("tools:read tools:call", ["x"], None, "tools:read tools:call"),  # the challenge first
    (None, ["files:read", "files:write"], None, "files:read files:write"),  # then scopes_supported
    ("tools:read", None, ["mine"], "mine"),  # explicit scopes win
    (None, None, None, None),  # nothing: omitted
])
def test_client_credentials_scopes(serve, challenge_scope, supported, explicit, sent):
    auth = serve(AuthServer(clients={"m2m": "s"}))
    mcp = serve(ProtectedMCP(auth, challenge_scope=challenge_scope, scopes_supported=supported))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m", "s", authorization_server=auth.issuer, scopes=explicit)) as client:
        client.list_tools()
    [form] = token_forms(auth)
    assert form.get("scope") == sent


@pytest.mark.parametrize("where, problem", [
    ("prm", "invalid 'resource'"),
    ("metadata", "no usable metadata"),
])
def test_malformed_urls_in_metadata_are_authorization_errors(serve, where, problem):
    # Not a ValueError from urlsplit, which the transport would turn into a bare HTTP 401.
    auth = serve(AuthServer(clients={"m2m": "s"}))
    mcp = serve(ProtectedMCP(auth))
    if where == "prm":
        mcp.prm_override = {"resource": "http://[::1/mcp", "authorization_servers": [auth.issuer]}
    else:
        auth.metadata_override = {**auth.metadata, "token_endpoint": "http://127.0.0.1:99999/token"}
    with pytest.raises(AuthorizationError, match=problem) as caught:
        mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m", "s", authorization_server=auth.issuer))
    assert not isinstance(caught.value, mcp_sync.AuthenticationError) and auth.token_requests == 0


# -- JwtBearer ------------------------------------------------------------------------------------


def workload_assertion(key, auth, jti, sub="workload"):
    now = int(time.time())
    return sign_jwt({"iss": "workload", "sub": sub, "aud": auth.issuer, "exp": now + 60, "iat": now, "jti": jti}, key)


def test_jwt_bearer_sends_the_assertion_once(serve):
    key = ec_key()
    auth = serve(AuthServer(jwt_clients={"workload": key.public_key()}))
    mcp = serve(ProtectedMCP(auth, challenge_scope="tools:read"))
    assertion = workload_assertion(key, auth, "a1")
    with mcp_sync.connect(mcp.url, auth=JwtBearer(assertion)) as client:
        client.list_tools()
        client.list_tools()
    [request] = auth.requests_to("/token")
    assert request.form == {"grant_type": JWT_BEARER, "assertion": assertion, "resource": mcp.url, "scope": "tools:read"}
    assert "authorization" not in request.headers and auth.client_auth == []
    assert [claims["sub"] for claims in auth.assertions] == ["workload"] and auth.authorization_requests == 0


def test_jwt_bearer_with_client_authentication(serve):
    key = ec_key()
    auth = serve(AuthServer(jwt_clients={"workload": key.public_key()}, clients={"app": "s"}))
    mcp = serve(ProtectedMCP(auth))
    with mcp_sync.connect(mcp.url, auth=JwtBearer(workload_assertion(key, auth, "a1"), client_id="app",
                                                  client_secret="s", authorization_server=auth.issuer)) as client:
        client.list_tools()
    assert auth.client_auth == [("app", "client_secret_basic")]
    assert token_forms(auth)[0]["grant_type"] == JWT_BEARER


def test_jwt_bearer_calls_a_callable_again_for_the_next_token(serve):
    key = ec_key()
    auth = serve(AuthServer(jwt_clients={"workload": key.public_key()}))
    mcp = serve(ProtectedMCP(auth))
    made = []

    def fresh_assertion():
        made.append(workload_assertion(key, auth, f"j{len(made)}"))
        return made[-1]

    with mcp_sync.connect(mcp.url, auth=JwtBearer(fresh_assertion)) as client:
        client.list_tools()
        assert len(made) == 1
        auth.expire_all()
        client.list_tools()
    assert len(made) == 2 and made[0] != made[1]
    assert [form["assertion"] for form in token_forms(auth)] == made


def test_jwt_bearer_refused_assertion_raises_oauth_error(serve):
    auth = serve(AuthServer(jwt_clients={"workload": ec_key().public_key()}))
    mcp = serve(ProtectedMCP(auth))
    forged = workload_assertion(ec_key(), auth, "f1")  # signed by another key
    with pytest.raises(mcp_sync.OAuthError) as caught:
        mcp_sync.connect(mcp.url, auth=JwtBearer(forged))
    assert caught.value.error == "invalid_grant" and "jwt-bearer" in str(caught.value)
    assert forged not in str(caught.value) and auth.token_requests == 1


def test_jwt_bearer_a_failing_assertion_function_is_an_authorization_error(serve):
    auth = serve(AuthServer(jwt_clients={"workload": ec_key().public_key()}))
    mcp = serve(ProtectedMCP(auth))
    problem = FileNotFoundError(2, "No such file", "/var/run/secrets/tokens/mcp")

    def read_token():
        raise problem

    # Not swallowed into a bare "HTTP 401": the reason reaches the caller.
    with pytest.raises(AuthorizationError, match="workload JWT failed: FileNotFoundError") as caught:
        mcp_sync.connect(mcp.url, auth=JwtBearer(read_token))
    assert not isinstance(caught.value, mcp_sync.AuthenticationError) and caught.value.__cause__ is problem
    assert auth.token_requests == 0


def test_jwt_bearer_an_assertion_that_is_not_a_jwt_is_refused_before_sending(serve):
    auth = serve(AuthServer(jwt_clients={"workload": ec_key().public_key()}))
    mcp = serve(ProtectedMCP(auth))
    with pytest.raises(AuthorizationError, match="not a compact JWT"):
        mcp_sync.connect(mcp.url, auth=JwtBearer(lambda: "two words"))
    assert auth.token_requests == 0


# -- EnterpriseManaged ------------------------------------------------------------------------------


def enterprise(idp, auth, **changes):
    options = dict(authorization_server=auth.issuer, id_token="the-id-token", idp_token_endpoint=idp.token_endpoint, idp_client_id="app",
                   idp_client_secret="idp-secret", client_id="app", client_secret="as-secret")
    options.update(changes)
    return EnterpriseManaged(**options)


def test_enterprise_managed_exchanges_the_id_token_for_an_id_jag_then_a_token(serve):
    idp = serve(AuthServer(idp_id_tokens={"the-id-token": "alice"}, clients={"app": "idp-secret"}))
    auth = serve(AuthServer(trusted_idps=[idp], clients={"app": "as-secret"}))
    mcp = serve(ProtectedMCP(auth))
    with mcp_sync.connect(mcp.url, auth=enterprise(idp, auth)) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    [exchange] = idp.requests_to("/token")
    assert exchange.form == {"grant_type": TOKEN_EXCHANGE, "requested_token_type": ID_JAG_TYPE,
                             "subject_token": "the-id-token", "subject_token_type": ID_TOKEN_TYPE,
                             "audience": auth.issuer, "resource": mcp.url}
    assert basic_credentials(exchange) == ("app", "idp-secret") and idp.client_auth == [("app", "client_secret_basic")]
    [jag] = idp.id_jags
    [grant] = auth.requests_to("/token")
    assert grant.form == {"grant_type": JWT_BEARER, "assertion": jag, "resource": mcp.url}
    assert basic_credentials(grant) == ("app", "as-secret") and auth.client_auth == [("app", "client_secret_basic")]
    assert unverified(jag)[1]["aud"] == auth.issuer
    [issued] = auth.issued.values()
    assert (issued.subject, issued.resource) == ("alice", mcp.url)
    assert auth.authorization_requests == 0 and idp.authorization_requests == 0


def test_enterprise_managed_idp_refusal_names_the_identity_provider_step(serve):
    idp = serve(AuthServer(idp_id_tokens={"someone-else": "bob"}, clients={"app": "idp-secret"}))
    auth = serve(AuthServer(trusted_idps=[idp], clients={"app": "as-secret"}))
    mcp = serve(ProtectedMCP(auth))
    with pytest.raises(mcp_sync.OAuthError) as caught:
        mcp_sync.connect(mcp.url, auth=enterprise(idp, auth))
    assert caught.value.error == "invalid_grant" and "identity provider" in str(caught.value)
    assert "the-id-token" not in str(caught.value) and "idp-secret" not in str(caught.value)
    assert idp.token_requests == 1 and auth.token_requests == 0


def test_enterprise_managed_an_untrusting_authorization_server_refuses_the_id_jag(serve):
    idp = serve(AuthServer(idp_id_tokens={"the-id-token": "alice"}, clients={"app": "idp-secret"}))
    auth = serve(AuthServer(clients={"app": "as-secret"}))  # trusts no IdP
    mcp = serve(ProtectedMCP(auth))
    with pytest.raises(mcp_sync.OAuthError) as caught:
        mcp_sync.connect(mcp.url, auth=enterprise(idp, auth))
    assert caught.value.error == "invalid_grant" and "ID-JAG grant" in str(caught.value)
    assert idp.token_requests == 1 and auth.token_requests == 1


# -- DPoP -----------------------------------------------------------------------------------------


def check_proofs(mcp, dpop, token):
    """Every authorized MCP request carries `DPoP <token>` and a fresh valid proof; their claims."""
    authorized = [r for r in mcp_posts(mcp) if r.headers.get("Authorization")]
    assert authorized
    claims_seen = []
    for request in authorized:
        assert request.headers.get("Authorization") == f"DPoP {token}"
        proof = request.headers.get("DPoP")
        header, _ = unverified(proof)
        _, claims = verify_jwt(proof, header["jwk"])
        assert header["typ"] == "dpop+jwt" and jwk_thumbprint(header["jwk"]) == dpop.jkt
        assert (claims["htm"], claims["htu"], claims["ath"]) == ("POST", mcp.url, b64url_sha256(token))
        claims_seen.append(claims)
    assert len({claims["jti"] for claims in claims_seen}) == len(claims_seen)  # a fresh proof each time
    return claims_seen


def test_client_credentials_with_dpop(serve):
    auth = serve(AuthServer(clients={"m2m": "s"}, dpop=True))
    mcp = serve(ProtectedMCP(auth, dpop=True))
    dpop = DPoP(SigningKey.generate("ES256"))
    provider = ClientCredentials("m2m", "s", authorization_server=auth.issuer, dpop=dpop)
    with mcp_sync.connect(mcp.url, auth=provider) as client:
        client.list_tools()
        client.call_tool("echo", {"text": "x"})
        assert provider.tokens.token_type == "DPoP"
    [issued] = auth.issued.values()
    assert issued.token_type == "DPoP" and issued.jkt == dpop.jkt
    [token_request] = auth.requests_to("/token")
    _, as_claims = unverified(token_request.headers["dpop"])
    assert (as_claims["htm"], as_claims["htu"]) == ("POST", auth.token_endpoint) and "ath" not in as_claims
    claims = check_proofs(mcp, dpop, issued.token)
    assert len(claims) == 3 and all("nonce" not in c for c in claims)


def test_dpop_nonces_at_the_authorization_server_and_the_mcp_server(serve):
    auth = serve(AuthServer(clients={"m2m": "s"}, dpop_nonce=True))
    mcp = serve(ProtectedMCP(auth, dpop_nonce=True))
    dpop = DPoP()
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m", "s", authorization_server=auth.issuer, dpop=dpop)) as client:
        client.list_tools()
        client.list_tools()
    # The token endpoint: once without a nonce (400 use_dpop_nonce), once with it.
    first, second = auth.requests_to("/token")
    assert "nonce" not in unverified(first.headers["dpop"])[1]
    assert unverified(second.headers["dpop"])[1]["nonce"] == auth.dpop_nonce_value
    assert len(auth.issued) == 1
    # The MCP server: no token (401), a proof without its nonce (401 use_dpop_nonce), then the
    # nonce on that request and on every later one: one POST per call.
    [issued] = auth.issued.values()
    claims = check_proofs(mcp, dpop, issued.token)
    assert len(mcp_posts(mcp)) == 5 and len(claims) == 4
    assert "nonce" not in claims[0] and [c["nonce"] for c in claims[1:]] == [mcp.dpop_nonce_value] * 3


def test_a_server_that_always_wants_a_new_nonce_is_retried_a_bounded_number_of_times(serve):
    auth = serve(AuthServer(clients={"m2m": "s"}, dpop=True))
    mcp = serve(ProtectedMCP(auth, dpop_nonce=True))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("m2m", "s", authorization_server=auth.issuer, dpop=True)) as client:
        client.list_tools()
        before = len(mcp_posts(mcp))
        rotate_then_check = mcp.http.gate

        def gate(request):
            if urlsplit(request.path).path == mcp.http.path:
                mcp.rotate_dpop_nonce()
            return rotate_then_check(request)

        mcp.http.gate = gate
        with pytest.raises(mcp_sync.AuthenticationError) as caught:
            client.list_tools()
    assert caught.value.status == 401
    assert len(mcp_posts(mcp)) - before == 4  # the request and three retries, no more
    assert auth.token_requests == 1


def test_oauth_with_dpop_sends_dpop_jkt_in_the_authorization_request(serve):
    auth = serve(AuthServer(dpop=True))
    mcp = serve(ProtectedMCP(auth, dpop=True))
    dpop = DPoP(SigningKey.generate("ES256"))
    with mcp_sync.connect(mcp.url, auth=OAuth(redirect=HeadlessRedirect(), dpop=dpop)) as client:
        client.list_tools()
    [authorization] = auth.requests_to("/authorize")
    assert authorization.query["dpop_jkt"] == dpop.jkt
    [issued] = auth.issued.values()
    assert issued.jkt == dpop.jkt and issued.grant_type == "authorization_code"
    check_proofs(mcp, dpop, issued.token)


# -- the transport's seam with plain providers --------------------------------------------------------


class Gate:
    """Accepts `Bearer <t>` for t in `valid`; else answers `status` with a Bearer challenge."""

    def __init__(self, valid):
        self.valid = set(valid)
        self.status = 401

    def __call__(self, request):
        if request.method != "POST":
            return None
        token = (request.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token in self.valid:
            return None
        return GateAnswer(self.status, {"WWW-Authenticate": 'Bearer error="invalid_token", scope="s"',
                                        "Content-Type": "application/json"}, b'{"error": "invalid_token"}')


class Refreshing:
    """A provider with token() and refresh() only."""

    def __init__(self, first, then):
        self.current, self.then = first, list(then)
        self.challenges = []

    def token(self):
        return self.current

    def refresh(self, challenge):
        self.challenges.append(challenge)
        self.current = self.then.pop(0) if self.then else None
        return self.current


def test_a_refresh_only_provider_is_asked_once_per_401(serve):
    gate = Gate({"t1"})
    server = serve(HTTPServer(demo_server(), gate=gate))
    provider = Refreshing("t1", ["t2", "t3", "t4"])
    with mcp_sync.connect(server.url, auth=provider) as client:
        client.list_tools()
        assert provider.challenges == []
        gate.valid = {"t2"}  # t1 revoked: one refresh, and the retry succeeds
        client.list_tools()
        assert provider.challenges == ['Bearer error="invalid_token", scope="s"']
        gate.valid = set()  # nothing works: one refresh, then the second 401 is the caller's error
        sent = len(mcp_posts(server))
        with pytest.raises(mcp_sync.AuthenticationError) as caught:
            client.list_tools()
        assert caught.value.status == 401
        assert len(provider.challenges) == 2 and len(mcp_posts(server)) - sent == 2
        tokens = [r.headers.get("Authorization") for r in mcp_posts(server)[-4:]]
        assert tokens == ["Bearer t1", "Bearer t2", "Bearer t2", "Bearer t3"]


def test_a_refresh_only_provider_is_not_asked_on_403(serve):
    gate = Gate({"t1"})
    server = serve(HTTPServer(demo_server(), gate=gate))
    provider = Refreshing("t1", ["t2"])
    with mcp_sync.connect(server.url, auth=provider) as client:
        gate.valid, gate.status = set(), 403
        with pytest.raises(mcp_sync.AuthenticationError) as caught:
            client.list_tools()
    assert caught.value.status == 403 and provider.challenges == []


def test_a_refresh_returning_none_gives_up_at_once(serve):
    gate = Gate({"t1"})
    server = serve(HTTPServer(demo_server(), gate=gate))
    provider = Refreshing("t1", [])
    with mcp_sync.connect(server.url, auth=provider) as client:
        gate.valid = set()
        sent = len(mcp_posts(server))
        with pytest.raises(mcp_sync.AuthenticationError):
            client.list_tools()
    assert len(provider.challenges) == 1 and len(mcp_posts(server)) - sent == 1


class Challenged:
    """A provider with handle_challenge(); `answer` is what it does about each challenge."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def token(self):
        return "t1"

    def handle_challenge(self, status, headers):
        self.calls.append((status, dict(headers)))
        return self.answer()


def test_handle_challenge_returning_true_forever_is_called_at_most_3_times_per_request(serve):
    gate = Gate({"t1"})
    server = serve(HTTPServer(demo_server(), gate=gate))
    provider = Challenged(lambda: True)
    with mcp_sync.connect(server.url, auth=provider) as client:
        gate.valid = set()
        for round_ in (1, 2):
            sent = len(mcp_posts(server))
            with pytest.raises(mcp_sync.AuthenticationError):
                client.list_tools()
            assert len(provider.calls) == 3 * round_ and len(mcp_posts(server)) - sent == 4
    status, headers = provider.calls[0]
    assert status == 401 and headers["www-authenticate"] == 'Bearer error="invalid_token", scope="s"'


def test_handle_challenge_sees_403_too(serve):
    gate = Gate({"t1"})
    server = serve(HTTPServer(demo_server(), gate=gate))
    provider = Challenged(lambda: False)
    with mcp_sync.connect(server.url, auth=provider) as client:
        gate.valid, gate.status = set(), 403
        with pytest.raises(mcp_sync.AuthenticationError):
            client.list_tools()
    assert [status for status, _ in provider.calls] == [403]


@pytest.mark.parametrize("error", [
    AuthorizationError("the authorization server is down"),
    AuthorizationRequired("a person must authorize: use LoopbackRedirect"),
    mcp_sync.OAuthError("the token request failed with 'invalid_grant'", error="invalid_grant", status=400),
])
def test_an_authorization_error_from_handle_challenge_reaches_the_caller_unchanged(serve, error):
    gate = Gate({"t1"})
    server = serve(HTTPServer(demo_server(), gate=gate))

    def fail():
        raise error

    with mcp_sync.connect(server.url, auth=Challenged(fail)) as client:
        gate.valid = set()
        with pytest.raises(AuthorizationError) as caught:
            client.list_tools()
    assert type(caught.value) is type(error) and str(caught.value) == str(error)
    assert getattr(caught.value, "error", None) == getattr(error, "error", None)


def test_another_exception_from_handle_challenge_is_an_authorization_error_naming_it(serve):
    # (It was logged, and the server's bare 401 raised: the provider's
    # failure looked like the server's refusal.)
    gate = Gate({"t1"})
    server = serve(HTTPServer(demo_server(), gate=gate))

    def broken():
        raise RuntimeError("a bug in the provider")

    provider = Challenged(broken)
    with mcp_sync.connect(server.url, auth=provider) as client:
        gate.valid = set()
        with pytest.raises(mcp_sync.AuthorizationError, match="HTTP 401: RuntimeError: a bug in the provider"):
            client.list_tools()
    assert len(provider.calls) == 1


def test_a_request_with_a_token_from_before_a_refresh_does_not_refresh_again(serve):
    gate = Gate({"old"})
    server = serve(HTTPServer(demo_server(), gate=gate))
    a_has_token, refreshed = threading.Event(), threading.Event()

    class Racy(Refreshing):
        armed = False

        def token(self):
            value = self.current
            if self.armed and threading.current_thread().name == "A":
                a_has_token.set()  # A holds "old"; it sends it after B's refresh
                refreshed.wait(10)
            return value

        def refresh(self, challenge):
            value = super().refresh(challenge)
            refreshed.set()
            return value

    provider = Racy("old", ["new", "newer"])
    results = {}
    with mcp_sync.connect(server.url, auth=provider) as client:
        gate.valid = {"new", "newer"}
        provider.armed = True

        def call(name):
            try:
                results[name] = len(client.list_tools())
            except Exception as exc:  # noqa: BLE001 - compared below
                results[name] = exc

        a = threading.Thread(target=call, args=("A",), name="A")
        a.start()
        assert a_has_token.wait(10)
        b = threading.Thread(target=call, args=("B",), name="B")
        b.start()
        b.join(10)
        a.join(10)
    assert all(isinstance(n, int) for n in results.values()), results
    assert len(provider.challenges) == 1  # B's refresh served A's stale 401 too


def test_a_malformed_resource_metadata_url_in_the_challenge_is_an_authorization_error(serve):
    def gate(request):
        return GateAnswer(401, {"WWW-Authenticate": 'Bearer resource_metadata="http://[::1/prm"'}, b"")

    server = serve(HTTPServer(demo_server(), gate=gate))
    with pytest.raises(AuthorizationError) as caught:
        mcp_sync.connect(server.url, auth=ClientCredentials("m2m", "s", authorization_server="https://auth.example.com"))
    assert not isinstance(caught.value, mcp_sync.AuthenticationError)
