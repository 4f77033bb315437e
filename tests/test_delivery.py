"""`Delivery.deliver_all`: the messages of one read, each where it goes, in order.

The notifications one read brings for a subscription are handed to it at
once (its owner's `many`), so that the stream takes them under one pass
of its lock with one wake-up; everything else is carried out as
`deliver()` carries it, and nothing is reordered for its consumer: a
response or a request read after them finds them handed on first.
"""

from __future__ import annotations

import queue
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mcp_sync
from mcp_sync.connection import Pending
from mcp_sync.delivery import Delivery
from mcp_sync.inbox import PROGRESS, Drops, Inbox
from mcp_sync.router import Router
from mcp_sync.subscriptions import Subscription, _StreamEvents
from tests.helpers import wait_until

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
FLOOD_SERVER = [sys.executable, str(Path(__file__).resolve().parent.parent / "benchmarks" / "server.py"), "stdio"]


def update(subscription: int, n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": f"demo://{n}", "_meta": {SUBSCRIPTION_ID: subscription}}}


class Recorder:
    """Every hand-over, in one log shared by all owners."""

    def __init__(self, log: list[Any], name: str, many: bool = True) -> None:
        self.log, self.name = log, name
        if many:
            self.many = lambda messages: log.append((name, "many", [m["params"]["uri"] for m in messages]))

    def __call__(self, kind: str, payload: Any) -> None:
        self.log.append((self.name, kind, payload["params"]["uri"] if kind == "notification" else payload.get("id")))


class AnsweringInbox:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def answer(self, message: dict[str, Any]) -> None:
        self.log.append(("call", "response", message["id"]))


class Call:
    def __init__(self, log: list[Any]) -> None:
        self.inbox = AnsweringInbox(log)


def delivery_for(router: Router[Any]) -> Delivery:
    def failed(error: Exception) -> None:
        raise AssertionError(f"the channel failed: {error}")

    return Delivery(threading.Lock(), router, None, on_notification=None,  # type: ignore[arg-type]
                    drops=Drops(), failed=failed, unadopt=lambda pending: None)


def test_a_reads_notifications_for_a_subscription_are_handed_on_at_once_and_in_order():
    log: list[Any] = []
    router: Router[Any] = Router()
    router.add_subscription(1, Recorder(log, "a"))
    router.add_subscription(2, Recorder(log, "b"))
    router.add_call(7, Call(log))
    delivery_for(router).deliver_all([
        update(1, 1), update(1, 2), update(2, 3), update(1, 4),
        {"jsonrpc": "2.0", "id": 7, "result": {}},  # wakes its caller: what came before it is handed on first
        update(1, 5), update(1, 6),
        {"jsonrpc": "2.0", "id": 1, "result": {}},  # the stream's end, after its notifications
    ])
    assert log == [
        ("a", "many", ["demo://1", "demo://2"]),
        ("b", "many", ["demo://3"]),
        ("a", "many", ["demo://4"]),
        ("call", "response", 7),
        ("a", "many", ["demo://5", "demo://6"]),
        ("a", "end", 1),
    ]


def test_an_owner_that_takes_them_one_at_a_time_gets_each_in_order():
    log: list[Any] = []
    router: Router[Any] = Router()
    router.add_subscription(1, Recorder(log, "plain", many=False))
    router.add_subscription(2, Recorder(log, "b"))
    delivery_for(router).deliver_all([update(1, 1), update(2, 2), update(2, 3), update(1, 4), update(1, 5)])
    assert log == [("plain", "notification", "demo://1"), ("b", "many", ["demo://2", "demo://3"]),
                   ("plain", "notification", "demo://4"), ("plain", "notification", "demo://5")]


class Host:
    """What a stream's events need of the pipeline: the cache to forget."""

    def __init__(self) -> None:
        self.forgotten: list[str] = []

    def forget_cached(self, notifications: Any) -> None:
        self.forgotten.extend(n["params"]["uri"] for n in notifications)


def stream(subscription: Subscription, host: Host | None = None) -> _StreamEvents:
    conn = object()
    return _StreamEvents(conn, [conn], host or Host(), None, subscription)  # type: ignore[arg-type]


def test_many_is_each_event_queued_as_one_at_a_time_would_queue_it():
    host = Host()
    one, many = Subscription(lambda s: None, max_buffer=5), Subscription(lambda s: None, max_buffer=5)
    messages = [update(1, n) for n in range(8)]
    for message in messages:
        stream(one)("notification", message)
    stream(many, host).many(messages)
    assert host.forgotten == [f"demo://{n}" for n in range(8)]  # the cache forgets each
    taken = [[many.next(timeout=0) for _ in range(5)], [one.next(timeout=0) for _ in range(5)]]
    assert taken[0] == taken[1]
    assert [event.params for event in taken[0]] == [{"uri": f"demo://{n}"} for n in range(3, 8)]
    assert many.dropped == one.dropped == 3
    with pytest.raises(mcp_sync.RequestTimeout):
        many.next(timeout=0)


def test_many_keeps_the_drop_newest_policy_and_ignores_a_moved_stream():
    sub = Subscription(lambda s: None, max_buffer=2, overflow="drop_newest")
    stream(sub).many([update(1, n) for n in range(5)])
    assert [sub.next(timeout=0).params["uri"] for _ in range(2)] == ["demo://0", "demo://1"]
    assert sub.dropped == 3
    moved = _StreamEvents(object(), [object()], Host(), None, sub)  # type: ignore[arg-type]
    moved.many([update(1, 9)])  # the stream of a connection the subscription left
    with pytest.raises(mcp_sync.RequestTimeout):
        sub.next(timeout=0)


@pytest.mark.parametrize("overflow", ["drop_oldest", "drop_newest"])
def test_many_lets_a_reader_run_once_the_buffer_is_half_full(monkeypatch, overflow):
    # As one at a time: from half of `max_buffer` on, the routing thread
    # lets go of the GIL after each event it queues or drops
    # (`time.sleep(0)`), whatever the overflow policy.
    import mcp_sync.subscriptions as subscriptions

    counts = []
    for deliver in ("one at a time", "many"):
        yields: list[float] = []
        monkeypatch.setattr(subscriptions.time, "sleep", yields.append)
        sub = Subscription(lambda s: None, max_buffer=8, overflow=overflow)
        messages = [update(1, n) for n in range(20)]
        if deliver == "many":
            stream(sub).many(messages)
        else:
            for message in messages:
                stream(sub)("notification", message)
        monkeypatch.undo()
        counts.append((yields, sub.dropped))
    assert counts[0] == counts[1] == ([0] * (20 - 3), 12)  # the 4th update fills half of 8


def test_many_stops_once_the_subscription_moved_to_another_connection(monkeypatch):
    # A reconnect while the routing thread let go of the GIL (half full):
    # the rest of the old stream's read never follows the new stream's
    # `SubscriptionResumed`.
    import mcp_sync.subscriptions as subscriptions

    sub = Subscription(lambda s: None, max_buffer=8)
    old, new = object(), object()
    current = [old]

    def reconnect(seconds: float) -> None:
        if current[0] is old:
            sub.interrupt()
            current[0] = new
            sub._resumed()

    monkeypatch.setattr(subscriptions.time, "sleep", reconnect)
    _StreamEvents(old, current, Host(), None, sub).many([update(1, n) for n in range(12)])  # type: ignore[arg-type]
    monkeypatch.undo()
    events = []
    while True:
        try:
            events.append(sub.next(timeout=0))
        except mcp_sync.RequestTimeout:
            break
    assert [getattr(event, "params", {}).get("uri") for event in events] == [f"demo://{n}" for n in range(4)] + [None]
    assert isinstance(events[-1], mcp_sync.SubscriptionResumed)


def test_many_wakes_as_many_sleeping_readers_as_it_queued_events():
    sub = Subscription(lambda s: None, max_buffer=100)
    got: list[Any] = []

    def read() -> None:
        got.append(sub.next(timeout=300))  # a reader left asleep is still asleep at the joins below

    readers = [threading.Thread(target=read, daemon=True) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        assert wait_until(lambda: sub._sleepers == 3)
        stream(sub).many([update(1, n) for n in range(3)])
        for reader in readers:
            reader.join(timeout=30)
        assert len(got) == 3
        assert sorted(event.params["uri"] for event in got) == ["demo://0", "demo://1", "demo://2"]
    finally:
        sub.close()  # a reader the push failed to wake ends here, not 300 s later


def test_a_flood_over_stdio_reaches_the_stream_whole_and_in_order():
    # The benchmark's server writes each update on its own; the reader
    # reads them many lines at a time.
    n = 5000
    with mcp_sync.connect(FLOOD_SERVER, timeout=60) as client:
        with client.listen(resource_subscriptions=["bench://1"], max_buffer=n + 10) as sub:
            assert client.call_tool("flood", {"n": n, "kind": "updates"}).is_error is False
            uris = [sub.next(timeout=30).params["uri"] for _ in range(n)]
            assert sub.dropped == 0
            with pytest.raises(mcp_sync.RequestTimeout):
                sub.next(timeout=0)
    assert uris == [f"bench://{i}" for i in range(1, n + 1)]


def test_a_failure_mid_pass_still_wakes_a_reader_for_what_was_queued(monkeypatch):
    import mcp_sync.subscriptions as subscriptions

    sub = Subscription(lambda s: None, max_buffer=100)
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(sub.next(timeout=300)), daemon=True)
    reader.start()
    assert wait_until(lambda: sub._sleepers == 1)
    build = subscriptions.notification_of

    def third_fails(method: str, params: dict[str, Any], raw: dict[str, Any]) -> Any:
        if params["uri"] == "demo://2":
            raise RuntimeError("a bug in building one")
        return build(method, params, raw)

    monkeypatch.setattr(subscriptions, "notification_of", third_fails)
    try:
        with pytest.raises(RuntimeError):
            stream(sub).many([update(1, n) for n in range(5)])
        reader.join(timeout=30)
        assert [event.params["uri"] for event in got] == ["demo://0"]
        assert sub.next(timeout=0).params["uri"] == "demo://1"
    finally:
        sub.close()  # a reader the push failed to wake ends here, not 300 s later


# -- a call's progress: a run of it in one read is put at once (`Inbox.put_run`) --


def progress(token: int, n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n}}


def drain(inbox: Inbox) -> list[Any]:
    taken = []
    while True:
        try:
            taken.append(inbox.get_nowait())
        except queue.Empty:
            return taken


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=9), st.lists(st.integers(min_value=0, max_value=4), max_size=12),
       st.lists(st.integers(min_value=0, max_value=1), max_size=4))
def test_put_run_queues_what_puts_one_at_a_time_would_until_the_lane_is_crowded(limit, payloads, before):
    # `before`: events already in the lanes (0 progress, 1 a log message),
    # so that the numbering is checked across both lanes.
    run, single = Inbox(1, "m", max_progress=limit, max_logs=limit), Inbox(1, "m", max_progress=limit, max_logs=limit)
    for inbox in (run, single):
        inbox.put(PROGRESS, "first", wake=False)  # (the lanes exist from the first event on)
        for kind in before:
            inbox.put(PROGRESS if kind == 0 else "log", "before", wake=False)
    taken = run.put_run(PROGRESS, iter(payloads))
    expected = 0
    for payload in payloads:
        if single.put(PROGRESS, payload, wake=False) is not None:
            break  # crowded or dropped: that one is `put`'s, not the run's
        expected += 1
    assert taken == expected
    if expected < len(payloads):  # the one `single` took past the run, taken by `run` as `put` does
        run.put(PROGRESS, payloads[expected], wake=False)
    run.wake()
    single.wake()
    assert drain(run) == drain(single)


def test_put_run_takes_nothing_before_the_lanes_exist():
    inbox = Inbox(1, "m")
    assert inbox.put_run(PROGRESS, iter([1, 2])) == 0
    assert drain(inbox) == []


reads = st.lists(st.one_of(
    st.builds(progress, st.sampled_from([7, 7, 7, 8, 9, 7.0, True, "7"]), st.integers(min_value=0, max_value=99)),
    st.builds(lambda i: {"jsonrpc": "2.0", "id": i, "result": {}}, st.sampled_from([7, 8])),
    st.builds(lambda n: update(1, n), st.integers(min_value=0, max_value=99)),
    st.builds(lambda n: update(1, n), st.integers(min_value=0, max_value=99)),
    st.just({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}}),
    # The subscription's end (tagged for it: not one more of its notifications).
    st.just({"jsonrpc": "2.0", "method": "notifications/cancelled",
             "params": {"requestId": 1, "_meta": {SUBSCRIPTION_ID: 1}}}),
    # A request, tagged for the subscription and named like its notifications.
    st.just({**update(1, 0), "id": 5}),
), max_size=30)


@settings(max_examples=300, deadline=None)
@given(reads, st.integers(min_value=1, max_value=8))
def test_a_read_is_delivered_as_each_of_its_messages_would_be(messages, limit):
    # `deliver_all` takes runs of one call's progress (and of one
    # subscription's notifications) at once: each call must end with the
    # events, in the order and with the drops, that delivering each message
    # of the read alone gives.
    results = []
    for together in (True, False):
        log: list[Any] = []
        router: Router[Any] = Router()
        calls = {i: Pending(i, "tools/call", True) for i in (7, 8)}
        for request_id, call in calls.items():
            call.inbox.max_progress = limit
            router.add_call(request_id, call)
        router.add_subscription(1, Recorder(log, "a"))
        threads = _NoThreads()
        delivery = Delivery(threading.Lock(), router, threads, on_notification=None,  # type: ignore[arg-type]
                            drops=Drops(), failed=lambda error: None, unadopt=lambda pending: None)
        if together:
            delivery.deliver_all(list(messages))
        else:
            held: list[Any] = []
            gathered: list[Any] = []
            logs: list[Any] = []
            for message in messages:
                delivery.deliver(message, None, held=held, gathered=gathered, logs=logs)
            if gathered:
                delivery._hand_on(gathered)
            if logs:
                threads.log_all(logs)
            for call in held:
                call.inbox.wake()
        results.append(({i: drain(call.inbox) for i, call in calls.items()}, log, delivery._drops.as_dict(),
                        threads.given, sorted(router.subscriptions), sorted(router.calls), sorted(router.owed)))
    assert results[0] == results[1]


class _NoThreads:
    """The engine's threads, for a read that brings them only log messages
    and requests: what they were given, in order."""

    def __init__(self) -> None:
        self.given: list[Any] = []

    def log(self, params: Any) -> None:
        self.given.append(("log", params))

    def log_all(self, messages: Any) -> None:
        self.given.extend(("log", params) for params in messages)

    def take(self, message: Any) -> None:
        self.given.append(("request", message["id"]))
