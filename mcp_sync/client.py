"""The public blocking API: `connect()` and `Client`.

What it owns: the connection's life (opening it, settling the protocol
version, restarting, renewing a session), building each request from the
dialect and the caller's options, and running user callbacks (progress,
log, server requests) on the calling thread. The typed calls built on
`request()` are in `calls.py`. What it must not do: touch pipes or sockets (that is the
transports'), or wait on anything but the engine (`connection.py`).

A `Client` is shared freely between threads: every call registers its own
request in the engine and waits on its own inbox. The few fields a call can
change (the dialect after a -32022 re-discovery, the last tool listing) are
replaced whole under `_state_lock`, never mutated in place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Callable

from . import handshake, multiround
from ._version import __version__
from .cache import ResultCache, cache_key
from .calls import Calls
from .connection import Connection, new_id_counter
from .errors import (
    ConnectionClosed,
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
from .protocol.schemas import SchemaCache
from .protocol.versions import Dialect, FallBack, UseStateless
from .subscriptions import Subscription, SubscriptionBroken
from .transports import Target, Transport, resolve_target
from .types import (
    DiscoverResult,
    Implementation,
    InitializeResult,
    Progress,
    Tool,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["connect", "Client", "RequestOptions", "DEFAULT_TIMEOUT"]

log = logging.getLogger("mcp_sync.client")
server_log = logging.getLogger("mcp_sync.server")

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}



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
    client = Client(
        resolved, protocol=protocol, timeout=timeout, probe_timeout=probe_timeout,
        client_info=client_info, client_capabilities=client_capabilities, log_level=log_level,
        max_pages=max_pages, max_total_timeout=max_total_timeout, restart=restart,
        input_handlers=input_handlers, max_input_rounds=max_input_rounds,
        max_server_requests=max_server_requests, handler_timeout=handler_timeout, cache=cache,
        stale_if_error=stale_if_error,
    )
    try:
        client._open()
    except BaseException:
        client.close()
        raise
    return client


class Client(Calls):
    """A blocking MCP client, safe to share between threads. Use `connect()`.

    Example::

        client = mcp_sync.connect(mcp_sync.testing.demo_server())
        result = client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"sum": 5}
        client.close()
    """

    def __init__(
        self,
        target: Target | Transport,
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
    ) -> None:
        check_timeout("timeout", timeout)
        check_timeout("probe_timeout", probe_timeout, allow_none=False)
        check_timeout("max_total_timeout", max_total_timeout, allow_none=False)
        if isinstance(max_pages, bool) or not isinstance(max_pages, int) or max_pages < 1:
            raise ValueError(f"max_pages must be a positive integer, not {max_pages!r}")
        if log_level is not None and log_level not in _LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(versions.LOG_LEVELS)}, not {log_level!r}")
        if client_info is not None and not (isinstance(client_info, Mapping) and isinstance(client_info.get("name"), str) and isinstance(client_info.get("version"), str)):
            raise ValueError("client_info needs string 'name' and 'version'")
        if client_capabilities is not None and not isinstance(client_capabilities, Mapping):
            raise TypeError("client_capabilities must be a mapping")
        self._target = target
        self.allowed_versions = versions.allowed_versions(protocol)
        self.timeout = timeout
        self.probe_timeout = probe_timeout
        self.client_info: dict[str, Any] = dict(client_info or {"name": "mcp_sync", "version": __version__})
        self.client_capabilities: dict[str, Any] = dict(client_capabilities or {})
        self.log_level = log_level
        self.max_pages = max_pages
        self.max_total_timeout = max_total_timeout
        self.restart = restart
        self.input_handlers = check_input_handlers(input_handlers)
        check_positive_int("max_input_rounds", max_input_rounds)
        check_positive_int("max_server_requests", max_server_requests)
        check_timeout("handler_timeout", handler_timeout)
        self.max_input_rounds = max_input_rounds
        self.max_server_requests = max_server_requests
        self.handler_timeout = handler_timeout
        self._declared: dict[str, Any] = {}  # capabilities sent with initialize
        self._dispatcher = Dispatcher()
        self._legacy_subscriptions: set[Subscription] = set()
        if isinstance(cache, ResultCache):
            self.cache: ResultCache | None = cache
        elif cache is True:
            self.cache = ResultCache()
        elif cache is False or cache is None:
            self.cache = None
        else:
            raise TypeError("cache must be True, False or a ResultCache")
        self._cache_server = _server_identity(target, self)
        self.stale_if_error = bool(stale_if_error)
        self._ids = new_id_counter()
        self._state_lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._session_generation = 0
        self._conn: Connection | None = None
        self._dialect: Dialect | None = None
        self._discovered: DiscoverResult | None = None
        self._session: InitializeResult | None = None
        self._tools: dict[str, Tool] = {}
        self._schemas = SchemaCache()
        self._closed = False

    # -- the connection's life --------------------------------------------------------

    def _new_connection(self) -> Connection:
        transport = self._target.open() if isinstance(self._target, Target) else self._target
        conn = Connection(
            transport, self._ids,
            on_server_request=lambda message: self._server_request_result(message, self.input_handlers),
            on_notification=self._on_server_notification,
            on_log=self._log_server_message,
            max_server_requests=self.max_server_requests, handler_timeout=self.handler_timeout,
        )
        transport.request_timeout = self.timeout
        with self._state_lock:
            if self._closed:
                raise ConnectionClosed("the client is closed")
            self._conn = conn
        conn.start()
        return conn

    def _open(self) -> None:
        allowed = self.allowed_versions
        stateless = [v for v in allowed if versions.dialect_for(v).stateless]
        legacy = [v for v in allowed if not versions.dialect_for(v).stateless]
        conn = self._new_connection()
        if stateless and legacy:
            verdict = self._probe(conn, stateless[0])
            if isinstance(verdict, UseStateless):
                return
            log.info("falling back to initialize: %s", verdict.reason)
            if isinstance(self._target, Target) and conn.transport.restarts_server:
                # The probe may already have been processed under the older
                # lifecycle rules, so start the server afresh.
                conn.close("restarting the server after the server/discover probe")
                conn = self._new_connection()
            self._initialize(conn, legacy[0])
        elif stateless:
            self._dialect = versions.dialect_for(stateless[0])
            conn.transport.negotiated(self._dialect.version, True)
        else:
            self._initialize(conn, legacy[0])

    def _identity(self) -> handshake.Identity:
        return handshake.Identity(self._capabilities(), self.client_info, self.log_level)

    def _probe(self, conn: Connection, version: str) -> UseStateless | FallBack:
        verdict = handshake.probe(
            conn, version, self.allowed_versions, self._identity(), timeout=self.probe_timeout,
            on_log=self._log_server_message,
            failure_means_legacy=isinstance(self._target, Target) and conn.transport.restarts_server,
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
            on_server_request=lambda message: self._answer_server_request(message, self.input_handlers),
        )
        self._session = session
        self._declared = self._capabilities()
        self._dialect = versions.dialect_for(session.protocol_version)
        if self.log_level is not None:
            try:
                self.request("logging/setLevel", {"level": self.log_level})
            except ServerError as exc:
                log.warning("the server refused logging/setLevel: %s", exc)

    def _capabilities(self, handlers: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the client declares: what its handlers imply, merged with
        `client_capabilities` (which win)."""
        kinds = handlers if handlers is not None else self.input_handlers
        return inputs.merge_capabilities(inputs.capabilities_for(kinds), self.client_capabilities)

    def close(self) -> None:
        """Close the connection: pending calls fail at once with
        `ConnectionClosed`, every thread the client started ends, and a stdio
        server process is stopped and reaped. Idempotent, from any thread."""
        with self._state_lock:
            self._closed = True
            conn = self._conn
        if conn is not None:
            conn.close()
        self._dispatcher.close()
        with self._state_lock:
            legacy, self._legacy_subscriptions = self._legacy_subscriptions, set()
        for subscription in legacy:
            subscription._on_event("closed", ConnectionClosed("the client was closed"))

    # -- notifications that belong to no call ----------------------------------------

    def _on_server_notification(self, message: dict[str, Any]) -> None:
        # On the thread that read it: only hand it on, never block. The cache
        # forgets what changed at once, before anyone can be told.
        if self.cache is not None:
            self.cache.invalidate(self._cache_server, message)
        self._dispatcher.put(message)

    def on_notification(self, callback: Callable[[Notification], Any]) -> Callable[[], None]:
        """Call `callback(notification)` for every server notification that
        belongs to no call (list changes, resource updates, ...), in order, on
        the client's notification thread (never the reader). Returns a
        function that removes the callback.

        Example::

            stop = client.on_notification(lambda n: print(n.method, n.params))
            ...
            stop()
        """
        return self._dispatcher.add_callback(callback)

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

        def on_event(kind: str, payload: Any) -> None:
            if kind == "notification" and self.cache is not None:
                self.cache.invalidate(self._cache_server, payload)
            subscription._on_event(kind, payload)

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

        def cancel(sub: Subscription) -> None:
            for remove in stop:
                remove()
            with self._state_lock:
                self._legacy_subscriptions.discard(sub)
            for uri in uris:
                try:
                    self.request("resources/unsubscribe", {"uri": uri}, timeout=timeout)
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

        stop.append(self._dispatcher.add_callback(deliver))
        subscription.accepted = accepted
        subscription.acknowledged.set()
        with self._state_lock:
            self._legacy_subscriptions.add(subscription)
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
        return self._request(method, params, options, retry_version=True)

    def _request(
        self, method: str, original: Mapping[str, Any] | None, options: RequestOptions, *,
        retry_version: bool, headers: Mapping[str, str] | None = None, retry_session: bool = True,
    ) -> dict[str, Any]:
        """Send a request and return its complete result, answering the
        server's requests for input on the way (see `multiround`)."""
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
        if responses is None and state is None and method not in multiround.METHODS:
            return self._send_once(method, original, options, handlers, retry_version=retry_version,
                                   headers=headers, retry_session=retry_session)
        return multiround.answer_rounds(
            lambda params: self._send_once(method, params, options, handlers, retry_version=retry_version,
                                           headers=headers, retry_session=retry_session),
            method, dict(original or {}), handlers=handlers,
            answer_input=bool(options.get("answer_input", True)), max_rounds=max_rounds,
            input_responses=responses, request_state=state, schemas=self._schemas,
            max_total_timeout=options.get("max_total_timeout", self.max_total_timeout),
        )

    def _send_once(
        self, method: str, original: Mapping[str, Any] | None, options: RequestOptions,
        handlers: Mapping[str, Any], *, retry_version: bool, headers: Mapping[str, str] | None = None,
        retry_session: bool = True,
    ) -> dict[str, Any]:
        """One request and its result (which may be `input_required`), from
        the cache when it holds a fresh one."""
        cache = self.cache
        key = None
        if cache is not None:
            # The key holds the protocol version too: a result's shape depends on it.
            versioned = dict(original or {})
            versioned["_meta"] = {**dict(versioned.get("_meta") or {}),
                                  versions.META_PROTOCOL_VERSION: self._require_dialect().version}
            key = cache_key(method, versioned)
        if cache is None or key is None:
            return self._send_uncached(method, original, options, handlers, retry_version=retry_version,
                                       headers=headers, retry_session=retry_session)
        if options.get("bypass_cache"):
            result = self._send_uncached(method, original, options, handlers, retry_version=retry_version,
                                         headers=headers, retry_session=retry_session)
            cache.put(self._cache_server, key, self._auth_context(), result)
            return result
        result = cache.fetch(self._cache_server, key, self._auth_context(), lambda: self._send_uncached(
            method, original, options, handlers, retry_version=retry_version, headers=headers,
            retry_session=retry_session), stale_if_error=self.stale_if_error)
        if getattr(result, "stale", False):
            log.warning("%s: the server could not be reached; serving a stale cached result", method)
        return result

    def _auth_context(self) -> str:
        """Whose private results these are: the bearer token's digest over
        HTTP (another token, another cache), else this server's one context."""
        auth = getattr(self._target, "auth", None)
        token = auth.token() if auth is not None else None
        return hashlib.sha256(token.encode()).hexdigest() if token else "-"

    def _send_uncached(
        self, method: str, original: Mapping[str, Any] | None, options: RequestOptions,
        handlers: Mapping[str, Any], *, retry_version: bool, headers: Mapping[str, str] | None = None,
        retry_session: bool = True,
    ) -> dict[str, Any]:
        """One request and its result (which may be `input_required`)."""
        dialect = self._require_dialect()
        params = dict(original or {})
        if not dialect.defines(method):
            hint = "use discover()" if method == "ping" else ""
            raise UnsupportedMethod(method, dialect.version, hint)
        timeout = options.get("timeout", self.timeout)
        check_timeout("timeout", timeout)
        progress = options.get("progress")
        if progress is not None and not callable(progress):
            raise TypeError("progress must be a callable")
        option_meta = options.get("meta")
        if option_meta is not None and not isinstance(option_meta, Mapping):
            raise TypeError("meta must be a mapping")
        params_meta = params.get("_meta")
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
        meta = merge_meta(
            dialect.request_meta(self._capabilities(handlers), self.client_info, self.log_level),
            params_meta, option_meta, trace_meta, None,
        )
        if meta:
            params["_meta"] = meta
        conn = self._live_connection()
        on_progress = (lambda p: progress(Progress.from_wire(p))) if progress is not None else None
        # A request without params sends none, as the schemas allow.
        wire_params = params if (params or original is not None) else None
        session_generation = self._session_generation
        try:
            # A progress token is asked for when progress resets the timeout,
            # even with no callback to show it.
            wants_progress = progress is not None or bool(options.get("reset_timeout_on_progress", False))
            pending = conn.send_request(method, wire_params, progress=wants_progress,
                                        cancellable=dialect.may_cancel(method), headers=headers)
            response = conn.wait(
                pending, timeout=timeout, on_progress=on_progress,
                reset_timeout_on_progress=bool(options.get("reset_timeout_on_progress", False)),
                max_total_timeout=max_total, on_log=self._log_server_message,
                on_server_request=lambda message: self._answer_server_request(message, handlers),
            )
        except SessionExpired:
            if not retry_session or dialect.stateless:
                raise
            self._renew_session(conn, session_generation)
            return self._send_uncached(method, original, options, handlers, retry_version=retry_version,
                                       headers=headers, retry_session=False)
        error = response.get("error")
        if error is not None:
            exc = server_error_from_wire(error, method=method, invalid_params_means_not_found=dialect.stateless)
            if isinstance(exc, UnsupportedProtocolVersion) and dialect.stateless and retry_version:
                self._rediscover(exc)
                return self._send_uncached(method, original, options, handlers, retry_version=False,
                                           headers=headers)
            raise exc
        result = response.get("result")
        if not isinstance(result, dict):
            raise InvalidResult(f"{method}: the result is not an object")
        dialect.result_type(result)  # an unknown resultType is invalid
        return result

    def _live_connection(self) -> Connection:
        """The connection to use, restarting the server if it went away and
        the era allows it (stateless: no session is lost)."""
        conn = self._conn
        if conn is None:
            raise ConnectionClosed("the client is not connected")
        failure = conn.failure
        if failure is None or self._closed or not self.restart or not self._require_dialect().stateless:
            return conn
        if not isinstance(self._target, Target) or not conn.transport.restarts_server:
            return conn
        with self._restart_lock:
            if self._conn is not conn:  # another thread restarted it already
                return self._conn or conn
            log.warning("the server went away; starting it again: %s", failure)
            conn.close("restarting after the server went away")
            return self._new_connection()

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
                on_server_request=lambda message: self._answer_server_request(message, self.input_handlers),
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
        return multiround.run_handler(kind, handlers[kind], dict(params or {}), self._schemas, {})

    def _answer_server_request(self, message: dict[str, Any], handlers: Mapping[str, Any]) -> None:
        """Answer a server request on the calling thread. A handler that fails
        fails the call too (after the server is told), so nothing half-valid
        is ever sent."""
        conn = self._conn
        if conn is None:
            return
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
