"""The connection supervisor: one client's connection, from start to close.

What it owns: starting a connection and having its era settled (through
the negotiation step), publishing it with what was settled, handing callers
"a live connection within this deadline", reconnecting with the backoff of
the `Reconnect` policy (eagerly, on the healer's thread, as soon as the
connection fails: `status` returns to `ready` with no call; with
`eager=False` only when an open subscription or the keepalive waits),
renewing an initialize-era session the server lost (found by a call, or by
the session's event stream), re-opening subscriptions, the keepalive,
the status, pausing admission while it reconnects, closing replaced
connections on threads of their own, `close()`, and letting go of the
parent's connection in a fork child.

What it must not know: the client (its threads hold the supervisor, which
the client's finalizer closes, so a dropped client is collected at once),
how requests are built or retried (the request pipeline, which it reaches
only through `Hooks`), or how a transport does IO.

Lock discipline. `lock` guards `conn`, `settled`, `starting`, `closed`,
`subscriptions` and `initialize_era_subscriptions`; nothing blocks under
it, and the healer (`healing.Healer`, with its own lock) is never called
under it. The closes run off the caller's thread, and the
threads on their way out, are `closers`' (a `Closers`, with its own lock,
taken after this one when both are). `restart_lock` is held by the one
thread that connects (first open, reconnect, fork child);
the reconnect state (`attempts`, `delays`, `retry_at`, `gave_up`) is only
touched under it. `session_lock` serialises session renewals.
`subscribe_lock` is held across an initialize-era listen's
`resources/subscribe` and `resources/unsubscribe` requests (the
subscriptions' own code), so the server sees them in the order the
listens that share a URI opened and closed; it is never taken under
`lock` or `restart_lock`. `settled` is an immutable record, replaced whole.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

from . import forking, negotiation
from .admission import Admission
from .closers import Closers
from .connection import Connection
from .healing import Healer, backoff
from .errors import (ConnectionClosed, HTTPStatusError, McpError, RequestTimeout, SessionExpired, TransportError,
                     UnsupportedProtocolVersion)
from .keepalive import Keepalive
from .metrics import Metrics
from .negotiation import Settled, Terms
from .notifications import Dispatcher
from .options import Keepalive as KeepalivePolicy
from .options import Reconnect
from .status import Status, StatusMonitor
from .transports.base import Target, Transport
from .waiting import acquire_until, remaining

if TYPE_CHECKING:
    from .subscriptions import Subscription

log = logging.getLogger("mcp_sync.client")

#: What a request on a client closed by its user says (a server that went
#: away says so in its own words, ServerExited for one).
CLOSED_BY_USER = ("this client is closed (by close() or at the end of its `with` block): "
                  "mcp_sync.connect() makes a new one")

#: The longest `close()` waits for the thread reconnecting for subscriptions.
CLOSE_JOIN_SECONDS = 2.0


class Hooks(Protocol):
    """What the supervisor needs from the request pipeline above it."""

    def engine_callbacks(self) -> dict[str, Any]:
        """The keyword arguments of `Connection` for server requests,
        notifications and log messages that belong to no call."""

    def after_connect(self, conn: Connection, settled: Settled, deadline: float | None) -> None:
        """What the new connection `conn` needs once callers can use it (`logging/setLevel`)."""

    def keepalive_probe(self, timeout: float) -> None:
        """Check that the connection answers (raises an `McpError` if not)."""


def _endless(reconnect: Reconnect) -> Iterator[float]:
    """`reconnect`'s waits, then its largest for ever once its attempts are spent."""
    last = reconnect.max_delay
    for last in reconnect.delays():
        yield last
    while True:
        yield last


def _renewal_timeout(method: str | None, timeout: float | None) -> RequestTimeout:
    """A call's timeout, passed while the session the server ended was set up again."""
    spent = "" if timeout is None else f" after {timeout:g} s"
    return RequestTimeout(f"{method or 'the request'} timed out{spent} while the session the server had ended was "
                          "set up again: pass a larger timeout=, or see client.status", method=method, timeout=timeout)


def bounded(timeout: float | None, deadline: float | None) -> float | None:
    """`timeout`, but never past `deadline` (None: no bound from it)."""
    if deadline is None:
        return timeout
    left = remaining(deadline, at_least=0.001)
    return left if timeout is None else min(timeout, left)


def _stable_after(policy: Reconnect) -> float:
    """How long a reconnected connection must last for its failure to
    start a fresh run of `policy` (an idle client makes no call whose
    answer would): the longest backoff wait, and at least 10 s."""
    return max(policy.max_delay, 10.0)


def _give_up(supervisor: Supervisor, cause: McpError | None) -> ConnectionClosed:
    """The policy's attempts ran out (under `restart_lock`): `failed`, for
    good, and the interrupted subscriptions end; the error to raise."""
    error = cause if cause is not None else ConnectionClosed("the connection failed")
    supervisor.gave_up = error
    supervisor.status.set(Status.FAILED, error)
    log.error("reconnecting gave up after %d attempts: %s", supervisor.attempts, error)
    for subscription in supervisor.open_subscriptions():
        if subscription.interrupted:
            subscription.fail(ConnectionClosed(f"reconnecting gave up: {error}"))
    return ConnectionClosed(f"reconnecting gave up after {supervisor.attempts} attempts: {error}")


class Policy(NamedTuple):
    """How the supervisor treats a failed connection, from the client's options."""

    restart: bool
    reconnect: Reconnect | None
    keepalive: KeepalivePolicy | None
    timeout: float | None
    probe_timeout: float
    max_server_requests: int
    handler_timeout: float | None


class Supervisor:
    """One client's connection and everything that keeps it alive."""

    def __init__(self, target: Target | Transport, policy: Policy, terms: Terms, hooks: Hooks,
                 ids: Iterator[int], metrics: Metrics, admission: Admission,
                 on_reconnect: Callable[[], None], *, clock: Callable[[], float] = time.monotonic,
                 pause: Callable[[float], None] | None = None) -> None:
        self.target = target
        self.policy = policy
        self.terms = terms
        self.hooks = hooks
        self.ids = ids
        self.metrics = metrics
        self.on_reconnect = on_reconnect  # a new connection replaced a failed one (the cache forgets)
        self.pid = os.getpid()  # the process whose connections these are (after_fork sets it)
        self.lock = threading.Lock()
        self.conn: Connection | None = None
        self.settled: Settled | None = None
        self.starting: set[Connection] = set()  # started, not yet published
        self.closed = False
        self.dispatcher = Dispatcher()
        # Status callbacks run on the dispatcher's thread, never the reader's.
        self.status = StatusMonitor(self.dispatcher.call_soon)
        self.keepalive: Keepalive | None = None
        self.admission = admission
        self.closed_event = threading.Event()  # ends a backoff wait at once
        # Held strongly: `close()` ends them (the session's streams go with it).
        self.initialize_era_subscriptions: set[Subscription] = set()
        # Every open subscription, both eras, held weakly.
        self.subscriptions: weakref.WeakSet[Subscription] = weakref.WeakSet()
        self.restart_lock = threading.Lock()
        self.session_lock = threading.Lock()
        self.subscribe_lock = threading.Lock()
        self.session_generation = 0
        self.reopen_after_fork = False
        self.opened = False  # open() ran (under `restart_lock`)
        self.attempts = 0
        self.delays: Iterator[float] | None = None
        self.retry_at = 0.0
        self.published_at = 0.0  # `clock()` when the connection in use was published
        self.gave_up: McpError | None = None
        self._probed: Connection | None = None  # the connection the keepalive checked
        # The reconnect policy's clock and backoff wait: injected by tests to
        # step through the policy's states without waiting; a backoff wait
        # ends at once when the client closes.
        self.clock = clock
        # Closes off the caller's thread, and threads on their way out.
        self.closers = Closers(clock)
        self.pause = pause if pause is not None else self._pause
        self.healer = Healer(self, self.status, self.closers, probe_timeout=policy.probe_timeout, clock=clock)

    def _pause(self, seconds: float) -> None:
        """The backoff wait: ends at once when the client closes."""
        backoff(self.closed_event, seconds)

    def register(self, subscription: Subscription, *, initialize_era: bool = False) -> None:
        """Watch `subscription`: interrupt and re-open it across reconnects,
        end it at `close()` (at once when the client is closed already).
        Initialize-era ones are held strongly (the session's streams go
        with the client); the others weakly."""
        with self.lock:
            closed = self.closed
            if not closed:
                self.subscriptions.add(subscription)
                if initialize_era:
                    self.initialize_era_subscriptions.add(subscription)
        if closed:  # `close()` ended the others already: this one ends now too
            subscription.fail(ConnectionClosed(CLOSED_BY_USER))

    def open_subscriptions(self) -> list[Subscription]:
        """The subscriptions watched now (a copy: a reader may add one meanwhile)."""
        with self.lock:
            return list(self.subscriptions)

    # -- starting and publishing (the negotiation's `Starter`) ----------------------------

    def start(self, target: Target | Transport) -> Connection:
        """A started connection, not yet visible to callers (see `publish`);
        while it starts and settles, `close()` reaches it through `starting`."""
        transport = target.open() if isinstance(target, Target) else target
        policy = self.policy
        conn = Connection(transport, self.ids, max_server_requests=policy.max_server_requests,
                          handler_timeout=policy.handler_timeout, drops=self.dispatcher.drops,
                          on_failed=self._on_failed, on_session_lost=self._on_session_lost,
                          on_events_lost=self._on_events_lost,
                          **self.hooks.engine_callbacks())
        transport.request_timeout = policy.timeout
        if policy.reconnect is not None:  # a server's retry hint never outlasts the policy's ceiling
            transport.retry_ceiling = policy.reconnect.max_delay
        with self.lock:
            if self.closed:
                raise ConnectionClosed("the client is closed")
            self.starting.add(conn)
        try:
            conn.start()
        except BaseException:
            self.abandon(conn, "the connection failed to start")
            raise
        return conn

    def abandon(self, conn: Connection, reason: str, *, later: bool = False) -> None:
        """Close a connection that was never published; `later`: on a thread
        of its own (a reconnect's caller keeps its deadline)."""
        # Closed (or handed to a closer) before it leaves `starting`, so a
        # close() meanwhile waits for that close instead of returning early.
        try:
            if later:
                self.close_later(conn, reason)
            else:
                conn.close(reason)
        finally:
            with self.lock:
                self.starting.discard(conn)

    def publish(self, conn: Connection, settled: Settled, *, resumed: bool = False) -> None:
        """Make a started, settled connection the one callers use, under the
        lock `close()` takes: one opened by a restart that lost the race
        with `close()` is closed here, never leaked. A `resumed` record (a
        reconnect in the era settled before) keeps the newest discovery
        result: a `discover()` may have landed while it reconnected."""
        with self.lock:
            self.starting.discard(conn)
            if not self.closed:
                if resumed and self.settled is not None:
                    settled = settled._replace(discovered=self.settled.discovered)
                old = self.conn
                self.published_at = self.clock()
                if old is not None and old is not conn:
                    # Its bytes stay counted in `stats()` once it is replaced.
                    self.metrics.add_bytes(sent=old.transport.bytes_sent, received=old.transport.bytes_received)
                self.conn, self.settled = conn, settled
                self.reopen_after_fork = False
                return
        conn.close("the client was closed while connecting")
        raise ConnectionClosed("the client is closed")

    def update(self, **changes: Any) -> None:
        """Replace fields of the settled record (a new `server/discover` result)."""
        with self.lock:
            if self.settled is not None:
                self.settled = self.settled._replace(**changes)

    def open(self) -> None:
        """Open the first connection, settle its era, start the keepalive.
        Once open, a second call does nothing; once closed, it raises
        `ConnectionClosed`."""
        forking.check()
        with self.restart_lock:
            if self.closed:
                raise ConnectionClosed("the client is closed")
            if self.opened:
                return
            self.opened = True
            try:
                conn = self._connect(None)
            except HTTPStatusError as exc:
                from .transports.http_target import explain_not_found  # (an HTTP target's error: loaded)

                better = explain_not_found(self.target, exc)
                if better is exc:
                    raise
                raise better.with_traceback(exc.__traceback__) from exc.__cause__  # (it says all `exc` said)
        self.hooks.after_connect(conn, self.require_settled(), None)
        self.status.set(Status.READY)
        checks = self.policy.keepalive
        if checks is None:
            return
        keepalive = Keepalive(checks.interval, checks.failures, probe=self._keepalive_probe,
                              on_dead=self._keepalive_dead)
        with self.lock:  # a close() meanwhile did not see it: it is closed here
            if not self.closed:
                self.keepalive = keepalive
                return
        keepalive.close()
        raise ConnectionClosed("the client was closed while connecting")

    def _connect(self, era: Settled | None, deadline: float | None = None, *, reconnecting: bool = False) -> Connection:
        """Start a connection, settle its era (or resume `era`), publish it.
        Called with `restart_lock` held."""
        target = era.target if era is not None else self.target
        conn = self.start(target)
        try:
            if era is None:
                conn, settled = negotiation.settle(conn, target, self.terms, self)
            else:
                settled = negotiation.resume(conn, era, self.terms, bounded(self.policy.timeout, deadline))
        except BaseException:
            self.abandon(conn, "the connection could not be set up", later=reconnecting)
            raise
        self.publish(conn, settled, resumed=era is not None)
        return conn

    # -- a live connection within a deadline ---------------------------------------------------

    def live(self, deadline: float | None = None, *, announce: bool = True) -> Connection:
        """The connection to use. Opens a new one, in the era already
        settled, when the connection failed and reconnecting is on (for a
        stateless stdio connection even with `reconnect=False`: the spec
        asks a stdio client to start its server again), or on first use in a
        fork child. One thread reconnects; the others wait for it up to their
        own `deadline`. `announce=False` leaves the status to the caller
        (the reconnect thread proves a new connection first)."""
        conn = self.conn
        if self.closed:
            if conn is not None and conn.failure is not None:
                return conn  # sending on it raises why it ended (ServerExited, say)
            raise ConnectionClosed(CLOSED_BY_USER)
        if conn is not None and not self.reopen_after_fork and (conn.failure is None or not self.may_restart(conn)):
            return conn
        if conn is None and not self.reopen_after_fork:
            raise ConnectionClosed("the client is not connected")
        if self.reopen_after_fork and not isinstance(self.target, Target):
            raise ConnectionClosed("this client's transport was opened in the parent process, before "
                                   "os.fork(), and cannot be reopened: connect() again in this process")
        if not acquire_until(self.restart_lock, deadline):
            raise RequestTimeout("the connection is being re-established and was not ready before the "
                                 "call's deadline")
        try:
            current = self.conn
            if current is not conn and current is not None and current.failure is None and not self.reopen_after_fork:
                return current  # another thread reconnected already
            if self.reopen_after_fork:
                log.info("reconnecting: the client was inherited across os.fork()")
                new = self._connect(self.require_settled())
            else:
                assert current is not None
                new = self._reconnect(current, deadline)
        finally:
            self.restart_lock.release()
        try:
            self.hooks.after_connect(new, self.require_settled(), deadline)
        finally:
            # The new connection is up whatever its follow-up request did.
            if announce:
                self.status.set(Status.READY)
                failure = new.failure  # (set before its notice: whichever comes last, the status ends right)
                if failure is not None:  # noticed while "reconnecting" still stood: said again, after "ready"
                    self._on_failed(new, failure)
            if self.keepalive is not None:
                self.keepalive.reset()
            if any(subscription.interrupted for subscription in self.open_subscriptions()):
                self.healer.soon()  # open them again, off this caller's thread
        return new

    def notify(self, method: str) -> bool:
        """Send the client notification `method` on the live connection, on
        the calling thread; False (nothing sent) when there is none: no
        reconnect for it, as a new connection starts a new session whose
        server asks afresh whatever the notification would announce."""
        if self.closed:
            raise ConnectionClosed("the client is closed")
        conn = self.conn
        if conn is None or conn.failure is not None or self.reopen_after_fork:
            return False
        conn.notify(method)
        return True

    def require_settled(self) -> Settled:
        settled = self.settled
        if settled is None:
            raise ConnectionClosed("the client is not connected")
        return settled

    def may_restart(self, conn: Connection) -> bool:
        """Whether a failed connection is opened again by the next call."""
        if not self.policy.restart or not isinstance(self.target, Target):
            return False
        if self.policy.reconnect is not None:
            return True
        # Without a reconnect policy, only what the spec asks of a stdio
        # client: start a stateless server again.
        return self.require_settled().dialect.stateless and conn.transport.restarts_server

    def alive(self) -> None:
        """A response arrived: the next failure starts a fresh run of the policy."""
        if self.attempts and self.restart_lock.acquire(blocking=False):
            try:
                self.attempts, self.delays, self.retry_at = 0, None, 0.0
            finally:
                self.restart_lock.release()

    def _reconnect(self, failed: Connection, deadline: float | None) -> Connection:
        """Open a connection in place of `failed`, waiting out the backoff
        (never past `deadline`). Called with `restart_lock` held; the
        attempts of successive callers make one run of the policy."""
        if self.gave_up is not None:
            raise ConnectionClosed(f"reconnecting gave up: {self.gave_up}")
        # New calls wait for the connection in the admission queue, bounded
        # by `max_queued` (beyond it: `Overloaded`), not on the lock.
        self.admission.pause()
        try:
            return self._reconnect_paused(failed, deadline)
        except BaseException as exc:
            if self.policy.reconnect is None:
                # Without a policy nothing tries again until the next call:
                # "reconnecting" would stay with nothing reconnecting.
                self.status.set(Status.FAILED, exc if isinstance(exc, McpError) else failed.failure)
            raise
        finally:
            self.admission.resume()

    def _reconnect_paused(self, failed: Connection, deadline: float | None) -> Connection:
        cause: McpError | None = failed.failure
        policy = self.policy.reconnect
        if self.attempts and policy is not None and self.clock() - self.published_at >= _stable_after(policy):
            # The failed connection lasted: this failure starts a fresh run.
            self.attempts, self.delays, self.retry_at = 0, None, 0.0
        # On a thread of its own: a server that hangs on its way out must not
        # hold the caller past its deadline.
        self.close_later(failed, "reconnecting after the connection failed")
        self.status.set(Status.RECONNECTING, cause)
        for subscription in self.open_subscriptions():
            subscription.interrupt()
        while True:
            if deadline is not None and self.clock() >= deadline:
                raise RequestTimeout("the connection is being re-established and was not ready before the "
                                     "call's deadline")
            if self.attempts > 0 and self.retry_at == 0.0:
                # The previous attempt connected but was not proven alive
                # (or failed): back off before this one, or give up.
                if self.delays is None:
                    # Without a policy (reconnect=False) a stateless stdio
                    # server is still started again, at once, every time.
                    self.delays = policy.delays() if policy is not None else itertools.repeat(0.0)
                delay = next(self.delays, None)
                if delay is None:
                    raise _give_up(self, cause)
                self.retry_at = self.clock() + delay
            wait = self.retry_at - self.clock()
            if wait > 0:
                if deadline is not None and self.clock() + wait > deadline:
                    raise RequestTimeout(f"the connection is being re-established; the next attempt is in "
                                         f"{wait:.2f} s, after the call's deadline")
                self.pause(wait)
            if self.closed:
                raise ConnectionClosed("the client is closed")
            # The connections being closed go first: the old server may hold
            # what the new one needs (a port, a lock file).
            if not self.closers.done(deadline):
                raise RequestTimeout("the connection is being re-established: the failed server was still "
                                     "shutting down at the call's deadline")
            self.retry_at = 0.0
            self.attempts += 1
            log.warning("the connection failed; reconnecting (attempt %d): %s", self.attempts, cause)
            era = self.require_settled()
            try:
                new = self._connect(era, deadline, reconnecting=True)
            except McpError as exc:
                if self.closed or policy is None:
                    raise  # without a policy: one attempt per call, never a loop
                cause = exc
                continue
            # The attempts are forgotten once the new connection answers a
            # call (`alive`), or lasts (`_stable_after`): a server that dies
            # right after it started, or after its handshake (a banner on
            # stdout), meets the backoff, not a hot loop, even with nobody
            # calling.
            self.metrics.count("reconnects")
            self.on_reconnect()
            return new

    def renew_session(self, conn: Connection, generation: int, cause: McpError | None = None, *,
                      method: str | None = None, timeout: float | None = None, deadline: float | None = None) -> None:
        """The server no longer knows our initialize-era session (`cause`:
        how that was found; a 404 to a call by default): start a new one,
        once for all the calls that found out at the same time. For a call
        (`method`, `timeout`, `deadline`), the wait and the renewal end by
        its deadline, and one it could not finish goes on on the healer's
        thread: "reconnecting" never stays with nothing reconnecting."""
        taken = False
        try:
            taken = acquire_until(self.session_lock, deadline)  # (sliced: an interrupt is heard)
            if not taken:
                raise _renewal_timeout(method, timeout)
            if self.session_generation != generation or self.conn is not conn or conn.failure is not None:
                # Another call renewed it already, or the connection failed
                # (a reconnect replaces it): send again.
                return
            settled = self.require_settled()
            log.info("the server no longer knows the session; initializing a new one")
            lost = cause if isinstance(cause, TransportError) else SessionExpired(
                "the server ended the session" if cause is not None else "the server ended the session (HTTP 404)",
                status=404)
            self.status.set(Status.RECONNECTING, lost)
            for subscription in self.open_subscriptions():  # the session's subscriptions went with it
                subscription.interrupt()
            try:
                renewed = negotiation.renew(conn, settled, self.terms, deadline=deadline)
            except BaseException as exc:  # (a Ctrl-C too: the renewal is left half done)
                if method is None:
                    raise  # the healer's own: it says what follows
                self.healer.session_lost(conn, lost, generation)
                if isinstance(exc, RequestTimeout) and deadline is not None and remaining(deadline) <= 0:
                    raise _renewal_timeout(method, timeout) from None
                raise
            with self.lock:
                if self.conn is conn:
                    self.settled = renewed
            self.session_generation += 1
            self.metrics.count("reconnects")
            self.status.set(Status.READY)
        finally:
            if taken:
                self.session_lock.release()
        if any(subscription.interrupted for subscription in self.open_subscriptions()):
            self.healer.soon()  # subscribe again in the new session

    def rediscover(self, refusal: UnsupportedProtocolVersion, deadline: float | None = None) -> None:
        """After a -32022 on a ready stateless connection: settle the version
        again, by the refused call's `deadline`."""
        conn = self.conn
        assert conn is not None
        settled = negotiation.reprobe(conn, self.require_settled(), refusal, self.terms, deadline)
        with self.lock:
            if self.conn is conn:
                self.settled = settled

    # -- healing without a call: failure notice, the reconnect thread, keepalive ---------------

    def _on_failed(self, failed: Connection, error: TransportError) -> None:
        """Told by a connection when it fails (on its reader thread): the
        status says so now, and the reconnect starts now (unless lazy, with
        nothing waiting). One not published (still being set up) is its
        opener's to report."""
        conn = self.conn
        if self.closed or failed is not conn:
            return
        # "reconnecting" only when something will: with no reconnect policy
        # a call may still start a stateless server again, but until one
        # does the connection is failed (`Status.FAILED`, not final).
        policy = self.policy.reconnect
        may_reconnect = conn is not None and policy is not None and self.may_restart(conn)
        self.status.set(Status.RECONNECTING if may_reconnect else Status.FAILED, error)
        if policy is not None and not policy.eager and not len(self.subscriptions) and self.keepalive is None:
            return  # lazy: the next call reconnects
        if may_reconnect:
            for subscription in self.open_subscriptions():
                subscription.interrupt()
            self.healer.soon()

    def _on_session_lost(self, conn: Connection, error: TransportError) -> None:
        """Told by a connection (on its transport's thread) that the server
        no longer knows its session, found with no call to tell (the GET
        stream's 404 after a server restart): the healer sets a new session
        up and opens the subscriptions again."""
        with self.lock:
            if self.closed or conn is not self.conn:
                return
            generation = self.session_generation
        self.status.set(Status.RECONNECTING, error)
        for subscription in self.open_subscriptions():
            subscription.interrupt()
        self.healer.session_lost(conn, error, generation)

    def _on_events_lost(self, conn: Connection, seconds: float) -> None:
        """Told by a connection (on its transport's thread) that the
        session's stream of notifications broke and was opened again
        without resuming it: the initialize-era subscriptions, which hear
        on it, get a `SubscriptionResumed` for the gap (the session's
        subscriptions stand; only what was sent meanwhile is lost)."""
        with self.lock:
            if self.closed or conn is not self.conn:
                return
            subscriptions = list(self.initialize_era_subscriptions)
        for subscription in subscriptions:
            subscription.missed(seconds)

    def stream_broken(self, conn: Connection, subscription: Subscription) -> bool:
        """`subscription`'s stream on `conn` broke: True when the supervisor
        reconnects and opens it again (it is then interrupted, not ended)."""
        if self.closed or self.policy.reconnect is None or not self.may_restart(conn):
            return False
        subscription.interrupt()
        self.healer.soon()
        return True

    def reopen_delays(self) -> Iterator[float]:
        """The waits between attempts to open again streams that keep
        breaking at once: the reconnect policy's backoff, endless."""
        return _endless(self.policy.reconnect or Reconnect())

    def next_attempt_in(self) -> float:
        """Seconds until the reconnect policy allows the next attempt (0: now)."""
        return max(self.retry_at - self.clock(), 0.0)

    def confirm(self, conn: Connection) -> None:
        """Ask the server behind a reconnected `conn` whether it answers.
        An initialize-era reconnect spoke to it already (the handshake); a
        stateless one sent nothing, so it sends `server/discover` on the
        connection itself: the answer proves the server up without counting
        as a call's (see `alive`)."""
        settled = self.settled
        if settled is not None and settled.dialect.stateless:
            negotiation.check(conn, settled, self.terms, self.policy.probe_timeout)

    def _keepalive_probe(self, timeout: float) -> None:
        if self.closed:
            return
        self._probed = self.conn
        self.hooks.keepalive_probe(timeout)

    def _keepalive_dead(self, error: McpError) -> None:
        conn, checks = self._probed, self.policy.keepalive
        if self.closed or conn is None or conn is not self.conn or checks is None:
            return  # replaced meanwhile: the new connection was not checked yet
        # Failing it starts the reconnect (`_on_failed`), off this thread.
        conn.transport_failed(ConnectionClosed(
            f"the connection looks dead: {checks.failures} keepalive checks failed ({error})"))

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close everything; idempotent, from any thread."""
        forking.check()  # in a child forked from C: close its own, never the parent's
        if self.pid != os.getpid():
            # A client no hook reached (dropped, so off the live list, and
            # closed by its finalizer in a child forked from C).
            self.after_fork()
        with self.lock:
            self.closed = True
            conns = [self.conn, *self.starting]
            self.starting = set()
            subscriptions, self.initialize_era_subscriptions = self.initialize_era_subscriptions, set()
        # Closed is announced before the dispatcher stops, so its callbacks
        # hear it; the connection is closed before the keepalive, so a
        # probe in progress ends at once.
        self.status.set(Status.CLOSED)
        self.closed_event.set()
        healer = self.healer.close()  # its backoff ends now; joined below
        # Each step in a `finally` of the one before: a Ctrl-C in one (a
        # stdio server's shutdown waits) must not leave the others' threads
        # running for good (a later close() finishes closing the connection).
        try:
            self.admission.close(ConnectionClosed("the client was closed"))
            for conn in conns:
                if conn is not None:
                    conn.close()
        finally:
            try:
                self.closers.shut()
                if self.keepalive is not None:
                    self.keepalive.close()
                # The healer first, then the threads that left: one that leaves in
                # between is in the second list.
                threads = [healer, *self.closers.left()]
                limit = time.monotonic() + CLOSE_JOIN_SECONDS
                for thread in threads:
                    if thread is not None and thread is not threading.current_thread():
                        thread.join(remaining(limit))
            finally:
                self.dispatcher.close()
                # Every subscription still open ends now, including one interrupted
                # by a reconnect that the close cut short: its stream's own end was
                # used up by the interruption, so nothing else would end it.
                with self.lock:
                    watched = list(self.subscriptions)
                for subscription in {*subscriptions, *watched}:
                    subscription.fail(ConnectionClosed("the client was closed"))

    def close_later(self, conn: Connection, reason: str) -> None:
        """Close `conn` on a thread of its own (see `Closers`)."""
        self.closers.close_later(conn, reason)

    def after_fork(self) -> None:
        """In a fork child: forget the parent's connections and threads
        without IO, take fresh locks, and reconnect on first use in the era
        already settled. Inherited subscriptions end at once with
        `SubscriptionBroken` (their streams are the parent's)."""
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.restart_lock = threading.Lock()
        self.session_lock = threading.Lock()
        self.subscribe_lock = threading.Lock()
        self.closers.after_fork()
        self.closed_event = threading.Event()
        self.healer.after_fork()
        for subscription in self.open_subscriptions():
            subscription.orphan(ConnectionClosed(
                "the subscription belongs to the parent process (os.fork()); listen again in this one"))
        self.subscriptions = weakref.WeakSet()
        for conn in (self.conn, *self.starting):
            if conn is not None:
                conn.discard()
        self.conn = None
        self.starting = set()
        self.initialize_era_subscriptions = set()
        # The child's connection is its own: a fresh run of the reconnect policy.
        self.attempts, self.delays, self.retry_at, self.gave_up = 0, None, 0.0, None
        # The dispatcher's thread was not copied: its thread starts again on first use.
        self.dispatcher.after_fork()
        self.status.after_fork()
        self.admission.after_fork()
        if self.keepalive is not None:
            self.keepalive.after_fork()
        self.reopen_after_fork = True

