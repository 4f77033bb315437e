"""The public blocking API: `connect()` and `Client`.

What it owns: the connection's life (opening it, settling the protocol
era, restarting, renewing a session, reconnecting after `os.fork()`),
building each request from the dialect and the caller's options, the one
retry loop over a `Call`, and running user callbacks (progress, log, server
requests) on the calling thread. The typed calls built on `request()` are in
`calls.py`; the options in `options.py` (`ClientOptions`). What it must not
do: touch pipes or sockets (that is the transports'), or wait on anything
but the engine (`connection.py`).

A `Client` is shared freely between threads: every call registers its own
request in the engine and waits on its own inbox. The few fields a call can
change (the dialect after a -32022 re-discovery, the last tool listing) are
replaced whole under `_state_lock`, never mutated in place.

Lifecycle guards. Every connection goes through `_connect()`: started,
its era settled, and only then published (`_held.conn`) under the lock
`close()` takes, so callers never see a connection that is not started and
a restart that loses the race with `close()` closes what it opened. What
must be released lives in `_held`, which a `weakref.finalize` holds instead
of the client: nothing the client starts refers to it strongly (the engine's
callbacks are weak), so a client dropped unclosed is collected, closed and
reported with a `ResourceWarning`. After `os.fork()` the child's clients
drop the parent's connection without IO, take fresh locks, and reconnect on
first use in the era already settled (`_after_fork`).
"""

from __future__ import annotations

import contextvars
import importlib
import itertools
import json
import logging
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, Literal, TypeGuard, cast, overload

import attrs

from . import era_memory, handshake, multiround, tracing
from ._version import __version__
from .cache import ResultCache, cache_key
from .calls import HeadersFn, SendFn, ToolCatalog, TypedCalls
from .connection import Connection, Drops, new_id_counter
from .declarations import initialize_capabilities
from .errors import (
    ConnectError,
    ConnectionClosed,
    HeaderMismatch,
    HTTPStatusError,
    InputHandlerError,
    InvalidResult,
    McpError,
    MissingClientCapability,
    Overloaded,
    RequestTimeout,
    ServerError,
    SessionExpired,
    TransportError,
    UnsupportedMethod,
    UnsupportedProtocolVersion,
    VersionNegotiationError,
    copy_error,
    server_error_from_wire,
)
from .notifications import Dispatcher, Notification, NotificationStream
from .options import (
    ClientOptions,
    DEFAULT_MAX_PAGES,
    DEFAULT_MAX_TOTAL_TIMEOUT,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_TIMEOUT,
    RequestOptions,
    check_input_handlers,
    check_option_names,
    check_positive_int,
    check_timeout,
)
from .protocol import inputs, versions
from .protocol.meta import merge_meta, validate_trace_context
from .protocol.versions import Dialect, FallBack, UseStateless
from .admission import MAIN_THREAD_SLICE, Admission
from .keepalive import Keepalive
from .metrics import Metrics, Stats
from .status import SAFE_TO_RETRY, Reconnect, Status, StatusChange, StatusMonitor
from .transports import Memory, Stdio, Target, Transport, resolve_target
from .transports.memory import MemoryTransport
from .transports.stdio import StdioTransport
from .types import (
    CallToolResult,
    CompleteResult,
    DiscoverResult,
    GetPromptResult,
    Implementation,
    InitializeResult,
    Page,
    Progress,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .skills import Skills
    from .subscriptions import Subscription
    from .tasks import Task
    from .transports.http import HTTP
    from .transports.sse import SSE

# The Tasks and Skills extensions and `listen()`'s subscriptions load on
# first use (imported in the methods that need them): `import mcp_sync`
# and a plain call never do, and together they are a tenth of the import.


def _loaded(module: str) -> Any:
    """The transport module `module` if something imported it, else None.
    The HTTP transports are checked for without importing them: no object of
    theirs can exist before their module loads, and loading it loads the HTTP
    stack (urllib3, requests), which a stdio-only program never needs."""
    return sys.modules.get(f"{__package__}.transports.{module}")


def _is_sse(target: object) -> TypeGuard[SSE]:
    sse = _loaded("sse")
    return sse is not None and isinstance(target, sse.SSE)


def _is_plain_http(target: object) -> TypeGuard[HTTP]:
    """`HTTP` itself, not a subclass (`SSE` derives from it)."""
    http = _loaded("http")
    return http is not None and type(target) is http.HTTP

__all__ = ["connect", "Client", "ClientOptions", "RequestOptions", "DEFAULT_TIMEOUT"]

log = logging.getLogger("mcp_sync.client")
server_log = logging.getLogger("mcp_sync.server")

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}



#: The options of a call made with none (the fast lane's): read only.
_NO_OPTIONS = cast("RequestOptions", {})


@attrs.frozen
class Call:
    """One round of a request as the retry loop (`Client._send`) sends it:
    what the caller asked, with the options and handlers of this call.
    `headers()` gives each attempt's transport headers (they may change when
    `refresh_headers()` learned the tool again)."""

    method: str
    params: Mapping[str, Any] | None
    options: RequestOptions
    handlers: Mapping[str, Any]
    headers: Callable[[], Mapping[str, str] | None] | None = None
    refresh_headers: Callable[[], None] | None = None


def connect(
    target: Any,
    *,
    protocol: str | Iterable[str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
    client_info: Mapping[str, Any] | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
    max_total_timeout: float = DEFAULT_MAX_TOTAL_TIMEOUT,
    restart: bool = True,
    input_handlers: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
    max_input_rounds: int = 10,
    max_server_requests: int = 16,
    handler_timeout: float | None = None,
    cache: bool | ResultCache = False,
    stale_if_error: bool = False,
    reconnect: bool | Reconnect = True,
    keepalive: float | None = None,
    keepalive_failures: int = 3,
    max_in_flight: int | None = None,
    max_queued: int | None = None,
    tasks: bool = False,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    **http_options: Any,
) -> Client:
    """Connect to an MCP server and settle the protocol version.

    `target` is a command list (`["python", "server.py"]`), a `Stdio(...)`,
    a Streamable HTTP URL (`"https://host/mcp"`, with any `HTTP()` option
    such as `headers=`, `auth=`, `verify=` as keyword arguments), an
    in-process server (`mcp_sync.testing.demo_server()`), or any `Target`.
    Returns once the version is settled: probing with `server/discover`
    (under `probe_timeout`) and falling back to `initialize` for older
    servers. `protocol=` pins one version or narrows the list.

    `input_handlers` answer the server's requests for input, in both eras:
    ``{"form": f, "url": f, "sampling": f, "roots": f}``, each a function of
    the request's params returning the answer the spec expects (see
    `mcp_sync.handlers`). They run on the calling thread; the capabilities
    they imply are declared. `max_input_rounds` bounds the 2026-07-28 loop;
    `max_server_requests` and `handler_timeout` bound server requests that
    belong to no call (initialize era).

    `cache=True` (or a shared `ResultCache`) caches complete results of
    discovery, the lists and `resources/read` by the server's `ttlMs` and
    `cacheScope` hints; see `mcp_sync.cache`. With `stale_if_error=True` an
    expired entry answers when the refetch fails with a transport error
    (the result's `stale` is then True).

    A connection that fails is opened again by the next call (`reconnect`:
    True for the defaults, a `Reconnect(...)` for the backoff, False to stay
    failed; `restart=False` turns every reopening off): a stdio server is
    started again, an initialize-era session is set up again. The calls in
    flight fail (`ConnectionClosed.may_have_executed` says whether the server
    got them); only the calls safe to repeat are sent again. `client.status`
    and `on_status()` report it. `keepalive=SECONDS` checks an idle
    connection every so often and reconnects after `keepalive_failures`
    failed checks. `max_in_flight` bounds the calls on the wire at once;
    `max_queued` how many may wait for a slot (beyond: `Overloaded`).
    See docs/resilience.md.

    `tasks=True` declares the tasks extension for every request, so the
    server may run any tool call as a task (`call_tool()` waits for it);
    in the initialize era it is the only way to use tasks. See docs/tasks.md.

    With OpenTelemetry installed (the `otel` extra) and a tracer or meter
    provider set globally or passed as `tracer_provider=`/`meter_provider=`,
    each request gets a span and its duration is recorded; see
    docs/tracing.md.

    Example::

        with mcp_sync.connect(["python", "-m", "mcp_sync.testing.server"]) as client:
            print([tool.name for tool in client.list_tools()])
            print(client.call_tool("echo", {"text": "hi"}).text)
    """
    resolved = resolve_target(target, http_options)
    # A token provider may stand for an extension the client then declares
    # (the client credentials and enterprise-managed authorization ones).
    provided = getattr(getattr(resolved, "auth", None), "client_capabilities", None)
    if isinstance(provided, Mapping) and provided:
        if client_capabilities is not None and not isinstance(client_capabilities, Mapping):
            raise TypeError("client_capabilities must be a mapping")
        client_capabilities = inputs.merge_capabilities(provided, client_capabilities or {})
    options = ClientOptions(
        protocol=protocol, timeout=timeout, probe_timeout=probe_timeout, client_info=client_info,
        client_capabilities=client_capabilities, log_level=log_level, max_pages=max_pages,
        max_total_timeout=max_total_timeout, restart=restart, input_handlers=input_handlers,
        max_input_rounds=max_input_rounds, max_server_requests=max_server_requests,
        handler_timeout=handler_timeout, cache=cache, stale_if_error=stale_if_error,
        reconnect=reconnect, keepalive=keepalive, keepalive_failures=keepalive_failures,
        max_in_flight=max_in_flight, max_queued=max_queued, tasks=tasks,
        tracer_provider=tracer_provider, meter_provider=meter_provider,
    )
    client = Client(resolved, options)
    made = _made.get()
    if made is not None:
        made(client)
    try:
        client._open()
    except BaseException:
        client.close()
        raise
    return client


#: Told of each client `connect()` makes in this context, before it connects
#: (`_connect_observed`).
_made: contextvars.ContextVar[Callable[[Client], None] | None] = contextvars.ContextVar("mcp_sync_made", default=None)


def _connect_observed(target: Any, made: Callable[[Client], None], **options: Any) -> Client:
    """`connect()`, telling `made` the client before it connects: the
    `ClientGroup` records it, so that its `close()` can stop a connect in
    progress (`Client.close()` ends one at once) instead of waiting for it."""
    token = _made.set(made)
    try:
        return connect(target, **options)
    finally:
        _made.reset(token)


#: Whether this thread's call holds an admission slot (`Client._send`).
_in_slot = threading.local()



def forget_eras(target: Any = None) -> None:
    """Forget the protocol era remembered for a server (`target`, as
    `connect()` takes it), or for every server when `target` is None.

    `connect()` remembers, for the life of the process, each server that
    settled on the initialize era (keyed by its stdio command line or its
    HTTP origin and path), and connects to it again without the
    `server/discover` probe, which some such servers never answer. A server
    upgraded in place is noticed by itself (its `initialize` fails and the
    era is settled again); this is for tests and for forcing a new probe.

    Example::

        mcp_sync.forget_eras(["python", "server.py"])
        mcp_sync.forget_eras()  # every server
    """
    if target is None:
        era_memory.forget()
        return
    resolved = resolve_target(target)
    if isinstance(resolved, Target):
        era_memory.forget(resolved.server_key())


def _refused_post(exc: HTTPStatusError) -> bool:
    """Whether a POST was refused the way a server without Streamable HTTP
    refuses it (400, 404, 405: the 2025-03-26 backwards-compatibility rule),
    not for authentication (a subclass) or trouble (5xx)."""
    return type(exc) is HTTPStatusError and exc.status in (400, 404, 405)


class _Changed(Exception):
    """A server no longer serves the transport remembered for it."""

    def __init__(self, cause: McpError) -> None:
        super().__init__(str(cause))


def _left(timeout: float | None, deadline: float | None) -> float | None:
    """The call's `timeout`, or less once part of it went to waiting for a
    slot or a reconnect (over 10 ms: the deadline is the call's, absolute)."""
    if timeout is None or deadline is None:
        return timeout
    remaining = deadline - time.monotonic()
    return timeout if remaining > timeout - 0.01 else max(remaining, 0.001)


def _bounded(timeout: float | None, deadline: float | None) -> float | None:
    """`timeout`, but never past `deadline` (None: no bound from it)."""
    if deadline is None:
        return timeout
    remaining = max(deadline - time.monotonic(), 0.001)
    return remaining if timeout is None else min(timeout, remaining)


def _acquire_until(lock: threading.Lock, deadline: float | None) -> bool:
    """Take `lock`, waiting until `deadline` at most (in slices on the main
    thread, so an interrupt lands)."""
    main = threading.current_thread() is threading.main_thread()
    while True:
        if deadline is None:
            wait = MAIN_THREAD_SLICE if main else -1.0
        else:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return lock.acquire(blocking=False)
            if main:
                wait = min(wait, MAIN_THREAD_SLICE)
        if lock.acquire(timeout=wait):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


#: The longest `close()` waits for the thread reconnecting for subscriptions.
CLOSE_JOIN_SECONDS = 2.0


def _pause(stop: threading.Event, seconds: float) -> None:
    """Wait `seconds`, or until `stop` is set; in slices on the main thread
    (see `_acquire_until`)."""
    end = time.monotonic() + seconds
    main = threading.current_thread() is threading.main_thread()
    while not stop.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return
        stop.wait(min(left, MAIN_THREAD_SLICE) if main else left)


def _failure_notice(client: Client) -> Callable[[TransportError], None]:
    """Told by a connection when it fails (on its reader thread): when
    subscriptions are open and the client may reconnect, start the thread
    that reconnects for them now rather than at the next call."""
    ref = weakref.ref(client)

    def on_failed(error: TransportError) -> None:
        owner = ref()
        if owner is None or owner._closed:
            return
        conn = owner._conn
        # The status says so now, not at the next call.
        may_reconnect = conn is not None and owner._may_restart(conn)
        owner._held.status.set(Status.RECONNECTING if may_reconnect else Status.FAILED, error)
        # Reconnect now (not at the next call) when something waits for the
        # connection without calling: an open subscription, or a keepalive
        # (a web process's health endpoint reads the status).
        if not len(owner._held.subscriptions) and owner._held.keepalive is None:
            return
        if conn is not None and owner._reconnect_policy is not None and may_reconnect:
            for subscription in list(owner._held.subscriptions):
                subscription._interrupt()
            owner._heal_soon()

    return on_failed


def _heal(ref: weakref.ReferenceType[Client]) -> None:
    """The `mcp-sync-reconnect` thread: reconnect (with the client's backoff)
    and open every interrupted subscription again on the new connection,
    until they are all open again or reconnecting gave up (then they end
    with `SubscriptionBroken`). It holds the client only during a round, so
    a client dropped meanwhile is still collected (and closed)."""
    client = ref()
    if client is None:
        return
    held = client._held
    del client
    try:
        while True:
            wait = _heal_round(ref)
            if wait is None:
                with held.lock:
                    if not held.heal_again or held.closed:
                        held.healer = None
                        held.leave(threading.current_thread())
                        return
                    held.heal_again = False
                continue
            held.closed_event.wait(wait)  # the backoff, without holding the client
    except BaseException:  # a thread of ours never dies silently
        log.exception("reconnecting for the open subscriptions failed unexpectedly")
        with held.lock:
            held.healer = None
            held.leave(threading.current_thread())


def _heal_round(ref: weakref.ReferenceType[Client]) -> float | None:
    """One round of `_heal`: None when there is nothing more to do, else
    how long to wait before the next round."""
    client = ref()
    if client is None or client._closed:
        return None
    held = client._held
    try:
        # Bounded, so that the client is let go between attempts.
        conn = client._live_connection(time.monotonic() + _HEAL_ROUND_SECONDS)
    except RequestTimeout:
        return max(client._retry_at - time.monotonic(), 0.05)
    except McpError as exc:
        if not client._closed:
            log.warning("reconnecting for the open subscriptions failed: %s", exc)
        for subscription in list(held.subscriptions):
            if subscription.interrupted:
                subscription._on_event("broken", exc)
        return None
    reopened = []
    for subscription in list(held.subscriptions):
        reopen = subscription._reopen
        if not subscription.interrupted or reopen is None:
            continue
        try:
            reopen(conn)
            reopened.append(subscription)
        except ConnectionClosed:
            pass  # the new connection failed already: round again
        except Exception as exc:
            log.warning("a subscription could not be opened again: %s", exc)
            error = exc if isinstance(exc, McpError) else ConnectionClosed(f"opening it again failed: {exc}")
            subscription._on_event("broken", error)

    def settled(sub: Subscription) -> bool:
        return sub._interrupted_at is None or sub.ended

    # The server acknowledging the streams opened again proves the new
    # connection alive, as a response to a call would. Looked at in slices:
    # a connection that fails meanwhile (a server that dies at start) ends
    # the wait at once.
    limit = time.monotonic() + client.probe_timeout
    while (reopened and conn.failure is None and not client._closed and time.monotonic() < limit
           and not all(settled(sub) for sub in reopened)):
        held.closed_event.wait(0.05)
    if reopened and all(sub._interrupted_at is None for sub in reopened):
        client._alive()
    if conn.failure is not None and any(sub.interrupted for sub in list(held.subscriptions)):
        return 0.0  # round again
    return None


#: The longest one round of `_heal` waits for a reconnect before it lets go
#: of the client (and looks again).
_HEAL_ROUND_SECONDS = 1.0


def _keepalive_hooks(client: Client) -> tuple[Callable[[float], None], Callable[[McpError], None]]:
    """The keepalive's check of an idle connection (`ping` in the initialize
    era, `server/discover` in 2026-07-28) and what to do once the checks
    failed: fail that connection (its calls get the error; the client then
    reconnects at once when reconnecting is on). Both hold the client
    weakly: the keepalive thread must not keep a dropped client."""
    ref = weakref.ref(client)
    probed: list[Connection | None] = [None]  # the connection the checks ran on

    def probe(timeout: float) -> None:
        owner = ref()
        if owner is None or owner._closed:
            return
        probed[0] = owner._conn
        if owner._require_dialect().stateless:
            owner.discover(timeout=timeout)
        else:
            owner.ping(timeout=timeout)

    def on_dead(error: McpError) -> None:
        owner = ref()
        conn = probed[0]
        if owner is None or owner._closed or conn is None or conn is not owner._conn:
            return  # replaced meanwhile: the new connection was not checked yet
        # Failing it starts the reconnect (`_failure_notice`), off this thread.
        conn.transport_failed(ConnectionClosed(
            f"the connection looks dead: {owner.options.keepalive_failures} keepalive checks failed "
            f"({error})"))

    return probe, on_dead


def _send_through(client: Client) -> SendFn:
    """`client._request`, held weakly: a bound method kept by the client's
    own `TypedCalls` would make a cycle, and a client dropped unclosed would
    then wait for the garbage collector before its finalizer closes it."""
    ref = weakref.ref(client)

    def send(method: str, params: Mapping[str, Any] | None, options: RequestOptions, /, *,
             headers: HeadersFn | None = None,
             refresh_headers: Callable[[], None] | None = None) -> dict[str, Any]:
        owner = ref()
        if owner is None:  # only reachable through a TypedCalls kept past its client
            raise ConnectionClosed("the client is closed")
        return owner._request(method, params, options, headers=headers, refresh_headers=refresh_headers)

    return send


class Client:
    """A blocking MCP client, safe to share between threads. Use `connect()`.

    Example::

        client = mcp_sync.connect(mcp_sync.testing.demo_server())
        result = client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"sum": 5}
        client.close()

    The attributes below are the options the client was made with (see
    `connect()`); read them, but set options through `connect()` or
    `ClientOptions`, not by assigning them afterwards.

    Attributes:
        options: The `ClientOptions` the client was made with.
        allowed_versions: The protocol versions it may settle on, newest
            first (`protocol=` normalised).
        timeout: Seconds a request waits for its answer unless the call
            says otherwise; None waits for ever.
        probe_timeout: Seconds the `server/discover` probe may take before
            the client falls back to `initialize`.
        client_info: The `clientInfo` sent to the server: `client_info=`,
            else `{"name": "mcp_sync", "version": __version__}`.
        client_capabilities: The capabilities given as
            `client_capabilities=` (empty when none); what the input
            handlers imply is added to them when they are sent.
        log_level: The level of log messages asked of the server (with
            `logging/setLevel` in the initialize era, in each request's
            `_meta` in 2026-07-28), or None to leave the server's default.
        max_pages: The most pages a list call follows (`PaginationError`
            beyond).
        max_total_timeout: The longest a request may wait when its progress
            keeps restarting `timeout` (`reset_timeout_on_progress`).
        restart: Whether a failed connection may be opened again; False
            turns every reopening off.
        input_handlers: The handlers that answer the server's requests for
            input, by kind (`form`, `url`, `sampling`, `roots`); empty when
            none.
        max_input_rounds: The most `input_required` rounds answered for one
            request (2026-07-28).
        max_server_requests: The most server requests that belong to no
            call handled at once (initialize era); more are refused.
        handler_timeout: Seconds such a server request may take from its
            arrival before it is answered with an error; None: no limit.
        cache: The `ResultCache` in use, or None when caching is off.
        stale_if_error: Whether an expired cache entry answers when its
            refetch fails with a transport error (the result's `stale` is
            then True).
    """

    def __init__(self, target: Target | Transport, options: ClientOptions | None = None, **keywords: Any) -> None:
        """`options`, or the keyword arguments of `connect()` (over `options`
        when both are given), validated once as a `ClientOptions`.

        A client made here is not connected: make one with `connect()`,
        which builds it this way and then connects it."""
        if options is None:
            options = ClientOptions(**keywords)
        elif keywords:
            options = attrs.evolve(options, **keywords)
        elif not isinstance(options, ClientOptions):
            raise TypeError("options must be a ClientOptions")
        self.options = options
        self._target = target
        # The options under the names the client has always had.
        self.allowed_versions = options.allowed_versions
        self.timeout = options.timeout
        self.probe_timeout = options.probe_timeout
        self.client_info: dict[str, Any] = dict(options.client_info or {"name": "mcp_sync", "version": __version__})
        self.client_capabilities: dict[str, Any] = dict(options.client_capabilities or {})
        if options.tasks:  # declared like any capability: per request, or at initialize
            from . import tasks as _tasks

            self.client_capabilities = _tasks.with_extension(self.client_capabilities)
        self.log_level = options.log_level
        self.max_pages = options.max_pages
        self.max_total_timeout = options.max_total_timeout
        self.restart = options.restart
        self.input_handlers = check_input_handlers(options.input_handlers)
        self.max_input_rounds = options.max_input_rounds
        self.max_server_requests = options.max_server_requests
        self.handler_timeout = options.handler_timeout
        self._declared: dict[str, Any] = {}  # capabilities sent with initialize
        self._held = _Held(Dispatcher())
        cache = options.cache
        self.cache: ResultCache | None = cache if isinstance(cache, ResultCache) else (ResultCache() if cache else None)
        self._cache_server = _server_identity(target, self)
        self.stale_if_error = bool(options.stale_if_error)
        self._ids = new_id_counter()
        self._state_lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._session_generation = 0
        # Set in a child after os.fork(): the first use opens a connection of
        # this process's own (see `_after_fork`).
        self._reopen_after_fork = False
        self._dialect: Dialect | None = None
        self._discovered: DiscoverResult | None = None
        self._session: InitializeResult | None = None
        self._catalog = ToolCatalog()
        # `_request_meta`'s last one: (what it was made of, the `_meta`).
        self._meta_cache: tuple[tuple[Any, ...], Mapping[str, Any]] | None = None
        self._calls = TypedCalls(_send_through(self), self._catalog)
        self._skills: Skills | None = None  # made on first use: see `skills`
        # Reconnecting (see `_live_connection`): the policy, and where the
        # current run of attempts stands (under `_restart_lock`).
        self._reconnect_policy = Reconnect.coerce(options.reconnect) if options.restart else None
        self._delays: Iterator[float] | None = None
        self._retry_at = 0.0
        self._attempts = 0
        self._gave_up: McpError | None = None
        self._metrics = Metrics()
        # None unless OpenTelemetry is installed and set up: then the only
        # cost of tracing is the test of this attribute in `_request`.
        self._tracer = tracing.for_client(self, options.tracer_provider, options.meter_provider)
        if self._tracer is not None:
            self._ids = self._tracer.noting_ids(self._ids)
        self._held.admission = Admission(options.max_in_flight, options.max_queued)
        # Closes what the client holds if it is dropped unclosed; it holds
        # `_held`, never the client, or the client could never be collected.
        self._finalizer = weakref.finalize(self, _release_unclosed, self._held, repr(target))
        _live_clients.add(self)

    # Where the connection and the closed flag live: in `_held`, which the
    # finalizer can reach without the client.
    @property
    def _conn(self) -> Connection | None:
        return self._held.conn

    @property
    def _closed(self) -> bool:
        return self._held.closed

    @property
    def _dispatcher(self) -> Dispatcher:
        return self._held.dispatcher

    # -- the connection's life --------------------------------------------------------

    def _start_connection(self) -> Connection:
        """A started connection, not yet visible to callers (see `_publish`).

        While it starts and settles, `close()` can still reach it through
        `_held.starting`, so a close from another thread stops it."""
        transport = self._target.open() if isinstance(self._target, Target) else self._target
        # The engine calls back into the client only through weak references:
        # its threads must not keep a dropped client alive.
        conn = Connection(
            transport, self._ids,
            on_server_request=_weak_server_request(self),
            on_notification=_notification_sink(self.cache, self._cache_server, self._held.dispatcher),
            on_log=self._log_server_message,
            max_server_requests=self.max_server_requests, handler_timeout=self.handler_timeout,
            drops=self._held.dispatcher.drops,
            on_failed=_failure_notice(self),
        )
        transport.request_timeout = self.timeout
        held = self._held
        with held.lock:
            if held.closed:
                raise ConnectionClosed("the client is closed")
            held.starting.add(conn)
        try:
            conn.start()
        except BaseException:
            self._abandon_connection(conn, "the connection failed to start")
            raise
        return conn

    def _abandon_connection(self, conn: Connection, reason: str, *, later: bool = False) -> None:
        """Close a connection that was never published. `later`: on a
        thread of its own (see `_Held.close_later`), for a reconnect, whose
        caller's deadline must not wait out the server's shutdown."""
        # Closed (or handed to a closer) before it leaves `starting`: a
        # close() meanwhile then finds it there and waits for that close,
        # instead of returning while it still runs.
        try:
            if later:
                self._held.close_later(conn, reason)
            else:
                conn.close(reason)
        finally:
            with self._held.lock:
                self._held.starting.discard(conn)

    def _publish(self, conn: Connection) -> None:
        """Make a started connection, its era settled, the one callers use:
        under the lock `close()` takes, so a connection opened by a restart
        that lost the race with `close()` is closed here, never leaked."""
        held = self._held
        with held.lock:
            held.starting.discard(conn)
            if not held.closed:
                old = held.conn
                if old is not None and old is not conn:
                    # Its bytes stay counted in `stats()` once it is replaced.
                    self._metrics.add_bytes(sent=old.transport.bytes_sent, received=old.transport.bytes_received)
                held.conn = conn
                self._reopen_after_fork = False
                # Kept across a fork (the connection is not): the child's
                # first call builds its headers before it reconnects.
                self._catalog.mirrors_headers = conn.transport.mirrors_headers
                self._catalog.structured_output = self._dialect is None or self._dialect.structured_output
                return
        conn.close("the client was closed while connecting")
        raise ConnectionClosed("the client is closed")

    def _open(self) -> None:
        """Open the first connection and settle the era on it."""
        with self._restart_lock:
            conn = self._connect(None)
        self._after_connect(conn)
        self._held.status.set(Status.READY)
        interval = self.options.keepalive
        if interval is not None:
            probe, on_dead = _keepalive_hooks(self)
            self._held.keepalive = Keepalive(interval, self.options.keepalive_failures, probe=probe, on_dead=on_dead)

    def _connect(self, era: Dialect | None, deadline: float | None = None, *, reconnecting: bool = False) -> Connection:
        """Start a connection, settle its era, publish it. With `era` None
        the era is found (`server/discover` probe, falling back to
        `initialize`); else it is the one settled before (a restart, or a
        child after fork), and an initialize-era connection gets a new
        session. Called with `_restart_lock` held. When `reconnecting`, a
        connection that fails to set up is closed on a thread of its own,
        so the caller keeps its deadline."""
        conn = self._start_connection()
        try:
            if era is None:
                conn = self._settle_era(conn)
            elif era.stateless:
                conn.transport.negotiated(era.version, True)
            else:
                self._initialize(conn, era.version, deadline)
        except BaseException:
            self._abandon_connection(conn, "the connection could not be set up", later=reconnecting)
            raise
        self._publish(conn)
        return conn

    def _settle_era(self, conn: Connection) -> Connection:
        """Probe or initialize on `conn`; returns the connection to keep (a
        fresh one when the server had to be restarted after the probe)."""
        allowed = self.allowed_versions
        stateless = [v for v in allowed if versions.dialect_for(v).stateless]
        initialize_era = [v for v in allowed if not versions.dialect_for(v).stateless]
        if _is_sse(self._target):
            stateless = self._over_sse(initialize_era)
        key = self._target.server_key() if isinstance(self._target, Target) else None
        remembered = era_memory.recall(key)
        if stateless and initialize_era and remembered is not None:
            # Settled on the initialize era before in this process: no probe
            # (a server that swallows it would cost `probe_timeout` again).
            original = self._target
            try:
                if remembered == "sse" and _is_plain_http(original) and original.sse_fallback:
                    from .transports.sse import SSE

                    # It chose the HTTP+SSE transport before: no refused POSTs this time.
                    self._abandon_connection(conn, "using the HTTP+SSE transport the server chose before")
                    self._target = SSE.from_http(original)
                    try:
                        conn = self._start_connection()
                    except (ConnectError, HTTPStatusError) as exc:
                        # No event stream with an endpoint there any more.
                        raise _Changed(exc) from exc
                conn = self._initialize_or_fall_back(conn, initialize_era[0])
                era_memory.remember(key, "sse" if _is_sse(self._target) else "initialize")
                return conn
            except (_Changed, ServerError, VersionNegotiationError, HTTPStatusError) as exc:
                # An expired token or a server in trouble says nothing about the era.
                if isinstance(exc, HTTPStatusError) and not _refused_post(exc):
                    self._target = original
                    raise
                # The server changed since (upgraded in place): settle afresh.
                self._target = original
                log.info("%s no longer takes initialize (%s); settling its protocol era again", self._target, exc)
                era_memory.forget(key)
                self._abandon_connection(conn, "settling the protocol era again")
                conn = self._start_connection()
                try:
                    return self._settle_era(conn)
                except BaseException:
                    self._abandon_connection(conn, "the connection could not be set up")
                    raise
        if stateless and initialize_era:
            verdict = self._probe(conn, stateless[0])
            if isinstance(verdict, UseStateless):
                return conn
            if verdict.silent:
                # The whole probe_timeout went by: say so where a user looks,
                # once per server and process (the era is remembered below).
                log.warning("%s did not answer server/discover within %.3g s (probe_timeout); treating it as an "
                            "initialize-era server for the rest of this process", self._target, self.probe_timeout)
            else:
                log.info("falling back to initialize: %s", verdict.reason)
            if isinstance(self._target, Target) and conn.transport.restarts_server:
                # The probe may already have been processed under the older
                # lifecycle rules, so start the server afresh.
                self._abandon_connection(conn, "restarting the server after the server/discover probe")
                conn = self._start_connection()
                try:
                    self._initialize(conn, initialize_era[0])
                except BaseException:
                    self._abandon_connection(conn, "the connection could not be set up")
                    raise
                era_memory.remember(key, "initialize")
                return conn
            conn = self._initialize_or_fall_back(conn, initialize_era[0])
            era_memory.remember(key, "sse" if _is_sse(self._target) else "initialize")
        elif stateless:
            self._dialect = versions.dialect_for(stateless[0])
            conn.transport.negotiated(self._dialect.version, True)
        else:
            conn = self._initialize_or_fall_back(conn, initialize_era[0])
        return conn

    def _after_connect(self, conn: Connection, deadline: float | None = None) -> None:
        """What a new initialize-era session needs once callers can use it
        (within the deadline of the call that reconnected)."""
        if self._session is not None and self.log_level is not None and not self._require_dialect().stateless:
            try:
                self.request("logging/setLevel", {"level": self.log_level}, timeout=_bounded(self.timeout, deadline))
            except ServerError as exc:
                log.warning("the server refused logging/setLevel: %s", exc)

    def _identity(self, initialize_version: str | None = None) -> handshake.Identity:
        capabilities = self._capabilities()
        if initialize_version is not None:
            # Capabilities are fixed by `initialize` in that era: declare the
            # extensions the client implements (Skills) there, once.
            capabilities = initialize_capabilities(capabilities, initialize_version)
        return handshake.Identity(capabilities, self.client_info, self.log_level)

    def _probe(self, conn: Connection, version: str) -> UseStateless | FallBack:
        with tracing.handshake(self._tracer, self, "server/discover", version):
            verdict = handshake.probe(
                conn, version, self.allowed_versions, self._identity(), timeout=self.probe_timeout,
                on_log=self._log_server_message,
                failure_means_initialize_era=isinstance(self._target, Target) and conn.transport.restarts_server,
            )
        if isinstance(verdict, UseStateless):
            self._dialect = versions.dialect_for(verdict.version)
            conn.transport.negotiated(verdict.version, True)
            if verdict.discover_result is not None:
                self._discovered = DiscoverResult.from_wire(verdict.discover_result)
        return verdict

    def _initialize(self, conn: Connection, version: str, deadline: float | None = None) -> None:
        with tracing.handshake(self._tracer, self, "initialize", version):
            session = handshake.initialize(
                conn, version, self.allowed_versions, self._identity(version), timeout=_bounded(self.timeout, deadline),
                on_log=self._log_server_message,
                on_server_request=lambda message: self._answer_server_request(message, self.input_handlers, conn),
            )
            self._session = session
            self._declared = self._capabilities()
            self._dialect = versions.dialect_for(session.protocol_version)

    def _over_sse(self, initialize_era: list[str]) -> list[str]:
        """The stateless versions to probe over HTTP+SSE: none, as the
        transport only carries the initialize era (so no `server/discover`
        probe, which some of its servers never answer)."""
        if not initialize_era:
            raise VersionNegotiationError(
                "the HTTP+SSE transport carries only initialize-era protocol versions (2025-11-25 and older), "
                "and none of them is allowed", requested=list(self.allowed_versions))
        return []

    def _initialize_or_fall_back(self, conn: Connection, version: str) -> Connection:
        """`initialize` on `conn`; when a Streamable HTTP URL refuses its POST
        with 400, 404 or 405, try the old HTTP+SSE transport at the same URL,
        as the 2025-03-26 revision's backwards-compatibility rules say, and
        keep it (reconnects use it too) if the server offers it. Returns the
        connection to keep."""
        try:
            self._initialize(conn, version)
            return conn
        except HTTPStatusError as exc:
            target = self._target
            if not _is_plain_http(target) or not target.sse_fallback or not _refused_post(exc):
                raise
            refusal = exc
        from .transports.sse import SSE

        sse = SSE.from_http(target)
        self._abandon_connection(conn, "trying the HTTP+SSE transport")
        self._target = sse
        try:
            new = self._start_connection()
        except McpError as exc:
            self._target = target
            raise HTTPStatusError(f"{refusal} (the HTTP+SSE fallback failed too: {exc})", status=refusal.status,
                                  body=refusal.body, headers=refusal.headers) from exc
        except BaseException:
            self._target = target
            raise
        log.info("%s refused the Streamable HTTP POST (HTTP %d) and serves the HTTP+SSE transport: using it",
                 target.url, refusal.status)
        try:
            self._initialize(new, version)
        except BaseException:
            self._target = target  # nothing settled: the next attempt starts from the URL again
            self._abandon_connection(new, "the connection could not be set up")
            raise
        return new

    def _request_meta(self, dialect: Dialect, handlers: Mapping[str, Any]) -> Mapping[str, Any]:
        """The `_meta` every request of `dialect` carries, for a call with
        `handlers`. Read only: it is shared by every request made with the
        client's own handlers (most calls), and built again when anything it
        is made of was replaced (the dialect after a re-discovery, or one of
        the client's attributes); per-call handlers get their own."""
        made_of = (dialect, handlers, self.client_info, self.client_capabilities, self.log_level)
        cached = self._meta_cache
        if cached is not None and cached[0] == made_of:  # each item is itself, the usual case: no deep compare
            return cached[1]
        meta = dialect.request_meta(self._capabilities(handlers), self.client_info, self.log_level)
        if handlers is self.input_handlers:
            self._meta_cache = (made_of, meta)  # one tuple, swapped whole: no lock needed
        return meta

    def _capabilities(self, handlers: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the client declares: what its handlers imply, merged with
        `client_capabilities` (which win)."""
        kinds = handlers if handlers is not None else self.input_handlers
        return inputs.merge_capabilities(inputs.capabilities_for(kinds), self.client_capabilities)

    def close(self) -> None:
        """Close the connection: pending calls fail at once with
        `ConnectionClosed`, every thread the client started ends, and a stdio
        server process is stopped and reaped. Idempotent, from any thread."""
        self._finalizer.detach()
        _live_clients.discard(self)
        self._held.release()

    def _after_fork(self) -> None:
        """In the child after `os.fork()`: let go of everything the parent's
        threads hold or use, with no IO, and reconnect on first use.

        Locks are replaced (a parent thread may have held one at the fork;
        it does not exist here). The connection is discarded (the parent
        still uses its sockets, pipes and session: nothing is sent or
        closed). The next call opens this process's own connection in the
        era already settled (`_connect`): stdio starts its own server, HTTP
        a fresh pool and, in the initialize era, a new session."""
        self._state_lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._catalog.after_fork()
        self._metrics.after_fork()
        self._skills = None  # made afresh on first use, with locks of the child's own
        # The child's connection is its own: a fresh run of the reconnect policy.
        self._attempts, self._delays, self._retry_at, self._gave_up = 0, None, 0.0, None
        self._held.after_fork()
        self._reopen_after_fork = True

    # -- notifications that belong to no call ----------------------------------------

    def on_notification(self, callback: Callable[[Notification], Any],
                        methods: Iterable[str] | None = None) -> Callable[[], None]:
        """Call `callback(notification)` for every server notification that
        belongs to no call (list changes, resource updates, ...), in order, on
        the client's notification thread (never the reader). With `methods`,
        only for those notification methods: the others are then not even
        queued. Returns a function that removes the callback.

        Example::

            stop = client.on_notification(lambda n: print(n.method, n.params))
            ...
            stop()
        """
        return self._dispatcher.add_callback(callback, methods=None if methods is None else set(methods))

    @property
    def status(self) -> Status:
        """Where the connection stands: "connecting", "ready",
        "reconnecting", "failed" (reconnecting gave up) or "closed". A `str`
        enum; reading it is free, from any thread.

        Example::

            healthy = client.status == "ready"
        """
        return self._held.status.status

    def on_status(self, callback: Callable[[StatusChange], Any]) -> Callable[[], None]:
        """Call `callback(change)` for every status change from now on, in
        order, on the client's notification thread (never the reader);
        `change.old`, `change.new`, `change.cause` (the error, or None).
        A callback that raises is logged; the others still run. Returns a
        function that removes the callback.

        Example::

            stop = client.on_status(lambda c: print(c.old, "->", c.new, c.cause))
        """
        return self._held.status.on_status(callback)

    def stats(self) -> Stats:
        """A snapshot of what the client counted since `connect()`: requests
        by method and outcome with latency percentiles, timeouts,
        reconnects, shed calls, dropped notifications (see `Stats`).

        Example::

            stats = client.stats()
            print(stats.requests_total, stats.requests["tools/call"].p99)
        """
        stats = self._metrics.snapshot(self.dropped.as_dict())
        admission = self._held.admission
        if admission is not None:
            stats = attrs.evolve(stats, in_flight=admission.in_flight, queued=admission.queued)
        conn = self._conn
        if conn is None:
            return stats
        # The live connection's own counts; those of the connections it
        # replaced were added to the metrics when they were replaced.
        transport = conn.transport
        return attrs.evolve(stats, bytes_sent=stats.bytes_sent + transport.bytes_sent,
                            bytes_received=stats.bytes_received + transport.bytes_received)

    @property
    def dropped(self) -> Drops:
        """What the client dropped to keep its memory bounded while nobody
        kept up: notifications, progress updates and log messages (oldest
        first), and server requests refused (see `Drops`).

        Example::

            if client.dropped.total:
                print(client.dropped.as_dict())
        """
        return self._dispatcher.drops

    def notifications(self, max_buffer: int = 100, overflow: str = "drop_oldest") -> NotificationStream:
        """An iterator over the server notifications that belong to no call,
        from now on. A bounded buffer: `overflow` is "drop_oldest" or
        "drop_newest", and the stream's `dropped` counts what was lost.

        Example::

            with client.notifications() as stream:
                note = stream.next(timeout=5)
        """
        return self._dispatcher.open_stream(max_buffer, overflow)

    # -- subscriptions -------------------------------------------------------------------------

    def listen(
        self,
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        resource_subscriptions: Iterable[str] | None = None,
        extra: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        max_buffer: int = 100,
        overflow: str = "drop_oldest",
    ) -> Subscription:
        """Open a `subscriptions/listen` stream (2026-07-28) and return once
        the server acknowledged it; `Subscription.accepted` is the filter it
        agreed to (maybe a subset). `extra` adds filter keys of extensions.

        Raises the server's error (e.g. `MethodNotFound` from a server
        without subscriptions), `ConnectionClosed` when the stream ends
        before the acknowledgement, a `TransportError`, or `RequestTimeout`.

        Example::

            with client.listen(tools_list_changed=True) as sub:
                event = sub.next(timeout=60)
        """
        from .subscriptions import Subscription, SubscriptionBroken

        dialect = self._require_dialect()
        wait = self.timeout if timeout is None else timeout
        check_timeout("timeout", wait)
        uris = list(resource_subscriptions or [])
        if not all(isinstance(uri, str) for uri in uris):
            raise TypeError("resource_subscriptions must be URI strings")
        wanted: dict[str, Any] = {}
        for key, flag in (("toolsListChanged", tools_list_changed), ("promptsListChanged", prompts_list_changed),
                          ("resourcesListChanged", resources_list_changed)):
            if flag:
                wanted[key] = True
        if uris:
            wanted["resourceSubscriptions"] = uris
        if extra:
            wanted.update(extra)
        if not dialect.stateless:
            return self._listen_initialize_era(wanted, wait, max_buffer, overflow)
        conn = self._live_connection()
        capabilities = self._capabilities()
        if "taskIds" in wanted:  # the tasks extension's filter key: declared with it
            from . import tasks as _tasks

            capabilities = _tasks.with_extension(capabilities)
        params = {"notifications": wanted,
                  "_meta": dialect.request_meta(capabilities, self.client_info, self.log_level)}
        # The connection the stream is open on now (a reconnect moves it).
        current = [conn]

        def cancel(sub: Subscription) -> None:
            if sub.id is not None:
                current[0].unsubscribe(sub.id)

        subscription = Subscription(cancel, max_buffer, overflow)
        # Held by the engine's reader: it must not reach the client strongly.
        cache, cache_server = self.cache, self._cache_server
        client_ref = weakref.ref(self)

        def events_of(stream_conn: Connection) -> Callable[[str, Any], None]:
            """The events of the stream opened on `stream_conn`; once the
            subscription moved to another connection, the old stream's late
            events (its "broken", above all) are not about it any more."""

            def on_event(kind: str, payload: Any) -> None:
                if stream_conn is not current[0]:
                    return
                if kind == "notification" and cache is not None:
                    cache.invalidate(cache_server, payload)
                if kind == "broken" and subscription.accepted is not None:
                    client = client_ref()
                    if (client is not None and not client._closed and client._reconnect_policy is not None
                            and client._may_restart(stream_conn)):
                        # Not the end: the client opens it again (`_heal`).
                        subscription._interrupt()
                        client._heal_soon()
                        return
                subscription._on_event(kind, payload)

            return on_event

        def reopen(new: Connection) -> None:
            current[0] = new
            subscription.id = new.subscribe("subscriptions/listen", params, events_of(new))
            if subscription.ended:  # closed by its user meanwhile
                new.unsubscribe(subscription.id)

        subscription._reopen = reopen
        self._held.subscriptions.add(subscription)
        subscription.id = conn.subscribe("subscriptions/listen", params, events_of(conn))
        if not subscription.acknowledged.wait(wait):
            subscription.close()
            raise RequestTimeout(f"subscriptions/listen: no acknowledgement within {wait:g} s",
                                 method="subscriptions/listen", timeout=wait)
        if subscription.accepted is None:
            subscription.close()
            if subscription.error_response is not None:
                raise server_error_from_wire(subscription.error_response.get("error"), method="subscriptions/listen")
            end = subscription.next(timeout=0)
            if isinstance(end, SubscriptionBroken):
                raise end.error
            raise ConnectionClosed("the subscriptions/listen stream ended before the acknowledgement")
        return subscription

    def _listen_initialize_era(self, wanted: dict[str, Any], timeout: float | None, max_buffer: int,
                               overflow: str) -> Subscription:
        """The same `listen()` for a 2025 server: `resources/subscribe` for
        the URIs, and its unsolicited notifications filtered to what was
        asked (and what its capabilities offer)."""
        from .subscriptions import Subscription

        capabilities = self.server_capabilities or {}
        offers = {
            "toolsListChanged": bool((capabilities.get("tools") or {}).get("listChanged")),
            "promptsListChanged": bool((capabilities.get("prompts") or {}).get("listChanged")),
            "resourcesListChanged": bool((capabilities.get("resources") or {}).get("listChanged")),
            "resourceSubscriptions": bool((capabilities.get("resources") or {}).get("subscribe")),
        }
        accepted = {key: value for key, value in wanted.items() if offers.get(key)}
        uris = list(accepted.get("resourceSubscriptions") or [])
        methods = {method for key, method in (
            ("toolsListChanged", "notifications/tools/list_changed"),
            ("promptsListChanged", "notifications/prompts/list_changed"),
            ("resourcesListChanged", "notifications/resources/list_changed")) if accepted.get(key)}
        stop: list[Callable[[], None]] = []
        # The dispatcher's thread holds this subscription: reach the client
        # weakly, so that a dropped client can still be collected.
        client_ref = weakref.ref(self)
        held = self._held

        def cancel(sub: Subscription) -> None:
            for remove in stop:
                remove()
            with held.lock:
                held.initialize_era_subscriptions.discard(sub)
            client = client_ref()
            if client is None or client._closed:
                return
            for uri in uris:
                try:
                    client.request("resources/unsubscribe", {"uri": uri}, timeout=timeout)
                except McpError as exc:
                    log.debug("resources/unsubscribe %s failed: %s", uri, exc)

        subscription = Subscription(cancel, max_buffer, overflow)
        subscribed: list[str] = []
        try:
            for uri in uris:
                self.request("resources/subscribe", {"uri": uri}, timeout=timeout)
                subscribed.append(uri)
        except BaseException:
            uris[:] = subscribed
            subscription.close()
            raise

        def deliver(note: Notification) -> None:
            if note.method in methods or (note.method == "notifications/resources/updated"
                                          and note.params.get("uri") in uris):
                subscription._on_event("notification", note.raw)

        stop.append(self._dispatcher.add_callback(deliver, methods=methods | {"notifications/resources/updated"}))

        def reopen(new: Connection) -> None:
            # A new session has no subscriptions: ask for the resources again.
            client = client_ref()
            if client is None:
                return
            for uri in uris:
                client.request("resources/subscribe", {"uri": uri}, timeout=timeout)
            subscription._resumed()

        subscription._reopen = reopen
        subscription.accepted = accepted
        subscription.acknowledged.set()
        with held.lock:
            held.initialize_era_subscriptions.add(subscription)
            held.subscriptions.add(subscription)
        return subscription

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- what was settled --------------------------------------------------------------

    @property
    def transport_kind(self) -> str:
        """The transport in use: "stdio", "streamable-http", "sse" (the old
        HTTP+SSE transport, given as `SSE(url)` or chosen by the automatic
        fallback of a URL), "memory" (in-process) or "custom".

        Example::

            client = mcp_sync.connect("http://127.0.0.1:8000/sse")
            print(client.transport_kind)  # "sse" for an HTTP+SSE-only server
        """
        target = self._target
        sse, http = _loaded("sse"), _loaded("http")
        if sse is not None and isinstance(target, (sse.SSE, sse.SSETransport)):
            return "sse"
        if http is not None and isinstance(target, (http.HTTP, http.HTTPTransport)):
            return "streamable-http"
        if isinstance(target, (Stdio, StdioTransport)):
            return "stdio"
        if isinstance(target, (Memory, MemoryTransport)):
            return "memory"
        return "custom"

    @property
    def protocol_version(self) -> str:
        """The protocol version in use, e.g. ``"2026-07-28"``."""
        return self._require_dialect().version

    @property
    def stateless(self) -> bool:
        """True for the 2026-07-28 era; False for an initialize-era session."""
        return self._require_dialect().stateless

    @property
    def session(self) -> InitializeResult | None:
        """What `initialize` returned (initialize era only; else None)."""
        return self._session

    @property
    def session_id(self) -> str | None:
        """The HTTP session id the server gave (`Mcp-Session-Id`, initialize
        era over Streamable HTTP), or None: no session, or another transport.

        Example::

            with mcp_sync.connect(url, protocol="2025-11-25") as client:
                log.info("MCP session %s", client.session_id)
        """
        conn = self._held.conn
        return None if conn is None else getattr(conn.transport, "session_id", None)

    @property
    def server_info(self) -> Implementation | None:
        """The server's name and version, when it has said them."""
        if self._session is not None:
            return self._session.server_info
        return self._discovered.server_info if self._discovered is not None else None

    @property
    def server_capabilities(self) -> dict[str, Any] | None:
        """The server's capabilities object as it sent it (from `initialize`
        or `server/discover`), or None before the server has said.

        Example::

            if "resources" in (client.server_capabilities or {}):
                print(client.list_resources())
        """
        if self._session is not None:
            return self._session.capabilities
        return self._discovered.capabilities if self._discovered is not None else None

    @property
    def instructions(self) -> str | None:
        """How to use the server, in prose, as it said (for a model's system
        prompt), or None when it gave none."""
        if self._session is not None:
            return self._session.instructions
        return self._discovered.instructions if self._discovered is not None else None

    @property
    def skills(self) -> Skills:
        """The Skills extension (`io.modelcontextprotocol/skills`): list,
        get and read a server's skills, every file checked against its
        entry (see `mcp_sync.skills`).

        Example::

            for skill in client.skills.list():
                print(skill.name, client.skills.read(skill.uri).text[:80])
        """
        skills = self._skills
        if skills is None:
            from .skills import Skills

            with self._state_lock:  # one object per client, whichever thread asks first
                if self._skills is None:
                    self._skills = Skills(self)
                skills = self._skills
        return skills

    def _require_dialect(self) -> Dialect:
        dialect = self._dialect
        if dialect is None:
            raise ConnectionClosed("the client is not connected")
        return dialect

    # -- requests ---------------------------------------------------------------------------

    def request(self, method: str, params: Mapping[str, Any] | None = None, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        """Send any request and return its raw result dict.

        The protocol's `_meta` is merged into `params["_meta"]` (keys already
        there win; `meta=` wins over both). A JSON-RPC error raises the
        matching `ServerError` subclass.

        Example::

            result = client.request("completion/complete", {
                "ref": {"type": "ref/prompt", "name": "greet"},
                "argument": {"name": "style", "value": "f"},
            })
        """
        if not isinstance(method, str) or not method:
            raise TypeError("method must be a non-empty string")
        if params is not None and not isinstance(params, Mapping):
            raise TypeError("params must be a mapping")
        check_option_names(options)
        return self._request(method, params, options)

    # -- typed requests (see `calls`) -----------------------------------------------

    def discover(self, **options: Unpack[RequestOptions]) -> DiscoverResult:
        """Ask the server for its versions, capabilities and identity (2026-07-28).

        Example::

            info = client.discover()
            print(info.supported_versions, info.server_info)
        """
        result = self._calls.discover(options)
        self._discovered = result
        return result

    def ping(self, **options: Unpack[RequestOptions]) -> None:
        """Check the server is alive (initialize era; 2026-07-28 has no ping).

        Example::

            client.ping()
        """
        self._calls.ping(options)

    def list_page(self, kind: str, cursor: str | None = None, **options: Unpack[RequestOptions]) -> Page:
        """One page of a list: `kind` is "tools", "resources",
        "resource_templates" or "prompts"; pass the previous `next_cursor`.

        Example::

            page = client.list_page("tools")
            while page.next_cursor:
                page = client.list_page("tools", page.next_cursor)
        """
        return self._calls.list_page(kind, cursor, options)

    def list_tools(self, **options: Unpack[RequestOptions]) -> list[Tool]:
        """Every tool, following `nextCursor` to the end (at most `max_pages`).

        Example::

            for tool in client.list_tools():
                print(tool.name, tool.description)
        """
        tools: list[Tool] = self._calls.list_all("tools", options, self.max_pages)
        return tools

    @overload
    def call_tool(
        self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None = None, *,
        task: Literal[False] = False, wait: bool = False, **options: Unpack[RequestOptions],
    ) -> CallToolResult: ...

    @overload
    def call_tool(
        self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None = None, *,
        task: Literal[True], wait: Literal[False] = False, **options: Unpack[RequestOptions],
    ) -> Task: ...

    @overload
    def call_tool(
        self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None = None, *,
        task: bool, wait: Literal[True], **options: Unpack[RequestOptions],
    ) -> CallToolResult: ...

    @overload
    def call_tool(
        self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None = None, *,
        task: bool, wait: bool = False, **options: Unpack[RequestOptions],
    ) -> CallToolResult | Task: ...

    def call_tool(
        self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None = None, *,
        task: bool = False, wait: bool = False, **options: Unpack[RequestOptions],
    ) -> CallToolResult | Task:
        """Call a tool by name, or with its definition from `list_tools()`.

        A tool that fails returns a result with `is_error` set (see
        `CallToolResult.raise_for_error()`). When the tool's definition is
        known and has an `outputSchema`, `structured_content` is validated
        against it (`OutputValidationError` if it does not match).

        `task=True` declares the tasks extension for this call and returns a
        `Task` handle (already completed when the server answered at once);
        `wait=True` as well blocks until the task's result, `timeout`
        bounding the whole wait. See docs/tasks.md.

        Example::

            result = client.call_tool("countdown", {"steps": 3},
                                      progress=lambda p: print(p.progress, p.total))
            print(result.text)
        """
        try:
            if task or wait or self.options.tasks:
                from . import tasks as _tasks

                return _tasks.call_tool(self, tool, arguments, options, task=task, wait=wait)
            if not options and type(tool) is str and tool and self.cache is None and self._tracer is None:
                return self._call_tool_plain(tool, arguments)
            return self._calls.call_tool(tool, arguments, options, max_pages=self.max_pages, timeout=self.timeout)
        except MissingClientCapability as exc:
            from . import tasks as _tasks

            better = _tasks.explained(exc)  # a tool that only runs as a task says so
            if better is exc:
                raise
            raise better from None

    def _call_tool_plain(self, name: str, arguments: Mapping[str, Any] | None) -> CallToolResult:
        """`call_tool`'s fast lane: a tool called by name with no options,
        on a client with no cache and no tracer, which is most calls. The
        same retry loop (`_send`) sends it, and an `input_required` answer
        goes on to the multi-round loop; only the layers that would find
        nothing to do (option checks, the cache, the tracing hook) are
        skipped. What it sends and returns is what the general path sends
        and returns for the same call (tests/test_fast_lane.py)."""
        if arguments is not None and type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise TypeError("arguments must be a mapping")
        catalog = self._catalog
        definition = catalog.get(name)
        params: dict[str, Any] = {"name": name} if arguments is None else {"name": name, "arguments": dict(arguments)}
        known: list[Tool | None] | None = None
        if catalog.mirrors_headers:  # Streamable HTTP: the `Mcp-Param-*` headers, as the general path makes them
            known, headers, refresh = self._calls.header_hooks(name, definition, arguments, self.timeout,
                                                                self.max_pages)
            call = Call("tools/call", params, _NO_OPTIONS, self.input_handlers, headers, refresh)
        else:
            call = Call("tools/call", params, _NO_OPTIONS, self.input_handlers)
        started = time.monotonic()
        raw = self._send(call)
        if raw.get("resultType") == "input_required":
            raw = self._more_rounds(call, raw, started)
        if raw.get("resultType") == "task":
            raise InvalidResult("tools/call: the server answered with a task, which the call did not ask for")
        return catalog.finish_call(name, definition if known is None else known[0], raw)

    def _more_rounds(self, call: Call, first: dict[str, Any], started: float) -> dict[str, Any]:
        """The multi-round loop for a call whose first round (`first`, an
        `input_required` result) was sent by the fast lane: the loop takes
        that result as its first round's and sends the next rounds."""
        waiting = [first]

        def send(params: dict[str, Any]) -> dict[str, Any]:
            if waiting:
                return waiting.pop()
            return self._send(attrs.evolve(call, params=params))

        return multiround.answer_rounds(
            send, call.method, dict(call.params or {}), handlers=call.handlers, answer_input=True,
            max_rounds=self.max_input_rounds, input_responses=None, request_state=None,
            schemas=self._catalog.schemas, max_total_timeout=self.max_total_timeout, started=started,
        )

    def get_task(self, task_id: str, **options: Unpack[RequestOptions]) -> Task:
        """Re-attach to a task by its id (`tasks/get`): from another client,
        process, or a later request of a web app. The result is typed but
        not checked against the tool's `outputSchema`.

        Example::

            task = client.get_task(saved_id)
            result = task.wait(timeout=60)
        """
        check_option_names(options)
        from . import tasks as _tasks

        return _tasks.get_task(self, task_id, options)

    def list_resources(self, **options: Unpack[RequestOptions]) -> list[Resource]:
        """Every direct resource, following `nextCursor` to the end.

        Example::

            uris = [r.uri for r in client.list_resources()]
        """
        resources: list[Resource] = self._calls.list_all("resources", options, self.max_pages)
        return resources

    def list_resource_templates(self, **options: Unpack[RequestOptions]) -> list[ResourceTemplate]:
        """Every resource template, following `nextCursor` to the end.

        Example::

            templates = [t.uri_template for t in client.list_resource_templates()]
        """
        templates: list[ResourceTemplate] = self._calls.list_all("resource_templates", options, self.max_pages)
        return templates

    def read_resource(self, uri: str, **options: Unpack[RequestOptions]) -> ReadResourceResult:
        """Read a resource by URI. A missing one raises `ResourceNotFound`.

        Example::

            print(client.read_resource("demo://readme").text)
        """
        return self._calls.read_resource(uri, options)

    def list_prompts(self, **options: Unpack[RequestOptions]) -> list[Prompt]:
        """Every prompt, following `nextCursor` to the end.

        Example::

            names = [p.name for p in client.list_prompts()]
        """
        prompts: list[Prompt] = self._calls.list_all("prompts", options, self.max_pages)
        return prompts

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Unpack[RequestOptions],
    ) -> GetPromptResult:
        """Render a prompt with its (string) arguments.

        Example::

            prompt = client.get_prompt("greet", {"name": "Ada"})
            print(prompt.messages[0].content)
        """
        return self._calls.get_prompt(name, arguments, options)

    def complete(
        self, ref: Prompt | ResourceTemplate | Mapping[str, Any], argument: str, value: str,
        *, context: Mapping[str, str] | None = None, **options: Unpack[RequestOptions],
    ) -> CompleteResult:
        """Suggestions for one argument of a prompt or resource template.

        `ref` is a `Prompt`, a `ResourceTemplate`, or a wire reference such as
        ``{"type": "ref/prompt", "name": "greet"}``; `context` holds the values
        of arguments already chosen.

        Example::

            client.complete({"type": "ref/prompt", "name": "greet"}, "style", "f").values
        """
        return self._calls.complete(ref, argument, value, context, options)

    def _request(
        self, method: str, original: Mapping[str, Any] | None, options: RequestOptions, *,
        headers: Callable[[], Mapping[str, str] | None] | None = None,
        refresh_headers: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Send a request and return its complete result, answering the
        server's requests for input on the way (see `multiround`).

        `headers()` gives the transport headers of each attempt; after a
        -32020 (header mismatch) `refresh_headers()` is called once, to learn
        what the server expects, and the round is sent again."""
        extra_handlers = check_input_handlers(options.get("input_handlers"))
        if extra_handlers:
            self._check_declarable(extra_handlers)
        # Read-only below: the client's own mapping serves when nothing is added.
        handlers = {**self.input_handlers, **extra_handlers} if extra_handlers else self.input_handlers
        max_rounds = options.get("max_input_rounds", self.max_input_rounds)
        check_positive_int("max_input_rounds", max_rounds)
        responses = options.get("input_responses")
        if responses is not None and not isinstance(responses, Mapping):
            raise TypeError("input_responses must be a mapping of input request keys to answers")
        state = options.get("request_state")
        if state is not None and not isinstance(state, str):
            raise TypeError("request_state must be the string the server sent")
        if method not in multiround.METHODS and (responses is not None or state is not None):
            raise ValueError(f"input_responses and request_state only go with {', '.join(sorted(multiround.METHODS))}")
        def call(params: Mapping[str, Any] | None) -> Call:
            return Call(method, params, options, handlers, headers, refresh_headers)

        def rounds(send_once: Callable[[Call], dict[str, Any]]) -> dict[str, Any]:
            if responses is None and state is None and method not in multiround.METHODS:
                return send_once(call(original))
            return multiround.answer_rounds(
                lambda params: send_once(call(params)),
                method, dict(original or {}), handlers=handlers,
                answer_input=bool(options.get("answer_input", True)), max_rounds=max_rounds,
                input_responses=responses, request_state=state, schemas=self._catalog.schemas,
                max_total_timeout=options.get("max_total_timeout", self.max_total_timeout),
            )

        tracer = self._tracer
        if tracer is not None:  # the tracing hook (see `tracing`): one span per request
            return tracer.request(self, method, original, rounds)
        return rounds(self._send_once)

    def _check_declarable(self, handlers: Mapping[str, Any]) -> None:
        """In the initialize era, capabilities are fixed by `initialize`: a
        per-call handler for a kind the client did not declare would only
        meet the server's -32021, so it is refused before anything is sent."""
        dialect = self._dialect
        if dialect is None or dialect.stateless:
            return
        missing = sorted(kind for kind in handlers if not inputs.declared(kind, self._declared))
        if missing:
            raise ValueError(
                f"this connection settled on protocol {dialect.version} (initialize era), where the client's "
                f"capabilities are fixed at connect(): it did not declare {', '.join(missing)}, so a per-call "
                f"handler for it cannot be used; pass input_handlers={{{', '.join(repr(k) + ': ...' for k in missing)}}} "
                "to connect() instead")

    def _send_once(self, call: Call) -> dict[str, Any]:
        """One round's result (which may be `input_required`), from the
        cache when it holds a fresh one."""
        cache = self.cache
        key = None
        if cache is not None:
            # The key holds the protocol version too: a result's shape depends on it.
            versioned = dict(call.params or {})
            versioned["_meta"] = {**dict(versioned.get("_meta") or {}),
                                  versions.META_PROTOCOL_VERSION: self._require_dialect().version}
            key = cache_key(call.method, versioned)
        if cache is None or key is None:
            return self._send(call)
        if call.options.get("bypass_cache"):
            result = self._send(call)
            cache.put(self._cache_server, key, self._auth_context(), result)
            return result
        # A caller that waits on another's identical fetch still keeps its
        # own deadline, also when it fetches itself after that one failed.
        # (With reset_timeout_on_progress the bound is max_total_timeout.)
        options = call.options
        timeout: float | None
        if options.get("reset_timeout_on_progress"):
            limit_name, timeout = "max_total_timeout", options.get("max_total_timeout", self.max_total_timeout)
        else:
            limit_name, timeout = "timeout", options.get("timeout", self.timeout)
        check_timeout(limit_name, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout

        def load() -> dict[str, Any]:
            own = call
            if deadline is not None and timeout is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RequestTimeout(f"{call.method} timed out after {timeout:g} s",
                                         method=call.method, timeout=timeout)
                if remaining < timeout:
                    own = attrs.evolve(call, options=cast(RequestOptions, {**options, limit_name: remaining}))
            return self._send(own)

        result = cache.fetch(self._cache_server, key, self._auth_context(), load,
                             stale_if_error=self.stale_if_error, timeout=timeout, method=call.method)
        if getattr(result, "stale", False):
            log.warning("%s: the server could not be reached; serving a stale cached result", call.method)
        return result

    def _auth_context(self) -> str:
        """Whose private results these are: the bearer token's digest over
        HTTP (another token, another cache), else this server's one context."""
        auth = getattr(self._target, "auth", None)
        token = auth.token() if auth is not None else None
        if not token:
            return "-"
        import hashlib  # here: it loads OpenSSL, a cost at import for every program

        return hashlib.sha256(token.encode()).hexdigest()

    def _send(self, call: Call) -> dict[str, Any]:
        """One round's result (which may be `input_required`), through the
        one retry loop: each failure the client can mend is mended at most
        once per call, and the call is sent again.

        - -32022 (unsupported protocol version, stateless era): settle the
          version again (`_rediscover`);
        - `SessionExpired` (HTTP 404, initialize era): a new session;
        - -32020 (header mismatch): `call.refresh_headers()`.

        A server that went away is restarted by `_live_connection` when the
        era allows it; the calls in flight then fail, they are not resent."""
        method, options = call.method, call.options
        params_meta = (call.params or {}).get("_meta")
        if not options and params_meta is None:
            # The fast lane's case: no option to read or check.
            timeout: float | None = self.timeout
            max_total: float | None = self.max_total_timeout
            check_timeout("timeout", timeout)
            check_timeout("max_total_timeout", max_total)
            wants_progress = reset_on_progress = False
            on_progress: Callable[[dict[str, Any]], None] | None = None
            option_meta: Mapping[str, Any] | None = None
            trace_meta: Mapping[str, Any] | None = None
        else:
            timeout, wants_progress, on_progress, reset_on_progress, max_total, params_meta, option_meta, \
                trace_meta = self._send_settings(call)
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._closed:
            # Nothing to admit: the connection (or its absence) says why.
            return self._send_mending(call, method, timeout, deadline, wants_progress, on_progress,
                                      reset_on_progress, max_total, params_meta, option_meta, trace_meta)
        keepalive = self._held.keepalive
        if keepalive is not None:
            keepalive.busy()
        started = time.monotonic()
        outcome = "error"
        admission = self._held.admission
        assert admission is not None
        try:
            if getattr(_in_slot, "held", False):
                # A request made on behalf of a call that holds a slot (the
                # setLevel after a reconnect, a header refresh): it must not
                # wait for a second slot, which could be its own.
                result = self._send_mending(call, method, timeout, deadline, wants_progress, on_progress,
                                            reset_on_progress, max_total, params_meta, option_meta, trace_meta)
            else:
                with admission.slot(deadline):
                    _in_slot.held = True
                    try:
                        result = self._send_mending(call, method, timeout, deadline, wants_progress, on_progress,
                                                    reset_on_progress, max_total, params_meta, option_meta,
                                                    trace_meta)
                    finally:
                        _in_slot.held = False
            outcome = "ok"
            if keepalive is not None:
                keepalive.touch()
            return result
        except RequestTimeout:
            outcome = "timeout"
            raise
        except Overloaded:
            outcome = "shed"
            raise
        except KeyboardInterrupt:
            outcome = "interrupted"
            raise
        finally:
            if keepalive is not None:
                keepalive.idle()
            if outcome == "shed":
                self._metrics.count("shed")  # refused before anything was sent: not a request
            else:
                self._metrics.finished(method, outcome, time.monotonic() - started)
                dialect = self._dialect
                if outcome in ("timeout", "interrupted") and dialect is not None and dialect.may_cancel(method):
                    self._metrics.count("cancellations")  # the engine told the server it gave up

    def _send_settings(self, call: Call) -> tuple[
            float | None, bool, Callable[[dict[str, Any]], None] | None, bool, float | None,
            Mapping[str, Any] | None, Mapping[str, Any] | None, Mapping[str, Any] | None]:
        """`_send`'s reading of a call's options, each checked."""
        options = call.options
        timeout = options.get("timeout", self.timeout)
        check_timeout("timeout", timeout)
        progress = options.get("progress")
        if progress is not None and not callable(progress):
            raise TypeError("progress must be a callable")
        option_meta = options.get("meta")
        if option_meta is not None and not isinstance(option_meta, Mapping):
            raise TypeError("meta must be a mapping")
        params_meta = (call.params or {}).get("_meta")
        if params_meta is not None and not isinstance(params_meta, Mapping):
            raise TypeError("params['_meta'] must be a mapping")
        for layer in (option_meta, params_meta):
            if layer and "progressToken" in layer:
                raise ValueError("set progress= instead of a progressToken in _meta; the client routes by its own token")
            if layer and versions.META_PROTOCOL_VERSION in layer:
                raise ValueError("the protocol version is the client's to set: use protocol= on connect()")
        trace = options.get("trace_context")
        trace_meta = validate_trace_context(trace) if trace is not None else None
        max_total = options.get("max_total_timeout", self.max_total_timeout)
        check_timeout("max_total_timeout", max_total)
        reset_on_progress = bool(options.get("reset_timeout_on_progress", False))
        on_progress = (lambda p: progress(Progress.from_wire(p))) if progress is not None else None
        # A progress token is asked for when progress resets the timeout,
        # even with no callback to show it.
        wants_progress = progress is not None or reset_on_progress
        return (timeout, wants_progress, on_progress, reset_on_progress, max_total, params_meta, option_meta,
                trace_meta)

    def _send_mending(
        self, call: Call, method: str, timeout: float | None, deadline: float | None, wants_progress: bool,
        on_progress: Callable[[dict[str, Any]], None] | None, reset_on_progress: bool, max_total: float | None,
        params_meta: Mapping[str, Any] | None, option_meta: Mapping[str, Any] | None,
        trace_meta: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """`_send`'s loop: send, and mend what can be mended (see `_send`)."""
        mended: set[str] = set()
        while True:
            dialect = self._require_dialect()  # again after a re-discovery
            if not dialect.defines(method):
                hint = "use discover()" if method == "ping" else ""
                raise UnsupportedMethod(method, dialect.version, hint)
            params = dict(call.params or {})
            meta = self._request_meta(dialect, call.handlers)
            if params_meta or option_meta or trace_meta:
                meta = merge_meta(meta, params_meta, option_meta, trace_meta, None)
            if meta:
                params["_meta"] = meta
            # A request without params sends none, as the schemas allow.
            wire_params = params if (params or call.params is not None) else None
            conn = self._live_connection(deadline)
            session_generation = self._session_generation
            pending = None
            try:
                pending = conn.send_request(method, wire_params, progress=wants_progress,
                                            cancellable=dialect.may_cancel(method),
                                            headers=call.headers() if call.headers is not None else None)
                response = conn.wait(
                    pending, timeout=_left(timeout, deadline), on_progress=on_progress,
                    reset_timeout_on_progress=reset_on_progress,
                    max_total_timeout=max_total, on_log=self._log_server_message,
                    on_server_request=lambda message: self._answer_server_request(message, call.handlers, conn),
                )
            except SessionExpired:
                if "session" in mended or dialect.stateless:
                    raise
                mended.add("session")
                self._renew_session(conn, session_generation)
                continue
            except ConnectionClosed as closed:
                if self._closed:
                    raise
                if (closed.may_have_executed is False and "reconnect" not in mended
                        and self._may_restart(conn)):
                    # Nothing of this request reached the server (its pipe
                    # was gone): it may be sent on a new connection. The
                    # connection's failure is a copy without the flag, so
                    # that the other callers' errors never carry it.
                    failure = copy_error(closed)
                    failure.__dict__.pop("may_have_executed", None)
                    conn.transport_failed(failure)
                    mended.add("reconnect")
                    continue
                if conn.failure is None:
                    raise  # the call was refused before it was sent
                # The connection failed under the call.
                if method in SAFE_TO_RETRY and "reconnect" not in mended and self._may_restart(conn):
                    mended.add("reconnect")
                    log.info("%s: the connection failed; sending it again on a new one", method)
                    continue
                sent = pending is not None and pending.unsent is None
                closed.may_have_executed = sent
                if sent and closed.args:
                    closed.args = (f"{closed.args[0]} (the request had been sent: it may have run on the server; "
                                   f"it is not sent again)", *closed.args[1:])
                raise
            self._alive()
            error = response.get("error")
            if error is not None:
                exc = server_error_from_wire(error, method=method, invalid_params_means_not_found=dialect.stateless)
                if isinstance(exc, UnsupportedProtocolVersion) and dialect.stateless and "version" not in mended:
                    mended.add("version")
                    self._rediscover(exc)
                    continue
                if isinstance(exc, HeaderMismatch) and call.refresh_headers is not None and "headers" not in mended:
                    mended.add("headers")
                    call.refresh_headers()
                    continue
                raise exc
            result = response.get("result")
            if not isinstance(result, dict):
                raise InvalidResult(f"{method}: the result is not an object")
            if not (method == "tools/call" and result.get("resultType") == "task"):  # a task goes to `tasks`
                dialect.result_type(result)  # an unknown resultType is invalid
            return result

    def _live_connection(self, deadline: float | None = None) -> Connection:
        """The connection to use. Opens a new one, in the era already
        settled, when the connection failed and reconnecting is on (for a
        stateless stdio connection even with `reconnect=False`: the spec
        asks a stdio client to start its server again), or on first use in a
        child after `os.fork()`. One thread reconnects; the others wait for
        it up to their own `deadline`."""
        conn = self._conn
        if conn is not None and not self._reopen_after_fork and (
                conn.failure is None or not self._may_restart(conn)):
            return conn
        if self._closed:
            if conn is not None:
                return conn  # sending on it raises why it ended (ServerExited, closed)
            raise ConnectionClosed("the client is closed")
        if conn is None and not self._reopen_after_fork:
            raise ConnectionClosed("the client is not connected")
        if self._reopen_after_fork and not isinstance(self._target, Target):
            raise ConnectionClosed("this client's transport was opened in the parent process, before "
                                   "os.fork(), and cannot be reopened: connect() again in this process")
        if not _acquire_until(self._restart_lock, deadline):
            raise RequestTimeout("the connection is being re-established and was not ready before the "
                                 "call's deadline")
        try:
            current = self._conn
            if (current is not conn and current is not None and current.failure is None
                    and not self._reopen_after_fork):
                return current  # another thread reconnected already
            if self._reopen_after_fork:
                log.info("reconnecting: the client was inherited across os.fork()")
                new = self._connect(self._require_dialect())
            else:
                assert current is not None
                new = self._reconnect(current, deadline)
        finally:
            self._restart_lock.release()
        self._after_connect(new, deadline)
        self._held.status.set(Status.READY)
        if self._held.keepalive is not None:
            self._held.keepalive.reset()
        if any(subscription.interrupted for subscription in list(self._held.subscriptions)):
            self._heal_soon()  # open them again, off this caller's thread
        return new

    def _heal_soon(self) -> None:
        """Start the thread that reconnects and opens the interrupted
        subscriptions again, unless it runs already. Only starts a thread:
        callable from the reader."""
        held = self._held
        with held.lock:
            if held.closed:
                return
            if held.healer is not None:
                held.heal_again = True  # it looks again before it ends
                return
            held.heal_again = False
            healer = threading.Thread(target=_heal, args=(weakref.ref(self),), name="mcp-sync-reconnect",
                                      daemon=True)
            try:
                healer.start()
            except RuntimeError as exc:  # no thread to be had: the next call reconnects instead
                log.warning("no thread to reconnect for the open subscriptions: %s", exc)
                return
            held.healer = healer

    def _reconnect(self, failed: Connection, deadline: float | None) -> Connection:
        """Open a connection in place of `failed`, waiting out the backoff
        of the reconnect policy (never past `deadline`). Called with
        `_restart_lock` held; the attempts of successive callers make one
        run of the policy, which ends with a connection or with `failed`."""
        if self._gave_up is not None:
            raise ConnectionClosed(f"reconnecting gave up: {self._gave_up}")
        admission = self._held.admission
        assert admission is not None
        # New calls wait for the connection in the admission queue, bounded
        # by `max_queued` (beyond it: `Overloaded`), not on the lock.
        admission.pause()
        try:
            return self._reconnect_paused(failed, deadline)
        finally:
            admission.resume()

    def _reconnect_paused(self, failed: Connection, deadline: float | None) -> Connection:
        cause: McpError | None = failed.failure
        # On a thread of its own: a server that hangs on its way out must not
        # hold the caller past its deadline (each attempt below waits for it,
        # up to that deadline, before it starts a new server).
        self._held.close_later(failed, "reconnecting after the connection failed")
        self._held.status.set(Status.RECONNECTING, cause)
        for subscription in list(self._held.subscriptions):
            subscription._interrupt()
        policy = self._reconnect_policy
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                raise RequestTimeout("the connection is being re-established and was not ready before the "
                                     "call's deadline")
            if self._attempts > 0 and self._retry_at == 0.0:
                # The previous attempt connected but was not proven alive
                # (or failed): back off before this one, or give up.
                if self._delays is None:
                    # Without a policy (reconnect=False) a stateless stdio
                    # server is still started again, at once, every time.
                    self._delays = policy.delays() if policy is not None else itertools.repeat(0.0)
                delay = next(self._delays, None)
                if delay is None:
                    error = cause if cause is not None else ConnectionClosed("the connection failed")
                    self._gave_up = error
                    self._held.status.set(Status.FAILED, error)
                    log.error("reconnecting gave up after %d attempts: %s", self._attempts, error)
                    for subscription in list(self._held.subscriptions):
                        if subscription.interrupted:
                            subscription._on_event("broken", ConnectionClosed(f"reconnecting gave up: {error}"))
                    raise ConnectionClosed(f"reconnecting gave up after {self._attempts} attempts: {error}")
                self._retry_at = time.monotonic() + delay
            wait = self._retry_at - time.monotonic()
            if wait > 0:
                if deadline is not None and time.monotonic() + wait > deadline:
                    raise RequestTimeout(f"the connection is being re-established; the next attempt is in "
                                         f"{wait:.2f} s, after the call's deadline")
                _pause(self._held.closed_event, wait)
            if self._closed:
                raise ConnectionClosed("the client is closed")
            # The connections being closed go first: the old server may hold
            # what the new one needs (a port, a lock file), and a server that
            # keeps failing must not pile up closing ones.
            if not self._held.closers_done(deadline):
                raise RequestTimeout("the connection is being re-established: the failed server was still "
                                     "shutting down at the call's deadline")
            self._retry_at = 0.0
            self._attempts += 1
            log.warning("the connection failed; reconnecting (attempt %d): %s", self._attempts, cause)
            era = self._require_dialect()
            try:
                new = self._connect(era, deadline, reconnecting=True)
            except McpError as exc:
                if self._closed or policy is None:
                    raise  # without a policy: one attempt per call, never a loop
                cause = exc
                continue
            if not era.stateless:  # the handshake was answered: it is alive
                self._attempts, self._delays, self._retry_at = 0, None, 0.0
            # The attempts are forgotten only once the new connection has
            # answered something (`_alive`): a server that starts and dies at
            # once must meet the backoff, not a hot loop.
            self._metrics.count("reconnects")
            if self.cache is not None:
                self.cache.clear_server(self._cache_server)
            return new

    def _alive(self) -> None:
        """A response arrived: the connection works, so the next failure
        starts a fresh run of the reconnect policy."""
        if self._attempts and self._restart_lock.acquire(blocking=False):
            try:
                self._attempts, self._delays, self._retry_at = 0, None, 0.0
            finally:
                self._restart_lock.release()

    def _may_restart(self, conn: Connection) -> bool:
        """Whether a failed connection is opened again by the next call."""
        if not self.restart or not isinstance(self._target, Target):
            return False
        if self._reconnect_policy is not None:
            return True
        # Without a reconnect policy, only what the spec asks of a stdio
        # client: start a stateless server again.
        return self._require_dialect().stateless and conn.transport.restarts_server

    def _renew_session(self, conn: Connection, generation: int) -> None:
        """The server ended our initialize-era session (HTTP 404): start a new
        one, once for all the calls that found out at the same time."""
        with self._session_lock:
            if self._session_generation != generation:
                return  # another call renewed it already
            dialect = self._require_dialect()
            log.info("the session expired; initializing a new one")
            status = self._held.status
            status.set(Status.RECONNECTING, SessionExpired("the server ended the session (HTTP 404)", status=404))
            # The session's subscriptions went with it.
            for subscription in list(self._held.subscriptions):
                subscription._interrupt()
            self._initialize(conn, dialect.version)
            self._session_generation += 1
            self._metrics.count("reconnects")
            status.set(Status.READY)
        if any(subscription.interrupted for subscription in list(self._held.subscriptions)):
            self._heal_soon()  # subscribe again in the new session

    def _rediscover(self, refusal: UnsupportedProtocolVersion) -> None:
        """After a -32022 on a ready stateless connection: settle the version again."""
        offered = refusal.supported
        stateless = [v for v in self.allowed_versions if versions.dialect_for(v).stateless]
        choice = next((v for v in stateless if v in offered), None)
        if choice is None:
            raise refusal
        conn = self._conn
        assert conn is not None
        verdict = self._probe(conn, choice)
        if not isinstance(verdict, UseStateless):
            raise refusal

    # -- server -> client, on the calling thread ----------------------------------------------

    def _server_request_result(self, message: dict[str, Any], handlers: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to a server request (initialize era). Raises
        `ServerError` to refuse it, `InputHandlerError` when a handler fails."""
        method = message.get("method")
        params = message.get("params")
        if method == "ping":
            return {}
        kind = inputs.kind_of(method, params)
        if kind is None or kind not in handlers or not inputs.declared(kind, self._declared):
            raise ServerError(-32601, f"Method not found: {method} (this client does not handle it)")
        try:
            inputs.check_request(kind, params)
        except inputs.BadInput as exc:
            raise ServerError(-32602, f"Invalid params: {exc}") from None
        return multiround.run_handler(kind, handlers[kind], dict(params or {}), self._catalog.schemas, {})

    def _answer_server_request(self, message: dict[str, Any], handlers: Mapping[str, Any],
                               conn: Connection) -> None:
        """Answer a server request on the calling thread, on the connection
        it came from. A handler that fails fails the call too (after the
        server is told), so nothing half-valid is ever sent."""
        try:
            result = self._server_request_result(message, handlers)
        except ServerError as exc:
            conn.respond(message["id"], error={"code": exc.code, "message": exc.message, "data": exc.data})
        except InputHandlerError as exc:
            conn.respond(message["id"], error={"code": -32603, "message": f"client handler failed: {exc.problem}"})
            raise
        else:
            conn.respond(message["id"], result=result)

    @staticmethod
    def _log_server_message(params: Mapping[str, Any]) -> None:
        level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
        if not server_log.isEnabledFor(level):
            return
        logger = params.get("logger")
        data = params.get("data")
        if logger:
            server_log.log(level, "[%s] %s", logger, data)
        else:
            server_log.log(level, "%s", data)

    def __repr__(self) -> str:
        dialect = self._dialect
        state = "closed" if self._closed else (dialect.version if dialect else "connecting")
        return f"<mcp_sync.Client {state}>"


def _server_identity(target: Any, client: Client) -> str:
    """Which server a cached result came from, so that clients sharing a
    cache never mix two servers' results."""
    url = getattr(target, "url", None)
    if isinstance(url, str):
        return f"http:{url}"
    command = getattr(target, "command", None)
    if isinstance(command, str):
        return "stdio:" + json.dumps([command, getattr(target, "args", []), str(getattr(target, "cwd", None))])
    server = getattr(target, "server", None)
    if server is not None:
        return f"memory:{id(server)}"
    return f"client:{id(client)}"


# -- what outlives a dropped client, and what a fork child lets go ---------------------------


class _Held:
    """What a client owns that must be released even if nobody calls
    `close()`: the connection (and any still starting), the notification
    dispatcher, the initialize-era subscriptions. The client's finalizer
    holds this object and never the client, so a dropped client is
    collected and then closed."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        # Guards `conn`, `starting`, `closed` and `initialize_era_subscriptions`.
        self.lock = threading.Lock()
        self.conn: Connection | None = None
        # Started but not yet published (connecting, settling the era).
        self.starting: set[Connection] = set()
        self.closed = False
        self.dispatcher = dispatcher
        # Status callbacks run on the dispatcher's thread, never the reader's.
        self.status = StatusMonitor(dispatcher.call_soon)
        self.keepalive: Keepalive | None = None
        self.admission: Admission | None = None
        # Set by release(): ends a reconnect's backoff wait at once.
        self.closed_event = threading.Event()
        # The thread that reconnects for open subscriptions (`_heal`), and
        # whether it must look again before it ends (under `lock`).
        self.healer: threading.Thread | None = None
        self.heal_again = False
        # Initialize-era subscriptions, held strongly: `close()` ends them
        # (the session's streams go with it).
        self.initialize_era_subscriptions: set[Subscription] = set()
        # Connections being closed on threads of their own (`close_later`),
        # with how long each close may take (under `lock`).
        self.closers: dict[threading.Thread, tuple[Connection, float]] = {}
        # Closers and reconnect threads that took themselves off their roll
        # (`closers`, `healer`) and may not have ended yet: `release()` joins
        # them too (under `lock`; see `leave()`).
        self.leaving: list[threading.Thread] = []
        # Every open subscription, both eras, held weakly: to interrupt and
        # reopen them after a reconnect or a new session, and to end them in
        # a fork child (the streams are the parent's).
        self.subscriptions: weakref.WeakSet[Subscription] = weakref.WeakSet()

    def leave(self, thread: threading.Thread) -> None:
        """(Under `lock`.) `thread`, just taken off its roll, runs on for a
        moment: `release()` must still join it. Ended ones are let go here,
        so the list holds only a few."""
        self.leaving = [other for other in self.leaving if other.is_alive()]
        self.leaving.append(thread)

    def release(self) -> None:
        """Close everything; idempotent, from any thread."""
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
        if self.admission is not None:
            self.admission.close(ConnectionClosed("the client was closed"))
        for conn in conns:
            if conn is not None:
                conn.close()
        with self.lock:
            closers = list(self.closers.items())
        for closer, (_, bound) in closers:
            if closer is not threading.current_thread():
                closer.join(bound)
        if self.keepalive is not None:
            self.keepalive.close()
        with self.lock:
            threads = [self.healer, *self.leaving]
        limit = time.monotonic() + CLOSE_JOIN_SECONDS
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(limit - time.monotonic(), 0.0))
        self.dispatcher.close()
        for subscription in subscriptions:
            subscription._on_event("closed", ConnectionClosed("the client was closed"))

    def close_later(self, conn: Connection, reason: str) -> None:
        """Close `conn` on a thread of its own: a caller with a deadline (a
        reconnect) must not wait out a wedged server's shutdown (a stdio
        server gets `shutdown_timeout` at each of its three steps).
        `release()` waits for the thread, up to the connection's
        `close_budget`, so it does not outlive `close()`. Once the client
        is closing, or when no thread can be started, `conn` is closed here
        and now, as `release()` would. One closer per connection."""
        def run() -> None:
            try:
                conn.close(reason)
            finally:
                with self.lock:
                    if self.closers.pop(thread, None) is not None:
                        self.leave(thread)

        thread = threading.Thread(target=run, name="mcp-sync-closer", daemon=True)
        with self.lock:
            if any(closing is conn for closing, _ in self.closers.values()):
                return
            if not self.closed:
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had: close it on this one
                    pass
                else:
                    self.closers[thread] = (conn, conn.close_budget + 1.0)
                    return
        conn.close(reason)

    def closers_done(self, deadline: float | None) -> bool:
        """Wait for the closes `close_later` runs, each up to its budget and
        all up to `deadline`: False if the deadline came first."""
        while True:
            with self.lock:
                closers = list(self.closers.items())
            if not closers:
                return True
            closer, (_, bound) = closers[0]
            wait = bound if deadline is None else min(bound, deadline - time.monotonic())
            if wait <= 0:
                return False
            closer.join(wait)
            if closer.is_alive():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                with self.lock:  # past its budget: no longer waited for
                    self.closers.pop(closer, None)

    def after_fork(self) -> None:
        """In a fork child: forget the parent's connections and threads
        without IO. The subscriptions the child inherited end at once with
        `SubscriptionBroken` (their streams are the parent's): a child that
        iterates one learns to listen again instead of waiting for ever."""
        self.lock = threading.Lock()
        for closing, _ in self.closers.values():
            closing.discard()  # the parent's thread closes it; this process only lets go of its copies
        self.closers = {}
        self.leaving = []
        self.closed_event = threading.Event()
        self.healer = None
        for subscription in list(self.subscriptions):
            subscription._orphan(ConnectionClosed(
                "the subscription belongs to the parent process (os.fork()); listen again in this one"))
        self.subscriptions = weakref.WeakSet()
        for conn in (self.conn, *self.starting):
            if conn is not None:
                conn.discard()
        self.conn = None
        self.starting = set()
        self.initialize_era_subscriptions = set()
        # The dispatcher's thread was not copied; a fresh lock and queue, and
        # its thread is started again by the next callback or stream.
        self.dispatcher.after_fork()
        self.status.after_fork()
        if self.admission is not None:
            self.admission.after_fork()
        if self.keepalive is not None:
            self.keepalive.after_fork()


def _release_unclosed(held: _Held, description: str) -> None:
    """The finalizer of a client dropped without `close()`.

    It may run inside garbage collection on any thread, including one of
    the connection's own while it holds an engine lock; so the closing (which
    takes those locks and joins those threads) runs on a thread of its own."""
    warnings.warn(f"unclosed mcp_sync.Client {description}", ResourceWarning, stacklevel=2)
    try:
        threading.Thread(target=held.release, name="mcp-sync-finalizer").start()
    except RuntimeError:  # at interpreter shutdown no thread can start
        held.release()


def _weak_server_request(client: Client) -> Callable[[dict[str, Any]], Any]:
    """The engine's handler for server requests that belong to no call,
    reaching the client weakly."""
    ref = weakref.ref(client)

    def answer(message: dict[str, Any]) -> Any:
        current = ref()
        if current is None:
            raise ServerError(-32601, f"Method not found: {message.get('method')} (the client is gone)")
        return current._server_request_result(message, current.input_handlers)

    return answer


def _notification_sink(cache: ResultCache | None, server: str, dispatcher: Dispatcher) -> Callable[[dict[str, Any]], None]:
    """The engine's hook for notifications that belong to no call. On the
    thread that read it: only hand it on, never block. The cache forgets
    what changed at once, before anyone can be told."""

    def on_notification(message: dict[str, Any]) -> None:
        if cache is not None:
            cache.invalidate(server, message)
        dispatcher.put(message)

    return on_notification


#: Every open client in this process, for `_after_fork_in_child`.
_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_live_clients):
        if not client._held.closed:
            client._after_fork()


#: What the package imports on first use rather than at `import mcp_sync`
#: (its own modules, whatever their names, and these).
_IMPORTED_LATE = frozenset((
    "subprocess", "signal", "shlex", "random", "base64", "binascii", "datetime", "hashlib", "requests", "urllib3",
))


def _finish_imports_before_fork() -> None:
    """Before `os.fork()`: wait for any import of a module the package
    loads on first use that another thread is in the middle of. The child
    would inherit the half-built module and the lock of an importing thread
    it does not have, and its own first use of that module would wait for
    that lock for ever. Importing a module that is being imported waits for
    it; one already loaded costs a dictionary lookup, and one not loaded is
    left alone."""
    for name, module in list(sys.modules.items()):
        if (name.startswith("mcp_sync.") or name in _IMPORTED_LATE) and getattr(
                getattr(module, "__spec__", None), "_initializing", False):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - its importer sees the error; the fork goes on
                pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_imports_before_fork, after_in_child=_after_fork_in_child)
