"""The healer: the supervisor's `mcp-sync-reconnect` thread.

It reconnects a failed connection with no call waiting (the status
returns to `ready` by itself), sets up a new initialize-era session when a
transport found the old one gone, and opens every interrupted
subscription again. At most one such thread runs per client; a request to
heal while it runs makes it look once more before it ends.

It reaches the supervisor only through `Healable`: it never holds the
supervisor's lock, and the supervisor calls it only through `soon`,
`session_lost`, `close` and `after_fork`.

Lock discipline: `lock` guards `thread`, `again`, `lost` and `closed`;
nothing blocks under it. The supervisor never calls in while it holds a
lock of its own; under `lock` the healer takes only the `Closers` lock
(a thread on its way out leaves through it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Callable, Protocol

from .closers import Closers
from .connection import Connection
from .errors import ConnectionClosed, McpError, RequestTimeout, TransportError
from .status import Status, StatusMonitor
from .waiting import deadline_in, expired, remaining, wait_for_event

if TYPE_CHECKING:
    from .subscriptions import Subscription

log = logging.getLogger("mcp_sync.client")

#: The longest one round waits for a connection before it looks again (and
#: sees a close).
ROUND_SECONDS = 1.0
#: The shortest wait between two rounds that found the connection not ready.
MIN_ROUND_WAIT = 0.05
#: The longest one piece of a backoff's wait: a policy's waits may exceed
#: what `Event.wait` accepts (`threading.TIMEOUT_MAX`: OverflowError beyond,
#: which killed the waiting thread), so a longer one waits in pieces.
BACKOFF_PIECE = 86400.0


def backoff(stop: threading.Event, seconds: float) -> bool:
    """Wait `seconds`, however many, or until `stop` is set; whether it is."""
    end = deadline_in(seconds)
    while not wait_for_event(stop, min(remaining(end), BACKOFF_PIECE)):
        if expired(end):
            return False
    return True


class Healable(Protocol):
    """What the healer needs of the supervisor."""

    @property
    def closed(self) -> bool: ...

    @property
    def conn(self) -> Connection | None: ...

    def live(self, deadline: float | None = None, *, announce: bool = True) -> Connection:
        """The connection to use, reconnected if it failed (see `Supervisor.live`)."""

    def may_restart(self, conn: Connection) -> bool:
        """Whether a failed `conn` is opened again."""

    def next_attempt_in(self) -> float:
        """Seconds until the reconnect policy allows the next attempt."""

    def confirm(self, conn: Connection) -> None:
        """Ask the server behind a new `conn` whether it answers, where
        connecting did not (raises an `McpError` if it does not)."""

    def renew_session(self, conn: Connection, generation: int, cause: McpError | None = None) -> None:
        """Set up a new initialize-era session on `conn`."""

    def open_subscriptions(self) -> list[Subscription]:
        """The subscriptions watched now."""

    def alive(self) -> None:
        """The server answered: the next failure starts a fresh run of the policy."""

    def reopen_delays(self) -> Iterator[float]:
        """The waits between attempts to open streams again that keep
        breaking at once (the reconnect policy's backoff)."""


class Healer:
    """Runs the reconnect thread of one supervisor."""

    def __init__(self, supervisor: Healable, status: StatusMonitor, closers: Closers, *,
                 probe_timeout: float, clock: Callable[[], float]) -> None:
        self._supervisor = supervisor
        self._status = status
        self._closers = closers  # the thread leaves through it, so close() joins it
        self._probe_timeout = probe_timeout
        self._clock = clock
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.again = False
        # The session a transport found gone, with the session generation it
        # was lost in (one renewed since is not renewed again).
        self.lost: tuple[Connection, TransportError, int] | None = None
        self.closed = False
        self._stop = threading.Event()  # ends a backoff wait at once
        # The backoff of streams opened again that broke again at once (the
        # server not back yet, though the connection stands): the healer's
        # thread's own, reset once they are all open.
        self._reopen_waits: Iterator[float] | None = None

    def soon(self) -> None:
        """Start the thread unless it runs already. Only starts a thread:
        callable from a reader."""
        with self.lock:
            if self.closed:
                return
            if self.thread is not None:
                self.again = True  # it looks again before it ends
                return
            self.again = False
            thread = threading.Thread(target=self._run, name="mcp-sync-reconnect", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # no thread to be had: the next call reconnects instead
                log.warning("no thread to reconnect for the open subscriptions: %s", exc)
                return
            self.thread = thread

    def session_lost(self, conn: Connection, error: TransportError, generation: int) -> None:
        """`conn`'s session (of `generation`) is gone: set a new one up."""
        with self.lock:
            self.lost = (conn, error, generation)
        self.soon()

    def close(self) -> threading.Thread | None:
        """Stop: no new thread starts, a backoff wait ends. Returns the
        thread running, for the caller to join."""
        with self.lock:
            self.closed = True
            thread = self.thread
            self.lost = None  # no new session after close
        self._stop.set()
        return thread

    def after_fork(self) -> None:
        """In a fork child: the thread was not copied."""
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.thread, self.again, self.lost = None, False, None
        self._reopen_waits = None

    def _run(self) -> None:
        """Reconnect and open every interrupted subscription again, until
        they are all open or reconnecting gave up (they then end with
        `SubscriptionBroken`)."""
        try:
            while True:
                wait = self._round()
                if wait is None:
                    with self.lock:
                        if not self.again or self.closed:
                            self.thread = None
                            self._closers.leave(threading.current_thread())
                            return
                        self.again = False
                    continue
                backoff(self._stop, wait)
        except BaseException:  # a thread of ours never dies silently
            log.exception("reconnecting failed unexpectedly")
            with self.lock:
                self.thread = None
                self._closers.leave(threading.current_thread())

    def _round(self) -> float | None:
        """One round: None when there is nothing more to do, else how long
        to wait before the next round."""
        supervisor = self._supervisor
        if supervisor.closed:
            return None
        with self.lock:
            lost, self.lost = self.lost, None
            self.again = False  # from here on, a stream that breaks again says so
        if lost is not None and not self._renew(*lost):
            conn = supervisor.conn
            if conn is None or conn.failure is None:
                return None  # left to the next call (no reconnect policy): the status says failed
        try:
            before = supervisor.conn
            conn = supervisor.live(self._clock() + ROUND_SECONDS, announce=False)
            if conn.failure is not None and not supervisor.may_restart(conn):
                return None  # not ours to reopen: the status says failed, calls get the error
            if not self._proven(conn, new=conn is not before):
                return max(supervisor.next_attempt_in(), MIN_ROUND_WAIT)
        except RequestTimeout:
            return max(supervisor.next_attempt_in(), MIN_ROUND_WAIT)
        except McpError as exc:
            if not supervisor.closed:
                log.warning("reconnecting failed: %s", exc)
            for subscription in supervisor.open_subscriptions():
                if subscription.interrupted:
                    subscription.fail(exc)
            return None
        reopened = self._reopen(conn)
        # The server acknowledging the streams opened again proves the new
        # connection alive, as a response to a call would. Looked at in
        # slices: a connection that fails meanwhile ends the wait at once.
        limit = deadline_in(self._probe_timeout)
        while (reopened and conn.failure is None and not supervisor.closed and not expired(limit)
               and not all(sub.settled for sub in reopened) and not self.again):
            self._stop.wait(MIN_ROUND_WAIT)
        if reopened and all(sub.reopened for sub in reopened):
            supervisor.alive()
            self._reopen_waits = None
        elif self.again and any(sub.interrupted for sub in reopened):
            # A stream opened again broke again at once: the server is not
            # back. Again after the policy's backoff, not at the end of the
            # probe's wait (nor at once, which would spin).
            if self._reopen_waits is None:
                self._reopen_waits = supervisor.reopen_delays()
            delay = max(next(self._reopen_waits), MIN_ROUND_WAIT)
            log.debug("the subscriptions opened again broke at once (the server is not back): again in %.2f s", delay)
            return delay
        if conn.failure is not None and any(sub.interrupted for sub in supervisor.open_subscriptions()):
            return 0.0  # round again
        return None

    def _reopen(self, conn: Connection) -> list[Subscription]:
        """Open every interrupted subscription again on `conn`; the ones sent."""
        reopened = []
        for subscription in self._supervisor.open_subscriptions():
            if not subscription.interrupted:
                continue
            try:
                if subscription.reopen_on(conn):
                    reopened.append(subscription)
            except ConnectionClosed:
                pass  # the new connection failed already: round again
            except Exception as exc:
                log.warning("a subscription could not be opened again: %s", exc)
                subscription.fail(exc if isinstance(exc, McpError) else
                                  ConnectionClosed(f"opening it again failed: {exc}"))
        return reopened

    def _renew(self, conn: Connection, cause: TransportError, generation: int) -> bool:
        """A new session on `conn`, whose server lost session `generation`.
        False when that failed: the connection then fails and is replaced,
        per the policy; without one, the status says `failed` and the next
        call, meeting the loss, tries again."""
        supervisor = self._supervisor
        try:
            supervisor.renew_session(conn, generation, cause)
            return True
        except McpError as exc:
            if supervisor.closed:
                return False
            log.warning("a new session could not be set up: %s", exc)
            if supervisor.may_restart(conn):
                conn.transport_failed(exc if isinstance(exc, TransportError) else
                                      ConnectionClosed(f"a new session could not be set up: {exc}"))
            else:
                self._status.set(Status.FAILED, exc)
            return False

    def _proven(self, conn: Connection, *, new: bool) -> bool:
        """Whether the server behind a reconnected `conn` answers: the status
        says `ready` only then. False: `conn` was failed and the next round
        reconnects, after the policy's backoff."""
        if new:
            try:
                self._supervisor.confirm(conn)
            except McpError as exc:
                if conn.failure is None and not self._supervisor.closed:
                    conn.transport_failed(ConnectionClosed(f"the server did not answer after reconnecting: {exc}"))
                return False
        if conn.failure is not None:
            return False
        self._status.set(Status.READY)
        return True
