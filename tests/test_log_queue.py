"""Log messages for no call on their way to the log thread (`LogQueue`):
in order, bounded with every drop counted, one wake-up of the log thread
per read rather than per message, and what the reader does with a read's
log messages (`Delivery.deliver_all`)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import mcp_sync.engine_threads as engine_threads
from mcp_sync.connection import Connection, new_id_counter
from mcp_sync.engine_threads import MAX_QUEUED_LOGS, Burst, LogQueue
from mcp_sync.server_request_pool import HandlerPool
from tests.scripted_engine import PlayedTransport


def note(data: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}}


class Gate:
    """A log handler that records what it gets and holds the first message
    until `release()`: while it holds it, the drain takes nothing more."""

    def __init__(self) -> None:
        self.got: list[Any] = []
        self.holding = threading.Event()
        self._release = threading.Event()

    def __call__(self, params: dict[str, Any]) -> None:
        self.got.append(params["data"] if "data" in params else params)
        if len(self.got) == 1:
            self.holding.set()
            assert self._release.wait(10)

    def release(self) -> None:
        self._release.set()


class CountingPool(HandlerPool):
    def __init__(self) -> None:
        super().__init__(max_workers=1, max_pending=2, name="mcp-sync-log-test")
        self.submitted = 0

    def submit(self, job: Any) -> bool:
        self.submitted += 1
        return super().submit(job)


@pytest.fixture
def pool():
    made = CountingPool()
    yield made
    made.close(timeout=5)


def test_every_message_reaches_the_handler_once_in_order(pool):
    # (A bound above all of them: what the bound drops is the next test's.)
    got: list[int] = []
    queue = LogQueue(pool, lambda params: got.append(params["n"]), limit=1000)
    for start in range(0, 1000, 50):
        assert queue.put_all([{"n": n} for n in range(start, start + 50)])[0] == 0
    assert pool.flush(10)
    assert got == list(range(1000))


def test_at_most_the_bound_waits_while_the_handler_holds_one_and_each_drop_is_counted(pool):
    handler = Gate()
    queue = LogQueue(pool, handler, limit=MAX_QUEUED_LOGS)
    assert queue.put_all([{"data": 0}]) == (0, 1)
    assert handler.holding.wait(10)  # the drain holds message 0: it takes nothing more meanwhile
    assert queue.put_all([{"data": n} for n in range(1, 201)]) == (0, 200)
    assert queue.put_all([{"data": n} for n in range(201, 301)]) == (300 - MAX_QUEUED_LOGS, MAX_QUEUED_LOGS)
    handler.release()
    assert pool.flush(10)
    # The oldest waiting made room: 1..44 were dropped, and only those.
    assert handler.got == [0] + list(range(300 - MAX_QUEUED_LOGS + 1, 301))


def test_the_log_thread_is_woken_once_while_it_drains_not_once_per_put(pool):
    handler = Gate()
    queue = LogQueue(pool, handler, limit=MAX_QUEUED_LOGS)
    queue.put_all([{"data": 0}])
    assert handler.holding.wait(10)
    for n in range(1, 101):
        queue.put_all([{"data": n}])
    assert pool.submitted == 1  # one drain job for all of them
    handler.release()
    assert pool.flush(10)
    assert handler.got == list(range(101))
    queue.put_all([{"data": 101}])  # the drain ended with the queue: a new one
    assert pool.flush(10)
    assert pool.submitted == 2 and handler.got[-1] == 101


def test_a_handler_that_raises_loses_no_other_message(pool, caplog):
    got: list[int] = []

    def handler(params: dict[str, Any]) -> None:
        if params["n"] % 3 == 0:
            raise ValueError("a bug in the handler")
        got.append(params["n"])

    queue = LogQueue(pool, handler, limit=MAX_QUEUED_LOGS)
    with caplog.at_level(logging.ERROR, logger="mcp_sync.connection"):
        queue.put_all([{"n": n} for n in range(10)])
        assert pool.flush(10)
    assert got == [1, 2, 4, 5, 7, 8]
    assert [r.getMessage() for r in caplog.records] == ["the log handler raised"] * 4


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit, on purpose
def test_a_handler_that_ends_its_thread_leaves_the_next_message_a_drain(pool):
    got: list[int] = []

    def handler(params: dict[str, Any]) -> None:
        if params["n"] == 0:
            raise SystemExit  # ends the pool's worker, not the queue
        got.append(params["n"])

    queue = LogQueue(pool, handler, limit=MAX_QUEUED_LOGS)
    queue.put_all([{"n": 0}])
    assert pool.flush(10)
    queue.put_all([{"n": 1}])
    assert pool.flush(10)
    assert got == [1]


def test_when_no_drain_can_start_what_waits_is_dropped_and_the_next_put_tries_again():
    ran: list[Any] = []

    class Refusing:
        calls = 0

        def submit(self, job: Any) -> bool:
            self.calls += 1
            if self.calls == 1:
                return False  # no thread to be had
            job()  # (runs it here: this test is about the queue's flag and counts, not threads)
            return True

    refusing = Refusing()
    queue = LogQueue(refusing, lambda params: ran.append(params["n"]), limit=MAX_QUEUED_LOGS)  # type: ignore[arg-type]
    assert queue.put_all([{"n": 1}, {"n": 2}]) == (2, 0)  # counted, not left waiting for nobody
    assert ran == [] and refusing.calls == 1
    assert queue.put_all([{"n": 3}]) == (0, 1)
    assert ran == [3] and refusing.calls == 2


def test_stop_drops_what_waits_and_the_drain_ends_after_the_message_in_hand(pool):
    handler = Gate()
    queue = LogQueue(pool, handler, limit=MAX_QUEUED_LOGS)
    queue.put_all([{"data": n} for n in range(5)])
    assert handler.holding.wait(10)
    queue.stop()
    assert queue.put_all([{"data": 5}]) == (0, 0)
    handler.release()
    assert pool.flush(10)
    assert handler.got == [0]


def test_a_burst_begins_once_however_many_it_drops_at_a_time():
    burst = Burst(quiet=0.0)
    assert burst.drop(44) is True
    assert burst.drop(3) is False and burst.dropping
    assert burst.end() == 47 and not burst.dropping
    assert burst.drop() is True


# -- the reader's side: a read's log messages -----------------------------------------------


@pytest.fixture
def gated_connection():
    handler = Gate()
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter(), on_log=handler)
    conn.start()
    yield conn, handler
    handler.release()
    conn.close()


def test_a_reads_log_messages_are_handed_on_together_in_order(gated_connection, monkeypatch):
    conn, handler = gated_connection
    puts: list[int] = []
    put_all = LogQueue.put_all
    monkeypatch.setattr(LogQueue, "put_all", lambda self, messages: (puts.append(len(messages)), put_all(self, messages))[1])
    conn.deliver_all([note(n) for n in range(50)])
    assert puts == [50]  # one hand-off for the read, not 50
    handler.release()
    assert conn.drops.logs == 0
    conn.close()
    assert handler.got == list(range(50))


def test_log_messages_before_a_response_are_queued_before_its_caller_is_answered(gated_connection, monkeypatch):
    conn, handler = gated_connection
    order: list[Any] = []
    put_all = LogQueue.put_all
    monkeypatch.setattr(LogQueue, "put_all",
                        lambda self, messages: (order.append(("logs", len(messages))), put_all(self, messages))[1])
    pending = conn.send_request("tools/call", {"name": "x"})
    answer = pending.inbox.answer
    pending.inbox.answer = lambda message: (order.append("response"), answer(message))  # type: ignore[method-assign]
    conn.deliver_all([note(1), note(2), {"jsonrpc": "2.0", "id": pending.id, "result": {}}, note(3)])
    # A caller the response wakes (who may close the client, which flushes
    # the log queue) finds the log messages before it queued already.
    assert order == [("logs", 2), "response", ("logs", 1)]
    assert conn.wait(pending, timeout=5)["result"] == {}


def test_from_half_full_a_reads_log_messages_go_one_at_a_time_each_letting_the_handler_run(
        gated_connection, monkeypatch):
    conn, handler = gated_connection
    conn.deliver_all([note(0)])
    assert handler.holding.wait(10)  # the handler holds message 0: nothing more is taken
    yields: list[float] = []
    monkeypatch.setattr(engine_threads.time, "sleep", lambda seconds: yields.append(seconds))
    half = MAX_QUEUED_LOGS // 2
    conn.deliver_all([note(n) for n in range(1, 201)])
    monkeypatch.undo()
    # Handed on by the quarter (64, then 128 wait: half), then one at a
    # time, each letting the log thread run: one yield at half, then one
    # for each of the 72 after it.
    assert yields == [0] * (1 + 200 - half)
    handler.release()
    conn.close()
    assert conn.drops.logs == 0 and handler.got == list(range(201))


# -- what must not be lost: a handler that ends its thread, a failure, no thread ------------


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit, on purpose
def test_messages_waiting_behind_a_handler_that_ends_its_thread_are_still_handled(pool):
    got: list[int] = []
    go = threading.Event()

    def handler(params: dict[str, Any]) -> None:
        if params["n"] == 0:
            assert go.wait(10)  # 1 and 2 are queued while 0 is in hand
            raise SystemExit
        got.append(params["n"])

    queue = LogQueue(pool, handler, limit=MAX_QUEUED_LOGS)
    queue.put_all([{"n": 0}])
    queue.put_all([{"n": 1}, {"n": 2}])  # the drain runs: no job of their own
    go.set()
    assert pool.flush(10)
    assert got == [1, 2]  # the ending drain left them a new one


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_close_hands_on_the_messages_behind_a_handler_that_ended_its_thread():
    got: list[Any] = []

    def handler(params: dict[str, Any]) -> None:
        if params["data"] == 0:
            raise SystemExit
        got.append(params["data"])

    conn = Connection(PlayedTransport(), new_id_counter(), on_log=handler)
    conn.start()
    conn.deliver_all([note(0), note(1), note(2)])
    conn.close()  # flushes the log messages already received
    assert got == [1, 2] and conn.drops.logs == 0


def test_log_messages_before_a_failure_in_the_same_read_are_queued_before_it_is_told():
    # An invalid message fails the channel, which wakes every caller and
    # tells the connection's owner; a close() either of them makes flushes
    # the log queue: the read's log messages before it must be there.
    got: list[Any] = []

    def on_failed(conn: Connection, error: Any) -> None:
        conn.close()

    conn = Connection(PlayedTransport(), new_id_counter(), on_log=lambda params: got.append(params["data"]),
                      on_failed=on_failed)
    conn.start()
    conn.deliver_all([note(1), note(2), {"jsonrpc": "1.0", "method": "x"}])
    assert conn.failure is not None
    assert got == [1, 2] and conn.drops.logs == 0


def test_log_messages_before_a_notification_for_the_hook_are_queued_before_the_hook_runs(monkeypatch):
    order: list[Any] = []
    put_all = LogQueue.put_all
    monkeypatch.setattr(LogQueue, "put_all",
                        lambda self, messages: (order.append(("logs", len(messages))), put_all(self, messages))[1])
    conn = Connection(PlayedTransport(), new_id_counter(), on_log=lambda params: None,
                      on_notification=lambda message: order.append(message["method"]))
    conn.start()
    try:
        conn.deliver_all([note(1), note(2), {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}])
    finally:
        conn.close()
    assert order == [("logs", 2), "notifications/tools/list_changed"]


def test_messages_whose_drain_cannot_start_are_counted_as_dropped(monkeypatch):
    got: list[Any] = []
    conn = Connection(PlayedTransport(), new_id_counter(), on_log=lambda params: got.append(params["data"]))
    conn.start()
    start = threading.Thread.start

    def no_log_thread(self: threading.Thread) -> None:
        if self.name.startswith("mcp-sync-log"):
            raise RuntimeError("can't start new thread")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", no_log_thread)
    conn.deliver_all([note(1), note(2)])
    monkeypatch.undo()
    assert conn.drops.logs == 2
    conn.deliver_all([note(3)])  # a thread again: the next read is handed on
    conn.close()
    assert got == [3]


# -- the reader's hand-offs across reads, and the drop burst's summary ----------------------


def test_a_read_that_begins_with_the_queue_half_full_lets_the_handler_run_before_each(monkeypatch):
    # The handler takes exactly one message each time the reader lets go
    # of the GIL: it keeps up, just. Earlier reads left 250 waiting; the
    # next read of 64 must not drop any before it got its chances.
    got: list[int] = []
    permit = threading.Semaphore(0)  # one per message the handler may finish
    arrived = threading.Semaphore(0)  # the handler has the next message in hand

    def handler(params: dict[str, Any]) -> None:
        got.append(params["data"])
        arrived.release()
        assert permit.acquire(timeout=10)

    conn = Connection(PlayedTransport(), new_id_counter(), on_log=handler)
    conn.start()
    try:
        conn.deliver_all([note(0)])
        assert arrived.acquire(timeout=10)  # message 0 in hand
        monkeypatch.setattr(engine_threads.time, "sleep", lambda seconds: None)
        conn.deliver_all([note(n) for n in range(1, 251)])
        assert conn.drops.logs == 0

        def one_step(seconds: float) -> None:
            permit.release()
            assert arrived.acquire(timeout=10)

        monkeypatch.setattr(engine_threads.time, "sleep", one_step)
        conn.deliver_all([note(n) for n in range(251, 315)])
        monkeypatch.undo()
        assert conn.drops.logs == 0
    finally:
        for _ in range(400):
            permit.release()
        conn.close()
    assert got == list(range(315))


def test_the_drop_bursts_summary_comes_once_the_handler_caught_up_with_reads_of_several(caplog):
    handler = Gate()
    conn = Connection(PlayedTransport(), new_id_counter(), on_log=handler)
    conn.start()
    try:
        conn._threads._log_burst.quiet = 0.0  # (the burst's quiet time is not what this is about)
        conn.deliver_all([note(0)])
        assert handler.holding.wait(10)
        for start in range(1, 301, 50):  # reads of 50 while the handler is stuck: some dropped
            conn.deliver_all([note(n) for n in range(start, start + 50)])
        dropped = conn.drops.logs
        assert dropped == 300 - MAX_QUEUED_LOGS
        handler.release()
        assert conn._threads._logs.flush(10)  # caught up: nothing waits
        with caplog.at_level(logging.WARNING, logger="mcp_sync.connection"):
            for n in range(1000, 1010, 2):
                conn.deliver_all([note(n), note(n + 1)])  # reads of two log messages each
                assert conn._threads._logs.flush(10)
        summaries = [r.getMessage() for r in caplog.records if "were dropped while" in r.getMessage()]
        assert summaries == [f"{dropped} server log messages were dropped while the log handler was behind"]
    finally:
        handler.release()
        conn.close()
