"""Connections for the HTTP transport: dialing, slot budgets, cancellation,
and the reusable threads that read response streams.

Owns: every socket the HTTP transport opens (`Conn`), how it is opened
(`Dialer`: the name resolved within the deadline, see `resolve`; TCP,
maybe a tunnel through a proxy, then TLS with urllib3's context defaults),
the budgets that bound how many are in use at once (`Pool`), the handle
through which one exchange is stopped from another thread (`Exchange`),
and the exchange threads (`ExchangeThreads`).

Must not know: HTTP or MCP. Jobs are plain callables, a connection is a
socket, and what travels over it is the caller's business.

How it works. Each request, one-way message and stream is an `Exchange`:
it takes a slot from its `Pool` (waiting at most until its deadline), then
an idle connection or a freshly dialed one, and gives both back through
`Exchange.release()`. Slots are counted by *which exchange* holds them (a
set), so giving one back is idempotent and every path, an exception or a
`KeyboardInterrupt` included, can give it back in a `finally` without
risk of counting twice. Each exchange has a lock: `abort()` (a timeout,
`close()` from another thread) sets its stop flag and shuts its socket down
under that lock, so a blocked connect, TLS handshake or read fails at once;
everything that hands the exchange a new socket takes the same lock and
checks the flag, so a socket can never escape an abort that came first
(that is the stop check after connect). A connection whose exchange was
aborted is closed, never reused.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import socket
import ssl
import threading
import time
from typing import Any, Callable

from urllib3.util.wait import wait_for_read, wait_for_write

from ..errors import ConnectionClosed
from ..waiting import earliest, remaining
from . import resolve

log = logging.getLogger("mcp_sync.transport.http")

#: How long a blocked connect sleeps between looks at its stop flag: a
#: socket that is still connecting cannot be woken by `shutdown()`.
_CONNECT_POLL = 0.05

#: The longest a keep-alive connection is left idle and still reused. Many
#: servers close idle connections after 5 s (uvicorn, Node's http): a
#: request sent on one just as the server closes it fails with a reset and
#: no answer, and a request may not be safe to send again. A connection idle
#: for this long is closed instead; a new one costs one handshake.
MAX_IDLE_SECONDS = 4.0

#: How long an exchange thread waits for work before it retires.
IDLE_THREAD_SECONDS = 30.0

#: The longest `ExchangeThreads.close()` waits for its threads in all.
THREAD_JOIN_SECONDS = 5.0


#: OpenSSL's reasons for a peer whose first bytes are not a TLS record.
_NOT_TLS_REASONS = frozenset({"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "RECORD_LAYER_FAILURE",
                              "UNKNOWN_PROTOCOL", "PACKET_LENGTH_TOO_LONG", "UNEXPECTED_RECORD"})


class TLSError(OSError):
    """A TLS handshake failed; the message says why (certificate, not TLS, ...)."""


class Stopped(ConnectionClosed):
    """The exchange was aborted (cancelled, timed out, or the transport closed)."""


class NoFreeSlot(ConnectionClosed):
    """Every slot of the pool stayed in use until the exchange's deadline."""


def _shutdown(sock: socket.socket) -> None:
    # The plain socket's shutdown even for TLS: `SSLSocket.shutdown` also
    # drops its TLS object, under a read that may be running right now.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # not connected yet, or already closed


class Conn:
    """One connection: a connected socket (None once closed)."""

    __slots__ = ("sock", "idle_since")

    def __init__(self, sock: socket.socket | None = None) -> None:
        self.sock = sock
        #: When it was last given back to the pool (`time.monotonic()`).
        self.idle_since = 0.0

    def alive(self) -> bool:
        """Whether an idle keep-alive connection is still usable: the server
        has neither closed it nor sent anything unasked."""
        sock = self.sock
        if sock is None:
            return False
        try:
            return not wait_for_read(sock, timeout=0.0)
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def discard(self) -> None:
        """Close this process's descriptor only (after `os.fork()`): no
        shutdown, no TLS close_notify, so the parent's copy is untouched."""
        sock, self.sock = self.sock, None
        if sock is None:
            return
        try:
            fd = sock.detach()  # closed even if a reader still holds a file on it
        except OSError:
            return
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class Exchange:
    """One request's (or stream's, or one-way message's) hold on a
    connection: what cancellation must reach. Fields that `abort()` reads are
    only changed under `_lock`."""

    __slots__ = ("request_id", "stop", "pool", "deadline", "on_caller", "auth_pause", "conn", "response",
                 "_dialing", "_lock")

    def __init__(self, request_id: int | str, pool: Pool, *, on_caller: bool = False,
                 deadline: float | None = None) -> None:
        self.request_id = request_id
        self.pool = pool
        # Read on the calling thread (until an SSE stream is handed off to an
        # exchange thread); then socket reads are bounded by the deadline.
        self.on_caller = on_caller
        self.deadline = deadline
        #: Seconds spent getting authorization (a person may be approving in
        #: a browser): added to the deadline, as the caller's clock stops.
        self.auth_pause = 0.0
        self.stop = threading.Event()
        self.conn: Conn | None = None
        self.response: Any = None
        self._dialing: socket.socket | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        if self.stop.is_set():
            raise Stopped("the request was cancelled")

    def track(self, sock: socket.socket) -> None:
        """A socket being dialed for this exchange: `abort()` now reaches it."""
        with self._lock:
            if self.stop.is_set():
                raise Stopped("the request was cancelled while connecting")
            self._dialing = sock

    def attach(self, conn: Conn, sock: socket.socket | None = None) -> None:
        """Hold `conn` (with its newly dialed `sock`); fails if aborted meanwhile."""
        with self._lock:
            self._dialing = None
            if self.stop.is_set():
                raise Stopped("the request was cancelled while connecting")
            if sock is not None:
                conn.sock = sock
            self.conn = conn

    def set_response(self, response: Any) -> None:
        with self._lock:
            if self.stop.is_set():
                raise Stopped("the request was cancelled")
            self.response = response

    def abort(self) -> None:
        """Stop the exchange from any thread: a blocked connect, handshake or
        read fails at once. Never blocks on IO."""
        with self._lock:
            self.stop.set()
            socks = [self._dialing, self.conn.sock if self.conn is not None else None]
            for sock in socks:
                if sock is not None:
                    _shutdown(sock)
        self.pool.wake()

    def release(self, *, reusable: bool) -> None:
        """Give the connection (if any) and the slot back. Idempotent; an
        aborted exchange's connection is closed, never reused."""
        with self._lock:
            conn, response = self.conn, self.response
            self.conn = self.response = None
            self._dialing = None
            reusable = reusable and not self.stop.is_set()
        try:
            if response is not None and not reusable:
                try:
                    response.close()  # it holds its own reference to the socket's file
                except (OSError, RuntimeError):
                    pass
        finally:
            self.pool.release(self, conn, reusable)

    def discard(self) -> None:
        """After `os.fork()`, in the child: close this process's copy of the
        socket; no lock (its holder may not exist here), no shutdown."""
        if self._dialing is not None:
            Conn(self._dialing).discard()
        conn = self.conn
        if conn is not None:
            conn.discard()


class Dialer:
    """Opens connections to one origin: TCP, then TLS when `tls` is given.
    Bounded by `timeout` and the exchange's deadline, stopped by its abort.

    With `via` (a forward proxy's host and port), TCP goes to the proxy,
    which resolves the origin's name itself; `tunnel`, when given, then
    runs on the connected socket (under the same bound and abort) to open
    a tunnel to the origin, and TLS to the origin (`server_hostname` its
    host) goes through it.

    The name dialed (the proxy's, with `via`) is resolved within the same
    bound, on a thread of `resolve` (`socket.getaddrinfo` takes no timeout
    and nothing interrupts it); an address literal needs no lookup and
    gets no thread."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None, timeout: float, *,
                 via: tuple[str, int] | None = None,
                 tunnel: Callable[[socket.socket, float], None] | None = None) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.timeout = timeout
        self.via = via
        self.tunnel = tunnel

    def dial(self, exchange: Exchange, deadline: float | None) -> socket.socket:
        started = time.monotonic()
        limit = earliest(started + self.timeout, deadline)
        host, port = self.via if self.via is not None else (self.host, self.port)
        what = "the proxy " if self.via is not None else ""
        bound = f"connect_timeout={self.timeout:g} s" if limit == started + self.timeout else None
        infos = self._resolve(host, port, what, exchange, limit, bound)
        error: OSError | None = None
        try:
            for family, kind, proto, _, address in infos:
                sock = socket.socket(family, kind, proto)
                try:
                    exchange.track(sock)
                    self._connect(sock, address, exchange, limit)
                    if family in (socket.AF_INET, socket.AF_INET6):
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    if self.tunnel is not None:
                        self._open_tunnel(sock, exchange, limit)
                    if self.tls is not None:
                        sock = self._handshake(sock, exchange, limit)
                    return sock
                except OSError as exc:
                    sock.close()
                    if exchange.stop.is_set():
                        raise Stopped("the request was cancelled while connecting") from None
                    error = exc
                except BaseException:
                    sock.close()
                    raise
            if error is not None and self.via is not None and not isinstance(error, (socket.timeout, TLSError)):
                raise OSError(error.errno, f"cannot reach the proxy {host}:{port}: {error.strerror or error}") from error
            raise error if error is not None else OSError(f"no address for {what}{host!r}")
        finally:
            # A failure kept from an earlier address: its traceback holds this
            # frame, whichever way out (a later address connects, a stop).
            error = None

    @staticmethod
    def _resolve(host: str, port: int, what: str, exchange: Exchange, limit: float, bound: str | None) -> list[Any]:
        """`host`'s addresses by `limit`, or an OSError that says why not
        (`bound`: what set `limit`, when a setting did); `Stopped` once the
        exchange is aborted (the lookup is abandoned)."""
        def lookup() -> list[Any]:
            return socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)

        if resolve.is_address(host):
            try:
                return lookup()  # a literal: answered at once, no thread on the hot path
            except OSError as exc:
                raise OSError(f"cannot resolve {what}{host!r}: {exc}") from exc
        if remaining(limit) <= 0:
            # No time was spent on the resolver: the request's deadline
            # ended it, as it ends a connect (the caller reports its timeout).
            raise socket.timeout(f"the deadline passed before {what}{host!r} could be looked up")
        bound = bound or f"{remaining(limit):.2g} s"
        try:
            # A lookup under way is shared only by callers asking the same
            # question: every dial asks this one, and the authorization's
            # lookups (another family, or a resolver of their own) have keys
            # of their own.
            return resolve.within(("mcp", host, port), lookup, limit, host, stop=exchange.stop)
        except resolve.ResolutionTimeout as exc:
            if exchange.stop.is_set():
                raise Stopped("the request was cancelled while connecting") from None
            # Not a TimeoutError, deliberately: the transport reports it as
            # this dial's failure (a ConnectError naming the name), not as
            # the caller's own timeout, whose message cannot say why.
            raise OSError(_not_resolved(what, host, bound, exc, timed_out=remaining(limit) <= 0)) from None
        except OSError as exc:
            raise OSError(f"cannot resolve {what}{host!r}: {exc}") from exc

    def _open_tunnel(self, sock: socket.socket, exchange: Exchange, limit: float) -> None:
        """The tunnel through the proxy, bounded like the connect; an abort
        shuts the (tracked) socket down under its reads."""
        assert self.tunnel is not None
        try:
            self.tunnel(sock, limit)
        except Exception:
            if exchange.stop.is_set():
                raise Stopped("the request was cancelled while connecting") from None
            raise
        exchange.check()
        sock.settimeout(None)

    @staticmethod
    def _connect(sock: socket.socket, address: Any, exchange: Exchange, limit: float) -> None:
        """Connect without blocking, looking at the stop flag meanwhile: a
        connecting socket cannot be woken from another thread."""
        sock.setblocking(False)
        code = sock.connect_ex(address)
        if code not in (0, errno.EISCONN):
            if code not in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                raise OSError(code, f"connecting to {address!r}: {os.strerror(code)}")
            while True:
                left = remaining(limit)
                if left <= 0:
                    raise socket.timeout(f"connecting to {address!r} timed out")
                if wait_for_write(sock, timeout=min(left, _CONNECT_POLL)):
                    break
                exchange.check()
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, f"connecting to {address!r}: {os.strerror(code)}")
        exchange.check()
        sock.setblocking(True)

    def _handshake(self, sock: socket.socket, exchange: Exchange, limit: float) -> socket.socket:
        assert self.tls is not None
        wrapped = self.tls.wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False)
        try:
            exchange.track(wrapped)  # the plain socket object is detached now
            try:
                self._shake(wrapped, exchange, limit)  # an abort shuts the socket down under it
            except OSError as exc:
                if exchange.stop.is_set():
                    raise
                raise TLSError(self._tls_failure(exc)) from exc
            exchange.check()
        except BaseException:
            wrapped.close()
            raise
        return wrapped

    @staticmethod
    def _shake(sock: ssl.SSLSocket, exchange: Exchange, limit: float) -> None:
        """The handshake without blocking, bounded by `limit` as a whole: a
        socket timeout would bound each read only, and a server that
        trickles its handshake a byte at a time could stretch it."""
        sock.setblocking(False)
        while True:
            try:
                sock.do_handshake()
                break
            except ssl.SSLWantReadError:
                ready = wait_for_read
            except ssl.SSLWantWriteError:
                ready = wait_for_write
            left = remaining(limit)
            if left <= 0:
                raise socket.timeout("the handshake timed out")
            ready(sock, timeout=min(left, _CONNECT_POLL))
            exchange.check()
        sock.setblocking(True)

    def _tls_failure(self, exc: OSError) -> str:
        """What a failed handshake means, in words a user can act on."""
        where = f"TLS handshake with {self.host}:{self.port} failed"
        reason = getattr(exc, "reason", None)
        if isinstance(exc, ssl.SSLCertVerificationError):
            return f"{where}: certificate verify failed: {exc.verify_message}"
        if reason in _NOT_TLS_REASONS:
            return f"{where}: the server answered with something that is not TLS (is it plain HTTP? try http://)"
        if isinstance(exc, socket.timeout):
            # A plain-HTTP server waiting for the end of a request head says nothing at all.
            return f"{where}: no answer before the timeout (is it a plain-HTTP server? try http://)"
        if isinstance(exc, ssl.SSLError) and reason is not None:
            return f"{where}: {reason}: {exc}"
        return f"{where}: {exc}"


def _not_resolved(what: str, host: str, bound: str, exc: resolve.ResolutionTimeout, *, timed_out: bool) -> str:
    """Why a name was not resolved within `bound`, in words a user can act on."""
    check = "check the system's DNS resolver (/etc/resolv.conf, the network)"
    if isinstance(exc, resolve.ResolverBusy):
        return f"cannot resolve {what}{host!r}: it was not looked up: {exc}; {check}: more time would not help"
    if not timed_out:  # time was left: no thread could be started for the lookup
        return f"cannot resolve {what}{host!r}: {exc}"
    return f"cannot resolve {what}{host!r}: it did not resolve within {bound} ({exc}); {check}"


class Pool:
    """A budget of at most `size` exchanges at once (None: no bound), with
    idle connections kept for reuse when `keep_idle`.

    A waiter blocks on the condition until a slot is free, the pool closes,
    its deadline passes, or its exchange is aborted (`wake()` re-checks).
    """

    def __init__(self, dial: Callable[[Exchange, float | None], socket.socket], size: int | None, *,
                 keep_idle: bool = True) -> None:
        self._dial = dial
        self._size = size
        self._keep_idle = keep_idle
        self._idle: list[Conn] = []
        self._leases: set[Exchange] = set()
        self._closed = False
        self._cond = threading.Condition()

    @property
    def in_use(self) -> int:
        return len(self._leases)

    @property
    def idle(self) -> int:
        return len(self._idle)

    def acquire(self, exchange: Exchange, deadline: float | None = None) -> Conn:
        """A connected connection for `exchange`, waiting for a slot until
        `deadline` (a `time.monotonic()` value) at the latest. On any
        exception, `KeyboardInterrupt` included, the slot is given back."""
        try:
            with self._cond:
                while (self._size is not None and len(self._leases) >= self._size and not self._closed
                       and not exchange.stop.is_set()):
                    if deadline is None:
                        self._cond.wait()
                    elif not self._cond.wait(remaining(deadline)):
                        raise NoFreeSlot("no connection was free before the request's deadline")
                if self._closed:
                    raise ConnectionClosed("the connection is closed")
                exchange.check()
                self._leases.add(exchange)
                conn = self._idle.pop() if self._idle else None
            if conn is not None and (time.monotonic() - conn.idle_since > MAX_IDLE_SECONDS or not conn.alive()):
                conn.close()  # idle too long to race the server's own close, or dropped by it
                conn = None
            if conn is not None:
                exchange.attach(conn)
                return conn
            fresh = Conn()
            exchange.attach(fresh)
            sock = self._dial(exchange, deadline)
            try:
                exchange.attach(fresh, sock)  # the stop check after connect
            except BaseException:
                sock.close()
                raise
            return fresh
        except BaseException:
            exchange.release(reusable=False)
            raise

    def release(self, exchange: Exchange, conn: Conn | None, reusable: bool) -> None:
        """The slot of `exchange` back (idempotent), and its connection:
        kept when `reusable` (and the pool keeps idle ones), else closed."""
        keep = conn is not None and reusable and self._keep_idle and conn.sock is not None
        try:
            if conn is not None and not keep:
                conn.close()
        finally:
            with self._cond:
                self._leases.discard(exchange)
                if keep and not self._closed:
                    assert conn is not None
                    conn.idle_since = time.monotonic()
                    self._idle.append(conn)
                    conn = None
                self._cond.notify()
            if keep and conn is not None:
                conn.close()  # the pool closed meanwhile

    def move(self, exchange: Exchange, to: Pool) -> None:
        """Move the slot `exchange` holds, and its connection, out of this
        pool's budget into `to`'s: a request left waiting for a late answer
        nobody waits for any more holds no slot a new request needs. Only
        by the exchange's owner (nothing else releases it meanwhile)."""
        with to._cond:
            to._leases.add(exchange)
        exchange.pool = to
        with self._cond:
            self._leases.discard(exchange)
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for conn in idle:
            conn.close()

    def discard(self) -> None:
        """After `os.fork()`, in the child: close this process's copies of
        the idle connections. No lock: its holder may not exist here."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.discard()


class ExchangeThreads:
    """Reusable exchange threads: a job goes to an idle thread, or a new one
    when none is idle. A thread with no work for `idle_seconds` retires;
    `close()` ends the rest, waiting at most `THREAD_JOIN_SECONDS` in all."""

    def __init__(self, name: str, idle_seconds: float = IDLE_THREAD_SECONDS) -> None:
        self._name = name
        self._idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Threads waiting for a job and not yet promised to one: `submit`
        # and a retiring thread each take one, so a queued job always has
        # a thread that will get it.
        self._idle = 0
        self._threads: list[threading.Thread] = []
        #: Threads that retired (off `_threads`) and may not have ended yet:
        #: `close()` joins them too. Pruned of ended ones at each retirement.
        self._retired: list[threading.Thread] = []
        self._started = 0
        self._closed = False

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._threads)

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the connection is closed")
            if self._idle > 0:
                self._idle -= 1
            else:
                self._start_thread()
            self._jobs.put(job)

    def _start_thread(self) -> None:
        """(Under the lock.) Start a thread for the job about to be queued.
        It is on the roll before it starts, so that close() signals and
        joins it whatever stops `start()` half-way."""
        thread = threading.Thread(target=self._run, name=f"{self._name}-{self._started}", daemon=True)
        self._started += 1
        self._threads.append(thread)
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to be had: this exchange fails, nothing is left half-made
            self._threads.remove(thread)
            raise ConnectionClosed(f"no thread for the HTTP exchange: {exc}") from exc
        # A KeyboardInterrupt in start() (it waits for the thread to run)
        # goes on with the thread on the roll: it may be running, and then
        # waits for jobs, counted nowhere (not idle: were it not running, a
        # job promised to it would never run), until one comes or close().

    def _run(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._idle == 0:
                        continue  # every waiting thread is promised to a queued job
                    self._idle -= 1
                    me = threading.current_thread()
                    self._threads.remove(me)
                    self._retired = [thread for thread in self._retired if thread.is_alive()]
                    self._retired.append(me)
                return
            if job is None:
                return
            try:
                job()
            except Exception:  # an exchange reports its own errors; this is a bug guard
                log.exception("an HTTP exchange failed unexpectedly")
            with self._lock:
                self._idle += 1

    def discard(self) -> None:
        """After `os.fork()`, in the child: the threads were not copied;
        refuse new work. No lock: its holder may not exist here."""
        self._closed = True
        self._threads = []
        self._retired = []

    def close(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            retired = list(self._retired)
        for _ in threads:
            self._jobs.put(None)
        limit = time.monotonic() + THREAD_JOIN_SECONDS
        for thread in threads + retired:
            if thread is not threading.current_thread():
                _join(thread, limit)


def _join(thread: threading.Thread, limit: float) -> None:
    """Wait until `limit` (a `time.monotonic()` value) for `thread` to end.
    One an interrupt stopped before it started (see `_start_thread`) has
    nothing to wait for."""
    try:
        thread.join(remaining(limit))
    except RuntimeError:  # "cannot join thread before it is started"
        return
    if thread.is_alive():
        log.warning("an HTTP exchange thread did not end in time: %s", thread.name)
