"""Proxies (issue 15): the HTTP transport and the OAuth client of one
connection take one network path, through a real forward proxy on loopback
(`tests/servers/forward_proxy.py`), which records what it carried.

Plain http:// goes to the proxy in absolute form; https:// through CONNECT
with TLS to the server over the tunnel; proxy credentials (Basic), 407 and
a refused CONNECT are clear errors that never show the credentials; the
environment (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY, lower case too)
is honoured unless `trust_env=False`, and an explicit `proxy=` wins over
it. Hosts named `*.internal` are ones only the proxy can resolve: the
client never resolves them itself (`socket.getaddrinfo` refuses them here).
"""

from __future__ import annotations

import base64
import logging
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

import pytest
import trustme

import mcp_sync
from mcp_sync import HTTP
from mcp_sync.auth import HeadlessRedirect, OAuth
from mcp_sync.auth._http import fetch
from mcp_sync.transports.http_network import NetworkSettings, parse_proxy
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.testing.auth import AuthServer, ProtectedMCP
from tests.servers.forward_proxy import ForwardProxy


PROXY_VARIABLES = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]
SECRET = "s3cr3t-pa55"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No proxy from the machine running the tests, and no name ending in
    .internal resolved by the client: only the proxy knows those hosts."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".internal"):
            raise socket.gaierror(socket.EAI_NONAME, f"the client tried to resolve {host}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def proxy():
    with ForwardProxy(hosts={"mcp.internal": "127.0.0.1", "auth.internal": "127.0.0.1"}) as running:
        yield running


@pytest.fixture
def httpd():
    with HTTPServer(demo_server()) as server:
        yield server


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def echo(client, text: str = "via proxy") -> str:
    return client.call_tool("echo", {"text": text}).text


def https_server(ca, *names):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    return HTTPServer(demo_server(), ssl_context=context)


def ca_file(ca, tmp_path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


# -- the transport -----------------------------------------------------------------------------


def test_plain_http_goes_to_the_proxy_in_absolute_form(proxy, httpd):
    with mcp_sync.connect(httpd.url, proxy=proxy.url(), trust_env=False, timeout=5) as client:
        assert echo(client) == "via proxy"
    carried = proxy.forwarded()
    assert carried and all(r.method in ("POST", "GET", "DELETE") for r in carried)
    assert {r.target for r in carried} == {httpd.url}  # absolute form: http://127.0.0.1:PORT/mcp
    assert any(r.method == "POST" for r in carried)


def test_a_host_only_the_proxy_can_resolve(proxy, httpd):
    url = f"http://mcp.internal:{port_of(httpd.url)}/mcp"
    with mcp_sync.connect(url, proxy=proxy.url(), timeout=5) as client:
        assert echo(client) == "via proxy"
    assert {r.target for r in proxy.forwarded()} == {url}


def test_https_goes_through_connect_with_tls_to_the_server(proxy, tmp_path):
    ca = trustme.CA()
    with https_server(ca, "mcp.internal") as server:
        url = f"https://mcp.internal:{port_of(server.url)}/mcp"
        with mcp_sync.connect(url, proxy=proxy.url(), verify=ca_file(ca, tmp_path), timeout=5) as client:
            assert echo(client) == "via proxy"
            assert echo(client, "again") == "again"
    carried = proxy.forwarded()
    assert carried and {(r.method, r.target) for r in carried} == {("CONNECT", f"mcp.internal:{port_of(url)}")}


def test_https_through_the_proxy_checks_the_servers_certificate(proxy):
    ca = trustme.CA()
    with https_server(ca, "mcp.internal") as server:
        url = f"https://mcp.internal:{port_of(server.url)}/mcp"
        with pytest.raises(mcp_sync.ConnectError, match="TLS handshake with mcp.internal.*certificate verify failed"):
            mcp_sync.connect(url, proxy=proxy.url(), timeout=5)
    assert proxy.forwarded()  # the tunnel was opened; TLS itself refused the server


def test_an_ssl_context_works_through_the_tunnel(proxy):
    ca = trustme.CA()
    context = ssl.create_default_context()
    ca.configure_trust(context)
    with https_server(ca, "mcp.internal") as server:
        url = f"https://mcp.internal:{port_of(server.url)}/mcp"
        with mcp_sync.connect(url, proxy=proxy.url(), verify=context, timeout=5) as client:
            assert echo(client) == "via proxy"


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_proxy_credentials_are_sent_to_the_proxy_only(scheme, tmp_path):
    ca = trustme.CA()
    server = https_server(ca, "127.0.0.1") if scheme == "https" else HTTPServer(demo_server())
    with ForwardProxy(credentials=("alice", SECRET)) as proxy, server:
        options = {"verify": ca_file(ca, tmp_path)} if scheme == "https" else {}
        with mcp_sync.connect(server.url, proxy=proxy.url("alice", SECRET), timeout=5, **options) as client:
            assert echo(client) == "via proxy"
        expected = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
        assert proxy.forwarded() and all(r.proxy_authorization == expected for r in proxy.forwarded())
        assert not [r for r in proxy.records if r.refused]
        if scheme == "http":
            seen_by_server = [r.headers.get("proxy-authorization") for r in server.requests]
            assert seen_by_server and not any(seen_by_server)  # the proxy strips it; so must nobody add it


def test_percent_encoded_credentials_are_decoded(httpd):
    with ForwardProxy(credentials=("bob@corp", "p:w/d")) as proxy:
        with mcp_sync.connect(httpd.url, proxy=proxy.url("bob%40corp", "p%3Aw%2Fd"), timeout=5) as client:
            assert echo(client) == "via proxy"
        assert proxy.forwarded()


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("given", [None, "wrong"])
def test_407_is_a_clear_connect_error_without_the_credentials(scheme, given, tmp_path):
    ca = trustme.CA()
    server = https_server(ca, "127.0.0.1") if scheme == "https" else HTTPServer(demo_server())
    with ForwardProxy(credentials=("alice", SECRET)) as proxy, server:
        url = proxy.url("alice", given) if given else proxy.url()
        options = {"verify": ca_file(ca, tmp_path)} if scheme == "https" else {}
        with pytest.raises(mcp_sync.ConnectError) as caught:
            mcp_sync.connect(server.url, proxy=url, timeout=5, **options)
        message = str(caught.value)
        assert f"127.0.0.1:{proxy.port}" in message
        assert ("refused the credentials" if given else "needs credentials") in message
        assert "wrong" not in message and SECRET not in message
        assert [r.refused for r in proxy.records] and all(r.refused == 407 for r in proxy.records)


def test_a_proxy_that_refuses_connect_is_a_clear_connect_error():
    ca = trustme.CA()
    with ForwardProxy(refuse_connect=403) as proxy, https_server(ca, "127.0.0.1") as server:
        with pytest.raises(mcp_sync.ConnectError, match=rf"proxy 127\.0\.0\.1:{proxy.port} refused to open a "
                                                         rf"tunnel to 127\.0\.0\.1:{port_of(server.url)}: HTTP 403"):
            mcp_sync.connect(server.url, proxy=proxy.url(), timeout=5)


def test_a_proxy_that_cannot_reach_the_host_is_a_clear_connect_error(proxy):
    with pytest.raises(mcp_sync.ConnectError, match="refused to open a tunnel to nowhere.internal:443: HTTP 502"):
        mcp_sync.connect("https://nowhere.internal/mcp", proxy=proxy.url(), timeout=5)


def test_a_proxy_that_is_not_there_is_named():
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    with pytest.raises(mcp_sync.ConnectError, match=rf"cannot reach the proxy 127\.0\.0\.1:{port}"):
        mcp_sync.connect("http://mcp.internal/mcp", proxy=f"http://u:{SECRET}@127.0.0.1:{port}", timeout=5)


def test_connect_is_bounded_by_connect_timeout():
    """A proxy that accepts and never answers CONNECT: the tunnel is bounded
    like any connect."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(mcp_sync.McpError, match="did not answer CONNECT"):
            mcp_sync.connect("https://mcp.internal/mcp", proxy=f"http://127.0.0.1:{port}", connect_timeout=0.5,
                             timeout=5)
        assert time.monotonic() - started < 3


def test_connect_is_bounded_by_the_requests_timeout():
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises((mcp_sync.ConnectError, mcp_sync.RequestTimeout)):
            mcp_sync.connect("https://mcp.internal/mcp", proxy=f"http://127.0.0.1:{port}", connect_timeout=30,
                             timeout=0.5, probe_timeout=0.5)
        assert time.monotonic() - started < 3


def test_close_from_another_thread_stops_a_tunnel_being_opened():
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        target = HTTP("https://mcp.internal/mcp", proxy=f"http://127.0.0.1:{port}", connect_timeout=30)
        transport = target.open()
        failures: list[Exception] = []
        delivered: list[object] = []

        class Sink:
            def deliver(self, message, related_to=None):
                delivered.append(message)

            def request_failed(self, request_id, error):
                failures.append(error)

        transport.start(Sink())  # type: ignore[arg-type]
        outcome: list[BaseException] = []

        def call():
            try:
                transport.exchange({"jsonrpc": "2.0", "id": 1, "method": "ping"}, None, None)
            except BaseException as exc:  # noqa: BLE001 -- recorded for the assertion
                outcome.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        conn, _ = silent.accept()  # the tunnel is being opened now
        try:
            started = time.monotonic()
            transport.close()
            thread.join(5)
            assert not thread.is_alive() and time.monotonic() - started < 3
            assert not delivered and not failures
            assert len(outcome) == 1 and isinstance(outcome[0], mcp_sync.ConnectionClosed), outcome
        finally:
            conn.close()


# -- the environment -------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
def test_the_environments_proxy_is_used(variable, monkeypatch, proxy, httpd):
    monkeypatch.setenv(variable, proxy.url())
    with mcp_sync.connect(httpd.url, timeout=5) as client:
        assert echo(client) == "via proxy"
    assert proxy.forwarded()


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy"])
def test_the_environments_https_proxy_tunnels(variable, monkeypatch, proxy, tmp_path):
    ca = trustme.CA()
    with https_server(ca, "mcp.internal") as server:
        monkeypatch.setenv(variable, proxy.url())
        url = f"https://mcp.internal:{port_of(server.url)}/mcp"
        with mcp_sync.connect(url, verify=ca_file(ca, tmp_path), timeout=5) as client:
            assert echo(client) == "via proxy"
    assert [r.method for r in proxy.forwarded()][0] == "CONNECT"


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "127.0.0.0/8", "localhost,127.0.0.1", "*"])
def test_a_no_proxy_match_goes_direct(no_proxy, monkeypatch, proxy, httpd):
    monkeypatch.setenv("HTTP_PROXY", proxy.url())
    monkeypatch.setenv("NO_PROXY", no_proxy)
    with mcp_sync.connect(httpd.url, timeout=5) as client:
        assert echo(client, "direct") == "direct"
    assert proxy.records == []


def test_no_proxy_that_does_not_match_keeps_the_proxy(monkeypatch, proxy, httpd):
    monkeypatch.setenv("http_proxy", proxy.url())
    monkeypatch.setenv("no_proxy", "example.com,10.0.0.0/8")
    with mcp_sync.connect(httpd.url, timeout=5) as client:
        assert echo(client) == "via proxy"
    assert proxy.forwarded()


def test_trust_env_false_ignores_the_environments_ca_bundle(monkeypatch, tmp_path):
    ca = trustme.CA()
    with https_server(ca, "127.0.0.1") as server:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca_file(ca, tmp_path))
        with mcp_sync.connect(server.url, timeout=5) as client:
            assert echo(client, "trusted") == "trusted"
        with pytest.raises(mcp_sync.ConnectError, match="certificate verify failed"):
            mcp_sync.connect(server.url, trust_env=False, timeout=5)


def test_trust_env_false_ignores_the_environment(monkeypatch, proxy, httpd):
    monkeypatch.setenv("HTTP_PROXY", proxy.url())
    monkeypatch.setenv("ALL_PROXY", proxy.url())
    with mcp_sync.connect(httpd.url, trust_env=False, timeout=5) as client:
        assert echo(client, "direct") == "direct"
    assert proxy.records == []


def test_an_explicit_proxy_wins_over_the_environment(monkeypatch, proxy, httpd):
    with ForwardProxy() as other:
        monkeypatch.setenv("HTTP_PROXY", other.url())
        with mcp_sync.connect(httpd.url, proxy=proxy.url(), timeout=5) as client:
            assert echo(client, "explicit") == "explicit"
        assert proxy.forwarded() and other.records == []


def test_the_proxy_choice_matches_requests(monkeypatch):
    """The same decision as requests for the same environment."""
    import requests.utils

    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain-proxy:8080")
    monkeypatch.setenv("NO_PROXY", "internal.example,192.168.0.0/16")
    settings = NetworkSettings()
    for url in ["https://a.example/mcp", "http://a.example/mcp", "https://x.internal.example/mcp",
                "http://192.168.1.5:8000/mcp", "http://127.0.0.1:8000/mcp", "http://localhost/mcp"]:
        chosen = settings.proxy_for(url)
        theirs = requests.utils.select_proxy(url, requests.utils.get_environ_proxies(url))
        assert (str(chosen) if chosen else None) == theirs, url


# -- proxy URLs --------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["https://proxy:3128", "socks5://proxy:1080", "socks5h://u:p@proxy:1080"])
def test_unsupported_proxy_schemes_are_refused_clearly(url):
    with pytest.raises(ValueError, match="proxies are not supported; use an http:// proxy URL") as caught:
        HTTP("https://example.com/mcp", proxy=url)
    assert "u:p" not in str(caught.value)


@pytest.mark.parametrize("url", ["", "http://", "http://proxy:3128/path"])
def test_malformed_proxy_urls_are_refused(url):
    with pytest.raises(ValueError):
        HTTP("https://example.com/mcp", proxy=url)


def test_a_proxy_without_scheme_is_http_as_for_requests():
    assert parse_proxy("proxy.corp:3128") == parse_proxy("http://proxy.corp:3128")
    assert parse_proxy("http://proxy.corp").port == 80


def test_an_unusable_proxy_from_the_environment_is_a_connect_error(monkeypatch, httpd):
    monkeypatch.setenv("HTTP_PROXY", f"socks5://user:{SECRET}@127.0.0.1:1")
    with pytest.raises(mcp_sync.ConnectError, match="socks5:// proxies are not supported") as caught:
        mcp_sync.connect(httpd.url, timeout=5)
    assert SECRET not in str(caught.value)


def test_credentials_never_appear_in_reprs_errors_or_logs(caplog, httpd):
    caplog.set_level(logging.DEBUG)
    encoded = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    with ForwardProxy(credentials=("alice", SECRET)) as proxy:
        target = HTTP(httpd.url, proxy=proxy.url("alice", SECRET))
        for text in (repr(target), str(target), repr(target.network), repr(target.network.proxy),
                     str(target.network.proxy)):
            assert SECRET not in text and encoded not in text and "alice" not in text, text
        with mcp_sync.connect(target, timeout=5) as client:
            assert echo(client) == "via proxy"
            assert SECRET not in repr(client)
        with pytest.raises(mcp_sync.ConnectError) as caught:
            mcp_sync.connect(httpd.url, proxy=proxy.url("alice", "not-" + SECRET), timeout=5)
        assert SECRET not in str(caught.value)
    assert proxy.forwarded()
    assert SECRET not in caplog.text and encoded not in caplog.text
    assert "go through the proxy http://127.0.0.1" in caplog.text  # the proxy is logged, by host:port


# -- the OAuth client: the same network path ------------------------------------------------------


def test_oauth_goes_through_the_same_proxy_to_a_host_only_it_can_resolve(proxy):
    """The MCP server is on a host only the proxy resolves: its metadata and
    the MCP traffic reach it through the proxy, and so do discovery,
    registration, the authorization request and the token request at the
    authorization server (on 127.0.0.1: an issuer must be HTTPS unless on
    loopback, so `allow_private_network` lets the unresolvable, hence
    "public", MCP host name it)."""
    with AuthServer() as auth, ProtectedMCP(auth, prm_in_header=False) as mcp:  # its challenge names 127.0.0.1
        url = f"http://mcp.internal:{port_of(mcp.url)}/mcp"
        mcp.resource_override = url
        oauth = OAuth(redirect=HeadlessRedirect(timeout=5), allow_private_network=True)
        with mcp_sync.connect(url, auth=oauth, proxy=proxy.url(), timeout=10) as client:
            assert echo(client) == "via proxy"
        assert mcp.seen_tokens[-1] is not None
        targets = [r.target for r in proxy.forwarded()]
        assert any(t.startswith(f"{auth.url}/.well-known/") for t in targets), targets
        assert any(t.startswith(f"{auth.url}/authorize") for t in targets), targets
        assert f"{auth.url}/token" in targets and f"{auth.url}/register" in targets
        assert f"http://mcp.internal:{port_of(url)}/.well-known/oauth-protected-resource/mcp" in targets
        assert len(auth.requests) == len([t for t in targets if t.startswith(auth.url)])  # nothing went direct


def test_oauth_takes_the_transports_trust_env_false(monkeypatch, proxy):
    """With trust_env=False on the transport, the OAuth requests ignore the
    environment's proxy too (before: requests used it, a second path)."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url())
    with AuthServer() as auth, ProtectedMCP(auth) as mcp:
        oauth = OAuth(redirect=HeadlessRedirect(timeout=5))
        with mcp_sync.connect(mcp.url, auth=oauth, trust_env=False, timeout=10) as client:
            assert echo(client, "direct") == "direct"
        assert auth.requests_to("/token")
    assert proxy.records == []


def test_oauth_requests_through_a_proxy_needing_credentials(httpd, caplog):
    caplog.set_level(logging.DEBUG)
    with ForwardProxy(credentials=("alice", SECRET)) as proxy, AuthServer() as auth, ProtectedMCP(auth) as mcp:
        oauth = OAuth(redirect=HeadlessRedirect(timeout=5))
        with mcp_sync.connect(mcp.url, auth=oauth, proxy=proxy.url("alice", SECRET), timeout=10) as client:
            assert echo(client) == "via proxy"
        assert any(r.target.startswith(auth.url) for r in proxy.forwarded())
        assert not [r for r in proxy.records if r.refused]
    encoded = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    assert SECRET not in caplog.text and encoded not in caplog.text


def test_oauth_through_a_proxy_refusing_its_credentials_is_a_clear_error_without_them():
    with ForwardProxy(credentials=("alice", SECRET)) as proxy, AuthServer() as auth:
        network = NetworkSettings(proxy=parse_proxy(proxy.url("alice", "not-" + SECRET)))
        answer = fetch("GET", auth.url + "/.well-known/oauth-authorization-server", timeout=5, network=network)
        assert answer.status == 407  # plain http: the proxy's answer is the answer
        ca = trustme.CA()
        with https_server(ca, "127.0.0.1") as server:
            with pytest.raises(mcp_sync.AuthorizationError) as caught:
                fetch("GET", server.url, timeout=5, network=network)
        assert f"the proxy 127.0.0.1:{proxy.port}" in str(caught.value)
        assert SECRET not in str(caught.value)


class Watched(ssl.SSLContext):
    """An SSLContext that records what is loaded into it."""

    def __new__(cls, *args, **kwargs):
        context = super().__new__(cls, *args, **kwargs)
        context.changes = []
        return context

    def load_verify_locations(self, *args, **kwargs):
        self.changes.append(("load_verify_locations", args, kwargs))
        return super().load_verify_locations(*args, **kwargs)

    def load_cert_chain(self, *args, **kwargs):
        self.changes.append(("load_cert_chain", args, kwargs))
        return super().load_cert_chain(*args, **kwargs)

    def load_default_certs(self, *args, **kwargs):
        self.changes.append(("load_default_certs", args, kwargs))
        return super().load_default_certs(*args, **kwargs)


def test_the_oauth_client_uses_the_transports_ssl_context(proxy):
    """requests takes no ssl.SSLContext: the adapter hands it to urllib3.
    Directly and through the tunnel, and the caller's context is not changed."""
    ca = trustme.CA()
    context = Watched(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(context)
    context.changes.clear()
    with https_server(ca, "127.0.0.1", "mcp.internal") as server:
        direct = NetworkSettings(verify=context, trust_env=False)
        answer = fetch("GET", server.url, timeout=5, network=direct)
        assert answer.status in (200, 400, 404, 405, 406)  # TLS worked: an HTTP answer came back
        tunnelled = NetworkSettings(verify=context, proxy=parse_proxy(proxy.url()))
        url = f"https://mcp.internal:{port_of(server.url)}/mcp"
        assert fetch("GET", url, timeout=5, network=tunnelled).status == answer.status
        assert ("CONNECT", f"mcp.internal:{port_of(url)}") in [(r.method, r.target) for r in proxy.forwarded()]
        untrusting = NetworkSettings(verify=ssl.create_default_context(), trust_env=False)
        with pytest.raises(mcp_sync.AuthorizationError, match="SSLError"):
            fetch("GET", server.url, timeout=5, network=untrusting)
    assert context.changes == []  # no CA file, no certificate, no mode loaded into it
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_oauth_provider_receives_the_transports_settings(tmp_path):
    ca = trustme.CA()
    context = ssl.create_default_context()
    oauth = OAuth()
    target = HTTP("https://mcp.example.com/mcp", auth=oauth, verify=context, proxy=f"http://u:{SECRET}@proxy:3128",
                  trust_env=False)
    assert oauth._http.network is target.network
    # A verify= given to the provider itself still decides its TLS verification.
    bundle = ca_file(ca, tmp_path)
    own = OAuth(verify=bundle)
    HTTP("https://mcp.example.com/mcp", auth=own, verify=context, proxy="http://proxy:3128")
    assert own._http.network.verify == bundle and own._http.network.proxy == parse_proxy("http://proxy:3128")


def test_no_thread_or_socket_outlives_close(no_leaks, proxy, httpd, tmp_path):
    ca = trustme.CA()
    with https_server(ca, "mcp.internal") as server:
        url = f"https://mcp.internal:{port_of(server.url)}/mcp"
        with mcp_sync.connect(url, proxy=proxy.url(), verify=ca_file(ca, tmp_path), timeout=5) as client:
            assert echo(client) == "via proxy"
    with mcp_sync.connect(httpd.url, proxy=proxy.url(), protocol="2025-11-25", timeout=5) as client:
        assert echo(client) == "via proxy"
    assert {r.method for r in proxy.forwarded()} >= {"CONNECT", "POST", "DELETE"}


class _TricklingProxy:
    """Accepts CONNECT and answers its head one byte at a time, never ending it."""

    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        try:
            conn.recv(4096)
            for byte in b"HTTP/1.1 200 Connection established\r\nX-Pad: " + b"a" * 60000:
                if self.stop.wait(self.gap):
                    return
                conn.sendall(bytes([byte]))
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self.thread.join(2)


def test_connect_tunnel_is_bounded_by_connect_timeout():
    """`connect_timeout` bounds the proxy's tunnel (docs), but the CONNECT
    head is read with a per-recv timeout: a proxy that trickles a byte every
    0.1 s keeps connect() waiting far past connect_timeout=0.5."""
    proxy = _TricklingProxy(gap=0.1)
    outcome: list[object] = []

    def run() -> None:
        try:
            mcp_sync.connect(mcp_sync.HTTP("https://127.0.0.1:9/mcp", proxy=f"http://127.0.0.1:{proxy.port}",
                                           trust_env=False, connect_timeout=0.5),
                             timeout=1.0, probe_timeout=1.0, reconnect=False)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome.append(exc)

    caller = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    caller.start()
    caller.join(4.0)
    took = time.monotonic() - started
    proxy.close()  # unblocks a caller still reading the head
    caller.join(5.0)
    assert took < 4.0, f"connect() was still dialing the proxy after {took:.1f} s (connect_timeout=0.5)"
    assert outcome and isinstance(outcome[0], mcp_sync.McpError)
