"""The engine on its own, with a scripted transport: routing, deadlines,
cancellation, late responses, failure and close."""

import logging
import queue
import threading

import pytest

from mcp_sync.connection import Connection, new_id_counter
from mcp_sync.errors import ConnectionClosed, InvalidMessage, RequestTimeout, ServerExited
from mcp_sync.protocol import jsonrpc
from tests.scripted_engine import PlayedTransport, respond


def test_ids_are_fresh_integers_and_never_reused_across_connections():
    ids = new_id_counter()
    first = Connection(PlayedTransport(), ids)
    first.start()
    a = first.send_request("m", None)
    b = first.send_request("m", None)
    first.close()
    second = Connection(PlayedTransport(), ids)
    second.start()
    c = second.send_request("m", None)
    assert (a.id, b.id, c.id) == (1, 2, 3)
    second.close()


def test_response_reaches_its_own_request(engine):
    conn, transport = engine
    one = conn.send_request("a", None)
    two = conn.send_request("b", None)
    respond(transport, two.id, {"for": "two"})
    respond(transport, one.id, {"for": "one"})
    assert conn.wait(one, timeout=5)["result"] == {"for": "one"}
    assert conn.wait(two, timeout=5)["result"] == {"for": "two"}
    assert conn.in_flight == 0


def test_progress_goes_to_the_request_whose_id_is_the_token(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {"name": "x"}, progress=True)
    other = conn.send_request("tools/call", {"name": "y"}, progress=True)
    sent = transport.next_sent()
    assert sent["params"]["_meta"]["progressToken"] == pending.id
    assert sent["params"]["name"] == "x"
    seen, threads = [], []

    def on_progress(params):
        seen.append(params["progress"])
        threads.append(threading.current_thread())

    for value in (1, 2):
        transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": pending.id, "progress": value}})
    transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": other.id, "progress": 99}})
    respond(transport, pending.id)
    conn.wait(pending, timeout=5, on_progress=on_progress)
    assert seen == [1, 2]
    assert threads == [threading.current_thread()] * 2


def test_progress_for_unknown_token_is_dropped(engine, caplog):
    conn, transport = engine
    with caplog.at_level(logging.DEBUG, logger="mcp_sync.connection"):
        transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": 12345, "progress": 1}})
    assert "no request holds" in caplog.text


def test_timeout_cancels_with_a_notification_and_drops_the_late_response(engine, caplog):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    transport.next_sent()
    with pytest.raises(RequestTimeout) as info:
        conn.wait(pending, timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    assert info.value.method == "tools/call"
    cancel = transport.next_sent()
    assert cancel["method"] == "notifications/cancelled"
    assert cancel["params"]["requestId"] == pending.id
    # The late answer goes nowhere, and no later request receives it.
    later = conn.send_request("tools/call", {})
    with caplog.at_level(logging.DEBUG, logger="mcp_sync.connection"):
        respond(transport, pending.id, {"late": True})
    assert "nobody waits" in caplog.text
    respond(transport, later.id, {"late": False})
    assert conn.wait(later, timeout=5)["result"] == {"late": False}


def test_non_cancellable_request_sends_no_notification(engine):
    conn, transport = engine
    pending = conn.send_request("initialize", {}, cancellable=False)
    transport.next_sent()
    with pytest.raises(RequestTimeout):
        conn.wait(pending, timeout=0.01)
    with pytest.raises(queue.Empty):
        transport.sent.get(timeout=0.05)


def test_per_request_transport_cancels_by_closing_the_stream():
    transport = PlayedTransport(by_notification=False)
    conn = Connection(transport, new_id_counter())
    conn.start()
    pending = conn.send_request("tools/call", {})
    with pytest.raises(RequestTimeout):
        conn.wait(pending, timeout=0.01)
    assert transport.cancelled == [pending.id]
    conn.close()


def test_reset_timeout_on_progress_is_bounded_by_max_total(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {}, progress=True)
    stop = threading.Event()

    def keep_reporting():
        n = 0
        while not stop.wait(0.01):
            n += 1
            transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/progress",
                                    "params": {"progressToken": pending.id, "progress": n}})

    feeder = threading.Thread(target=keep_reporting)
    feeder.start()
    try:
        with pytest.raises(RequestTimeout) as info:
            conn.wait(pending, timeout=5.0, reset_timeout_on_progress=True, max_total_timeout=0.5)
    finally:
        stop.set()
        feeder.join()
    assert info.value.max_total_timeout == 0.5
    assert "maximum total timeout" in str(info.value)


def test_progress_resets_the_timeout(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {}, progress=True)
    count = []

    def on_progress(params):
        count.append(params["progress"])
        if len(count) < 5:
            # Five progress steps 0.4 s apart outlast a 1 s timeout only if each resets it.
            threading.Timer(0.4, lambda n=len(count) + 1: transport.sink.deliver(
                {"jsonrpc": "2.0", "method": "notifications/progress",
                 "params": {"progressToken": pending.id, "progress": n}})).start()
        else:
            respond(transport, pending.id, {"done": True})

    transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": pending.id, "progress": 1}})
    response = conn.wait(pending, timeout=1.0, on_progress=on_progress, reset_timeout_on_progress=True,
                         max_total_timeout=10)
    assert response["result"] == {"done": True} and count == [1, 2, 3, 4, 5]


def test_a_callback_that_raises_abandons_the_request(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {}, progress=True)
    transport.next_sent()
    transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": pending.id, "progress": 1}})

    def boom(_):
        raise KeyError("user bug")

    with pytest.raises(KeyError):
        conn.wait(pending, timeout=5, on_progress=boom)
    assert transport.next_sent()["method"] == "notifications/cancelled"
    assert conn.in_flight == 0


def test_log_message_goes_to_the_request_whose_stream_carried_it(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    logs = []
    transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "data": "hello"}}, related_to=pending.id)
    respond(transport, pending.id)
    conn.wait(pending, timeout=5, on_log=lambda p: logs.append((p["data"], threading.current_thread())))
    assert logs == [("hello", threading.current_thread())]


def test_unrelated_logs_go_to_the_worker_and_notifications_to_the_dispatch_hook():
    seen = queue.SimpleQueue()
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter(),
                      on_notification=lambda m: seen.put((m["method"], threading.current_thread().name)),
                      on_log=lambda p: seen.put(("log", threading.current_thread().name)))
    conn.start()
    reader = threading.Thread(target=lambda: [
        transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}}),
    ], name="fake-reader")
    reader.start()
    reader.join()
    got = [seen.get(timeout=5), seen.get(timeout=5)]
    # The hook is handed the notification where it was read (the client's hook
    # only queues it for its dispatcher thread); log messages run on the worker.
    assert got[0] == ("notifications/tools/list_changed", "fake-reader")
    assert got[1][0] == "log" and got[1][1].startswith("mcp-sync-log")
    conn.close()


def test_server_request_with_no_caller_is_answered_by_the_worker():
    transport = PlayedTransport()

    def handler(message):
        if message["method"] == "ping":
            return {}
        raise jsonrpc.Refusal(-32601, "Method not found")

    conn = Connection(transport, new_id_counter(), on_server_request=handler)
    conn.start()
    transport.sink.deliver({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
    transport.sink.deliver({"jsonrpc": "2.0", "id": "s2", "method": "sampling/createMessage", "params": {}})
    answers = {m["id"]: m for m in (transport.next_sent(), transport.next_sent())}
    assert answers["s1"]["result"] == {}
    assert answers["s2"]["error"]["code"] == -32601
    conn.close()


def test_server_request_goes_to_the_caller_whose_stream_carried_it(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    got = []
    transport.sink.deliver({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"}, related_to=pending.id)
    respond(transport, pending.id)
    conn.wait(pending, timeout=5, on_server_request=lambda m: got.append((m["id"], threading.current_thread())))
    assert got == [("s1", threading.current_thread())]


def test_transport_failure_fails_every_pending_call_with_that_error(engine):
    conn, transport = engine
    calls = [conn.send_request("m", None) for _ in range(3)]
    transport.sink.transport_failed(ServerExited("the server process exited with code 3", returncode=3, stderr_tail=["boom"]))
    for pending in calls:
        with pytest.raises(ServerExited) as info:
            conn.wait(pending, timeout=5)
        assert info.value.returncode == 3 and info.value.stderr_tail == ["boom"]
    with pytest.raises(ServerExited):
        conn.send_request("m", None)


def test_invalid_message_is_a_transport_failure(engine):
    conn, transport = engine
    pending = conn.send_request("m", None)
    transport.sink.deliver({"jsonrpc": "2.0", "id": 1})
    with pytest.raises(InvalidMessage):
        conn.wait(pending, timeout=5)


def test_close_fails_pending_calls_at_once_from_another_thread():
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter())
    conn.start()
    pending = conn.send_request("slow", None)
    errors = queue.SimpleQueue()

    def waiter():
        try:
            conn.wait(pending, timeout=60)
        except ConnectionClosed as exc:
            errors.put(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    conn.close()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert "closed" in str(errors.get(timeout=1))
    conn.close()
    assert transport.closed == 1
    with pytest.raises(ConnectionClosed):
        conn.send_request("m", None)


def test_close_is_idempotent_across_threads():
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter())
    conn.start()
    threads = [threading.Thread(target=conn.close) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert transport.closed == 1 and conn.closed


def test_close_joins_the_worker():
    transport = PlayedTransport()
    done = threading.Event()
    workers = []
    conn = Connection(transport, new_id_counter(),
                      on_log=lambda p: (workers.append(threading.current_thread()), done.set()))
    conn.start()
    transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}})
    assert done.wait(5)
    assert workers and all(t.is_alive() for t in workers)
    conn.close()
    assert not any(t.is_alive() for t in workers)


def test_send_failure_unregisters_the_request():
    class Broken(PlayedTransport):
        def send(self, message, headers=None):
            raise ConnectionClosed("pipe broke")

    conn = Connection(Broken(), new_id_counter())
    conn.start()
    with pytest.raises(ConnectionClosed):
        conn.send_request("m", None)
    assert conn.in_flight == 0
    conn.close()


# -- server requests (initialize era) ---------------------------------------------------------


def test_the_clock_stops_while_a_handler_runs(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    transport.next_sent()
    transport.sink.deliver({"jsonrpc": "2.0", "id": "s1", "method": "elicitation/create", "params": {}},
                           related_to=pending.id)
    released = threading.Event()

    def slow_person(message):
        # Longer than the call's whole timeout: a person typing.
        released.wait(0.6)
        conn.respond(message["id"], result={"action": "decline"})
        respond(transport, pending.id, {"done": True})

    assert conn.wait(pending, timeout=0.3, on_server_request=slow_person)["result"] == {"done": True}
    assert transport.next_sent() == {"jsonrpc": "2.0", "id": "s1", "result": {"action": "decline"}}


def test_a_request_the_server_cancelled_is_not_answered(engine):
    conn, transport = engine
    transport.sink.deliver({"jsonrpc": "2.0", "id": "s9", "method": "roots/list"})
    transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s9"}})
    conn.respond("s9", result={"roots": []})
    conn.respond("never-asked", result={})
    with pytest.raises(queue.Empty):
        transport.sent.get(timeout=0.2)


def test_server_requests_on_the_worker_are_bounded():
    transport = PlayedTransport()
    release = threading.Event()
    started = threading.Event()

    def handler(message):
        started.set()
        release.wait(10)
        return {}

    conn = Connection(transport, new_id_counter(), on_server_request=handler, max_server_requests=2)
    conn.start()
    for n in range(4):
        transport.sink.deliver({"jsonrpc": "2.0", "id": f"s{n}", "method": "ping"})
    refused = [transport.next_sent(), transport.next_sent()]
    assert {m["id"] for m in refused} == {"s2", "s3"}
    assert all(m["error"]["code"] == -32603 for m in refused)
    release.set()
    answered = {transport.next_sent()["id"], transport.next_sent()["id"]}
    assert answered == {"s0", "s1"}
    conn.close()


def test_a_slow_worker_handler_is_answered_with_an_error_at_its_timeout():
    transport = PlayedTransport()
    release = threading.Event()
    conn = Connection(transport, new_id_counter(), on_server_request=lambda m: release.wait(10) and {"late": True},
                      handler_timeout=0.2)
    conn.start()
    transport.sink.deliver({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {}})
    answer = transport.next_sent()
    assert answer["id"] == "s1" and "did not answer within" in answer["error"]["message"]
    release.set()
    with pytest.raises(queue.Empty):
        transport.sent.get(timeout=0.2)  # the late result is dropped
    conn.close()


def test_a_second_close_waits_for_the_first_as_long_as_the_close_may_take(monkeypatch):
    # A second close() (another thread) waits for the first one to finish:
    # bounded by what a close may take (`close_budget`: a stdio server gets
    # three shutdown steps), not by a fixed few seconds, or it returns with
    # the transport still closing and its threads alive.
    import mcp_sync.connection as connection_module

    monkeypatch.setattr(connection_module, "CLOSE_JOIN_TIMEOUT", 0.05)  # the old fixed wait: 0.15 s
    closing = threading.Event()

    class SlowToClose(PlayedTransport):
        close_budget = 5.0

        def close(self):
            closing.set()
            threading.Event().wait(1.0)  # longer than the old wait, well inside the budget
            super().close()

    transport = SlowToClose()
    conn = Connection(transport, new_id_counter())
    conn.start()
    first = threading.Thread(target=conn.close)
    first.start()
    assert closing.wait(5)
    conn.close()
    assert transport.closed == 1, "the second close() returned before the first had closed the transport"
    first.join(5)


def test_the_lifecycle_state_only_moves_forward(engine):
    from mcp_sync.connection import State
    from mcp_sync.errors import ConnectionClosed, ServerExited

    conn, transport = engine
    assert conn.state is State.OPEN and not conn.closed
    conn.transport_failed(ServerExited("the server exited", returncode=3, stderr_tail=[]))
    assert conn.state is State.FAILED and isinstance(conn.failure, ServerExited)
    conn.transport_failed(ConnectionClosed("a second failure"))  # the first one stays
    assert isinstance(conn.failure, ServerExited)
    with pytest.raises(ServerExited):  # a send says why it failed, not just "closed"
        conn.send_request("tools/list", {})
    conn.close()
    assert conn.state is State.CLOSED and conn.closed
    conn.transport_failed(ConnectionClosed("after close"))
    assert conn.state is State.CLOSED and isinstance(conn.failure, ServerExited)


def test_a_closed_connection_never_fails_afterwards(engine):
    from mcp_sync.connection import State
    from mcp_sync.errors import ConnectionClosed

    conn, _ = engine
    conn.close()
    conn.transport_failed(ConnectionClosed("the reader noticed the close"))
    assert conn.state is State.CLOSED and conn.failure is None
    with pytest.raises(ConnectionClosed, match="closed"):
        conn.send_request("tools/list", {})


def test_an_answer_json_cannot_carry_is_replaced_by_an_error():
    # A handler's answer holding NaN could not be written: the sender logged
    # it and dropped it, and the server waited for ever.
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter(),
                      on_server_request=lambda message: {"roots": [], "_meta": {"score": float("nan")}})
    conn.start()
    try:
        transport.sink.deliver({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"})
        answer = transport.next_sent()
        assert answer["id"] == "s1" and "result" not in answer
        assert answer["error"]["code"] == -32603
        # (Python 3.12 adds the value: "... not JSON compliant: nan".)
        assert answer["error"]["message"].startswith("the client's answer cannot be sent as JSON: Out of range float "
                                                     "values are not JSON compliant")
    finally:
        conn.close()


# -- what counts as a cancellation (`on_cancelled`, for `stats().cancellations`) --------------


class ExchangingTransport(PlayedTransport):
    """A transport whose caller sends its own request in `wait()` (as
    Streamable HTTP does): `send_request` leaves it unsent."""

    def exchange(self, message, headers, deadline):
        self.send(message, headers)
        return 0.0


def counted_engine(transport):
    told = []
    conn = Connection(transport, new_id_counter(), on_cancelled=lambda: told.append(1))
    conn.start()
    return conn, told


@pytest.mark.parametrize("by_notification", [True, False])
def test_each_cancellation_made_is_told_once(by_notification):
    # A notifications/cancelled queued, or (a per-request transport) the
    # request's own stream closed: each is one cancellation.
    transport = PlayedTransport(by_notification=by_notification)
    conn, told = counted_engine(transport)
    try:
        timed_out = conn.send_request("tools/call", {})
        with pytest.raises(RequestTimeout):
            conn.wait(timed_out, timeout=0.01)
        abandoned = conn.send_request("tools/call", {})
        conn.abandon(abandoned, "given up")
        conn.abandon(abandoned, "given up")  # a second abandon does nothing
        assert told == [1, 1]
        sent = [transport.next_sent() for _ in range(4 if by_notification else 2)]
        cancels = [m["params"]["requestId"] for m in sent if m.get("method") == "notifications/cancelled"]
        assert cancels == ([timed_out.id, abandoned.id] if by_notification else [])
    finally:
        conn.close()


def test_a_cancellation_the_crowded_sender_drops_is_not_counted():
    # A notifications/cancelled is spare: the sender drops it when half its
    # queue is full. It was counted all the same (`post` said nothing).
    release = threading.Event()

    class StuckOnCancellations(PlayedTransport):
        def send(self, message, headers=None):
            if message.get("method") == "notifications/cancelled":
                release.wait(30)  # the sender's one thread, stuck on the first
            super().send(message, headers)

    transport = StuckOnCancellations()
    conn, told = counted_engine(transport)
    try:
        pendings = [conn.send_request("tools/call", {}) for _ in range(700)]
        for pending in pendings:
            conn.abandon(pending, "given up")
        assert 0 < len(told) < 700  # (all 700 before)
        release.set()
        cancels = 0
        while cancels < len(told):  # each one counted goes out
            cancels += transport.next_sent().get("method") == "notifications/cancelled"
    finally:
        release.set()
        conn.close()


def test_a_request_that_may_not_be_cancelled_or_was_answered_counts_no_cancellation():
    transport = PlayedTransport()
    conn, told = counted_engine(transport)
    try:
        initialize = conn.send_request("initialize", {}, cancellable=False)
        with pytest.raises(RequestTimeout):
            conn.wait(initialize, timeout=0.01)
        answered = conn.send_request("tools/call", {})
        respond(transport, answered.id)
        conn.wait(answered, timeout=5)
        conn.abandon(answered, "too late")
        assert told == []
    finally:
        conn.close()


def test_a_request_abandoned_before_it_was_sent_is_not_cancelled():
    # An exchanging transport's request goes out in `wait()`: given up before
    # that, the server never saw it, so nothing is cancelled, nor counted.
    transport = ExchangingTransport()
    conn = Connection(transport, new_id_counter())
    conn.start()
    try:
        pending = conn.send_request("tools/call", {})
        conn.abandon(pending, "given up before it was sent")
        assert conn.in_flight == 0
        assert transport.cancelled == []
        with pytest.raises(queue.Empty):
            transport.sent.get(timeout=0.05)
    finally:
        conn.close()
