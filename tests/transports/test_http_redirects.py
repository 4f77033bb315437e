"""Redirects (issue 15): a 307 or 308 on the same origin is followed for
POST, GET and DELETE with method and body kept (Starlette answers `/mcp`
with a redirect to `/mcp/`), and the new path is used from then on; a
redirect to another origin, or of another kind, is not followed and the
error names its `Location`; a loop is a clear error.
"""

from __future__ import annotations

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.testing.http import GateAnswer

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
