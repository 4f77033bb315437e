"""The part every OAuth grant shares: discovery, tokens, refresh, challenges.

`TokenFlow` is a token provider for the HTTP transport (see
`mcp_sync.auth`). It keeps one MCP server's tokens, and acts on the
server's answers:

- before each request, `auth_headers()` gives the `Authorization` header
  (and a DPoP proof), refreshing a token that is about to expire;
- on a 401, `handle_challenge()` rediscovers the authorization server
  (it may have changed), refreshes once, else obtains new tokens;
- on a 403 `insufficient_scope`, it obtains tokens for the union of the
  scopes it had and the scopes the server asks for (step-up);
- on a DPoP `use_dpop_nonce` challenge, it keeps the nonce and retries.

How new tokens are obtained is the subclass's: the authorization code
flow with a person (`OAuth`), or a grant without one (`ClientCredentials`,
`JwtBearer`, `EnterpriseManaged` in `mcp_sync.auth.grants`).

Thread safety: one re-entrant lock (`_lock`) guards all state and is held
across the network calls that change it, so 64 threads that find the same
expired token cause one refresh, and the others use its result. The HTTP
transport adds its own single-flight step for 401s (see its
`_refresh_auth`). The lock is never held while the transport waits for an
MCP answer.

Providers sharing one storage (worker processes; an `OAuth` made per web
request) share tokens through it: before a refresh, and after one is
refused, the storage is read again, and tokens another provider put there
meanwhile are taken instead. With a rotating refresh token only those
work: refreshing ours would spend a refresh token used up already, and
dropping ours on the refusal would delete that provider's good ones.
"""

from __future__ import annotations

import base64
import logging
import ssl
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict
from urllib.parse import quote, urlsplit

import attrs

from ..errors import AuthorizationError, OAuthError, copy_error
from ..options import check_flag
from ..transports.http_network import NetworkSettings, check_tls_options
from ..waiting import check_seconds
from . import discovery
from ._http import DEFAULT_MAX_BYTES, Answer, AuthHTTP
from .dpop import DPoP, is_use_dpop_nonce
from .jwt import SigningKey, client_assertion
from .network import EndpointNotAllowed, NetworkPolicy, NotResolvedInTime
from .storage import MemoryStorage, TokenStorage
from .tokens import ClientInfo, Tokens, oauth_error, tokens_from_answer

__all__ = ["TokenFlow", "FlowOptions", "Discovery"]

log = logging.getLogger("mcp_sync.auth")

#: How long a failed renewal or re-authorization of the same tokens is not
#: tried again, in seconds: a request meanwhile goes with the tokens held
#: (an expiring token is still good at the server), and one refused with
#: a 401 gets that failure's error at once.
RETRY_AFTER_FAILURE = 5.0

_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "private_key_jwt", "none")


@attrs.frozen
class Discovery:
    """What discovery found for one MCP server: the protected resource
    metadata (or None), the resource to request tokens for, and the chosen
    authorization server's issuer and metadata."""

    resource_metadata: dict[str, Any] | None = attrs.field(repr=False)
    resource: str
    issuer: str
    metadata: dict[str, Any] = attrs.field(repr=False)

    @property
    def token_endpoint(self) -> str:
        return str(self.metadata["token_endpoint"])

    def supports(self, field: str, value: str) -> bool:
        listed = self.metadata.get(field)
        return isinstance(listed, list) and value in listed


class FlowOptions(TypedDict, total=False):
    """The keyword options every provider takes besides its own (see
    `TokenFlow`), so the grants pass them on without listing them again."""

    scopes: str | Iterable[str] | None
    storage: TokenStorage | None
    authorization_server: str | None
    dpop: bool | DPoP
    timeout: float
    authorization_timeout: float
    verify: bool | str | ssl.SSLContext | None
    max_response_bytes: int
    allow_private_network: bool


def _as_list(value: str | Iterable[str] | None, what: str) -> list[str] | None:
    if value is None:
        return None
    items = value.split() if isinstance(value, str) else list(value)
    if not all(isinstance(item, str) and item and " " not in item for item in items):
        raise ValueError(f"{what} must be a space-separated string or a list of strings without spaces")
    return items


def _union(*groups: Iterable[str] | None) -> list[str]:
    """The union of scope lists, in first-seen order (stable requests)."""
    seen: dict[str, None] = {}
    for group in groups:
        for scope in group or ():
            seen.setdefault(scope, None)
    return list(seen)


def _auth_method(client: ClientInfo, metadata: Mapping[str, Any], signing_key: SigningKey | None) -> str:
    """RFC 6749 §2.3 / RFC 8414: the method the client was registered
    with, else one the authorization server (its `metadata`) advertises
    that fits what we hold."""
    if client.auth_method in _AUTH_METHODS:
        return client.auth_method
    supported = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    if signing_key is not None:
        return "private_key_jwt"
    if client.client_secret:
        for method in ("client_secret_basic", "client_secret_post"):
            if method in supported:
                return method
        return "client_secret_basic"
    return "none"


class TokenFlow:
    """Base class of the OAuth token providers; see the module docstring.

    Arguments shared by every grant:

    Args:
        server_url: The MCP server's URL. Optional: `connect()` supplies it.
        scopes: Scopes to request instead of the ones discovery suggests.
        storage: Where tokens and registrations live (`MemoryStorage()` by
            default; see `mcp_sync.auth.storage`).
        authorization_server: An issuer URL to use instead of discovering
            one from the protected resource metadata.
        dpop: True (or a `DPoP` holding your key) to bind tokens to a key
            with DPoP proofs (RFC 9449).
        timeout: The most one request to an authorization server or
            metadata URL may take, in seconds, from sending to the last byte of
            the answer (30 by default).
        authorization_timeout: The most all the requests of one
            authorization may take together (discovery, registration, token
            requests; 120 s by default). The time a person spends in the browser
            does not count.
        verify: TLS verification for those requests: True, False, a CA
            bundle path or an `ssl.SSLContext`. By default, that of the `HTTP`
            target the provider is used with: its requests take the transport's
            network path (`verify`, `cert`, `proxy`, `trust_env`; see
            `use_network()`), so one client has one network path.
        max_response_bytes: The size limit for metadata and token answers.
        allow_private_network: Let the MCP server (and its authorization
            server) send the client to loopback, private and link-local
            addresses of another kind than its own (see `mcp_sync.auth.network`;
            off by default: a remote server could aim the client at your machine
            or network).

    Raises:
        TypeError: A timeout that is not a number (a string, a bool or
            None), or a `storage` that lacks `load()`, `save()` or
            `delete()`.
        ValueError: A timeout that is not positive, NaN, infinite or
            longer than a thread can wait (`waiting.LONGEST_WAIT`).
        AuthorizationError: An `authorization_server` that is not a usable
            https URL.
    """

    interactive = False
    """Whether obtaining tokens needs a person (the authorization code flow);
    False for the grants without one."""

    def __init__(
        self,
        server_url: str | None = None,
        *,
        scopes: str | Iterable[str] | None = None,
        storage: TokenStorage | None = None,
        authorization_server: str | None = None,
        dpop: bool | DPoP = False,
        timeout: float = 30.0,
        authorization_timeout: float = 120.0,
        verify: bool | str | ssl.SSLContext | None = None,
        max_response_bytes: int = DEFAULT_MAX_BYTES,
        allow_private_network: bool = False,
    ) -> None:
        check_seconds("timeout", timeout, allow_none=False)
        check_seconds("authorization_timeout", authorization_timeout, allow_none=False)
        if storage is not None and not isinstance(storage, TokenStorage):
            raise TypeError("storage must have load(), save() and delete() (see mcp_sync.auth.TokenStorage)")
        # A look-alike ("no") must not turn the private-network check off.
        check_flag("allow_private_network", allow_private_network)
        if not isinstance(dpop, (bool, DPoP)):
            raise TypeError(f"dpop must be True, False or a mcp_sync.auth.DPoP, not {dpop!r}")
        if authorization_server is not None:
            discovery.check_endpoint_url(authorization_server, "authorization_server")
        self._server_url: str | None = None
        if server_url is not None:
            self.attach(server_url)
        self._scopes = _as_list(scopes, "scopes")
        self._storage: TokenStorage = storage if storage is not None else MemoryStorage()
        self._authorization_server = authorization_server
        self._dpop: DPoP | None = DPoP() if dpop is True else (dpop or None)
        #: The provider's own `verify`, which wins over the transport's.
        self._verify = None if verify is None else check_tls_options(verify, None)[0]
        self._http = AuthHTTP(timeout=timeout, max_bytes=max_response_bytes,
                              network=NetworkSettings(verify=True if self._verify is None else self._verify))
        self._authorization_timeout = float(authorization_timeout)
        self._network = NetworkPolicy(allow_private_network=allow_private_network,
                                      proxy_for=self._http.network.proxy_for, time_left=self._http.allowance)
        self._lock = threading.RLock()
        self._tokens: Tokens | None = None
        self._loaded = False
        self._discovery: Discovery | None = None
        #: Scopes of the last token request, kept for step-up unions.
        self._requested: list[str] | None = None
        #: After a refresh caused by a 401, the refreshed token is on trial:
        #: (the thread that handled the 401, whether it has taken the token
        #: for its retry). The transport retries at once on that thread, so
        #: a 401 before any request after that retry means refreshing does
        #: not help. The next request ends the trial: a later 401 (a
        #: revocation, a server-side expiry) is a new one and is refreshed
        #: again, not turned into a new authorization while the refresh
        #: token is good.
        self._refresh_retry: tuple[int, bool] | None = None
        #: The last failure to renew or re-authorize: (when, by
        #: `time.monotonic()`; the error; the tokens it was for). For
        #: `RETRY_AFTER_FAILURE` seconds the same tokens are not renewed
        #: again: threads queued on the lock behind a failing authorization
        #: server would each try in turn, one after another, far past their
        #: calls' timeouts. New tokens end it.
        self._failure: tuple[float, AuthorizationError, Tokens | None] | None = None

    # -- the token-provider interface ----------------------------------------------------

    def attach(self, server_url: str) -> None:
        """Bind this provider to the MCP server it authorizes for (called by
        the HTTP transport; a provider serves one server).

        Args:
            server_url: The MCP server's URL.
        """
        parts = urlsplit(server_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {server_url!r}")
        resource = discovery.canonical_resource(server_url)
        current = getattr(self, "_server_url", None)
        if current is not None and discovery.canonical_resource(current) != resource:
            raise ValueError(
                f"this {type(self).__name__} authorizes for {current}; make another one for {server_url}"
            )
        self._server_url = server_url

    def use_network(self, network: NetworkSettings) -> None:
        """Take the network path of the transport this provider authorizes
        for (called by the `HTTP` target): its proxy, `trust_env`, client
        certificate and TLS verification, unless `verify=` was given to the
        provider itself.

        Args:
            network: The transport's network settings.
        """
        if self._verify is not None:
            keep_cert = not isinstance(self._verify, ssl.SSLContext)
            network = attrs.evolve(network, verify=self._verify, cert=network.cert if keep_cert else None)
        self._http.network = network
        self._network.proxy_for = network.proxy_for

    @property
    def server_url(self) -> str:
        """The URL of the MCP server this provider authorizes for (given as
        `server_url=`, or by `connect()`). Raises `AuthorizationError` when
        it has none yet."""
        if self._server_url is None:
            raise AuthorizationError(f"{type(self).__name__} has no server URL: pass server_url= or use it with connect()")
        return self._server_url

    def token(self) -> str | None:
        """The current access token, refreshed first when it is about to
        expire; None before any authorization."""
        tokens = self._current()
        return tokens.access_token if tokens is not None else None

    def credential_scope(self) -> str | None:
        """Who requests are made as: the digest of the access token held
        now, never refreshed here (a refresh happens inside the request that
        needs it); None before any authorization."""
        if self._loaded:
            # One attribute read, no lock: a refresh in progress holds the
            # lock over the network, and this must not wait for it.
            tokens = self._tokens
        else:
            with self._lock:
                tokens = self._load()
        if tokens is None:
            return None
        import hashlib  # here: it loads OpenSSL, a cost at import for every program

        return hashlib.sha256(tokens.access_token.encode()).hexdigest()

    def auth_headers(self, method: str, url: str) -> dict[str, str]:
        """The headers that authorize one request: `Authorization`, and a
        fresh `DPoP` proof for a DPoP-bound token.

        Args:
            method: The request's HTTP method.
            url: The request's URL.

        Returns:
            The headers to add; empty when there is no token yet.
        """
        tokens = self._current()
        if tokens is None:
            return {}
        if tokens.token_type == "DPoP" and self._dpop is not None:
            proof = self._dpop.proof(method, url, access_token=tokens.access_token)
            return {"Authorization": f"DPoP {tokens.access_token}", "DPoP": proof}
        return {"Authorization": f"Bearer {tokens.access_token}"}

    def handle_challenge(self, status: int, headers: Mapping[str, str]) -> bool:
        """Act on a 401 or 403 from the MCP server. True: retry the request
        with `auth_headers()`. False: the failure stands. Raises
        `AuthorizationError` when authorization itself fails.

        Args:
            status: The HTTP status, 401 or 403.
            headers: The response's headers (lower-case names).

        Returns:
            True to retry the request, False when the failure stands.

        Raises:
            AuthorizationError: Obtaining or refreshing a token failed.
        """
        with self._lock, self._http.budget(self._authorization_timeout):
            if self._dpop is not None and is_use_dpop_nonce(status, headers):
                return self._dpop.nonce_from(self.server_url, headers)
            challenge = discovery.find_challenge(headers.get("www-authenticate"))
            if status == 403:
                if challenge is None or challenge.error != "insufficient_scope":
                    return False
                self._step_up(challenge)
                return True
            if status != 401:
                return False
            tokens = self._load()
            failed = self._failed_for(tokens)
            if failed is not None:  # moments ago, for the same tokens: that answer, at once
                raise copy_error(failed)
            try:
                self._reauthorize(challenge)
            except AuthorizationError as exc:
                self._failure = (time.monotonic(), exc, tokens)
                raise
            return True

    def authorize(self) -> Tokens:
        """Obtain tokens now, without waiting for the server's 401: discover
        from the well-known metadata and run this grant. Returns the tokens
        (also kept in storage)."""
        with self._lock, self._http.budget(self._authorization_timeout):
            self._discover(None)
            return self._obtain_and_keep(self._initial_scopes(None))

    @property
    def tokens(self) -> Tokens | None:
        """The tokens held now (from storage), or None."""
        with self._lock:
            return self._load()

    def clear(self) -> None:
        """Forget this server's tokens (a log-out). Registrations stay."""
        with self._lock:
            self._tokens = None
            self._requested = None  # the next authorization starts from the spec's scope choice
            self._loaded = True
            self._storage.delete(self._tokens_key())

    def close(self) -> None:
        """Release what the provider keeps open for its requests to
        authorization servers. Nothing stays open between those requests,
        so this is optional; tokens and storage are left as they are, and
        the provider stays usable."""
        self._http.close()

    # -- tokens ----------------------------------------------------------------------------

    def _tokens_key(self) -> str:
        return f"tokens {discovery.canonical_resource(self.server_url)}"

    def _load(self) -> Tokens | None:
        if not self._loaded:
            self._tokens = _stored(self._storage, self._tokens_key(), self.server_url)
            self._loaded = True
        return self._tokens


    def _keep(self, tokens: Tokens | None) -> None:
        self._tokens = tokens
        self._loaded = True
        if tokens is None:
            self._storage.delete(self._tokens_key())
        else:
            self._failure = None  # new tokens: renewing them starts afresh
            self._storage.save(self._tokens_key(), tokens.to_dict())

    def _current(self) -> Tokens | None:
        with self._lock:
            self._note_use()
            tokens = self._load()
            if tokens is not None and tokens.expired() and self._failed_for(tokens) is None:
                with self._http.budget(self._authorization_timeout):
                    tokens = self._renew(tokens)
            return tokens

    def _failed_for(self, tokens: Tokens | None) -> AuthorizationError | None:
        """The error of a renewal or re-authorization of `tokens` that
        failed less than `RETRY_AFTER_FAILURE` seconds ago, or None."""
        failure = self._failure
        if (tokens is None or failure is None or failure[2] is not tokens
                or time.monotonic() - failure[0] >= RETRY_AFTER_FAILURE):
            return None  # (with no tokens, each authorization is tried: a person may answer the next)
        return failure[1]

    def _note_use(self) -> None:
        """Follow the retry after a 401-driven refresh (see `_refresh_retry`)."""
        watch = self._refresh_retry
        if watch is None:
            return
        thread, retried = watch
        if retried:
            self._refresh_retry = None  # a request after the retry: stop watching
        elif thread == threading.get_ident():
            self._refresh_retry = (thread, True)  # this is the retry

    def _renew(self, tokens: Tokens) -> Tokens | None:
        """A token at its expiry: refresh it, or (for grants without a
        person) obtain a new one. A failure here is not raised: the request
        goes out with what we have, and the server's 401 leads to the full
        flow, whose errors do reach the caller."""
        try:
            if tokens.refresh_token:
                renewed = self._refresh(tokens)
                if renewed is not None:
                    self._refresh_retry = None
                    return renewed
            if not self.interactive:
                if self._discovery is None:
                    self._discover(None)
                return self._obtain_and_keep(self._requested or self._initial_scopes(None))
        except AuthorizationError as exc:
            log.info("could not renew the expiring token for %s (not tried again for %g s): %s", self.server_url,
                     RETRY_AFTER_FAILURE, exc)
            self._failure = (time.monotonic(), exc, tokens)
        return self._tokens

    def _renewed_elsewhere(self, tokens: Tokens) -> Tokens | None:
        """The tokens another provider sharing the storage put there in
        place of `tokens` (see the module docstring), now held here too;
        None while it holds `tokens`, or none. (`_loaded` stays as it is:
        `credential_scope()` reads the tokens held without the lock while
        this runs under it.)"""
        current = _stored(self._storage, self._tokens_key(), self.server_url)
        if current is None or current.access_token == tokens.access_token:
            return None
        log.info("using the tokens for %s that another provider sharing the storage obtained", self.server_url)
        self._tokens = current
        self._failure = None
        return current

    def _refresh(self, tokens: Tokens) -> Tokens | None:
        """The refresh_token grant; None (and the tokens dropped) when the
        server refuses it."""
        elsewhere = self._renewed_elsewhere(tokens)
        if elsewhere is not None and (not elsewhere.expired() or not elsewhere.refresh_token):
            return elsewhere
        tokens = elsewhere or tokens  # expiring too: its refresh token is the live one
        if self._discovery is None or (tokens.issuer and self._discovery.issuer != tokens.issuer):
            if not tokens.issuer:
                return None
            self._discovery = self._discover_issuer(tokens.issuer, self._discovery)
        client = self._client_for_refresh()
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token or "",
                "resource": tokens.resource or self._discovery.resource}
        try:
            renewed = self._token_request(form, client, scope=tokens.scope, previous=tokens)
        except OAuthError as exc:
            elsewhere = self._renewed_elsewhere(tokens)
            if elsewhere is not None:  # its refresh used ours up just before ours arrived
                return elsewhere
            log.info("the refresh token for %s was refused (%s); authorizing again", self.server_url, exc.error)
            # Forgotten here only: the storage is not emptied, as another
            # provider sharing it may have saved fresh tokens since the
            # read above (the authorization that follows overwrites it).
            self._tokens, self._loaded = None, True
            return None
        self._keep(renewed)
        return renewed

    def _client_for_refresh(self) -> ClientInfo | None:
        """The client identity for a refresh: the subclass's, if it has one."""
        return None

    # -- challenges ----------------------------------------------------------------------

    def _reauthorize(self, challenge: discovery.Challenge | None) -> None:
        tokens = self._load()
        found = self._discover(challenge)
        if tokens is not None and tokens.issuer is not None and tokens.issuer != found.issuer:
            # The server moved to another authorization server: its tokens
            # (and refresh token) belong to the old one and are not reused.
            log.info("%s now uses %s instead of %s", self.server_url, found.issuer, tokens.issuer)
            self._keep(None)
            tokens = None
        # While the refreshed token is on trial (see `_refresh_retry`), a 401
        # means refreshing does not help. (A request that left with the old
        # token does not get here: the transport retries it at once.)
        if tokens is not None and tokens.refresh_token and self._refresh_retry is None:
            if self._refresh(tokens) is not None:
                self._refresh_retry = (threading.get_ident(), False)
                return
        scopes = self._initial_scopes(challenge)
        if self._requested:
            # The spec: re-authorizing keeps the scopes asked for before (a
            # step-up's included) beside the challenge's, so none is lost and
            # the person is not asked again for the next step-up.
            scopes = _union(scopes, self._requested)
        self._obtain_and_keep(scopes)

    def _step_up(self, challenge: discovery.Challenge) -> None:
        tokens = self._load()
        wanted = _union(self._requested, tokens.scopes if tokens else None, challenge.scopes)
        if self._discovery is None or challenge.params.get("resource_metadata"):
            self._discover(challenge)
        log.info("step-up authorization for %s with scopes %s", self.server_url, " ".join(wanted))
        self._obtain_and_keep(wanted)

    def _initial_scopes(self, challenge: discovery.Challenge | None) -> list[str] | None:
        """The spec's order: explicit `scopes`, else the challenge's scope,
        else the resource's `scopes_supported`, else none (omitted)."""
        if self._scopes is not None:
            return list(self._scopes)
        if challenge is not None and challenge.scopes:
            return challenge.scopes
        prm = self._discovery.resource_metadata if self._discovery else None
        supported = prm.get("scopes_supported") if prm else None
        if isinstance(supported, list) and supported and all(isinstance(s, str) and s for s in supported):
            return list(supported)
        return None

    def _obtain_and_keep(self, scopes: Sequence[str] | None) -> Tokens:
        tokens = self._obtain(list(scopes) if scopes is not None else None)
        self._requested = list(scopes) if scopes is not None else None
        self._refresh_retry = None
        self._keep(tokens)
        return tokens

    def _obtain(self, scopes: list[str] | None) -> Tokens:
        """New tokens by this grant (the subclass's part)."""
        raise NotImplementedError

    # -- discovery -------------------------------------------------------------------------

    def _discover(self, challenge: discovery.Challenge | None) -> Discovery:
        """Protected resource metadata, then the authorization server's."""
        server_url = self.server_url
        prm: dict[str, Any] | None = None
        tried: list[str] = []
        challenge_url = challenge.params.get("resource_metadata") if challenge else None
        if challenge_url:
            challenge_url = self._check_metadata_url(challenge_url)
        for url in discovery.resource_metadata_urls(server_url, challenge_url):
            answer = self._http.get(url)
            tried.append(f"{url} ({answer.status})")
            if answer.ok and answer.json is not None:
                prm = answer.json
                break
        if prm is not None:
            resource = discovery.check_resource(prm, server_url)
            issuer = self._choose_issuer(prm)
        elif self._authorization_server is not None:
            resource, issuer = discovery.canonical_resource(server_url), self._authorization_server
        else:
            raise AuthorizationError(
                f"{server_url} asked for authorization but publishes no protected resource metadata "
                f"(tried {', '.join(tried)})"
            )
        found = self._discover_issuer(issuer, None, prm=prm, resource=resource)
        self._discovery = found
        return found

    def _check_metadata_url(self, url: str) -> str:
        # The challenge may name any URL; fetch it only over HTTPS, or from
        # the MCP server's own origin, or a loopback address; and only on
        # an address the server may send the client to.
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 -- parsing the port is what validates it
        except ValueError:
            raise AuthorizationError(f"the challenge's resource_metadata is not a valid URL: {url!r}") from None
        server = urlsplit(self.server_url)
        if parts.scheme != "https" and (parts.scheme, parts.netloc) != (server.scheme, server.netloc):
            discovery.check_endpoint_url(url, "the resource_metadata URL")
        self._network.check(url, named_by=self.server_url, what="the resource_metadata URL of the server's challenge")
        return url

    def _choose_issuer(self, prm: Mapping[str, Any]) -> str:
        servers = prm.get("authorization_servers")
        if not isinstance(servers, list) or not servers or not all(isinstance(s, str) and s for s in servers):
            raise AuthorizationError("the protected resource metadata lists no valid 'authorization_servers'")
        if self._authorization_server is not None:
            if self._authorization_server not in servers:
                raise AuthorizationError(
                    f"the configured authorization server {self._authorization_server!r} is not one the "
                    f"server accepts: {', '.join(servers)}"
                )
            return self._authorization_server
        return str(servers[0])

    def _discover_issuer(self, issuer: str, previous: Discovery | None, *, prm: dict[str, Any] | None = None,
                         resource: str | None = None) -> Discovery:
        discovery.check_endpoint_url(issuer, "the authorization server (issuer)")
        if issuer != self._authorization_server:  # one you configured is yours, not the server's choice
            self._network.check(issuer, named_by=self.server_url, what="the authorization server")
        problems: list[str] = []
        for url in discovery.authorization_server_metadata_urls(issuer):
            answer = self._http.get(url)
            if not answer.ok or answer.json is None:
                problems.append(f"{url} ({answer.status})")
                continue
            try:
                discovery.check_issuer(answer.json, issuer)
                metadata = self._check_metadata(answer.json, issuer)
            except (EndpointNotAllowed, NotResolvedInTime):
                # A hostile document, or a resolver that is not answering:
                # the next well-known URL is no better (and would wait again).
                raise
            except AuthorizationError as exc:
                # Never use a document that fails validation; another
                # well-known URL may still hold a valid one.
                problems.append(f"{url}: {exc}")
                continue
            if resource is None:
                resource = previous.resource if previous else discovery.canonical_resource(self.server_url)
            if prm is None and previous is not None:
                prm = previous.resource_metadata
            return Discovery(prm, resource, issuer, metadata)
        raise AuthorizationError(f"no usable metadata for the authorization server {issuer}: {'; '.join(problems)}")

    def _check_metadata(self, metadata: dict[str, Any], issuer: str) -> dict[str, Any]:
        """The fields the flows rely on: valid endpoint URLs and lists. The
        endpoints the client uses (requests, or hands to a browser) must be
        on addresses the authorization server may send it to; the others
        (`jwks_uri`, `revocation_endpoint`, ...) are never fetched."""
        for field in ("token_endpoint", "authorization_endpoint", "registration_endpoint"):
            if field == "token_endpoint" or metadata.get(field) is not None:
                url = discovery.check_endpoint_url(metadata.get(field), f"the {field}")
                self._network.check(url, named_by=issuer, what=f"the {field}")
        for field in ("scopes_supported", "token_endpoint_auth_methods_supported", "grant_types_supported",
                      "code_challenge_methods_supported", "response_types_supported"):
            value = metadata.get(field)
            if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
                raise AuthorizationError(f"the authorization server metadata has an invalid {field!r}")
        return metadata

    # -- the token endpoint ----------------------------------------------------------------

    def _token_request(
        self, form: Mapping[str, str], client: ClientInfo | None, *, scope: str | None,
        previous: Tokens | None = None, endpoint: str | None = None, what: str = "the token request",
        signing_key: SigningKey | None = None,
    ) -> Tokens:
        """POST to the token endpoint with client authentication and (when
        enabled) a DPoP proof, once more with the server's DPoP nonce if it
        asks; return validated tokens."""
        assert self._discovery is not None
        found = self._discovery
        url = endpoint or found.token_endpoint
        answer = self._post_token(url, form, client, signing_key)
        if self._dpop is not None and is_use_dpop_nonce(answer.status, answer.headers, answer.json):
            if self._dpop.nonce_from(url, answer.headers):
                answer = self._post_token(url, form, client, signing_key)
        if not answer.ok:
            raise oauth_error(answer, what)
        return tokens_from_answer(
            answer, requested_scope=scope, issuer=found.issuer, resource=form.get("resource"),
            previous_refresh_token=previous.refresh_token if previous else None,
        )

    def _post_token(self, url: str, form: Mapping[str, str], client: ClientInfo | None,
                    signing_key: SigningKey | None) -> Answer:
        body = {k: v for k, v in form.items() if v is not None}
        headers: dict[str, str] = {}
        if client is not None:
            self._authenticate(client, body, headers, signing_key)
        if self._dpop is not None:
            headers["DPoP"] = self._dpop.proof("POST", url)
        answer = self._http.post(url, form=body, headers=headers)
        if self._dpop is not None and answer.ok:
            self._dpop.nonce_from(url, answer.headers)
        return answer

    def _authenticate(self, client: ClientInfo, form: dict[str, str], headers: dict[str, str],
                      signing_key: SigningKey | None) -> None:
        method = _auth_method(client, self._discovery.metadata if self._discovery else {}, signing_key)
        if method == "client_secret_basic" and client.client_secret:
            # RFC 6749 §2.3.1: each part form-urlencoded before base64.
            pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
            form.pop("client_id", None)
        elif method == "client_secret_post" and client.client_secret:
            form["client_id"] = client.client_id
            form["client_secret"] = client.client_secret
        elif method == "private_key_jwt":
            if signing_key is None:
                raise AuthorizationError("private_key_jwt client authentication needs a private key")
            assert self._discovery is not None
            form["client_id"] = client.client_id
            form["client_assertion_type"] = _ASSERTION_TYPE
            form["client_assertion"] = client_assertion(signing_key, client.client_id, self._discovery.issuer)
        else:
            form["client_id"] = client.client_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._server_url!r})"


def _stored(storage: TokenStorage, key: str, server_url: str) -> Tokens | None:
    """The tokens `storage` holds under `key` now (read, not kept)."""
    data = storage.load(key)
    try:
        return Tokens.from_dict(data) if data else None
    except (TypeError, ValueError):
        log.warning("ignoring unreadable stored tokens for %s", server_url)
        return None
