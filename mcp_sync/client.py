"""The public blocking API: `connect()` and `Client`.

What it owns: settling the protocol version, building each request from the
dialect and the caller's options, pagination, result types and output
validation, and running user callbacks (progress, log, server requests) on
the calling thread. What it must not do: touch pipes or sockets (that is the
transports'), or wait on anything but the engine (`connection.py`).

A `Client` is shared freely between threads: every call registers its own
request in the engine and waits on its own inbox. The few fields a call can
change (the dialect after a -32022 re-discovery, the last tool listing) are
replaced whole under `_state_lock`, never mutated in place.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypedDict, TypeVar

from ._version import __version__
from . import handshake
from .connection import Connection, new_id_counter
from .errors import (
    ConnectionClosed,
    InputRequired,
    InvalidResult,
    OutputValidationError,
    HeaderMismatch,
    PaginationError,
    ServerError,
    SessionExpired,
    UnsupportedMethod,
    UnsupportedProtocolVersion,
    server_error_from_wire,
)
from .protocol import versions
from .protocol.headers import HeaderParam, InvalidHeaderAnnotation, header_params, param_headers
from .protocol.meta import merge_meta, validate_trace_context
from .protocol.schemas import SchemaCache
from .protocol.versions import Dialect, FallBack, UseStateless
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
    WireModel,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["connect", "Client", "RequestOptions", "DEFAULT_TIMEOUT"]

log = logging.getLogger("mcp_sync.client")
server_log = logging.getLogger("mcp_sync.server")

DEFAULT_TIMEOUT = 30.0
DEFAULT_PROBE_TIMEOUT = 10.0
DEFAULT_MAX_TOTAL_TIMEOUT = 600.0
DEFAULT_MAX_PAGES = 1000

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}

# list kind -> (method, result key, item type)
_LISTS: dict[str, tuple[str, str, Any]] = {
    "tools": ("tools/list", "tools", Tool),
    "resources": ("resources/list", "resources", Resource),
    "resource_templates": ("resources/templates/list", "resourceTemplates", ResourceTemplate),
    "prompts": ("prompts/list", "prompts", Prompt),
}

M = TypeVar("M", bound=WireModel)


class RequestOptions(TypedDict, total=False):
    """Options every request method takes as keyword arguments.

    - `timeout`: seconds to wait for the answer (the client's default, 30 s,
      unless set); None waits for ever.
    - `meta`: extra `_meta` entries; they win over the protocol's own.
    - `trace_context`: W3C `traceparent` (and `tracestate`, `baggage`), checked.
    - `progress`: a callable run on the calling thread with each `Progress`.
    - `reset_timeout_on_progress`: each progress restarts `timeout`, bounded by
      `max_total_timeout` (default 600 s).
    """

    timeout: float | None
    meta: Mapping[str, Any] | None
    trace_context: Mapping[str, str] | None
    progress: Callable[[Progress], Any] | None
    reset_timeout_on_progress: bool
    max_total_timeout: float | None


_OPTION_NAMES = frozenset(RequestOptions.__annotations__)


def _check_timeout(name: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")


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

    With `restart=True` (the default), a stateless (2026-07-28) connection
    whose server went away is opened again by the next request, as the spec
    asks of stdio clients; the calls that were in flight still fail.

    Example::

        with mcp_sync.connect(["python", "-m", "mcp_sync.testing.server"]) as client:
            print([tool.name for tool in client.list_tools()])
            print(client.call_tool("echo", {"text": "hi"}).text)
    """
    client = Client(
        resolve_target(target, http_options), protocol=protocol, timeout=timeout, probe_timeout=probe_timeout,
        client_info=client_info, client_capabilities=client_capabilities, log_level=log_level,
        max_pages=max_pages, max_total_timeout=max_total_timeout, restart=restart,
    )
    try:
        client._open()
    except BaseException:
        client.close()
        raise
    return client


class Client:
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
    ) -> None:
        _check_timeout("timeout", timeout)
        _check_timeout("probe_timeout", probe_timeout, allow_none=False)
        _check_timeout("max_total_timeout", max_total_timeout, allow_none=False)
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
            on_server_request=self._server_request_result,
            on_log=self._log_server_message,
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
            on_log=self._log_server_message, on_server_request=self._answer_server_request,
        )
        self._session = session
        self._dialect = versions.dialect_for(session.protocol_version)
        if self.log_level is not None:
            try:
                self.request("logging/setLevel", {"level": self.log_level})
            except ServerError as exc:
                log.warning("the server refused logging/setLevel: %s", exc)

    def _capabilities(self) -> dict[str, Any]:
        return self.client_capabilities

    def close(self) -> None:
        """Close the connection: pending calls fail at once with
        `ConnectionClosed`, every thread the client started ends, and a stdio
        server process is stopped and reaped. Idempotent, from any thread."""
        with self._state_lock:
            self._closed = True
            conn = self._conn
        if conn is not None:
            conn.close()

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
        unknown = set(options) - _OPTION_NAMES
        if unknown:
            raise TypeError(f"unknown request option(s): {', '.join(sorted(unknown))}")
        return self._request(method, params, options, retry_version=True)

    def _request(
        self, method: str, original: Mapping[str, Any] | None, options: RequestOptions, *,
        retry_version: bool, headers: Mapping[str, str] | None = None, retry_session: bool = True,
    ) -> dict[str, Any]:
        dialect = self._require_dialect()
        params = dict(original or {})
        if not dialect.defines(method):
            hint = "use discover()" if method == "ping" else ""
            raise UnsupportedMethod(method, dialect.version, hint)
        timeout = options.get("timeout", self.timeout)
        _check_timeout("timeout", timeout)
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
        _check_timeout("max_total_timeout", max_total)
        meta = merge_meta(
            dialect.request_meta(self._capabilities(), self.client_info, self.log_level),
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
                on_server_request=self._answer_server_request,
            )
        except SessionExpired:
            if not retry_session or dialect.stateless:
                raise
            self._renew_session(conn, session_generation)
            return self._request(method, original, options, retry_version=retry_version,
                                 headers=headers, retry_session=False)
        error = response.get("error")
        if error is not None:
            exc = server_error_from_wire(error, method=method, invalid_params_means_not_found=dialect.stateless)
            if isinstance(exc, UnsupportedProtocolVersion) and dialect.stateless and retry_version:
                self._rediscover(exc)
                return self._request(method, original, options, retry_version=False, headers=headers)
            raise exc
        result = response.get("result")
        if not isinstance(result, dict):
            raise InvalidResult(f"{method}: the result is not an object")
        if dialect.result_type(result) == "input_required":
            raise InputRequired(f"{method}: the server needs input this client cannot supply", result=result)
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
                on_log=self._log_server_message, on_server_request=self._answer_server_request,
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

    def _server_request_result(self, message: dict[str, Any]) -> dict[str, Any]:
        """The answer to a server request (initialize era). Raises ServerError to refuse."""
        method = message.get("method")
        if method == "ping":
            return {}
        raise ServerError(-32601, f"Method not found: {method} (this client has no handler for it)")

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            result = self._server_request_result(message)
        except ServerError as exc:
            conn.respond(message["id"], error={"code": exc.code, "message": exc.message, "data": exc.data})
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

    # -- the typed calls -------------------------------------------------------------------------

    def discover(self, **options: Unpack[RequestOptions]) -> DiscoverResult:
        """Ask the server for its versions, capabilities and identity (2026-07-28).

        Example::

            info = client.discover()
            print(info.supported_versions, info.server_info)
        """
        result = DiscoverResult.from_wire(self.request("server/discover", None, **options))
        self._discovered = result
        return result

    def ping(self, **options: Unpack[RequestOptions]) -> None:
        """Check the server is alive (initialize era; 2026-07-28 has no ping).

        Example::

            client.ping()
        """
        self.request("ping", None, **options)

    def list_page(self, kind: str, cursor: str | None = None, **options: Unpack[RequestOptions]) -> Page:
        """One page of a list: `kind` is "tools", "resources",
        "resource_templates" or "prompts"; pass the previous `next_cursor`.

        Example::

            page = client.list_page("tools")
            while page.next_cursor:
                page = client.list_page("tools", page.next_cursor)
        """
        if kind not in _LISTS:
            raise ValueError(f"kind must be one of {', '.join(_LISTS)}, not {kind!r}")
        if cursor is not None and not isinstance(cursor, str):
            raise TypeError("cursor must be a string")
        method, key, item_type = _LISTS[kind]
        result = self.request(method, {"cursor": cursor} if cursor is not None else None, **options)
        items = result.get(key)
        if not isinstance(items, list):
            raise InvalidResult(f"{method}: the result has no {key!r} list")
        typed = [item_type.from_wire(item) for item in items]
        if kind == "tools" and self._mirrors_headers():
            typed = [tool for tool in typed if self._header_params_of(tool, listed=True) is not None]
        next_cursor = result.get("nextCursor")
        if next_cursor is not None and not isinstance(next_cursor, str):
            raise InvalidResult(f"{method}: nextCursor is not a string")
        if kind == "tools":
            self._remember_tools(typed, replace=False)
        return Page(items=typed, next_cursor=next_cursor, raw=result)

    def _list_all(self, kind: str, options: RequestOptions) -> list[Any]:
        items: list[Any] = []
        seen: set[str] = set()
        cursor: str | None = None
        for _ in range(self.max_pages):
            page = self.list_page(kind, cursor, **options)
            items.extend(page.items)
            if page.next_cursor is None:
                return items
            if page.next_cursor in seen:
                raise PaginationError(f"{_LISTS[kind][0]}: the server repeated cursor {page.next_cursor!r}")
            seen.add(page.next_cursor)
            cursor = page.next_cursor
        raise PaginationError(f"{_LISTS[kind][0]}: still more after max_pages={self.max_pages} pages")

    def list_tools(self, **options: Unpack[RequestOptions]) -> list[Tool]:
        """Every tool, following `nextCursor` to the end (at most `max_pages`).

        Example::

            for tool in client.list_tools():
                print(tool.name, tool.description)
        """
        tools: list[Tool] = self._list_all("tools", options)
        self._remember_tools(tools, replace=True)
        return tools

    def _mirrors_headers(self) -> bool:
        conn = self._conn
        return conn is not None and conn.transport.mirrors_headers

    def _header_params_of(self, tool: Tool, *, listed: bool) -> tuple[HeaderParam, ...] | None:
        """The `x-mcp-header` parameters of a tool. A listed tool with an
        invalid annotation is left out (None) with a warning, as the spec
        requires; a definition passed by the caller raises ValueError."""
        try:
            return header_params(tool.input_schema)
        except InvalidHeaderAnnotation as exc:
            if not listed:
                raise ValueError(f"tool {tool.name!r} has an invalid x-mcp-header annotation: {exc}") from None
            log.warning("leaving out tool %r: invalid x-mcp-header annotation: %s", tool.name, exc)
            return None

    def _remember_tools(self, tools: Sequence[Tool], *, replace: bool) -> None:
        with self._state_lock:
            known = {} if replace else dict(self._tools)
            known.update((tool.name, tool) for tool in tools)
            self._tools = known

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
        definition: Tool | None
        if isinstance(tool, Tool):
            definition, name = tool, tool.name
        elif isinstance(tool, Mapping):
            try:
                definition = Tool.from_wire(tool)
            except InvalidResult as exc:
                raise ValueError(f"not a tool definition: {exc}") from None
            name = definition.name
        elif isinstance(tool, str) and tool:
            name = tool
            definition = self._tools.get(name)
        else:
            raise TypeError("tool must be a tool name, a Tool, or a tool definition mapping")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise TypeError("arguments must be a mapping")
        unknown = set(options) - _OPTION_NAMES
        if unknown:
            raise TypeError(f"unknown request option(s): {', '.join(sorted(unknown))}")
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        try:
            raw = self._request("tools/call", params, options, retry_version=True,
                                headers=self._tool_headers(definition, arguments))
        except HeaderMismatch:
            if not self._mirrors_headers():
                raise
            # The tool may have changed since it was listed: list again, retry once.
            self.list_tools(timeout=options.get("timeout", self.timeout))
            definition = self._tools.get(name, definition)
            raw = self._request("tools/call", params, options, retry_version=True,
                                headers=self._tool_headers(definition, arguments))
        result = CallToolResult.from_wire(raw)
        if definition is not None and definition.output_schema is not None and not result.is_error:
            self._check_output(name, definition.output_schema, result)
        return result

    def _tool_headers(self, definition: Tool | None, arguments: Mapping[str, Any] | None) -> dict[str, str] | None:
        """`Mcp-Param-*` headers for a call, on transports that mirror them."""
        if definition is None or not self._mirrors_headers():
            return None
        found = self._header_params_of(definition, listed=False)
        return param_headers(found, arguments) if found else None

    def _check_output(self, name: str, schema: Mapping[str, Any], result: CallToolResult) -> None:
        if result.structured_content is None:
            raise OutputValidationError(
                f"tool {name!r} declares an outputSchema but returned no structuredContent",
                result=result.raw, errors=["structuredContent is missing"],
            )
        problems = self._schemas.errors(schema, result.structured_content)
        if problems:
            raise OutputValidationError(
                f"tool {name!r} returned structuredContent that does not match its outputSchema: {problems[0]}",
                result=result.raw, errors=problems,
            )

    def list_resources(self, **options: Unpack[RequestOptions]) -> list[Resource]:
        """Every direct resource, following `nextCursor` to the end.

        Example::

            uris = [r.uri for r in client.list_resources()]
        """
        return self._list_all("resources", options)

    def list_resource_templates(self, **options: Unpack[RequestOptions]) -> list[ResourceTemplate]:
        """Every resource template, following `nextCursor` to the end.

        Example::

            templates = [t.uri_template for t in client.list_resource_templates()]
        """
        return self._list_all("resource_templates", options)

    def read_resource(self, uri: str, **options: Unpack[RequestOptions]) -> ReadResourceResult:
        """Read a resource by URI. A missing one raises `ResourceNotFound`.

        Example::

            print(client.read_resource("demo://readme").text)
        """
        if not isinstance(uri, str) or not uri:
            raise TypeError("uri must be a non-empty string")
        return ReadResourceResult.from_wire(self.request("resources/read", {"uri": uri}, **options))

    def list_prompts(self, **options: Unpack[RequestOptions]) -> list[Prompt]:
        """Every prompt, following `nextCursor` to the end.

        Example::

            names = [p.name for p in client.list_prompts()]
        """
        return self._list_all("prompts", options)

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Unpack[RequestOptions],
    ) -> GetPromptResult:
        """Render a prompt with its (string) arguments.

        Example::

            prompt = client.get_prompt("greet", {"name": "Ada"})
            print(prompt.messages[0].content)
        """
        if not isinstance(name, str) or not name:
            raise TypeError("name must be a non-empty string")
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            if not isinstance(arguments, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in arguments.items()):
                raise TypeError("prompt arguments must be a mapping of strings to strings")
            params["arguments"] = dict(arguments)
        return GetPromptResult.from_wire(self.request("prompts/get", params, **options))

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
        if isinstance(ref, Prompt):
            wire_ref: dict[str, Any] = {"type": "ref/prompt", "name": ref.name}
        elif isinstance(ref, ResourceTemplate):
            wire_ref = {"type": "ref/resource", "uri": ref.uri_template}
        elif isinstance(ref, Mapping) and ref.get("type") in ("ref/prompt", "ref/resource"):
            wire_ref = dict(ref)
        else:
            raise TypeError("ref must be a Prompt, a ResourceTemplate, or a ref/prompt or ref/resource mapping")
        if not isinstance(argument, str) or not isinstance(value, str):
            raise TypeError("argument and value must be strings")
        params: dict[str, Any] = {"ref": wire_ref, "argument": {"name": argument, "value": value}}
        if context is not None:
            if not isinstance(context, Mapping):
                raise TypeError("context must be a mapping of argument names to values")
            params["context"] = {"arguments": dict(context)}
        return CompleteResult.from_wire(self.request("completion/complete", params, **options))

    def __repr__(self) -> str:
        dialect = self._dialect
        state = "closed" if self._closed else (dialect.version if dialect else "connecting")
        return f"<mcp_sync.Client {state}>"
