"""Keepalive: notice a dead peer on an idle connection before a caller does.

Owns one daemon thread that probes the connection when nothing has happened
on it for `interval` seconds, and declares it dead after `failures`
consecutive failed probes. It does not know what a probe sends (the owner
passes `probe`: `ping` in the initialize era, `server/discover` in
2026-07-28) nor what "dead" leads to (`on_dead`: reconnect, or fail the
pending calls).

How it stays off the hot path: the owner's hooks take no lock. `touch()`
and `idle()` are plain attribute writes of the clock; `busy()` / `idle()`
also push and pop a list, the in-flight count being its length (both atomic
operations on a list). The thread wakes at most once per `interval`, reads
those, and probes only if no call is in flight and nothing happened for a
whole interval. A probe is never sent while calls are flowing.

The probe holds no admission slot (`max_in_flight`): calls may take every
slot between the thread's idle check and its `ping`, and a check refused
(`Overloaded`) or queued until its timeout for want of a slot would count
as a failure, declaring a busy, healthy connection dead. The thread marks
itself as `calling.held` (see `plain_lane`) for the probe, so the pipeline
sends it without a slot: one small request per interval, over the limit.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from .errors import McpError
from .plain_lane import calling
from .waiting import check_seconds

__all__ = ["Keepalive"]

log = logging.getLogger("mcp_sync.keepalive")

#: The longest a probe may take by default; a probe slower than this on an
#: idle connection says as much about the peer as no answer.
MAX_DEFAULT_PROBE_TIMEOUT = 10.0


class Keepalive:
    """Probe an idle connection every `interval` seconds; after `failures`
    consecutive failures call `on_dead(last_error)`, once.

    Example::

        keepalive = Keepalive(30, 3, probe=lambda timeout: client.ping(timeout=timeout),
                              on_dead=lambda error: reconnect(error))
        keepalive.busy()        # a call starts: no probe until it ends
        keepalive.idle()        # it ended: the next probe is `interval` from now
        keepalive.touch()       # something arrived from the server
        keepalive.close()

    - `probe(timeout)` raises an `McpError` when the peer does not answer in
      `timeout` (`probe_timeout`, by default the interval but at most 10 s).
      Any other exception is logged and counts as a failure.
    - `touch()` says the connection works (something arrived): the idle time
      starts again and the failure count goes back to 0.
    - After `on_dead`, nothing is probed until `reset()` (call it once a new
      connection is up). `on_dead` runs on the keepalive thread and may call
      `reset()` or `close()`.
    - The thread holds `probe` and `on_dead` until `close()`: pass functions
      that do not keep the client alive (reach it through a weak reference),
      or a client dropped unclosed is never finalized.
    - `close()` stops the thread and joins it (at most `probe_timeout` + 1 s
      while a probe is running; close the connection first to end a probe at
      once). It is idempotent and may be called from the keepalive thread.
    """

    def __init__(
        self,
        interval: float,
        failures: int,
        probe: Callable[[float], object],
        on_dead: Callable[[McpError], object],
        *,
        probe_timeout: float | None = None,
        name: str = "mcp-sync-keepalive",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = _seconds("interval", interval)
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 1:
            raise ValueError(f"failures must be an integer >= 1, not {failures!r}")
        if not callable(probe) or not callable(on_dead):
            raise TypeError("probe and on_dead must be callable")
        self.failures = failures
        self.probe_timeout = (min(self.interval, MAX_DEFAULT_PROBE_TIMEOUT) if probe_timeout is None
                              else _seconds("probe_timeout", probe_timeout))
        self._probe = probe
        self._on_dead = on_dead
        self._name = name
        # `clock` is for tests: the thread's decisions read it, so a test can
        # move time itself instead of sleeping.
        self._clock = clock
        self._closed = False
        self._start()

    def _start(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._dead = False      # under `_cond`
        self._failed = 0        # consecutive failures; the thread's own
        self._failed_at = 0.0   # when the latest probe failed (clock)
        # Written without a lock by the owner's hooks, read by the thread.
        self._calls: list[None] = []     # one item per call in flight
        self._activity = self._clock()   # the latest sign of life (`touch()`)
        self._ended = self._activity     # when the latest call ended (`idle()`)
        self._next_probe = self._activity + self.interval  # the thread's own
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    # -- the owner's hooks (hot path) ---------------------------------------------------

    def touch(self) -> None:
        """Something arrived from the server: the connection works."""
        self._activity = self._clock()

    def busy(self) -> None:
        """A call started: no probe while it is in flight."""
        self._calls.append(None)

    def idle(self) -> None:
        """A call ended (however it ended): the idle time starts now. It is
        no sign of life: a call that timed out ends too."""
        try:
            self._calls.pop()
        except IndexError:  # an idle() too many must not hide the next busy()
            pass
        self._ended = self._clock()

    @property
    def in_flight(self) -> int:
        """Calls between `busy()` and `idle()` now."""
        return len(self._calls)

    @property
    def dead(self) -> bool:
        """Whether `on_dead` was called since the start or the latest `reset()`."""
        return self._dead

    # -- control -----------------------------------------------------------------------

    def reset(self) -> None:
        """A new connection is up: forget the failures, probe again after an
        interval of idleness."""
        with self._cond:
            self._dead = False
            self._failed = 0
            self._activity = self._clock()
            self._cond.notify_all()

    def close(self, timeout: float | None = None) -> None:
        """Stop probing and join the thread, for at most `timeout` seconds
        (default `probe_timeout` + 1 s). Idempotent; any thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(self.probe_timeout + 1.0 if timeout is None else timeout)

    def after_fork(self) -> None:
        """In a fork child: the thread was not copied and the lock may have
        been held by a thread that does not exist here. A fresh lock and
        thread with no failures counted, unless closed."""
        if not self._closed:
            self._start()

    # -- the thread --------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    wait = self._until_probe()
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
            self._probe_once()

    def _until_probe(self) -> float | None:
        """(Under `_cond`.) Seconds until a probe is due: None while dead
        (only `reset()` or `close()` wakes the thread), otherwise at most one
        interval, so the thread also notices a call that ended meanwhile."""
        if self._dead:
            return None
        now = self._clock()
        if self._activity > self._failed_at:
            self._failed = 0  # the connection worked since the last failure
        if self._calls:
            return self.interval
        due = max(self._next_probe, self._activity + self.interval, self._ended + self.interval)
        # Never a busy loop, whatever the clock says.
        return min(self.interval, due - now) if due > now else 0.0

    def _probe_once(self) -> None:
        # No admission slot for the probe (see the module notes): a verdict
        # on the peer must not depend on how many slots the user's calls hold.
        # Only this thread's flag, and only for the probe: `on_dead` (which
        # may reconnect) runs without it.
        try:
            calling.held = True
            try:
                self._probe(self.probe_timeout)
            finally:
                calling.held = False
        except McpError as exc:
            self._failure(exc)
        except Exception as exc:
            log.exception("the keepalive probe raised an unexpected error")
            error = McpError(f"the keepalive probe failed: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self._failure(error)
        else:
            self._failed = 0
            self._activity = self._clock()
        finally:
            self._next_probe = self._clock() + self.interval

    def _failure(self, error: McpError) -> None:
        self._failed += 1
        self._failed_at = self._clock()
        log.debug("keepalive probe failed (%d of %d): %s", self._failed, self.failures, error)
        if self._failed < self.failures:
            return
        with self._cond:
            if self._closed:
                return
            self._dead = True
        try:
            self._on_dead(error)
        except Exception:
            log.exception("the keepalive's on_dead callback raised")


def _seconds(name: str, value: float) -> float:
    # Bounded as a request timeout is: the thread waits up to one interval
    # in a single `Condition.wait`.
    check_seconds(name, value, allow_none=False)
    return float(value)
