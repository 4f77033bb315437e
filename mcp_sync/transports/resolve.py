"""Name resolution within a deadline, for every connection the client opens
by name: the MCP HTTP transport's (`mcp_sync.transports.pool`) and the
OAuth flows' requests (`mcp_sync.auth`).

`socket.getaddrinfo` takes no timeout and cannot be interrupted: on a
broken resolver it blocks for as long as the system's resolver retries
(tens of seconds), past any deadline of the request it serves. `within()`
runs a lookup on a daemon thread of its own and waits for it only until
the caller's deadline (`ResolutionTimeout` then), or until the caller's
`stop` event is set (a cancelled or closed exchange). A lookup that
outlives its waiters is abandoned, not stopped: it ends when the resolver
gives up, and its answer is dropped. An address literal needs no lookup
(`is_address`): its callers resolve it directly, on no thread.

Bounds, whatever the resolver does:

- One thread per key (a name, and which lookup: a dial of the MCP
  transport's pool, the address check of `mcp_sync.auth.network` or a
  connection of `mcp_sync.auth._http`): a caller that finds a lookup of
  its key under way waits for that one instead of starting another, so a
  hanging name holds one thread however often it is asked for.
- At most `MAX_PENDING` lookups under way in all, for both users together:
  past that, a lookup fails at once (`ResolverBusy`: the resolver is
  evidently not answering, and each further name would hold a thread
  more).
- Nothing is cached: an answer goes to the callers waiting for it, and a
  later caller asks anew (the address check must judge the current one).

After `os.fork()` the child forgets the parent's lookups: their threads do
not exist there, and their entries would never end.

Example::

    infos = within(("connect", host, port), lambda: socket.getaddrinfo(host, port),
                   time.monotonic() + 5.0, host)
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from .. import forking
from ..errors import copy_error
from ..waiting import remaining, wait_for_event

__all__ = ["ResolutionTimeout", "ResolverBusy", "within", "pending", "is_address", "MAX_PENDING"]

T = TypeVar("T")

#: The most lookups under way at once, abandoned ones included.
MAX_PENDING = 16

_THREAD_PREFIX = "mcp-sync-resolve"

#: How often a waiter given a `stop` event looks at it: an event cannot
#: be waited for together with the lookup's own.
_STOP_POLL = 0.05


class ResolutionTimeout(TimeoutError):
    """A name did not resolve by the deadline (or too many lookups are
    still waiting for the resolver, or the caller's `stop` was set). An
    OSError, as a resolver's own failure is: the callers turn it into
    their own error."""


class ResolverBusy(ResolutionTimeout):
    """Refused at once: `MAX_PENDING` lookups are still waiting for the
    system's resolver, so it is not answering; more time would not help."""


class _Lookup:
    """One lookup in flight: `done` is set once `result` or `error` is."""

    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


# Guards `_pending`; held only to read or change it, never while resolving.
_lock = threading.Lock()
#: key -> the lookup of that key under way. An entry exists exactly while
#: its thread runs: the thread removes it, then sets `done`.
_pending: dict[Hashable, _Lookup] = {}


def is_address(host: str) -> bool:
    """Whether `host` is an IP address literal (brackets and an IPv6 zone
    allowed): `socket.getaddrinfo` answers one at once, with no lookup."""
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def pending() -> int:
    """How many lookups are under way now (abandoned ones included)."""
    with _lock:
        return len(_pending)


def within(key: Hashable, resolve: Callable[[], T], deadline: float, name: str, *,
           stop: threading.Event | None = None) -> T:
    """`resolve()`'s answer (or its exception), if it comes by `deadline`
    (a `time.monotonic()` value); else `ResolutionTimeout`, which is also
    raised at most `_STOP_POLL` after `stop` is set (the caller, which
    set it, knows why). A lookup of `key` already under way is waited for
    instead of starting another. `name` is the host, for the thread's name
    and the messages."""
    if remaining(deadline) <= 0:
        raise ResolutionTimeout("the deadline had passed before it could be looked up")
    with _lock:
        lookup = _pending.get(key)
        start = lookup is None
        if lookup is None:
            if len(_pending) >= MAX_PENDING:
                raise ResolverBusy(f"{len(_pending)} name lookups are still waiting for the system's resolver, "
                                   "and no more are started")
            lookup = _pending[key] = _Lookup()
    if start:
        thread = threading.Thread(target=_run, args=(key, lookup, resolve), name=f"{_THREAD_PREFIX} {name}",
                                  daemon=True)  # abandoned, it must not hold up the interpreter's exit
        try:
            thread.start()
        except BaseException as exc:
            if thread.ident is None:
                # Never started: its entry must not stay, and the callers
                # waiting for it get a resolver's failure, never this
                # thread's own exception (a Ctrl-C is for this caller only).
                _finish(key, lookup, None, ResolutionTimeout("no thread could be started to look it up"))
            # Else it runs (an interrupt came as it started): `_run` ends the
            # entry, so the name still holds one thread and one entry.
            if isinstance(exc, RuntimeError):  # can't start new thread
                raise ResolutionTimeout(f"no thread could be started to look it up ({exc})") from None
            raise
    if not _wait(lookup.done, deadline, stop):
        if stop is not None and stop.is_set():
            raise ResolutionTimeout("the lookup is no longer waited for")
        raise ResolutionTimeout("the system's resolver did not answer in time")
    if lookup.error is not None:
        raise copy_error(lookup.error)  # each waiter its own: a raise writes the traceback into it
    result: T = lookup.result
    return result


def _wait(done: threading.Event, deadline: float, stop: threading.Event | None) -> bool:
    """Wait for `done` until `deadline`, or until `stop` is set (looked at
    every `_STOP_POLL`); whether `done` is set."""
    while True:
        left = remaining(deadline)
        if stop is None or left <= 0:
            return wait_for_event(done, left)
        if wait_for_event(done, min(left, _STOP_POLL)):
            return True
        if stop.is_set():
            return False


def _run(key: Hashable, lookup: _Lookup, resolve: Callable[[], Any]) -> None:
    result: Any = None
    error: BaseException | None = None
    try:
        result = resolve()
    except BaseException as exc:  # noqa: BLE001 - handed to the waiters, who raise it
        # Without its traceback: that holds this frame, which holds `lookup`,
        # which would hold the error (a cycle); the waiters raise copies.
        error = exc.with_traceback(None)
    _finish(key, lookup, result, error)


def _finish(key: Hashable, lookup: _Lookup, result: Any, error: BaseException | None) -> None:
    lookup.result, lookup.error = result, error
    with _lock:
        if _pending.get(key) is lookup:
            del _pending[key]
    lookup.done.set()


@forking.in_child
def _forget_the_parents_lookups() -> None:
    global _lock, _pending
    _lock = threading.Lock()
    _pending = {}
