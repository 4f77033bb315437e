"""Plumbing for the HTTP transport: a bounded connection pool, reusable
exchange threads, and the handle through which one exchange is cancelled.

No HTTP and no MCP here: connections come from a factory, jobs are plain
callables. What matters is that everything can be stopped from another
thread: a waiter for a connection wakes on `wake()` or `close()`, and
`Exchange.abort()` shuts the exchange's socket down under a blocked read.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from typing import Any, Callable

import urllib3.connection

from ..errors import ConnectionClosed

log = logging.getLogger("mcp_sync.transport.http")

Conn = urllib3.connection.HTTPConnection


class Pool:
    """At most `size` connections in use; idle ones kept for reuse.

    A waiter blocks on the condition until a connection is free, the pool
    closes, or its own `stop` event is set (`wake()` re-checks all waiters).
    """

    def __init__(self, factory: Callable[[], Conn], size: int) -> None:
        self._factory = factory
        self._size = size
        self._idle: list[Conn] = []
        self._in_use = 0
        self._closed = False
        self._cond = threading.Condition()

    def acquire(self, stop: threading.Event, deadline: float | None = None) -> Conn:
        """A connection, waiting for one to be free until `deadline` (a
        `time.monotonic()` value) at the latest."""
        with self._cond:
            while self._in_use >= self._size and not self._closed and not stop.is_set():
                if deadline is None:
                    self._cond.wait()
                elif not self._cond.wait(max(deadline - time.monotonic(), 0.0)):
                    raise ConnectionClosed("no connection was free before the request's deadline")
            if self._closed or stop.is_set():
                raise ConnectionClosed("the request was cancelled before it was sent")
            self._in_use += 1
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return self._factory()
        if conn.sock is not None and not conn.is_connected:
            conn.close()  # the server dropped the idle keep-alive; reopen on use
        return conn

    def release(self, conn: Conn, reusable: bool) -> None:
        if not reusable:
            conn.close()
        with self._cond:
            self._in_use -= 1
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for conn in idle:
            conn.close()


class ExchangeThreads:
    """Reusable exchange threads: a job goes to an idle thread, or a new one
    when none is idle. Threads live until `close()`, which joins them."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the connection is closed")
            if self._idle > 0:
                self._idle -= 1
            else:
                thread = threading.Thread(target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._jobs.put(job)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # an exchange reports its own errors; this is a bug guard
                log.exception("an HTTP exchange failed unexpectedly")
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()


class Exchange:
    """One request's HTTP exchange: what cancellation must reach."""

    __slots__ = ("request_id", "stop", "conn", "response", "pooled", "deadline", "on_caller", "handed_off",
                 "auth_pause")

    def __init__(self, request_id: int | str, *, pooled: bool = True, on_caller: bool = False,
                 deadline: float | None = None) -> None:
        self.request_id = request_id
        #: Seconds spent getting authorization (a person may be approving in
        #: a browser): added to the deadline, as the caller's clock stops.
        self.auth_pause = 0.0
        self.pooled = pooled  # the GET stream has a connection of its own
        # Run on the calling thread (until an SSE stream is handed off to an
        # exchange thread); then socket reads are bounded by the deadline.
        self.on_caller = on_caller
        self.deadline = deadline
        self.handed_off = False
        self.stop = threading.Event()
        self.conn: Conn | None = None
        self.response: Any = None

    def abort(self) -> None:
        self.stop.set()
        response, conn = self.response, self.conn
        if response is not None:
            try:
                response.shutdown()
            except (OSError, AttributeError, RuntimeError):
                pass  # already finished and released: nothing to stop
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
