"""One attempt at something many threads wait for: `SharedAttempt`.

A connect that several threads need at once is made by the first of them;
the others wait for its outcome rather than queueing for a lock and each
making their own attempt after it failed (the N-th waiter then waited N
connect timeouts). The threads that waited get the same outcome: the value,
or a copy of the error (`copy_error`: the original's traceback stays with
the thread that raised it). A thread that comes after an attempt ended
starts a new one. A caller with a deadline has the attempt made on another
thread (`start`) and waits for it only until then; the attempt goes on for
the callers after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import McpError, RequestTimeout, copy_error
from .waiting import remaining, wait_for_event

T = TypeVar("T")

__all__ = ["SharedAttempt"]


class _Attempt(Generic[T]):
    __slots__ = ("done", "made", "value", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.made = False  # `make()` returned (its value may be None)
        self.value: T | None = None
        self.error: McpError | None = None


class SharedAttempt(Generic[T]):
    """Run `make()` once for every thread that asks while it runs.

    Example::

        >>> connects: SharedAttempt[str] = SharedAttempt()
        >>> connects.run(lambda: "connected")
        'connected'

    Lock discipline: `_lock` guards `_running` only; `make()` runs without
    it, on the thread that started the attempt.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: _Attempt[T] | None = None

    def run(self, make: Callable[[], T], deadline: float | None = None, *,
            start: Callable[[Callable[[], None]], None] | None = None,
            late: Callable[[], McpError] | None = None) -> T:
        """`make()`'s value, made by this thread, or by the thread whose
        attempt was running when this one asked (its `McpError` is raised
        here as a copy). An attempt that ended otherwise (an interrupt on
        its thread, a bug) is not shared: a waiter then makes its own.

        Args:
            make: What makes the value; raises `McpError` when it cannot.
            deadline: How long to wait for it (a `time.monotonic()` value;
                None: as long as it takes).
            start: With a deadline, what runs a new attempt (the function
                it is given) on another thread, so that the deadline bounds
                this caller too; None: this thread makes it.
            late: The error raised at the deadline (else a `RequestTimeout`).

        Returns:
            The value.
        """
        while True:
            with self._lock:
                attempt = self._running
                leading = attempt is None
                if attempt is None:
                    attempt = self._running = _Attempt()
            if leading:
                if start is None or deadline is None:
                    return self._lead(attempt, make)
                try:
                    start(lambda: self._lead_elsewhere(attempt, make))
                except BaseException:
                    # Not started (a Ctrl-C as the thread starts): nothing
                    # would ever end this attempt, which waiters (and the
                    # next callers) would wait on for good.
                    with self._lock:
                        if self._running is attempt:
                            self._running = None
                    attempt.done.set()
                    raise
            if not wait_for_event(attempt.done, remaining(deadline)):
                raise late() if late is not None else RequestTimeout("still being made at the call's deadline")
            if attempt.error is not None:
                raise copy_error(attempt.error)
            if attempt.made:
                return attempt.value  # type: ignore[return-value]  # (what `make()` returned, None too)
            # (neither: its thread was interrupted, or `make()` had a bug: this one makes its own, here,
            # so that the bug is raised to it rather than started again elsewhere for ever)
            start = None

    def _lead_elsewhere(self, attempt: _Attempt[T], make: Callable[[], T]) -> None:
        try:
            self._lead(attempt, make)
        except McpError:
            pass  # kept in `attempt` for the callers that wait for it

    def _lead(self, attempt: _Attempt[T], make: Callable[[], T]) -> T:
        try:
            value = make()
        except McpError as exc:
            attempt.error = copy_error(exc)  # (a copy: this one's traceback holds this frame)
            raise
        else:
            attempt.value, attempt.made = value, True
            return value
        finally:
            with self._lock:
                self._running = None
            attempt.done.set()
