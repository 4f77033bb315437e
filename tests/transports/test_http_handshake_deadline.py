"""A renewal's handshake and the deadline of the call that renews it: the
`notifications/initialized` POST that completes a new session is bounded
by the transport's side bound (`request_timeout`, else 30 s), not by the
call's deadline, so a call waits past its timeout for a server slow to
take that notification.

Known defect, outside the transport (the notification goes through
`Connection.notify` -> `Transport.send`, which carries no deadline): kept
as a strict xfail so that whoever fixes it (negotiation/connection: pass
the renewal's deadline down, or finish the handshake on the healer's
thread) sees it flip.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import SLACK

LEGACY = "2025-11-25"


@pytest.mark.xfail(strict=True, reason="notifications/initialized of a renewal is not bounded by the call's deadline "
                                       "(Transport.send has none): fix in negotiation/connection")
def test_a_call_that_renews_the_session_returns_by_its_deadline(no_leaks):
    seen: list[str] = []
    held, release, lock = threading.Event(), threading.Event(), threading.Lock()

    def gate(request: Any) -> None:
        session = request.headers.get("Mcp-Session-Id")
        if request.method == "POST" and session is not None:
            with lock:
                first_of_second = session not in seen and len(seen) == 1
                if session not in seen:
                    seen.append(session)
            if first_of_second:  # the renewed session's first POST: notifications/initialized
                held.set()
                release.wait(30)
        return None

    with HTTPServer(demo_server(), gate=gate) as httpd:
        client = mcp_sync.connect(httpd.url, protocol=LEGACY)
        outcome: list[Any] = []

        def call() -> None:
            try:
                outcome.append(client.call_tool("echo", {"text": "x"}, timeout=1.0).text)
            except mcp_sync.McpError as exc:
                outcome.append(exc)

        caller = threading.Thread(target=call)
        try:
            httpd.expire_sessions()
            started = time.monotonic()
            caller.start()
            caller.join(1.0 + SLACK + 2.0)
            late = caller.is_alive()
            elapsed = time.monotonic() - started
        finally:
            release.set()
            caller.join(30)
            client.close()
    assert held.is_set()
    assert not late, f"the 1 s call was still waiting after {elapsed:.1f} s"
