"""Waits that an interrupt can end, written once.

`_thread.interrupt_main()` (what Jupyter's Interrupt and some test runners
use) sets a flag, not a signal: a thread blocked in a lock or queue wait
with a long timeout does not see it until the wait ends. So every wait on
the main thread is cut into slices of `MAIN_THREAD_SLICE` seconds; other
threads wait in one piece. Every blocking wait of the client goes through
`slice_of()` (or the helpers built on it), never a constant of its own.

A deadline is a `time.monotonic()` value, or None for none; `deadline_in()`
makes one, `remaining()` says how long is left until it, `expired()`
whether it passed, and `earliest()` picks the nearest of several.
`check_seconds()` is the one rule every duration argument of the package
is checked by, before anything is sent or started.

    >>> slice_of(5.0) in (5.0, MAIN_THREAD_SLICE)   # depends on the thread
    True
    >>> remaining(None) is None and remaining(deadline_in(-1.0)) == 0.0
    True
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from typing import Callable, overload

__all__ = [
    "MAIN_THREAD_SLICE",
    "LONGEST_WAIT",
    "check_seconds",
    "on_main_thread",
    "slice_of",
    "deadline_in",
    "remaining",
    "expired",
    "earliest",
    "acquire_until",
    "wait_for_event",
]

#: The longest a wait on the main thread blocks before it looks again, so
#: that a pending interrupt is raised within this many seconds.
MAIN_THREAD_SLICE = 0.1

#: The longest wait a duration argument may ask for: what one blocking wait
#: of a thread accepts (`threading.TIMEOUT_MAX`: some 292 years on 64-bit
#: POSIX, 49 days on Windows). The request waits block for all that is
#: left on threads other than the main one, and raise OverflowError beyond
#: it, after the request was sent; None is how a caller asks for no limit.
LONGEST_WAIT = threading.TIMEOUT_MAX

#: A clock deadlines may be kept on instead of `time.monotonic` (one a test
#: steps through time with); `remaining()` and `expired()` take one.
_Clock = Callable[[], float]


#: The largest number a float holds; an int beyond it cannot be a wait.
_LARGEST_FLOAT = 1.7976931348623157e308


def check_seconds(name: str, value: object, *, allow_none: bool, allow_zero: bool = False,
                  longest: float | None = LONGEST_WAIT) -> None:
    """The rule for a duration argument `name`, in seconds: an int or a
    float; not a bool (True is no number of seconds), a string or None
    (unless `allow_none`: None means no limit); not NaN, negative, 0
    (unless `allow_zero`), infinite, or above `longest` (None: no bound,
    for a wait that runs in pieces).

        >>> check_seconds("timeout", 0.5, allow_none=True)
        >>> check_seconds("timeout", "5", allow_none=True)
        Traceback (most recent call last):
        ...
        TypeError: timeout must be a number of seconds or None (no limit), not the string '5': pass timeout=5

    Raises:
        TypeError: `value` is not a number (or None where allowed).
        ValueError: `value` is a number out of range.
    """
    if value is None and allow_none:
        return
    # An int or a float, or an integer of another library (numpy's int64 is
    # no int, but `numbers.Integral`, and every wait takes it); not a bool.
    if isinstance(value, bool) or not isinstance(value, (int, float, numbers.Integral)):
        kinds = "a number of seconds or None (no limit)" if allow_none else "a number of seconds"
        shown, hint = repr(value), ""
        if isinstance(value, str):
            shown = f"the string {value!r}"
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number) and (number > 0 or (allow_zero and number == 0)):
                hint = f": pass {name}={number:g}"
        raise TypeError(f"{name} must be {kinds}, not {shown}{hint}")
    # Another library's integer is an int from here (the waits take either).
    seconds: int | float = value if isinstance(value, (int, float)) else int(value)
    # `not seconds > 0` rather than `seconds <= 0`: NaN fails every comparison,
    # and a NaN deadline would be taken for "never" by some waits and
    # "already passed" by others.
    if not (seconds >= 0 if allow_zero else seconds > 0):
        wanted = "a number of seconds, 0 or more" if allow_zero else "a positive number of seconds"
        raise ValueError(f"{name} must be {wanted}, not {value!r}")
    # An integer is compared as it is (math.isfinite(10**400) would raise
    # OverflowError instead of refusing it), and must fit in a float: the
    # waits and deadlines it becomes are floats.
    if ((isinstance(seconds, float) and not math.isfinite(seconds)) or (longest is not None and seconds > longest)
            or seconds > _LARGEST_FLOAT):
        wanted = "a finite number of seconds" if longest is None else f"a number of seconds up to {longest:.0f}"
        instead = ": pass None for no limit" if allow_none else ""
        raise ValueError(f"{name} must be {wanted}, not {value!r}{instead}")


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


@overload
def deadline_in(seconds: float) -> float: ...
@overload
def deadline_in(seconds: None) -> None: ...
@overload
def deadline_in(seconds: float | None) -> float | None: ...
def deadline_in(seconds: float | None) -> float | None:
    """The deadline `seconds` from now (None: no deadline, for no limit)."""
    return None if seconds is None else time.monotonic() + seconds


@overload
def remaining(deadline: float, *, at_least: float = 0.0, clock: _Clock | None = None) -> float: ...
@overload
def remaining(deadline: None, *, at_least: float = 0.0, clock: _Clock | None = None) -> None: ...
@overload
def remaining(deadline: float | None, *, at_least: float = 0.0, clock: _Clock | None = None) -> float | None: ...
def remaining(deadline: float | None, *, at_least: float = 0.0, clock: _Clock | None = None) -> float | None:
    """The seconds left until `deadline`, never less than `at_least` (0: a
    deadline that passed leaves 0, so `remaining(d) <= 0` is `expired(d)`);
    None when there is no deadline. `clock` is what the deadline is read
    against, for one kept on a clock of the caller's own (an injectable
    one: read only when there is a deadline); `time.monotonic` when None."""
    if deadline is None:
        return None
    left = deadline - (time.monotonic() if clock is None else clock())
    return left if left > at_least else at_least


def expired(deadline: float | None, *, clock: _Clock | None = None) -> bool:
    """Whether `deadline` passed (never, when there is none); `clock` as in
    `remaining()`."""
    return deadline is not None and (time.monotonic() if clock is None else clock()) >= deadline


@overload
def earliest(first: float, /, *others: float | None) -> float: ...
@overload
def earliest(*deadlines: float | None) -> float | None: ...
def earliest(*deadlines: float | None) -> float | None:
    """The nearest of `deadlines`, those that are None left out; None when
    every one is (no deadline at all)."""
    nearest = None
    for deadline in deadlines:
        if deadline is not None and (nearest is None or deadline < nearest):
            nearest = deadline
    return nearest


def acquire_until(lock: threading.Lock, deadline: float | None) -> bool:
    """Take `lock`, waiting until `deadline` (a `time.monotonic()` value;
    None: as long as it takes) at most. False when the deadline passed."""
    main = on_main_thread()
    while True:
        left = remaining(deadline)
        if left is not None and left <= 0:
            return lock.acquire(blocking=False)
        step = slice_of(left, main=main)
        if lock.acquire(timeout=-1.0 if step is None else step):
            return True


def wait_for_event(event: threading.Event, seconds: float | None) -> bool:
    """Wait until `event` is set or `seconds` went by (None: for as long as
    it takes); whether it is set."""
    end = deadline_in(seconds)
    main = on_main_thread()
    while not event.is_set():
        left = remaining(end)
        if left is not None and left <= 0:
            return False
        event.wait(slice_of(left, main=main))
    return True
