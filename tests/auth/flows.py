"""What the OAuth flow tests share: a redirect that records what it saw, one
whole flow through the public API, and readers of what the test servers
recorded."""

from __future__ import annotations

import base64
import json
from urllib.parse import unquote_plus

import mcp_sync
from mcp_sync.auth import HeadlessRedirect, OAuth
from mcp_sync.testing.auth import AuthServer, ProtectedMCP

REDIRECT = "http://localhost:3000/callback"


class Recording(HeadlessRedirect):
    """A HeadlessRedirect that keeps the authorization URLs it was given and
    the callback URLs it returned; `tamper` may rewrite a callback."""

    def __init__(self, redirect_uri: str = REDIRECT, tamper=None) -> None:
        super().__init__(redirect_uri, timeout=5)
        self.urls: list[str] = []
        self.callbacks: list[str] = []
        self.tamper = tamper

    def authorize(self, authorization_url: str) -> str:
        self.urls.append(authorization_url)
        callback = super().authorize(authorization_url)
        if self.tamper is not None:
            callback = self.tamper(callback)
        self.callbacks.append(callback)
        return callback


def use(mcp: ProtectedMCP, oauth: OAuth, text: str = "hi", **options) -> None:
    """Connect, list the tools and call one: the whole flow through the public API."""
    with mcp_sync.connect(mcp.url, auth=oauth, **options) as client:
        assert "echo" in [tool.name for tool in client.list_tools()]
        assert client.call_tool("echo", {"text": text}).text == text


def paths(auth: AuthServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in auth.requests]


def authorize_queries(auth: AuthServer) -> list[dict[str, str]]:
    return [r.query for r in auth.requests_to("/authorize")]


def token_forms(auth: AuthServer, grant_type: str | None = None) -> list[dict[str, str]]:
    return [r.form for r in auth.requests_to("/token") if grant_type in (None, r.form.get("grant_type"))]


def metadata_gets(auth: AuthServer) -> list[str]:
    """The well-known URLs requested from the authorization server, in order."""
    return [auth.url + r.path for r in auth.requests if r.method == "GET" and "/.well-known/" in r.path]


def mcp_gets(mcp: ProtectedMCP) -> list[str]:
    """The paths of the GET requests the MCP server received (metadata lookups), in order."""
    return [r.path for r in mcp.http.requests if r.method == "GET"]


def basic_client_id(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    if value[:6].lower() != "basic ":
        return None
    return unquote_plus(base64.b64decode(value[6:]).decode().partition(":")[0])


def basic_credentials_text(headers: dict[str, str]) -> str:
    """The decoded `id:secret` of a Basic Authorization header ("" without one)."""
    value = headers.get("authorization", "")
    if value[:6].lower() != "basic ":
        return ""
    return unquote_plus(base64.b64decode(value[6:]).decode())


def everything_sent(auth: AuthServer) -> str:
    """All an authorization server received, as one string to search (a
    Basic header decoded, so a secret in it is found)."""
    parts = []
    for r in auth.requests:
        parts += [r.path, json.dumps(r.query), json.dumps(r.headers), r.body.decode("latin-1"),
                  basic_credentials_text(r.headers)]
    return "\n".join(parts)


def bearer_tokens(mcp: ProtectedMCP) -> list[str]:
    return [value.partition(" ")[2] for value in mcp.seen_tokens if value]
