"""The authorization code flow with PKCE: a person authorizes this client.

`OAuth` is the token provider for servers that act on behalf of a user.
It does what the MCP authorization spec asks, by itself, on the server's
first 401: discovery (see `mcp_sync.auth.flow`), a client identity (a
pre-registered client for that authorization server, else a client ID
metadata document URL when the server supports them, else dynamic client
registration), then the authorization request (PKCE S256, `state`,
RFC 8707 `resource`, scope by the spec's rules) through a
`RedirectHandler`, the RFC 9207 `iss` check, and the token request.

Where the person is decides how the redirect comes back (see
`mcp_sync.auth.redirect`); web apps split the flow in two:

    oauth = OAuth("https://mcp.example.com/mcp",
                  redirect_uri="https://app.example.com/oauth/callback",
                  storage=MyDatabaseStorage(user))

    def connect_view(request):                 # sends the user away
        start = oauth.start()
        return redirect(start.url)

    def callback_view(request):                # the user comes back
        oauth.finish(request.build_absolute_uri())
        ...

Everything `finish()` needs is in the storage, so it may run in another
process than `start()` (DPoP keys excepted: they live in memory).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

import attrs

from ..errors import AuthorizationError, AuthorizationRequired, OAuthError
from ..options import check_flag
from ..transports.http_network import NetworkSettings
from . import discovery
from .flow import Discovery, FlowOptions, TokenFlow
from .jwt import SigningKey
from .pkce import new_state, new_verifier, s256_challenge, same_secret
from .redirect import RedirectHandler, check_redirect_uri
from .tokens import ClientInfo, Tokens, oauth_error

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["OAuth", "AuthorizationStart"]

log = logging.getLogger("mcp_sync.auth")

#: How long an authorization started by `start()` may wait for `finish()`.
PENDING_LIFETIME = 600.0
_PENDING = "pending "


def _too_old(pending: Any, now: float) -> bool:
    """Whether a pending entry is past `PENDING_LIFETIME` (or has no
    readable start time, which no entry `start()` wrote lacks)."""
    created = pending.get("created") if isinstance(pending, dict) else None
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        return True
    return not now - created <= PENDING_LIFETIME  # (a NaN is too old)


def _secret_expiry(value: Any, registered_at: float) -> float | None:
    """RFC 7591 §3.2.1's `client_secret_expires_at` of a registration
    answered at `registered_at` (`time.time()`): the time the secret
    expires, or None when it does not expire or the value says nothing
    usable.

    The RFC allows two values: 0 ("will not expire") or the time of
    expiry, in seconds since 1970. None for 0, and for every value that is
    neither: not a number (a string, a bool), NaN, an infinity, an integer
    past a float's range (`float()` raises OverflowError for it), and a
    time not after the registration that issued the secret (a negative
    number: before 1970; or a past time, from a server's bug or a skewed
    clock). The server issued the secret to be used now; believing such an
    expiry would count it as expired at once, so every use would register
    a new client, and get the same answer (a registration per token
    request). A secret that does stop working is refused by the token
    endpoint, which the caller then sees (an `OAuthError`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e18:
        return None  # (a NaN fails the comparison too)
    if value <= registered_at:
        log.warning("ignoring the client_secret_expires_at %r of a registration made at %.0f: an expiry must be "
                    "0 or a time after the registration (RFC 7591); the secret is used until refused", value,
                    registered_at)
        return None
    return float(value)


@attrs.frozen
class AuthorizationStart:
    """An authorization in progress: send the person to `url`. `state`
    identifies it (the callback carries it back).

    Attributes:
        url (str): The authorization server's authorization URL, with the
            request (client id, redirect URI, PKCE challenge, state, scope,
            resource) in its query. Send the person's browser there.
        state (str): The random `state` of this authorization; the callback
            URL carries it back, and `finish()` accepts it for at most 10
            minutes. Not shown by `repr`.
    """

    url: str
    state: str = attrs.field(repr=False)


class OAuth(TokenFlow):
    """OAuth 2.1 authorization code flow with PKCE, for MCP servers that act
    for a person. A token provider: pass it as `auth=` to `connect()`.

    Args:
        server_url: The MCP server's URL; None: the URL of the `HTTP`
            target it is passed to (see `TokenFlow`).
        redirect: How to reach the person (`LoopbackRedirect()` for
            scripts, `PasteRedirect()` for notebooks). Without one, a call that
            needs authorization raises `AuthorizationRequired`; web apps use
            `start()`/`finish()` with `redirect_uri` instead.
        redirect_uri: The redirect URI when there is no handler (web apps).
        client_id: A pre-registered client's ID. With `client_secret` and
            `client_issuer`, it is used only with the authorization server
            whose issuer `client_issuer` names (default:
            `authorization_server`); another authorization server gets its
            own registration. A client without a secret and without either
            is bound to the first authorization server this provider meets.
        client_secret: The pre-registered client's secret. It needs
            `client_issuer` or `authorization_server`, so that it is never
            sent to an authorization server the MCP server chose.
        client_issuer: The issuer URL of the authorization server the
            pre-registered client belongs to.
        token_endpoint_auth_method: Force one (`client_secret_basic`,
            `client_secret_post`, `private_key_jwt`, `none`).
        private_key: A `SigningKey` or PEM for `private_key_jwt`.
        client_metadata_url: This client's metadata document URL (an
            HTTPS URL with a path), used as the client ID where supported.
        client_name: Sent in dynamic registration.
        application_type: Sent in dynamic registration (default: "native"
            for a loopback redirect URI, else "web").
        offline_access: Request `offline_access` (for a refresh token)
            when the authorization server advertises it.
        **options: The options of `TokenFlow`: `scopes`, `storage`,
            `authorization_server`, `dpop`, `timeout`,
            `authorization_timeout`, `verify`, `max_response_bytes`,
            `allow_private_network`.

    Raises:
        TypeError: `redirect` is not a redirect handler.
        ValueError: A `client_secret` without `client_id` or without an
            issuer to send it to, an unknown `token_endpoint_auth_method`
            or `application_type`, a bad `redirect_uri`, or a
            `client_metadata_url` that is not an https URL with a path.

    Example::

        from mcp_sync.auth import OAuth, LoopbackRedirect

        oauth = OAuth(redirect=LoopbackRedirect())
        with mcp_sync.connect("https://mcp.example.com/mcp", auth=oauth) as client:
            print(client.list_tools())
    """

    interactive = True
    """Always True: obtaining tokens needs a person (or a `redirect`
    handler that acts for one)."""

    def __init__(
        self,
        server_url: str | None = None,
        *,
        redirect: RedirectHandler | None = None,
        redirect_uri: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_issuer: str | None = None,
        token_endpoint_auth_method: str | None = None,
        private_key: SigningKey | str | bytes | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "mcp_sync client",
        application_type: str | None = None,
        offline_access: bool = True,
        **options: Unpack[FlowOptions],
    ) -> None:
        super().__init__(server_url, **options)
        if redirect is not None and not isinstance(redirect, RedirectHandler):
            raise TypeError("redirect must have a redirect_uri and authorize(url) (see mcp_sync.auth.redirect)")
        if redirect_uri is not None:
            check_redirect_uri(redirect_uri)
        if client_secret is not None and client_id is None:
            raise ValueError("client_secret needs the client_id it belongs to")
        client_issuer = client_issuer if client_issuer is not None else options.get("authorization_server")
        if client_secret is not None and client_issuer is None:
            # Otherwise the secret would go to whichever authorization
            # server the MCP server names: the server would choose who
            # learns it.
            raise ValueError(
                "a client_secret is sent only to the authorization server the client is registered with: "
                "name it with client_issuer='https://auth.example.com' (its issuer URL)"
            )
        if token_endpoint_auth_method is not None and token_endpoint_auth_method not in (
            "client_secret_basic", "client_secret_post", "private_key_jwt", "none"
        ):
            raise ValueError(f"unknown token_endpoint_auth_method {token_endpoint_auth_method!r}")
        if client_metadata_url is not None:
            parts = urlsplit(client_metadata_url)
            if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
                raise ValueError("client_metadata_url must be an https URL with a path")
        if application_type not in (None, "native", "web"):
            raise ValueError("application_type must be 'native' or 'web'")
        self._redirect = redirect
        self._redirect_uri_setting = redirect_uri
        self._client_id = client_id
        self._client_secret = client_secret
        self._client_issuer = client_issuer
        self._auth_method_setting = token_endpoint_auth_method
        self._private_key = (SigningKey.from_pem(private_key) if isinstance(private_key, (str, bytes))
                             else private_key)
        self._client_metadata_url = client_metadata_url
        self._client_name = client_name
        self._application_type = application_type
        check_flag("offline_access", offline_access)
        self._offline_access = offline_access
        self._last_challenge: discovery.Challenge | None = None

    def use_network(self, network: NetworkSettings) -> None:
        """The transport's network path, for this provider's requests and
        for its redirect handler's, if it makes any (`HeadlessRedirect`).

        Args:
            network: The transport's network settings.
        """
        super().use_network(network)
        hand_over = getattr(self._redirect, "use_network", None)
        if hand_over is not None:
            hand_over(self._http.network)

    # -- web apps: the flow in two halves ----------------------------------------------------

    def start(self, scopes: str | Iterable[str] | None = None) -> AuthorizationStart:
        """Begin an authorization: discover, identify the client, and return
        the URL to send the person to. The state is kept in storage until
        `finish()` (at most 10 minutes).

        Example::

            start = oauth.start()
            return HttpResponseRedirect(start.url)

        Args:
            scopes: The scopes to ask for (a space-separated string or
                several); None: those the server's last challenge or its
                metadata name.

        Returns:
            The URL to send the person to, with the `state` that
            `finish()` checks.

        Raises:
            AuthorizationError: Discovery or client registration failed
                (`OAuthError` when the authorization server refused).
        """
        with self._lock, self._http.budget(self._authorization_timeout):
            if self._discovery is None:
                self._discover(self._last_challenge)
            wanted = list(scopes.split() if isinstance(scopes, str) else scopes) if scopes is not None else None
            return self._begin(wanted if wanted is not None else self._initial_scopes(self._last_challenge))

    def finish(self, callback_url: str) -> Tokens:
        """Complete an authorization from the URL the person came back to
        (with `code`, `state` and maybe `iss`): validate it, get the tokens,
        keep them. Raises `AuthorizationError` (or `OAuthError` when the
        server refused) without keeping anything.

        Example::

            oauth.finish(request.build_absolute_uri())

        Args:
            callback_url: The full URL the person was redirected back to.

        Returns:
            The tokens obtained, also kept in the provider's storage.

        Raises:
            OAuthError: The authorization server refused (or the callback
                carries its error).
            AuthorizationError: The callback does not match a pending
                authorization, or the token request failed.
        """
        with self._lock, self._http.budget(self._authorization_timeout):
            tokens, scopes = self._complete(callback_url, None)
            self._requested = scopes
            self._refresh_retry = None
            self._keep(tokens)
            return tokens

    # -- the grant -----------------------------------------------------------------------

    def handle_challenge(self, status: int, headers: Mapping[str, str]) -> bool:
        """Act on a 401 or 403 from the MCP server, as `TokenFlow` does
        (take a DPoP nonce, refresh, re-authorize through the `redirect`
        handler, step up the scopes). The challenge is also kept, so that a
        later `start()` uses the scope and resource metadata it named.
        True: retry the request; False: the failure stands. Raises
        `AuthorizationRequired` when a person must authorize and no
        `redirect` handler can reach one, `AuthorizationError` (or
        `OAuthError`) when authorizing fails.

        Args:
            status: The HTTP status, 401 or 403.
            headers: The response's headers (lower-case names), with its
                `WWW-Authenticate` challenge.

        Returns:
            True to retry the request, False when the failure stands.

        Raises:
            AuthorizationRequired: A person must authorize and no
                `redirect` handler can reach one.
            AuthorizationError: Authorizing failed (`OAuthError` when the
                authorization server refused).
        """
        with self._lock:
            self._last_challenge = discovery.find_challenge(headers.get("www-authenticate"))
            return super().handle_challenge(status, headers)

    def _obtain(self, scopes: list[str] | None) -> Tokens:
        if self._redirect is None:
            raise AuthorizationRequired(
                f"{self.server_url} requires authorization and this OAuth provider cannot reach a person: "
                "pass redirect=LoopbackRedirect() (scripts) or redirect=PasteRedirect() (notebooks), "
                "or in a web app send the user to oauth.start().url and call oauth.finish(callback_url)"
            )
        start = self._begin(scopes)
        try:
            with self._http.pause():  # a person's time is not the network's
                callback = self._redirect.authorize(start.url)
        except BaseException:
            # Nobody will come back with this state: its verifier is not kept.
            self._take_pending(start.state)
            raise
        tokens, _ = self._complete(callback, start.state)
        return tokens

    def _redirect_uri(self) -> str:
        if self._redirect is not None:
            return check_redirect_uri(self._redirect.redirect_uri)
        if self._redirect_uri_setting is not None:
            return self._redirect_uri_setting
        raise AuthorizationRequired(
            "the authorization code flow needs a redirect URI: pass redirect= (a RedirectHandler) or redirect_uri="
        )

    def _begin(self, scopes: list[str] | None) -> AuthorizationStart:
        found = self._discovery
        assert found is not None
        metadata = found.metadata
        endpoint = metadata.get("authorization_endpoint")
        if not endpoint:
            raise AuthorizationError(f"the authorization server {found.issuer} has no authorization_endpoint")
        if "S256" not in (metadata.get("code_challenge_methods_supported") or []):
            # The spec: without advertised PKCE support a client must not proceed.
            raise AuthorizationError(
                f"the authorization server {found.issuer} does not advertise PKCE (S256) support; refusing to proceed"
            )
        redirect_uri = self._redirect_uri()
        client = self._client(found, redirect_uri)
        if scopes is not None and self._offline_access and found.supports("scopes_supported", "offline_access"):
            scopes = [*scopes, "offline_access"] if "offline_access" not in scopes else scopes
        verifier, state = new_verifier(), new_state()
        params = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": s256_challenge(verifier),
            "code_challenge_method": "S256",
            "resource": found.resource,
        }
        if scopes:
            params["scope"] = " ".join(scopes)
        if self._dpop is not None:
            params["dpop_jkt"] = self._dpop.jkt
        self._drop_abandoned()
        self._storage.save(f"{_PENDING}{state}", {
            "state": state, "verifier": verifier, "issuer": found.issuer,
            "iss_supported": metadata.get("authorization_response_iss_parameter_supported") is True,
            "redirect_uri": redirect_uri, "resource": found.resource, "scopes": scopes,
            "client_id": client.client_id, "created": time.time(),
        })
        separator = "&" if urlsplit(str(endpoint)).query else "?"
        return AuthorizationStart(f"{endpoint}{separator}{urlencode(params)}", state)

    def _complete(self, callback_url: str, expected_state: str | None) -> tuple[Tokens, list[str] | None]:
        if not isinstance(callback_url, str):
            raise TypeError("the callback URL must be a string")
        query = parse_qs(urlsplit(callback_url).query, keep_blank_values=True)

        def one(name: str) -> str | None:
            values = query.get(name)
            if values is None:
                return None
            if len(values) != 1:
                raise AuthorizationError(f"the authorization response repeats {name!r}; refusing it")
            return values[0]

        state = one("state")
        if expected_state is not None and not same_secret(state, expected_state):
            raise AuthorizationError("the authorization response's state does not match the request; refusing it")
        # Single use: taken out of storage at once, so a replayed callback
        # finds nothing (atomically where the storage offers `pop`).
        pending = self._take_pending(state) if state else None
        if pending is None or not same_secret(pending.get("state"), state):
            raise AuthorizationError("the authorization response matches no authorization in progress (unknown state)")
        if _too_old(pending, time.time()):
            raise AuthorizationError("the authorization took too long (over 10 minutes); start it again")
        issuer = str(pending["issuer"])
        # RFC 9207 §2.4: compare a present iss as an exact string, and
        # require it when the server said it sends it, before anything else
        # in the response is believed (errors included).
        iss = one("iss")
        if iss is not None and iss != issuer:
            raise AuthorizationError(
                f"the authorization response came from issuer {iss!r}, not {issuer!r}; refusing it (mix-up protection)"
            )
        if iss is None and pending.get("iss_supported"):
            raise AuthorizationError(
                f"the authorization response has no 'iss' although {issuer} says it sends one; refusing it"
            )
        error = one("error")
        if error:
            description = one("error_description")
            detail = f": {description[:300]}" if description else ""
            raise OAuthError(f"authorization was refused with {error!r}{detail}", error=error, description=description)
        code = one("code")
        if not code:
            raise AuthorizationError("the authorization response carries no code")
        if self._discovery is None or self._discovery.issuer != issuer:
            self._discovery = self._discover_issuer(issuer, None, resource=str(pending["resource"]))
        client = self._known_client(issuer)
        if client is None or client.client_id != pending.get("client_id"):
            client = ClientInfo(str(pending["client_id"]), issuer)
        scopes = pending.get("scopes")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": str(pending["redirect_uri"]),
            "code_verifier": str(pending["verifier"]),
            "resource": str(pending["resource"]),
        }
        tokens = self._token_request(form, client, scope=" ".join(scopes) if scopes else None,
                                     signing_key=self._private_key)
        return tokens, list(scopes) if scopes else None

    def _drop_abandoned(self) -> None:
        """Forget the authorizations started over `PENDING_LIFETIME` ago
        and never finished (a person who left the consent page), which
        `finish()` would refuse anyway: without this, a web app's store
        keeps one entry per abandoned start for as long as it runs. Only
        a store that lists its keys (the optional `keys()`) can be swept."""
        keys = getattr(self._storage, "keys", None)
        if not callable(keys):
            return
        now = time.time()
        for key in list(keys()):
            if isinstance(key, str) and key.startswith(_PENDING):
                # Loaded again: another worker may have finished it meanwhile.
                pending = self._storage.load(key)
                if pending is not None and _too_old(pending, now):
                    self._storage.delete(key)

    def _take_pending(self, state: str) -> dict[str, Any] | None:
        key = f"{_PENDING}{state}"
        pop = getattr(self._storage, "pop", None)
        if pop is not None:
            taken: dict[str, Any] | None = pop(key)
            return taken
        pending = self._storage.load(key)
        if pending is not None:
            self._storage.delete(key)
        return pending

    # -- client identity -------------------------------------------------------------------

    def _pre_registered(self, issuer: str) -> ClientInfo | None:
        if self._client_id is None:
            return None
        if self._client_issuer is None:
            # A client without a secret (none can have been given without
            # an issuer): bind it to the first authorization server met.
            self._client_issuer = issuer
        if self._client_issuer != issuer:
            return None
        return ClientInfo(self._client_id, issuer, client_secret=self._client_secret,
                          auth_method=self._auth_method_setting, kind="pre-registered")

    def _known_client(self, issuer: str) -> ClientInfo | None:
        """A client identity already valid at `issuer`, without registering."""
        pre = self._pre_registered(issuer)
        if pre is not None:
            return pre
        data = self._storage.load(f"client {issuer}")
        if data:
            try:
                stored = ClientInfo.from_dict(data)
            except (TypeError, ValueError):
                stored = None
            if stored is not None and stored.issuer == issuer and not stored.secret_expired():
                return stored
        return None

    def _client_for_refresh(self) -> ClientInfo | None:
        return self._known_client(self._discovery.issuer) if self._discovery else None

    def _client(self, found: Discovery, redirect_uri: str) -> ClientInfo:
        """The spec's order: pre-registered, stored registration, client ID
        metadata document, dynamic registration."""
        known = self._known_client(found.issuer)
        if known is not None and (known.kind != "registered" or redirect_uri in known.redirect_uris):
            return known
        if self._client_metadata_url is not None and found.metadata.get("client_id_metadata_document_supported") is True:
            return ClientInfo(self._client_metadata_url, found.issuer, kind="metadata-document",
                              auth_method="private_key_jwt" if self._private_key is not None else "none")
        if found.metadata.get("registration_endpoint"):
            return self._register(found, redirect_uri)
        raise AuthorizationError(
            f"the authorization server {found.issuer} supports neither client ID metadata documents nor dynamic "
            "client registration: pass client_id= (and client_secret=) of a client registered there"
        )

    def _register(self, found: Discovery, redirect_uri: str) -> ClientInfo:
        """RFC 7591 dynamic client registration."""
        metadata = found.metadata
        supported = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        method = self._auth_method_setting or next(
            (m for m in ("none", "client_secret_basic", "client_secret_post") if m in supported), "client_secret_basic"
        )
        grants = metadata.get("grant_types_supported")
        grant_types = ["authorization_code"]
        if grants is None or "refresh_token" in grants:
            grant_types.append("refresh_token")
        host = urlsplit(redirect_uri).hostname
        body: dict[str, Any] = {
            "client_name": self._client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": self._application_type or ("native" if discovery.is_loopback(host) else "web"),
        }
        answer = self._http.post(str(metadata["registration_endpoint"]), json_body=body)
        if not answer.ok:
            raise oauth_error(answer, f"dynamic client registration at {found.issuer}")
        response = answer.json or {}
        client_id = response.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthorizationError(f"dynamic client registration at {found.issuer} returned no client_id")
        secret = response.get("client_secret")
        expires = response.get("client_secret_expires_at")
        answered_method = response.get("token_endpoint_auth_method")
        uris = response.get("redirect_uris")
        info = ClientInfo(
            client_id, found.issuer,
            client_secret=secret if isinstance(secret, str) and secret else None,
            auth_method=answered_method if isinstance(answered_method, str) else method,
            redirect_uris=[u for u in uris if isinstance(u, str)] if isinstance(uris, list) else [redirect_uri],
            secret_expires_at=_secret_expiry(expires, time.time()),
        )
        self._storage.save(f"client {found.issuer}", info.to_dict())
        log.info("registered client %s at %s", client_id, found.issuer)
        return info

    def __repr__(self) -> str:
        return f"OAuth({self._server_url!r}, redirect={self._redirect!r})"
