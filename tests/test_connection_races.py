"""Races of the connection engine: a late server request, an abandoned
inbox, a response at the deadline, blocked or failing handlers, an
interrupt while waiting, at a prompt or during close, a flood of server
requests. Each forces its interleaving and checks that no answer is lost,
crossed or written by the reader."""

import _thread
import queue
import threading
import time

import pytest

from mcp_sync.connection import CLOSE_JOIN_TIMEOUT, MAX_HANDLER_THREADS, Connection, new_id_counter
from mcp_sync.errors import RequestTimeout
from mcp_sync.waiting import MAIN_THREAD_SLICE
from tests.helpers import GENEROUS, SLACK, runs, wait_until
from tests.scripted_engine import PlayedTransport, respond


def server_request(request_id, method="elicitation/create"):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}


def sent_until(transport, predicate, timeout=5.0):
    """Messages the engine sent, until one matches `predicate` (or the timeout)."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = transport.sent.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            break
        seen.append(message)
        if predicate(message):
            return seen
    raise AssertionError(f"nothing matching was sent; saw {seen}")


def answers(transport, count, timeout=5.0):
    """The next `count` answers to server requests the engine sent, by id."""
    got = {}
    deadline = time.monotonic() + timeout
    while len(got) < count:
        message = transport.sent.get(timeout=max(deadline - time.monotonic(), 0.001))
        if "method" not in message:
            got[message["id"]] = message
    return got


def test_a_late_server_request_is_never_answered_by_another_callers_handler():
    """Call A gives up; its question arrives late, while B is the one call in
    flight. B's per-call handler must not answer it (in a web app that asks
    the wrong person); the client's own handler does."""
    transport = PlayedTransport()
    asked_client = []
    conn = Connection(transport, new_id_counter(),
                      on_server_request=lambda m: asked_client.append(m["id"]) or {"action": "decline"})
    conn.start()
    try:
        a = conn.send_request("tools/call", {"name": "a"})
        with pytest.raises(RequestTimeout):
            conn.wait(a, timeout=0.05)
        b = conn.send_request("tools/call", {"name": "b"})
        transport.sink.deliver(server_request("late-for-a"))
        asked_b = []

        def b_handler(message):
            asked_b.append(message["id"])

        def server():
            sent_until(transport, lambda m: m.get("id") == "late-for-a")
            respond(transport, b.id, {"for": "b"})

        threading.Thread(target=server).start()
        assert conn.wait(b, timeout=5, on_server_request=b_handler)["result"] == {"for": "b"}
        assert asked_b == []
        assert asked_client == ["late-for-a"]
    finally:
        conn.close()


def test_a_question_left_in_an_abandoned_inbox_is_answered_not_lost():
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter(), on_server_request=lambda m: {"roots": []})
    conn.start()
    try:
        pending = conn.send_request("tools/call", {})
        transport.next_sent()
        # It arrived on the call's own stream, then the caller gave up
        # (a callback raised, Ctrl-C) before it read its inbox.
        transport.sink.deliver(server_request("s1", "roots/list"), related_to=pending.id)
        conn.abandon(pending, "the caller gave up")
        answer = sent_until(transport, lambda m: m.get("id") == "s1")[-1]
        assert answer["result"] == {"roots": []}
        assert conn.owed == 0 and conn.in_flight == 0
    finally:
        conn.close()


def test_a_response_that_arrived_in_time_is_not_reported_as_a_timeout(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {}, progress=True)
    transport.next_sent()
    transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": pending.id, "progress": 1}})
    respond(transport, pending.id, {"done": True})
    overran = time.monotonic() + 0.3

    def slow_progress(params):
        while time.monotonic() < overran:  # a callback that outlives the deadline
            time.sleep(0.01)

    response = conn.wait(pending, timeout=0.1, on_progress=slow_progress)
    assert response["result"] == {"done": True}


def test_a_blocked_handler_does_not_block_close():
    transport = PlayedTransport()
    release = threading.Event()
    started = threading.Event()

    def stuck(message):
        started.set()
        release.wait(60)
        return {}

    conn = Connection(transport, new_id_counter(), on_server_request=stuck)
    conn.start()
    transport.sink.deliver(server_request("s1", "roots/list"))
    assert started.wait(5)
    closer = threading.Thread(target=conn.close)
    began = time.monotonic()
    closer.start()
    closer.join(CLOSE_JOIN_TIMEOUT + GENEROUS)
    try:
        assert not closer.is_alive(), "close() waited for a handler that never returns"
        # Its join of the handlers ends at CLOSE_JOIN_TIMEOUT: not the handler's 60 s.
        assert time.monotonic() - began < CLOSE_JOIN_TIMEOUT + GENEROUS
    finally:
        release.set()
        closer.join(10)


def test_handler_timeout_counts_from_arrival_for_queued_requests():
    transport = PlayedTransport()
    release = threading.Event()
    conn = Connection(transport, new_id_counter(), handler_timeout=0.5, max_server_requests=32,
                      on_server_request=lambda m: release.wait(30) and {})
    conn.start()
    try:
        count = MAX_HANDLER_THREADS + 3  # more than can run at once: some wait in the queue
        began = time.monotonic()
        for n in range(count):
            transport.sink.deliver(server_request(f"s{n}", "roots/list"))
        got = answers(transport, count, timeout=0.5 + GENEROUS)
        # Every answer by the 0.5 s counted from arrival: a request queued
        # behind the stuck handlers would wait for their 30 s.
        assert time.monotonic() - began < 0.5 + GENEROUS
        assert all("did not answer within 0.5 s" in m["error"]["message"] for m in got.values())
        release.set()
        assert conn.owed == 0
        with pytest.raises(queue.Empty):  # a late handler's answer is never sent
            transport.sent.get(timeout=0.3)
    finally:
        release.set()
        conn.close()


def test_a_handler_may_make_a_call_that_is_itself_asked_a_question():
    """A handler (on the pool) calls the server; the server asks the client
    something before answering that call. With one serial worker the
    question waited behind the handler waiting for it."""
    transport = PlayedTransport()
    conn = None

    def handler(message):
        if message["method"] == "roots/list":
            return {"roots": []}
        inner = conn.send_request("tools/call", {"name": "nested"})
        return {"nested": conn.wait(inner, timeout=5)["result"]}

    conn = Connection(transport, new_id_counter(), on_server_request=handler)
    conn.start()

    outer_answer = queue.SimpleQueue()

    def server():  # the only reader of what the client sends
        nested = sent_until(transport, lambda m: m.get("method") == "tools/call")[-1]
        transport.sink.deliver(server_request("inner-question", "roots/list"))
        sent_until(transport, lambda m: m.get("id") == "inner-question")
        respond(transport, nested["id"], {"ok": True})
        outer_answer.put(sent_until(transport, lambda m: m.get("id") == "outer")[-1])

    threading.Thread(target=server, daemon=True).start()
    try:
        transport.sink.deliver(server_request("outer", "sampling/createMessage"))
        assert outer_answer.get(timeout=4)["result"] == {"nested": {"ok": True}}
    finally:
        conn.close()


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
def test_interrupt_main_stops_a_waiting_call_at_once_and_cancels_it(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    transport.next_sent()
    main = threading.main_thread()
    interrupted_at = []

    def interrupter():
        # Until the main thread is inside wait(): then interrupt it.
        while not runs(main, Connection.wait.__code__):
            time.sleep(0.005)
        interrupted_at.append(time.monotonic())
        _thread.interrupt_main()

    threading.Thread(target=interrupter, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        conn.wait(pending, timeout=10)
    assert time.monotonic() - interrupted_at[0] < MAIN_THREAD_SLICE + SLACK  # not at the 10 s timeout
    cancelled = sent_until(transport, lambda m: m.get("method") == "notifications/cancelled")[-1]
    assert cancelled["params"]["requestId"] == pending.id
    assert conn.in_flight == 0


def test_the_reader_never_writes_even_when_refusing_a_flood():
    """A server that floods requests and does not read its input: the thread
    that reads must never block on a write (refusals go to the sender)."""
    class NotReading(PlayedTransport):
        def __init__(self):
            super().__init__()
            self.unblock = threading.Event()

        def send(self, message, headers=None):
            self.unblock.wait(30)  # the pipe is full
            super().send(message, headers)

        def close(self):
            self.unblock.set()
            super().close()

    transport = NotReading()
    release = threading.Event()
    conn = Connection(transport, new_id_counter(), max_server_requests=1,
                      on_server_request=lambda m: release.wait(30) and {})
    conn.start()
    delivered = threading.Event()

    def reader():
        for n in range(200):
            transport.sink.deliver(server_request(f"s{n}", "roots/list"))
        delivered.set()

    thread = threading.Thread(target=reader, name="fake-reader")
    thread.start()
    try:
        assert delivered.wait(5), "the reader blocked writing a refusal"
    finally:
        release.set()
        conn.close()
        thread.join(10)


# -- found by the concurrency review of the rebuilt engine -------------------------


def test_a_question_interrupted_at_its_prompt_is_still_answered(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    transport.next_sent()
    transport.sink.deliver(server_request("s1"), related_to=pending.id)

    def prompt(message):
        raise KeyboardInterrupt  # Ctrl-C while the person was typing

    with pytest.raises(KeyboardInterrupt):
        conn.wait(pending, timeout=5, on_server_request=prompt)
    answer = sent_until(transport, lambda m: m.get("id") == "s1")[-1]
    assert answer["error"]["code"] == -32603
    assert conn.owed == 0


def test_an_interrupt_during_close_still_closes_the_transport():
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter())
    conn.start()

    def interrupted(timeout):
        raise KeyboardInterrupt

    conn._threads._sender.flush = interrupted
    with pytest.raises(KeyboardInterrupt):
        conn.close()
    assert transport.closed == 1
    conn.close()  # and a second close returns at once
    assert transport.closed == 1


def test_close_re_entered_from_a_subscription_callback_returns_at_once():
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter())
    conn.start()
    nested = []

    def on_event(kind, payload):
        began = time.monotonic()
        conn.close()
        nested.append(time.monotonic() - began)

    conn.subscribe("subscriptions/listen", {}, on_event)
    conn.close()
    # At once: not after the CLOSE_JOIN_TIMEOUT a close joining its own thread would wait.
    assert len(nested) == 1 and nested[0] < SLACK < CLOSE_JOIN_TIMEOUT


def test_a_handler_that_raises_system_exit_does_not_strand_the_next_one():
    from mcp_sync.server_request_pool import HandlerPool

    pool = HandlerPool(max_workers=1, max_pending=4)
    ran = threading.Event()
    ended_by = []
    previous = threading.excepthook
    # The SystemExit ends its thread on purpose: record it here rather than
    # let it surface as an unhandled thread exception in some later test.
    threading.excepthook = lambda args: ended_by.append(args.exc_type)

    def dies():
        raise SystemExit

    try:
        assert pool.submit(dies)
        assert pool.submit(ran.set)
        assert ran.wait(5)
        assert wait_until(lambda: ended_by == [SystemExit], timeout=5)
    finally:
        pool.close(timeout=5)
        threading.excepthook = previous
