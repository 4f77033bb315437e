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
from typing import TYPE_CHECKING, Any, Callable, Literal, overload

import attrs

from . import forking, negotiation
from .cache import ResultCache
from .connection import Connection, Drops
from .errors import MissingClientCapability
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
    check_option_names,
)
from .pipeline import Pipeline
from .protocol import inputs
from .status import Status, StatusChange
from .supervisor import Supervisor
from .transports import Target, resolve_target
from .types import (
    CallToolResult,
    CompleteResult,
    DiscoverResult,
    GetPromptResult,
    Implementation,
    InitializeResult,
    Page,
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

    `target` is a command list (`["python", "server.py"]`), a `Stdio(...)`,
    a Streamable HTTP URL (`"https://host/mcp"`, with any `HTTP()` option
    such as `headers=`, `auth=`, `verify=` as keyword arguments), an
    in-process server (`mcp_sync.testing.demo_server()`), or any `Target`.
    Returns once the version is settled: probing with `server/discover`
    (within `Timeouts.probe`) and falling back to `initialize` for older
    servers, on the same connection. `protocol=` pins one version or
    narrows the list.

    Every other keyword is an option of `ClientOptions`, which says what
    each means: the groups `timeouts=Timeouts(...)`, `limits=Limits(...)`,
    `reconnect=Reconnect(...)` and `keepalive=Keepalive(...)`, each grouped
    option also as a flat keyword (`timeout=`, `max_pages=`, ...; a flat
    keyword wins over its group), and `input_handlers`, `cache`, `tasks`,
    `client_info`, the OpenTelemetry providers. Guides: docs/input.md,
    docs/caching.md, docs/resilience.md, docs/tasks.md, docs/tracing.md.

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

class Client:
    """A blocking MCP client, safe to share between threads. Use `connect()`,
    or make one with `Client(target, options)` and then `open()` it.

    Example::

        client = mcp_sync.connect(mcp_sync.testing.demo_server())
        result = client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"sum": 5}
        client.close()

    Attributes:
        options: The `ClientOptions` the client was made with (see
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
        # A token provider may stand for an extension the client then declares
        # (the client credentials and enterprise-managed authorization ones).
        provided = getattr(getattr(target, "auth", None), "client_capabilities", None)
        if isinstance(provided, Mapping) and provided:
            options = attrs.evolve(options, client_capabilities=inputs.merge_capabilities(
                provided, options.client_capabilities or {}))
        self.options = options
        self._pipeline = Pipeline(target, options)
        self._supervisor: Supervisor = self._pipeline.supervisor
        self._calls = self._pipeline.calls
        self._skills: Skills | None = None  # made on first use: see `skills`
        self._skills_lock = threading.Lock()
        # Closes what the client holds if it is dropped unclosed; it holds
        # the supervisor, never the client, or the client could never be collected.
        self._finalizer = weakref.finalize(self, _release_unclosed, self._supervisor, repr(target))
        _live_clients.add(self)

    def open(self) -> Client:
        """Connect: start the connection and settle the protocol era (see
        `connect()`); returns the client. On failure the client is closed
        and the error raised.

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
        self._finalizer.detach()
        _live_clients.discard(self)
        self._supervisor.close()
        # The client tasks (a person's answers among them) go with the connection.
        self._pipeline.server_requests.reset()

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
        the client's notification thread (never the reader). With `methods`,
        only for those notification methods: the others are then not even
        queued. Returns a function that removes the callback.

        Example::

            stop = client.on_notification(lambda n: print(n.method, n.params))
            ...
            stop()
        """
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
        A callback that raises is logged; the others still run. Returns a
        function that removes the callback.

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
        from now on. A bounded buffer: `overflow` is "drop_oldest" or
        "drop_newest", and the stream's `dropped` counts what was lost.

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

        Raises the server's error (e.g. `MethodNotFound` from a server
        without subscriptions), `ConnectionClosed` when the stream ends
        before the acknowledgement, a `TransportError`, or `RequestTimeout`.

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
    # -- requests ---------------------------------------------------------------------------

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
        return self._pipeline.request(method, params, options)

    # -- telling the server --------------------------------------------------------

    def roots_changed(self) -> bool:
        """Tell the server that the roots your ``"roots"`` input handler
        answers have changed, so that it asks for them again.

        Initialize era: sends `notifications/roots/list_changed`, which the
        client may send only when it declared the capability at `connect()`
        with ``client_capabilities={"roots": {"listChanged": True}}``
        (`ValueError` otherwise, before anything is sent). Returns True
        when it went out; False when there was nothing to tell: the
        stateless era (2026-07-28) has no such notification, as the server
        asks for roots in each request that needs them, and a connection
        being re-established starts a session that asks afresh.

        Example::

            folders = ["file:///srv/project"]
            client = mcp_sync.connect(
                ["npx", "@modelcontextprotocol/server-filesystem"],
                input_handlers={"roots": lambda params: {"roots": [{"uri": u} for u in folders]}},
                client_capabilities={"roots": {"listChanged": True}})
            folders.append("file:///srv/data")
            client.roots_changed()
        """
        return self._pipeline.roots_changed()

    # -- typed requests (see `calls`) -----------------------------------------------

    def discover(self, **options: Unpack[RequestOptions]) -> DiscoverResult:
        """Ask the server for its versions, capabilities and identity (2026-07-28).

        Example::

            info = client.discover()
            print(info.supported_versions, info.server_info)
        """
        return self._pipeline.discover(options)

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
        tools: list[Tool] = self._calls.list_all("tools", options, self.options.limits.max_pages)
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

        `task=True` runs the call as a task and returns a `Task` handle
        (already completed when the server answered at once): with the
        tasks extension declared for this call (2026-07-28), or as the
        core protocol's task augmentation (2025-11-25 servers that offer
        it); `ExtensionNotDeclared` when the server offers no tasks.
        `wait=True` as well blocks until the task's result, `timeout`
        bounding the whole wait. A tool whose definition says it runs only
        as a task (`Tool.task_support == "required"`) is called so by
        itself, and waited for. See docs/tasks.md.

        Example::

            result = client.call_tool("countdown", {"steps": 3},
                                      progress=lambda p: print(p.progress, p.total))
            print(result.text)
        """
        if options:  # checked first, so that tool arguments given as keywords are told so
            check_option_names(options, tool=tool if isinstance(tool, str) else getattr(tool, "name", None))
        pipeline = self._pipeline
        try:
            catalog = pipeline.catalog
            if catalog.list_before_calling and type(tool) is str and catalog.get(tool) is None:
                from . import tasks as _tasks

                options = _tasks.learn_before_calling(pipeline, arguments, options)
            required = catalog.task_required  # tools that run only as tasks
            if task or wait or self.options.tasks or (required and type(tool) is str and tool in required):
                from . import tasks as _tasks

                return _tasks.call_tool(pipeline, tool, arguments, options, task=task, wait=wait)
            if type(tool) is not str:  # a definition: it may say it runs only as a task
                from . import tasks as _tasks

                if _tasks.runs_only_as_task(pipeline, tool):
                    return _tasks.call_tool(pipeline, tool, arguments, options, task=task, wait=wait)
            if not options and type(tool) is str and tool and pipeline.cache is None and pipeline.tracer is None:
                return pipeline.call_tool_plain(tool, arguments)
            return self._calls.call_tool(tool, arguments, options, max_pages=self.options.limits.max_pages,
                                         timeout=self.options.timeouts.request)
        except MissingClientCapability as exc:
            from . import tasks as _tasks

            better = _tasks.explained(exc)  # a tool that only runs as a task says so
            if better is exc:
                raise
            raise better from None

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

        return _tasks.get_task(self._pipeline, task_id, options)

    def list_tasks(self, **options: Unpack[RequestOptions]) -> list[Task]:
        """Every task the server keeps for this client (`tasks/list`,
        following `nextCursor`), as `Task` handles. Only 2025-11-25 servers
        that declare the `tasks.list` capability offer it;
        `ExtensionNotDeclared` otherwise, before anything is sent.

        Example::

            for task in client.list_tasks():
                print(task.id, task.status)
        """
        check_option_names(options)
        from . import tasks as _tasks

        return _tasks.list_tasks(self._pipeline, options)

    def list_resources(self, **options: Unpack[RequestOptions]) -> list[Resource]:
        """Every direct resource, following `nextCursor` to the end.

        Example::

            uris = [r.uri for r in client.list_resources()]
        """
        resources: list[Resource] = self._calls.list_all("resources", options, self.options.limits.max_pages)
        return resources

    def list_resource_templates(self, **options: Unpack[RequestOptions]) -> list[ResourceTemplate]:
        """Every resource template, following `nextCursor` to the end.

        Example::

            templates = [t.uri_template for t in client.list_resource_templates()]
        """
        templates: list[ResourceTemplate] = self._calls.list_all("resource_templates", options, self.options.limits.max_pages)
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
        prompts: list[Prompt] = self._calls.list_all("prompts", options, self.options.limits.max_pages)
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
