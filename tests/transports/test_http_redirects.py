"""Redirects (issue 15): a 307 or 308 on the same origin is followed for
POST, GET and DELETE with method and body kept (Starlette answers `/mcp`
with a redirect to `/mcp/`), and the new path is used from then on; a
redirect to another origin, or of another kind, is not followed and the
error names its `Location`; a loop is a clear error.

With `follow_redirects=True`, a 307 or 308 to another origin is followed
too, for that request only and without what is meant for the first origin
(credentials, cookies, the caller's headers, tool arguments in headers);
never from https to http.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import pytest
import trustme

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.testing import GateAnswer

ERAS = ["2026-07-28", "2025-11-25"]


def redirecting(status: int, frm: str, to: str):
    seen: list[tuple[str, str]] = []

    def gate(request):
        seen.append((request.method, request.path))
        if request.path == frm:
            return GateAnswer(status, {"Location": to})
        return None

    return gate, seen


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("status", [307, 308])
def test_a_same_origin_redirect_is_followed_and_remembered(protocol, status):
    gate, seen = redirecting(status, "/mcp", "/mcp/")
    with HTTPServer(demo_server(), path="/mcp/", gate=gate) as httpd:
        url = httpd.url[:-1]  # .../mcp, which the server redirects
        with mcp_sync.connect(url, protocol=protocol) as client:
            for i in range(3):
                assert client.call_tool("echo", {"text": str(i)}).text == str(i)
        redirected = [entry for entry in seen if entry[1] == "/mcp"]
        assert len(redirected) == 1, seen  # only the first request was redirected
        assert ("POST", "/mcp/") in seen
        if protocol != "2026-07-28":
            assert ("DELETE", "/mcp/") in seen  # the session's end went to the new path too


def test_a_redirect_to_another_origin_is_not_followed_and_named():
    gate, _ = redirecting(307, "/mcp", "http://127.0.0.2:9/mcp")
    with HTTPServer(demo_server(), gate=gate) as httpd:
        with pytest.raises(mcp_sync.McpError, match=r"127\.0\.0\.2:9/mcp.*not followed"):
            mcp_sync.connect(httpd.url, protocol="2025-11-25", timeout=5)


def test_a_301_is_not_followed_and_named():
    gate, _ = redirecting(301, "/mcp", "/elsewhere")
    with HTTPServer(demo_server(), gate=gate) as httpd:
        with pytest.raises(mcp_sync.HTTPStatusError, match="/elsewhere.*not followed"):
            mcp_sync.connect(httpd.url, protocol="2025-11-25", timeout=5)


def test_a_redirect_loop_is_a_clear_error():
    gate, seen = redirecting(307, "/mcp", "/mcp")
    with HTTPServer(demo_server(), gate=gate) as httpd:
        with pytest.raises(mcp_sync.McpError, match="redirected in a loop"):
            mcp_sync.connect(httpd.url, protocol="2025-11-25", timeout=5)
    assert len(seen) <= 6


# -- other origins (follow_redirects=True) --------------------------------------------------------------------
#
# Two loopback servers on different ports are two origins: A (the URL the
# client is given) answers every request with a redirect to the same path on
# B, which serves it.

ORIGIN_BOUND = ("Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key")


def pointing_to(other: HTTPServer, status: int = 307, scheme: str = "http", host: str = "127.0.0.1"):
    port = urlsplit(other.url).port
    seen: list = []

    def gate(request):
        seen.append(request)
        return GateAnswer(status, {"Location": f"{scheme}://{host}:{port}{request.path}"})

    return gate, seen


def recording():
    seen: list = []

    def gate(request):
        seen.append(request)
        return None

    return gate, seen


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("status", [307, 308])
def test_another_origin_is_followed_with_follow_redirects_without_this_origins_headers(protocol, status):
    b_gate, at_b = recording()
    with HTTPServer(demo_server(), gate=b_gate) as b:
        gate, at_a = pointing_to(b, status)
        with HTTPServer(demo_server(), gate=gate) as a:
            with mcp_sync.connect(a.url, protocol=protocol, follow_redirects=True, auth="secret-token",
                                  headers={"X-Api-Key": "key-for-a", "Cookie": "sid=for-a"}, timeout=5) as client:
                for i in range(3):
                    assert client.call_tool("echo", {"text": str(i)}).text == str(i)
    # A got everything meant for it; B got none of it, on its own port.
    assert at_a and all(r.headers.get("Authorization") == "Bearer secret-token" for r in at_a)
    assert all(r.headers.get("X-Api-Key") == "key-for-a" for r in at_a)
    assert at_b and all(r.headers.get(name) is None for r in at_b for name in ORIGIN_BOUND)
    # Each request went to A first (credentials stay with their origin), its
    # method and body kept on the way to B.
    assert [r.method for r in at_a] == [r.method for r in at_b]
    calls = [r for r in b.requests if r.json and r.json.get("method") == "tools/call"]
    assert [c.json["params"]["arguments"]["text"] for c in calls] == ["0", "1", "2"]
    if protocol != "2026-07-28":
        # B issued the session (initialize went there), so its id goes back
        # to B, which is why the calls worked; the DELETE reached B too.
        assert at_b[0].headers.get("Mcp-Session-Id") is None
        assert len({r.headers.get("Mcp-Session-Id") for r in at_b[1:]} - {None}) == 1
        assert all(r.headers.get("Mcp-Session-Id") for r in at_b[1:])
        assert "DELETE" in [r.method for r in at_b]


def test_a_session_this_origin_issued_never_goes_to_another():
    b_gate, at_b = recording()
    with HTTPServer(demo_server(), gate=b_gate) as b:
        redirect, _ = pointing_to(b)
        redirecting: list[bool] = []

        def gate(request):
            return redirect(request) if redirecting else None

        with HTTPServer(demo_server(), gate=gate) as a:
            with mcp_sync.connect(a.url, protocol="2025-11-25", follow_redirects=True, timeout=5) as client:
                assert client.call_tool("echo", {"text": "at a"}).text == "at a"  # A's session
                redirecting.append(True)
                with pytest.raises(mcp_sync.McpError):
                    client.call_tool("echo", {"text": "at b"})  # B knows no session
                redirecting.clear()
    assert at_b and all(r.headers.get("Mcp-Session-Id") is None for r in at_b)


def test_tool_arguments_in_headers_never_go_to_another_origin():
    from tests.transports.test_http import region_server

    b_gate, at_b = recording()
    with HTTPServer(region_server(), gate=b_gate) as b:
        gate, at_a = pointing_to(b)
        with HTTPServer(region_server(), gate=gate) as a:
            with mcp_sync.connect(a.url, follow_redirects=True, timeout=5) as client:
                client.list_tools()
                # B, a 2026-07-28 server, wants the header it was not sent.
                with pytest.raises(mcp_sync.McpError, match="Mcp-Param-Region"):
                    client.call_tool("run_query", {"region": "eu", "query": "q"})
    assert any(r.headers.get("Mcp-Param-Region") == "eu" for r in at_a)
    assert not any(name.lower().startswith("mcp-param-") for r in at_b for name in r.headers.keys())


def test_by_default_another_origin_is_not_followed_and_the_error_names_it():
    b_gate, at_b = recording()
    with HTTPServer(demo_server(), gate=b_gate) as b:
        gate, _ = pointing_to(b)
        with HTTPServer(demo_server(), gate=gate) as a:
            with pytest.raises(mcp_sync.HTTPStatusError, match=rf"{b.url}.*not followed.*follow_redirects=True"):
                mcp_sync.connect(a.url, protocol="2025-11-25", timeout=5)
    assert at_b == []


def test_a_loop_between_origins_is_a_clear_error():
    # A sends everything to B, B sends everything back to A.
    bounced: list = []

    def back(request):
        bounced.append(request)
        return GateAnswer(307, {"Location": a_url[0]})

    a_url: list[str] = []
    with HTTPServer(demo_server(), gate=back) as b:
        gate, at_a = pointing_to(b)
        with HTTPServer(demo_server(), gate=gate) as a:
            a_url.append(a.url)
            with pytest.raises(mcp_sync.HTTPStatusError, match="redirected in a loop"):
                mcp_sync.connect(a.url, protocol="2025-11-25", follow_redirects=True, timeout=5)
    assert len(at_a) == 1 and len(bounced) == 1


def test_at_most_five_redirects_across_origins():
    hops: list = []

    def onward(request):
        # Every hop to a new URL (the query counts up), alternating origins.
        hops.append(request)
        n = len(hops)
        return GateAnswer(307, {"Location": f"{servers[n % 2].url}?hop={n}"})

    servers: list[HTTPServer] = []
    with HTTPServer(demo_server(), gate=onward) as a, HTTPServer(demo_server(), gate=onward) as b:
        servers.extend([a, b])
        with pytest.raises(mcp_sync.HTTPStatusError, match="more than 5 times"):
            mcp_sync.connect(a.url, protocol="2025-11-25", follow_redirects=True, timeout=5)
    assert len(hops) == 6  # the first request and five redirects followed


def test_a_challenge_from_another_origin_names_it_and_is_not_answered_with_credentials():
    asked: list[int] = []

    def token() -> str:
        asked.append(1)
        return "secret-token"

    def refuse(request):
        return GateAnswer(401, {"WWW-Authenticate": 'Bearer realm="b"'})

    with HTTPServer(demo_server(), gate=refuse) as b:
        gate, _ = pointing_to(b)
        with HTTPServer(demo_server(), gate=gate) as a:
            with pytest.raises(mcp_sync.AuthenticationError, match=rf"{b.url} answered HTTP 401"):
                mcp_sync.connect(a.url, protocol="2025-11-25", auth=token, follow_redirects=True, timeout=5)
    assert len(asked) == 1  # the token for A, never a refresh for B's challenge


# -- TLS ------------------------------------------------------------------------------------------------------


def tls_server(ca, gate=None):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return HTTPServer(demo_server(), ssl_context=context, gate=gate)


def test_https_to_http_is_refused_even_with_follow_redirects(tmp_path):
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    b_gate, at_b = recording()
    with HTTPServer(demo_server(), gate=b_gate) as b:
        gate, _ = pointing_to(b)
        with tls_server(ca, gate) as a:
            assert a.url.startswith("https://")
            with pytest.raises(mcp_sync.HTTPStatusError, match="from https to http: not followed"):
                mcp_sync.connect(a.url, protocol="2025-11-25", verify=str(bundle), follow_redirects=True, timeout=5)
    assert at_b == []  # nothing went out unencrypted


def test_another_https_origin_is_dialed_with_tls_to_its_own_host(tmp_path):
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    b_gate, at_b = recording()
    with tls_server(ca, b_gate) as b:
        # Another host name too: the certificate is checked against it.
        gate, at_a = pointing_to(b, scheme="https", host="localhost")
        with tls_server(ca, gate) as a:
            with mcp_sync.connect(a.url, follow_redirects=True, verify=str(bundle), auth="secret-token",
                                  timeout=5) as client:
                assert client.call_tool("echo", {"text": "sealed"}).text == "sealed"
    assert at_b and all(r.headers.get("Authorization") is None for r in at_b)
    assert {r.headers.get("Host") for r in at_b} == {f"localhost:{urlsplit(b.url).port}"}
