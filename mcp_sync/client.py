"""The public blocking API: `connect()` and `Client`, a façade.

What it owns: the public methods and their docstrings, the properties read
from the one immutable record the negotiation settled, `open()`/`close()`
and the context manager, and letting go of the parent's connection in a
fork child. What it must not do: hold logic the parts below own. Every
request goes through the request pipeline (`pipeline.py`: options, the
multi-round loop, cache, admission, the one retry loop); the connection's
life is the supervisor's (`supervisor.py`: start, reconnect, keepalive,
status, close); settling the era is the negotiation step's
(`negotiation.py`). Typed calls are built in `calls.py`; options are
`ClientOptions` (`options.py`).

A `Client` is shared freely between threads: every call registers its own
request in the engine and waits on its own inbox.

Lifecycle guards. Nothing the client starts refers to it: the supervisor's
threads and the engine's callbacks hold the pipeline and the supervisor,
so a client dropped unclosed is collected at once, and its finalizer
closes the supervisor (with a `ResourceWarning`). After `os.fork()` the
child's clients drop the parent's connection without IO, take fresh locks,
and reconnect on first use in the era already settled.
"""

from __future__ import annotations

import importlib
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Callable

import attrs

from . import forking, negotiation
from .cache import ResultCache
from .client_requests import ClientRequests
from .connection import Connection, Drops
from .metrics import Stats
from .notifications import Notification, NotificationStream
from .options import (
    DEFAULT_TIMEOUT,
    UNSET,
    ClientOptions,
    Keepalive,
    Limits,
    Reconnect,
    RequestOptions,
    Timeouts,
    _Unset,
)
from .pipeline import Pipeline
from .protocol import inputs, versions
from .status import Status, StatusChange
from .supervisor import Supervisor
from .transports import Target, resolve_target
from .types import Implementation, InitializeResult

if TYPE_CHECKING:
    from .skills import Skills
    from .subscriptions import Subscription

# The Tasks and Skills extensions and `listen()`'s subscriptions load on
# first use (imported in the methods that need them): `import mcp_sync`
# and a plain call never do, and together they are a tenth of the import.

__all__ = ["connect", "Client", "ClientOptions", "RequestOptions", "DEFAULT_TIMEOUT"]

#: The keywords of `ClientOptions`; `Client()` hands the others to the target (`HTTP()` options).
_OPTION_NAMES = frozenset(ClientOptions.__init__.__code__.co_varnames[
    1:1 + ClientOptions.__init__.__code__.co_kwonlyargcount])  # its keyword-only parameters (inspect costs ms to import)


def connect(
    target: Any,
    *,
    protocol: str | Iterable[str] | None = None,
    timeouts: Timeouts | None = None,
    limits: Limits | None = None,
    reconnect: bool | Reconnect = True,
    keepalive: float | Keepalive | None = None,
    restart: bool = True,
    client_info: Mapping[str, Any] | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    input_handlers: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
    cache: bool | ResultCache = False,
    stale_if_error: bool = False,
    era_cache: bool = True,
    tasks: bool = False,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    timeout: float | None | _Unset = UNSET,
    probe_timeout: float | _Unset = UNSET,
    max_total_timeout: float | _Unset = UNSET,
    handler_timeout: float | None | _Unset = UNSET,
    max_pages: int | _Unset = UNSET,
    max_input_rounds: int | _Unset = UNSET,
    max_server_requests: int | _Unset = UNSET,
    max_in_flight: int | None | _Unset = UNSET,
    max_queued: int | None | _Unset = UNSET,
    keepalive_failures: int | _Unset = UNSET,
    **http_options: Any,
) -> Client:
    """Connect to an MCP server and settle the protocol version: exactly
    `Client(target, ...).open()`.

    Returns once the version is settled: probing with `server/discover`
    (within `Timeouts.probe`) and falling back to `initialize` for older
    servers, on the same connection (a server that settled on the older
    handshake is remembered, and not probed again). Related options come
    in groups (`timeouts=Timeouts(...)`, `limits=Limits(...)`, ...), each
    grouped option also as a flat keyword, which wins over its group.
    `ClientOptions` holds them all once validated.

    Args:
        target: The server. A command line (`["python", "server.py"]`) or a
            `Stdio(...)` for a subprocess over stdio; a Streamable HTTP URL
            (`"https://host/mcp"`) or an `HTTP(...)`; an `SSE(url)` for the
            old HTTP+SSE transport; an in-process server
            (`mcp_sync.testing.demo_server()`); or any `Target`.
        protocol: The one version to use, the versions allowed, or None for
            every version in `SUPPORTED_VERSIONS`.
        timeouts: How long the client waits (`Timeouts`).
        limits: How much it does or holds at once (`Limits`).
        reconnect: How a failed connection is opened again (`Reconnect`);
            True for the default backoff, False to stay failed. See
            [Resilience](../resilience.md).
        keepalive: Checks of an idle connection: a `Keepalive`, or a number
            of idle seconds before a check; None for no checks.
        restart: False never opens a failed connection again, whatever
            `reconnect` says.
        client_info: The `clientInfo` to send (string `name` and `version`);
            None sends `mcp_sync` and its version.
        client_capabilities: Capabilities to declare, over those the input
            handlers imply.
        log_level: The level of log messages to ask of the server
            (`"debug"` to `"emergency"`); None leaves the server's default.
        input_handlers: Functions that answer the server's requests for
            input, by kind (`"form"`, `"url"`, `"sampling"`, `"roots"`).
            See [When the server asks back](../input.md).
        cache: True for a result cache of the client's own, a `ResultCache`
            to share one, False for none. See [Caching](../caching.md).
        stale_if_error: Let an expired cache entry answer when refetching
            it fails with a transport error.
        era_cache: Remember each older-handshake server on disk too, so
            other processes skip the probe (False: in this process only).
        tasks: Declare the tasks extension for every request, so the server
            may run any tool call as a task. See [Tasks](../tasks.md).
        tracer_provider: The OpenTelemetry `TracerProvider` for request
            spans (None: the global one). See [Tracing](../tracing.md).
        meter_provider: The OpenTelemetry `MeterProvider` for the duration
            histogram (None: the global one).
        timeout: `Timeouts.request`: seconds to wait for each answer
            (30); None waits for ever. A call's own `timeout=` wins.
        probe_timeout: `Timeouts.probe`: seconds to wait for the
            `server/discover` probe before falling back (10).
        max_total_timeout: `Timeouts.max_total`: the longest a call whose
            progress restarts its timeout may take (600).
        handler_timeout: `Timeouts.handler`: how long a server request that
            belongs to no call may take to answer (None: no limit).
        max_pages: `Limits.max_pages`: the most pages a `list_*()` call
            follows (1000).
        max_input_rounds: `Limits.max_input_rounds`: the most rounds of
            questions a call answers (10).
        max_server_requests: `Limits.max_server_requests`: server requests
            handled at once (16).
        max_in_flight: `Limits.max_in_flight`: calls in flight at once
            (None: no limit); more wait for a slot.
        max_queued: `Limits.max_queued`: calls waiting for a slot before new
            ones raise `Overloaded`.
        keepalive_failures: `Keepalive.failures`: failed checks in a row
            that count the connection as lost (3).
        **http_options: For a URL target, any `HTTP()` option: `headers`,
            `auth`, `verify`, `cert`, `proxy`, ... See
            [Streamable HTTP](../http.md).

    Returns:
        The connected `Client`; close it with `close()` or a `with` block.

    Raises:
        TypeError: an unknown option (the nearest one is named) or a value
            of the wrong type; a target that is none of the above.
        ValueError: a value out of range, or `protocol` allowing only
            2026-07-28 for an `SSE` target (nothing is started).
        ConnectError: the server could not be started or reached.
        ServerExited: the server process ended during start-up (its last
            stderr lines are in the message).
        VersionNegotiationError: the server speaks no version allowed.
        RequestTimeout: the server did not answer `initialize` in time.

    Example::

        with mcp_sync.connect(["python", "-m", "mcp_sync.testing.server"], timeout=10) as client:
            print([tool.name for tool in client.list_tools()])
            print(client.call_tool("echo", {"text": "hi"}).text)
    """
    return Client(
        target, protocol=protocol, timeouts=timeouts, limits=limits, reconnect=reconnect, keepalive=keepalive,
        restart=restart, client_info=client_info, client_capabilities=client_capabilities, log_level=log_level,
        input_handlers=input_handlers, cache=cache, stale_if_error=stale_if_error, era_cache=era_cache, tasks=tasks,
        tracer_provider=tracer_provider, meter_provider=meter_provider, timeout=timeout,
        probe_timeout=probe_timeout, max_total_timeout=max_total_timeout, handler_timeout=handler_timeout,
        max_pages=max_pages, max_input_rounds=max_input_rounds, max_server_requests=max_server_requests,
        max_in_flight=max_in_flight, max_queued=max_queued, keepalive_failures=keepalive_failures,
        **http_options,
    ).open()


def forget_eras(target: Any = None) -> None:
    """Forget the protocol era remembered for a server (`target`, as
    `connect()` takes it), or for every server when `target` is None.

    `connect()` remembers each server that settled on the initialize era
    (keyed by its stdio command line, arguments, `cwd` and environment, or
    its HTTP origin and path), in the process and on disk (unless
    `era_cache=False`), and connects to it again without the
    `server/discover` probe, which some such servers never answer. A server
    upgraded in place is noticed by itself (its `initialize` fails and the
    era is settled again); this is for tests and for forcing a new probe.
    It forgets in this process and on disk.

    Args:
        target: A server as `connect()` takes it, or None for every server.

    Example::

        mcp_sync.forget_eras(["python", "server.py"])
        mcp_sync.forget_eras()  # every server
    """
    if target is None:
        negotiation.forget()
        return
    resolved = resolve_target(target)
    if isinstance(resolved, Target):
        negotiation.forget(resolved.server_key())

class Client(ClientRequests):
    """A blocking MCP client, safe to share between threads. Use `connect()`,
    or make one with `Client(target, options)` and then `open()` it.

    Example::

        client = mcp_sync.connect(mcp_sync.testing.demo_server())
        result = client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"sum": 5}
        client.close()

    Attributes:
        options (ClientOptions): The `ClientOptions` the client was made with (see
            `connect()` for what each means); read them, set them through
            `connect()` or `ClientOptions`.
    """

    def __init__(self, target: Any, options: ClientOptions | None = None, **keywords: Any) -> None:
        """`options`, or the keyword arguments of `connect()` (over `options`
        when both are given), validated once as a `ClientOptions`; for a URL
        `target`, the `HTTP()` options too. `target` is anything `connect()`
        takes.

        A client made here is not connected yet: `open()` connects it
        (`connect()` does both). A `close()` from another thread ends an
        `open()` in progress at once.

        Example::

            client = mcp_sync.Client(mcp_sync.testing.demo_server(), timeout=10)
            with client.open():
                print(client.protocol_version)
        """
        http_options = {name: keywords.pop(name) for name in list(keywords) if name not in _OPTION_NAMES}
        target = resolve_target(target, http_options, client_options=_OPTION_NAMES)
        if options is None:
            options = ClientOptions(**keywords)
        elif not isinstance(options, ClientOptions):
            raise TypeError("options must be a ClientOptions")
        elif keywords:
            options = attrs.evolve(options, **keywords)
        if getattr(target, "kind", None) == "sse" and all(
                versions.dialect_for(version).stateless for version in options.allowed_versions):
            # Known before anything is sent: an argument error, not the server's.
            raise ValueError("the HTTP+SSE transport (SSE(url)) carries only initialize-era protocol versions "
                             "(2025-11-25 and older), and protocol= allows none: allow one, or connect to the "
                             "server's Streamable HTTP URL for 2026-07-28")
        # A token provider may stand for an extension the client then declares
        # (the client credentials and enterprise-managed authorization ones).
        provided = getattr(getattr(target, "auth", None), "client_capabilities", None)
        if isinstance(provided, Mapping) and provided:
            options = attrs.evolve(options, client_capabilities=inputs.merge_capabilities(
                provided, options.client_capabilities or {}))
        self.options = options
        self._pipeline = Pipeline(target, options)
        self._supervisor: Supervisor = self._pipeline.supervisor
        self._skills: Skills | None = None  # made on first use: see `skills`
        self._skills_lock = threading.Lock()
        # Closes what the client holds if it is dropped unclosed; it holds
        # the supervisor, never the client, or the client could never be collected.
        self._finalizer = weakref.finalize(self, _release_unclosed, self._supervisor, repr(target))
        _live_clients.add(self)

    def open(self) -> Client:
        """Connect: start the connection and settle the protocol era (see
        `connect()`). On failure the client is closed and the error raised.

        Returns:
            The client itself, so that `Client(...).open()` and
            `with client.open():` read naturally.

        Raises:
            ConnectError: the server could not be started or reached.
            ServerExited: the server process ended during start-up.
            VersionNegotiationError: the server speaks no version allowed.
            RequestTimeout: the server did not answer in time.

        Example::

            client = mcp_sync.Client(["python", "-m", "mcp_sync.testing.server"]).open()
        """
        try:
            self._supervisor.open()
        except BaseException:
            self.close()
            raise
        return self

    @property
    def _conn(self) -> Connection | None:
        """The live connection (None before `open()`), for tests and debugging."""
        return self._supervisor.conn

    @property
    def cache(self) -> ResultCache | None:
        """The `ResultCache` in use, or None when caching is off."""
        return self._pipeline.cache

    def close(self) -> None:
        """Close the connection: pending calls fail at once with
        `ConnectionClosed`, every thread the client started ends, and a stdio
        server process is stopped and reaped. Idempotent, from any thread."""
        forking.check()  # while still registered: a child forked from C resets it first
        _live_clients.discard(self)
        self._supervisor.close()
        # The client tasks (a person's answers among them) go with the connection.
        self._pipeline.server_requests.reset()
        # Last: a close() an interrupt cut short is finished by the finalizer.
        self._finalizer.detach()

    def _after_fork(self) -> None:
        """In the child after `os.fork()`: let go of everything the parent's
        threads hold or use, with no IO, and reconnect on first use."""
        self._skills_lock = threading.Lock()
        self._skills = None  # made afresh on first use, with locks of the child's own
        self._pipeline.after_fork()

    # -- notifications that belong to no call ----------------------------------------

    def on_notification(self, callback: Callable[[Notification], Any],
                        methods: Iterable[str] | None = None) -> Callable[[], None]:
        """Call `callback(notification)` for every server notification that
        belongs to no call (list changes, resource updates, ...), in order, on
        the client's notification thread (never the reader).

        Args:
            callback: Called with each `Notification`; one that raises is
                logged, and the others still run.
            methods: Only these notification methods (the others are then
                not even queued); None for all.

        Returns:
            A function that removes the callback.

        Example::

            stop = client.on_notification(lambda n: print(n.method, n.params))
            ...
            stop()
        """
        if isinstance(methods, str):  # one method (a set of its characters otherwise)
            methods = (methods,)
        return self._supervisor.dispatcher.add_callback(callback, methods=None if methods is None else set(methods))

    @property
    def status(self) -> Status:
        """Where the connection stands: "connecting", "ready",
        "reconnecting", "failed" (reconnecting gave up) or "closed". A `str`
        enum; reading it is free, from any thread.

        Example::

            healthy = client.status == "ready"
        """
        return self._supervisor.status.status

    def on_status(self, callback: Callable[[StatusChange], Any]) -> Callable[[], None]:
        """Call `callback(change)` for every status change from now on, in
        order, on the client's notification thread (never the reader);
        `change.old`, `change.new`, `change.cause` (the error, or None).
        A callback that raises is logged; the others still run.

        Args:
            callback: Called with each `StatusChange`.

        Returns:
            A function that removes the callback.

        Example::

            stop = client.on_status(lambda c: print(c.old, "->", c.new, c.cause))
        """
        return self._supervisor.status.on_status(callback)

    def stats(self) -> Stats:
        """A snapshot of what the client counted since `connect()`: requests
        by method and outcome with latency percentiles, timeouts,
        reconnects, shed calls, dropped notifications (see `Stats`).

        Example::

            stats = client.stats()
            print(stats.requests_total, stats.requests["tools/call"].p99)
        """
        stats = self._pipeline.metrics.snapshot(self.dropped.as_dict())
        admission = self._supervisor.admission
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
        return self._supervisor.dispatcher.drops

    def notifications(self, max_buffer: int = 100, overflow: str = "drop_oldest") -> NotificationStream:
        """An iterator over the server notifications that belong to no call,
        from now on, in a bounded buffer.

        Args:
            max_buffer: The most notifications held for you.
            overflow: What a full buffer drops: "drop_oldest" or
                "drop_newest"; the stream's `dropped` counts them.

        Returns:
            The stream: iterate it, or `next(timeout=...)`; close it (or
            use `with`) when done.

        Example::

            with client.notifications() as stream:
                note = stream.next(timeout=5)
        """
        return self._supervisor.dispatcher.open_stream(max_buffer, overflow)

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

        Args:
            tools_list_changed: Be told when the tool list changes.
            prompts_list_changed: Be told when the prompt list changes.
            resources_list_changed: Be told when the resource list changes.
            resource_subscriptions: URIs of resources to be told about
                when they change.
            extra: Filter keys of extensions, sent as they are.
            timeout: Seconds to wait for the acknowledgement (None: the
                client's timeout).
            max_buffer: The most events held for you.
            overflow: What a full buffer drops: "drop_oldest" or "drop_newest".

        Returns:
            The open `Subscription`; close it (or use `with`) when done.

        Raises:
            TypeError: a `*_list_changed` flag is not True or False, or a
                resource URI is not a string (nothing is sent).
            ValueError: a bad `timeout`, `max_buffer` or `overflow`.
            MethodNotFound: the server has no subscriptions.
            ConnectionClosed: the stream ended before the acknowledgement.
            RequestTimeout: no acknowledgement within `timeout`.
            TransportError: the connection failed.

        Example::

            with client.listen(tools_list_changed=True) as sub:
                event = sub.next(timeout=60)
        """
        return self._pipeline.listen(
            tools_list_changed=tools_list_changed, prompts_list_changed=prompts_list_changed,
            resources_list_changed=resources_list_changed, resource_subscriptions=resource_subscriptions,
            extra=extra, timeout=timeout, max_buffer=max_buffer, overflow=overflow)

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
        settled = self._supervisor.settled
        return (settled.target if settled is not None else self._supervisor.target).kind

    @property
    def protocol_version(self) -> str:
        """The protocol version in use, e.g. ``"2026-07-28"``."""
        return self._pipeline.dialect.version

    @property
    def stateless(self) -> bool:
        """True for the 2026-07-28 era; False for an initialize-era session."""
        return self._pipeline.dialect.stateless

    @property
    def session(self) -> InitializeResult | None:
        """What `initialize` returned (initialize era only; else None)."""
        settled = self._supervisor.settled
        return settled.session if settled is not None else None

    @property
    def session_id(self) -> str | None:
        """The HTTP session id the server gave (`Mcp-Session-Id`, initialize
        era over Streamable HTTP), or None: no session, or another transport.

        Example::

            with mcp_sync.connect(url, protocol="2025-11-25") as client:
                log.info("MCP session %s", client.session_id)
        """
        conn = self._supervisor.conn
        return None if conn is None else getattr(conn.transport, "session_id", None)

    @property
    def server_info(self) -> Implementation | None:
        """The server's name and version, when it has said them."""
        settled = self._supervisor.settled
        return settled.server_info if settled is not None else None

    @property
    def server_capabilities(self) -> dict[str, Any] | None:
        """The server's capabilities object as it sent it (from `initialize`
        or `server/discover`), or None before the server has said.

        Example::

            if "resources" in (client.server_capabilities or {}):
                print(client.list_resources())
        """
        return self._pipeline.server_capabilities

    @property
    def instructions(self) -> str | None:
        """How to use the server, in prose, as it said (for a model's system
        prompt), or None when it gave none."""
        settled = self._supervisor.settled
        return settled.instructions if settled is not None else None

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

            with self._skills_lock:  # one object per client, whichever thread asks first
                if self._skills is None:
                    self._skills = Skills(self._pipeline)
                skills = self._skills
        return skills
    def __repr__(self) -> str:
        """The transport, the server's name, the status and the revision:
        ``<mcp_sync.Client stdio 'mcp-sync-demo' ready 2026-07-28>``. Never
        names a URL, a command line or a credential (reprs end up in logs)."""
        supervisor = self._supervisor
        settled = supervisor.settled
        target = settled.target if settled is not None else supervisor.target
        parts = [str(getattr(target, "kind", None) or type(target).__name__)]
        info = settled.server_info if settled is not None else None
        if info is not None and isinstance(info.name, str) and info.name:
            parts.append(repr(info.name[:40]))
        parts.append(supervisor.status.status.value)
        if settled is not None:
            parts.append(settled.dialect.version)
        return f"<mcp_sync.Client {' '.join(parts)}>"


def _release_unclosed(supervisor: Supervisor, description: str) -> None:
    """The finalizer of a client dropped without `close()`.

    It may run inside garbage collection on any thread, including one of
    the connection's own while it holds an engine lock; so the closing (which
    takes those locks and joins those threads) runs on a thread of its own."""
    warnings.warn(f"unclosed mcp_sync.Client {description}", ResourceWarning, stacklevel=2)
    try:
        threading.Thread(target=supervisor.close, name="mcp-sync-finalizer").start()
    except RuntimeError:  # at interpreter shutdown no thread can start
        supervisor.close()


#: Every open client in this process, for `_after_fork_in_child`.
_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


@forking.in_child
def _after_fork_in_child() -> None:
    for client in forking.members(_live_clients):
        if not client._supervisor.closed:
            client._after_fork()


#: What the package imports on first use rather than at `import mcp_sync`
#: (its own modules, whatever their names, and these).
_IMPORTED_LATE = frozenset((
    "subprocess", "signal", "shlex", "random", "base64", "binascii", "datetime", "hashlib", "requests", "urllib3",
))


@forking.before_fork
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
