"""Healing with no call waiting: a client whose connection failed sets it up
again by itself, its status says `reconnecting` only while it does, and
returns to `ready` (issue 27). `Reconnect(eager=False)` keeps the lazy way.

Real server processes and sockets throughout: a stdio server is killed, an
HTTP server is stopped and started again on the same port.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

import pytest

import mcp_sync
from mcp_sync.status import Status
from mcp_sync.options import Reconnect
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.testing import GateAnswer, Gated
from tests.helpers import demo_command, next_event, wait_until

ERAS = ["2026-07-28", "2025-11-25"]
FAST = Reconnect(initial_delay=0.01, max_delay=0.05)


class Changes:
    """The status changes a client reports, as (old, new) values."""

    def __init__(self, client: mcp_sync.Client) -> None:
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        client.on_status(self.add)

    def add(self, change) -> None:
        with self.lock:
            self.seen.append((change.old.value, change.new.value))

    def ended_ready(self) -> bool:
        with self.lock:
            return self.seen[-1:] == [("reconnecting", "ready")]


@pytest.mark.parametrize("protocol", ERAS)
def test_an_idle_stdio_client_returns_to_ready_after_its_server_died(protocol):
    with mcp_sync.connect(demo_command(), protocol=protocol, reconnect=FAST) as client:
        changes = Changes(client)
        old = client._conn.transport.pid
        os.kill(old, signal.SIGKILL)
        assert wait_until(changes.ended_ready, 15), changes.seen
        assert changes.seen == [("ready", "reconnecting"), ("reconnecting", "ready")]
        assert client.status is Status.READY
        assert client._conn.transport.pid not in (None, old)
        assert client.stats().reconnects == 1
        assert client.call_tool("echo", {"text": "back"}).text == "back"


def test_lazy_healing_waits_for_the_next_call():
    lazy = Reconnect(initial_delay=0.01, max_delay=0.05, eager=False)
    with mcp_sync.connect(demo_command(), protocol="2025-11-25", reconnect=lazy) as client:
        conn = client._conn
        os.kill(conn.transport.pid, signal.SIGKILL)
        assert wait_until(lambda: client.status is Status.RECONNECTING, 10)
        # Nothing started a reconnect: no thread for it, the dead connection kept.
        assert client._supervisor.healer.thread is None and client._conn is conn
        assert client.call_tool("echo", {"text": "now"}).text == "now"
        assert client._conn is not conn and client.status is Status.READY


def test_an_idle_client_whose_keepalive_found_the_server_stopped_returns_to_ready():
    # The keepalive's own probe (its interval, 0.1 s) finds the stopped
    # server; `timeout` bounds the new server's start-up, which takes a
    # Python process's start and imports: seconds on a loaded machine.
    with mcp_sync.connect(demo_command(), protocol="2025-11-25", reconnect=FAST,
                          keepalive=mcp_sync.Keepalive(0.1, failures=1), timeout=10) as client:
        changes = Changes(client)
        stopped = client._conn.transport.pid
        os.kill(stopped, signal.SIGSTOP)  # alive, but answers nothing
        try:
            assert wait_until(changes.ended_ready, 20), changes.seen
        finally:
            with contextlib.suppress(ProcessLookupError):  # replaced: killed by the reconnect
                os.kill(stopped, signal.SIGCONT)
        assert ("ready", "reconnecting") in changes.seen
        assert client._conn.transport.pid != stopped
        assert client.call_tool("echo", {"text": "up"}).text == "up"


def test_a_stateless_http_client_is_ready_only_once_the_server_answers_again():
    # Opening a stateless HTTP connection sends nothing, so a reconnect
    # proves nothing: the status stays `reconnecting` until the server
    # answers, however many attempts that takes.
    first = HTTPServer(demo_server()).start()
    port = first.port
    with mcp_sync.connect(first.url, reconnect=FAST, keepalive=mcp_sync.Keepalive(0.1, failures=1),
                          timeout=1) as client:
        assert client.protocol_version == "2026-07-28"
        changes = Changes(client)
        first.close()
        assert wait_until(lambda: client._supervisor.attempts >= 3, 20), "no reconnect attempts while it was down"
        assert client.status is Status.RECONNECTING
        with HTTPServer(demo_server(), port=port) as second:
            assert wait_until(changes.ended_ready, 20), changes.seen
            assert changes.seen == [("ready", "reconnecting"), ("reconnecting", "ready")]
            assert client.call_tool("echo", {"text": "up"}).text == "up"
            assert second.requests


@pytest.mark.parametrize("answer", ["404", "400"])
def test_an_initialize_era_http_server_restarted_on_its_port_gets_a_new_session(answer):
    # The GET stream ends with the server; the new one refuses the old
    # session (the spec's 404, or the TypeScript SDK example's 400): a new
    # session, the subscription opened again, the status back to `ready`.
    first = HTTPServer(demo_server(), retry_ms=50).start()
    port = first.port
    with mcp_sync.connect(first.url, protocol="2025-11-25", reconnect=FAST) as client:
        changes = Changes(client)
        sub = client.listen(tools_list_changed=True)
        old_session = client._conn.transport.session_id
        first.close()
        gate = None if answer == "404" else _ts_sdk_400(old_session)
        with HTTPServer(demo_server(), port=port, gate=gate):
            event = next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken), 20)
            assert isinstance(event, mcp_sync.SubscriptionResumed), event
            assert wait_until(changes.ended_ready, 10), changes.seen
            assert client._conn.transport.session_id not in (None, old_session)
            assert client.call_tool("echo", {"text": "again"}).text == "again"
        sub.close()


def _ts_sdk_400(unknown: str):
    """A gate answering requests in session `unknown` the way the
    TypeScript SDK's example servers answer a session they do not know:
    400 and a JSON-RPC error, not the spec's 404."""
    body = b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}'

    def gate(gated: Gated) -> GateAnswer | None:
        if gated.headers.get("mcp-session-id") == unknown:
            return GateAnswer(400, {"Content-Type": "application/json"}, body)
        return None

    return gate


def test_a_get_refused_from_the_start_is_no_lost_session():
    # A server with no GET route (or a balancer that sends the GET to
    # another node) refuses the very first GET with 404: that is no GET
    # stream, as after a 405, not a lost session to set up again and again.
    def no_get_route(gated: Gated) -> GateAnswer | None:
        return GateAnswer(404, {"Content-Type": "text/plain"}, b"Cannot GET /mcp") if gated.method == "GET" else None

    with HTTPServer(demo_server(), gate=no_get_route) as httpd:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25", reconnect=FAST) as client:
            session = client._conn.transport.session_id
            assert wait_until(lambda: client._conn.transport._session.get_thread is None, 10)
            assert client.call_tool("echo", {"text": "x"}).text == "x"
            assert client._conn.transport.session_id == session
            assert client.stats().reconnects == 0 and client.status is Status.READY
            assert sum(r.method == "GET" for r in httpd.requests) == 1


def test_without_reconnecting_a_lost_session_is_left_to_the_next_call():
    # reconnect=False: the event stream's news of a lost session sets a new
    # one up; when that fails the connection is left as it is (the next
    # call meets the loss and tries again), and no thread goes round.
    first = HTTPServer(demo_server(), retry_ms=50).start()
    port = first.port
    with mcp_sync.connect(first.url, protocol="2025-11-25", reconnect=False) as client:
        conn = client._conn
        first.close()
        assert wait_until(lambda: client.status is Status.FAILED, 15)
        assert wait_until(lambda: client._supervisor.healer.thread is None, 10)
        with HTTPServer(demo_server(), port=port):
            assert client.call_tool("echo", {"text": "back"}).text == "back"
            assert client.status is Status.READY
        assert client._conn is conn  # the same connection, a new session


def test_an_initialize_era_http_server_down_for_a_while_is_found_again():
    # The event stream cannot reach the server three times in a row: the
    # connection counts as failed and is reconnected, with the backoff,
    # until the server is back; the subscription then resumes.
    first = HTTPServer(demo_server(), retry_ms=20).start()
    port = first.port
    with mcp_sync.connect(first.url, protocol="2025-11-25", reconnect=FAST) as client:
        changes = Changes(client)
        sub = client.listen(tools_list_changed=True)
        first.close()
        assert wait_until(lambda: client._supervisor.attempts >= 2, 20), "no reconnect attempts while it was down"
        assert client.status is Status.RECONNECTING
        with HTTPServer(demo_server(), port=port):
            event = next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken), 20)
            assert isinstance(event, mcp_sync.SubscriptionResumed), event
            assert wait_until(changes.ended_ready, 10), changes.seen
            assert client.call_tool("echo", {"text": "again"}).text == "again"
        sub.close()


def test_a_stateless_listen_whose_reopening_fails_tries_again_with_the_backoff(caplog):
    # The server process died while the connection stood (stateless HTTP):
    # the stream opened again broke at once, and the healer waited out the
    # whole probe_timeout (60 s here) before it tried again, however soon
    # the server was back.
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def start() -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-m", "mcp_sync.testing.server", "--http", str(port)],
                                   stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None and "listening on" in process.stderr.readline()
        return process

    server = start()
    try:
        with mcp_sync.connect(f"http://127.0.0.1:{port}/mcp", reconnect=FAST, probe_timeout=60) as client:
            sub = client.listen(tools_list_changed=True)
            caplog.set_level(logging.DEBUG, logger="mcp_sync")
            server.kill()
            server.wait()
            assert wait_until(lambda: "broke at once (the server is not back): again in" in caplog.text, 20), \
                "no reopening failed while it was down"
            server = start()
            event = next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken), 30)
            assert isinstance(event, mcp_sync.SubscriptionResumed), event
            sub.close()
    finally:
        server.kill()
        server.wait()
        if server.stderr is not None:
            server.stderr.close()
