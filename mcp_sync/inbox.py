"""A request's inbox: everything addressed to one call, in arrival order, bounded.

The reader side of a connection puts (under the connection's lock: a put
never blocks and never logs); the one caller waiting for the request takes.
`Drops` counts what the bounds let go of, for the whole client.

A plain call (no progress, no log messages, no server requests) costs one
put and one blocking get of a `queue.SimpleQueue`: `Inbox.answer` is that
queue's own `put` until the first event of another kind arrives.
"""

from __future__ import annotations

import collections
import itertools
import logging
import queue
import threading
import time
from collections.abc import Iterable
from operator import itemgetter
from typing import Any, Callable

from .router import ADOPTED, LOG, PROGRESS, RESPONSE, SERVER_REQUEST

log = logging.getLogger("mcp_sync.connection")

#: The engine's own event kind, besides the router's: the call's channel
#: ended (the payload is the error).
CLOSED = "closed"
#: The most progress notifications waiting in one call's inbox; beyond, the
#: oldest is dropped (the caller always gets the latest).
INBOX_MAX_PROGRESS = 256
#: The most log messages waiting in one call's inbox; beyond, the oldest is dropped.
INBOX_MAX_LOGS = 256


class Drops:
    """What a client let go of to keep its memory bounded, counted by kind.
    Thread-safe; one object may be shared by a client's successive
    connections and its notification dispatcher.

    - `notifications`: notifications for no call, dropped oldest-first from
      the dispatcher's queue because a listener was slow;
    - `progress`: a call's progress notifications, dropped oldest-first from
      its inbox because the caller was slow (it still gets the latest);
    - `logs`: log messages dropped oldest-first (from a call's inbox, or
      waiting for the client's log handler);
    - `refused_requests`: server requests refused with an error because too
      many were waiting for one call.

    Example::

        drops = Drops()
        drops.add("progress", 3)
        assert drops.total == 3 and drops.as_dict()["progress"] == 3
    """

    KINDS = ("notifications", "progress", "logs", "refused_requests")
    """The kinds of drop counted, each an attribute of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.notifications = 0
        self.progress = 0
        self.logs = 0
        self.refused_requests = 0

    def add(self, kind: str, count: int = 1) -> None:
        """Count `count` more drops of `kind` (one of `KINDS`; `ValueError`
        for any other).

        Args:
            kind: Which counter, one of `KINDS`.
            count: How many drops to add.

        Raises:
            ValueError: `kind` is not one of `KINDS`.
        """
        if kind not in self.KINDS:
            raise ValueError(f"unknown kind of drop: {kind!r}")
        with self._lock:
            setattr(self, kind, getattr(self, kind) + count)

    @property
    def total(self) -> int:
        """Everything dropped or refused so far."""
        with self._lock:
            return self.notifications + self.progress + self.logs + self.refused_requests

    def as_dict(self) -> dict[str, int]:
        """The counts by kind, taken together (a consistent snapshot), every
        kind of `KINDS` present."""
        with self._lock:
            return {kind: getattr(self, kind) for kind in self.KINDS}

    def __repr__(self) -> str:
        return "Drops(" + ", ".join(f"{k}={v}" for k, v in self.as_dict().items()) + ")"


#: What `Inbox.put()` says when it could not simply queue an event.
DROPPED = "dropped"          # an older event of its kind made room
FIRST_DROP = "first_drop"    # the same, and it is the first of a burst: warn
REFUSED = "refused"          # a server request not queued: too many wait
CROWDED = "crowded"          # queued, and its lane is half full or more: let the caller run

# The token that wakes a caller for a progress or log event (see `Inbox`).
_WAKE: tuple[str, Any, int] = ("wake", None, 0)
# A lane's (seq, kind, payload) as the (kind, payload) the caller takes.
_kind_and_payload = itemgetter(1, 2)


class _Lanes:
    """The part of an inbox that a plain call never needs: the progress and
    log lanes, and the counts that bound them and the server requests."""

    __slots__ = ("lock", "progress", "logs", "seq", "signalled", "requests", "dropped")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.progress: collections.deque[tuple[int, str, Any]] = collections.deque()
        self.logs: collections.deque[tuple[int, str, Any]] = collections.deque()
        self.seq = 0             # progress and log events put so far
        self.signalled = False   # a wake token is in the queue
        self.requests = 0        # server requests in the queue
        self.dropped = 0         # progress and log events dropped in this burst


class Inbox:
    """Everything addressed to one request, in arrival order, bounded.

    Two lanes. The response, a CLOSED and server requests are never
    dropped: they go through a `SimpleQueue`, so a plain call costs one put
    and one blocking get there, as it did before there were bounds.
    Progress and log messages wait in deques of their own (`_Lanes`, made
    by the first such event), at most `max_progress` and `max_logs`;
    beyond, the oldest of its kind makes room. Each event knows its place
    in the arrival order (a progress or log event its number; an event of
    the other lane how many progress and log events came before it, when
    any had), so the caller takes them in the order they came. A progress
    or log event wakes a waiting caller with a token in the queue, never
    more than one outstanding, so tokens cost no memory either. Server
    requests beyond `max_requests` are not queued: `put()` says REFUSED.

    Producers call `put()` and `answer()` under the connection's lock:
    they never block and never log. One consumer, the caller, calls `get()`.
    """

    __slots__ = ("id", "method", "max_requests", "max_progress", "max_logs", "answer", "_queue", "_lanes", "_held",
                 "_ready")

    def __init__(self, request_id: Any = None, method: str = "", max_requests: int = 16,
                 max_progress: int = INBOX_MAX_PROGRESS, max_logs: int = INBOX_MAX_LOGS) -> None:
        self.id = request_id
        self.method = method
        self.max_requests = max_requests
        self.max_progress = max_progress
        self.max_logs = max_logs
        # A response alone (a dict) or (kind, payload) while no lanes exist,
        # else (kind, payload, how many progress and log events came before it).
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        #: Queue the response (producers, under the connection's lock; the
        #: same as `put(RESPONSE, message)`). While no lanes exist, the
        #: queue's own `put` of the message itself: the answer of every
        #: call costs no Python frame on the reader.
        self.answer: Callable[[dict[str, Any]], None] = self._queue.put
        self._lanes: _Lanes | None = None
        self._held: tuple[Any, ...] | None = None  # taken from the queue, waiting for older events
        # Lane events taken, in order, not yet returned: the consumer takes
        # every lane event that is next in one go (one lock, not one per
        # event), then returns them one by one. The consumer's alone; made
        # with its first lane event (most calls have none).
        self._ready: collections.deque[tuple[str, Any]] | None = None

    # -- producers (under the connection's lock) ------------------------------------

    def put(self, kind: str, payload: Any, *, wake: bool = True) -> str | None:
        """Queue one event. None when it was simply queued; CROWDED when
        it was, and its lane is half full or more; else DROPPED or
        FIRST_DROP (an older one of its kind was dropped), or REFUSED (a
        server request that was not queued: the caller must refuse it).
        `wake=False` leaves a progress or log event without its wake-up:
        the producer calls `wake()` later (once for many events)."""
        lanes = self._lanes
        if lanes is None and (kind is RESPONSE or kind is CLOSED):
            self._queue.put(payload if kind is RESPONSE else (kind, payload))  # a plain call
            return None
        if lanes is None:
            lanes = self._lanes = _Lanes()
            self.answer = _ordered_answer(self._queue, lanes)
        if kind is PROGRESS or kind is LOG:
            # (In this frame: in a flood, this runs for every event.)
            outcome = None
            with lanes.lock:
                lanes.seq += 1
                lane, limit = (lanes.progress, self.max_progress) if kind is PROGRESS else (lanes.logs, self.max_logs)
                if len(lane) >= limit:
                    lane.popleft()
                    lanes.dropped += 1
                    outcome = FIRST_DROP if lanes.dropped == 1 else DROPPED
                lane.append((lanes.seq, kind, payload))
                if outcome is None and 2 * len(lane) >= limit:
                    outcome = CROWDED
                if wake and not lanes.signalled:
                    lanes.signalled = True
                    self._queue.put(_WAKE)
            return outcome
        if kind is SERVER_REQUEST or kind is ADOPTED:
            with lanes.lock:
                if lanes.requests >= self.max_requests:
                    return REFUSED
                lanes.requests += 1
        self._queue.put((kind, payload, lanes.seq))
        return None

    def room(self, kind: str) -> int:
        """How many events of `kind` (progress or log) `put_run` would
        queue now; 0 before the lanes exist. Only the consumer changes it
        meanwhile, and only up."""
        lanes = self._lanes
        if lanes is None:
            return 0
        lane = lanes.progress if kind is PROGRESS else lanes.logs
        return max(((self.max_progress if kind is PROGRESS else self.max_logs) - 1) // 2 - len(lane), 0)

    def put_run(self, kind: str, payloads: Iterable[Any]) -> int:
        """Queue `payloads` (progress or log events of `kind`, in order) as
        `put(kind, payload, wake=False)` queues each, as long as it would
        say None: up to the last that leaves the lane under half full (the
        next one is for `put`, which says CROWDED or drops). How many were
        queued. Only once the lanes exist (an event was `put` already);
        else none."""
        lanes = self._lanes
        if lanes is None:
            return 0
        with lanes.lock:
            room = self.room(kind)
            if room == 0:
                return 0
            lane = lanes.progress if kind is PROGRESS else lanes.logs
            before, seq = len(lane), lanes.seq
            lane.extend(zip(itertools.count(seq + 1), itertools.repeat(kind), itertools.islice(payloads, room)))
            taken = len(lane) - before
            lanes.seq = seq + taken
            return taken

    def wake(self) -> None:
        """The wake-up `put(..., wake=False)` held back, if its events are
        still waiting and no wake-up is (any thread)."""
        lanes = self._lanes
        if lanes is None:
            return
        with lanes.lock:
            if not lanes.signalled and (lanes.progress or lanes.logs):
                lanes.signalled = True
                self._queue.put(_WAKE)

    # -- the consumer (the caller) ---------------------------------------------------

    def get(self, timeout: float | None = None) -> tuple[str, Any]:
        """The next event as (kind, payload); `queue.Empty` after `timeout`
        seconds (None: wait for ever)."""
        if self._ready:
            return self._ready.popleft()
        if self._lanes is None:
            item = self._queue.get(timeout=timeout)
            if type(item) is dict:
                return RESPONSE, item  # the answer of a plain call
            if len(item) == 2:
                return item  # type: ignore[no-any-return]  # (CLOSED, error) of a plain call
            self._held = item  # a token or a server request: the lanes exist now
        return self._get_in_order(timeout)

    def get_nowait(self) -> tuple[str, Any]:
        """The next event, or `queue.Empty` at once."""
        if self._ready:
            return self._ready.popleft()
        return self._get_in_order(0.0)

    def _get_in_order(self, timeout: float | None) -> tuple[str, Any]:
        lanes = self._lanes
        assert lanes is not None or self._held is None
        deadline: float | None = None
        while True:
            if self._held is None and (lanes is None or (not lanes.progress and not lanes.logs)):
                # Nothing waits in the lanes: block on the queue.
                self._held = _event(self._queue.get(timeout=timeout) if timeout != 0 else self._queue.get_nowait())
                lanes = self._lanes
            if self._held is _WAKE:
                assert lanes is not None
                self._held = None
                with lanes.lock:
                    lanes.signalled = False
                if not lanes.progress and not lanes.logs and timeout:
                    # A token that outlived its event (taken without it). It
                    # was in the queue already, so little of the timeout went
                    # by: wait again, for what is left of it.
                    now = time.monotonic()
                    deadline = deadline or now + timeout
                    timeout = deadline - now
                    if timeout <= 0:
                        raise queue.Empty
                continue
            event = self._next_in_order(lanes)
            if event is not None:
                return event

    def _next_in_order(self, lanes: _Lanes | None) -> tuple[str, Any] | None:
        """The oldest event: the held one, or the head of a lane that came
        before it. None when only a stale token was taken."""
        if lanes is None:  # no lanes: the held event is all there is
            held, self._held = self._held, None
            return None if held is None else (held[0], held[1])
        # Whatever of the queue came first is in `_held` (tokens skipped).
        # An event put in the queue after this line is tagged with this
        # sequence number or a later one (the producer reads `seq` as it
        # puts): the lane events up to it came before that event, and only
        # those may be taken when nothing is held. (Lane events put between
        # the queue's last look and the lock may follow a queued event.)
        seen = lanes.seq
        while self._held is None:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _WAKE:
                with lanes.lock:
                    lanes.signalled = False
            else:
                self._held = _event(item)
        held = self._held  # a (kind, payload) pair came before any lane event
        # Every lane event that came before `held` (up to `seen` when nothing
        # is held), oldest first, into `_ready`; a held pair of two came
        # before any lane event.
        bound = seen if held is None else (held[2] if len(held) == 3 else 0)
        ready = self._ready
        if ready is None:
            ready = self._ready = collections.deque()
        ended = 0
        with lanes.lock:
            progress, logs = lanes.progress, lanes.logs
            if lanes.dropped and not progress and not logs:
                # Back for more with everything taken before handled, and
                # nothing new: the caller has caught up, the burst is over.
                ended, lanes.dropped = lanes.dropped, 0
            if progress and not logs and progress[-1][0] <= bound:
                # Progress alone, all of it before the bound: the whole lane, in one go.
                ready.extend(map(_kind_and_payload, progress))
                progress.clear()
            while progress or logs:
                lane = (progress if not logs or (progress and progress[0][0] < logs[0][0]) else logs)
                if lane[0][0] > bound:
                    break
                _, kind, payload = lane.popleft()
                ready.append((kind, payload))
        if ended:
            log.warning("%s (request %s): %d progress and log messages were dropped while the caller was "
                        "behind; it is caught up now", self.method, self.id, ended)
        if ready:
            return ready.popleft()
        if held is None:
            return None
        self._held = None
        if held[0] is SERVER_REQUEST or held[0] is ADOPTED:
            with lanes.lock:
                lanes.requests -= 1
        return held[0], held[1]

    def qsize(self) -> int:
        """Events waiting now (approximate while events arrive)."""
        lanes = self._lanes
        waiting = self._queue.qsize() + (self._held is not None) + len(self._ready or ())
        if lanes is None:
            return waiting
        with lanes.lock:
            return waiting - lanes.signalled + len(lanes.progress) + len(lanes.logs)


def _ordered_answer(events: queue.SimpleQueue[Any], lanes: _Lanes) -> Callable[[dict[str, Any]], None]:
    """`Inbox.answer` once lanes exist: the response knows its place in
    the arrival order. (A closure over the queue and the lanes, not the
    inbox: no reference cycle keeps a finished inbox alive.)"""
    def answer(message: dict[str, Any]) -> None:
        events.put((RESPONSE, message, lanes.seq))
    return answer


def _event(item: Any) -> tuple[Any, ...]:
    """An item of the queue as an event: a plain call's answer (the message
    alone, put before any lane existed) as (RESPONSE, message)."""
    return (RESPONSE, item) if type(item) is dict else item
