"""The request pipeline: the one path every request takes.

What it owns: turning a caller's request into wire messages and its result,
as a chain of small steps that hand one frozen value along (a `Call`, then
its `Plan`): the option checks, the multi round-trip loop (`multiround`),
the tracing hook, the result cache, admission/metrics/keepalive, the one
retry loop, and the engine. It builds each request's `_meta` from the
settled dialect, declares extensions per request (`extensions=`: in
`_meta` in the stateless era; checked against what `initialize` declared
in the other), and answers the server's requests on the calling thread.
It offers extensions, subscriptions and tracing a narrow interface,
`Requester`, instead of the client.

What it must not know: the client (nothing here refers to it), how the
connection lives (it asks the supervisor for a live connection within the
call's deadline), or how a transport does IO.

Threads. Every method runs on the caller's thread; nothing here blocks a
reader. Shared state: the tool catalog (its own lock), the `_meta` cache (a
tuple swapped whole), the metrics (lock-free intake), the admission gate.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol, cast

from . import forking, multiround, tracing
from ._version import __version__
from .admission import Admission, Slot
from .cache import ResultCache, cache_key, client_identity, server_identity
from .calls import HeadersFn, ToolCatalog, TypedCalls
from .connection import Connection, State, naming_the_calls_timeout, new_id_counter
from .errors import (
    ConnectionClosed,
    HeaderMismatch,
    InputHandlerError,
    InvalidResult,
    Overloaded,
    RequestTimeout,
    ServerError,
    SessionExpired,
    UnsupportedMethod,
    UnsupportedProtocolVersion,
    UrlElicitationRequired,
    copy_error,
    server_error_from_wire,
)
from .metrics import Metrics
from .negotiation import DECLARATION, TASKS_EXTENSION, Identity, Settled, Terms, offers_core_tasks
from .options import ClientOptions, RequestOptions, Timeouts, check_input_handlers, check_positive_int, check_timeout
from .plain_lane import MENDABLE, Attempt, PlainLane, adopts, calling
from .protocol import inputs
from .protocol.meta import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, merge_meta, validate_trace_context
from .protocol.methods import SAFE_TO_RETRY
from .protocol.schemas import SchemaCache
from .protocol.versions import INPUT_KIND_SINCE, Dialect
from .server_requests import ServerLog, ServerRequests
from .supervisor import Policy, Supervisor, bounded
from .transports.base import Target, Transport
from .types import CallToolResult, DiscoverResult, Progress, Tool
from .waiting import deadline_in, remaining

if TYPE_CHECKING:
    from .notifications import Notification
    from .subscriptions import Subscription

log = logging.getLogger("mcp_sync.client")

#: The options of a call made with none (the fast lane's): read only.
NO_OPTIONS = cast("RequestOptions", {})

#: The extensions the client declares itself at `initialize` (see `negotiation`).
_SELF_DECLARED = frozenset(DECLARATION["extensions"])
#: What to do when an extension was not declared at `initialize`, by extension.
_UNDECLARED_HINTS = {TASKS_EXTENSION: "pass tasks=True to connect() to use tasks"}


class Call(NamedTuple):
    """One round of a request as the retry loop sends it: what the caller
    asked, with the options and handlers of this call. `headers()` gives
    each attempt's transport headers (they may change when
    `refresh_headers()` learned the tool again). A tuple: every plain
    `call_tool` makes one, in one C call (`_new_call`)."""

    method: str
    params: Mapping[str, Any] | None
    options: RequestOptions
    handlers: Mapping[str, Any]
    headers: Callable[[], Mapping[str, str] | None] | None = None
    refresh_headers: Callable[[], None] | None = None
    extensions: Mapping[str, Any] | None = None


# `Call(...)` and `Plan(...)` without their generated `__new__` (a Python
# frame): the plain call's, every field given, defaults included.
_new_call = _new_plan = tuple.__new__


class Plan(NamedTuple):
    """How the retry loop sends one `Call`: its options read and checked once."""

    timeout: float | None
    deadline: float | None
    max_total: float | None
    wants_progress: bool = False
    on_progress: Callable[[dict[str, Any]], None] | None = None
    reset_on_progress: bool = False
    #: `_meta` layers over the protocol's: (params' `_meta`, `meta=`, trace
    #: context), or None when the call has none.
    layers: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, Mapping[str, str] | None] | None = None


class Requester(Protocol):
    """The pipeline as extensions (tasks, skills), subscriptions and
    tracing see it: the settled state and one way to send."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def settled(self) -> Settled | None: ...

    @property
    def server_capabilities(self) -> dict[str, Any] | None: ...

    @property
    def options(self) -> ClientOptions: ...

    @property
    def input_handlers(self) -> Mapping[str, Any]: ...

    @property
    def cache_server(self) -> str: ...

    @property
    def cache(self) -> ResultCache | None: ...

    @property
    def schemas(self) -> SchemaCache: ...

    @property
    def calls(self) -> TypedCalls: ...

    def request(self, method: str, params: Mapping[str, Any] | None, options: RequestOptions, /, *,
                headers: HeadersFn | None = None, refresh_headers: Callable[[], None] | None = None,
                extensions: Mapping[str, Any] | None = None) -> dict[str, Any]: ...

    def discover(self, options: RequestOptions) -> DiscoverResult: ...

    def listen(self, **keywords: Any) -> Subscription: ...

    def on_closed(self, callback: Callable[[], Any]) -> Callable[[], None]: ...

    def on_notification(self, callback: Callable[[Notification], Any],
                        methods: Iterable[str]) -> Callable[[], None]: ...


class Pipeline:
    """The request path of one client (see the module docstring)."""

    def __init__(self, target: Target | Transport, options: ClientOptions) -> None:
        self.options = options
        self.input_handlers = check_input_handlers(options.input_handlers)
        self.client_info: dict[str, Any] = dict(options.client_info or {"name": "mcp_sync", "version": __version__})
        capabilities = dict(options.client_capabilities or {})
        if options.tasks:  # declared like any capability: per request, or at initialize
            capabilities = inputs.merge_capabilities(capabilities, {"extensions": {TASKS_EXTENSION: {}}})
        self.client_capabilities = capabilities
        self.catalog = ToolCatalog()
        self.calls = TypedCalls(self.request, self.catalog)
        self.metrics = Metrics()
        cache = options.cache
        self.cache: ResultCache | None = cache if isinstance(cache, ResultCache) else (ResultCache() if cache else None)
        self.cache_server = server_identity(target) or client_identity()
        self._meta_cache: tuple[tuple[Any, ...], Mapping[str, Any]] | None = None
        self._lane: PlainLane | None = None  # swapped whole, like the `_meta` cache
        ids: Iterator[int] = new_id_counter()
        # None unless OpenTelemetry is installed and set up: then the only
        # cost of tracing is the test of this attribute in `request`.
        self.tracer = tracing.for_client(target.kind, getattr(target, "url", None), self.session_attributes,
                                         options.tracer_provider, options.meter_provider)
        if self.tracer is not None:
            ids = self.tracer.noting_ids(ids)
        #: Whether a call with no options may take `call_tool_plain`: no
        #: cache, no tracing hook and no tasks by default, all fixed here.
        self.plain_calls = self.cache is None and self.tracer is None and not options.tasks
        self.server_requests = ServerRequests(self.input_handlers, self.catalog.schemas)
        self.server_log = ServerLog()  # named once the server has said its name
        timeouts, limits = options.timeouts, options.limits
        self.timeouts, self.limits = timeouts, limits
        policy = Policy(restart=options.restart, reconnect=options.reconnect if options.restart else None,
                        keepalive=options.keepalive, timeout=timeouts.request, probe_timeout=timeouts.probe,
                        max_server_requests=limits.max_server_requests, handler_timeout=timeouts.handler)
        terms = Terms(allowed=options.allowed_versions, probe_timeout=timeouts.probe, timeout=timeouts.request,
                      identity=self.identity, on_log=self.server_log, answerer=self.server_requests.answerer,
                      traced=self.traced, on_declared=self.on_declared, persist=options.era_cache)
        self.supervisor = Supervisor(target, policy, terms, self, ids, self.metrics,
                                     Admission(limits.max_in_flight, limits.max_queued), self._forget_server)

    # -- the settled state, as extensions read it ---------------------------------------------

    @property
    def dialect(self) -> Dialect:
        """The settled dialect; `ConnectionClosed` before the client connected."""
        return self.supervisor.require_settled().dialect

    @property
    def settled(self) -> Settled | None:
        return self.supervisor.settled

    @property
    def server_capabilities(self) -> dict[str, Any] | None:
        settled = self.supervisor.settled
        return settled.capabilities if settled is not None else None

    @property
    def schemas(self) -> SchemaCache:
        return self.catalog.schemas

    @property
    def default_timeout(self) -> float | None:
        return self.timeouts.request

    def capabilities(self, handlers: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the client declares: what its handlers imply, merged with
        `client_capabilities` (which win)."""
        kinds = handlers if handlers is not None else self.input_handlers
        return inputs.merge_capabilities(inputs.capabilities_for(kinds), self.client_capabilities)

    def identity(self) -> Identity:
        return Identity(self.capabilities(), self.client_info, self.options.log_level)

    def request_meta(self, extensions: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        """The `_meta` of a request with the client's own handlers, declaring `extensions` too."""
        capabilities = self.capabilities()
        if extensions:
            capabilities = inputs.merge_capabilities(capabilities, {"extensions": dict(extensions)})
        return self.dialect.request_meta(capabilities, self.client_info, self.options.log_level)

    def _meta_for(self, dialect: Dialect, handlers: Mapping[str, Any]) -> Mapping[str, Any]:
        """The `_meta` every request of `dialect` carries, for a call with
        `handlers`. Read only: shared by every request made with the
        client's own handlers (most calls), built again when the dialect
        changed (a re-discovery); per-call handlers get their own."""
        made_of = (dialect, handlers)
        cached = self._meta_cache
        if cached is not None and cached[0] == made_of:  # each item is itself, the usual case: no deep compare
            return cached[1]
        meta = dialect.request_meta(self.capabilities(handlers), self.client_info, self.options.log_level)
        if handlers is self.input_handlers:
            self._meta_cache = (made_of, meta)  # one tuple, swapped whole: no lock needed
        return meta

    def session_attributes(self) -> tuple[str | None, str | None]:
        """(protocol version, HTTP session id), for the tracing hook."""
        settled, conn = self.supervisor.settled, self.supervisor.conn
        return (settled.dialect.version if settled is not None else None,
                getattr(conn.transport, "session_id", None) if conn is not None else None)

    # -- the supervisor's hooks ---------------------------------------------------------------

    def engine_callbacks(self) -> dict[str, Any]:
        cache, server, dispatcher = self.cache, self.cache_server, self.supervisor.dispatcher

        def on_notification(message: dict[str, Any]) -> None:
            # On the thread that read it: only hand it on, never block. The
            # cache forgets what changed at once, before anyone can be told.
            if cache is not None:
                cache.invalidate(server, message)
            dispatcher.put(message)

        return {"on_server_request": self.server_requests.unrelated, "on_notification": on_notification,
                "on_log": self.server_log, "answers_at_once": self.server_requests.answers_at_once,
                "on_cancelled": functools.partial(self.metrics.count, "cancellations")}  # where each is made

    def on_declared(self, capabilities: Mapping[str, Any], version: str) -> None:
        """What `initialize` declared, and the version the server settled
        on, told before `notifications/initialized` goes out: the server may
        ask for roots (say) right after it, and is answered in its revision's
        shapes (`ServerRequests.settle`)."""
        self.server_requests.settle(capabilities, version)

    def after_connect(self, conn: Connection, settled: Settled, deadline: float | None) -> None:
        """What a new connection needs once callers can use it: the rules
        that depend on its transport and revision, and the log level asked
        of a new initialize-era session."""
        self.catalog.mirrors_headers = conn.transport.mirrors_headers
        self.server_log.name = settled.server_info.name if settled.server_info is not None else None
        self.catalog.structured_output = settled.dialect.structured_output
        self.catalog.list_before_calling = offers_core_tasks(settled.dialect, settled.capabilities)
        level = self.options.log_level
        if settled.session is not None and level is not None:
            try:
                self.request("logging/setLevel", {"level": level},
                             {"timeout": bounded(self.timeouts.request, deadline)})
            except ServerError as exc:
                log.warning("the server refused logging/setLevel: %s", exc)

    def keepalive_probe(self, timeout: float) -> None:
        if self.dialect.stateless:
            self.discover({"timeout": timeout, "bypass_cache": True})  # a probe must reach the server
        else:
            self.request("ping", None, {"timeout": timeout})

    def traced(self, method: str, version: str) -> AbstractContextManager[Any]:
        return tracing.handshake(self.tracer, method, version)

    def forget_cached(self, notifications: Sequence[dict[str, Any]]) -> None:
        """Notifications on a subscription: the cache forgets what changed."""
        cache = self.cache
        if cache is not None:
            for notification in notifications:
                cache.invalidate(self.cache_server, notification)

    def _forget_server(self) -> None:
        if self.cache is not None:
            self.cache.clear_server(self.cache_server)

    def after_fork(self) -> None:
        self.catalog.after_fork()
        # The catalog's schema cache was made afresh (a parent thread may
        # have held the old one's lock at the fork): answers use the new one.
        self.server_requests.schemas = self.catalog.schemas
        # And a fresh table of client tasks: a handler thread of the parent
        # may have held the old one's lock at the fork.
        self.server_requests.reset()
        self.metrics.after_fork()
        self.supervisor.after_fork()

    # -- step 1: options and the multi-round loop ------------------------------------------------

    def discover(self, options: RequestOptions) -> DiscoverResult:
        result = self.calls.discover(options)
        self.supervisor.update(discovered=result)
        return result

    def roots_changed(self) -> bool:
        """`Client.roots_changed()`: see there."""
        forking.check()
        if "roots" not in self.input_handlers:
            raise ValueError('roots_changed() needs a "roots" input handler: connect(..., input_handlers='
                             '{"roots": ...}) answers the roots the server asks for')
        settled = self.supervisor.require_settled()
        if settled.dialect.stateless:
            return False
        declared = settled.declared.get("roots")
        if not (isinstance(declared, Mapping) and declared.get("listChanged") is True):
            raise ValueError('this connection did not declare roots.listChanged at connect(), so the server '
                             'expects no notification: pass client_capabilities={"roots": {"listChanged": True}} '
                             'to connect()')
        return self.supervisor.notify("notifications/roots/list_changed")

    def on_notification(self, callback: Callable[[Notification], Any], methods: Iterable[str]) -> Callable[[], None]:
        """`callback` for each of these notifications that belong to no
        call, on the notification thread; returns the function that stops it."""
        return self.supervisor.dispatcher.add_callback(callback, methods=set(methods))

    def on_closed(self, callback: Callable[[], Any]) -> Callable[[], None]:
        """`StatusMonitor.on_end`: `callback()` once closed or given up."""
        return self.supervisor.status.on_end(callback)

    def listen(self, **keywords: Any) -> Subscription:
        from .subscriptions import listen

        forking.check()
        return listen(self, **keywords)

    def request(self, method: str, original: Mapping[str, Any] | None, options: RequestOptions, /, *,
                headers: HeadersFn | None = None, refresh_headers: Callable[[], None] | None = None,
                extensions: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its complete result, answering the
        server's requests for input on the way (see `multiround`).
        `extensions` are declared for this request: in its `_meta` in the
        stateless era; in the initialize era they must have been declared
        at `initialize` (ValueError before anything is sent)."""
        # The pid check comes first: before the cache (whose in-flight fetches
        # may be the parent's) and the admission slot. `send` is reached only
        # through here and `call_tool_plain`, which both make it.
        forking.check()
        extra_handlers = check_input_handlers(options.get("input_handlers"))
        if extra_handlers or extensions:
            _check_declarable(self.supervisor.settled, extra_handlers, extensions)
        # Read-only below: the client's own mapping serves when nothing is added.
        handlers = {**self.input_handlers, **extra_handlers} if extra_handlers else self.input_handlers
        max_rounds = options.get("max_input_rounds", self.limits.max_input_rounds)
        check_positive_int("max_input_rounds", max_rounds)
        responses = options.get("input_responses")
        if responses is not None and not isinstance(responses, Mapping):
            raise TypeError("input_responses must be a mapping of input request keys to answers")
        state = options.get("request_state")
        if state is not None and not isinstance(state, str):
            raise TypeError("request_state must be the string the server sent")
        if method not in multiround.METHODS and (responses is not None or state is not None):
            raise ValueError(f"input_responses and request_state only go with {', '.join(sorted(multiround.METHODS))}")
        if extensions and not self.dialect.stateless:
            extensions = None  # declared at initialize (checked above)

        answer_input = bool(options.get("answer_input", True))
        started = time.monotonic()
        max_total = options.get("max_total_timeout", self.timeouts.max_total)

        def call(params: Mapping[str, Any] | None, limit: float | None = None) -> Call:
            return Call(method, params, options if limit is None else _capped(options, limit, self.timeouts.request),
                        handlers, headers, refresh_headers, extensions)

        def send_once(one: Call) -> dict[str, Any]:
            try:
                return self.send_once(one)
            except UrlElicitationRequired as refused:
                return multiround.retry_after_url_elicitations(
                    refused, lambda: self.send_once(one), handlers, self.catalog.schemas, answer_input=answer_input,
                    started=started, max_total_timeout=max_total)

        def rounds(send_once: Callable[[Call], dict[str, Any]]) -> dict[str, Any]:
            if responses is None and state is None and method not in multiround.METHODS:
                return send_once(call(original))
            return multiround.answer_rounds(
                lambda params, limit=None: send_once(call(params, limit)),
                method, dict(original or {}), handlers=handlers,
                answer_input=answer_input, max_rounds=max_rounds,
                input_responses=responses, request_state=state, schemas=self.catalog.schemas,
                max_total_timeout=max_total,
            )

        tracer = self.tracer
        if tracer is not None:  # the tracing hook (see `tracing`): one span per request
            return tracer.request(method, original, rounds, send_once)
        return rounds(send_once)

    def call_tool_plain(self, name: str, arguments: Mapping[str, Any] | None) -> CallToolResult:
        """`call_tool`'s shortcut: a tool called by name with no options, on
        a client with no cache and no tracer, which is most calls. `send()`
        sends it, its first attempt made by the connection's lane (see
        `plain_lane`), and an `input_required` answer goes on to the
        multi-round loop; only the steps that would find nothing to do
        (option checks, the cache, the tracing hook) are skipped. What it
        sends and returns is what the general path sends and returns for
        the same call (tests/test_fast_lane.py, tests/test_plain_lane.py)."""
        # `options.check_tool_arguments`, inlined: a plain call's Python calls are budgeted.
        if arguments is not None and type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise TypeError("arguments must be a mapping")
        if os.getpid() != forking.pid:  # `forking.check()`'s test, without the call when nothing forked
            forking.check()
        catalog = self.catalog
        definition = catalog.tools.get(name)
        params: dict[str, Any] = {"name": name} if arguments is None else {"name": name, "arguments": dict(arguments)}
        known: list[Tool | None] | None = None
        lane = None
        if catalog.mirrors_headers:  # Streamable HTTP: the `Mcp-Param-*` headers, as the general path makes them
            known, headers, refresh = self.calls.header_hooks(name, definition, arguments, self.timeouts.request,
                                                               self.limits.max_pages)
            call = Call("tools/call", params, NO_OPTIONS, self.input_handlers, headers, refresh)
        else:
            call = _new_call(Call, ("tools/call", params, NO_OPTIONS, self.input_handlers, None, None, None))
            lane, supervisor = self._lane, self.supervisor
            if lane is None or lane.conn is not supervisor.conn or lane.settled is not supervisor.settled:
                lane = self._new_lane()  # (the lane checks again once its call holds a slot)
        started = time.monotonic()
        try:
            raw = self.send(call, lane)
        except UrlElicitationRequired as refused:
            raw = multiround.retry_after_url_elicitations(refused, lambda: self.send(call), call.handlers,
                                                          catalog.schemas, answer_input=True, started=started,
                                                          max_total_timeout=self.timeouts.max_total)
        kind = raw.get("resultType")
        if kind == "input_required":
            raw = multiround.answer_rounds(
                lambda params, limit=None: self.send(call._replace(
                    params=params, options=_capped(call.options, limit, self.timeouts.request))),
                call.method, dict(call.params or {}),
                handlers=call.handlers, answer_input=True, max_rounds=self.limits.max_input_rounds,
                input_responses=None, request_state=None, schemas=catalog.schemas,
                max_total_timeout=self.timeouts.max_total, started=started, first=raw)
            kind = raw.get("resultType")
        if kind == "task":
            raise InvalidResult("tools/call: the server answered with a task, which the call did not ask for")
        # The call's deadline bounds its output check (see SchemaCache.errors).
        if known is not None:
            definition = known[0]
        if definition is None or definition.output_schema is None:
            return CallToolResult.from_wire(raw)  # all `finish_call` would do: nothing to check
        timeout = self.timeouts.request
        return catalog.finish_call(name, definition, raw, deadline=None if timeout is None else started + timeout)

    def _new_lane(self) -> PlainLane | None:
        """A lane for the connection as it is now (see `plain_lane`), or
        None when a plain call must take the general path to it: no
        connection yet or not open, a client closed or just forked, a
        version without `tools/call`."""
        supervisor = self.supervisor
        settled, conn = supervisor.settled, supervisor.conn
        if (settled is None or conn is None or conn.state is not State.OPEN or supervisor.closed
                or supervisor.reopen_after_fork or "tools/call" in settled.dialect.undefined):
            return None
        handlers = self.input_handlers
        answer = functools.partial(self.server_requests.answer, handlers=handlers, conn=conn)
        lane = PlainLane(conn, settled, self._meta_for(settled.dialect, handlers), answer, supervisor,
                         self.server_log, self._resume)
        self._lane = lane
        return lane

    def _resume(self, call: Call, plan: Plan, attempt: Attempt | None) -> dict[str, Any]:
        """The retry loop, going on from the plain lane's `attempt` at
        `call` (from scratch with None), in the slot `send()` holds."""
        try:
            return self._send_mending(call, plan, attempt)
        finally:
            del attempt  # (no reference cycle through a failure raised again: see `_send_mending`)

    # -- step 2: the cache ------------------------------------------------------------------------

    def send_once(self, call: Call) -> dict[str, Any]:
        """One round's result (which may be `input_required`), from the
        cache when it holds a fresh one."""
        cache = self.cache
        key = None
        if cache is not None:
            # The key holds the protocol version too: a result's shape depends on it.
            versioned = dict(call.params or {})
            versioned["_meta"] = {**dict(versioned.get("_meta") or {}),
                                  META_PROTOCOL_VERSION: self.dialect.version}
            key = cache_key(call.method, versioned)
        if cache is None or key is None:
            return self.send(call)
        if call.options.get("bypass_cache"):
            since = cache.mark()  # an answer a change received meanwhile covers is not stored
            result = self.send(call)
            cache.put(self.cache_server, key, _auth_context(self.supervisor), result, since=since)
            return result
        # A caller that waits on another's identical fetch still keeps its
        # own deadline, also when it fetches itself after that one failed.
        # (With reset_timeout_on_progress the bound is max_total_timeout.)
        options = call.options
        timeout: float | None
        if options.get("reset_timeout_on_progress"):
            limit_name, timeout = "max_total_timeout", options.get("max_total_timeout", self.timeouts.max_total)
        else:
            limit_name, timeout = "timeout", options.get("timeout", self.timeouts.request)
        check_timeout(limit_name, timeout)
        deadline = deadline_in(timeout)

        def load() -> dict[str, Any]:
            own = call
            if deadline is not None and timeout is not None:
                left = remaining(deadline)
                if left <= 0:
                    raise RequestTimeout(f"{call.method} timed out after {timeout:g} s",
                                         method=call.method, timeout=timeout)
                if left < timeout:
                    own = call._replace(options=cast(RequestOptions, {**options, limit_name: left}))
            try:
                return self.send(own)
            except RequestTimeout as exc:
                if own is call or limit_name != "timeout":
                    raise
                raise naming_the_calls_timeout(exc, cast(float, timeout)) from None

        result = cache.fetch(self.cache_server, key, _auth_context(self.supervisor), load,
                             stale_if_error=self.options.stale_if_error, timeout=timeout, method=call.method)
        if getattr(result, "stale", False):
            log.warning("%s: the server could not be reached; serving a stale cached result", call.method)
        return result

    # -- step 3: admission, metrics, keepalive ------------------------------------------------------

    def send(self, call: Call, lane: PlainLane | None = None) -> dict[str, Any]:
        """One round's result (which may be `input_required`), through the
        one retry loop (`_send_mending`), holding an admission slot; with
        `lane` (a plain call's, see `plain_lane`), its first attempt made
        by the lane."""
        started = time.monotonic()
        options = call.options
        if lane is not None or (not options and call.extensions is None
                                and (call.params is None or "_meta" not in call.params)):
            # The shortcut's case (a lane's call is one): no option to read or check.
            timeout = self.timeouts.request
            plan = _new_plan(Plan, (timeout, None if timeout is None else started + timeout,
                                    self.timeouts.max_total, False, None, False, None))
        else:
            plan = _plan(call, self.timeouts)
        supervisor = self.supervisor
        if supervisor.closed:
            # Nothing to admit: the connection (or its absence) says why.
            return self._send_mending(call, plan)
        keepalive = supervisor.keepalive
        if keepalive is not None:
            keepalive.busy()
        outcome = "error"
        try:
            if getattr(calling, "held", False):
                # A request made on behalf of a call that holds a slot (the
                # setLevel after a reconnect, a header refresh): it must not
                # wait for a second slot, which could be its own.
                result = self._send_mending(call, plan)
            else:
                with Slot(supervisor.admission, plan.deadline):  # `admission.slot()`, one call less
                    calling.held = True
                    try:
                        result = self._send_mending(call, plan) if lane is None else lane.send(call, plan)
                    finally:
                        calling.held = False
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
        except BaseException as failure:
            outcome = _outcome_of(failure)
            raise
        finally:
            if keepalive is not None:
                keepalive.idle()
            if outcome == "shed":
                self.metrics.count("shed")  # refused before anything was sent: not a request
            else:  # (a cancellation is counted by the engine, where it is made: `Connection._cancel`)
                self.metrics.finished(call.method, outcome, time.monotonic() - started)

    # -- step 4: the one retry loop, and the engine ---------------------------------------------------

    def _send_mending(self, call: Call, plan: Plan, attempt: Attempt | None = None) -> dict[str, Any]:
        """Send, and mend each failure the client can mend at most once per
        call, then send again:

        - -32022 (unsupported protocol version, stateless era): settle the
          version again;
        - `SessionExpired` (HTTP 404, initialize era): a new session;
        - -32020 (header mismatch): `call.refresh_headers()`;
        - a connection that failed before the request reached the server,
          or under a request safe to repeat (`SAFE_TO_RETRY`): once more on
          a new connection; a `ConnectError` of a request safe to repeat (a
          pooled socket the server had just closed): once more.

        A server that went away is restarted by the supervisor when the era
        allows it; other calls in flight then fail, they are not resent.

        With `attempt` (the plain lane's first sending of `call`), the loop
        goes on from that attempt's outcome as if it had made it."""
        method = call.method
        supervisor = self.supervisor
        mended: set[str] = set()
        while True:
            outcome: dict[str, Any] | BaseException | None
            if attempt is not None:
                conn, generation, pending, dialect, params, outcome = attempt
                attempt = None
            else:
                settled = supervisor.settled  # again after a re-discovery
                if settled is None:
                    raise ConnectionClosed("the client is not connected")
                dialect = settled.dialect
                if method in dialect.undefined:
                    raise UnsupportedMethod(method, dialect.version, "use discover()" if method == "ping" else "")
                params = dict(call.params or {})
                cached = self._meta_cache  # `_meta_for`'s usual answer, without the call
                if cached is not None and cached[0][0] is dialect and cached[0][1] is call.handlers:
                    meta = cached[1]
                else:
                    meta = self._meta_for(dialect, call.handlers)
                if call.extensions:
                    meta = {**meta, META_CLIENT_CAPABILITIES: inputs.merge_capabilities(
                        meta.get(META_CLIENT_CAPABILITIES) or {}, {"extensions": dict(call.extensions)})}
                if plan.layers is not None:
                    meta = merge_meta(meta, *plan.layers, None)
                if meta:
                    params["_meta"] = meta
                # A request without params sends none, as the schemas allow.
                wire_params = params if (params or call.params is not None) else None
                current = supervisor.conn  # `live()`'s usual answer, without the call
                conn = (current if current is not None and current.state is State.OPEN and not supervisor.closed
                        and not supervisor.reopen_after_fork else supervisor.live(plan.deadline))
                generation = supervisor.session_generation
                pending = None
                # Made before the request goes out: from `send_request` to
                # `wait()`, which abandons the call on any exception, nothing runs.
                # (`server_requests.on_call()`, made without a call of ours)
                answer = functools.partial(self.server_requests.answer, handlers=call.handlers, conn=conn)
                adopting = getattr(calling, "adopts", None)
                if adopting is None:
                    adopting = adopts()
                try:
                    # A task-augmented request (2025-11-25 `params.task`) may be
                    # cancelled only by `tasks/cancel`, which needs the task id
                    # its answer would have carried: it is not cancelled at all.
                    pending = conn.send_request(
                        method, wire_params, progress=plan.wants_progress,
                        cancellable=method not in dialect.uncancellable and "task" not in params,
                        headers=call.headers() if call.headers is not None else None, adopts=adopting)
                    outcome = conn.wait(
                        pending, timeout=plan.timeout, until=plan.deadline, on_progress=plan.on_progress,
                        reset_timeout_on_progress=plan.reset_on_progress, max_total_timeout=plan.max_total,
                        on_log=self.server_log, on_server_request=answer,
                    )
                except MENDABLE as failure:
                    outcome = failure
                except BaseException:  # (the invariant of `PlainLane.send`'s, which see)
                    conn.abandon_any(pending)
                    raise
                else:
                    if supervisor.attempts:
                        supervisor.alive()
            if not isinstance(outcome, dict):  # one of MENDABLE, raised by `send_request` or `wait`
                if isinstance(outcome, SessionExpired):
                    if "session" not in mended and not dialect.stateless:
                        mended.add("session")
                        supervisor.renew_session(conn, generation, method=method, timeout=plan.timeout,
                                                 deadline=plan.deadline)
                        continue
                elif isinstance(outcome, ConnectionClosed):
                    if _may_resend(supervisor, outcome, conn, pending, method, mended):
                        continue
                elif method in SAFE_TO_RETRY and "resend" not in mended and not supervisor.closed:
                    mended.add("resend")  # a ConnectError of a request safe to repeat
                    continue
                try:
                    raise outcome
                finally:
                    # The traceback holds this frame: it must not hold the
                    # failure in turn (a reference cycle per failed call).
                    outcome = None
            error = outcome.get("error")
            if error is not None:
                settled = supervisor.settled
                exc = server_error_from_wire(error, method=method, params=params,
                                             invalid_params_means_not_found=dialect.stateless,
                                             server_capabilities=settled.capabilities if settled else None,
                                             protocol_version=dialect.version)
                if isinstance(exc, UnsupportedProtocolVersion) and dialect.stateless and "version" not in mended:
                    mended.add("version")
                    supervisor.rediscover(exc, plan.deadline)
                    continue
                if isinstance(exc, HeaderMismatch) and call.refresh_headers is not None and "headers" not in mended:
                    mended.add("headers")
                    call.refresh_headers()
                    continue
                try:
                    raise exc
                finally:
                    del exc  # (as for `outcome` above)
            result = outcome.get("result")
            if not isinstance(result, dict):
                raise InvalidResult(f"{method}: the result is not an object")
            kind = result.get("resultType", "complete")
            if kind != "complete" and not (method == "tools/call" and kind == "task"):  # a task goes to `tasks`
                dialect.result_type(result)  # an unknown resultType is invalid
            return result


def _plan(call: Call, timeouts: Timeouts) -> Plan:
    """A call's options, each checked, as the retry loop reads them
    (`timeouts`: the client's, for what the call does not set)."""
    options = call.options
    timeout = options.get("timeout", timeouts.request)
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
        if layer and META_PROTOCOL_VERSION in layer:
            raise ValueError("the protocol version is the client's to set: use protocol= on connect()")
    trace = options.get("trace_context")
    trace_meta = validate_trace_context(trace) if trace is not None else None
    max_total = options.get("max_total_timeout", timeouts.max_total)
    check_timeout("max_total_timeout", max_total)
    reset_on_progress = bool(options.get("reset_timeout_on_progress", False))
    on_progress = _callers_progress(progress) if progress is not None else None
    layers = (params_meta, option_meta, trace_meta)
    return Plan(timeout, deadline_in(timeout), max_total,
                # A progress token is asked for when progress resets the
                # timeout, even with no callback to show it.
                wants_progress=progress is not None or reset_on_progress, on_progress=on_progress,
                reset_on_progress=reset_on_progress, layers=layers if any(layers) else None)


def _capped(options: RequestOptions, limit: float | None, default: float | None) -> RequestOptions:
    """A round's options with its `timeout` cut to `limit` seconds (what is
    left of the call's `max_total_timeout`; None: as they are)."""
    timeout = options.get("timeout", default)
    if limit is None or not (timeout is None or (type(timeout) in (int, float) and timeout > limit)):
        return options  # (a value that is not a number is left for the call's own check to refuse)
    capped = options.copy()
    capped["timeout"] = max(limit, 0.001)
    return capped


def _callers_progress(progress: Callable[[Progress], Any]) -> Callable[[dict[str, Any]], None]:
    """The engine's progress callback for a call's `progress=`. What
    `progress` raises passes through this frame: `_outcome_of` knows it so."""
    def on_progress(params: dict[str, Any]) -> None:
        progress(Progress.from_wire(params))
    return on_progress


#: The frame every exception of a caller's `progress=` callback passes through.
_CALLERS_PROGRESS = _callers_progress(print).__code__


def _outcome_of(failure: BaseException) -> str:
    """The outcome (`metrics.OUTCOMES`) of a call that `failure` ended, but
    for a timeout or a shed call: "interrupted" for a KeyboardInterrupt or
    an exception of the caller's own code (its progress callback, or its
    input handler, which `InputHandlerError` carries as its cause), else
    "error"."""
    if isinstance(failure, KeyboardInterrupt):
        return "interrupted"
    if isinstance(failure, InputHandlerError) and failure.__cause__ is not None:
        return "interrupted"  # the handler raised (an answer refused has no cause)
    where = failure.__traceback__
    while where is not None:
        if where.tb_frame.f_code is _CALLERS_PROGRESS:
            return "interrupted"
        where = where.tb_next
    return "error"


def _auth_context(supervisor: Supervisor) -> str:
    """Whose private results these are: who the transport's requests are
    made as (another token, another cache), else this server's one
    context. Read from the transport without IO: credentials are the
    transport's, fetched (and refreshed) inside its exchanges."""
    conn = supervisor.conn
    scope = conn.transport.credential_scope() if conn is not None else None
    return scope or "-"


def _may_resend(supervisor: Supervisor, closed: ConnectionClosed, conn: Connection, pending: Any, method: str,
                mended: set[str]) -> bool:
    """Whether a call whose connection closed under it is sent again on
    a new one; else `closed` is marked with whether it may have run."""
    if supervisor.closed:
        return False
    if closed.may_have_executed is False and "reconnect" not in mended and supervisor.may_restart(conn):
        # Nothing of this request reached the server (its pipe was
        # gone): it may be sent on a new connection. The connection's
        # failure is a copy without the flag, so that the other callers'
        # errors never carry it.
        failure = copy_error(closed)
        failure.__dict__.pop("may_have_executed", None)
        conn.transport_failed(failure)
        mended.add("reconnect")
        return True
    if conn.failure is None:
        return False  # the call was refused before it was sent
    if method in SAFE_TO_RETRY and "reconnect" not in mended and supervisor.may_restart(conn):
        mended.add("reconnect")
        log.info("%s: the connection failed; sending it again on a new one", method)
        return True
    sent = pending is not None and pending.unsent is None
    closed.may_have_executed = sent
    if sent and closed.args:
        closed.args = (f"{closed.args[0]} (the request had been sent: it may have run on the server; "
                       f"it is not sent again)", *closed.args[1:])
    return False


def _check_declarable(settled: Settled | None, handlers: Mapping[str, Any], extensions: Mapping[str, Any] | None) -> None:
    """In the initialize era, capabilities are fixed by `initialize`: a
    per-call handler or extension the client did not declare there would
    only meet the server's -32021, so it is refused before anything is
    sent (`settled`: the connection's terms; nothing to check before)."""
    if settled is None or settled.dialect.stateless:
        return
    version = settled.dialect.version
    declared_extensions = settled.declared.get("extensions")
    for name in extensions or ():
        if name in _SELF_DECLARED:
            continue  # declared at every initialize whose revision has extensions; else the server decides
        if not isinstance(declared_extensions, Mapping) or name not in declared_extensions:
            hint = _UNDECLARED_HINTS.get(name, "declare it with client_capabilities= on connect()")
            raise ValueError(
                f"this connection settled on protocol {version} (initialize era), where the client's "
                f"capabilities are fixed at connect(): it did not declare the extension {name}; {hint}")
    missing = sorted(kind for kind in handlers if not inputs.declared(kind, settled.declared))
    # A kind the revision lacks (elicitation before 2025-06-18, its url mode
    # before 2025-11-25) no server of it can ask for, declared at connect()
    # or not: advising connect() for it would send the user in a circle.
    absent = {kind: INPUT_KIND_SINCE[kind] for kind in missing if not settled.dialect.has_input(kind)}
    if absent:
        raise ValueError(
            f"this connection settled on protocol {version}, which has no "
            f"{' or '.join(f'{kind!r} input requests (they came with {since})' for kind, since in absent.items())}: "
            f"its server can never ask for them, so a handler for them is never used, per call or given to "
            f"connect(); a server asks for them only on a revision that has them: connect(protocol=...) allowing "
            f"{max(absent.values())} (or newer), to a server that speaks it")
    if missing:
        raise ValueError(
            f"this connection settled on protocol {version} (initialize era), where the client's "
            f"capabilities are fixed at connect(): it did not declare {', '.join(missing)}, so a per-call "
            f"handler for it cannot be used; pass input_handlers={{{', '.join(repr(k) + ': ...' for k in missing)}}} "
            "to connect() instead")


__all__ = ["Call", "Pipeline", "Plan", "Requester"]
