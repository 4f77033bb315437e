"""The token endpoint of the test authorization server: client authentication and grants.

It owns `POST /token` of an `AuthServer`: the failure knobs answered before
any processing (`fail_next_token`, `token_body_override`), the form checks,
client authentication (client_secret_basic/post, none, private_key_jwt per
RFC 7523), DPoP proofs at the token endpoint (RFC 9449), and the grant
types: authorization_code with PKCE S256 (a replayed code revokes what it
gave), refresh_token with rotation, client_credentials, jwt-bearer (RFC 7523,
including ID-JAGs from trusted IdPs) and token exchange to an ID-JAG
(RFC 8693) when the server plays an enterprise IdP. Each grant runs under
the server's lock, so codes and refresh tokens are used up atomically.

Functions of the `AuthServer` they serve (its configuration and state);
they know nothing of sockets. `answer()` is the endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

from ._jwt import b64url, check_dpop_proof, sign_jwt, unverified, verify_jwt
from ._oauth import (
    CLIENT_ASSERTION_TYPE,
    ID_JAG_LIFETIME,
    ID_JAG_TYP,
    ID_JAG_TYPE,
    ID_TOKEN_TYPE,
    JWT_BEARER,
    TOKEN_EXCHANGE,
    VERIFIER,
    Answer,
    Client,
    Grant,
    JSONDict,
    OAuthError,
    Recorded,
    Refresh,
    audiences,
    json_answer,
    scopes,
)

if TYPE_CHECKING:
    from ._authserver import AuthServer


def answer(server: AuthServer, r: Recorded, repeated: list[str]) -> Answer:
    """The answer of `POST /token` to `r`."""
    headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
    with server._lock:
        failure, server.fail_next_token = server.fail_next_token, None
        raw = server.token_body_override
        if server.dpop_nonce:
            headers["DPoP-Nonce"] = server.dpop_nonce_value
    if failure is not None:
        return json_answer(failure[0], failure[1], headers)
    if raw is not None:
        return 200, {"Content-Type": "application/json", **headers}, raw
    try:
        if r.headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/x-www-form-urlencoded":
            raise OAuthError("invalid_request", "the token request must be application/x-www-form-urlencoded")
        if repeated:
            raise OAuthError("invalid_request", f"repeated parameters: {', '.join(repeated)}")
        grant_type = r.form.get("grant_type")
        if grant_type not in server.grant_types:
            raise OAuthError("unsupported_grant_type", f"grant_type {grant_type!r} is not supported")
        client = _authenticate(server, r)
        jkt = None
        if server.dpop:
            with server._lock:
                nonce = server.dpop_nonce_value if server.dpop_nonce else None
                jkt = check_dpop_proof(r.headers.get("dpop"), method="POST", url=server.token_endpoint,
                                       seen=server._dpop_jtis, nonce=nonce)
        handler = {
            "authorization_code": _authorization_code,
            "refresh_token": _refresh,
            "client_credentials": _client_credentials,
            JWT_BEARER: _jwt_bearer,
            TOKEN_EXCHANGE: _token_exchange,
        }[grant_type]
        with server._lock:
            return json_answer(200, handler(server, client, r.form, jkt), headers)
    except OAuthError as exc:
        return json_answer(exc.status, {"error": exc.error, "error_description": exc.description},
                           {**headers, **exc.headers})


def _authenticate(server: AuthServer, r: Recorded) -> Client | None:
    """The client authenticated by this token request (None when it sent no
    credentials nor client_id); records the method used."""
    form = r.form
    used: list[tuple[str, str, str | None]] = []  # (method, client_id, secret)
    authorization = r.headers.get("authorization", "")
    if authorization[:6].lower() == "basic ":
        try:
            decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
            raw_id, _, raw_secret = decoded.partition(":")
        except ValueError:
            raise OAuthError("invalid_client", "malformed Basic credentials", 401) from None
        # RFC 6749 §2.3.1: both halves are form-urlencoded before base64.
        used.append(("client_secret_basic", unquote_plus(raw_id), unquote_plus(raw_secret)))
    if "client_secret" in form:
        used.append(("client_secret_post", form.get("client_id", ""), form["client_secret"]))
    if "client_assertion" in form or "client_assertion_type" in form:
        used.append(("private_key_jwt", "", None))
    if len(used) > 1:
        raise OAuthError("invalid_request", "more than one client authentication method")
    if not used:
        if "client_id" not in form:
            return None
        used.append(("none", form["client_id"], None))
    method, client_id, secret = used[0]
    if method == "private_key_jwt":
        client = _check_client_assertion(server, form)
    else:
        basic = {"WWW-Authenticate": 'Basic realm="token"'} if method == "client_secret_basic" else {}
        known = server._client(client_id)
        if known is None:
            raise OAuthError("invalid_client", f"unknown client {client_id!r}", 401, basic)
        client = known
        if method == "none":
            if client.secret is not None or client.method not in (None, "none"):
                raise OAuthError("invalid_client", "this client must authenticate", 401)
        else:
            allowed = client.method == method or (client.method is None and method in server.auth_methods)
            if client.secret is None or not allowed:
                raise OAuthError("invalid_client", f"{method} is not this client's auth method", 401, basic)
            if not hmac.compare_digest(client.secret.encode(), (secret or "").encode()):
                raise OAuthError("invalid_client", "wrong client secret", 401, basic)
    if "client_id" in form and form["client_id"] != client.client_id:
        raise OAuthError("invalid_client", "client_id does not match the authenticated client", 401)
    with server._lock:
        server._client_auth.append((client.client_id, method))
    return client


def _check_assertion_claims(server: AuthServer, claims: JSONDict, what: str) -> None:
    """aud is this server, exp is in the future, jti is new (RFC 7523 §3)."""
    if not any(aud in (server.issuer, server.token_endpoint) for aud in audiences(claims)):
        raise ValueError(f"{what} aud {claims.get('aud')!r} is neither the issuer nor the token endpoint")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool) or exp <= time.time():
        raise ValueError(f"{what} is expired or has no exp")
    jti = claims.get("jti")
    if jti is not None:
        key = f"{claims.get('iss')}\0{jti}"
        with server._lock:
            if key in server._jtis:
                raise ValueError(f"{what} jti replayed")
            server._jtis.add(key)


def _check_client_assertion(server: AuthServer, form: Mapping[str, str]) -> Client:
    if form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE:
        raise OAuthError("invalid_client", f"client_assertion_type must be {CLIENT_ASSERTION_TYPE}", 401)
    assertion = form.get("client_assertion", "")
    try:
        _, claimed = unverified(assertion)
        client = server._client(claimed.get("iss"))
        if client is None or client.key is None:
            raise ValueError(f"no key for client {claimed.get('iss')!r}")
        if client.method not in (None, "private_key_jwt") or "private_key_jwt" not in server.auth_methods:
            raise ValueError("private_key_jwt is not this client's auth method")
        _, claims = verify_jwt(assertion, client.key)
        if claims.get("sub") != client.client_id:
            raise ValueError("the client assertion's sub must equal its iss, the client_id")
        if claims.get("jti") is None:
            raise ValueError("the client assertion has no jti")
        _check_assertion_claims(server, claims, "the client assertion")
    except ValueError as exc:
        raise OAuthError("invalid_client", str(exc), 401) from None
    return client


def _issue(server: AuthServer, *, client_id: str | None, scope: frozenset[str], resource: str | None, grant_type: str,
           jkt: str | None, subject: str | None, refresh: bool, refresh_scope: frozenset[str] | None = None) -> JSONDict:
    """Mint an access token (and a refresh token when asked and enabled); the token response."""
    token = secrets.token_urlsafe(24)
    lifetime = server.access_token_lifetime
    server.issued[token] = Grant(token, client_id, scope, resource, None if lifetime is None else time.time() + lifetime,
                                 server.issuer, grant_type, jkt, subject)
    answer: JSONDict = {"access_token": token, "token_type": "DPoP" if jkt else "Bearer"}
    if lifetime is not None:
        answer["expires_in"] = lifetime
    if refresh and server.refresh_tokens:
        refresh_token = secrets.token_urlsafe(24)
        server._refreshes[refresh_token] = Refresh(client_id, scope if refresh_scope is None else refresh_scope,
                                                   resource, jkt, subject)
        answer["refresh_token"] = refresh_token
    if scope:
        answer["scope"] = " ".join(sorted(scope))
    return answer


def _authorization_code(server: AuthServer, client: Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
    code = form.get("code", "")
    state = server._codes.pop(code, None)
    if state is None:
        replayed = server._used_codes.get(code)
        if replayed is not None:
            # RFC 6749 §4.1.2: a replayed code revokes what it was exchanged for.
            for token in replayed.tokens:
                server.issued[token].revoked = True
            raise OAuthError("invalid_grant", "the authorization code was already used")
        raise OAuthError("invalid_grant", "unknown authorization code")
    server._used_codes[code] = state
    if client is None or client.client_id != state.client_id:
        raise OAuthError("invalid_grant", "the code was issued to another client")
    if time.time() > state.expires_at:
        raise OAuthError("invalid_grant", "the authorization code expired")
    if form.get("redirect_uri") != state.redirect_uri:
        raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
    verifier = form.get("code_verifier", "")
    if VERIFIER.fullmatch(verifier) is None or b64url(hashlib.sha256(verifier.encode()).digest()) != state.challenge:
        raise OAuthError("invalid_grant", "PKCE verification failed")
    if form.get("resource") != state.resource:
        raise OAuthError("invalid_target", "resource differs from the authorization request's")
    answer = _issue(server, client_id=client.client_id, scope=state.scope, resource=state.resource,
                    grant_type="authorization_code", jkt=jkt, subject="user", refresh=True)
    state.tokens.append(answer["access_token"])
    return answer


def _refresh(server: AuthServer, client: Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
    refresh_token = form.get("refresh_token", "")
    state = server._refreshes.get(refresh_token)
    if state is None:
        raise OAuthError("invalid_grant", "unknown, used or revoked refresh token")
    if (client.client_id if client else None) != state.client_id:
        raise OAuthError("invalid_grant", "the refresh token was issued to another client")
    if "resource" in form and form["resource"] != state.resource:
        raise OAuthError("invalid_target", "resource differs from the original grant's")
    scope = scopes(form["scope"]) if "scope" in form else state.scope
    if not scope <= state.scope:
        raise OAuthError("invalid_scope", "a refresh cannot widen the scope")
    if state.jkt is not None and jkt != state.jkt and (client is None or client.secret is None):
        # RFC 9449 §5: a public client's refresh token is bound to its DPoP key.
        raise OAuthError("invalid_grant", "the refresh token is bound to another DPoP key")
    del server._refreshes[refresh_token]  # rotation: the old refresh token is now invalid
    return _issue(server, client_id=state.client_id, scope=scope, resource=state.resource, grant_type="refresh_token",
                  jkt=jkt, subject=state.subject, refresh=True, refresh_scope=state.scope)


def _client_credentials(server: AuthServer, client: Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
    if client is None:
        raise OAuthError("invalid_client", "client authentication is required", 401)
    if client.secret is None and client.key is None:
        raise OAuthError("unauthorized_client", "a public client cannot use client_credentials")
    return _issue(server, client_id=client.client_id, scope=server._granted(scopes(form.get("scope"))),
                  resource=form.get("resource"), grant_type="client_credentials", jkt=jkt,
                  subject=client.client_id, refresh=False)


def _jwt_bearer(server: AuthServer, client: Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
    assertion = form.get("assertion", "")
    try:
        header, claimed = unverified(assertion)
        if header.get("typ") == ID_JAG_TYP:
            idp = next((idp for idp in server.trusted_idps if idp.issuer == claimed.get("iss")), None)
            if idp is None:
                raise ValueError(f"ID-JAG from an untrusted issuer {claimed.get('iss')!r}")
            _, claims = verify_jwt(assertion, idp.jag_secret, algs=("HS256",))
            if client is not None and claims.get("client_id") != client.client_id:
                raise ValueError("the ID-JAG was issued for another client")
        else:
            issuer = server._client(claimed.get("iss"))
            if issuer is None or issuer.key is None:
                raise ValueError(f"no key for assertion issuer {claimed.get('iss')!r}")
            _, claims = verify_jwt(assertion, issuer.key)
        if not claims.get("sub"):
            raise ValueError("the assertion has no sub")
        _check_assertion_claims(server, claims, "the assertion")
    except ValueError as exc:
        raise OAuthError("invalid_grant", str(exc)) from None
    resource = form.get("resource", claims.get("resource"))
    if "resource" in form and claims.get("resource") not in (None, form["resource"]):
        raise OAuthError("invalid_target", "resource differs from the ID-JAG's")
    scope = scopes(claims["scope"]) if isinstance(claims.get("scope"), str) else scopes(form.get("scope"))
    server._assertions.append(claims)
    client_id = client.client_id if client else claims.get("client_id", claims.get("iss"))
    return _issue(server, client_id=client_id, scope=server._granted(scope), resource=resource, grant_type=JWT_BEARER,
                  jkt=jkt, subject=claims["sub"], refresh=False)


def _token_exchange(server: AuthServer, client: Client | None, form: Mapping[str, str], jkt: str | None) -> JSONDict:
    """Play the enterprise IdP: an ID token for an ID-JAG (RFC 8693, ID-JAG draft §4.3)."""
    if client is None:
        raise OAuthError("invalid_client", "client authentication is required", 401)
    if form.get("requested_token_type") != ID_JAG_TYPE:
        raise OAuthError("invalid_request", f"requested_token_type must be {ID_JAG_TYPE}")
    if form.get("subject_token_type") != ID_TOKEN_TYPE:
        raise OAuthError("invalid_request", f"subject_token_type must be {ID_TOKEN_TYPE}")
    if not form.get("audience"):
        raise OAuthError("invalid_request", "audience (the authorization server's issuer) is required")
    subject = server.idp_id_tokens.get(form.get("subject_token", ""))
    if subject is None:
        raise OAuthError("invalid_grant", "unknown subject_token")
    now = int(time.time())
    claims: JSONDict = {"iss": server.issuer, "sub": subject, "aud": form["audience"], "client_id": client.client_id,
                        "jti": secrets.token_urlsafe(16), "iat": now, "exp": now + ID_JAG_LIFETIME}
    if "resource" in form:
        claims["resource"] = form["resource"]
    if "scope" in form:
        claims["scope"] = " ".join(sorted(server._granted(scopes(form["scope"]))))
    jag = sign_jwt(claims, server.jag_secret, header={"typ": ID_JAG_TYP})
    server._id_jags.append(jag)
    answer: JSONDict = {"issued_token_type": ID_JAG_TYPE, "access_token": jag, "token_type": "N_A",
                        "expires_in": ID_JAG_LIFETIME}
    if "scope" in claims:
        answer["scope"] = claims["scope"]
    return answer
