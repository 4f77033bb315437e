"""The time a token provider spends getting authorization (a person approving
in a browser) does not count against the call's timeout."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.testing import GateAnswer, Gated


class SlowApproval:
    """Answers the first 401 only after `pause` seconds, like a person would."""

    def __init__(self, pause: float) -> None:
        self.pause = pause
        self.current: str | None = None
        self.calls = 0

    def token(self) -> str | None:
        return self.current

    def handle_challenge(self, status: int, headers: Mapping[str, str]) -> bool:
        self.calls += 1
        threading.Event().wait(self.pause)  # the person reading the consent page
        self.current = "approved"
        return True


def needs_token(request: Gated) -> GateAnswer | None:
    if request.headers.get("Authorization") == "Bearer approved":
        return None
    return GateAnswer(401, {"WWW-Authenticate": 'Bearer realm="test"'})


def test_authorization_longer_than_the_timeout_does_not_time_the_call_out() -> None:
    provider = SlowApproval(pause=1.0)
    with HTTPServer(demo_server(), gate=needs_token) as httpd:
        # Both the connect probe and the call get far less than the pause.
        with mcp_sync.connect(httpd.url, auth=provider, timeout=0.5, probe_timeout=0.5,
                              protocol="2026-07-28") as client:
            assert client.call_tool("echo", {"text": "after approval"}).text == "after approval"
    assert provider.calls == 1
