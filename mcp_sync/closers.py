"""Closing connections off the caller's thread, without a thread outliving
the client's `close()`.

What it owns: the connections being closed on threads of their own (a
reconnect must not wait out a wedged server's shutdown: a stdio server gets
its shutdown time at each of three steps), how long each close may take,
and the supervisor's threads that took themselves off their roll but may
still be running their last steps. `shut()` (the supervisor's `close()`)
hands back every one of them to join, and from then on closes inline.

What it must not know: why a connection is closed, or the supervisor's
state; it only closes, waits and counts threads.

Lock discipline: `lock` guards `running`, `leaving` and `closing`; nothing
blocks under it. A caller may hold the supervisor's lock or the healer's
(`healing.Healer.lock`) when it calls `leave()`; this class takes neither,
so the order is always theirs, then this one.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from .connection import Connection


class Closers:
    """The closes in progress and the threads on their way out (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.lock = threading.Lock()
        #: Closer threads, with the connection each closes and its budget.
        self.running: dict[threading.Thread, tuple[Connection, float]] = {}
        #: Threads off their roll that may not have ended yet.
        self.leaving: list[threading.Thread] = []
        self.closing = False
        self.clock = clock

    def leave(self, thread: threading.Thread) -> None:
        """`thread`, just taken off its roll, runs on for a moment: `shut()`
        still hands it back. Ended ones are let go here, so the list stays short."""
        with self.lock:
            self._leave(thread)

    def _leave(self, thread: threading.Thread) -> None:
        self.leaving = [other for other in self.leaving if other.is_alive()]
        self.leaving.append(thread)

    def close_later(self, conn: Connection, reason: str) -> None:
        """Close `conn` on a thread of its own, one per connection. Once
        shut, or when no thread can be started, it is closed here and now."""
        def run() -> None:
            try:
                conn.close(reason)
            finally:
                with self.lock:
                    if self.running.pop(thread, None) is not None:
                        self._leave(thread)

        thread = threading.Thread(target=run, name="mcp-sync-closer", daemon=True)
        with self.lock:
            if any(closing is conn for closing, _ in self.running.values()):
                return
            if not self.closing:
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had: close it on this one
                    pass
                else:
                    self.running[thread] = (conn, conn.close_budget + 1.0)
                    return
        conn.close(reason)

    def done(self, deadline: float | None) -> bool:
        """Wait for the closes in progress, each up to its budget and all up
        to `deadline` (of `clock`): False if the deadline came first."""
        while True:
            with self.lock:
                running = list(self.running.items())
            if not running:
                return True
            closer, (_, budget) = running[0]
            wait = budget if deadline is None else min(budget, deadline - self.clock())
            if wait <= 0:
                return False
            closer.join(wait)
            if closer.is_alive():
                if deadline is not None and self.clock() >= deadline:
                    return False
                with self.lock:
                    # Past its budget: no longer waited for here, but still
                    # running, so `shut()` hands it back with the leaving ones.
                    if self.running.pop(closer, None) is not None:
                        self._leave(closer)

    def shut(self) -> None:
        """From now on close inline, and wait for every close in progress,
        each up to its budget (not the caller's own thread)."""
        with self.lock:
            self.closing = True
            running = list(self.running.items())
        for closer, (_, budget) in running:
            if closer is not threading.current_thread():
                closer.join(budget)

    def left(self) -> list[threading.Thread]:
        """The threads that left their roll and may still run."""
        with self.lock:
            return list(self.leaving)

    def after_fork(self) -> None:
        """In a fork child: let go of the parent's closes without IO (the
        parent's threads close them; this process only drops its copies)."""
        self.lock = threading.Lock()
        for closing, _ in self.running.values():
            closing.discard()
        self.running = {}
        self.leaving = []
