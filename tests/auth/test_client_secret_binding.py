"""A pre-registered client secret goes only to the authorization server it was registered with.

The MCP server names the authorization server; were a secret sent to
whichever one it names, the server would choose who learns the secret.
So a secret needs its issuer (`client_issuer=` on `OAuth`,
`authorization_server=` on every provider), and is refused without one.
"""

from __future__ import annotations

import pytest

import mcp_sync
from mcp_sync.auth import ClientCredentials, EnterpriseManaged, HeadlessRedirect, JwtBearer, OAuth
from mcp_sync.errors import AuthorizationError
from mcp_sync.testing.auth import AuthServer, ProtectedMCP

from .test_oauth import everything_sent, use

SECRET = "pre-registered-s3cret"


def providers_without_issuer(idp_endpoint: str = "https://idp.example.com/token"):
    return {
        "OAuth": lambda: OAuth(redirect=HeadlessRedirect(), client_id="app", client_secret=SECRET),
        "ClientCredentials": lambda: ClientCredentials("app", SECRET),
        "JwtBearer": lambda: JwtBearer("a.b.c", client_id="app", client_secret=SECRET),
        "EnterpriseManaged": lambda: EnterpriseManaged(id_token="a.b.c", idp_token_endpoint=idp_endpoint,
                                                       client_id="app", client_secret=SECRET),
    }


@pytest.mark.parametrize("kind", ["OAuth", "ClientCredentials"])
def test_a_secret_without_its_issuer_is_refused_before_anything_is_sent(serve, kind):
    # The server names an authorization server that accepts anything for "app"
    # and records what it is sent (before: the secret, in a Basic header).
    chosen_by_the_server = serve(AuthServer(clients={"app": SECRET}))
    mcp = serve(ProtectedMCP(chosen_by_the_server))
    with pytest.raises(ValueError, match="client_issuer=" if kind == "OAuth" else "authorization_server="):
        provider = providers_without_issuer()[kind]()
        with mcp_sync.connect(mcp.url, auth=provider) as client:
            client.list_tools()
    assert SECRET not in everything_sent(chosen_by_the_server)
    assert chosen_by_the_server.requests == []


@pytest.mark.parametrize("kind", ["JwtBearer", "EnterpriseManaged"])
def test_every_provider_with_a_secret_needs_its_issuer(kind):
    with pytest.raises(ValueError, match="name it with authorization_server="):
        providers_without_issuer()[kind]()


def test_clients_without_a_secret_need_no_issuer():
    OAuth(redirect=HeadlessRedirect(), client_id="public-app")  # a public client: its id is no secret
    JwtBearer("a.b.c")
    JwtBearer("a.b.c", client_id="app")


def test_oauth_takes_the_issuer_from_authorization_server_too(serve):
    auth = serve(AuthServer(clients={"app": SECRET}))
    mcp = serve(ProtectedMCP(auth))
    use(mcp, OAuth(redirect=HeadlessRedirect(), client_id="app", client_secret=SECRET,
                   authorization_server=auth.issuer))
    assert auth.client_auth == [("app", "client_secret_basic")] and auth.registered == {}


def test_oauth_never_sends_the_secret_to_another_authorization_server_the_server_names_first(serve):
    honest = serve(AuthServer(clients={"app": SECRET}))
    other = serve(AuthServer(clients={"app": SECRET}))
    mcp = serve(ProtectedMCP([other, honest]))  # `other` is named first
    use(mcp, OAuth(redirect=HeadlessRedirect(), client_id="app", client_secret=SECRET, client_issuer=honest.issuer))
    assert SECRET not in everything_sent(other)
    [registered] = other.registered  # a registration of its own there, not the pre-registered client
    assert other.client_auth == [(registered, "client_secret_basic")] and honest.requests == []


def test_client_credentials_never_follow_the_server_to_another_authorization_server(serve):
    honest = serve(AuthServer(clients={"app": SECRET}))
    other = serve(AuthServer(clients={"app": SECRET}))
    mcp = serve(ProtectedMCP(honest))
    with mcp_sync.connect(mcp.url, auth=ClientCredentials("app", SECRET, authorization_server=honest.issuer)) as client:
        client.list_tools()
        mcp.switch_to(other)
        with pytest.raises(AuthorizationError, match="not one the server accepts"):
            client.list_tools()
    assert SECRET not in everything_sent(other) and other.requests == []
    assert honest.client_auth == [("app", "client_secret_basic")]
