"""The test servers' per-request logs are bounded: they keep the newest entries.

`HTTPServer.requests`, `AuthServer.requests`/`client_auth` and
`ProtectedMCP.seen_tokens` used to grow with every request (50k requests
held 1.1 GB); each now keeps the newest `max_records` (1000 by default).
Every test sends real requests over loopback, more than the bound.
"""

from __future__ import annotations

import base64
import http.client
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest

from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.testing.auth import AuthServer, ProtectedMCP


@contextmanager
def keep_alive(url: str) -> Iterator[http.client.HTTPConnection]:
    """One keep-alive connection to the origin of `url`."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        yield conn
    finally:
        conn.close()


def send(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> int:
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    response.read()
    return response.status


def test_http_server_keeps_the_newest_1000_requests_by_default() -> None:
    with HTTPServer(demo_server()) as server, keep_alive(server.url) as conn:
        for n in range(1020):
            assert send(conn, "GET", f"/probe/{n}") == 404  # recorded, then refused: a cheap request
        log = server.requests
    assert len(log) == 1000
    assert [r.path for r in log] == [f"/probe/{n}" for n in range(20, 1020)]


def test_http_server_max_records_bounds_the_log_and_keeps_the_newest() -> None:
    with HTTPServer(demo_server(), max_records=5) as server, keep_alive(server.url) as conn:
        for n in range(12):
            send(conn, "POST", "/elsewhere", f'{{"n": {n}}}'.encode(), {"Content-Type": "application/json"})
        log = server.requests
    assert [r.json for r in log] == [{"n": n} for n in range(7, 12)]
    assert log[0].json == {"n": 7} and log[-1].json == {"n": 11}


def test_auth_server_logs_keep_the_newest_max_records() -> None:
    basic = "Basic " + base64.b64encode(b"app:s3cret").decode("ascii")
    form = {"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic}
    with AuthServer(clients={"app": "s3cret"}, max_records=3) as auth, keep_alive(auth.url) as conn:
        for n in range(5):
            status = send(conn, "POST", "/token", f"grant_type=client_credentials&scope=s{n}".encode(), form)
            assert status == 200
        for n in range(4):
            assert send(conn, "GET", f"/nowhere/{n}") == 404
        assert [r.path for r in auth.requests] == ["/nowhere/1", "/nowhere/2", "/nowhere/3"]
        assert auth.client_auth == [("app", "client_secret_basic")] * 3
        assert len(auth.issued) == 5  # issued tokens are state (introspection), not a log


def test_protected_mcp_seen_tokens_keep_the_newest_max_records() -> None:
    with AuthServer() as auth, ProtectedMCP(auth, max_records=3) as mcp, keep_alive(mcp.url) as conn:
        for n in range(6):
            status = send(conn, "POST", urlsplit(mcp.url).path, b"{}",
                          {"Content-Type": "application/json", "Authorization": f"Bearer t{n}"})
            assert status == 401  # an unknown token is challenged
        assert mcp.seen_tokens == ["Bearer t3", "Bearer t4", "Bearer t5"]
        assert [r.headers.get("Authorization") for r in mcp.http.requests] == ["Bearer t3", "Bearer t4", "Bearer t5"]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_max_records_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError):
        HTTPServer(demo_server(), max_records=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AuthServer(max_records=bad)  # type: ignore[arg-type]
