"""A client's connection status and the events that announce its changes
(the reconnect policy, `Reconnect`, is in `options`).

Owns the status state machine and nothing else: it does not know how a
connection fails or is made again, nor which thread runs the callbacks (the
owner passes a `run` function; the client passes its dispatcher's
`call_soon`, so callbacks never run on the reader nor on the thread that
noticed the change). Pure bookkeeping, no IO: `set()` never blocks on a
callback and never raises for a transition it refuses, because it is called
from engine threads that must not die; its result says whether the change
happened, which is how racing threads (a reader and the keepalive both
noticing a dead peer, a reconnect finishing while `close()` runs) agree on a
single winner.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
from collections.abc import Iterable
from typing import Callable

import attrs

from .errors import McpError
from .waiting import check_seconds

__all__ = ["Status", "StatusChange", "StatusMonitor"]

log = logging.getLogger("mcp_sync.status")


class Status(str, enum.Enum):
    """Where a client's connection stands. A `str`, so it compares equal to
    its value and serialises as one: ``client.status == "ready"``.

    Example::

        if client.status is Status.RECONNECTING:
            print("the server went away; calls wait for it to come back")
    """

    CONNECTING = "connecting"
    """The first connection is being made."""
    READY = "ready"
    """Connected: calls go to the server (as `max_in_flight` allows)."""
    RECONNECTING = "reconnecting"
    """The connection failed and a new one is being made; calls wait for it
    (bounded by their timeout and `max_queued`)."""
    CLOSED = "closed"
    """`close()` was called. Final: calls raise `ConnectionClosed`."""
    FAILED = "failed"
    """The first connection could not be made, reconnecting gave up, or the
    connection died with reconnecting off. Calls raise `ConnectionClosed`,
    unless the client may still open a new connection (a stateless stdio
    server is started again; a forked child opens its own): not final."""

    def __str__(self) -> str:
        return self.value


#: The transitions `StatusMonitor.set()` accepts (see its docstring).
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.CONNECTING: frozenset({Status.READY, Status.FAILED, Status.CLOSED}),
    Status.READY: frozenset({Status.RECONNECTING, Status.FAILED, Status.CLOSED}),
    Status.RECONNECTING: frozenset({Status.READY, Status.FAILED, Status.CLOSED}),
    Status.FAILED: frozenset({Status.RECONNECTING, Status.CLOSED}),
    Status.CLOSED: frozenset(),
}

#: The most changes waiting for their callbacks; beyond, the oldest is dropped.
MAX_PENDING_CHANGES = 100


@attrs.frozen
class StatusChange:
    """One change of status: from `old` to `new`, because of `cause` (the
    error that ended the connection or made reconnecting give up; None for a
    change the client made on its own), at `at` (`time.time()`).

    Example::

        def on_change(change: StatusChange) -> None:
            print(f"{change.old} -> {change.new}", change.cause or "")

    Attributes:
        old (Status): The status before the change.
        new (Status): The status after the change.
        cause (McpError | None): The error that ended the connection or made
            reconnecting give up; None for a change the client made on its
            own (connecting, reconnecting succeeding, `close()`).
        at (float): When the change happened, in seconds since the epoch
            (`time.time()`).
    """

    old: Status
    new: Status
    cause: McpError | None = None
    at: float = attrs.field(factory=time.time)


StatusCallback = Callable[[StatusChange], object]


#: The statuses after which no request succeeds until something changes.
_ENDED = frozenset({Status.CLOSED, Status.FAILED})


class StatusMonitor:
    """The current `Status`, its changes, and the callbacks that hear of them.

    The transitions it accepts::

        connecting ─────> ready <─────────> reconnecting
             │              │                │      ^
             │              v                v      │
             └──────────> failed ───────────────────┘
                 (any status but closed) ──> closed      (final)

    - `failed` is reached when the first connection could not be made, when
      reconnecting gave up, or when a ready connection died and reconnecting
      is off. It is not final: trying again (`failed -> reconnecting`) is
      allowed, so a process is never dead for good while the client is open.
    - Setting the current status again is ignored; so is any other
      transition not drawn above (for example anything after `closed`): the
      caller learns it from the result of `set()`.

    Example::

        monitor = StatusMonitor(run=lambda fn: fn())
        remove = monitor.on_status(lambda change: print(change.old, "->", change.new))
        monitor.set(Status.READY)                 # prints: connecting -> ready
        assert monitor.wait_for({Status.READY}, timeout=1) is Status.READY
        remove()

    Callbacks are run through `run` (which should run its function on
    another thread, later, in the order given), in the order of the
    transitions, each with its `StatusChange`; one that raises is logged and
    the others still run. A callback hears only of changes made after it was
    added, and none once it is removed.
    """

    def __init__(self, run: Callable[[Callable[[], None]], None]) -> None:
        if not callable(run):
            raise TypeError("run must be callable")
        self._run = run
        self._status = Status.CONNECTING
        self._last: StatusChange | None = None
        self._init_sync()

    def _init_sync(self) -> None:
        # What `_cond` guards: the status (written only under it, read
        # without it), the callbacks, the pending changes and `_scheduled`.
        self._cond = threading.Condition(threading.Lock())
        self._seq = 0  # number of changes so far
        # (callback, number of changes when it was added)
        self._callbacks: tuple[tuple[StatusCallback, int], ...] = ()
        self._pending: collections.deque[tuple[int, StatusChange]] = collections.deque()
        self._scheduled = False  # a `_deliver` is queued with `run`
        self._dropped = 0

    @property
    def status(self) -> Status:
        """The current status (a plain read: any thread, no lock)."""
        return self._status

    @property
    def last_change(self) -> StatusChange | None:
        """The latest change (with its cause and time), or None before the first."""
        return self._last

    def set(self, new: Status | str, cause: McpError | None = None) -> bool:
        """Move to `new` because of `cause`; whether it moved. Thread-safe and
        never blocks on a callback: the callbacks are handed to `run`."""
        new = Status(new)
        if cause is not None and not isinstance(cause, McpError):
            raise TypeError(f"cause must be an McpError or None, not {type(cause).__name__}")
        with self._cond:
            old = self._status
            if new is old:
                return False
            if new not in TRANSITIONS[old]:
                log.debug("status change %s -> %s refused", old, new)
                return False
            change = StatusChange(old=old, new=new, cause=cause)
            self._status = new
            self._last = change
            self._seq += 1
            self._cond.notify_all()
            schedule = self._queue_change(change)
        if schedule:
            self._schedule()
        return True

    def _queue_change(self, change: StatusChange) -> bool:
        """(Under `_cond`.) Keep `change` for its callbacks; whether a
        delivery must be scheduled. Only one is queued with `run` at a time,
        so a slow callback holds at most one entry of the owner's queue."""
        if not self._callbacks:
            return False  # nobody to tell, and nothing to start a thread for
        if len(self._pending) >= MAX_PENDING_CHANGES:
            self._pending.popleft()
            self._dropped += 1
            if self._dropped == 1:
                log.warning("status callbacks are behind; the oldest status changes are dropped")
        self._pending.append((self._seq, change))
        if self._scheduled:
            return False
        self._scheduled = True
        return True

    def _schedule(self) -> None:
        try:
            self._run(self._deliver)
        except Exception:
            # The changes stay pending: the next change schedules them again.
            log.exception("could not schedule the status callbacks")
            with self._cond:
                self._scheduled = False

    def _deliver(self) -> None:
        """Run on `run`'s thread: every pending change, in order."""
        while True:
            with self._cond:
                if not self._pending:
                    self._scheduled = False
                    if self._dropped:
                        log.warning("%d status changes were dropped while the status callbacks were behind",
                                    self._dropped)
                        self._dropped = 0
                    return
                seq, change = self._pending.popleft()
                callbacks = self._callbacks
            for callback, since in callbacks:
                if since >= seq:
                    continue  # added after this change was made
                if not self._still_added(callback, since):
                    continue  # removed while an earlier callback ran
                try:
                    callback(change)
                except Exception:
                    log.exception("a status callback raised")

    def _still_added(self, callback: StatusCallback, since: int) -> bool:
        return any(cb is callback and s == since for cb, s in self._callbacks)

    def on_status(self, callback: StatusCallback) -> Callable[[], None]:
        """Call `callback(change)` for every later change; returns a function
        that removes it (calling that twice is harmless)."""
        if not callable(callback):
            raise TypeError("the status callback must be callable")
        with self._cond:
            entry = (callback, self._seq)
            self._callbacks = self._callbacks + (entry,)

        def remove() -> None:
            with self._cond:
                self._callbacks = tuple(e for e in self._callbacks if e is not entry)

        return remove

    def on_end(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call `callback()` once the status is `closed` or `failed`: at
        once, on this thread, when it is already, else as `on_status`
        does. A waiter that sleeps between requests wakes with it, to meet
        the error rather than sleep on. Returns a function that removes it."""

        def changed(change: StatusChange) -> None:
            if change.new in _ENDED:
                callback()

        remove = self.on_status(changed)
        if self._status in _ENDED:
            callback()
        return remove

    def wait_for(self, statuses: Status | str | Iterable[Status | str], timeout: float | None = None) -> Status | None:
        """Wait until the status is one of `statuses` (or `timeout` seconds,
        None for no limit); the status reached, or None on timeout.

        Example::

            if monitor.wait_for({Status.READY, Status.FAILED, Status.CLOSED}, timeout=5) is not Status.READY:
                ...  # not usable within 5 s

        Raises:
            TypeError: `timeout` is not a number or None.
            ValueError: `timeout` is negative, NaN or infinite (None waits
                without a limit), or `statuses` is empty or unknown.
        """
        wanted = _statuses(statuses)
        check_seconds("timeout", timeout, allow_none=True, allow_zero=True)  # 0: whether it is one now
        with self._cond:
            reached = self._cond.wait_for(lambda: self._status in wanted, timeout)
            return self._status if reached else None

    def after_fork(self) -> None:
        """In a fork child: the lock may have been held by a thread that does
        not exist here, and the delivery queued with `run` is gone with the
        parent's thread. Fresh synchronisation; callbacks are kept."""
        callbacks = self._callbacks
        self._init_sync()
        self._callbacks = callbacks


def _statuses(statuses: Status | str | Iterable[Status | str]) -> frozenset[Status]:
    if isinstance(statuses, str):  # also a Status
        return frozenset({Status(statuses)})
    found = frozenset(Status(s) for s in statuses)
    if not found:
        raise ValueError("wait_for needs at least one status")
    return found
