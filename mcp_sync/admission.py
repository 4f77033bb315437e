"""Admission control: how many calls may be in flight, and how many may wait.

`Admission(max_in_flight, max_queued)` hands out *slots*. A call takes one
before it sends anything and gives it back when it is done. When all
`max_in_flight` slots are taken a call waits, up to its own deadline, for
one to come free; when `max_queued` calls are already waiting it is shed at
once with `Overloaded`, so a client under pressure answers "too busy" in
microseconds instead of piling up threads. `pause()` makes new calls wait
the same way (bounded by the same `max_queued`) while the client reconnects.

Design notes (why it is built this way):

- Unbounded (`max_in_flight=None`) is the default, so its path takes no
  lock: a slot is an entry appended to a list (`list.append` and
  `list.pop` are atomic), and the counters are read without a lock.
- Fairness is strict FIFO: a freed slot is *handed over* to the oldest
  waiter under the lock, so a newcomer never overtakes a waiting call, and
  the slot is never idle while the woken thread gets scheduled.
- Each waiter sleeps on a lock of its own (its *gate*), released once by
  whoever hands it a slot or closes the admission: no thundering herd.
- A `KeyboardInterrupt` may land wherever Python checks for one: when a
  function starts and when a call returns (and on loop back-edges). So a
  slot is taken, and recorded on the caller's ticket, in one statement that
  calls nothing, and `acquire()` undoes whatever its ticket records if
  anything escapes. An interrupt landing inside `release()` can at worst
  keep that one slot (as with any lock written in Python); it never
  corrupts the counters, and a waiter left asleep by it wakes by itself
  within `_SAFETY_SLICE`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from types import TracebackType
from typing import Callable

from .errors import McpError, Overloaded, RequestTimeout, copy_error
from .waiting import expired, remaining, slice_of

__all__ = ["Admission"]

#: Any other waiter wakes this often to look for itself whether a slot is
#: free: the safety net for a hand-over cut short by an interrupt.
_SAFETY_SLICE = 1.0


class _Ticket:
    """One slow-path `acquire()`: whether it holds a slot, and its gate."""

    __slots__ = ("held", "gate")

    def __init__(self) -> None:
        self.held = False
        self.gate: threading.Lock | None = None


def _closed_gate() -> threading.Lock:
    gate = threading.Lock()
    gate.acquire()
    return gate


class Admission:
    """Bounds the calls in flight (`max_in_flight`) and the calls waiting for
    a slot (`max_queued`); None means no bound.

    `acquire(deadline)` takes a slot, waiting for one until `deadline` (a
    `time.monotonic()` value, None for no limit) and then raising
    `RequestTimeout`; it raises `Overloaded` at once when `max_queued`
    calls already wait. `release()` gives the slot back. `slot(deadline)`
    does both around a `with` block. Waiters get slots in strict arrival
    order (FIFO).

    The counters `in_flight`, `queued`, `shed` and `peak_in_flight` are read
    without a lock: each is exact on its own, though two read one after the
    other may come from different moments. `clock` is what deadlines are
    read against (`time.monotonic` unless a test steps through time).

    Example::

        >>> import time
        >>> admission = Admission(max_in_flight=2, max_queued=0)
        >>> with admission.slot(time.monotonic() + 5):
        ...     admission.in_flight
        1
        >>> admission.acquire(None); admission.acquire(None)
        >>> try:
        ...     admission.acquire(time.monotonic() + 5)
        ... except Overloaded as exc:
        ...     print(exc)
        overloaded: 2 calls in flight (max_in_flight=2) and 0 waiting (max_queued=0); nothing was sent: retry later, or pass a larger max_in_flight= or max_queued= to connect()
        >>> admission.release(); admission.release()
        >>> admission.shed, admission.peak_in_flight
        (1, 2)
    """

    def __init__(self, max_in_flight: int | None = None, max_queued: int | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        _check_limit("max_in_flight", max_in_flight, 1)
        _check_limit("max_queued", max_queued, 0)
        self._limit = max_in_flight
        self._max_queued = max_queued
        self._clock = clock
        self._unbounded = max_in_flight is None
        # Guards everything below except `_inside` (and the plain reads of
        # the counters). Never held while waiting or while running any code
        # but this module's.
        self._lock = threading.Lock()
        self._inside: list[None] = []   # lock-free slots (unbounded only)
        self._count = 0                 # slots taken under the lock
        self._waiters: OrderedDict[_Ticket, None] = OrderedDict()
        self._peak = 0
        self._shed = 0
        self._paused = False
        self._closed: McpError | None = None
        # True while a slot may be taken without the lock: unbounded, not
        # paused, not closed (and so nobody is waiting).
        self._fast = self._unbounded

    # -- counters (lock-free reads) -------------------------------------------------

    @property
    def max_in_flight(self) -> int | None:
        """The most slots taken at once (None: no bound)."""
        return self._limit

    @property
    def max_queued(self) -> int | None:
        """The most calls that may wait at once (None: no bound)."""
        return self._max_queued

    @property
    def in_flight(self) -> int:
        """Slots taken now (including slots handed to a waiter not yet awake)."""
        return self._count + len(self._inside)

    @property
    def queued(self) -> int:
        """Calls waiting now for a slot (or for `resume()`)."""
        return len(self._waiters)

    @property
    def shed(self) -> int:
        """How many calls were refused with `Overloaded` so far."""
        return self._shed

    @property
    def peak_in_flight(self) -> int:
        """The most slots taken at once so far. Exact with a `max_in_flight`;
        when unbounded it is kept without a lock on the way in, so a peak
        that lasts only microseconds may be missed."""
        return self._peak

    @property
    def paused(self) -> bool:
        """Whether `pause()` holds new calls back."""
        return self._paused

    def __repr__(self) -> str:
        return (f"<Admission in_flight={self.in_flight}/{_show(self._limit)} "
                f"queued={self.queued}/{_show(self._max_queued)} shed={self._shed}"
                f"{' paused' if self._paused else ''}{' closed' if self._closed else ''}>")

    # -- taking and giving back -------------------------------------------------------

    def acquire(self, deadline: float | None = None) -> None:
        """Take a slot, waiting until `deadline` (a `time.monotonic()` value;
        None waits as long as it takes) for one to come free.

        Raises `Overloaded` at once when `max_queued` calls already wait,
        `RequestTimeout` when the deadline passes first, and the error given
        to `close()` once closed. Whatever it raises (a `KeyboardInterrupt`
        landing anywhere in it too), it holds no slot and is no longer
        counted as waiting.

        Example::

            admission.acquire(time.monotonic() + 30)
            try:
                ...                 # send the request, wait for the answer
            finally:
                admission.release()
        """
        # The body is repeated in `Slot.__enter__`: the undo must run in the
        # frame that takes the slot (see the module notes), so neither may
        # simply call the other.
        if self._fast:
            inside = self._inside
            try:
                inside.append(None)          # the slot; nothing before it can raise
                if len(inside) > self._peak:
                    self._note_peak()
            except BaseException:
                self.release()
                raise
            return
        ticket = _Ticket()
        try:
            self._enter_or_wait(ticket, deadline)
        except BaseException:
            self._give_up(ticket)
            raise

    def release(self) -> None:
        """Give back a slot taken by `acquire()`; hands it to the oldest
        waiter, if any. Raises RuntimeError when no slot is taken."""
        if self._unbounded:
            try:
                self._inside.pop()
                return
            except IndexError:
                pass  # this slot was taken under the lock (while paused)
        with self._lock:
            if self._count <= 0:
                raise RuntimeError("Admission.release() called more often than acquire()")
            self._count -= 1
            self._hand_over()

    def slot(self, deadline: float | None = None) -> Slot:
        """`acquire(deadline)` on entering a `with` block, `release()` on
        leaving it.

        Example::

            with admission.slot(time.monotonic() + 30):
                ...                 # send the request, wait for the answer
        """
        return Slot(self, deadline)

    # -- the client's controls ------------------------------------------------------

    def pause(self) -> None:
        """Hold new calls back (while reconnecting): they wait as if no slot
        were free, bounded by `max_queued` and their deadline. Calls already
        in flight are not affected."""
        with self._lock:
            self._paused = True
            self._fast = False

    def resume(self) -> None:
        """Let calls in again: waiting calls get slots first, in order."""
        with self._lock:
            self._paused = False
            self._hand_over()
            # Last, so that no newcomer on the lock-free path overtakes a waiter.
            self._fast = self._unbounded and self._closed is None

    def after_fork(self) -> None:
        """In a fork child: the slots and waiters belong to the parent's
        threads, which do not exist here, and one of them may have held the
        lock at the fork. Start empty, with the same limits."""
        self._lock = threading.Lock()
        self._inside = []
        self._count = 0
        self._waiters = OrderedDict()
        self._paused = False
        self._fast = self._unbounded and self._closed is None

    def close(self, error: McpError) -> None:
        """Fail every waiting call with (a copy of) `error`, now, and every
        later `acquire()` too. Slots in flight may still be released. Only
        the first call has an effect."""
        with self._lock:
            if self._closed is not None:
                return
            self._closed = error
            self._fast = False
            waiting = list(self._waiters)
            self._waiters.clear()
            for ticket in waiting:
                assert ticket.gate is not None
                ticket.gate.release()

    # -- the slow path (everything here runs under `_lock` or on a ticket) -------------

    def _enter_or_wait(self, ticket: _Ticket, deadline: float | None) -> None:
        with self._lock:
            if self._closed is not None:
                raise copy_error(self._closed)
            if not self._waiters and self._has_room():
                self._count, ticket.held = self._count + 1, True   # calls nothing: one step
                self._note_peak_locked()
                return
            if self._max_queued is not None and len(self._waiters) >= self._max_queued:
                self._shed += 1
                raise self._overloaded()  # (not kept in a local: the traceback holds this frame)
            ticket.gate = _closed_gate()
            self._waiters[ticket] = None
        self._wait(ticket, deadline)

    def _wait(self, ticket: _Ticket, deadline: float | None) -> None:
        """Sleep on the ticket's gate until it holds a slot, the admission
        closes, or the deadline passes."""
        gate = ticket.gate
        assert gate is not None
        clock = self._clock  # deadlines are read against it (a test's may step through time)
        started = clock()
        # On the main thread, a wait sliced for interrupts (`waiting`); any
        # other waits in steps of the safety slice.
        slice_ = slice_of(_SAFETY_SLICE)
        while True:
            wait = slice_ if deadline is None else min(slice_, remaining(deadline, clock=clock))
            gate.acquire(True, wait)
            with self._lock:
                # Every way out but success leaves no trace before raising,
                # so that an interrupt landing in the caller's undo (a second
                # exception) cannot leak anything.
                if self._closed is not None:
                    if ticket.held:  # handed a slot just before the close
                        self._count, ticket.held = self._count - 1, False
                    raise copy_error(self._closed)
                if ticket.held:
                    return
                if self._has_room() and next(iter(self._waiters), None) is ticket:
                    # A hand-over was cut short (see `_SAFETY_SLICE`): take the slot ourselves.
                    del self._waiters[ticket]
                    self._count, ticket.held = self._count + 1, True
                    self._note_peak_locked()
                    self._hand_over()
                    return
                if expired(deadline, clock=clock):
                    del self._waiters[ticket]
                    self._hand_over()  # it may have been first in line
                    raise self._timed_out(clock() - started)

    def _give_up(self, ticket: _Ticket) -> None:
        """Undo a failed `acquire()`: give back the slot its ticket holds, or
        leave the queue."""
        with self._lock:
            if ticket.held:
                self._count, ticket.held = self._count - 1, False
            else:
                self._waiters.pop(ticket, None)
            self._hand_over()

    def _hand_over(self) -> None:
        """Give free slots to the oldest waiters (lock held)."""
        while self._waiters and self._has_room():
            ticket = next(iter(self._waiters))
            # No call between these three statements, so an interrupt cannot
            # separate leaving the queue, holding the slot and the wake-up.
            del self._waiters[ticket]
            self._count, ticket.held = self._count + 1, True
            ticket.gate.release()  # type: ignore[union-attr]  # every queued ticket has a gate
            self._note_peak_locked()

    def _has_room(self) -> bool:
        return not self._paused and (self._limit is None or self._count < self._limit)

    def _note_peak(self) -> None:
        with self._lock:
            self._note_peak_locked()

    def _note_peak_locked(self) -> None:
        now = self._count + len(self._inside)
        if now > self._peak:
            self._peak = now

    # The messages end with what to do next, naming the options as
    # `connect()` takes them: nothing was sent, so a retry is always safe.

    def _overloaded(self) -> Overloaded:
        waiting = len(self._waiters)
        if self._paused:
            text = (f"overloaded: {waiting} calls already waiting for the connection to come back "
                    f"(max_queued={self._max_queued}); nothing was sent: retry once client.status is "
                    "ready, or pass a larger max_queued= to connect()")
        else:
            text = (f"overloaded: {self.in_flight} calls in flight (max_in_flight={self._limit}) "
                    f"and {waiting} waiting (max_queued={self._max_queued}); nothing was sent: retry later, "
                    "or pass a larger max_in_flight= or max_queued= to connect()")
        return Overloaded(text, max_in_flight=self._limit, max_queued=self._max_queued)

    def _timed_out(self, waited: float) -> RequestTimeout:
        if self._paused:
            what = "for the connection to come back"
            advice = "see client.status, or pass a larger timeout="
        else:
            what = f"for a free slot (all max_in_flight={self._limit} in use)"
            advice = "retry later, pass a larger timeout=, or a larger max_in_flight= to connect()"
        return RequestTimeout(f"waited {waited:.2f} s {what} until the deadline; nothing was sent: {advice}")


class Slot:
    """The context manager `Admission.slot()` returns: `Slot(admission,
    deadline)` is the same, one call less on a path that counts them."""

    __slots__ = ("_admission", "_deadline")

    def __init__(self, admission: Admission, deadline: float | None) -> None:
        self._admission = admission
        self._deadline = deadline

    def __enter__(self) -> None:
        admission = self._admission
        # `Admission.acquire()`'s body, in this frame (see there).
        if admission._fast:
            inside = admission._inside
            try:
                inside.append(None)
                if len(inside) > admission._peak:
                    admission._note_peak()
            except BaseException:
                admission.release()
                raise
            return
        ticket = _Ticket()
        try:
            admission._enter_or_wait(ticket, self._deadline)
        except BaseException:
            admission._give_up(ticket)
            raise

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        admission = self._admission
        if admission._unbounded:  # `release()`'s lock-free case, in this frame
            try:
                admission._inside.pop()
                return
            except IndexError:
                pass  # this slot was taken under the lock (while paused)
        admission.release()


def _check_limit(name: str, value: int | None, least: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be at least {least} (or None for no limit), not {value}")


def _show(limit: int | None) -> str:
    return "unbounded" if limit is None else str(limit)
