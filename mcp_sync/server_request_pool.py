"""The handler pool: where work that belongs to no caller runs.

What it owns: a few threads (at most `max_workers`, started on demand,
retired after `idle_seconds` without work) and a bounded queue of jobs. The
jobs are the client's handlers for server requests no caller can take, and
the client's log handler for log messages that came for no call.
What it must not know: what a job does.

Why a pool and not one thread: a handler may itself make a call that the
server answers with a request of its own (an elicitation inside a tool the
handler called); with one serial thread that nested request would wait
behind the handler that is waiting for it. Why a bound: a server that
floods requests must cost bounded memory; `submit()` says no at once and
the engine refuses the request (through the sender, never from the reader).
Log messages have a bounded queue of their own (`engine_threads.LogQueue`),
drained by one job on a pool of one worker.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Callable

from .waiting import deadline_in, remaining

log = logging.getLogger("mcp_sync.connection")

Job = Callable[[], None]


class HandlerPool:
    """Runs jobs on up to `max_workers` threads; at most `max_pending` jobs
    are queued or running at once.

    Example::

        pool = HandlerPool(max_workers=4, max_pending=16)
        if not pool.submit(lambda: answer(message)):
            refuse(message)          # full: said at once, never blocks
        pool.close(timeout=1.0)
    """

    def __init__(self, *, max_workers: int = 4, max_pending: int = 16, idle_seconds: float = 30.0,
                 name: str = "mcp-sync-handler") -> None:
        if max_workers < 1 or max_pending < 1:
            raise ValueError("a handler pool needs at least one worker and room for one job")
        self._max_workers = max_workers
        self._max_pending = max_pending
        self._active = 0  # queued or running
        self._idle_seconds = idle_seconds
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[Job] = deque()
        self._threads: set[threading.Thread] = set()
        #: Workers that took themselves off `_threads` (closing down, retired,
        #: or ended by a job) and may not have ended yet: `close()` joins
        #: them too. Pruned of ended ones whenever one is added, so it holds
        #: at most about `max_workers` threads.
        self._leaving: list[threading.Thread] = []
        self._idle = 0
        self._serial = 0
        self._closed = False

    def submit(self, job: Job) -> bool:
        """Queue `job`; False (at once) when `max_pending` jobs are queued or
        running already, or the pool is closed."""
        with self._cond:
            if self._closed or self._active >= self._max_pending:
                return False
            self._active += 1
            self._jobs.append(job)
            # A worker is started only when the idle ones cannot take every
            # queued job; an extra notify is harmless (a woken worker that
            # finds nothing waits again).
            if len(self._jobs) > self._idle and len(self._threads) < self._max_workers:
                self._serial += 1
                thread = threading.Thread(target=self._run, name=f"{self._name}-{self._serial}", daemon=True)
                self._threads.add(thread)  # counted now, so no other submit over-starts
                try:
                    thread.start()
                except BaseException:  # no thread to be had: undo, the caller refuses
                    self._threads.discard(thread)
                    self._jobs.pop()
                    self._active -= 1
                    return False
            else:
                self._cond.notify()
        return True

    def _run(self) -> None:
        me = threading.current_thread()  # counted by whoever started it
        try:
            self._work(me)
        finally:
            # However the thread ends (a job that raised SystemExit, say), it
            # no longer counts, and a queued job gets a thread of its own.
            with self._cond:
                self._leave(me)
                orphaned = bool(self._jobs) and not self._closed and not self._idle
            if orphaned:
                self._replace()

    def _leave(self, me: threading.Thread) -> None:
        """(Under the lock; idempotent.) `me` no longer counts as a worker,
        but runs on for a moment: `close()` must still join it."""
        if me in self._threads:
            self._threads.discard(me)
            self._leaving = [thread for thread in self._leaving if thread.is_alive()]
            self._leaving.append(me)

    def _replace(self) -> None:
        # Started under the lock, as in `submit`: a close() meanwhile either
        # comes first (no thread then) or finds this one started to join.
        with self._cond:
            if self._closed:
                return
            self._serial += 1
            thread = threading.Thread(target=self._run, name=f"{self._name}-{self._serial}", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no thread to be had: the jobs wait for the next submit's worker
                log.warning("no thread to replace a handler worker that ended")
                return
            self._threads.add(thread)

    def _work(self, me: threading.Thread) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._idle += 1
                    woke = self._cond.wait(self._idle_seconds)
                    self._idle -= 1
                    if not woke and not self._jobs:
                        self._leave(me)  # idle long enough: retire
                        return
                if self._closed:
                    self._leave(me)
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a handler bug must not end the worker
                log.exception("a server-request or log handler raised")
            finally:
                with self._cond:
                    self._active -= 1
                    if not self._active:
                        self._cond.notify_all()  # for `flush()`

    @property
    def active(self) -> int:
        """Jobs queued or running now."""
        with self._cond:
            return self._active

    @property
    def threads(self) -> int:
        """Worker threads alive now."""
        with self._cond:
            return len(self._threads)

    def flush(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for every queued and running job
        to finish: True when none is left. From one of the pool's own
        threads it returns False at once (it would wait for itself).

        Example::

            pool.flush(0.5)   # the log messages already received, handled
            pool.close(timeout=0)
        """
        deadline = deadline_in(timeout)
        with self._cond:
            if threading.current_thread() in self._threads:
                return not self._active
            while self._active and not self._closed:
                left = remaining(deadline)
                if left <= 0:
                    break
                self._cond.wait(left)
            return not self._active

    def close(self, timeout: float | None = None) -> bool:
        """Drop queued jobs and end the workers, waiting at most `timeout`
        in all for running jobs to return. True when every worker ended; a
        handler still blocked then (a person who never answers) is left to
        finish on its own daemon thread, and its answer is not sent."""
        with self._cond:
            self._closed = True
            self._active -= len(self._jobs)
            self._jobs.clear()
            self._cond.notify_all()
            me = threading.current_thread()
            threads = [t for t in (*self._threads, *self._leaving) if t is not me]
        deadline = deadline_in(timeout)
        for thread in threads:
            thread.join(remaining(deadline))
        return not any(thread.is_alive() for thread in threads)

