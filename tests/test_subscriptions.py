"""subscriptions/listen (2026-07-28) in-process, over stdio and over HTTP."""

import sys

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, Server, demo_server
from tests.helpers import scripted, wait_until
from tests.testing.changing_server import CONFIG, build

CHANGING = [sys.executable, "-m", "tests.testing.changing_server"]


def test_listen_in_process_notifications_end_and_cancel():
    server = demo_server()
    with mcp_sync.connect(server) as client:
        with client.listen(tools_list_changed=True, resource_subscriptions=["demo://readme"],
                           extra={"com.example/unknown": True}) as sub:
            assert sub.accepted == {"toolsListChanged": True, "resourceSubscriptions": ["demo://readme"]}
            server.notify_changed("tools")
            server.notify_changed("prompts")          # not asked for: never sent
            server.notify_updated("demo://readme")
            first = sub.next(timeout=10)
            second = sub.next(timeout=10)
            assert (first.method, first.params) == ("notifications/tools/list_changed", {})
            assert (second.method, second.params) == ("notifications/resources/updated", {"uri": "demo://readme"})
            assert server.listening() == 1
        assert sub.ended
        assert wait_until(lambda: server.listening() == 0)  # the server saw the cancellation


def test_a_graceful_end_is_an_event_then_iteration_stops():
    server = demo_server()
    with mcp_sync.connect(server) as client:
        sub = client.listen(tools_list_changed=True)
        server.notify_changed("tools")
        assert server.end_subscriptions() == 1
        events = list(sub)
    assert isinstance(events[0], mcp_sync.Notification)
    assert isinstance(events[-1], mcp_sync.SubscriptionEnded) and events[-1].result.get("resultType") == "complete"


def test_closing_the_client_breaks_the_subscription():
    client = mcp_sync.connect(demo_server())
    sub = client.listen(resources_list_changed=True)
    client.close()
    event = sub.next(timeout=5)
    assert isinstance(event, mcp_sync.SubscriptionBroken) and isinstance(event.error, mcp_sync.ConnectionClosed)


def test_a_server_without_subscriptions_says_so():
    with mcp_sync.connect(Server(change_notifications=False)) as client:
        with pytest.raises(mcp_sync.MethodNotFound):
            client.listen(tools_list_changed=True)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_the_same_listen_in_the_initialize_era(version):
    server = demo_server()
    with mcp_sync.connect(server, protocol=version) as client:
        with client.listen(tools_list_changed=True, resource_subscriptions=["demo://readme"],
                           extra={"com.example/unknown": True}) as sub:
            assert sub.accepted == {"toolsListChanged": True, "resourceSubscriptions": ["demo://readme"]}
            server.notify_changed("prompts")          # not asked for: filtered out
            server.notify_updated("demo://logo.png")  # not subscribed: the server does not send it
            server.notify_changed("tools")
            server.notify_updated("demo://readme")
            got = [sub.next(timeout=10), sub.next(timeout=10)]
            assert [(e.method, e.params) for e in got] == [
                ("notifications/tools/list_changed", {}),
                ("notifications/resources/updated", {"uri": "demo://readme"})]
        # closing unsubscribed: the server no longer sends updates for the URI
        with client.notifications() as stream:
            server.notify_updated("demo://readme")
            server.notify_changed("resources")
            assert stream.next(timeout=10).method == "notifications/resources/list_changed"


def test_initialize_era_listen_over_stdio_and_close_breaks_it():
    client = mcp_sync.connect(CHANGING, protocol="2025-11-25")
    sub = client.listen(resource_subscriptions=[CONFIG])
    assert client.call_tool("touch", {"text": "v1"}).text == "touched"
    assert sub.next(timeout=10).params == {"uri": CONFIG}
    client.close()
    assert isinstance(sub.next(timeout=5), mcp_sync.SubscriptionBroken)


def test_listen_over_stdio_demultiplexes_by_subscription_id():
    with mcp_sync.connect(CHANGING) as client:
        with client.listen(tools_list_changed=True) as tools, \
                client.listen(resource_subscriptions=[CONFIG]) as config:
            assert client.call_tool("add_tool", {"name": "fresh"}).text == "added"
            assert client.call_tool("touch", {"text": "v1"}).text == "touched"
            assert tools.next(timeout=10).method == "notifications/tools/list_changed"
            updated = config.next(timeout=10)
            assert (updated.method, updated.params) == ("notifications/resources/updated", {"uri": CONFIG})
            with pytest.raises(TimeoutError):
                tools.next(timeout=0.2)   # the resource update went to the other subscription only
        assert client.call_tool("touch", {"text": "v2"}).text == "touched"  # still fine after both closed


def test_listen_over_http_and_cache_invalidation():
    server = build()
    with HTTPServer(server) as httpd:
        with mcp_sync.connect(httpd.url, cache=True) as client:
            before = client.read_resource(CONFIG).text
            with client.listen(resource_subscriptions=[CONFIG]) as sub:
                client.read_resource(CONFIG)  # fresh: from the cache
                client.call_tool("touch", {"text": "changed"})
                assert sub.next(timeout=10).params == {"uri": CONFIG}
                assert client.read_resource(CONFIG).text == "changed"  # the update dropped the cached read
            assert before == "v0"
        reads = [r for r in httpd.requests if r.json and r.json.get("method") == "resources/read"]
        assert len(reads) == 2


def test_a_full_buffer_drops_by_its_policy():
    server = demo_server()
    with mcp_sync.connect(server) as client:
        with client.listen(resources_list_changed=True, max_buffer=2, overflow="drop_newest") as sub:
            for _ in range(5):
                server.notify_changed("resources")
            assert server.end_subscriptions() == 1
            events = list(sub)
    assert len([e for e in events if isinstance(e, mcp_sync.Notification)]) == 2 and sub.dropped == 3


def test_no_acknowledgement_in_time_is_a_timeout_and_cancels():
    with mcp_sync.connect(scripted("--mode", "listen-silent"), protocol="2026-07-28") as client:
        with pytest.raises(mcp_sync.RequestTimeout):
            client.listen(tools_list_changed=True, timeout=0.3)


def test_a_stream_that_ends_before_the_acknowledgement():
    with mcp_sync.connect(scripted("--mode", "listen-end"), protocol="2026-07-28") as client:
        with pytest.raises(mcp_sync.ConnectionClosed, match="before the acknowledgement"):
            client.listen(tools_list_changed=True)


def test_a_transport_failure_before_the_acknowledgement():
    with mcp_sync.connect(scripted("--mode", "listen-exit"), protocol="2026-07-28", restart=False) as client:
        with pytest.raises(mcp_sync.ServerExited) as info:
            client.listen(tools_list_changed=True)
        assert info.value.returncode == 4


def test_bad_listen_arguments():
    with mcp_sync.connect(demo_server()) as client:
        with pytest.raises(TypeError):
            client.listen(resource_subscriptions=[1])
        with pytest.raises(ValueError):
            client.listen(tools_list_changed=True, max_buffer=0)


def test_the_routing_thread_lets_a_reader_run_once_the_buffer_is_half_full(monkeypatch):
    # As for a call's progress: from half of `max_buffer` on, the thread
    # that routes an update lets go of the GIL after queuing it (a
    # `time.sleep(0)`), so a reader who keeps up on average takes the
    # updates before the bound drops any; it never waits for the reader,
    # and one who does not read loses the oldest.
    import time

    import mcp_sync.subscriptions as subscriptions

    sleep, yields = time.sleep, []
    server = demo_server()
    with mcp_sync.connect(server) as client:
        sub = client.listen(resource_subscriptions=["demo://readme"], max_buffer=8)
        monkeypatch.setattr(subscriptions.time, "sleep", lambda s: yields.append(s) if s == 0 else sleep(s))
        for _ in range(20):
            server.notify_updated("demo://readme")
        assert server.end_subscriptions() == 1  # after every update queued for it
        monkeypatch.undo()
        events = list(sub)
    assert yields == [0] * (20 - 3)  # the 4th update fills half of 8
    assert sub.dropped == 12
    assert [type(event) for event in events] == [mcp_sync.Notification] * 8 + [mcp_sync.SubscriptionEnded]


class _RecordingHost:
    """A `ListenHost` for the initialize era whose server side is a set of
    subscribed URIs. While `reopening`, the `resources/subscribe` of
    `held_uri` is answered only once `resume` is set; with `fails_late`,
    the server applies it and the client gets a timeout instead."""

    def __init__(self, held_uri: str = "a://1", fails_late: bool = False) -> None:
        import threading
        import types

        self.subscribed: set[str] = set()
        self.in_reopen, self.resume = threading.Event(), threading.Event()
        self.reopening, self.held_uri, self.fails_late = False, held_uri, fails_late
        self.supervisor = types.SimpleNamespace(
            lock=threading.Lock(), subscribe_lock=threading.Lock(), closed=False, initialize_era_subscriptions=set(),
            dispatcher=types.SimpleNamespace(add_callback=lambda callback, methods: (lambda: None)),
            register=lambda sub, initialize_era=False: None, live=lambda deadline=None: None)
        self.server_capabilities = {"resources": {"subscribe": True}}
        self.dialect = mcp_sync.protocol.versions.dialect_for("2025-11-25")
        self.default_timeout = 5.0

    def request(self, method, params, options, *, extensions=None):
        uri = params["uri"]
        held = self.reopening and method == "resources/subscribe" and uri == self.held_uri
        if held:
            self.in_reopen.set()
            assert self.resume.wait(10)
        (self.subscribed.add if method == "resources/subscribe" else self.subscribed.discard)(uri)
        if held and self.fails_late:
            raise mcp_sync.RequestTimeout("applied by the server after the client gave up")
        return {}


@pytest.mark.parametrize("held_uri, fails_late", [("a://1", False), ("a://2", True)])
def test_initialize_era_a_close_during_a_reopen_leaves_nothing_subscribed(held_uri, fails_late):
    # The healer asks for the URIs again on a new session while the user
    # closes the subscription: before all were asked for, or while the last
    # one's request times out (the server applied it): none stays subscribed.
    import threading

    from mcp_sync.subscriptions import listen

    host = _RecordingHost(held_uri, fails_late)
    sub = listen(host, resource_subscriptions=["a://1", "a://2"])
    assert host.subscribed == {"a://1", "a://2"}
    host.subscribed.clear()  # a new session: nothing subscribed there yet
    sub.interrupt()
    host.reopening = True
    raised = []

    def heal() -> None:
        try:
            sub.reopen_on(object())
        except mcp_sync.McpError as exc:  # (the healer logs it and fails the subscription)
            raised.append(exc)

    healer = threading.Thread(target=heal)
    healer.start()
    closer = threading.Thread(target=sub.close)
    try:
        assert host.in_reopen.wait(10)
        closer.start()  # while held_uri is being asked for again
        wait_until(lambda: sub.ended)  # (its requests wait for the reopen's)
    finally:
        host.resume.set()
        healer.join(10)
        if closer.ident is not None:
            closer.join(10)
    assert not healer.is_alive() and not closer.is_alive()
    assert [type(exc) for exc in raised] == ([mcp_sync.RequestTimeout] if fails_late else [])
    assert sub.ended and host.subscribed == set()
    assert sub.reopen_on(object()) is False  # closed: never opened again


def test_initialize_era_a_listen_that_fails_partway_leaves_nothing_subscribed():
    # The second subscribe times out but the server applied it: listen()
    # raises, and cancels it with the first.
    from mcp_sync.subscriptions import listen

    host = _RecordingHost("a://2", fails_late=True)
    host.reopening = True  # (the held request is listen()'s own here)
    host.resume.set()
    with pytest.raises(mcp_sync.RequestTimeout):
        listen(host, resource_subscriptions=["a://1", "a://2"])
    assert host.subscribed == set()


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_wait_that_is_negative_or_nan_is_refused(protocol):
    """`next(timeout=-1)` and `next(timeout=float("nan"))` raised
    RequestTimeout at once, as if nothing had come in time."""
    with mcp_sync.connect(demo_server(), protocol=protocol) as client:
        with client.listen(tools_list_changed=True) as sub, client.notifications() as stream:
            for wait in (sub.next, stream.next):
                for bad in (-1, float("nan")):
                    with pytest.raises(ValueError, match="timeout must be a number of seconds, 0 or more"):
                        wait(timeout=bad)
                with pytest.raises(TypeError):
                    wait(timeout="1")
                with pytest.raises(mcp_sync.RequestTimeout):
                    wait(timeout=0)  # 0 looks without waiting


def test_initialize_era_listens_that_share_a_uri_share_its_subscription():
    # The session holds one subscription per URI: closing one of two
    # listens on it gave it up for the other, which heard nothing more.
    server = demo_server()
    with mcp_sync.connect(server, protocol="2025-11-25") as client:
        first = client.listen(resource_subscriptions=["demo://readme"])
        second = client.listen(resource_subscriptions=["demo://readme", "demo://readme"])
        assert server.served("resources/subscribe") == 1  # asked for once, for both
        server.notify_updated("demo://readme")
        assert first.next(timeout=10).params == second.next(timeout=10).params == {"uri": "demo://readme"}
        first.close()
        first.close()
        assert server.served("resources/unsubscribe") == 0  # the second still holds it
        server.notify_updated("demo://readme")
        assert second.next(timeout=10).params == {"uri": "demo://readme"}
        second.close()
        second.close()
        assert server.served("resources/unsubscribe") == 1  # given up once, by the last to close
        third = client.listen(resource_subscriptions=["demo://readme"])
        assert server.served("resources/subscribe") == 2  # nobody held it: asked for again
        server.notify_updated("demo://readme")
        assert third.next(timeout=10).params == {"uri": "demo://readme"}


def test_initialize_era_a_uri_of_a_listen_that_ended_otherwise_is_asked_for_again():
    # A listen ended by the client (not by its user) holds nothing: the
    # next listen on its URI asks for it.
    from mcp_sync.errors import ConnectionClosed

    server = demo_server()
    with mcp_sync.connect(server, protocol="2025-11-25") as client:
        first = client.listen(resource_subscriptions=["demo://readme"])
        first.fail(ConnectionClosed("reconnecting gave up"))
        second = client.listen(resource_subscriptions=["demo://readme"])
        assert server.served("resources/subscribe") == 2
        server.notify_updated("demo://readme")
        assert second.next(timeout=10).params == {"uri": "demo://readme"}


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_listen_on_a_closed_client_raises(protocol):
    # In the initialize era it returned a subscription that never ended.
    client = mcp_sync.connect(demo_server(), protocol=protocol)
    client.close()
    with pytest.raises(mcp_sync.ConnectionClosed, match="this client is closed"):
        client.listen(tools_list_changed=True)


def test_a_subscription_registered_after_the_client_closed_ends_at_once():
    # A listen racing close(): its subscription is registered after close()
    # ended every other one.
    from mcp_sync.subscriptions import Subscription

    with mcp_sync.connect(demo_server(), protocol="2025-11-25") as client:
        supervisor = client._pipeline.supervisor
    subscription = Subscription(lambda sub: None)
    supervisor.register(subscription, initialize_era=True)
    event = subscription.next(timeout=0)
    assert isinstance(event, mcp_sync.SubscriptionBroken)
    assert isinstance(event.error, mcp_sync.ConnectionClosed)
    assert subscription not in supervisor.initialize_era_subscriptions


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_one_uri_given_as_a_string_is_refused_before_anything_is_sent(protocol):
    # It was a list of its characters: 13 resources/subscribe requests in the initialize era.
    server = demo_server()
    with mcp_sync.connect(server, protocol=protocol) as client:
        before = server.served()
        with pytest.raises(TypeError, match=r"resource_subscriptions=\['demo://readme'\]"):
            client.listen(resource_subscriptions="demo://readme")
        assert server.served() == before


def test_a_server_that_refuses_to_open_a_subscription_again_breaks_it(tmp_path):
    # The documented end: SubscriptionBroken with the server's error (it
    # was a SubscriptionEnded holding the error response).
    flag = tmp_path / "refuse"
    launcher = tmp_path / "server.py"
    launcher.write_text(
        "import os, sys\n"
        "from mcp_sync.testing import demo_server\n"
        "from mcp_sync.testing.server import serve_stdio\n"
        "server = demo_server(exit_on_crash=True)\n"
        f"server.change_notifications = not os.path.exists({str(flag)!r})\n"
        "sys.exit(serve_stdio(server))\n")
    with mcp_sync.connect([sys.executable, str(launcher)], protocol="2026-07-28") as client:
        sub = client.listen(resource_subscriptions=["demo://readme"])
        flag.touch()  # the next server process refuses subscriptions/listen
        with pytest.raises(mcp_sync.McpError):
            client.call_tool("crash", {})
        events = [sub.next(timeout=30)]
        while not isinstance(events[-1], (mcp_sync.SubscriptionBroken, mcp_sync.SubscriptionEnded)):
            events.append(sub.next(timeout=30))
    assert isinstance(events[-1], mcp_sync.SubscriptionBroken)
    assert isinstance(events[-1].error, mcp_sync.MethodNotFound)
    assert sub.error_response is not None and sub.error_response["error"]["code"] == -32601


def test_initialize_era_another_listens_requests_hold_a_listen_up_only_within_its_timeout():
    # Listens that share URIs send their requests one at a time: one
    # waited for another's slow resources/subscribe however long it took,
    # past its own timeout, and so did a close().
    import threading

    from mcp_sync.subscriptions import listen

    host = _RecordingHost("a://1")
    host.reopening = True  # (its resources/subscribe of a://1 is answered once `resume` is set)
    done = listen(host, resource_subscriptions=["b://1"], timeout=0.5)  # before: nothing holds it up
    slow = threading.Thread(target=lambda: listen(host, resource_subscriptions=["a://1"]))
    slow.start()
    raised: list[BaseException] = []

    def blocked() -> None:
        try:
            listen(host, resource_subscriptions=["c://1"], timeout=0.3)
        except BaseException as exc:  # noqa: BLE001 - what it raised is the test
            raised.append(exc)

    try:
        assert host.in_reopen.wait(10)
        waiter = threading.Thread(target=blocked)
        waiter.start()
        waiter.join(10)
        assert not waiter.is_alive() and [type(exc) for exc in raised] == [mcp_sync.RequestTimeout]
        closer = threading.Thread(target=done.close)
        closer.start()
        closer.join(10)  # within the listen's timeout (0.5 s), not when the slow request ends
        assert not closer.is_alive() and done.ended
        assert "b://1" in host.subscribed  # not given up yet: the next close() tries again
    finally:
        host.resume.set()
        slow.join(10)
    done.close()
    assert "b://1" not in host.subscribed and "c://1" not in host.subscribed


def test_initialize_era_a_listen_cut_off_by_a_reconnect_holds_nothing_in_the_new_session():
    # A listen opened while another one on the same URI waited to be opened
    # again counted on it, and was left unsubscribed when that one closed
    # (or failed to open again) first.
    from mcp_sync.subscriptions import listen

    host = _RecordingHost()
    first = listen(host, resource_subscriptions=["a://1"])
    host.supervisor.initialize_era_subscriptions.add(first)  # (the fake's register keeps nothing)
    host.subscribed.clear()  # a new session: nothing subscribed there yet
    first.interrupt()
    second = listen(host, resource_subscriptions=["a://1"])
    host.supervisor.initialize_era_subscriptions.add(second)
    assert host.subscribed == {"a://1"}  # asked for by the second, for itself
    first.close()
    assert host.subscribed == {"a://1"}  # the second holds it
    second.close()


def test_a_waiting_event_is_taken_without_a_system_call(monkeypatch):
    # `os.getpid()` is a system call: `next()` makes the fork check only
    # before it blocks (a lock inherited held in a child forked from C),
    # not for each event a reader who keeps up finds waiting.
    import os
    import threading

    server = demo_server()
    with mcp_sync.connect(server) as client:
        sub = client.listen(resource_subscriptions=["demo://readme"], max_buffer=8)
        for _ in range(3):
            server.notify_updated("demo://readme")
        assert wait_until(lambda: len(sub._events) == 3, 10)
        real_getpid, me, calls = os.getpid, threading.get_ident(), []

        def getpid() -> int:
            if threading.get_ident() == me:
                calls.append(1)
            return real_getpid()

        monkeypatch.setattr(os, "getpid", getpid)
        events = [sub.next(timeout=5) for _ in range(3)]
        assert calls == []  # none for the three waiting events
        with pytest.raises(mcp_sync.RequestTimeout):
            sub.next(timeout=0.01)
        assert calls == [1]  # one, before the wait
        monkeypatch.undo()
        sub.close()
    assert [event.params["uri"] for event in events] == ["demo://readme"] * 3


@pytest.mark.parametrize("overflow", ["drop_oldest", "drop_newest"])
def test_a_full_buffer_never_drops_the_notice_of_a_gap(overflow):
    # The `SubscriptionResumed` that tells of lost notifications was dropped
    # like one of them (drop_newest: at once; drop_oldest: once enough
    # followed), and the consumer never learned of the gap.
    from mcp_sync.subscriptions import Subscription, SubscriptionResumed

    def note(i):
        return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"i": i}}

    sub = Subscription(lambda s: None, max_buffer=2, overflow=overflow)
    sub._on_notifications([note(0), note(1)], lambda: True)
    sub.missed(3.0)
    sub._on_notifications([note(2), note(3), note(4)], lambda: True)
    events = [sub.next(timeout=0) for _ in range(2)]
    with pytest.raises(mcp_sync.RequestTimeout):
        sub.next(timeout=0)
    assert SubscriptionResumed(3.0) in events
    assert sub.dropped == 4  # one notification and the notice were read: the other four went
