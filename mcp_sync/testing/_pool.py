"""A small worker-thread pool owned by one server session.

It owns the threads that run a session's request handlers. Threads are started
lazily, only when a job is queued and no worker is free, up to `max_workers`;
an idle worker waits on the job queue. `close()` drops the jobs not yet
started, asks every worker to stop, and joins every thread the pool started,
except the calling thread when `close()` runs on a worker itself (a handler
or a `send` callback closing its own session): that thread ends as soon as its
current job returns.

Accounting, all under `_lock`: `_pending` jobs are queued and not yet taken,
`_idle` workers are waiting for a job, `_starting` threads were started and
have not yet reached the queue. A job needs a new thread only when
`_pending > _idle + _starting`.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

_log = logging.getLogger(__name__)

Job = Callable[[], None]


class WorkerPool:
    """Run jobs on up to `max_workers` lazily started daemon threads."""

    def __init__(self, max_workers: int = 16, name: str = "mcp-testing-worker") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max_workers = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._pending = 0
        self._idle = 0
        self._starting = 0
        self._closed = False

    def submit(self, job: Job) -> bool:
        """Queue `job`; False (and the job is dropped) once the pool is closed."""
        with self._lock:
            if self._closed:
                return False
            self._pending += 1
            self._queue.put(job)
            if self._pending > self._idle + self._starting and len(self._threads) < self._max_workers:
                self._starting += 1
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads) + 1}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return True

    def _work(self) -> None:
        with self._lock:
            self._starting -= 1
            self._idle += 1
        while True:
            job = self._queue.get()
            if job is None:
                return
            with self._lock:
                self._idle -= 1
                self._pending -= 1
            try:
                job()
            except BaseException:  # a job must never kill its worker
                _log.exception("unhandled error in a server worker job")
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Stop accepting jobs, drop queued ones, join every worker thread.

        Idempotent, and every call joins: when it returns, no worker started
        by this pool is running (except the caller, if it is one)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                while True:
                    try:
                        dropped = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if dropped is not None:
                        self._pending -= 1
                for _ in self._threads:
                    self._queue.put(None)
            threads = list(self._threads)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join()

    @property
    def thread_count(self) -> int:
        """How many threads this pool has started so far."""
        with self._lock:
            return len(self._threads)

    def threads(self) -> list[threading.Thread]:
        """The threads this pool started (for tests and diagnostics)."""
        with self._lock:
            return list(self._threads)
