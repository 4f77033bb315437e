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
a message here, which never blocks: when the queue is full the message is
dropped and logged (the peer is not reading what we already wrote, so one
more message would not help it either).

Three lanes, because the peer waits for some messages and not for others.
An answer to a server request, and a refusal of one (the handlers were
full), is owed: a server waits for each, so a flood of thousands of
requests must get thousands of answers, not the first few hundred.
Answers may wait up to `max_queued`; small ones (refusals, a ping's `{}`)
up to `max_small_bytes`, thousands of them: a flood's refusals come
faster than a pipe takes them, and each is small, but its id is the
server's and may be long, so they are counted in bytes. Cancellations and
other `spare` messages, which the peer copes without, may use half of
`max_queued`, so they never crowd out the owed ones. One queue holds all
three, so messages are written in the order they came.

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
#: The bytes of small answers (refusals, pings) that may wait to be written: one
#: costs `SMALL_COST` (what its message takes in memory, measured: about
#: 430 bytes) plus its id's length, so 4 MiB is about 8,000 of them.
DEFAULT_MAX_SMALL_BYTES = 4 * 1024 * 1024
SMALL_COST = 512

#: The lanes of the queue (see `Sender.put`).
ANSWER, SMALL, SPARE = "answer", "small", "spare"

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
                 max_small_bytes: int = DEFAULT_MAX_SMALL_BYTES, name: str = "mcp-sync-sender",
                 writers: int = 1) -> None:
        if isinstance(writers, bool) or not isinstance(writers, int) or writers < 1:
            raise ValueError(f"writers must be a positive integer, not {writers!r}")
        self._write = write
        self._max_queued = max_queued
        self._max_small_bytes = max_small_bytes
        self._name = name
        self._writers = writers
        self._cond = threading.Condition(threading.Lock())
        # Each entry: (message, lane, cost); `_lanes` sums the queued
        # entries' costs per lane (1 each; a small one its bytes), so each
        # lane's bound is checked in O(1).
        self._queue: deque[tuple[Mapping[str, Any], str, int]] = deque()
        self._lanes = {ANSWER: 0, SMALL: 0, SPARE: 0}
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

    def put(self, message: Mapping[str, Any], *, spare: bool = False, small: bool = False) -> bool:
        """Queue `message`; never blocks. False when it was dropped (its
        lane full, or closed). A `spare` message (a cancellation: the peer
        copes without it) may only fill half of `max_queued`, so that answers
        always find room; a `small` answer (a refusal, a ping's) has a lane
        of `max_small_bytes` of its own, so a flood's refusals all reach a
        peer that reads, however fast they come."""
        if small:
            lane, limit = SMALL, self._max_small_bytes
            request_id = message.get("id")
            cost = SMALL_COST + (len(request_id) if isinstance(request_id, str) else 0)
        else:
            lane, limit, cost = (SPARE, self._max_queued // 2, 1) if spare else (ANSWER, self._max_queued, 1)
        with self._cond:
            if self._closed:
                return False
            full = self._lanes[lane] + cost > limit
            if full:
                self.dropped += 1
            else:
                self._queue.append((message, lane, cost))
                self._lanes[lane] += cost
                self._ensure_thread()
                self._cond.notify()
        if full:  # logged outside the lock: logging handlers are user code
            log.warning("the sender's queue is full (%d messages): dropped %s", limit,
                        message.get("method") or f"the answer to {message.get('id')!r}")
        return not full

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
            while True:
                if self._closed:
                    return None
                if self._queue:
                    self._busy += 1
                    message, lane, cost = self._queue.popleft()
                    self._lanes[lane] -= cost
                    return message
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
    def room_for_answers(self) -> int:
        """How many more answers may be queued before one is dropped: a
        request whose answer might not find room should be refused instead
        (a refusal has its own lane)."""
        with self._cond:
            return self._max_queued - self._lanes[ANSWER]

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
            self._lanes = dict.fromkeys(self._lanes, 0)
            self._heap.clear()
            self._due.clear()
            self._cond.notify_all()
            threads = [thread for thread in self._threads if thread is not threading.current_thread()]
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            try:
                thread.join(remaining(deadline))
            except RuntimeError:  # never started (an interrupt in `start()`): nothing to wait for
                continue
        return not any(thread.is_alive() for thread in threads)
