"""`Client.close()` joins the client's short-lived threads even once they
have taken themselves off the roll `close()` reads: an `mcp-sync-closer`
that has closed its connection, an `mcp-sync-reconnect` that found nothing
more to do. Each has a last step after that (releasing the client's lock,
returning), and a loaded machine can deschedule it there; these tests hold
it there a moment with a lock that lingers after its release."""

from __future__ import annotations

import threading
from typing import Any

import mcp_sync
from tests.helpers import NoThread, demo_command, wait_until


class LingeringLock:
    """The client's lock, except that `leaving(thread)` threads wait a
    moment right after they release it: the window between a thread
    leaving the roll (under the lock) and its end."""

    def __init__(self, lock: Any, leaving: Any, hold: float = 0.5) -> None:
        self._lock = lock
        self._leaving = leaving
        self._hold = hold
        self.held: list[threading.Thread] = []

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        return self._lock.acquire(*args, **kwargs)

    def release(self) -> None:
        self._lock.release()
        me = threading.current_thread()
        if me not in self.held and self._leaving(me):
            self.held.append(me)
            threading.Event().wait(self._hold)  # widens the window; nothing waits for it to pass

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def test_close_joins_a_closer_that_has_closed_its_connection():
    client = mcp_sync.connect(demo_command())
    held = client._supervisor
    spare = mcp_sync.connect(demo_command())  # a connection to give the closer
    conn = spare._supervisor.conn
    spare._supervisor.conn = None
    roll = held.closers
    lock = LingeringLock(roll.lock, lambda me: me.name == "mcp-sync-closer" and me not in roll.running)
    roll.lock = lock
    try:
        held.close_later(conn, "given up")
        assert wait_until(lambda: bool(lock.held))  # closed it, off the roll, not ended
    finally:
        client.close()
        spare.close()
    assert not lock.held[0].is_alive(), "the closer outlived close()"


def test_close_joins_a_reconnect_thread_that_found_nothing_to_do():
    client = mcp_sync.connect(demo_command())
    held = client._supervisor
    lock = LingeringLock(held.healer.lock, lambda me: me.name == "mcp-sync-reconnect" and held.healer.thread is None)
    held.healer.lock = lock
    try:
        held.healer.soon()  # nothing interrupted: it looks once and ends
        assert wait_until(lambda: bool(lock.held))
    finally:
        client.close()
    assert not lock.held[0].is_alive(), "the reconnect thread outlived close()"


def test_the_roll_of_leaving_threads_stays_bounded():
    with mcp_sync.connect(demo_command()) as client:
        for _ in range(20):  # each looks once, finds nothing, and ends
            client._supervisor.healer.soon()
            assert wait_until(lambda: client._supervisor.healer.thread is None)
            for thread in client._supervisor.closers.left():
                thread.join(5)
        # Each one that left was let go once it had ended: only the last is kept.
        assert len(client._supervisor.closers.left()) == 1


def test_close_waits_for_a_starting_connection_being_abandoned():
    # A reconnect that gives up on a new connection closes it. close() of the
    # client meanwhile must wait for that close, not return while it runs:
    # the connection stays among those starting until it is closed.
    from mcp_sync.connection import Connection, new_id_counter
    from mcp_sync.transports.base import Transport

    closing, closed = threading.Event(), []

    class SlowToClose(Transport):
        close_budget = 5.0

        def start(self, sink: Any) -> None:
            pass

        def send(self, message: Any, headers: Any = None) -> None:
            pass

        def close(self) -> None:
            closing.set()
            threading.Event().wait(1.0)  # a server slow to go; well inside the budget
            closed.append(True)

    client = mcp_sync.connect(demo_command())
    conn = Connection(SlowToClose(), new_id_counter())
    conn.start()
    with client._supervisor.lock:
        client._supervisor.starting.add(conn)
    giving_up = threading.Thread(target=client._supervisor.abandon, args=(conn, "the new server never answered"))
    giving_up.start()
    assert closing.wait(5)
    client.close()
    assert closed == [True], "close() returned while a connection it owned was still closing"
    giving_up.join(5)


def test_a_reconnect_thread_that_cannot_start_leaves_nothing_to_join(monkeypatch, caplog):
    import mcp_sync.healing as healing

    client = mcp_sync.connect(demo_command())
    monkeypatch.setattr(healing.threading, "Thread", NoThread)
    client._supervisor.healer.soon()
    monkeypatch.undo()
    assert client._supervisor.healer.thread is None and "no thread to reconnect" in caplog.text
    client.close()  # joins nothing that never started


def test_a_closer_past_its_budget_is_still_handed_back_to_close():
    # `done()` stops waiting for a close past its budget, so that a
    # reconnect goes on; the thread still runs, and `shut()` (the client's
    # `close()`) must still hand it back to join. It was dropped from every
    # list: `close()` returned with that thread running.
    from mcp_sync.closers import Closers

    release = threading.Event()

    class SlowToClose:
        close_budget = 0.05

        def close(self, reason: str = "") -> None:
            release.wait(30)

    closers = Closers()
    closers.close_later(SlowToClose(), "test")  # type: ignore[arg-type]
    [closer] = [thread for thread in closers.running]
    try:
        assert closers.done(None) is True  # gave up on it at its budget
        assert closer.is_alive()
        closers.shut()
        assert closer in closers.left()
    finally:
        release.set()
        closer.join(30)
    assert not closer.is_alive()
