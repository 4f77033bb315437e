"""One registry of what the package does around `os.fork()`.

A component that holds process-wide state a fork child cannot use (a lock
a parent thread may have held, a thread that was not copied, a connection
that stays the parent's) registers one function here, in the module that
owns that state: `in_child(fn)` runs `fn` in the child, `before_fork(fn)`
runs it in the parent just before. A single `os.register_at_fork` hook runs
them in the order they were registered (the order the modules were
imported), each on its own: one that raises is logged and the others
still run. Objects (clients, caches) are reset by their module's function,
which keeps a weak set of the live ones.

A process forked by C code (an application server's master, an extension
calling fork(2)) runs no `os.register_at_fork` hook. So every public entry
point that touches inherited state (a request, `open()`, `close()`, a
group's methods, a subscription's `next()` and `close()`) first calls
`check()`, which compares the process id with the one the hooks last saw
and runs the child's hooks once when they differ: the same reset, at the
first use instead of at the fork. Such a child may already run several
threads, so a hook that walks a weak set of live objects copies it with
`members()`, which another thread adding to the set cannot break.

Example::

    from mcp_sync import forking

    _lock = threading.Lock()

    @forking.in_child
    def _fresh_lock() -> None:
        global _lock
        _lock = threading.Lock()
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Callable, TypeVar

__all__ = ["in_child", "before_fork", "check", "members"]

log = logging.getLogger("mcp_sync.fork")

Hook = TypeVar("Hook", bound=Callable[[], None])
T = TypeVar("T")

_in_child: list[Callable[[], None]] = []
_before: list[Callable[[], None]] = []

#: The process the hooks last ran for (or were imported in). Written only
#: under that process's lock in `_resetting` or by the at-fork hook, which
#: runs single-threaded; read without a lock by `check()` and by a hot path
#: that skips calling `check()` when `os.getpid()` equals it.
pid = os.getpid()
#: pid -> the lock the threads of that process take to run its reset. One
#: per process, made by `dict.setdefault` (atomic under the GIL), because a
#: lock inherited from the parent may have been held by a thread the fork
#: did not copy (the parent's own reset, when it too was forked from C).
_resetting: dict[int, threading.Lock] = {}


def in_child(hook: Hook) -> Hook:
    """Run `hook` in every fork child, right after the fork (a decorator)."""
    _in_child.append(hook)
    return hook


def before_fork(hook: Hook) -> Hook:
    """Run `hook` in the parent just before each fork (a decorator)."""
    _before.append(hook)
    return hook


def _run(hooks: list[Callable[[], None]]) -> None:
    for hook in list(hooks):
        try:
            hook()
        except Exception:  # noqa: BLE001 - one component's failure must not leave the others unreset
            log.exception("the fork hook %s failed", getattr(hook, "__qualname__", hook))


def check() -> None:
    """Run the child's hooks now if this process was forked without them
    (by C code that calls fork(2) directly). Costs one `os.getpid()` when
    nothing forked. Threads of the child that call it together wait for the
    one that runs the hooks; it sets the new pid only when they are done."""
    global pid
    current = os.getpid()
    if current == pid:
        return
    with _resetting.setdefault(current, threading.Lock()):
        if current == pid:
            return  # another thread ran them
        _run(_in_child)
        pid = current
        for other in [other for other in _resetting if other != current]:
            _resetting.pop(other, None)  # ancestors' locks: no thread here takes them
    # Logged after the lock: a logging handler's lock a parent thread held at
    # the fork (logging's own at-fork reset did not run either) must not
    # hold up every entry point.
    log.info("this process was forked without the os.register_at_fork hooks: reset on first use")


def members(objects: weakref.WeakSet[T]) -> list[T]:
    """A copy of a weak set that other threads may add to meanwhile (iterating
    one while it grows raises RuntimeError: the copy is then taken again)."""
    while True:
        try:
            return list(objects)
        except RuntimeError:
            continue


def _after_fork_in_child() -> None:
    global pid
    pid = os.getpid()
    _resetting.clear()
    _run(_in_child)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _run(_before), after_in_child=_after_fork_in_child)
