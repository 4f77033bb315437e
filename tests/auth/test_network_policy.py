"""Which addresses a server may make the client reach while authorizing.

A server's 401 challenge and its metadata name URLs the client fetches:
a remote server must not turn the client against the user's own machine
(loopback) or network (private, link-local addresses). The end-to-end
cases need a server that is *not* on loopback; they run in a network
namespace of their own (`unshare -n`, see `netns_scenarios.py`), where
198.51.100.7 and 10.55.0.1 live on the namespace's loopback interface,
so no packet can leave the machine. The address rules themselves are
checked with an injected resolver.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync.auth import ClientCredentials, HeadlessRedirect, OAuth
from mcp_sync.auth import network
from mcp_sync.auth.network import EndpointNotAllowed, NetworkPolicy, address_class
from mcp_sync.errors import AuthorizationError, McpError
from mcp_sync.testing.auth import AuthServer, ProtectedMCP

ROOT = Path(__file__).resolve().parents[2]
PUBLIC, PRIVATE = "198.51.100.7", "10.55.0.1"


# -- in a network namespace of its own -------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _namespace_problem() -> str | None:
    """Why a private network namespace cannot be made here (None: it can)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs the unshare and ip commands"
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a network namespace: {probe.stderr.strip()}"
    return None


def in_namespace(scenario: str) -> dict:
    problem = _namespace_problem()
    if problem is not None:
        pytest.skip(problem)
    script = (f"ip link set lo up && ip addr add {PUBLIC}/32 dev lo && ip addr add {PRIVATE}/32 dev lo"
              ' && exec "$0" -m tests.auth.netns_scenarios "$1"')
    done = subprocess.run(["unshare", "-n", "sh", "-c", script, sys.executable, scenario],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_remote_server_cannot_send_the_client_to_a_loopback_authorization_server():
    outcome = in_namespace("remote_server_names_loopback_authorization_server")
    assert outcome["error"] == "EndpointNotAllowed" and "AuthorizationError" in outcome["mro"]
    assert outcome["issuer"] in outcome["message"] and "loopback" in outcome["message"]
    assert "allow_private_network=True" in outcome["message"]
    assert outcome["as_requests"] == []  # nothing reached the loopback server


def test_the_opt_in_lets_a_remote_server_use_a_loopback_authorization_server():
    outcome = in_namespace("remote_server_names_loopback_authorization_server_opted_in")
    assert outcome["error"] is None and outcome["text"] == "hi"
    assert outcome["as_requests"] == ["GET /.well-known/oauth-authorization-server", "POST /register",
                                      "GET /authorize", "POST /token"]


def test_a_remote_challenge_cannot_name_a_loopback_url():
    outcome = in_namespace("remote_challenge_names_loopback_metadata_url")
    assert outcome["error"] == "EndpointNotAllowed", outcome
    assert "/admin/delete?all=1" in outcome["message"] and "resource_metadata" in outcome["message"]
    assert outcome["victim_hits"] == []


def test_a_public_server_cannot_send_the_client_to_a_private_address():
    outcome = in_namespace("public_server_names_private_authorization_server")
    assert outcome["error"] == "EndpointNotAllowed" and "private" in outcome["message"]
    assert outcome["accepted"] == 0  # not even a TCP connection


def test_a_private_server_may_name_a_private_authorization_server():
    outcome = in_namespace("private_server_names_private_authorization_server")
    # Allowed: the client connects (and fails the TLS handshake with the bare listener).
    assert outcome["error"] == "AuthorizationError" and "SSLError" in outcome["message"]
    assert outcome["accepted"] >= 1


# -- the rules, with an injected resolver ----------------------------------------------------------


@pytest.mark.parametrize("address, kind", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "loopback"), ("::", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"),
    ("192.168.1.1", "private"), ("fd12:3456::1", "private"), ("fc00::1", "private"),
    ("::ffff:10.0.0.1", "private"), ("100.64.0.1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("fe80::1%eth0", "link-local"),
    ("8.8.8.8", "public"), ("172.32.0.1", "public"), ("198.51.100.7", "public"), ("2001:4860::8888", "public"),
])
def test_address_classes(address, kind):
    assert address_class(address) == kind


def resolver(table):
    def resolve(host: str, port: int | None) -> list[str]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]
    return resolve


HOSTS = {
    "mcp.example.com": ["93.184.216.34"],
    "auth.example.com": ["93.184.216.35"],
    "rebound.example.com": ["127.0.0.1"],
    "metadata.example.com": ["169.254.169.254"],
    "intranet.example.com": ["10.0.0.8"],
    "mixed.example.com": ["93.184.216.36", "10.0.0.9"],
    "mcp.corp": ["10.0.0.5"],
    "localhost": ["127.0.0.1", "::1"],
}


@pytest.mark.parametrize("server, endpoint, allowed", [
    ("https://mcp.example.com/mcp", "https://auth.example.com", True),
    ("https://mcp.example.com/mcp", "http://127.0.0.1:8080/admin", False),
    ("https://mcp.example.com/mcp", "http://localhost:8080/token", False),
    ("https://mcp.example.com/mcp", "https://rebound.example.com/token", False),  # a name for a loopback address
    ("https://mcp.example.com/mcp", "https://metadata.example.com/latest", False),
    ("https://mcp.example.com/mcp", "https://169.254.169.254/latest", False),
    ("https://mcp.example.com/mcp", "https://[fe80::1]/x", False),
    ("https://mcp.example.com/mcp", "https://intranet.example.com/token", False),
    ("https://mcp.example.com/mcp", "https://mixed.example.com/token", False),  # one private address is enough
    ("https://mcp.example.com/mcp", "https://[::ffff:127.0.0.1]/x", False),
    ("https://mcp.corp/mcp", "https://intranet.example.com/token", True),  # private names private
    ("https://mcp.corp/mcp", "http://127.0.0.1:9000/token", False),
    ("https://mcp.corp/mcp", "https://metadata.example.com/x", False),
    ("http://localhost:3000/mcp", "http://127.0.0.1:9000/token", True),  # loopback names loopback
    ("http://127.0.0.1:3000/mcp", "http://localhost:9000/token", True),
    ("http://127.0.0.1:3000/mcp", "https://auth.example.com", True),
    ("http://127.0.0.1:3000/mcp", "https://intranet.example.com/token", False),
    ("https://mixed.example.com/mcp", "https://intranet.example.com/token", False),  # mixed counts as public
])
def test_which_server_may_name_which_address(server, endpoint, allowed):
    policy = NetworkPolicy(resolver=resolver(HOSTS))
    if allowed:
        policy.check(endpoint, named_by=server, what="the token_endpoint")
    else:
        with pytest.raises(EndpointNotAllowed) as caught:
            policy.check(endpoint, named_by=server, what="the token_endpoint")
        error = caught.value
        assert isinstance(error, AuthorizationError) and isinstance(error, McpError)
        assert error.url == endpoint and endpoint in str(error) and "the token_endpoint" in str(error)
        assert error.address_class in str(error) and "allow_private_network=True" in str(error)


@pytest.mark.parametrize("value", ["no", "false", "", 0, 1, None])
def test_the_opt_in_is_true_or_false_and_a_look_alike_is_refused(value):
    """`allow_private_network="no"` turned the check off (a truthy string)."""
    with pytest.raises(TypeError, match="allow_private_network must be True or False"):
        OAuth("https://mcp.example.com/mcp", allow_private_network=value)
    with pytest.raises(TypeError, match="allow_private_network must be True or False"):
        ClientCredentials("c", "s", server_url="https://mcp.example.com/mcp",
                          allow_private_network=value)


def test_the_opt_in_skips_the_check_and_resolves_nothing():
    def refuse(host, port):
        raise AssertionError("resolved although the user opted in")

    NetworkPolicy(allow_private_network=True, resolver=refuse).check(
        "http://127.0.0.1/admin", named_by="https://mcp.example.com/mcp", what="x")


def test_an_endpoint_that_cannot_be_resolved_is_refused_without_a_proxy(monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    policy = NetworkPolicy(resolver=resolver(HOSTS))
    with pytest.raises(AuthorizationError, match="cannot resolve"):
        policy.check("https://nowhere.example.com/token", named_by="https://mcp.example.com/mcp", what="x")


def test_an_endpoint_reached_through_a_proxy_is_left_to_the_proxy(monkeypatch):
    # The proxy resolves the name, in its own network: there is nothing to check here.
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.com:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    NetworkPolicy(resolver=resolver(HOSTS)).check(
        "https://nowhere.example.com/token", named_by="https://mcp.example.com/mcp", what="x")


def test_names_are_resolved_by_the_default_resolver(monkeypatch):
    seen = []

    def fake(host, port):
        seen.append((host, port))
        return ["10.9.8.7"]

    monkeypatch.setattr(network, "resolve_host", fake)
    with pytest.raises(EndpointNotAllowed):
        NetworkPolicy().check("https://auth.example.com/token", named_by="http://127.0.0.1:1/mcp", what="x")
    assert seen == [("auth.example.com", 443)]


# -- through the public API, on this machine's loopback -------------------------------------------


def private_localhost(monkeypatch):
    """Make the policy believe `localhost` is a private address (requests still connect to 127.0.0.1)."""
    real = network.resolve_host

    def resolve(host, port):
        return ["10.0.0.7"] if host == "localhost" else real(host, port)

    monkeypatch.setattr(network, "resolve_host", resolve)


def test_an_authorization_server_endpoint_is_checked_by_its_resolved_address(serve, monkeypatch):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    auth.metadata_override = {**auth.metadata, "token_endpoint": auth.token_endpoint.replace("127.0.0.1", "localhost")}
    private_localhost(monkeypatch)
    with pytest.raises(EndpointNotAllowed, match="token_endpoint") as caught:
        mcp_sync.connect(mcp.url, auth=OAuth(redirect=HeadlessRedirect()))
    assert "10.0.0.7" in str(caught.value) and "private" in str(caught.value)
    # Refused when the metadata was read: no registration, no authorization, no token request.
    assert [r.path for r in auth.requests] == ["/.well-known/oauth-authorization-server"]


def test_the_same_metadata_works_when_the_name_is_loopback(serve):
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    auth.metadata_override = {**auth.metadata, "token_endpoint": auth.token_endpoint.replace("127.0.0.1", "localhost")}
    with mcp_sync.connect(mcp.url, auth=OAuth(redirect=HeadlessRedirect())) as client:
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"
    assert auth.token_requests == 1


def test_every_grant_takes_the_opt_in(serve, monkeypatch):
    auth = serve(AuthServer(clients={"svc": "s3cret"}))
    mcp = serve(ProtectedMCP(auth))
    auth.metadata_override = {**auth.metadata, "token_endpoint": auth.token_endpoint.replace("127.0.0.1", "localhost")}
    private_localhost(monkeypatch)
    refused = ClientCredentials("svc", "s3cret", authorization_server=auth.issuer)
    with pytest.raises(EndpointNotAllowed):
        mcp_sync.connect(mcp.url, auth=refused)
    allowed = ClientCredentials("svc", "s3cret", authorization_server=auth.issuer, allow_private_network=True)
    with mcp_sync.connect(mcp.url, auth=allowed) as client:
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"
    assert auth.token_requests == 1
