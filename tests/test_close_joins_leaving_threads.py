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
from tests.conftest import demo_command, wait_until


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
    held = client._held
    spare = mcp_sync.connect(demo_command())  # a connection to give the closer
    conn = spare._held.conn
    spare._held.conn = None
    lock = LingeringLock(held.lock, lambda me: me.name == "mcp-sync-closer" and me not in held.closers)
    held.lock = lock
    try:
        held.close_later(conn, "given up")
        assert wait_until(lambda: bool(lock.held))  # closed it, off the roll, not ended
    finally:
        client.close()
        spare.close()
    assert not lock.held[0].is_alive(), "the closer outlived close()"


def test_close_joins_a_reconnect_thread_that_found_nothing_to_do():
    client = mcp_sync.connect(demo_command())
    held = client._held
    lock = LingeringLock(held.lock, lambda me: me.name == "mcp-sync-reconnect" and held.healer is None)
    held.lock = lock
    try:
        client._heal_soon()  # nothing interrupted: it looks once and ends
        assert wait_until(lambda: bool(lock.held))
    finally:
        client.close()
    assert not lock.held[0].is_alive(), "the reconnect thread outlived close()"


def test_the_roll_of_leaving_threads_stays_bounded():
    with mcp_sync.connect(demo_command()) as client:
        for _ in range(20):  # each looks once, finds nothing, and ends
            client._heal_soon()
            healer = client._held.healer
            if healer is not None:
                healer.join(5)
        assert wait_until(lambda: client._held.healer is None)
        assert len(client._held.leaving) <= 1
