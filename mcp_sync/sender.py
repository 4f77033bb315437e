"""The sender: one writer per connection for everything that is not a
caller's own request.

What it owns: a bounded queue of outgoing messages (cancellations, answers
to server requests, refusals, keepalive probes), the thread that writes
them, and the deadlines of answers that must go out by a time (a handler
that overran its `handler_timeout` is answered with an error then).
What it must not know: what the messages mean, or how the transport writes.

Why it exists: whoever reads (the reader thread) must never write, or a
server that floods requests before reading its stdin deadlocks the pipe;
and whoever gave up (a timed-out or interrupted caller) must never block on
IO, or a deadline or a Ctrl-C is overrun by a slow write. Both only `put()`
a message here, which never blocks.

What happens when the peer does not read as fast as we write depends on
the message (the invariant that keeps the queue bounded without losing an
answer):

- A *spare* message (a cancellation, a keepalive probe: the peer copes
  without it) may only fill half the queue (`max_queued // 2`); beyond,
  it is dropped and logged.
- An *answer* to a server request (its result, or an error: a refusal
  "too many server requests" too) is never dropped while the sender is
  open: the server would wait for it for ever, and JSON-RPC owes an answer
  to every request. Its room is made where answers come from instead:
  whoever reads calls `wait_for_room()` before it hands a server request
  on for an answer that nothing else holds back (the handler pool's, a
  refusal for load, ping: `EngineThreads.take`; a call's full inbox's
  refusal; see `Delivery`), which waits (backpressure: the reader stops
  reading, so the server's pipe or stream fills and the server waits)
  while the queue holds half the bound or more, until it is down to a
  quarter. A caller never waits there (one that gave up hands on what
  its inbox held without waiting: the inbox bounded it). So at most
  `max_queued // 2` spare messages and answers of requests taken in below
  the mark are queued, plus one answer for each server request owed at
  that moment by a handler, a caller's inbox or a client task (each of
  them bounded: the handler pools' `max_pending`, an inbox's
  `max_requests`, the client-task table), plus one per reading thread
  that passed the mark at once. Nothing else puts an answer; an answer
  due at a deadline is made and written by the sender's own thread, never
  queued.

A server that writes requests without ever reading our answers then stalls
its own connection (its requests wait in its pipe) rather than costing
the client unbounded memory or lost answers; the client's calls still end
at their deadlines, and `close()` wakes a reader waiting here.

The thread starts on first use and ends at `close()`; a write blocked in
the transport is ended by the transport's own `close()`, which the
connection does before joining this thread. A transport whose messages are
requests of their own (HTTP: a POST each, in any order) may have them
written `writers` at a time: one that the server leaves unanswered then
holds up only its own thread, not the answers queued behind it nor an
answer due at a deadline. More threads start only when a message waits,
or a deadline is pending, and every thread is writing.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, Callable

from .errors import TransportError
from .waiting import remaining

log = logging.getLogger("mcp_sync.connection")

DEFAULT_MAX_QUEUED = 1024

#: A message factory run at a deadline: the message to send then, or None.
Due = Callable[[], "Mapping[str, Any] | None"]


class Sender:
    """Writes queued messages through `write` on its own thread.

    Example::

        sender = Sender(transport.send)
        sender.put({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {...}})
        sender.close(timeout=1.0)
    """

    def __init__(self, write: Callable[[Mapping[str, Any]], None], *, max_queued: int = DEFAULT_MAX_QUEUED,
                 name: str = "mcp-sync-sender", writers: int = 1) -> None:
        if isinstance(writers, bool) or not isinstance(writers, int) or writers < 1:
            raise ValueError(f"writers must be a positive integer, not {writers!r}")
        self._write = write
        self._max_queued = max_queued
        self._name = name
        self._writers = writers
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        # Whoever reads waits here for room (`wait_for_room`): a condition of
        # its own on the same lock, so that a `notify()` meant for a writer
        # (a message put, a deadline set) never wakes the reader instead.
        self._room = threading.Condition(lock)
        self._queue: deque[Mapping[str, Any]] = deque()
        # Deadlines: a heap of (when, seq, key); a key's factory lives in
        # `_due` until it runs or is cancelled, so a cancelled one is skipped.
        self._heap: list[tuple[float, int, Any]] = []
        self._due: dict[Any, Due] = {}
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._busy = 0  # threads writing (or running a due factory) now
        #: Messages dropped because the queue was full (for tests and status).
        self.dropped = 0

    def put(self, message: Mapping[str, Any], *, spare: bool = False) -> bool:
        """Queue `message`; never blocks. False when it was dropped (closed,
        or a `spare` message that found half the queue full). A `spare`
        message (a cancellation, a probe: the peer copes without it) may
        only fill half the queue; any other (an answer to a server request,
        a refusal too) is never dropped while open: its room is kept by
        `wait_for_room()` (see the module notes)."""
        limit = self._max_queued // 2
        with self._cond:
            if self._closed:
                return False
            full = spare and len(self._queue) >= limit
            if full:
                self.dropped += 1
            else:
                self._queue.append(message)
                self._ensure_thread()
                self._cond.notify()
        if full:  # logged outside the lock: logging handlers are user code
            log.warning("the sender's queue is full (%d messages): dropped %s", limit,
                        message.get("method") or f"the answer to {message.get('id')!r}")
        return not full

    @property
    def crowded(self) -> bool:
        """Half the bound or more is queued (read without the lock: a hint
        for the reader's hot path; `wait_for_room()` decides)."""
        return len(self._queue) >= self._max_queued // 2

    def wait_for_room(self) -> bool:
        """For whoever reads, before it takes in a server request (whose
        answer will be queued here): when half the bound or more is
        queued, wait until a quarter or less is (the writes drain it), or
        the sender closes. Returns at once on the sender's own threads (a
        write may deliver in-process: it must never wait for itself).
        True when it waited."""
        if not self._max_queued // 2 <= len(self._queue):
            return False
        low = self._max_queued // 4
        me = threading.current_thread()
        with self._cond:
            if me in self._threads:
                return False
            waited = False
            # (No thread, which only a failed `start()` leaves: nothing
            # would drain the queue, so nobody waits for it.)
            while len(self._queue) > low and not self._closed and self._threads:
                waited = True
                self._room.wait()
            return waited

    def at(self, when: float, key: Any, make: Due) -> None:
        """At `when` (a `time.monotonic()` value), send what `make()` returns
        (nothing when it returns None). One entry per key; `cancel(key)`
        forgets it. `make` runs on the sender's thread and must not block."""
        with self._cond:
            if self._closed:
                return
            self._due[key] = make
            heapq.heappush(self._heap, (when, next(self._seq), key))
            if len(self._heap) > 4 * len(self._due) + 64:
                # Cancelled entries are skipped lazily; rebuild before they pile up.
                self._heap = [entry for entry in self._heap if entry[2] in self._due]
                heapq.heapify(self._heap)
            self._ensure_thread()
            self._cond.notify()

    def cancel(self, key: Any) -> None:
        with self._cond:
            self._due.pop(key, None)

    def _ensure_thread(self) -> None:
        """(Under the lock.) A thread for what waits: the first, or another
        when `writers` allows and fewer threads are free than there is
        work. Work is each queued message, and the deadlines as one: a free
        thread waits for the earliest, so one that comes due while every
        thread is writing (a handler-timeout answer behind a POST the
        server leaves unanswered) is not held up by those writes."""
        threads = self._threads
        work = len(self._queue) + (1 if self._due else 0)
        if threads and (work <= len(threads) - self._busy or len(threads) >= self._writers):
            return  # enough are free (and are notified), or the most already write
        name = self._name if not threads else f"{self._name}-{len(threads) + 1}"
        thread = threading.Thread(target=self._run, name=name, daemon=True)
        # On the roll before it starts, so that close() joins it whatever
        # stops `start()` half-way (an interrupt); off it if it never ran.
        threads.append(thread)
        try:
            thread.start()
        except RuntimeError:
            threads.remove(thread)
            if not threads:
                raise
            log.warning("no thread for another writer: the %d there are go on", len(threads))

    def _next(self, was_busy: bool) -> Mapping[str, Any] | Due | None:
        """The next message to write, or a due factory to run (outside the
        lock: it takes the connection's lock), waiting for one; None once
        closed. `was_busy`: the calling thread ran one before."""
        with self._cond:
            if was_busy:
                self._busy -= 1
                self._cond.notify_all()  # for `flush()`
                if len(self._queue) <= self._max_queued // 4:
                    self._room.notify_all()  # for `wait_for_room()`
            while True:
                if self._closed:
                    return None
                if self._queue:
                    self._busy += 1
                    return self._queue.popleft()
                timeout = None
                while self._heap:
                    when, _, key = self._heap[0]
                    if key not in self._due:
                        heapq.heappop(self._heap)
                        continue
                    timeout = remaining(when)
                    if timeout <= 0:
                        heapq.heappop(self._heap)
                        self._busy += 1
                        due = self._due.pop(key)
                        # This thread may be the one that waited for the
                        # deadlines: another waits for the next, if any.
                        self._ensure_thread()
                        return due
                    break
                self._cond.wait(timeout)

    def _run(self) -> None:
        busy = False
        while True:
            item = self._next(busy)
            if item is None:
                return
            busy = True
            message: Mapping[str, Any] | None = None
            try:
                message = item() if callable(item) else item
                if message is None:
                    continue
                self._write(message)
            except TransportError as exc:
                what = message.get("method") or f"the answer to {message.get('id')!r}" if message else "a message"
                log.debug("could not send %s: %s", what, exc)
            except Exception:  # a transport bug must not end the only writer
                log.exception("the transport failed to send a message")

    @property
    def pending(self) -> int:
        """Messages queued and not yet written."""
        with self._cond:
            return len(self._queue)

    def flush(self, timeout: float) -> bool:
        """Wait (at most `timeout`) until everything queued is written: a
        connection that closes still sends the cancellations it queued.
        True when nothing is left."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._queue or self._busy) and not self._closed:
                left = remaining(deadline)
                if left <= 0 or not self._threads:
                    return False
                self._cond.wait(left)
            return not self._queue

    def close(self, timeout: float | None = None) -> bool:
        """Drop what is queued, end the thread (waiting at most `timeout`).
        True when the thread has ended."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._heap.clear()
            self._due.clear()
            self._cond.notify_all()
            self._room.notify_all()
            threads = [thread for thread in self._threads if thread is not threading.current_thread()]
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            try:
                thread.join(remaining(deadline))
            except RuntimeError:  # never started (an interrupt in `start()`): nothing to wait for
                continue
        return not any(thread.is_alive() for thread in threads)
