"""Authorization scenarios with a "remote" MCP server, run in a private network namespace.

`test_network_policy.py` runs this module as a program under `unshare -n`,
after adding 198.51.100.7 (a "public" address) and 10.55.0.1 (a private
one) to the namespace's own loopback interface: servers bound there are
not on loopback for the client, yet nothing can leave the machine (the
namespace has no other interface). Each scenario prints one JSON object:
what the client raised and what each server received.

    python -m tests.auth.netns_scenarios SCENARIO
"""

from __future__ import annotations

import http.server
import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mcp_sync
from mcp_sync.auth import HeadlessRedirect, OAuth
from mcp_sync.testing.auth import AuthServer, ProtectedMCP

PUBLIC = "198.51.100.7"
PRIVATE = "10.55.0.1"


class Victim:
    """A loopback (or private) HTTP server that only counts what reaches it."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        hits: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = b'{"deleted": "everything"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.hits = hits
        self._server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class Acceptor:
    """A bare TCP listener counting connections (an "https" server that
    never completes a handshake: reaching it at all is what counts)."""

    def __init__(self, host: str) -> None:
        self._sock = socket.create_server((host, 0))
        self._sock.settimeout(0.05)
        self.url = f"https://{host}:{self._sock.getsockname()[1]}"
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.accepted += 1
            # Read the client's hello before closing: closing with it unread
            # would reset the connection (a ConnectionError in the client)
            # instead of ending it (the failed TLS handshake the tests expect).
            conn.settimeout(2)
            try:
                conn.recv(65536)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


@contextmanager
def servers(*objs: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for obj in reversed(objs):
            obj.close()


def attempt(url: str, oauth: OAuth) -> dict[str, Any]:
    """Connect and call a tool; the outcome as a dict."""
    try:
        with mcp_sync.connect(url, auth=oauth, timeout=10) as client:
            text = client.call_tool("echo", {"text": "hi"}).text
        return {"error": None, "text": text}
    except Exception as exc:  # the scenario reports any outcome; the test judges it
        return {"error": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)}


def remote_server_names_loopback_authorization_server(**options: Any) -> dict[str, Any]:
    auth = AuthServer().start()
    mcp = ProtectedMCP(auth, host=PUBLIC).start()
    with servers(auth, mcp):
        outcome = attempt(mcp.url, OAuth(redirect=HeadlessRedirect(), **options))
        outcome["as_requests"] = [f"{r.method} {r.path}" for r in auth.requests]
        outcome["issuer"] = auth.issuer
    return outcome


def remote_server_names_loopback_authorization_server_opted_in() -> dict[str, Any]:
    return remote_server_names_loopback_authorization_server(allow_private_network=True)


def remote_challenge_names_loopback_metadata_url() -> dict[str, Any]:
    """The 401 challenge itself points at a loopback URL."""
    victim = Victim()
    target = f"{victim.url}/admin/delete?all=1"

    class Remote(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer resource_metadata="{target}"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    remote = http.server.ThreadingHTTPServer((PUBLIC, 0), Remote)
    thread = threading.Thread(target=remote.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        outcome = attempt(f"http://{PUBLIC}:{remote.server_address[1]}/mcp", OAuth(redirect=HeadlessRedirect()))
    finally:
        remote.shutdown()
        remote.server_close()
        thread.join()
        victim.close()
    outcome["victim_hits"] = victim.hits
    return outcome


def _names_https_authorization_server(mcp_host: str, as_host: str) -> dict[str, Any]:
    auth = AuthServer().start()
    mcp = ProtectedMCP(auth, host=mcp_host).start()
    acceptor = Acceptor(as_host)
    with servers(auth, mcp, acceptor):
        mcp.prm_override = {"resource": mcp.url, "authorization_servers": [acceptor.url]}
        outcome = attempt(mcp.url, OAuth(redirect=HeadlessRedirect(), timeout=3))
        outcome["accepted"] = acceptor.accepted
    return outcome


def public_server_names_private_authorization_server() -> dict[str, Any]:
    return _names_https_authorization_server(PUBLIC, PRIVATE)


def private_server_names_private_authorization_server() -> dict[str, Any]:
    return _names_https_authorization_server(PRIVATE, PRIVATE)


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {fn.__name__: fn for fn in (
    remote_server_names_loopback_authorization_server,
    remote_server_names_loopback_authorization_server_opted_in,
    remote_challenge_names_loopback_metadata_url,
    public_server_names_private_authorization_server,
    private_server_names_private_authorization_server,
)}


if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
