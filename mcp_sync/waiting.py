"""Waits that an interrupt can end, written once.

`_thread.interrupt_main()` (what Jupyter's Interrupt and some test runners
use) sets a flag, not a signal: a thread blocked in a lock or queue wait
with a long timeout does not see it until the wait ends. So every wait on
the main thread is cut into slices of `MAIN_THREAD_SLICE` seconds; other
threads wait in one piece. Every blocking wait of the client goes through
`slice_of()` (or the helpers built on it), never a constant of its own.

    >>> slice_of(5.0) in (5.0, MAIN_THREAD_SLICE)   # depends on the thread
    True
"""

from __future__ import annotations

import threading
import time
from typing import overload

__all__ = ["MAIN_THREAD_SLICE", "on_main_thread", "slice_of", "acquire_until", "wait_for_event"]

#: The longest a wait on the main thread blocks before it looks again, so
#: that a pending interrupt is raised within this many seconds.
MAIN_THREAD_SLICE = 0.1


def on_main_thread() -> bool:
    """Whether the calling thread is the main thread (its waits are sliced)."""
    return threading.current_thread() is threading.main_thread()


@overload
def slice_of(seconds: float, *, main: bool | None = None) -> float: ...
@overload
def slice_of(seconds: None, *, main: bool | None = None) -> float | None: ...
def slice_of(seconds: float | None, *, main: bool | None = None) -> float | None:
    """How long one blocking step of a wait of `seconds` (None: for ever)
    may last on this thread: all of it, or at most `MAIN_THREAD_SLICE` on
    the main thread (`main` says which, when the caller knows already)."""
    if main is None:
        main = on_main_thread()
    if not main:
        return seconds
    return MAIN_THREAD_SLICE if seconds is None else min(seconds, MAIN_THREAD_SLICE)


def acquire_until(lock: threading.Lock, deadline: float | None) -> bool:
    """Take `lock`, waiting until `deadline` (a `time.monotonic()` value;
    None: as long as it takes) at most. False when the deadline passed."""
    main = on_main_thread()
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return lock.acquire(blocking=False)
        step = slice_of(left, main=main)
        if lock.acquire(timeout=-1.0 if step is None else step):
            return True


def wait_for_event(event: threading.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` went by; whether it is set."""
    end = time.monotonic() + seconds
    main = on_main_thread()
    while not event.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return False
        event.wait(slice_of(left, main=main))
    return True
