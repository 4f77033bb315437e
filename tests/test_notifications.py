"""Notifications that belong to no call: the dispatcher, streams, coalescing."""

import threading
import time

import pytest

import mcp_sync
from mcp_sync.notifications import COALESCE_WINDOW, Dispatcher
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import wait_until


def note(method, **params):
    return {"jsonrpc": "2.0", "method": method, "params": params}


def test_callbacks_run_in_order_on_the_dispatcher_thread():
    dispatcher = Dispatcher()
    seen = []
    done = threading.Event()

    def callback(n):
        seen.append((n.method, n.params.get("uri"), threading.current_thread().name))
        if n.params.get("uri") == "u9":
            done.set()

    dispatcher.add_callback(callback)
    for i in range(10):
        dispatcher.put(note("notifications/resources/updated", uri=f"u{i}"))
    assert done.wait(5)
    dispatcher.close()
    assert [uri for _, uri, _ in seen] == [f"u{i}" for i in range(10)]
    assert {name for _, _, name in seen} == {"mcp-sync-notifications"}


def test_a_burst_of_one_kind_is_coalesced():
    dispatcher = Dispatcher()
    times = []
    dispatcher.add_callback(lambda n: times.append((n.method, time.monotonic())))
    start = time.monotonic()
    for _ in range(50):
        dispatcher.put(note("notifications/tools/list_changed"))
    dispatcher.put(note("notifications/prompts/list_changed"))
    wait_until(lambda: len(times) >= 3)  # the counts are asserted below
    dispatcher.close()
    tools = [t for m, t in times if m == "notifications/tools/list_changed"]
    prompts = [t for m, t in times if m == "notifications/prompts/list_changed"]
    assert len(tools) == 2 and len(prompts) == 1  # first at once, the rest as one
    assert tools[0] - start < COALESCE_WINDOW
    assert tools[1] - tools[0] >= COALESCE_WINDOW * 0.9


def test_a_raising_callback_does_not_stop_the_others():
    dispatcher = Dispatcher()
    got = threading.Event()
    dispatcher.add_callback(lambda n: 1 / 0)
    dispatcher.add_callback(lambda n: got.set())
    dispatcher.put(note("notifications/resources/updated", uri="x"))
    assert got.wait(5)
    dispatcher.close()


def test_streams_are_bounded_with_an_overflow_policy():
    dispatcher = Dispatcher()
    oldest = dispatcher.open_stream(max_buffer=3)
    newest = dispatcher.open_stream(max_buffer=3, overflow="drop_newest")
    for i in range(10):
        dispatcher.put(note("notifications/resources/updated", uri=str(i)))
    dispatcher.close()  # delivers everything queued, then ends the streams
    assert [n.params["uri"] for n in oldest] == ["7", "8", "9"] and oldest.dropped == 7
    assert [n.params["uri"] for n in newest] == ["0", "1", "2"] and newest.dropped == 7


def test_stream_next_times_out_and_ends_on_close():
    dispatcher = Dispatcher()
    stream = dispatcher.open_stream()
    with pytest.raises(TimeoutError):
        stream.next(timeout=0.05)
    stream.close()
    with pytest.raises(StopIteration):
        stream.next(timeout=1)
    dispatcher.close()
    with pytest.raises(ValueError):
        dispatcher.open_stream(max_buffer=0)
    with pytest.raises(ValueError):
        dispatcher.open_stream(overflow="drop_everything")


def test_removing_a_callback():
    dispatcher = Dispatcher()
    seen = []
    stop = dispatcher.add_callback(seen.append)
    stop()
    stream = dispatcher.open_stream()
    dispatcher.put(note("notifications/resources/updated", uri="x"))
    assert stream.next(timeout=5).params == {"uri": "x"}
    dispatcher.close()
    assert seen == []


def test_server_notifications_reach_the_client_over_the_get_stream():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25") as client:
            with client.notifications() as stream:
                threads = []
                client.on_notification(lambda n: threads.append(threading.current_thread().name))
                assert httpd.wait_for(lambda: any(r.method == "GET" for r in httpd.requests), 10)
                assert httpd.wait_for(
                    lambda: httpd.notify("notifications/resources/updated", {"uri": "demo://readme"}) == 1, 10)
                received = stream.next(timeout=10)
        assert stream.closed
    assert received.method == "notifications/resources/updated" and received.params == {"uri": "demo://readme"}
    assert threads == ["mcp-sync-notifications"]


def test_close_ends_the_dispatcher_thread():
    client = mcp_sync.connect(demo_server())
    client.on_notification(lambda n: None)
    assert any(t.name == "mcp-sync-notifications" for t in threading.enumerate())
    client.close()
    assert not any(t.name == "mcp-sync-notifications" for t in threading.enumerate())


def test_a_callback_that_never_returns_does_not_hang_close(monkeypatch, caplog):
    from mcp_sync import notifications

    monkeypatch.setattr(notifications, "CLOSE_JOIN_SECONDS", 0.2)
    dispatcher = Dispatcher()
    entered, release = threading.Event(), threading.Event()

    def stuck(n):
        entered.set()
        release.wait(30)

    dispatcher.add_callback(stuck)
    dispatcher.put(note("notifications/resources/updated", uri="x"))
    assert entered.wait(5)
    closer = threading.Thread(target=dispatcher.close)
    closer.start()
    closer.join(10)
    try:
        assert not closer.is_alive(), "close() waited for a callback that never returns"
        assert "still running" in caplog.text
    finally:
        release.set()
    assert wait_until(lambda: not any(t.name == "mcp-sync-notifications" for t in threading.enumerate()), 5)


def test_notification_of_is_the_object_attrs_would_build():
    # The per-event constructor of a subscription's notifications.
    import attrs

    from mcp_sync.notifications import Notification, notification_of

    raw = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "a://b"}}
    fast = notification_of("notifications/resources/updated", {"uri": "a://b"}, raw)
    slow = Notification(method="notifications/resources/updated", params={"uri": "a://b"}, raw=raw)
    assert type(fast) is Notification and fast.raw is raw
    # What the slots' setters would skip if attrs ran it: nothing, as long as
    # the class has no validator, converter or post-init hook.
    assert all(f.validator is None and f.converter is None for f in attrs.fields(Notification))
    assert not hasattr(Notification, "__attrs_post_init__") and not hasattr(Notification, "__attrs_pre_init__")
    assert [getattr(fast, f.name) for f in attrs.fields(Notification)] == \
        [getattr(slow, f.name) for f in attrs.fields(Notification)]
    assert fast == slow and repr(fast) == repr(slow)
    with pytest.raises(AttributeError):
        fast.method = "x"  # type: ignore[misc]


def test_on_notification_takes_one_method_as_a_string():
    # It was a set of its characters: the callback never ran.
    server = demo_server()
    heard = []
    with mcp_sync.connect(server, protocol="2025-11-25") as client:
        stop = client.on_notification(heard.append, methods="notifications/tools/list_changed")
        server.notify_changed("tools")
        wait_until(lambda: heard)
        stop()
    assert [note.method for note in heard] == ["notifications/tools/list_changed"]
