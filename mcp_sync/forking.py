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
from typing import Callable, TypeVar

__all__ = ["in_child", "before_fork"]

log = logging.getLogger("mcp_sync.fork")

Hook = TypeVar("Hook", bound=Callable[[], None])

_in_child: list[Callable[[], None]] = []
_before: list[Callable[[], None]] = []


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


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _run(_before), after_in_child=lambda: _run(_in_child))
