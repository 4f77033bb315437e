"""Reconnect with backoff (issue 14): a long-lived client heals itself.

A stdio server that exits is started again, an initialize-era connection
performs the handshake again, an HTTP server that goes away and comes back
is found again; status transitions are reported in order; only calls that
are safe to repeat are retried; a call that may have run on the server
fails with an error that says so; giving up is reported as `failed`.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import sys
import threading
import time

import pytest

import mcp_sync
from mcp_sync.status import Status
from mcp_sync.options import Reconnect
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import GENEROUS, SLACK, NoThread, demo_command, hanging_server, next_event, runs, wait_until

ERAS = ["2026-07-28", "2025-11-25"]
FAST = Reconnect(initial_delay=0.01, max_delay=0.05)


def kill_server(client) -> int:
    conn = client._conn
    pid = conn.transport.pid
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: conn.failure is not None, 10), "the client never noticed the server died"
    return pid


def breakable_server(tmp_path):
    """A demo server launcher that fails to start once `flag` exists."""
    flag = tmp_path / "broken"
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import os, sys\n"
        f"if os.path.exists({str(flag)!r}):\n"
        "    sys.exit('the server is broken now')\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_sync.testing.server'])\n")
    return flag, launcher


class Recorder:
    def __init__(self, client) -> None:
        self.changes: list[tuple[str, str]] = []
        self.changed = threading.Condition()
        client.on_status(self.on_status)

    def on_status(self, change) -> None:
        with self.changed:
            self.changes.append((change.old.value, change.new.value))
            self.changed.notify_all()

    def wait_for(self, pair, timeout=10.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: pair in self.changes, timeout)


@pytest.mark.parametrize("protocol", ERAS)
def test_a_stdio_server_that_dies_is_started_again_in_both_eras(protocol):
    with mcp_sync.connect(demo_command(), protocol=protocol, reconnect=FAST) as client:
        recorder = Recorder(client)
        assert client.status is Status.READY
        old = kill_server(client)
        assert client.call_tool("echo", {"text": "back"}).text == "back"
        assert client._conn.transport.pid != old
        # The eager reconnect may have opened the connection the call used
        # and still be proving it: ready follows at once, on its thread.
        assert recorder.wait_for(("reconnecting", "ready"))
        assert client.status is Status.READY
        assert recorder.changes[-2:] == [("ready", "reconnecting"), ("reconnecting", "ready")]
        assert client.stats().reconnects == 1


def test_without_reconnect_an_initialize_era_client_stays_dead():
    with mcp_sync.connect(demo_command(), protocol="2025-11-25", reconnect=False) as client:
        kill_server(client)
        for _ in range(2):
            with pytest.raises(mcp_sync.ConnectionClosed):
                client.call_tool("echo", {"text": "x"}, timeout=5)


def test_without_reconnect_a_stateless_client_says_failed_until_a_call_starts_the_server_again():
    # Nothing reconnects with reconnect=False: the status said
    # "reconnecting" for as long as no call came. It says "failed" (not
    # final: the next call starts a 2026-07-28 server again, as the spec asks).
    with mcp_sync.connect(demo_command(), protocol="2026-07-28", reconnect=False) as client:
        recorder = Recorder(client)
        kill_server(client)
        assert recorder.wait_for(("ready", "failed"))
        assert client.status is Status.FAILED
        assert client.call_tool("echo", {"text": "x"}, timeout=10).text == "x"
        assert client.status is Status.READY
        assert ("ready", "reconnecting") not in recorder.changes


@pytest.mark.parametrize("protocol", ERAS)
def test_a_call_in_flight_that_may_have_run_is_not_retried_and_says_so(protocol):
    with mcp_sync.connect(demo_command(), protocol=protocol, reconnect=FAST) as client:
        started = threading.Event()
        outcome: dict = {}

        def slow_call() -> None:
            try:
                # The first progress proves the server has the request.
                client.call_tool("countdown", {"steps": 100, "delay": 0.1}, timeout=20,
                                 progress=lambda p: started.set())
            except mcp_sync.McpError as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=slow_call)
        thread.start()
        assert started.wait(10)
        kill_server(client)
        thread.join(10)
        error = outcome["error"]
        assert isinstance(error, mcp_sync.ConnectionClosed)
        assert error.may_have_executed is True
        assert "may have" in str(error)
        assert client.call_tool("echo", {"text": "after"}).text == "after"


@pytest.mark.parametrize("protocol", ERAS)
def test_a_safe_call_in_flight_is_retried_once_after_the_reconnect(protocol):
    """`tools/list` is safe to repeat: the server is stopped (the request is
    written, no answer comes), then killed; the listing is sent again on the
    new connection and succeeds."""
    with mcp_sync.connect(demo_command(), protocol=protocol, reconnect=FAST) as client:
        results: dict = {}

        def listing() -> None:
            try:
                results["tools"] = client.list_tools(timeout=20)
            except mcp_sync.McpError as exc:
                results["error"] = exc

        old = client._conn.transport.pid
        os.kill(old, signal.SIGSTOP)
        thread = threading.Thread(target=listing)
        try:
            thread.start()
            assert wait_until(lambda: client._conn.in_flight >= 1, 5)
        finally:
            os.kill(old, signal.SIGKILL)
        thread.join(15)
        assert "error" not in results, results
        assert {tool.name for tool in results["tools"]} >= {"echo"}
        assert client._conn.transport.pid != old


def test_kill_the_server_20_times_under_16_threads():
    """Every call gets its own answer or an McpError; nothing hangs; no
    thread or descriptor growth."""
    with mcp_sync.connect(demo_command(), protocol="2025-11-25", reconnect=FAST) as client:
        client.call_tool("echo", {"text": "warm"})
        threads_before = threading.active_count()
        fds_before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
        stop = threading.Event()
        wrong: list = []
        failures: list = []
        answered = [0]
        lock = threading.Lock()

        def caller(n: int) -> None:
            i = 0
            while not stop.is_set():
                text = f"{n}-{i}"
                i += 1
                try:
                    got = client.call_tool("echo", {"text": text}, timeout=10).text
                except mcp_sync.McpError as exc:
                    with lock:
                        failures.append(type(exc).__name__)
                    continue
                except BaseException as exc:  # noqa: BLE001 (must never happen)
                    wrong.append(repr(exc))
                    return
                with lock:
                    answered[0] += 1
                if got != text:
                    wrong.append((text, got))

        callers = [threading.Thread(target=caller, args=(n,)) for n in range(16)]
        for thread in callers:
            thread.start()
        killed = client._conn
        try:
            for _ in range(20):
                count = answered[0]
                assert wait_until(lambda: answered[0] > count + 16, 20), "calls stopped being answered"
                killed = client._conn
                try:
                    os.kill(killed.transport.pid, signal.SIGKILL)
                except (ProcessLookupError, AttributeError, TypeError):
                    pass
        finally:
            stop.set()
            for thread in callers:
                thread.join(30)
        assert not wrong, wrong[:5]
        assert not any(thread.is_alive() for thread in callers)
        # The last kill is noticed, and healed with no call (a call made
        # before it was noticed would go to the dying server).
        assert wait_until(lambda: killed.failure is not None, 10)
        assert wait_until(lambda: client.status is Status.READY and client._conn is not killed, 10)
        assert client.call_tool("echo", {"text": "end"}).text == "end"
        assert client.stats().reconnects >= 20
        assert set(failures) <= {"ConnectionClosed", "ServerExited", "RequestTimeout"}, set(failures)
        assert wait_until(lambda: threading.active_count() <= threads_before + 2, 10), \
            (threading.active_count(), threads_before)
        if fds_before is not None:
            assert wait_until(lambda: len(os.listdir("/proc/self/fd")) <= fds_before + 4, 10)


@pytest.mark.parametrize("protocol", ERAS)
def test_an_http_server_that_goes_away_and_comes_back_is_found_again(protocol):
    httpd = HTTPServer(demo_server()).start()
    port = int(httpd.url.rsplit(":", 1)[1].split("/")[0])
    url = httpd.url
    with mcp_sync.connect(url, protocol=protocol, reconnect=FAST, timeout=5) as client:
        recorder = Recorder(client)
        assert client.call_tool("echo", {"text": "one"}).text == "one"
        httpd.close()
        with pytest.raises(mcp_sync.McpError):
            client.call_tool("echo", {"text": "gone"}, timeout=2)
        httpd = HTTPServer(demo_server(), port=port).start()
        try:
            assert client.call_tool("echo", {"text": "two"}, timeout=10).text == "two"
            assert client.status is Status.READY
            if protocol == "2026-07-28":
                # Stateless HTTP holds nothing to re-establish: each request
                # stands alone, so the next one simply reaches the server.
                assert client.stats().reconnects == 0
            else:
                # The session died with the server: a new handshake.
                assert recorder.wait_for(("reconnecting", "ready"))
                assert client.stats().reconnects == 1
        finally:
            httpd.close()


def test_giving_up_is_reported_as_failed_and_calls_fail_fast(tmp_path):
    """The server cannot be started again (its command fails once a flag
    file exists): after `max_attempts` the status is `failed` and calls fail
    at once, saying that reconnecting gave up."""
    flag, launcher = breakable_server(tmp_path)
    policy = Reconnect(max_attempts=2, initial_delay=0.01, max_delay=0.02)
    with mcp_sync.connect([sys.executable, str(launcher)], protocol="2025-11-25", timeout=5,
                          reconnect=policy) as client:
        recorder = Recorder(client)
        flag.write_text("x")
        kill_server(client)
        errors = []
        for _ in range(4):
            try:
                client.call_tool("echo", {"text": "x"}, timeout=5)
            except mcp_sync.McpError as exc:
                errors.append(exc)
        assert len(errors) == 4
        assert client.status is Status.FAILED
        assert recorder.wait_for(("reconnecting", "failed"))
        started = time.monotonic()
        with pytest.raises(mcp_sync.ConnectionClosed, match="gave up"):
            client.call_tool("echo", {"text": "x"}, timeout=5)
        assert time.monotonic() - started < SLACK  # at once, not at the call's 5 s timeout
    assert client.status is Status.CLOSED


@pytest.mark.parametrize("protocol", ERAS)
def test_an_open_subscription_is_opened_again_after_the_server_died(protocol):
    """No call is made: the client reconnects for the subscription by itself
    and the subscriber sees `SubscriptionResumed`, not a broken iterator."""
    with mcp_sync.connect(demo_command(), protocol=protocol, reconnect=FAST) as client:
        sub = client.listen(tools_list_changed=True, resource_subscriptions=["demo://readme"])
        old = kill_server(client)
        event = next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken))
        assert isinstance(event, mcp_sync.SubscriptionResumed), event
        assert event.gap >= 0
        assert not sub.ended and client.status is Status.READY
        assert client._conn.transport.pid != old
        sub.close()


@pytest.mark.parametrize("protocol", ERAS)
def test_a_resumed_subscription_receives_what_the_new_connection_brings(protocol):
    server = mcp_sync.testing.demo_server()
    with mcp_sync.connect(server, protocol=protocol, reconnect=FAST) as client:
        sub = client.listen(tools_list_changed=True)
        # What a transport does when it dies under the client.
        client._conn.transport_failed(mcp_sync.ConnectionClosed("the in-process session was lost"))
        assert isinstance(next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken)),
                          mcp_sync.SubscriptionResumed)
        server.remove_tool("echo")
        note = next_event(sub, (mcp_sync.Notification, mcp_sync.SubscriptionBroken))
        assert isinstance(note, mcp_sync.Notification) and note.method == "notifications/tools/list_changed"
        sub.close()


def test_a_subscription_breaks_only_when_reconnecting_gives_up(tmp_path):
    flag, launcher = breakable_server(tmp_path)
    policy = Reconnect(max_attempts=2, initial_delay=0.01, max_delay=0.02)
    with mcp_sync.connect([sys.executable, str(launcher)], protocol="2026-07-28", reconnect=policy) as client:
        sub = client.listen(tools_list_changed=True)
        flag.write_text("x")
        kill_server(client)
        event = next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken))
        assert isinstance(event, mcp_sync.SubscriptionBroken)
        assert "gave up" in str(event.error)
        assert client.status is Status.FAILED


@pytest.mark.parametrize("protocol", ERAS)
def test_200_reconnects_leave_no_thread_or_descriptor_behind(protocol):
    server = mcp_sync.testing.demo_server()
    with mcp_sync.connect(server, protocol=protocol, reconnect=FAST) as client:
        sub = client.listen(tools_list_changed=True)
        client.call_tool("echo", {"text": "warm"})
        threads_before = threading.active_count()
        fds_before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
        for i in range(200):
            client._conn.transport_failed(mcp_sync.ConnectionClosed(f"lost {i}"))
            assert client.call_tool("echo", {"text": str(i)}).text == str(i)
        assert client.stats().reconnects == 200
        assert not sub.ended
        assert wait_until(lambda: threading.active_count() <= threads_before + 1, 10), \
            (threading.active_count(), threads_before, [t.name for t in threading.enumerate()])
        if fds_before is not None:
            assert len(os.listdir("/proc/self/fd")) <= fds_before + 2
        sub.close()


def test_a_call_that_reached_the_server_is_never_resent_when_another_call_found_the_pipe_gone(tmp_path):
    """B's `hold` reached the server, which then closed its stdin; A's write
    fails with EPIPE (nothing of A was sent, so A is sent again on a new
    connection). B must fail with `may_have_executed=True` and never run
    twice, though the connection's failure came from A's unsent write."""
    record = tmp_path / "record"
    server = [sys.executable, str(Path(__file__).parent / "servers" / "stops_reading.py"), str(record)]
    with mcp_sync.connect(server, protocol="2026-07-28", reconnect=FAST, timeout=10) as client:
        outcome: dict = {}

        def hold() -> None:
            try:
                outcome["b"] = client.call_tool("hold", {"seconds": 1}).text
            except mcp_sync.McpError as exc:
                outcome["b"] = exc

        b = threading.Thread(target=hold)
        b.start()
        assert wait_until(lambda: record.exists() and "hold ran" in record.read_text(), 10)
        assert client.call_tool("echo", {"text": "a"}).text == "a"  # A: resent on a new server
        b.join(15)
        error = outcome["b"]
        assert isinstance(error, mcp_sync.ConnectionClosed), error
        assert error.may_have_executed is True
        assert record.read_text().count("hold ran") == 1  # never sent twice


def test_an_http_subscription_survives_the_server_going_away_and_coming_back():
    """Initialize era: the session went with the old server; the next call
    sets up a new one (404) and the subscription is opened in it again. (A
    2026-07-28 server that shuts down ends its subscriptions itself:
    `SubscriptionEnded`.)"""
    protocol = "2025-11-25"
    httpd = HTTPServer(demo_server()).start()
    port = httpd.port
    try:
        with mcp_sync.connect(httpd.url, protocol=protocol, reconnect=FAST, timeout=5) as client:
            sub = client.listen(tools_list_changed=True)
            httpd.close()
            httpd = HTTPServer(demo_server(), port=port).start()
            # The session is gone with the old server: a call finds out (404).
            assert client.call_tool("echo", {"text": "x"}).text == "x"
            event = next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken), timeout=15)
            assert isinstance(event, mcp_sync.SubscriptionResumed), event
            # Once the new session's GET stream is open, a change reaches the subscriber.
            assert wait_until(lambda: httpd.notify("notifications/tools/list_changed") == 1, 15)
            note = next_event(sub, (mcp_sync.Notification, mcp_sync.SubscriptionBroken), timeout=10)
            assert isinstance(note, mcp_sync.Notification) and note.method == "notifications/tools/list_changed"
            sub.close()
    finally:
        httpd.close()


def test_a_restart_that_hangs_does_not_overrun_the_calls_deadline(tmp_path):
    """The new server never answers `initialize` and ignores the end of its
    input: the call fails at its own deadline, not after the shutdown's
    grace (4 s here), which the abandoned server is given elsewhere."""
    grace = 4.0
    flag, launcher = hanging_server(tmp_path)
    target = mcp_sync.Stdio(sys.executable, [str(launcher)], shutdown_timeout=grace)
    client = mcp_sync.connect(target, protocol="2025-11-25", reconnect=FAST)
    try:
        flag.touch()
        kill_server(client)
        started = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("echo", {"text": "x"}, timeout=1.0)
        took = time.monotonic() - started
        assert took < 1.0 + SLACK, f"the call took {took:.2f} s with timeout=1.0"
        assert (tmp_path / "starts").read_text().count("x") == 2
        # The wedged server is still being shut down (its 4 s of grace): the
        # next call does not start a third one beside it, and keeps its deadline.
        started = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout, match="still shutting down"):
            client.call_tool("echo", {"text": "x"}, timeout=0.5)
        took = time.monotonic() - started
        assert took < 0.5 + SLACK, f"the call took {took:.2f} s with timeout=0.5"
        assert (tmp_path / "starts").read_text().count("x") == 2
    finally:
        started = time.monotonic()
        client.close()
        closing = time.monotonic() - started
    # close() still waits for the abandoned server, bounded: what is left of
    # its grace, then SIGTERM; not the 60 s the wedged server would sleep.
    assert closing < grace + GENEROUS
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("mcp-sync")], 5)


def test_a_close_that_gets_no_thread_happens_on_the_callers(monkeypatch):
    """Out of threads: the connection is closed at once, and nothing is left
    for `close()` to join."""
    closed = []

    class Conn:
        close_budget = 1.0

        def close(self, reason=""):
            closed.append(reason)

    with mcp_sync.connect(demo_command()) as client:
        monkeypatch.setattr(mcp_sync.closers.threading, "Thread", NoThread)
        client._supervisor.close_later(Conn(), "reconnecting")
        monkeypatch.undo()
        assert closed == ["reconnecting"]
        assert client._supervisor.closers.running == {}


def test_a_failed_restart_without_a_policy_says_failed_not_reconnecting(tmp_path):
    # reconnect=False: a stateless stdio server is still started again by
    # the next call. When that start fails, nothing reconnects until the
    # call after it, so the status says `failed`; it said `reconnecting`
    # for good, with no thread reconnecting.
    launcher = tmp_path / "server.sh"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} -m mcp_sync.testing.server\n")
    launcher.chmod(0o755)
    with mcp_sync.connect([str(launcher)], protocol="2026-07-28", reconnect=False, timeout=10) as client:
        launcher.rename(tmp_path / "moved.sh")  # the next start cannot find it
        kill_server(client)
        assert client.status is Status.FAILED
        with pytest.raises(mcp_sync.ConnectError):
            client.call_tool("echo", {"text": "x"})
        assert client._supervisor.healer.thread is None  # nothing reconnects...
        assert client.status is Status.FAILED  # ... and the status says so
        (tmp_path / "moved.sh").rename(launcher)
        assert client.call_tool("echo", {"text": "y"}).text == "y"  # the next call starts it again
        assert client.status is Status.READY


def test_a_backoff_longer_than_a_thread_can_wait_keeps_the_reconnect_thread(tmp_path):
    # A policy's waits may exceed what one `Event.wait` accepts
    # (`threading.TIMEOUT_MAX`, some 292 years): the reconnect thread died of
    # OverflowError at its first backoff, leaving `reconnecting` with
    # nothing reconnecting, and a call waiting on a thread raised it.
    flag, launcher = breakable_server(tmp_path)
    policy = Reconnect(initial_delay=1e10, max_delay=1e10, jitter=False)
    with mcp_sync.connect([sys.executable, str(launcher)], reconnect=policy, timeout=10) as client:
        supervisor = client._supervisor
        flag.touch()
        kill_server(client)
        # The first attempt goes at once and fails; the next is due in 1e10 s.
        assert wait_until(lambda: supervisor.retry_at > 0, 10)
        healer = supervisor.healer
        assert wait_until(lambda: healer.thread is None or runs(healer.thread, threading.Event.wait.__code__), 10)
        assert healer.thread is not None and healer.thread.is_alive(), "the reconnect thread died"
        assert client.status is Status.RECONNECTING
        # A call waiting for that attempt on a thread of its own waits, as
        # the policy says, until close() ends the wait.
        failed: list[BaseException] = []

        def call() -> None:
            try:
                client.call_tool("echo", {"text": "x"}, timeout=None)
            except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                failed.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        assert wait_until(lambda: failed or runs(caller, threading.Event.wait.__code__), 10)
        assert not failed, f"the waiting call raised {failed!r}"
    caller.join(10)
    assert not caller.is_alive()
    assert len(failed) == 1 and isinstance(failed[0], mcp_sync.ConnectionClosed)


def test_a_reconnected_server_that_dies_at_once_is_not_reported_ready(tmp_path):
    # With eager=False, a server started again that exits right after its
    # handshake (here: at the `logging/setLevel` the reconnect sends) was
    # reported `ready` for good: its failure was noticed while the status
    # still said `reconnecting`, and `ready` was announced after it.
    flag = tmp_path / "dies"
    dies = tmp_path / "dies_after_handshake.py"
    dies.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    if msg.get('method') == 'initialize':\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], 'result': {\n"
        "            'protocolVersion': msg['params']['protocolVersion'],\n"
        "            'capabilities': {'tools': {}, 'logging': {}}, 'serverInfo': {'name': 'x', 'version': '1'}}}),\n"
        "            flush=True)\n"
        "    elif 'id' in msg:\n"
        "        sys.exit(0)\n")
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import os, sys\n"
        f"if os.path.exists({str(flag)!r}):\n"
        f"    os.execv(sys.executable, [sys.executable, {str(dies)!r}])\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_sync.testing.server'])\n")
    lazy = Reconnect(eager=False, initial_delay=0.01, max_delay=0.05)
    with mcp_sync.connect([sys.executable, str(launcher)], protocol="2025-11-25", log_level="info",
                          reconnect=lazy, timeout=10) as client:
        flag.touch()
        kill_server(client)
        with pytest.raises(mcp_sync.ServerExited):
            client.call_tool("echo", {"text": "x"})  # reconnects; the new server exits at once
        conn = client._conn
        assert conn.failure is not None
        assert client.status is Status.RECONNECTING  # not `ready`: nothing answers
        flag.unlink()
        assert client.call_tool("echo", {"text": "y"}).text == "y"
        assert client.status is Status.READY
