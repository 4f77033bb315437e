"""The client's resilience features end to end: overload shedding observed
at the server, a keepalive that finds a dead peer and reconnects, and the
metrics of `stats()`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import pytest

import mcp_sync
from mcp_sync.status import Status
from mcp_sync.testing import Server
from tests.helpers import demo_command, wait_until


def counting_server():
    """A server whose `work` tool records how many calls run at once."""
    server = Server()
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()
    gate = threading.Event()

    @server.tool
    def work(args, ctx):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        gate.wait(0.05)
        with lock:
            state["now"] -= 1
        return str(args.get("n"))

    return server, state


@pytest.mark.parametrize("where", ["in-process", "http"])
def test_64_threads_against_max_in_flight_8_never_put_more_than_8_on_the_wire(where):
    from mcp_sync.testing import HTTPServer

    server, state = counting_server()
    httpd = HTTPServer(server).start() if where == "http" else None
    with mcp_sync.connect(httpd.url if httpd else server, max_in_flight=8, max_queued=64) as client:
        answers: dict[int, str] = {}

        def call(n: int) -> None:
            answers[n] = client.call_tool("work", {"n": n}, timeout=30).text

        threads = [threading.Thread(target=call, args=(n,)) for n in range(64)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert answers == {n: str(n) for n in range(64)}
        assert state["peak"] <= 8, state
        stats = client.stats()
        assert stats.requests["tools/call"].outcomes["ok"] == 64
        assert stats.shed == 0
    if httpd is not None:
        httpd.close()


def test_calls_beyond_max_queued_are_shed_at_once_and_counted():
    server, state = counting_server()
    with mcp_sync.connect(server, max_in_flight=2, max_queued=2) as client:
        outcomes: list[str] = []
        lock = threading.Lock()

        def call(n: int) -> None:
            try:
                client.call_tool("work", {"n": n}, timeout=30)
                result = "ok"
            except mcp_sync.Overloaded:
                result = "shed"
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=call, args=(n,)) for n in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(outcomes) == 32
        assert state["peak"] <= 2
        assert outcomes.count("shed") > 0
        assert client.stats().shed == outcomes.count("shed")
        assert client.stats().requests["tools/call"].count == outcomes.count("ok")


def test_the_keepalive_finds_a_stopped_server_and_reconnects():
    with mcp_sync.connect(demo_command(), protocol="2025-11-25", keepalive=0.2, keepalive_failures=2,
                          reconnect=mcp_sync.Reconnect(initial_delay=0.01, max_delay=0.05)) as client:
        changes: list[tuple[str, str]] = []
        client.on_status(lambda change: changes.append((change.old.value, change.new.value)))
        old = client._conn.transport.pid
        os.kill(old, signal.SIGSTOP)  # alive but deaf: only a probe can tell
        try:
            assert wait_until(lambda: client._conn.transport.pid not in (None, old)
                              and client.status is Status.READY, 15), (client.status, changes)
        finally:
            try:
                os.kill(old, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert ("ready", "reconnecting") in changes
        assert client.call_tool("echo", {"text": "back"}).text == "back"
        assert client.stats().reconnects >= 1


def test_no_keepalive_thread_outlives_close():
    before = {t.name for t in threading.enumerate()}
    client = mcp_sync.connect(demo_command(), keepalive=0.1)
    assert any(t.name == "mcp-sync-keepalive" for t in threading.enumerate())
    client.close()
    assert wait_until(lambda: not any(t.name == "mcp-sync-keepalive" for t in threading.enumerate()), 5)
    assert "mcp-sync-keepalive" not in before


def test_stats_count_outcomes_and_latency_per_method():
    with mcp_sync.connect(mcp_sync.testing.demo_server()) as client:
        for i in range(5):
            client.call_tool("echo", {"text": str(i)})
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("sleep", {"seconds": 2}, timeout=0.1)
        stats = client.stats()
        calls = stats.requests["tools/call"]
        assert calls.outcomes["ok"] == 5 and calls.outcomes["timeout"] == 1
        assert stats.timeouts == 1
        assert calls.p50 is not None and calls.max is not None and calls.max >= 0.1
        assert stats.as_dict()["requests_total"] == stats.requests_total
        assert stats.cancellations == 1  # the timed-out call was cancelled on the server
        assert stats.bytes_sent > 0 and stats.bytes_received > 0


@pytest.mark.parametrize("where", ["stdio", "http"])
def test_stats_count_the_bytes_of_messages_and_keep_them_across_a_reconnect(where):
    from mcp_sync.testing import HTTPServer

    httpd = HTTPServer(mcp_sync.testing.demo_server()).start() if where == "http" else None
    target = httpd.url if httpd is not None else demo_command()
    try:
        with mcp_sync.connect(target, protocol="2025-11-25",
                              reconnect=mcp_sync.Reconnect(initial_delay=0.01, max_delay=0.05)) as client:
            before = client.stats()
            client.call_tool("echo", {"text": "x" * 10_000})
            after = client.stats()
            assert after.bytes_sent - before.bytes_sent >= 10_000
            assert after.bytes_received - before.bytes_received >= 10_000
            if httpd is None:
                conn = client._conn
                os.kill(conn.transport.pid, signal.SIGKILL)
                assert wait_until(lambda: conn.failure is not None, 10)
                client.call_tool("echo", {"text": "y"})
                assert client.stats().bytes_sent > after.bytes_sent  # the old connection's bytes are kept
    finally:
        if httpd is not None:
            httpd.close()


def test_an_expired_http_session_is_set_up_again_and_reported():
    from mcp_sync.testing import HTTPServer

    with HTTPServer(mcp_sync.testing.demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25") as client:
            changes: list[tuple[str, str]] = []
            client.on_status(lambda change: changes.append((change.old.value, change.new.value)))
            first = client._conn.transport.session_id
            httpd.expire_sessions()
            assert client.call_tool("echo", {"text": "again"}).text == "again"
            assert client._conn.transport.session_id != first
            assert client.stats().reconnects == 1
            assert wait_until(lambda: changes[-2:] == [("ready", "reconnecting"), ("reconnecting", "ready")], 5), \
                changes


def _slow_initialize_server():
    """An HTTP server whose `initialize` (a POST without a session) waits for
    `release` once `hold` is set: a session renewal that takes its time."""
    from mcp_sync.testing import HTTPServer

    hold, release, held = threading.Event(), threading.Event(), threading.Event()

    def gate(request):
        if hold.is_set() and request.method == "POST" and request.headers.get("Mcp-Session-Id") is None:
            held.set()
            release.wait(30)
        return None

    return HTTPServer(mcp_sync.testing.demo_server(), gate=gate, get_stream=False), hold, release, held


@contextlib.contextmanager
def _renewal_held():
    """A client whose server ended its session and holds the `initialize`
    that renews it until `let_go()` (or the block's end): (client, held,
    let_go), `held` set once a renewal is being held."""
    httpd, hold, release, held = _slow_initialize_server()

    def let_go():
        hold.clear()
        release.set()

    with httpd, mcp_sync.connect(httpd.url, protocol="2025-11-25", timeout=30) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        httpd.expire_sessions()
        hold.set()
        try:
            yield client, held, let_go
        finally:
            let_go()


def test_a_session_renewal_is_bounded_by_the_calls_timeout_and_finished_by_the_healer():
    # A call that met the expired session renewed it with the client's
    # 30 s timeout, whatever its own (timeout=1 took as long as the
    # server's initialize), and a renewal that failed left the status
    # "reconnecting" with nothing reconnecting.
    with _renewal_held() as (client, held, let_go):
        with pytest.raises(mcp_sync.RequestTimeout) as caught:
            client.call_tool("echo", {"text": "x"}, timeout=1)
        assert caught.value.timeout == 1  # the call's own, not what was left of it
        assert held.is_set()
        let_go()
        # The healer finishes the renewal by itself: ready, with no call.
        assert wait_until(lambda: client.status is Status.READY, 10), client.status
        assert client.call_tool("echo", {"text": "after"}).text == "after"


def test_a_call_waiting_for_another_threads_session_renewal_keeps_its_timeout_and_hears_an_interrupt():
    import _thread

    with _renewal_held() as (client, held, let_go):
        renewing = threading.Thread(target=lambda: client.call_tool("echo", {"text": "a"}, timeout=20))
        renewing.start()
        try:
            assert held.wait(10)  # the other thread is renewing now
            with pytest.raises(mcp_sync.RequestTimeout):
                client.call_tool("echo", {"text": "b"}, timeout=0.5)
            timer = threading.Timer(0.3, _thread.interrupt_main)
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                client.call_tool("echo", {"text": "c"}, timeout=20)
            timer.join()
        finally:
            let_go()
            renewing.join(30)
        assert client.call_tool("echo", {"text": "after"}).text == "after"


def test_a_session_renewal_cut_short_by_an_interrupt_is_finished_by_the_healer():
    # Ctrl-C while the call set the session up again left the status
    # "reconnecting", with nothing reconnecting, until another call came.
    import _thread

    with _renewal_held() as (client, held, let_go):
        timer = threading.Thread(target=lambda: held.wait(10) and _thread.interrupt_main())
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                client.call_tool("echo", {"text": "x"}, timeout=20)
        finally:
            timer.join(10)
            let_go()
        assert wait_until(lambda: client.status is Status.READY, 10), client.status


def test_calls_waiting_for_a_reconnect_are_bounded_by_max_queued(tmp_path):
    """While one call reconnects (the backoff makes it slow), new calls wait
    in the admission queue: beyond `max_queued` they fail at once."""
    slow = mcp_sync.Reconnect(initial_delay=1.5, max_delay=1.5, jitter=False, eager=False)
    with mcp_sync.connect(demo_command(), protocol="2025-11-25", reconnect=slow, max_in_flight=8,
                          max_queued=2, timeout=10) as client:
        conn = client._conn
        os.kill(conn.transport.pid, signal.SIGSTOP)
        os.kill(conn.transport.pid, signal.SIGKILL)
        assert wait_until(lambda: conn.failure is not None, 10)
        # A first reconnect that is not proven alive makes the next one back off.
        client._supervisor.attempts = 1
        outcomes: list[str] = []
        lock = threading.Lock()

        def call() -> None:
            try:
                client.call_tool("echo", {"text": "x"})
                result = "ok"
            except mcp_sync.Overloaded:
                result = "shed"
            with lock:
                outcomes.append(result)

        first = threading.Thread(target=call)
        first.start()
        assert wait_until(lambda: client.status is Status.RECONNECTING and client.stats().in_flight == 1, 5)
        others = [threading.Thread(target=call) for _ in range(5)]
        for thread in others:
            thread.start()
        assert wait_until(lambda: len(outcomes) >= 3, 5), outcomes  # three shed at once
        assert outcomes.count("shed") == 3 and client.stats().queued == 2
        for thread in [first, *others]:
            thread.join(15)
        assert outcomes.count("ok") == 3 and outcomes.count("shed") == 3
        assert client.stats().shed == 3


def test_a_dropped_get_stream_is_opened_again_and_notifications_arrive():
    from mcp_sync.testing import HTTPServer

    with HTTPServer(mcp_sync.testing.demo_server(), retry_ms=50) as httpd:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25") as client:
            got: list[str] = []
            client.on_notification(lambda note: got.append(note.method))

            def delivered() -> bool:
                before = len(got)
                return httpd.notify("notifications/tools/list_changed") == 1 and \
                    wait_until(lambda: len(got) > before, 2)

            assert wait_until(delivered, 10)
            assert httpd.end_get_streams() == 1
            assert wait_until(delivered, 10), "no notification after the GET stream was dropped"
            assert client.status is Status.READY

