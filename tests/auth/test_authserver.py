"""Tests of the test servers in `mcp_sync.testing.auth` and of `HTTPServer`'s gate.

Driven by hand with `requests` (no mcp_sync OAuth code is involved), so the
servers the client's OAuth tests rely on are checked on their own.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import secrets
import threading
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

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
    make_dpop_proof,
    public_jwk,
    sign_jwt,
    unverified,
)
from mcp_sync.testing import GateAnswer, HTTPServer

MODERN = "2026-07-28"
REDIRECT = "http://127.0.0.1:8765/callback"
FORM = "application/x-www-form-urlencoded"



def ec_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def authorize(auth, client_id="app", *, redirect_uri=REDIRECT, resource=None, scope="read", challenge=None,
              **extra) -> tuple[int, dict[str, str], str]:
    """GET /authorize; (status, redirect query, redirect URL without its query)."""
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "st8",
              "code_challenge": challenge or pkce()[1], "code_challenge_method": "S256", "scope": scope}
    if resource is not None:
        params["resource"] = resource
    params.update(extra)
    params = {k: v for k, v in params.items() if v is not None}
    answer = requests.get(auth.authorization_endpoint, params=params, allow_redirects=False, timeout=5)
    location = answer.headers.get("Location", "")
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    return answer.status_code, query, location.split("?")[0]


def token(auth, data, *, auth_basic=None, headers=None) -> requests.Response:
    return requests.post(auth.token_endpoint, data=data, auth=auth_basic, headers=headers, timeout=5)


def code_flow(auth, mcp, client_id="app", secret="s3cret", scope="read") -> dict:
    """A whole authorization_code + PKCE round trip; the token response."""
    verifier, challenge = pkce()
    status, query, _ = authorize(auth, client_id, resource=mcp.url, scope=scope, challenge=challenge)
    assert status == 302 and "code" in query, query
    answer = token(auth, {"grant_type": "authorization_code", "code": query["code"], "code_verifier": verifier,
                          "redirect_uri": REDIRECT, "resource": mcp.url}, auth_basic=(client_id, secret))
    assert answer.status_code == 200, answer.text
    return answer.json()


def mcp_post(url, token=None, *, method="tools/list", name=None, scheme="Bearer", extra=None) -> requests.Response:
    """A 2026-07-28 MCP request, as the stateless era wants it."""
    params: dict = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                              "io.modelcontextprotocol/clientCapabilities": {}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        params.update(name=name, arguments={"text": "hi"})
        headers["Mcp-Name"] = name
    if token is not None:
        headers["Authorization"] = f"{scheme} {token}"
    headers.update(extra or {})
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return requests.post(url, data=json.dumps(body), headers=headers, timeout=5)


def challenge_params(value: str) -> tuple[str, dict[str, str]]:
    """Scheme and auth-params of a simple WWW-Authenticate challenge (as the servers write them)."""
    scheme, _, rest = value.partition(" ")
    params = {}
    for part in rest.split('", '):
        if part:
            key, _, val = part.partition("=")
            params[key] = val.strip('"')
    return scheme, params


# -- the gate of HTTPServer ---------------------------------------------------------------


def test_gate_answer_reaches_the_client_unchanged_and_keeps_the_connection(serve):
    seen = []

    def gate(request):
        seen.append(request)
        return GateAnswer(401, {"WWW-Authenticate": 'Bearer realm="x"', "X-Extra": "1"}, b"nope")

    httpd = serve(HTTPServer(demo_server(), gate=gate))
    conn = http.client.HTTPConnection("127.0.0.1", httpd.port, timeout=5)
    body = b'{"big": "' + b"x" * 5000 + b'"}'
    sockets = []
    for _ in range(2):
        conn.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json"})
        sockets.append(conn.sock)
        answer = conn.getresponse()
        assert (answer.status, answer.read()) == (401, b"nope")
        assert answer.getheader("WWW-Authenticate") == 'Bearer realm="x"' and answer.getheader("X-Extra") == "1"
        assert answer.getheader("Content-Length") == "4"
    # One connection served both: the first body was drained, not taken for the next request.
    assert sockets[0] is sockets[1] is conn.sock
    conn.close()
    assert len(httpd.requests) == 2 and httpd.requests[0].json == {"big": "x" * 5000}
    assert seen[0].method == "POST" and seen[0].headers.get("content-length") == "5011"


def test_gate_none_serves_and_the_gate_sees_every_path(serve):
    seen = []
    httpd = serve(HTTPServer(demo_server(), gate=lambda request: seen.append(request)))
    assert mcp_post(httpd.url).status_code == 200
    assert requests.get(httpd.url.replace("/mcp", "/.well-known/x?a=1"), timeout=5).status_code == 404
    assert [(g.method, g.path) for g in seen] == [("POST", "/mcp"), ("GET", "/.well-known/x?a=1")]
    assert seen[0].headers.get("MCP-PROTOCOL-VERSION") == MODERN


def test_a_failing_gate_answers_500(serve):
    def gate(request):
        raise RuntimeError("boom")

    httpd = serve(HTTPServer(demo_server(), gate=gate))
    answer = requests.get(httpd.url, timeout=5)
    assert answer.status_code == 500 and b"boom" in answer.content


# -- metadata -----------------------------------------------------------------------------


@pytest.mark.parametrize("style, where", [
    ("oauth", "/.well-known/oauth-authorization-server/tenant1"),
    ("openid", "/.well-known/openid-configuration/tenant1"),
    ("openid-append", "/tenant1/.well-known/openid-configuration"),
])
def test_metadata_is_served_only_at_the_discovery_styles_url(serve, style, where):
    auth = serve(AuthServer(issuer_path="/tenant1", discovery=style))
    candidates = {"/.well-known/oauth-authorization-server/tenant1", "/.well-known/openid-configuration/tenant1",
                  "/tenant1/.well-known/openid-configuration", "/.well-known/oauth-authorization-server",
                  "/.well-known/openid-configuration"}
    for path in candidates:
        answer = requests.get(auth.url + path, timeout=5)
        assert answer.status_code == (200 if path == where else 404), path
    doc = requests.get(auth.url + where, timeout=5).json()
    assert doc["issuer"] == auth.issuer == auth.url + "/tenant1"
    assert doc["token_endpoint"] == auth.issuer + "/token" and doc["code_challenge_methods_supported"] == ["S256"]
    assert ("jwks_uri" in doc) == style.startswith("openid")
    assert auth.metadata_urls == [auth.url + where]


def test_metadata_fields_follow_the_options_and_overrides(serve):
    plain = serve(AuthServer(registration=False, iss_parameter=False))
    doc = requests.get(plain.metadata_urls[0], timeout=5).json()
    assert "registration_endpoint" not in doc and "authorization_response_iss_parameter_supported" not in doc
    assert "client_id_metadata_document_supported" not in doc and "dpop_signing_alg_values_supported" not in doc
    assert doc["grant_types_supported"] == ["authorization_code", "refresh_token", "client_credentials", JWT_BEARER]
    auth = serve(AuthServer(cimd=True, dpop=True, scopes_supported=["read", "write"], issuer_override="http://evil",
                            auth_methods=["none", "private_key_jwt"]))
    doc = requests.get(auth.metadata_urls[0], timeout=5).json()
    assert doc["issuer"] == "http://evil" and doc["scopes_supported"] == ["read", "write"]
    assert doc["client_id_metadata_document_supported"] is True and doc["authorization_response_iss_parameter_supported"]
    assert doc["token_endpoint_auth_methods_supported"] == ["none", "private_key_jwt"]
    assert "ES256" in doc["dpop_signing_alg_values_supported"] and doc["registration_endpoint"] == auth.issuer + "/register"
    auth.metadata_override = b"{not json"
    assert requests.get(auth.metadata_urls[0], timeout=5).content == b"{not json"
    assert auth.requests[-1].path == "/.well-known/oauth-authorization-server"


# -- dynamic client registration ------------------------------------------------------------


def test_registration_issues_clients_and_records_the_request(serve):
    auth = serve(AuthServer(auth_methods=["client_secret_basic", "none"]))
    meta = {"redirect_uris": [REDIRECT], "application_type": "native", "client_name": "t",
            "grant_types": ["authorization_code", "refresh_token"]}
    answer = requests.post(auth.registration_endpoint, json=meta, timeout=5)
    assert answer.status_code == 201 and answer.headers["Cache-Control"] == "no-store"
    client = answer.json()
    assert client["client_secret"] and client["client_name"] == "t"
    assert client["token_endpoint_auth_method"] == "client_secret_basic"
    assert auth.registered[client["client_id"]] == meta and auth.requests_to("/register")[0].json == meta
    public = requests.post(auth.registration_endpoint, json={**meta, "token_endpoint_auth_method": "none"}, timeout=5)
    assert public.status_code == 201 and "client_secret" not in public.json()
    # The registered redirect URI is enforced (any loopback port is fine, RFC 8252).
    assert authorize(auth, client["client_id"], redirect_uri="http://127.0.0.1:9/callback")[0] == 302
    assert authorize(auth, client["client_id"], redirect_uri="http://127.0.0.1:9/other")[0] == 400


def test_registration_errors(serve):
    auth = serve(AuthServer(strict_application_type=True))
    post = lambda body: requests.post(auth.registration_endpoint, json=body, timeout=5)  # noqa: E731
    assert post({"client_name": "no redirects"}).json()["error"] == "invalid_redirect_uri"
    assert post({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}).json()["error"] == \
        "invalid_client_metadata"
    assert post({"redirect_uris": [REDIRECT]}).json()["error"] == "invalid_redirect_uri"  # not native
    assert post({"redirect_uris": [REDIRECT], "application_type": "native"}).status_code == 201
    auth.registration_error = (400, {"error": "invalid_client_metadata"})
    answer = post({"redirect_uris": [REDIRECT], "application_type": "native"})
    assert (answer.status_code, answer.json()) == (400, {"error": "invalid_client_metadata"})


# -- authorization code + PKCE --------------------------------------------------------------


def test_authorization_code_round_trip_gives_a_token_the_mcp_server_accepts(serve):
    auth = serve(AuthServer(clients={"app": "s3cret"}))
    mcp = serve(ProtectedMCP(auth, challenge_scope="read"))
    verifier, challenge = pkce()
    status, query, target = authorize(auth, resource=mcp.url, scope="read write", challenge=challenge)
    assert status == 302 and target == REDIRECT
    assert query["state"] == "st8" and query["iss"] == auth.issuer and set(query) == {"code", "state", "iss"}
    answer = token(auth, {"grant_type": "authorization_code", "code": query["code"], "code_verifier": verifier,
                          "redirect_uri": REDIRECT, "resource": mcp.url}, auth_basic=("app", "s3cret"))
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == "no-store"
    body = answer.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600 and body["scope"] == "read write"
    grant = auth.introspect(body["access_token"])
    assert grant.resource == mcp.url and grant.scope == {"read", "write"} and grant.client_id == "app"
    assert auth.client_auth == [("app", "client_secret_basic")]
    assert auth.authorization_requests == 1 and auth.token_requests == 1
    assert auth.requests_to("/authorize")[0].query["resource"] == mcp.url
    assert auth.requests_to("/token")[0].form["code_verifier"] == verifier
    assert mcp_post(mcp.url, body["access_token"]).status_code == 200
    assert mcp.seen_tokens == [f"Bearer {body['access_token']}"]


def test_wrong_verifier_code_reuse_and_mismatches_are_rejected(serve):
    auth = serve(AuthServer(clients={"app": "s3cret"}))
    mcp = serve(ProtectedMCP(auth))

    def exchange(code, verifier, **changes):
        data = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "redirect_uri": REDIRECT, "resource": mcp.url, **changes}
        return token(auth, {k: v for k, v in data.items() if v is not None}, auth_basic=("app", "s3cret"))

    for changes, error in (({"code_verifier": pkce()[0]}, "invalid_grant"),
                           ({"redirect_uri": "http://127.0.0.1:1/x"}, "invalid_grant"),
                           ({"resource": None}, "invalid_target")):
        verifier, challenge = pkce()
        code = authorize(auth, resource=mcp.url, challenge=challenge)[1]["code"]
        answer = exchange(code, verifier, **changes)
        assert (answer.status_code, answer.json()["error"]) == (400, error), changes
    verifier, challenge = pkce()
    code = authorize(auth, resource=mcp.url, challenge=challenge)[1]["code"]
    first = exchange(code, verifier).json()["access_token"]
    again = exchange(code, verifier)
    assert again.json()["error"] == "invalid_grant" and "already used" in again.json()["error_description"]
    assert auth.introspect(first) is None  # a replayed code revokes what it gave


def test_authorization_errors_redirect_only_to_trusted_redirect_uris(serve):
    auth = serve(AuthServer(clients={"app": "s3cret"}))
    assert authorize(auth, "nobody")[0] == 400
    status, query, target = authorize(auth, code_challenge_method="plain")
    assert (status, target, query["error"], query["state"], query["iss"]) == \
        (302, REDIRECT, "invalid_request", "st8", auth.issuer)
    assert authorize(auth, code_challenge="short")[1]["error"] == "invalid_request"
    assert authorize(auth, state=None)[1]["error"] == "invalid_request"
    assert authorize(auth, response_type="token")[1]["error"] == "unsupported_response_type"
    auth.deny = True
    assert authorize(auth)[1]["error"] == "access_denied"


def test_iss_parameter_options(serve):
    assert "iss" not in authorize(serve(AuthServer(clients={"app": None}, iss_parameter=False)))[1]
    assert "iss" not in authorize(serve(AuthServer(clients={"app": None}, iss_override="")))[1]
    assert authorize(serve(AuthServer(clients={"app": None}, iss_override="http://x/")))[1]["iss"] == "http://x/"


def test_cimd_client_ids_are_accepted_as_public_clients(serve):
    auth = serve(AuthServer(cimd=True, auth_methods=["none"]))
    mcp = serve(ProtectedMCP(auth))
    client_id = "https://app.example.com/client.json"
    verifier, challenge = pkce()
    code = authorize(auth, client_id, resource=mcp.url, challenge=challenge)[1]["code"]
    answer = token(auth, {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                          "redirect_uri": REDIRECT, "resource": mcp.url, "client_id": client_id})
    assert answer.status_code == 200 and auth.client_auth == [(client_id, "none")]
    assert authorize(auth, "https://app.example.com")[0] == 400  # no path: not a CIMD client_id


# -- the token endpoint ---------------------------------------------------------------------


def test_refresh_rotates_the_refresh_token(serve):
    auth = serve(AuthServer(clients={"app": "s3cret"}))
    mcp = serve(ProtectedMCP(auth))
    first = code_flow(auth, mcp, scope="read write")
    refresh = lambda rt, **more: token(auth, {"grant_type": "refresh_token", "refresh_token": rt, **more},  # noqa: E731
                                       auth_basic=("app", "s3cret"))
    second = refresh(first["refresh_token"], resource=mcp.url).json()
    assert second["refresh_token"] != first["refresh_token"] and second["scope"] == "read write"
    assert refresh(first["refresh_token"]).json()["error"] == "invalid_grant"  # the old one is gone
    assert refresh(second["refresh_token"], resource="http://other/mcp").json()["error"] == "invalid_target"
    narrowed = refresh(second["refresh_token"], scope="read").json()
    assert narrowed["scope"] == "read"
    assert refresh(narrowed["refresh_token"], scope="read write").json()["scope"] == "read write"  # original scope kept
    assert mcp_post(mcp.url, narrowed["access_token"]).status_code == 200


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
def test_client_credentials_with_secret_methods(serve, method):
    secret = "p@ss:w+rd %"  # form-urlencoded inside Basic (RFC 6749 §2.3.1)
    auth = serve(AuthServer(clients={"m2m:1": secret}, auth_methods=[method], refresh_tokens=True))
    mcp = serve(ProtectedMCP(auth))
    data = {"grant_type": "client_credentials", "scope": "a b", "resource": mcp.url}
    if method == "client_secret_basic":
        from urllib.parse import quote_plus

        raw = base64.b64encode(f"{quote_plus('m2m:1')}:{quote_plus(secret)}".encode()).decode()
        answer = token(auth, data, headers={"Authorization": f"Basic {raw}"})
    else:
        answer = token(auth, {**data, "client_id": "m2m:1", "client_secret": secret})
    body = answer.json()
    assert answer.status_code == 200 and body["scope"] == "a b" and "refresh_token" not in body
    assert auth.client_auth == [("m2m:1", method)]
    assert mcp_post(mcp.url, body["access_token"]).status_code == 200
    other = "client_secret_post" if method == "client_secret_basic" else "client_secret_basic"
    wrong = token(auth, {**data, "client_id": "m2m:1", "client_secret": secret}) if other == "client_secret_post" \
        else token(auth, data, auth_basic=("m2m:1", secret))
    assert (wrong.status_code, wrong.json()["error"]) == (401, "invalid_client")  # not an advertised method


def test_client_authentication_failures(serve):
    auth = serve(AuthServer(clients={"app": "s3cret", "pub": None}))
    data = {"grant_type": "client_credentials"}
    wrong = token(auth, data, auth_basic=("app", "nope"))
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client" and "Basic" in wrong.headers[
        "WWW-Authenticate"]
    both = token(auth, {**data, "client_id": "app", "client_secret": "s3cret"}, auth_basic=("app", "s3cret"))
    assert both.json()["error"] == "invalid_request"
    assert token(auth, {**data, "client_id": "pub"}).json()["error"] == "unauthorized_client"
    assert token(auth, {"grant_type": "password"}, auth_basic=("app", "s3cret")).json()["error"] == \
        "unsupported_grant_type"
    assert requests.post(auth.token_endpoint, json=data, timeout=5).json()["error"] == "invalid_request"


def test_private_key_jwt_client_authentication(serve):
    key = ec_key()
    auth = serve(AuthServer(jwt_clients={"svc": public_jwk(key)}, auth_methods=["private_key_jwt"]))
    now = int(time.time())
    claims = {"iss": "svc", "sub": "svc", "aud": auth.token_endpoint, "exp": now + 60, "iat": now, "jti": "j1"}

    def request(claims, signer=key):
        return token(auth, {"grant_type": "client_credentials", "client_assertion_type": CLIENT_ASSERTION_TYPE,
                            "client_assertion": sign_jwt(claims, signer)})

    assert request(claims).status_code == 200 and auth.client_auth == [("svc", "private_key_jwt")]
    assert request(claims).json()["error"] == "invalid_client"  # jti replayed
    assert request({**claims, "jti": "j2", "aud": "http://elsewhere"}).status_code == 401
    assert request({**claims, "jti": "j3", "exp": now - 1}).status_code == 401
    assert request({**claims, "jti": "j4"}, signer=ec_key()).status_code == 401
    assert request({**claims, "jti": "j5", "aud": auth.issuer}).status_code == 200


def test_jwt_bearer_grant_with_a_client_signed_assertion(serve):
    key = ec_key()
    auth = serve(AuthServer(jwt_clients={"svc": key.public_key()}))
    mcp = serve(ProtectedMCP(auth))
    now = int(time.time())
    claims = {"iss": "svc", "sub": "svc", "aud": auth.token_endpoint, "exp": now + 60, "iat": now, "jti": "a1"}
    answer = token(auth, {"grant_type": JWT_BEARER, "assertion": sign_jwt(claims, key), "resource": mcp.url,
                          "scope": "x"})
    assert answer.status_code == 200, answer.text
    assert auth.assertions == [claims] and auth.introspect(answer.json()["access_token"]).subject == "svc"
    bad = token(auth, {"grant_type": JWT_BEARER, "assertion": sign_jwt({**claims, "jti": "a2"}, ec_key())})
    assert bad.json()["error"] == "invalid_grant"


def test_enterprise_flow_id_token_to_id_jag_to_access_token(serve):
    idp = serve(AuthServer(idp_id_tokens={"the-id-token": "alice"}, clients={"app": "idp-secret"}))
    auth = serve(AuthServer(trusted_idps=[idp], clients={"app": "as-secret"}))
    mcp = serve(ProtectedMCP(auth))
    exchange = {"grant_type": TOKEN_EXCHANGE, "requested_token_type": ID_JAG_TYPE, "subject_token": "the-id-token",
                "subject_token_type": ID_TOKEN_TYPE, "audience": auth.issuer, "resource": mcp.url, "scope": "read"}
    answer = token(idp, exchange, auth_basic=("app", "idp-secret")).json()
    assert answer["issued_token_type"] == ID_JAG_TYPE and answer["token_type"] == "N_A"
    header, claims = unverified(answer["access_token"])
    assert header == {"alg": "HS256", "typ": "oauth-id-jag+jwt"}
    assert (claims["iss"], claims["sub"], claims["aud"], claims["client_id"]) == (idp.issuer, "alice", auth.issuer, "app")
    assert TOKEN_EXCHANGE in idp.metadata["grant_types_supported"]
    access = token(auth, {"grant_type": JWT_BEARER, "assertion": answer["access_token"]},
                   auth_basic=("app", "as-secret")).json()
    grant = auth.introspect(access["access_token"])
    assert (grant.subject, grant.resource, grant.scope) == ("alice", mcp.url, {"read"})
    assert mcp_post(mcp.url, access["access_token"]).status_code == 200
    assert token(idp, {**exchange, "subject_token": "forged"}, auth_basic=("app", "idp-secret")).json()["error"] == \
        "invalid_grant"
    untrusting = serve(AuthServer(clients={"app": "as-secret"}))
    jag = token(idp, {**exchange, "audience": untrusting.issuer}, auth_basic=("app", "idp-secret")).json()
    assert token(untrusting, {"grant_type": JWT_BEARER, "assertion": jag["access_token"]},
                 auth_basic=("app", "as-secret")).json()["error"] == "invalid_grant"


def test_dpop_nonce_then_bound_token_at_the_mcp_server(serve):
    key = ec_key()
    auth = serve(AuthServer(clients={"m2m": "s"}, dpop_nonce=True))
    mcp = serve(ProtectedMCP(auth, dpop=True))
    data = {"grant_type": "client_credentials", "resource": mcp.url}
    first = token(auth, data, auth_basic=("m2m", "s"), headers={"DPoP": make_dpop_proof(key, "POST", auth.token_endpoint)})
    assert (first.status_code, first.json()["error"]) == (400, "use_dpop_nonce")
    nonce = first.headers["DPoP-Nonce"]
    assert token(auth, data, auth_basic=("m2m", "s")).json()["error"] == "invalid_dpop_proof"
    proof = make_dpop_proof(key, "POST", auth.token_endpoint, nonce=nonce)
    body = token(auth, data, auth_basic=("m2m", "s"), headers={"DPoP": proof}).json()
    assert body["token_type"] == "DPoP"
    assert auth.introspect(body["access_token"]).jkt == jwk_thumbprint(public_jwk(key))
    at = body["access_token"]
    good = make_dpop_proof(key, "POST", mcp.url, access_token=at)
    assert mcp_post(mcp.url, at, scheme="DPoP", extra={"DPoP": good}).status_code == 200
    for scheme, proof in (("Bearer", good), ("DPoP", None), ("DPoP", make_dpop_proof(ec_key(), "POST", mcp.url,
                                                                                     access_token=at))):
        answer = mcp_post(mcp.url, at, scheme=scheme, extra={"DPoP": proof} if proof else None)
        assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("DPoP ")
    assert mcp_post(mcp.url, at, scheme="DPoP", extra={"DPoP": good}).status_code == 401  # proof replayed


def test_dpop_nonce_at_the_mcp_server(serve):
    key = ec_key()
    auth = serve(AuthServer(clients={"m2m": "s"}, dpop=True))
    mcp = serve(ProtectedMCP(auth, dpop_nonce=True))
    proof = make_dpop_proof(key, "POST", auth.token_endpoint)
    at = token(auth, {"grant_type": "client_credentials", "resource": mcp.url}, auth_basic=("m2m", "s"),
               headers={"DPoP": proof}).json()["access_token"]
    answer = mcp_post(mcp.url, at, scheme="DPoP", extra={"DPoP": make_dpop_proof(key, "POST", mcp.url, access_token=at)})
    scheme, params = challenge_params(answer.headers["WWW-Authenticate"])
    assert (answer.status_code, scheme, params["error"]) == (401, "DPoP", "use_dpop_nonce")
    nonce = answer.headers["DPoP-Nonce"]
    retry = make_dpop_proof(key, "POST", mcp.url, access_token=at, nonce=nonce)
    assert mcp_post(mcp.url, at, scheme="DPoP", extra={"DPoP": retry}).status_code == 200


def test_jwk_thumbprint_matches_rfc7638():
    jwk = {"kty": "RSA", "e": "AQAB", "alg": "RS256", "kid": "2011-04-29", "n": (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMs"
        "tn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5"
        "hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw")}
    assert jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_token_endpoint_failure_knobs(serve):
    auth = serve(AuthServer(clients={"m2m": "s"}))
    data = {"grant_type": "client_credentials"}
    auth.fail_next_token = (503, {"error": "temporarily_unavailable"})
    first = token(auth, data, auth_basic=("m2m", "s"))
    assert (first.status_code, first.json()) == (503, {"error": "temporarily_unavailable"})
    assert token(auth, data, auth_basic=("m2m", "s")).status_code == 200  # once only
    auth.token_body_override = b'{"access_token": '
    assert token(auth, data, auth_basic=("m2m", "s")).content == b'{"access_token": '
    assert len(auth.issued) == 1


def test_expiry_and_revocation(serve):
    auth = serve(AuthServer(clients={"app": "s3cret"}, access_token_lifetime=None))
    mcp = serve(ProtectedMCP(auth))
    body = code_flow(auth, mcp)
    assert "expires_in" not in body and mcp_post(mcp.url, body["access_token"]).status_code == 200
    auth.expire_all()
    answer = mcp_post(mcp.url, body["access_token"])
    assert answer.status_code == 401 and challenge_params(answer.headers["WWW-Authenticate"])[1]["error"] == \
        "invalid_token"
    fresh = token(auth, {"grant_type": "refresh_token", "refresh_token": body["refresh_token"]},
                  auth_basic=("app", "s3cret")).json()
    assert mcp_post(mcp.url, fresh["access_token"]).status_code == 200
    auth.revoke(fresh["access_token"])
    assert auth.introspect(fresh["access_token"]) is None


# -- the protected MCP server ---------------------------------------------------------------


def test_401_challenge_names_the_metadata_and_the_scope(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, challenge_scope="files:read", scopes_supported=["files:read"]))
    answer = mcp_post(mcp.url)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{mcp.prm_url}", scope="files:read"'
    assert mcp.prm_url == mcp.origin + "/.well-known/oauth-protected-resource/mcp"
    prm = requests.get(mcp.prm_url, timeout=5).json()
    assert prm == {"resource": mcp.url, "authorization_servers": [auth.issuer], "bearer_methods_supported": ["header"],
                   "scopes_supported": ["files:read"]}
    assert requests.get(mcp.origin + "/.well-known/oauth-protected-resource", timeout=5).status_code == 404
    assert mcp_post(mcp.url, "made-up").status_code == 401 and mcp.seen_tokens == [None, "Bearer made-up"]


@pytest.mark.parametrize("prm, in_header", [("root", True), ("root", False), ("header-only", True)])
def test_where_the_protected_resource_metadata_lives(serve, prm, in_header):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth, prm=prm, prm_in_header=in_header, resource="http://other.example/mcp"))
    scheme, params = challenge_params(mcp_post(mcp.url).headers["WWW-Authenticate"])
    assert scheme == "Bearer" and params.get("resource_metadata") == (mcp.prm_url if in_header else None)
    assert requests.get(mcp.prm_url, timeout=5).json()["resource"] == "http://other.example/mcp"
    if prm == "root":
        assert mcp.prm_url == mcp.origin + "/.well-known/oauth-protected-resource"
    assert requests.get(mcp.origin + "/.well-known/oauth-protected-resource/mcp", timeout=5).status_code == 404


def test_403_insufficient_scope_for_a_tool(serve):
    auth = serve(AuthServer(clients={"app": "s3cret"}))
    mcp = serve(ProtectedMCP(auth, tool_scopes={"echo": {"read", "echo:run"}}))
    at = code_flow(auth, mcp, scope="read")["access_token"]
    assert mcp_post(mcp.url, at).status_code == 200  # tools/list needs nothing more
    answer = mcp_post(mcp.url, at, method="tools/call", name="echo")
    assert answer.status_code == 403
    scheme, params = challenge_params(answer.headers["WWW-Authenticate"])
    assert (scheme, params["error"], params["scope"], params["resource_metadata"]) == \
        ("Bearer", "insufficient_scope", "echo:run read", mcp.prm_url)
    wider = code_flow(auth, mcp, scope="read echo:run")["access_token"]
    assert mcp_post(mcp.url, wider, method="tools/call", name="echo").json()["result"]["content"][0]["text"] == "hi"


def test_audience_and_migration_to_another_authorization_server(serve):
    old, new = serve(AuthServer(clients={"app": "s3cret"})), serve(AuthServer(clients={"app": "s3cret"}))
    mcp = serve(ProtectedMCP(old))
    other = token(old, {"grant_type": "client_credentials", "resource": "http://elsewhere/mcp"},
                  auth_basic=("app", "s3cret")).json()["access_token"]
    assert mcp_post(mcp.url, other).status_code == 401  # issued for another resource
    at = code_flow(old, mcp)["access_token"]
    assert mcp_post(mcp.url, at).status_code == 200
    mcp.switch_to(new)
    assert requests.get(mcp.prm_url, timeout=5).json()["authorization_servers"] == [new.issuer]
    assert mcp_post(mcp.url, at).status_code == 401
    assert mcp_post(mcp.url, code_flow(new, mcp)["access_token"]).status_code == 200


def test_close_leaves_no_thread_and_no_descriptor(serve):
    def fds():
        return set(os.listdir("/proc/self/fd"))

    before_threads, before_fds = set(threading.enumerate()), fds()
    auth = AuthServer(clients={"app": "s3cret"}).start()
    mcp = ProtectedMCP(auth).start()
    session = requests.Session()  # keeps its connections open across close()
    session.get(auth.metadata_urls[0], timeout=5)
    session.post(auth.token_endpoint, data={"grant_type": "client_credentials"}, auth=("app", "s3cret"), timeout=5)
    session.get(mcp.prm_url, timeout=5)
    started = time.monotonic()
    mcp.close()
    auth.close()
    assert time.monotonic() - started < 2
    assert set(threading.enumerate()) <= before_threads
    session.close()
    assert fds() <= before_fds
