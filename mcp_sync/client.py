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

import hashlib
import json
import logging
import os
import threading
import time
import warnings
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Callable, cast

import attrs

from . import handshake, multiround
from ._version import __version__
from .cache import ResultCache, cache_key
from .calls import HeadersFn, SendFn, ToolCatalog, TypedCalls
from .connection import Connection, Drops, new_id_counter
from .errors import (
    ConnectionClosed,
    HeaderMismatch,
    InputHandlerError,
    InvalidResult,
    McpError,
    RequestTimeout,
    ServerError,
    SessionExpired,
    UnsupportedMethod,
    UnsupportedProtocolVersion,
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
from .subscriptions import Subscription, SubscriptionBroken
from .transports import Target, Transport, resolve_target
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

__all__ = ["connect", "Client", "ClientOptions", "RequestOptions", "DEFAULT_TIMEOUT"]

log = logging.getLogger("mcp_sync.client")
server_log = logging.getLogger("mcp_sync.server")

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}



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

    With `restart=True` (the default), a stateless (2026-07-28) connection
    whose server went away is opened again by the next request, as the spec
    asks of stdio clients; the calls that were in flight still fail.

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
    )
    client = Client(resolved, options)
    try:
        client._open()
    except BaseException:
        client.close()
        raise
    return client


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
    """

    def __init__(self, target: Target | Transport, options: ClientOptions | None = None, **keywords: Any) -> None:
        """`options`, or the keyword arguments of `connect()` (over `options`
        when both are given), validated once as a `ClientOptions`."""
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
        self._calls = TypedCalls(_send_through(self), self._catalog)
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

    def _abandon_connection(self, conn: Connection, reason: str) -> None:
        with self._held.lock:
            self._held.starting.discard(conn)
        conn.close(reason)

    def _publish(self, conn: Connection) -> None:
        """Make a started connection, its era settled, the one callers use:
        under the lock `close()` takes, so a connection opened by a restart
        that lost the race with `close()` is closed here, never leaked."""
        held = self._held
        with held.lock:
            held.starting.discard(conn)
            if not held.closed:
                held.conn = conn
                self._reopen_after_fork = False
                # Kept across a fork (the connection is not): the child's
                # first call builds its headers before it reconnects.
                self._catalog.mirrors_headers = conn.transport.mirrors_headers
                return
        conn.close("the client was closed while connecting")
        raise ConnectionClosed("the client is closed")

    def _open(self) -> None:
        """Open the first connection and settle the era on it."""
        with self._restart_lock:
            conn = self._connect(None)
        self._after_connect(conn)

    def _connect(self, era: Dialect | None) -> Connection:
        """Start a connection, settle its era, publish it. With `era` None
        the era is found (`server/discover` probe, falling back to
        `initialize`); else it is the one settled before (a restart, or a
        child after fork), and an initialize-era connection gets a new
        session. Called with `_restart_lock` held."""
        conn = self._start_connection()
        try:
            if era is None:
                conn = self._settle_era(conn)
            elif era.stateless:
                conn.transport.negotiated(era.version, True)
            else:
                self._initialize(conn, era.version)
        except BaseException:
            self._abandon_connection(conn, "the connection could not be set up")
            raise
        self._publish(conn)
        return conn

    def _settle_era(self, conn: Connection) -> Connection:
        """Probe or initialize on `conn`; returns the connection to keep (a
        fresh one when the server had to be restarted after the probe)."""
        allowed = self.allowed_versions
        stateless = [v for v in allowed if versions.dialect_for(v).stateless]
        initialize_era = [v for v in allowed if not versions.dialect_for(v).stateless]
        if stateless and initialize_era:
            verdict = self._probe(conn, stateless[0])
            if isinstance(verdict, UseStateless):
                return conn
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
                return conn
            self._initialize(conn, initialize_era[0])
        elif stateless:
            self._dialect = versions.dialect_for(stateless[0])
            conn.transport.negotiated(self._dialect.version, True)
        else:
            self._initialize(conn, initialize_era[0])
        return conn

    def _after_connect(self, conn: Connection) -> None:
        """What a new initialize-era session needs once callers can use it."""
        if self._session is not None and self.log_level is not None and not self._require_dialect().stateless:
            try:
                self.request("logging/setLevel", {"level": self.log_level})
            except ServerError as exc:
                log.warning("the server refused logging/setLevel: %s", exc)

    def _identity(self) -> handshake.Identity:
        return handshake.Identity(self._capabilities(), self.client_info, self.log_level)

    def _probe(self, conn: Connection, version: str) -> UseStateless | FallBack:
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

    def _initialize(self, conn: Connection, version: str) -> None:
        session = handshake.initialize(
            conn, version, self.allowed_versions, self._identity(), timeout=self.timeout,
            on_log=self._log_server_message,
            on_server_request=lambda message: self._answer_server_request(message, self.input_handlers, conn),
        )
        self._session = session
        self._declared = self._capabilities()
        self._dialect = versions.dialect_for(session.protocol_version)

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
        params = {"notifications": wanted,
                  "_meta": dialect.request_meta(self._capabilities(), self.client_info, self.log_level)}

        def cancel(sub: Subscription) -> None:
            if sub.id is not None:
                conn.unsubscribe(sub.id)

        subscription = Subscription(cancel, max_buffer, overflow)
        # Held by the engine's reader: it must not reach the client.
        cache, cache_server = self.cache, self._cache_server

        def on_event(kind: str, payload: Any) -> None:
            if kind == "notification" and cache is not None:
                cache.invalidate(cache_server, payload)
            subscription._on_event(kind, payload)

        self._held.subscriptions.add(subscription)
        subscription.id = conn.subscribe("subscriptions/listen", params, on_event)
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
    def server_info(self) -> Implementation | None:
        """The server's name and version, when it has said them."""
        if self._session is not None:
            return self._session.server_info
        return self._discovered.server_info if self._discovered is not None else None

    @property
    def server_capabilities(self) -> dict[str, Any] | None:
        if self._session is not None:
            return self._session.capabilities
        return self._discovered.capabilities if self._discovered is not None else None

    @property
    def instructions(self) -> str | None:
        if self._session is not None:
            return self._session.instructions
        return self._discovered.instructions if self._discovered is not None else None

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

    def call_tool(
        self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None = None,
        **options: Unpack[RequestOptions],
    ) -> CallToolResult:
        """Call a tool by name, or with its definition from `list_tools()`.

        A tool that fails returns a result with `is_error` set (see
        `CallToolResult.raise_for_error()`). When the tool's definition is
        known and has an `outputSchema`, `structured_content` is validated
        against it (`OutputValidationError` if it does not match).

        Example::

            result = client.call_tool("countdown", {"steps": 3},
                                      progress=lambda p: print(p.progress, p.total))
            print(result.text)
        """
        return self._calls.call_tool(tool, arguments, options, max_pages=self.max_pages, timeout=self.timeout)

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

        if responses is None and state is None and method not in multiround.METHODS:
            return self._send_once(call(original))
        return multiround.answer_rounds(
            lambda params: self._send_once(call(params)),
            method, dict(original or {}), handlers=handlers,
            answer_input=bool(options.get("answer_input", True)), max_rounds=max_rounds,
            input_responses=responses, request_state=state, schemas=self._catalog.schemas,
            max_total_timeout=options.get("max_total_timeout", self.max_total_timeout),
        )

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
        return hashlib.sha256(token.encode()).hexdigest() if token else "-"

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
        mended: set[str] = set()
        while True:
            dialect = self._require_dialect()  # again after a re-discovery
            if not dialect.defines(method):
                hint = "use discover()" if method == "ping" else ""
                raise UnsupportedMethod(method, dialect.version, hint)
            params = dict(call.params or {})
            meta = merge_meta(
                dialect.request_meta(self._capabilities(call.handlers), self.client_info, self.log_level),
                params_meta, option_meta, trace_meta, None,
            )
            if meta:
                params["_meta"] = meta
            # A request without params sends none, as the schemas allow.
            wire_params = params if (params or call.params is not None) else None
            conn = self._live_connection()
            session_generation = self._session_generation
            try:
                pending = conn.send_request(method, wire_params, progress=wants_progress,
                                            cancellable=dialect.may_cancel(method),
                                            headers=call.headers() if call.headers is not None else None)
                response = conn.wait(
                    pending, timeout=timeout, on_progress=on_progress,
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
            dialect.result_type(result)  # an unknown resultType is invalid
            return result

    def _live_connection(self) -> Connection:
        """The connection to use. Opens a new one, in the era already
        settled, when the server went away and the era allows a restart
        (stateless: no session is lost), or on first use in a child after
        `os.fork()`."""
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
        with self._restart_lock:
            current = self._conn
            if current is not conn and current is not None and not self._reopen_after_fork:
                return current  # another thread reconnected already
            if self._reopen_after_fork:
                log.info("reconnecting: the client was inherited across os.fork()")
            else:
                assert conn is not None
                log.warning("the server went away; starting it again: %s", conn.failure)
                conn.close("restarting after the server went away")
            new = self._connect(self._require_dialect())
        self._after_connect(new)
        return new

    def _may_restart(self, conn: Connection) -> bool:
        return (self.restart and self._require_dialect().stateless and isinstance(self._target, Target)
                and conn.transport.restarts_server)

    def _renew_session(self, conn: Connection, generation: int) -> None:
        """The server ended our initialize-era session (HTTP 404): start a new
        one, once for all the calls that found out at the same time."""
        with self._session_lock:
            if self._session_generation != generation:
                return  # another call renewed it already
            dialect = self._require_dialect()
            log.info("the session expired; initializing a new one")
            self._session = handshake.initialize(
                conn, dialect.version, self.allowed_versions, self._identity(), timeout=self.timeout,
                on_log=self._log_server_message,
                on_server_request=lambda message: self._answer_server_request(message, self.input_handlers, conn),
            )
            self._session_generation += 1

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
        self.initialize_era_subscriptions: set[Subscription] = set()
        # Every open subscription, both eras, held weakly: only to end them
        # in a fork child (the streams are the parent's).
        self.subscriptions: weakref.WeakSet[Subscription] = weakref.WeakSet()

    def release(self) -> None:
        """Close everything; idempotent, from any thread."""
        with self.lock:
            self.closed = True
            conns = [self.conn, *self.starting]
            self.starting = set()
            subscriptions, self.initialize_era_subscriptions = self.initialize_era_subscriptions, set()
        for conn in conns:
            if conn is not None:
                conn.close()
        self.dispatcher.close()
        for subscription in subscriptions:
            subscription._on_event("closed", ConnectionClosed("the client was closed"))

    def after_fork(self) -> None:
        """In a fork child: forget the parent's connections and threads
        without IO. The subscriptions the child inherited end at once with
        `SubscriptionBroken` (their streams are the parent's): a child that
        iterates one learns to listen again instead of waiting for ever."""
        self.lock = threading.Lock()
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


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
