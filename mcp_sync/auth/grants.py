"""Grants without a person: back ends, jobs and workloads.

- `ClientCredentials`: the client's own credentials (RFC 6749 §4.4), a
  secret (`client_secret_basic`/`client_secret_post`) or a private key
  (`private_key_jwt`, RFC 7523 §2.2). The MCP client credentials extension.
- `JwtBearer`: a JWT the platform gives this workload (Kubernetes,
  cloud workload identity) exchanged for an access token (RFC 7523 §2.1).
- `EnterpriseManaged`: the enterprise-managed authorization extension: the
  user's ID token from the company's identity provider is exchanged there
  for an identity assertion grant (ID-JAG, RFC 8693 token exchange), which
  the MCP server's authorization server takes as a jwt-bearer grant.

All of them discover the authorization server from the MCP server's 401
like `OAuth` does, obtain a token again shortly before it expires, and
never need a redirect. Their secrets are never in `repr`, logs or errors.

A client secret is sent only to the authorization server it was issued
by: give its issuer as `authorization_server=` (without it, the MCP
server would choose who receives the secret).

Example, a Django back end calling tools as itself::

    auth = ClientCredentials(client_id="reports", client_secret=settings.MCP_SECRET,
                             authorization_server="https://auth.example.com")
    client = mcp_sync.connect("https://mcp.example.com/mcp", auth=auth)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import AuthorizationError
from .discovery import check_endpoint_url
from .flow import FlowOptions, TokenFlow
from .jwt import SigningKey
from .tokens import ClientInfo, Tokens, oauth_error

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ClientCredentials", "JwtBearer", "EnterpriseManaged"]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"

_AssertionSource = str | Callable[[], str]


def _read_assertion(source: _AssertionSource, what: str) -> str:
    if not callable(source):
        value = source
    else:
        try:
            value = source()
        except AuthorizationError:
            raise
        except Exception as exc:
            # The caller's function failed (a token file missing, a metadata
            # service down): that is why there is no token, so it must reach
            # the caller as an AuthorizationError. Anything else is swallowed
            # by the transport's 401 handling and shows as a bare HTTP 401.
            raise AuthorizationError(f"getting the {what} failed: {type(exc).__name__}") from exc
    if not isinstance(value, str) or not value or any(c in value for c in " \r\n"):
        raise AuthorizationError(f"the {what} is missing or not a compact JWT")
    return value


class _MachineFlow(TokenFlow):
    """Shared by the grants here: one client identity, given up front."""

    def __init__(
        self,
        server_url: str | None,
        *,
        client_id: str | None,
        client_secret: str | None,
        private_key: SigningKey | str | bytes | None,
        token_endpoint_auth_method: str | None,
        **options: Unpack[FlowOptions],
    ) -> None:
        super().__init__(server_url, **options)
        if client_id is not None and (not isinstance(client_id, str) or not client_id):
            raise ValueError("client_id must be a non-empty string")
        if (client_secret is not None or private_key is not None) and client_id is None:
            raise ValueError("client credentials need the client_id they belong to")
        if client_secret is not None and options.get("authorization_server") is None:
            # Otherwise the secret would go to whichever authorization
            # server the MCP server names: the server would choose who
            # learns it. (A private_key_jwt assertion names its audience.)
            raise ValueError(
                "a client_secret is sent only to the authorization server the client is registered with: "
                "name it with authorization_server='https://auth.example.com' (its issuer URL)"
            )
        if token_endpoint_auth_method not in (None, "client_secret_basic", "client_secret_post", "private_key_jwt", "none"):
            raise ValueError(f"unknown token_endpoint_auth_method {token_endpoint_auth_method!r}")
        self._client_id = client_id
        self._client_secret = client_secret
        self._private_key = SigningKey.from_pem(private_key) if isinstance(private_key, (str, bytes)) else private_key
        self._auth_method_setting = token_endpoint_auth_method

    def _client(self) -> ClientInfo | None:
        if self._client_id is None:
            return None
        issuer = self._discovery.issuer if self._discovery else ""
        if self._client_secret is not None and issuer != self._authorization_server:
            raise AuthorizationError(
                f"not sending the client secret to {issuer or 'an unknown authorization server'}: "
                f"the client is registered with {self._authorization_server}"
            )
        return ClientInfo(self._client_id, issuer, client_secret=self._client_secret,
                          auth_method=self._auth_method_setting, kind="pre-registered")

    def _client_for_refresh(self) -> ClientInfo | None:
        return self._client()

    def _tokens_key(self) -> str:
        # The grant and client identity are part of the key: two providers
        # sharing one storage (a reader and an admin client, say) must never
        # pick up each other's tokens for the same server.
        return f"{super()._tokens_key()} {type(self).__name__} {self._client_id or ''}".rstrip()

    def _resource(self) -> str:
        assert self._discovery is not None
        return self._discovery.resource

    def _grant(self, form: dict[str, str], scopes: list[str] | None, what: str) -> Tokens:
        """One token request of this grant, for this resource and `scopes`,
        authenticated as this client."""
        form["resource"] = self._resource()
        if scopes:
            form["scope"] = " ".join(scopes)
        return self._token_request(form, self._client(), scope=form.get("scope"), signing_key=self._private_key,
                                   what=what)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._server_url!r}, client_id={self._client_id!r})"


_CLIENT_CREDENTIALS_EXTENSION: Mapping[str, Any] = {"extensions": {"io.modelcontextprotocol/oauth-client-credentials": {}}}


class ClientCredentials(_MachineFlow):
    """The client credentials grant: this program is the client and acts
    as itself. Authenticate with `client_secret` or with `private_key` (a
    `SigningKey` or a PEM string; `private_key_jwt`, whose assertion's
    audience is the authorization server's issuer). A `client_secret`
    needs `authorization_server=`, the issuer it is registered with: it
    is never sent to another one.

    Example::

        auth = ClientCredentials(client_id="nightly-report", client_secret=os.environ["MCP_SECRET"],
                                 authorization_server="https://auth.example.com")
        key_auth = ClientCredentials(client_id="svc", private_key=open("svc.pem").read())

    Args:
        client_id: This client's ID at the authorization server.
        client_secret: Its secret (with `authorization_server=`).
        private_key: A `SigningKey` or PEM, for `private_key_jwt`.
        server_url: The MCP server's URL; None: `connect()` supplies it.
        token_endpoint_auth_method: Force one (`client_secret_basic`,
            `client_secret_post`, `private_key_jwt`).
        **options: The options of `TokenFlow` (`scopes`, `storage`,
            `authorization_server`, `timeout`, `verify`, ...).

    Raises:
        ValueError: Neither `client_secret` nor `private_key`, or a
            `client_secret` without `authorization_server`.
    """

    #: Declared by `connect()`: the client credentials extension.
    client_capabilities: ClassVar[Mapping[str, Any]] = _CLIENT_CREDENTIALS_EXTENSION

    def __init__(
        self,
        client_id: str,
        client_secret: str | None = None,
        *,
        private_key: SigningKey | str | bytes | None = None,
        server_url: str | None = None,
        token_endpoint_auth_method: str | None = None,
        **options: Unpack[FlowOptions],
    ) -> None:
        if client_secret is None and private_key is None:
            raise ValueError("ClientCredentials needs client_secret or private_key")
        super().__init__(server_url, client_id=client_id, client_secret=client_secret, private_key=private_key,
                         token_endpoint_auth_method=token_endpoint_auth_method, **options)

    def _obtain(self, scopes: list[str] | None) -> Tokens:
        return self._grant({"grant_type": "client_credentials"}, scopes, "the client credentials request")


class JwtBearer(_MachineFlow):
    """Workload identity: exchange a JWT issued to this workload for an
    access token (`urn:ietf:params:oauth:grant-type:jwt-bearer`).

    `assertion` is the JWT, or a function returning a fresh one (called
    for each token request, so a rotated file is read again). Client
    authentication is optional: give `client_id` (and a secret or key)
    when the authorization server wants it.

    Example::

        auth = JwtBearer(lambda: open("/var/run/secrets/tokens/mcp").read().strip())

    Args:
        assertion: The workload's JWT, or a function returning a fresh one.
        client_id: This client's ID, when the authorization server wants
            client authentication.
        client_secret: Its secret (with `authorization_server=`).
        private_key: A `SigningKey` or PEM, for `private_key_jwt`.
        server_url: The MCP server's URL; None: `connect()` supplies it.
        token_endpoint_auth_method: Force one.
        **options: The options of `TokenFlow` (`scopes`, `storage`,
            `authorization_server`, `timeout`, `verify`, ...).

    Raises:
        TypeError: `assertion` is neither a string nor a function.
    """

    #: JWT bearer assertions are part of the client credentials extension.
    client_capabilities: ClassVar[Mapping[str, Any]] = _CLIENT_CREDENTIALS_EXTENSION

    def __init__(
        self,
        assertion: _AssertionSource,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        private_key: SigningKey | str | bytes | None = None,
        server_url: str | None = None,
        token_endpoint_auth_method: str | None = None,
        **options: Unpack[FlowOptions],
    ) -> None:
        if not (isinstance(assertion, str) or callable(assertion)):
            raise TypeError("assertion must be a JWT string or a function returning one")
        super().__init__(server_url, client_id=client_id, client_secret=client_secret, private_key=private_key,
                         token_endpoint_auth_method=token_endpoint_auth_method, **options)
        self._assertion = assertion

    def _obtain(self, scopes: list[str] | None) -> Tokens:
        form = {"grant_type": JWT_BEARER, "assertion": _read_assertion(self._assertion, "workload JWT")}
        return self._grant(form, scopes, "the jwt-bearer request")


class EnterpriseManaged(_MachineFlow):
    """Enterprise-managed authorization: the user signed in to the
    company's identity provider (IdP); their ID token is exchanged at the
    IdP for an identity assertion grant (ID-JAG) for this MCP server's
    authorization server, which issues the access token for it.

    `id_token` is the user's ID token (or a function returning a current
    one); `idp_token_endpoint` the IdP's token endpoint (HTTPS);
    `idp_client_id`/`idp_client_secret` this client at the IdP, when it
    authenticates clients; `client_id`/`client_secret` this client at the
    MCP server's authorization server.

    Example::

        auth = EnterpriseManaged(
            id_token=session["id_token"], idp_token_endpoint="https://idp.example.com/oauth2/token",
            idp_client_id="mcp-app", client_id="mcp-app-at-tools", client_secret=settings.TOOLS_SECRET,
            authorization_server="https://auth.example.com")
    """

    #: Declared by `connect()`: the enterprise-managed authorization extension.
    client_capabilities: ClassVar[Mapping[str, Any]] = {
        "extensions": {"io.modelcontextprotocol/enterprise-managed-authorization": {}},
    }

    def __init__(
        self,
        *,
        id_token: _AssertionSource,
        idp_token_endpoint: str,
        client_id: str,
        client_secret: str | None = None,
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
        private_key: SigningKey | str | bytes | None = None,
        server_url: str | None = None,
        token_endpoint_auth_method: str | None = None,
        **options: Unpack[FlowOptions],
    ) -> None:
        if not (isinstance(id_token, str) or callable(id_token)):
            raise TypeError("id_token must be a JWT string or a function returning one")
        check_endpoint_url(idp_token_endpoint, "idp_token_endpoint")
        super().__init__(server_url, client_id=client_id, client_secret=client_secret, private_key=private_key,
                         token_endpoint_auth_method=token_endpoint_auth_method, **options)
        self._id_token = id_token
        self._idp_token_endpoint = idp_token_endpoint
        self._idp_client_id = idp_client_id
        self._idp_client_secret = idp_client_secret

    def _id_jag(self, scopes: list[str] | None) -> str:
        """RFC 8693 token exchange at the IdP: ID token in, ID-JAG out."""
        assert self._discovery is not None
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "audience": self._discovery.issuer,
            "resource": self._resource(),
            "subject_token": _read_assertion(self._id_token, "ID token"),
            "subject_token_type": ID_TOKEN,
        }
        if scopes:
            form["scope"] = " ".join(scopes)
        headers: dict[str, str] = {}
        if self._idp_client_id is not None:
            idp_client = ClientInfo(self._idp_client_id, "", client_secret=self._idp_client_secret,
                                    auth_method="client_secret_basic" if self._idp_client_secret else "none")
            self._authenticate(idp_client, form, headers, None)
        answer = self._http.post(self._idp_token_endpoint, form=form, headers=headers)
        if not answer.ok:
            raise oauth_error(answer, "the token exchange at the identity provider")
        body = answer.json or {}
        if body.get("issued_token_type") != ID_JAG:
            raise AuthorizationError("the identity provider did not issue an ID-JAG (issued_token_type differs)")
        assertion = body.get("access_token")
        if not isinstance(assertion, str) or not assertion or " " in assertion:
            raise AuthorizationError("the identity provider's token exchange answer has no valid ID-JAG")
        return assertion

    def _obtain(self, scopes: list[str] | None) -> Tokens:
        return self._grant({"grant_type": JWT_BEARER, "assertion": self._id_jag(scopes)}, scopes, "the ID-JAG grant")
