"""The in-process MCP server: the registration API, sessions and protocol dispatch.

`Server` holds what the server offers (registered through its decorators) and
its configuration; it is shared, read-mostly, and safe to use from many
threads. `Server.open_session(send)` returns a `ServerSession`, one client
connection with its own protocol state. Nothing here does IO: a transport
feeds decoded JSON-RPC messages to `ServerSession.receive()` and gets the
server's messages through `send`.

How a session works:

* `receive()` classifies the message on the caller's thread and returns at
  once. Notifications (`notifications/cancelled`, `notifications/initialized`)
  are applied there. A request is registered as in flight, session state
  changes (`initialize`, `logging/setLevel`) are applied there too, so later
  requests see them, and the handler is queued on the session's worker pool.
* Every call of `send` happens on a worker thread, never inside `receive()`,
  and calls are serialised: `send` is never entered by two threads at once.
  A request's progress and log notifications go out before its response.
* Eras: a request whose `_meta` carries `io.modelcontextprotocol/protocolVersion`
  is served statelessly (revision 2026-07-28) when the server speaks a
  stateless version; otherwise the session follows the `initialize`
  handshake of the legacy revisions (2025-11-25, 2025-06-18). Each session
  has its own legacy state.
* `notifications/cancelled` sets the request's `ToolContext.cancelled`; a
  cancelled request gets no response and no further notification.
* Change notifications (`Server.notify_changed`/`notify_updated`, sent on
  every registration or removal too) go, in the initialize era, to sessions
  whose `initialize` response went out, as messages related to no request
  (resources/updated only for `resources/subscribe`d URIs), in order, from
  one worker job at a time. Stateless era: `subscriptions/listen` {notifications:
  filter} is answered at once with `notifications/subscriptions/acknowledged`
  {_meta: {io.modelcontextprotocol/subscriptionId: <listen id>}, notifications:
  <accepted filter>} (true flags and resourceSubscriptions; unknown keys
  dropped), then every matching notification, tagged with the same
  `_meta` subscriptionId, all related to the listen request; the listen
  occupies one worker thread until the client cancels it (no response) or
  `end_subscriptions()` ends it: graceful, the response
  {resultType: "complete", _meta: {subscriptionId, serverInfo}}; otherwise
  `notifications/cancelled` {requestId: <listen id>} and no response.
* `close()` stops accepting messages, cancels everything in flight, and joins
  every thread the session started; after it returns `send` is not called.
* `open_session(send, related=True)` calls `send(message, related_id)` instead,
  with the id of the request each message belongs to (None when it belongs to
  none), so a transport can route messages per request (Streamable HTTP).
* Servers that ask back (`ToolContext.elicit` and friends; prompt and
  resource handlers get the same context when they take one more argument):
  in the legacy era the question is a server-to-client request ("s-1",
  "s-2", ... per session) sent with `related_id` = the id of the request
  being served, and the client's JSON-RPC response, fed to `receive()` like
  any message, wakes the waiting worker. In the stateless era the request is
  answered with an InputRequiredResult (input keys "input-1", "input-2", ...
  in asking order; a sealed `requestState`, see `_asking`), and the retried
  request runs the handler again from the start with the answers.
"""

from __future__ import annotations

import collections
import inspect
import itertools
import logging
import threading
import time
import uuid
import weakref
from typing import (
    Any,
    Callable,
    Iterable,
    Literal,
    Mapping,
    TypeGuard,
    TypeVar,
    overload,
)

from ._asking import (
    ASKABLE_METHODS,
    MRTR_METHODS,
    RESULT_NAMES,
    ClientError,
    InputRequired,
    MissingClientCapability,
    RequestCancelled,
    StateSealer,
    check_answer,
    describe_capabilities,
    missing_capabilities,
    request_digest,
)
from ._features import (
    ArgumentError,
    Completer,
    CompletionKey,
    JSONDict,
    PromptDef,
    ResourceDef,
    TemplateDef,
    ToolDef,
    compile_template,
    paginate,
    resource_contents,
    text_content,
)
from ._pool import WorkerPool

_log = logging.getLogger("mcp_sync.testing")

#: Stateless revisions this server can speak, newest first.
STATELESS_VERSIONS: tuple[str, ...] = ("2026-07-28",)
#: Revisions with the `initialize` handshake, newest first.
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18")
#: Every revision this server can speak, newest first.
SUPPORTED_VERSIONS: tuple[str, ...] = STATELESS_VERSIONS + LEGACY_VERSIONS

#: RFC 5424 severities, least severe first.
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LEVEL_RANK = {level: rank for rank, level in enumerate(LOG_LEVELS)}

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND_LEGACY = -32002
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

RequestId = str | int

_FEATURE_METHODS = frozenset({
    "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
    "prompts/list", "prompts/get", "completion/complete",
})
_STATELESS_METHODS = _FEATURE_METHODS | {"server/discover", "subscriptions/listen"}
_LEGACY_METHODS = _FEATURE_METHODS | {
    "ping", "initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
}
#: Results that carry caching hints (2026-07-28 server/utilities/caching).
_CACHEABLE = frozenset({
    "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
})

#: What changes: `Server.notify_changed(kind)` -> the list_changed notification
#: and the `subscriptions/listen` filter key that opts in to it.
CHANGE_KINDS: dict[str, tuple[str, str]] = {
    "tools": ("notifications/tools/list_changed", "toolsListChanged"),
    "prompts": ("notifications/prompts/list_changed", "promptsListChanged"),
    "resources": ("notifications/resources/list_changed", "resourcesListChanged"),
}
CACHE_SCOPES = ("public", "private")

_F = TypeVar("_F", bound=Callable[..., Any])


class RpcError(Exception):
    """A JSON-RPC error answer to a request. A tool may raise it to answer
    its call with this error instead of an `isError` result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> JSONDict:
        error: JSONDict = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def _is_request_id(value: Any) -> TypeGuard[RequestId]:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Outgoing:
    """One server-to-client request waiting for the client's response (initialize era)."""

    __slots__ = ("id", "method", "done", "response")

    def __init__(self, request_id: str, method: str) -> None:
        self.id = request_id
        self.method = method
        self.done = threading.Event()
        self.response: JSONDict | None = None


class _Mrtr:
    """Stateless era: what a retried request brought back (answers by input
    key, from `requestState` and `inputResponses`) and what this run used."""

    __slots__ = ("digest", "answers", "used")

    def __init__(self, digest: str, answers: dict[str, tuple[str, JSONDict]]) -> None:
        self.digest = digest
        self.answers = answers
        self.used: dict[str, tuple[str, JSONDict]] = {}


class _Call:
    """One request in flight on a session."""

    __slots__ = (
        "id", "method", "params", "meta", "version", "stateless", "log_level",
        "progress_token", "last_progress", "cancelled", "lock", "done",
        "pending", "pending_lock", "mrtr", "listen",
    )

    def __init__(self, request_id: RequestId, method: str, params: JSONDict, meta: JSONDict) -> None:
        self.id = request_id
        self.method = method
        self.params = params
        self.meta = meta
        self.version: str | None = None
        self.stateless = False
        self.log_level: str | None = None
        token = meta.get("progressToken")
        self.progress_token: RequestId | None = token if _is_request_id(token) else None
        self.last_progress: float | None = None
        self.cancelled = threading.Event()
        self.lock = threading.Lock()
        self.done = False
        #: Server-to-client requests this request's handler waits for, by id.
        self.pending: dict[str, _Outgoing] = {}
        self.pending_lock = threading.Lock()
        self.mrtr: _Mrtr | None = None
        #: A `subscriptions/listen` request's subscription.
        self.listen: _Listen | None = None

    def cancel(self) -> None:
        """Set `cancelled` and wake the handler if it waits for the client."""
        with self.pending_lock:
            self.cancelled.set()
            waiting = list(self.pending.values())
        for outgoing in waiting:
            outgoing.done.set()
        if self.listen is not None:
            self.listen.wake()


class _Listen:
    """One `subscriptions/listen` subscription (stateless era): its accepted
    filter and the notifications waiting to go out on it. Its handler (on a
    worker thread) acknowledges, then delivers queued notifications in order
    until the client cancels or the server ends it (`stop`)."""

    def __init__(self, call: _Call, accepted: JSONDict) -> None:
        self.call = call
        self.accepted = accepted
        self.cond = threading.Condition()
        self.queue: collections.deque[JSONDict] = collections.deque()
        #: None while open; "complete" (graceful end) or "cancel" (server-sent notifications/cancelled).
        self.end: str | None = None
        #: Set once the handler is done (its final message, if any, sent).
        self.finished = threading.Event()

    def tag(self, method: str, params: JSONDict | None = None) -> JSONDict:
        body: JSONDict = {"_meta": {META_SUBSCRIPTION_ID: self.call.id}}
        body.update(params or {})
        return {"jsonrpc": "2.0", "method": method, "params": body}

    def push(self, message: JSONDict) -> None:
        with self.cond:
            if self.end is None:
                self.queue.append(message)
                self.cond.notify_all()

    def stop(self, how: str) -> None:
        with self.cond:
            if self.end is None:
                self.end = how
            self.cond.notify_all()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()


class ToolContext:
    """What a tool (or a prompt or resource handler that takes a second
    argument) gets besides its arguments.

    * `cancelled`: a `threading.Event`, set when the client cancels the
      request or the session closes; long tools should wait on it
      (`ctx.cancelled.wait(delay)`) instead of sleeping.
    * `protocol_version`: the revision serving this request; `stateless`:
      True for a 2026-07-28 request (per-request `_meta`).
    * `meta`: the request's `_meta` (an empty dict when absent).
    * `request_id`, `progress_token`: from the request.

    Asking the client (`elicit`, `elicit_url`, `sample`, `list_roots`,
    `request`, `ask_all`) works in both eras with one implementation:

    * initialize era: a server-to-client JSON-RPC request (ids "s-1",
      "s-2", ... per session) goes out with the request's other messages, and
      the call blocks until the client's response arrives through
      `ServerSession.receive()`. It returns the result; an error response
      raises `ClientError`; a capability the client did not declare in
      `initialize` raises `MissingClientCapability` (both become an
      `isError` result when a tool lets them escape). `timeout` (seconds):
      when it passes without an answer, the server sends
      `notifications/cancelled` for its request and raises `TimeoutError`.
      If the client's request is cancelled (or the session closes) while
      waiting, the server cancels its request the same way and raises
      `RequestCancelled`.
    * stateless era (multi round-trip requests): the n-th question of a run
      has the input key "input-n". A question whose answer the retried
      request carries (`inputResponses` plus the sealed `requestState`)
      returns it at once; otherwise the run ends (a private BaseException
      unwinds the handler) and the request is answered with an
      InputRequiredResult asking it. The handler runs again from the start
      on every retry, so it must ask the same questions in the same order
      given the same answers; `ask_all` asks several in one round. A
      capability missing from the request's `_meta` clientCapabilities
      answers the request with -32021. `timeout` does not apply.
    """

    def __init__(self, session: ServerSession, call: _Call) -> None:
        self._session = session
        self._call = call
        self._asked = 0
        self._ask_lock = threading.Lock()
        self.cancelled: threading.Event = call.cancelled
        self.protocol_version: str = call.version or ""
        self.stateless: bool = call.stateless
        self.meta: JSONDict = call.meta
        self.request_id: RequestId = call.id
        self.progress_token: RequestId | None = call.progress_token

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send `notifications/progress` if the request asked for progress.

        `progress` must increase from one call to the next (ValueError
        otherwise). Does nothing without a progress token, or once the
        request is finished or cancelled."""
        self._session._progress(self._call, progress, total, message)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send `notifications/message` if the client asked for this level.

        Stateless requests: only when the request's `_meta` has
        `io.modelcontextprotocol/logLevel` at or below `level`; legacy: at or
        above the session's `logging/setLevel` level (nothing before it).
        ValueError for an unknown level."""
        self._session._log(self._call, level, data, logger)

    # -- asking the client ------------------------------------------------

    def elicit(self, message: str, requested_schema: Mapping[str, Any], *,
               timeout: float | None = None) -> JSONDict:
        """Form-mode `elicitation/create`; returns the ElicitResult
        (`{"action": "accept" | "decline" | "cancel", "content": {...}}`).
        Needs the client's `elicitation` capability (`form`, or an empty object)."""
        if not isinstance(message, str):
            raise TypeError("message must be a string")
        if not isinstance(requested_schema, Mapping) or requested_schema.get("type") != "object":
            raise ValueError('requested_schema must be an object schema ({"type": "object", "properties": ...})')
        params = {"mode": "form", "message": message, "requestedSchema": dict(requested_schema)}
        return self.request("elicitation/create", params, timeout=timeout)

    def elicit_url(self, message: str, url: str, *, timeout: float | None = None) -> JSONDict:
        """URL-mode `elicitation/create` (`mode: "url"`); returns the
        ElicitResult (no content). Needs `elicitation.url`; revision
        2025-06-18 has no URL mode (MissingClientCapability). 2025-11-25
        requests get a fresh `elicitationId`."""
        if not isinstance(message, str) or not isinstance(url, str):
            raise TypeError("message and url must be strings")
        return self.request("elicitation/create", {"mode": "url", "message": message, "url": url}, timeout=timeout)

    def sample(self, messages: list[dict[str, Any]], max_tokens: int, *, timeout: float | None = None,
               **extra: Any) -> JSONDict:
        """`sampling/createMessage`; returns the CreateMessageResult. `extra`
        adds request params (snake_case names become camelCase:
        `system_prompt` -> `systemPrompt`). Needs `sampling` (and
        `sampling.tools` with `tools`/`tool_choice`, `sampling.context` with
        an `include_context` other than "none")."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError("max_tokens must be an integer")
        params: JSONDict = {"messages": list(messages), "maxTokens": max_tokens}
        for key, value in extra.items():
            head, *rest = key.split("_")
            params[head + "".join(part[:1].upper() + part[1:] for part in rest)] = value
        return self.request("sampling/createMessage", params, timeout=timeout)

    def list_roots(self, *, timeout: float | None = None) -> JSONDict:
        """`roots/list`; returns the ListRootsResult (`{"roots": [...]}`). Needs `roots`."""
        return self.request("roots/list", None, timeout=timeout)

    def ping_client(self, *, timeout: float | None = None) -> JSONDict:
        """Initialize era: send a `ping` request to the client and wait for
        its (empty) result. RuntimeError for a stateless request, which
        cannot reach the client."""
        if self._call.stateless:
            raise RuntimeError("ping_client: a stateless request cannot send requests to the client")
        return self.request("ping", None, timeout=timeout)

    def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                timeout: float | None = None) -> JSONDict:
        """Ask one question (`method` is elicitation/create,
        sampling/createMessage or roots/list; `ping` in the initialize era)
        and return the client's result. See the class docstring."""
        question: JSONDict = {"method": method}
        if params is not None:
            question["params"] = dict(params)
        return self.ask_all([question], timeout=timeout)[0]

    def ask_all(self, requests: Iterable[Mapping[str, Any]], *, timeout: float | None = None) -> list[JSONDict]:
        """Ask several questions at once (`{"method": ..., "params": {...}}`
        each) and return their results in order. Stateless: every
        unanswered one goes into the same InputRequiredResult (one round);
        initialize era: all requests are sent, then all answers awaited."""
        questions: list[JSONDict] = []
        for request in requests:
            method = request.get("method")
            params = request.get("params")
            if not isinstance(method, str):
                raise ValueError("every request needs a string method")
            if params is not None and not isinstance(params, Mapping):
                raise ValueError("request params must be an object")
            question: JSONDict = {"method": method}
            if params is not None:
                question["params"] = dict(params)
            questions.append(question)
        if not questions:
            return []
        with self._ask_lock:
            first = self._asked + 1
            self._asked += len(questions)
        keys = [f"input-{n}" for n in range(first, first + len(questions))]
        return self._session._ask(self._call, keys, questions, timeout)


#: The same context is given to prompt and resource handlers.
RequestContext = ToolContext


class Server:
    """An MCP server for tests: register tools, resources and prompts, then
    serve it in-process (`open_session`) or over stdio (`mcp_sync.testing.server`).

    Example::

        server = Server(name="calc", version="1.0.0")

        @server.tool(input_schema={"type": "object",
                                   "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                   "required": ["a", "b"]})
        def add(args, ctx):
            "Add two numbers."
            return str(args["a"] + args["b"])
    """

    def __init__(
        self,
        name: str = "mcp-sync-testing",
        version: str = "0.1.0",
        instructions: str | None = None,
        page_size: int | None = None,
        versions: Iterable[str] | None = None,
        *,
        ttl_ms: int = 60_000,
        cache_scope: str = "public",
        change_notifications: bool = True,
        max_workers: int = 16,
        request_state_key: bytes | None = None,
        request_state_ttl: float = 600.0,
    ) -> None:
        if page_size is not None and (isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1):
            raise ValueError("page_size must be None or a positive integer")
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0:
            raise ValueError("ttl_ms must be a non-negative integer")
        if cache_scope not in CACHE_SCOPES:
            raise ValueError(f"cache_scope must be 'public' or 'private', not {cache_scope!r}")
        wanted = SUPPORTED_VERSIONS if versions is None else tuple(versions)
        unknown = [v for v in wanted if v not in SUPPORTED_VERSIONS]
        if unknown:
            raise ValueError(f"unsupported protocol version(s) {unknown}; choose from {list(SUPPORTED_VERSIONS)}")
        if not wanted:
            raise ValueError("a server must speak at least one protocol version")
        self.name = name
        self.version = version
        self.instructions = instructions
        self.page_size = page_size
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope
        #: Declare `listChanged`/`subscribe` and send change notifications
        #: (False: capabilities say false, resources/subscribe and
        #: subscriptions/listen get -32601, notify_* do nothing).
        self.change_notifications = bool(change_notifications)
        self.max_workers = max_workers
        #: Seals the stateless era's `requestState` (HMAC key: `request_state_key`,
        #: random per Server by default; lifetime: `request_state_ttl` seconds).
        self._sealer = StateSealer(request_state_key, request_state_ttl)
        self.versions: tuple[str, ...] = tuple(v for v in SUPPORTED_VERSIONS if v in wanted)
        self.stateless_versions: tuple[str, ...] = tuple(v for v in self.versions if v in STATELESS_VERSIONS)
        self.legacy_versions: tuple[str, ...] = tuple(v for v in self.versions if v in LEGACY_VERSIONS)
        self._lock = threading.Lock()
        self._tools: dict[str, ToolDef] = {}
        self._resources: dict[str, ResourceDef] = {}
        self._templates: dict[str, TemplateDef] = {}
        self._prompts: dict[str, PromptDef] = {}
        self._completions: dict[CompletionKey, Completer] = {}
        #: Live sessions (weakly: a session nobody closed does not leak).
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self._served: collections.Counter[str] = collections.Counter()
        #: (method, uri or None) -> (ttlMs or None, cacheScope or None)
        self._cache_hints: dict[tuple[str, str | None], tuple[int | None, str | None]] = {}

    # -- registration -----------------------------------------------------

    @overload
    def tool(self, name: _F, /) -> _F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        *,
        title: str | None = None,
    ) -> Callable[[_F], _F]: ...

    def tool(
        self,
        name: Any = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        *,
        title: str | None = None,
    ) -> Any:
        """Register `fn(args: dict, ctx: ToolContext)` as a tool (decorator).

        `name` defaults to the function's name and `description` to its
        docstring; `input_schema` defaults to `{"type": "object"}`. The
        function may return a str (one text content), a list of content
        blocks (str items become text), a dict with `content` (used as the
        result, with optional `structuredContent` and `isError`), or any
        other JSON value, which becomes `structuredContent` mirrored as JSON
        text. An exception becomes a result with `isError: true`.
        Registering a name again replaces the earlier tool."""
        if callable(name):
            return self.tool()(name)
        schema = dict(input_schema) if input_schema is not None else {"type": "object"}
        if schema.get("type") != "object":
            raise ValueError('a tool inputSchema must have "type": "object" at its root')
        out_schema = dict(output_schema) if output_schema is not None else None

        def register(fn: _F) -> _F:
            tool_name = name if name is not None else fn.__name__
            if not isinstance(tool_name, str) or not tool_name:
                raise ValueError("a tool needs a non-empty name")
            doc = description if description is not None else inspect.getdoc(fn)
            with self._lock:
                self._tools[tool_name] = ToolDef(
                    tool_name, fn, doc, schema, out_schema, dict(annotations) if annotations else None, title
                )
            self.notify_changed("tools")
            return fn

        return register

    def resource(
        self,
        uri: str,
        name: str,
        mime_type: str | None = None,
        description: str | None = None,
        *,
        title: str | None = None,
    ) -> Callable[[_F], _F]:
        """Register `fn() -> str | bytes` as the resource at `uri` (decorator);
        bytes are sent base64-encoded as a blob. `fn(ctx)` gets a
        `RequestContext` (to ask the client, see `ToolContext`)."""

        def register(fn: _F) -> _F:
            with self._lock:
                replaced = uri in self._resources
                self._resources[uri] = ResourceDef(uri, name, fn, mime_type, description, title,
                                                   _takes_context(fn, 0))
            self.notify_changed("resources")
            if replaced:
                self.notify_updated(uri)
            return fn

        return register

    def resource_template(
        self,
        uri_template: str,
        name: str,
        mime_type: str | None = None,
        description: str | None = None,
        *,
        title: str | None = None,
    ) -> Callable[[_F], _F]:
        """Register `fn(params: dict[str, str]) -> str | bytes` for every URI
        matching a simple `{var}` template (decorator). The function may
        raise LookupError (or return None) for "resource not found".
        `fn(params, ctx)` also gets a `RequestContext`."""
        compile_template(uri_template)  # reject unsupported templates now, not when decorating

        def register(fn: _F) -> _F:
            template = TemplateDef(uri_template, name, fn, mime_type, description, title, _takes_context(fn, 1))
            with self._lock:
                self._templates[uri_template] = template
            self.notify_changed("resources")
            return fn

        return register

    def prompt(
        self,
        name: str,
        description: str | None = None,
        arguments: Iterable[Mapping[str, Any]] | None = None,
        *,
        title: str | None = None,
    ) -> Callable[[_F], _F]:
        """Register `fn(args: dict[str, str]) -> str | list` as a prompt
        (decorator). `arguments` is a list of `{"name", "description",
        "required"}`. A str becomes one user text message; list items are
        str (user text) or `{"role", "content"}` messages. `fn(args, ctx)`
        also gets a `RequestContext` (to ask the client, see `ToolContext`)."""
        args = [dict(arg) for arg in arguments or ()]
        for arg in args:
            if not isinstance(arg.get("name"), str):
                raise ValueError("every prompt argument needs a string 'name'")

        def register(fn: _F) -> _F:
            with self._lock:
                self._prompts[name] = PromptDef(name, fn, description, args, title, _takes_context(fn, 1))
            self.notify_changed("prompts")
            return fn

        return register

    def completion(self, ref_type: str, ref: str, argument: str) -> Callable[[_F], _F]:
        """Register `fn(value: str, context: dict[str, str]) -> list[str]`
        completing `argument` of a prompt (`ref_type` "ref/prompt" or
        "prompt", `ref` its name) or of a resource template ("ref/resource"
        or "resource", `ref` the template or URI) (decorator)."""
        kind = _normalize_ref_type(ref_type)
        if kind is None:
            raise ValueError(f"ref_type must be 'ref/prompt' or 'ref/resource', not {ref_type!r}")

        def register(fn: _F) -> _F:
            with self._lock:
                self._completions[(kind, ref, argument)] = fn
            return fn

        return register

    def remove_tool(self, name: str) -> None:
        """Unregister a tool (KeyError if unknown); sends tools/list_changed."""
        with self._lock:
            del self._tools[name]
        self.notify_changed("tools")

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt and its completions (KeyError if unknown); sends prompts/list_changed."""
        with self._lock:
            del self._prompts[name]
            for key in [k for k in self._completions if k[0] == "ref/prompt" and k[1] == name]:
                del self._completions[key]
        self.notify_changed("prompts")

    def remove_resource(self, uri: str) -> None:
        """Unregister the resource at `uri` (KeyError if unknown); sends
        resources/list_changed, and resources/updated to its subscribers."""
        with self._lock:
            del self._resources[uri]
        self.notify_changed("resources")
        self.notify_updated(uri)

    def remove_resource_template(self, uri_template: str) -> None:
        """Unregister a resource template (KeyError if unknown); sends resources/list_changed."""
        with self._lock:
            del self._templates[uri_template]
        self.notify_changed("resources")

    def set_resource_text(self, uri: str, content: str | bytes, *, name: str | None = None,
                          mime_type: str | None = None) -> None:
        """Make the resource at `uri` return `content` from now on (bytes: a
        blob). An existing resource keeps its name, MIME type and description
        (unless given) and its subscribers get `notifications/resources/updated`;
        a new one (name defaults to the URI) is announced with resources/list_changed."""
        if not isinstance(content, (str, bytes)):
            raise TypeError("content must be str or bytes")

        def fixed() -> str | bytes:
            return content

        with self._lock:
            old = self._resources.get(uri)
            if old is None:
                self._resources[uri] = ResourceDef(uri, name if name is not None else uri, fixed, mime_type, None, None)
            else:
                self._resources[uri] = ResourceDef(
                    uri, name if name is not None else old.name, fixed,
                    mime_type if mime_type is not None else old.mime_type, old.description, old.title)
        if old is None or name is not None or mime_type is not None:
            self.notify_changed("resources")
        if old is not None:
            self.notify_updated(uri)

    # -- change notifications -------------------------------------------------

    def notify_changed(self, kind: str) -> None:
        """Tell every session that the `kind` list ("tools", "prompts" or
        "resources", which covers resource templates) changed.

        Initialize era: `notifications/<kind>/list_changed` related to no
        request (stdio: on stdout; HTTP: on the session's GET stream; in
        process: `send` with related None), once the session's `initialize`
        response went out. Stateless era: on every `subscriptions/listen`
        stream whose filter asked for it, tagged with its subscription id.
        Does nothing when `change_notifications` is False. Returns at once:
        delivery happens on the sessions' worker threads, in order."""
        if kind not in CHANGE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(CHANGE_KINDS)}, not {kind!r}")
        for session in self._live_sessions():
            session._changed(kind)

    def notify_updated(self, uri: str) -> None:
        """Send `notifications/resources/updated` {uri} to the sessions that
        subscribed to `uri` (`resources/subscribe`, or a listen filter's
        `resourceSubscriptions`); see `notify_changed`."""
        if not isinstance(uri, str):
            raise TypeError("uri must be a string")
        for session in self._live_sessions():
            session._updated(uri)

    def end_subscriptions(self, graceful: bool = True, *, wait: bool = True) -> int:
        """End every open `subscriptions/listen` of every session; returns how many.

        `graceful=True`: each gets the notifications already queued for it,
        then its completion result `{"resultType": "complete", "_meta":
        {"io.modelcontextprotocol/subscriptionId": <id>}}` (the response to
        the listen request). `graceful=False`: the server tears it down with
        `notifications/cancelled` {requestId: <id>} and sends no response
        (over HTTP the SSE stream then ends). `wait`: return only once every
        final message was handed to the transport (do not call it from a
        session's `send` callback then)."""
        return sum(session.end_subscriptions(graceful, wait=wait) for session in self._live_sessions())

    def listening(self) -> int:
        """How many `subscriptions/listen` subscriptions are open right now."""
        return sum(session.listening for session in self._live_sessions())

    def _live_sessions(self) -> list[ServerSession]:
        with self._lock:
            return [session for session in self._sessions if not session.closed]

    # -- caching hints and counters -------------------------------------------

    def set_cache_hint(self, method: str, *, ttl_ms: int | None = None, cache_scope: str | None = None,
                       uri: str | None = None) -> None:
        """Stateless era: answer `method` (a cacheable one: server/discover,
        tools/list, prompts/list, resources/list, resources/templates/list,
        resources/read) with this `ttlMs` and/or `cacheScope` instead of the
        server's `ttl_ms`/`cache_scope`; `uri` narrows a resources/read hint
        to one URI (it wins over the method-wide one). Both None: remove the hint."""
        if method not in _CACHEABLE:
            raise ValueError(f"{method!r} is not a cacheable method; choose from {', '.join(sorted(_CACHEABLE))}")
        if uri is not None and method != "resources/read":
            raise ValueError("uri only applies to resources/read")
        if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0):
            raise ValueError("ttl_ms must be a non-negative integer")
        if cache_scope is not None and cache_scope not in CACHE_SCOPES:
            raise ValueError(f"cache_scope must be 'public' or 'private', not {cache_scope!r}")
        with self._lock:
            if ttl_ms is None and cache_scope is None:
                self._cache_hints.pop((method, uri), None)
            else:
                self._cache_hints[(method, uri)] = (ttl_ms, cache_scope)

    def clear_cache_hints(self) -> None:
        with self._lock:
            self._cache_hints.clear()

    def _cache_hint(self, method: str, uri: str | None) -> tuple[int, str]:
        ttl: int | None = None
        scope: str | None = None
        with self._lock:
            for key in ((method, uri), (method, None)) if uri is not None else ((method, None),):
                hint = self._cache_hints.get(key)
                if hint is not None:
                    ttl = hint[0] if ttl is None else ttl
                    scope = hint[1] if scope is None else scope
        return (self.ttl_ms if ttl is None else ttl, self.cache_scope if scope is None else scope)

    def served(self, method: str | None = None) -> int:
        """How many requests for `method` (None: for any method) reached a
        session of this server, whatever their answer (thread-safe)."""
        with self._lock:
            return sum(self._served.values()) if method is None else self._served[method]

    def reset_served(self) -> None:
        with self._lock:
            self._served.clear()

    def _count(self, method: str) -> None:
        with self._lock:
            self._served[method] += 1

    # -- serving ----------------------------------------------------------

    @overload
    def open_session(self, send: Callable[[JSONDict], None]) -> ServerSession: ...

    @overload
    def open_session(self, send: Callable[[JSONDict], None], *, related: Literal[False]) -> ServerSession: ...

    @overload
    def open_session(self, send: RelatedSend, *, related: Literal[True]) -> ServerSession: ...

    def open_session(self, send: Callable[..., None], *, related: bool = False) -> ServerSession:
        """A new connection; `send(message)` delivers each server->client message.

        With `related=True`, `send` is called as `send(message, related_id)`:
        `related_id` is the id of the request the message belongs to (its
        response, and its progress and log notifications), or None for a
        message related to no request (an error answering a message without a
        usable id). Transports that route messages per request (Streamable
        HTTP) use it."""
        return ServerSession(self, send, related=related)

    def input_schema(self, tool: str) -> JSONDict | None:
        """The registered inputSchema of `tool` (None for an unknown tool)."""
        with self._lock:
            found = self._tools.get(tool)
        return found.input_schema if found is not None else None

    def capabilities(self) -> JSONDict:
        notifies = self.change_notifications
        return {
            "tools": {"listChanged": notifies},
            "resources": {"subscribe": notifies, "listChanged": notifies},
            "prompts": {"listChanged": notifies},
            "completions": {},
            "logging": {},
        }

    def server_info(self) -> JSONDict:
        return {"name": self.name, "version": self.version}


def _takes_context(fn: Callable[..., Any], arity: int) -> bool:
    """Whether `fn` accepts one positional argument more than `arity` (the context)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return True
    positional = [p for p in parameters
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return len(positional) > arity


def _normalize_ref_type(ref_type: Any) -> str | None:
    return {"ref/prompt": "ref/prompt", "prompt": "ref/prompt",
            "ref/resource": "ref/resource", "resource": "ref/resource"}.get(ref_type) if isinstance(ref_type, str) else None


Handler = Callable[[_Call], JSONDict]
#: `send(message, related_request_id)` of a session opened with `related=True`.
RelatedSend = Callable[[JSONDict, RequestId | None], None]


class ServerSession:
    """One client connection to a `Server` (see the module docstring)."""

    def __init__(self, server: Server, send: Callable[..., None], *, related: bool = False) -> None:
        self._server = server
        self._send = send
        self._related = related
        self._lock = threading.Lock()
        self._inflight: dict[RequestId, _Call] = {}
        self._legacy_version: str | None = None
        self._client_capabilities: JSONDict = {}
        self._log_level: str | None = None
        self._closed = False
        #: Server-to-client requests awaiting the client's response, by id.
        self._outgoing: dict[RequestId, _Outgoing] = {}
        self._server_ids = itertools.count(1)
        self._send_cond = threading.Condition()
        self._sending = False
        self._sender: int | None = None
        self._pool = WorkerPool(server.max_workers)
        #: Initialize era: set once the initialize response went out (change
        #: notifications flow from then on); resources/subscribe'd URIs.
        self._legacy_ready = False
        self._subscribed: set[str] = set()
        #: Stateless era: open subscriptions/listen subscriptions, by request id.
        self._listens: dict[RequestId, _Listen] = {}
        #: Messages related to no request, delivered in order by one worker job.
        self._outbox: collections.deque[JSONDict] = collections.deque()
        self._draining = False
        with server._lock:
            server._sessions.add(self)

    # -- public interface -------------------------------------------------

    def receive(self, message: dict[str, Any]) -> None:
        """Take one client->server JSON-RPC message; returns without waiting for the work."""
        if self._closed:
            return
        try:
            self._receive(message)
        except Exception:  # never let a bad message break the transport's reader
            _log.exception("failed to handle a client message")

    def close(self) -> None:
        """Stop, cancel in-flight work and join every session thread. Idempotent."""
        with self._lock:
            self._closed = True
            calls = list(self._inflight.values())
            self._inflight.clear()
        with self._send_cond:
            self._send_cond.notify_all()
        with self._server._lock:
            self._server._sessions.discard(self)
        for call in calls:
            call.cancel()
        self._pool.close()
        # A thread the session did not start (a tool's helper reporting
        # progress) may still be inside `send`: wait for it, unless that
        # thread is the one closing.
        me = threading.get_ident()
        with self._send_cond:
            while self._sending and self._sender != me:
                self._send_cond.wait()

    @property
    def protocol_version(self) -> str | None:
        """The legacy revision negotiated by `initialize`, if any."""
        return self._legacy_version

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def listening(self) -> int:
        """How many `subscriptions/listen` subscriptions are open on this session."""
        with self._lock:
            return len(self._listens)

    def end_subscriptions(self, graceful: bool = True, *, wait: bool = True) -> int:
        """End this session's open listens (see `Server.end_subscriptions`); returns how many."""
        with self._lock:
            listens = list(self._listens.values())
        for listen in listens:
            listen.stop("complete" if graceful else "cancel")
        if wait:
            for listen in listens:
                listen.finished.wait()
        return len(listens)

    # -- change notifications -------------------------------------------------

    def _changed(self, kind: str) -> None:
        if not self._server.change_notifications:
            return
        method, key = CHANGE_KINDS[kind]
        with self._lock:
            listens = list(self._listens.values())
            legacy = self._legacy_ready and not self._closed
        for listen in listens:
            if listen.accepted.get(key) is True:
                listen.push(listen.tag(method))
        if legacy:
            self._post_unrelated({"jsonrpc": "2.0", "method": method})

    def _updated(self, uri: str) -> None:
        if not self._server.change_notifications:
            return
        method = "notifications/resources/updated"
        with self._lock:
            listens = list(self._listens.values())
            legacy = self._legacy_ready and not self._closed and uri in self._subscribed
        for listen in listens:
            if uri in listen.accepted.get("resourceSubscriptions", ()):
                listen.push(listen.tag(method, {"uri": uri}))
        if legacy:
            self._post_unrelated({"jsonrpc": "2.0", "method": method, "params": {"uri": uri}})

    def _post_unrelated(self, message: JSONDict) -> None:
        """Send a message related to no request, after those posted before it."""
        with self._lock:
            if self._closed:
                return
            self._outbox.append(message)
            if self._draining:
                return
            self._draining = True
        if not self._pool.submit(self._drain):
            with self._lock:
                self._draining = False
                self._outbox.clear()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if self._closed or not self._outbox:
                    self._outbox.clear()
                    self._draining = False
                    return
                message = self._outbox.popleft()
            self._deliver(message, None)

    # -- incoming messages ------------------------------------------------

    def _receive(self, message: Any) -> None:
        if not isinstance(message, dict):
            self._post_error(None, INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object")
            return
        method = message.get("method")
        has_id = "id" in message
        request_id = message.get("id")
        readable_id = request_id if _is_request_id(request_id) else None
        if method is None:
            if "result" in message or "error" in message:
                self._client_response(readable_id, message)
            else:
                self._post_error(readable_id, INVALID_REQUEST, "Invalid Request: no method")
            return
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if has_id:
                self._post_error(readable_id, INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a string method')
            return
        params = message.get("params", {})
        if not has_id:
            self._notification(method, params if isinstance(params, dict) else {})
            return
        if readable_id is None:
            self._post_error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
            return
        self._server._count(method)
        meta = params.get("_meta") if isinstance(params, dict) else None
        call = _Call(readable_id, method, params if isinstance(params, dict) else {}, meta if isinstance(meta, dict) else {})
        with self._lock:
            if self._closed:
                return
            if readable_id in self._inflight:
                duplicate = True
            else:
                duplicate = False
                self._inflight[readable_id] = call
        if duplicate:
            self._post_error(readable_id, INVALID_REQUEST, f"Invalid Request: request id {readable_id!r} is already in flight")
            return
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
            if "_meta" in params and not isinstance(meta, dict):
                raise RpcError(INVALID_PARAMS, "Invalid params: _meta must be an object")
            handler = self._route(call)
        except RpcError as exc:
            error = exc
            handler = lambda _call: _raise(error)  # noqa: E731
        if not self._pool.submit(lambda: self._run(call, handler)):
            with self._lock:
                self._inflight.pop(call.id, None)

    def _client_response(self, request_id: RequestId | None, message: JSONDict) -> None:
        """The client's answer to a server-to-client request: wake its waiter."""
        with self._lock:
            outgoing = self._outgoing.pop(request_id, None) if request_id is not None else None
        if outgoing is None:
            _log.debug("ignoring a response from the client to no pending request: %r", request_id)
            return
        outgoing.response = message
        outgoing.done.set()

    def _notification(self, method: str, params: JSONDict) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if not _is_request_id(request_id):
                return
            with self._lock:
                call = self._inflight.pop(request_id, None)
            if call is not None:
                _log.debug("request %r cancelled: %s", request_id, params.get("reason"))
                call.cancel()
        elif method == "notifications/initialized":
            _log.debug("client sent notifications/initialized")
        else:
            _log.debug("ignoring notification %s", method)

    def _route(self, call: _Call) -> Handler:
        """Pick the era and the handler for a request; apply session state
        changes now. Raises RpcError for requests answered with an error."""
        server = self._server
        method = call.method
        if META_PROTOCOL_VERSION in call.meta and server.stateless_versions:
            return self._route_stateless(call)
        if self._legacy_version is not None:
            call.version = self._legacy_version
            return self._route_legacy(call)
        if method == "initialize":
            return self._initialize(call)
        if method == "ping" and server.legacy_versions:
            return lambda _call: {}
        if server.stateless_versions:
            raise RpcError(INVALID_PARAMS, f"Invalid params: missing required _meta field {META_PROTOCOL_VERSION!r}")
        if method in _LEGACY_METHODS:
            raise RpcError(INVALID_REQUEST, "Server not initialized")
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _route_stateless(self, call: _Call) -> Handler:
        server = self._server
        version = call.meta[META_PROTOCOL_VERSION]
        if not isinstance(version, str):
            raise RpcError(INVALID_PARAMS, f"Invalid params: _meta {META_PROTOCOL_VERSION!r} must be a string")
        if version not in server.stateless_versions:
            raise RpcError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(server.stateless_versions), "requested": version},
            )
        if not isinstance(call.meta.get(META_CLIENT_CAPABILITIES), dict):
            raise RpcError(INVALID_PARAMS, f"Invalid params: missing required _meta field {META_CLIENT_CAPABILITIES!r}")
        level = call.meta.get(META_LOG_LEVEL)
        if level is not None and level not in _LEVEL_RANK:
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        call.version = version
        call.stateless = True
        call.log_level = level
        if call.method not in _STATELESS_METHODS:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
        if call.method == "subscriptions/listen":
            if not server.change_notifications:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
            call.listen = _Listen(call, _accept_filter(call.params))
            return self._listen
        if call.method in MRTR_METHODS:
            call.mrtr = self._mrtr(call)
        return self._feature_handler(call.method)

    def _mrtr(self, call: _Call) -> _Mrtr:
        """The answers a (retried) stateless request brings: those sealed in
        its `requestState` plus its `inputResponses` to the questions of the
        last round. RpcError -32602 for a malformed or rejected state or answer."""
        params = call.params
        digest = request_digest(call.method, params)
        responses = params.get("inputResponses")
        if responses is not None and not isinstance(responses, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
        token = params.get("requestState")
        if token is None:
            # Nothing was asked as far as this request tells: answers without
            # a state answer no question of ours and are ignored.
            return _Mrtr(digest, {})
        if not isinstance(token, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: requestState must be a string")
        try:
            answers, pending = self._server._sealer.open(token, call.method, digest)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params: requestState rejected ({exc})") from None
        for key, method in pending.items():
            if responses is None or key not in responses:
                continue
            answer = responses[key]
            why = check_answer(method, answer)
            if why is not None:
                raise RpcError(INVALID_PARAMS, f"Invalid params: inputResponses[{key!r}] is not a valid "
                               f"{RESULT_NAMES.get(method, 'result')}: {why}")
            answers[key] = (method, answer)
        return _Mrtr(digest, answers)

    def _route_legacy(self, call: _Call) -> Handler:
        method = call.method
        if method == "initialize":
            raise RpcError(INVALID_REQUEST, "Invalid Request: the session is already initialized")
        if method == "ping":
            return lambda _call: {}
        if method == "logging/setLevel":
            level = call.params.get("level")
            if level not in _LEVEL_RANK:
                raise RpcError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
            with self._lock:
                self._log_level = level
            return lambda _call: {}
        if method in ("resources/subscribe", "resources/unsubscribe"):
            if not self._server.change_notifications:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            uri = call.params.get("uri")
            if not isinstance(uri, str):
                raise RpcError(INVALID_PARAMS, f"Invalid params: {method} needs a string uri")
            with self._lock:
                if method == "resources/subscribe":
                    self._subscribed.add(uri)
                else:
                    self._subscribed.discard(uri)
            return lambda _call: {}
        if method not in _FEATURE_METHODS:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return self._feature_handler(method)

    def _initialize(self, call: _Call) -> Handler:
        server = self._server
        requested = call.params.get("protocolVersion")
        if not server.legacy_versions:
            raise RpcError(
                INVALID_PARAMS,
                f"Unsupported protocol version: this server speaks only {', '.join(server.stateless_versions)} "
                "(per-request _meta, no initialize)",
                {"supported": list(server.stateless_versions), "requested": requested},
            )
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: initialize needs a string protocolVersion")
        negotiated = requested if requested in server.legacy_versions else server.legacy_versions[0]
        capabilities = call.params.get("capabilities")
        with self._lock:
            if self._legacy_version is not None:
                raise RpcError(INVALID_REQUEST, "Invalid Request: the session is already initialized")
            self._legacy_version = negotiated
            self._client_capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        call.version = negotiated
        result: JSONDict = {
            "protocolVersion": negotiated,
            "capabilities": server.capabilities(),
            "serverInfo": server.server_info(),
        }
        if server.instructions is not None:
            result["instructions"] = server.instructions
        return lambda _call: result

    def _feature_handler(self, method: str) -> Handler:
        handler: Handler = {
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "completion/complete": self._complete,
        }[method]
        return handler

    # -- running a request --------------------------------------------------

    def _run(self, call: _Call, handler: Handler) -> None:
        try:
            self._run_call(call, handler)
        finally:
            if call.listen is not None:
                call.listen.finished.set()

    def _run_call(self, call: _Call, handler: Handler) -> None:
        if call.cancelled.is_set():
            self._finish(call, None)
            return
        try:
            try:
                result = handler(call)
            except InputRequired as asked:
                result = self._input_required(call, asked)
            response: JSONDict = {"jsonrpc": "2.0", "id": call.id, "result": self._decorate(call, result)}
        except RpcError as exc:
            response = {"jsonrpc": "2.0", "id": call.id, "error": exc.to_json()}
        except RequestCancelled:
            self._finish(call, None)
            return
        except (ClientError, MissingClientCapability, TimeoutError) as exc:
            # A prompt or resource handler whose question to the client failed.
            response = {"jsonrpc": "2.0", "id": call.id,
                        "error": {"code": INTERNAL_ERROR, "message": f"Internal error: {exc}"}}
        except Exception as exc:
            _log.exception("internal error handling %s", call.method)
            response = {"jsonrpc": "2.0", "id": call.id,
                        "error": {"code": INTERNAL_ERROR, "message": f"Internal error: {exc}"}}
        self._finish(call, response)
        if call.method == "initialize" and not call.stateless and "result" in response:
            with self._lock:
                self._legacy_ready = self._legacy_version is not None

    def _decorate(self, call: _Call, result: JSONDict) -> JSONDict:
        if not call.stateless:
            return result
        out: JSONDict = {"resultType": "complete"}
        out.update(result)
        meta = dict(result.get("_meta") or {})
        meta.setdefault(META_SERVER_INFO, self._server.server_info())
        out["_meta"] = meta
        if call.method in _CACHEABLE and out["resultType"] == "complete":
            uri = call.params.get("uri") if call.method == "resources/read" else None
            ttl, scope = self._server._cache_hint(call.method, uri if isinstance(uri, str) else None)
            out.setdefault("ttlMs", ttl)
            out.setdefault("cacheScope", scope)
        return out

    def _finish(self, call: _Call, response: JSONDict | None) -> None:
        with self._lock:
            if self._inflight.get(call.id) is call:
                del self._inflight[call.id]
        with call.lock:
            call.done = True
            if response is None or call.cancelled.is_set():
                return
            self._deliver(response, call.id)

    def _post_error(self, request_id: RequestId | None, code: int, message: str) -> None:
        response: JSONDict = {"jsonrpc": "2.0"}
        if request_id is not None:
            response["id"] = request_id
        response["error"] = {"code": code, "message": message}
        self._pool.submit(lambda: self._deliver(response, request_id))

    def _deliver(self, message: JSONDict, related: RequestId | None) -> None:
        """Call `send`, one thread at a time, never after close(); `related`
        is the id of the request `message` belongs to (passed on to `send`
        only when the session was opened with `related=True`)."""
        with self._send_cond:
            while self._sending and not self._closed:
                self._send_cond.wait()
            if self._closed:
                return
            self._sending = True
            self._sender = threading.get_ident()
        try:
            if self._related:
                self._send(message, related)
            else:
                self._send(message)
        except Exception:
            _log.exception("the send callback failed")
        finally:
            with self._send_cond:
                self._sending = False
                self._sender = None
                self._send_cond.notify_all()

    # -- notifications from tools -----------------------------------------

    def _progress(self, call: _Call, progress: float, total: float | None, message: str | None) -> None:
        if not _is_number(progress) or (total is not None and not _is_number(total)):
            raise ValueError("progress and total must be numbers")
        if message is not None and not isinstance(message, str):
            raise ValueError("message must be a string")
        if call.progress_token is None:
            return
        params: JSONDict = {"progressToken": call.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        with call.lock:
            if call.last_progress is not None and progress <= call.last_progress:
                raise ValueError(f"progress must increase: {progress} after {call.last_progress}")
            call.last_progress = progress
            if call.done or call.cancelled.is_set():
                return
            self._deliver({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}, call.id)

    def _log(self, call: _Call, level: str, data: Any, logger: str | None) -> None:
        if level not in _LEVEL_RANK:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        threshold = call.log_level if call.stateless else self._log_level
        if threshold is None or _LEVEL_RANK[level] < _LEVEL_RANK[threshold]:
            return
        params: JSONDict = {"level": level}
        if logger is not None:
            params["logger"] = logger
        params["data"] = data
        with call.lock:
            if call.done or call.cancelled.is_set():
                return
            self._deliver({"jsonrpc": "2.0", "method": "notifications/message", "params": params}, call.id)

    # -- asking the client ---------------------------------------------------

    def _ask(self, call: _Call, keys: list[str], questions: list[JSONDict], timeout: float | None) -> list[JSONDict]:
        if call.stateless:
            return self._ask_stateless(call, keys, questions)
        return self._ask_legacy(call, questions, timeout)

    def _ask_stateless(self, call: _Call, keys: list[str], questions: list[JSONDict]) -> list[JSONDict]:
        for question in questions:
            if question["method"] not in ASKABLE_METHODS:
                raise ValueError(f"{question['method']} cannot be asked in a stateless request; "
                                 f"use one of {', '.join(sorted(ASKABLE_METHODS))}")
        missing = missing_capabilities(call.meta.get(META_CLIENT_CAPABILITIES), questions)
        if missing:
            raise RpcError(MISSING_REQUIRED_CLIENT_CAPABILITY,
                           f"Missing required client capability: {describe_capabilities(missing)}",
                           {"requiredCapabilities": missing})
        mrtr = call.mrtr
        if mrtr is None:
            raise RuntimeError(f"{call.method} cannot ask the client for input")
        results: list[JSONDict] = []
        wanted: dict[str, JSONDict] = {}
        for key, question in zip(keys, questions):
            found = mrtr.answers.get(key)
            if found is not None and found[0] == question["method"]:
                mrtr.used[key] = found
                results.append(found[1])
            else:
                wanted[key] = question
        if wanted:
            raise InputRequired(wanted)
        return results

    def _input_required(self, call: _Call, asked: InputRequired) -> JSONDict:
        mrtr = call.mrtr
        if mrtr is None:
            raise RpcError(INTERNAL_ERROR, f"Internal error: {call.method} cannot ask the client for input")
        pending = {key: question["method"] for key, question in asked.requests.items()}
        return {
            "resultType": "input_required",
            "inputRequests": asked.requests,
            "requestState": self._server._sealer.seal(call.method, mrtr.digest, mrtr.used, pending),
        }

    def _shape_legacy(self, call: _Call, question: JSONDict) -> JSONDict:
        """A question in the form of the session's revision."""
        params = question.get("params")
        if question["method"] != "elicitation/create" or params is None:
            return question
        params = dict(params)
        mode = params.get("mode", "form")
        if call.version == "2025-06-18":
            if mode == "url":
                raise MissingClientCapability(
                    {"elicitation": {"url": {}}},
                    "URL mode elicitation needs protocol revision 2025-11-25 or later; this session speaks 2025-06-18",
                )
            params.pop("mode", None)  # 2025-06-18 elicitation has no mode
        elif mode == "url":
            params.setdefault("elicitationId", uuid.uuid4().hex)
        return {**question, "params": params}

    def _ask_legacy(self, call: _Call, questions: list[JSONDict], timeout: float | None) -> list[JSONDict]:
        for question in questions:
            if question["method"] not in ASKABLE_METHODS and question["method"] != "ping":
                raise ValueError(f"{question['method']} is not a request a server sends to a client")
        missing = missing_capabilities(self._client_capabilities, questions)
        if missing:
            raise MissingClientCapability(
                missing, f"The client did not declare the {describe_capabilities(missing)} capability")
        shaped = [self._shape_legacy(call, question) for question in questions]
        registered: list[_Outgoing] = []
        sent: list[_Outgoing] = []
        try:
            for question in shaped:
                outgoing = _Outgoing(f"s-{next(self._server_ids)}", question["method"])
                with self._lock:
                    if self._closed:
                        raise RequestCancelled("the session is closed")
                    self._outgoing[outgoing.id] = outgoing
                registered.append(outgoing)
                with call.pending_lock:
                    call.pending[outgoing.id] = outgoing
                message: JSONDict = {"jsonrpc": "2.0", "id": outgoing.id, "method": question["method"]}
                if "params" in question:
                    message["params"] = question["params"]
                with call.lock:
                    live = not call.done and not call.cancelled.is_set()
                    if live:
                        self._deliver(message, call.id)
                if not live:
                    self._withdraw(call, sent, "the request was cancelled", None)
                    raise RequestCancelled(f"request {call.id!r} was cancelled")
                sent.append(outgoing)
            deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
            for outgoing in sent:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                answered = outgoing.done.wait(remaining)
                if call.cancelled.is_set():
                    self._withdraw(call, sent, "the request was cancelled", None)
                    raise RequestCancelled(f"request {call.id!r} was cancelled while waiting for the client")
                if not answered:
                    if self._withdraw(call, [outgoing], f"no answer within {timeout:g} seconds", call.id):
                        self._withdraw(call, sent, "a related request timed out", call.id)
                        raise TimeoutError(f"the client did not answer {outgoing.method} within {timeout:g} seconds")
                    outgoing.done.wait()  # the answer is arriving right now
        finally:
            with self._lock:
                for outgoing in registered:
                    self._outgoing.pop(outgoing.id, None)
            with call.pending_lock:
                for outgoing in registered:
                    call.pending.pop(outgoing.id, None)
        results: list[JSONDict] = []
        for outgoing in sent:
            response = outgoing.response
            assert response is not None
            if "error" in response:
                error = response["error"]
                if not isinstance(error, dict):
                    error = {}
                code = error.get("code")
                raise ClientError(
                    code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                    str(error.get("message", "the client answered with an error")),
                    error.get("data"),
                )
            result = response.get("result")
            why = check_answer(outgoing.method, result)
            if why is not None:
                raise ClientError(INVALID_PARAMS, f"The client's answer to {outgoing.method} is not a valid "
                                  f"{RESULT_NAMES.get(outgoing.method, 'result')}: {why}")
            assert isinstance(result, dict)
            results.append(result)
        return results

    def _withdraw(self, call: _Call, sent: list[_Outgoing], reason: str, related: RequestId | None) -> bool:
        """Send `notifications/cancelled` for each of `sent` still unanswered
        (and forget it); True if any was. `related` None: the message belongs
        to no request (the one it served was cancelled, its stream is gone)."""
        withdrawn: list[_Outgoing] = []
        with self._lock:
            for outgoing in sent:
                if self._outgoing.pop(outgoing.id, None) is not None:
                    withdrawn.append(outgoing)
        for outgoing in withdrawn:
            message: JSONDict = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": outgoing.id, "reason": reason}}
            if related is None:
                self._deliver(message, None)
                continue
            with call.lock:
                if not call.done and not call.cancelled.is_set():
                    self._deliver(message, related)
        return bool(withdrawn)

    # -- subscriptions/listen (stateless era) ---------------------------------

    def _listen(self, call: _Call) -> JSONDict:
        """Acknowledge, then deliver the subscription's notifications until the
        client cancels (no response) or the server ends it (`_Listen.stop`)."""
        listen = call.listen
        assert listen is not None
        with self._lock:
            if self._closed:
                raise RequestCancelled("the session is closed")
            self._listens[call.id] = listen
        try:
            self._send_on(call, listen.tag("notifications/subscriptions/acknowledged",
                                           {"notifications": listen.accepted}))
            while True:
                with listen.cond:
                    while not listen.queue and listen.end is None and not call.cancelled.is_set():
                        listen.cond.wait()
                    batch = list(listen.queue)
                    listen.queue.clear()
                    end = listen.end
                for message in batch:
                    self._send_on(call, message)
                if call.cancelled.is_set():
                    raise RequestCancelled(f"subscription {call.id!r} was cancelled")
                if end is not None:
                    break
        finally:
            with self._lock:
                self._listens.pop(call.id, None)
        if end == "cancel":
            self._send_on(call, listen.tag("notifications/cancelled",
                                           {"requestId": call.id, "reason": "the server ended the subscription"}))
            raise RequestCancelled(f"subscription {call.id!r} was ended by the server")
        return {"_meta": {META_SUBSCRIPTION_ID: call.id}}

    def _send_on(self, call: _Call, message: JSONDict) -> None:
        """Deliver a message belonging to `call` unless it is finished or cancelled."""
        with call.lock:
            if call.done or call.cancelled.is_set():
                raise RequestCancelled(f"request {call.id!r} was cancelled")
            self._deliver(message, call.id)

    # -- feature handlers ---------------------------------------------------

    def _not_found(self, call: _Call, uri: str) -> RpcError:
        code = INVALID_PARAMS if call.stateless else RESOURCE_NOT_FOUND_LEGACY
        return RpcError(code, "Resource not found", {"uri": uri})

    def _page(self, call: _Call, kind: str, items: list[JSONDict]) -> JSONDict:
        try:
            page, next_cursor = paginate(kind, items, call.params.get("cursor"), self._server.page_size)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid cursor: {exc}") from None
        result: JSONDict = {kind: page}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result

    def _discover(self, call: _Call) -> JSONDict:
        server = self._server
        result: JSONDict = {
            "supportedVersions": list(server.stateless_versions),
            "capabilities": server.capabilities(),
        }
        if server.instructions is not None:
            result["instructions"] = server.instructions
        return result

    def _tools_list(self, call: _Call) -> JSONDict:
        with self._server._lock:
            items = [tool.describe() for tool in self._server._tools.values()]
        return self._page(call, "tools", items)

    def _tools_call(self, call: _Call) -> JSONDict:
        name = call.params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs a string name")
        with self._server._lock:
            tool = self._server._tools.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = call.params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, f"Invalid arguments for tool {name}: arguments must be an object")
        try:
            checked = tool.check_arguments(arguments)
        except ArgumentError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid arguments for tool {name}: {exc}") from None
        try:
            value = tool.fn(checked, ToolContext(self, call))
            return tool.result_from(value)
        except RpcError:
            raise  # a tool may answer with a JSON-RPC error on purpose
        except Exception as exc:
            _log.debug("tool %s failed: %r", name, exc)
            return {"content": [text_content(str(exc) or type(exc).__name__)], "isError": True}

    def _resources_list(self, call: _Call) -> JSONDict:
        with self._server._lock:
            items = [res.describe() for res in self._server._resources.values()]
        return self._page(call, "resources", items)

    def _templates_list(self, call: _Call) -> JSONDict:
        with self._server._lock:
            items = [tpl.describe() for tpl in self._server._templates.values()]
        return self._page(call, "resourceTemplates", items)

    def _resources_read(self, call: _Call) -> JSONDict:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: resources/read needs a string uri")
        with self._server._lock:
            resource = self._server._resources.get(uri)
            templates = list(self._server._templates.values())
        if resource is not None:
            data = resource.fn(ToolContext(self, call)) if resource.with_context else resource.fn()
            return {"contents": [resource_contents(uri, resource.mime_type, data)]}
        for template in templates:
            variables = template.match(uri)
            if variables is None:
                continue
            try:
                found = template.fn(variables, ToolContext(self, call)) if template.with_context else template.fn(variables)
            except LookupError:
                raise self._not_found(call, uri) from None
            if found is None:
                raise self._not_found(call, uri)
            return {"contents": [resource_contents(uri, template.mime_type, found)]}
        raise self._not_found(call, uri)

    def _prompts_list(self, call: _Call) -> JSONDict:
        with self._server._lock:
            items = [prompt.describe() for prompt in self._server._prompts.values()]
        return self._page(call, "prompts", items)

    def _prompts_get(self, call: _Call) -> JSONDict:
        name = call.params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: prompts/get needs a string name")
        with self._server._lock:
            prompt = self._server._prompts.get(name)
        if prompt is None:
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = call.params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, f"Invalid arguments for prompt {name}: arguments must be an object")
        try:
            checked = prompt.check_arguments(arguments)
        except ArgumentError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid arguments for prompt {name}: {exc}") from None
        result: JSONDict = {}
        if prompt.description is not None:
            result["description"] = prompt.description
        value = prompt.fn(checked, ToolContext(self, call)) if prompt.with_context else prompt.fn(checked)
        result["messages"] = prompt.messages_from(value)
        return result

    def _complete(self, call: _Call) -> JSONDict:
        ref = call.params.get("ref")
        argument = call.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: completion/complete needs ref and argument objects")
        arg_name = argument.get("name")
        value = argument.get("value")
        if not isinstance(arg_name, str) or not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: argument needs a string name and value")
        context = call.params.get("context")
        context_args = context.get("arguments") if isinstance(context, dict) else None
        if not isinstance(context_args, dict):
            context_args = {}
        kind = ref.get("type")
        server = self._server
        with server._lock:
            if kind == "ref/prompt":
                key = ref.get("name")
                if not isinstance(key, str) or key not in server._prompts:
                    raise RpcError(INVALID_PARAMS, f"Unknown prompt: {key}")
            elif kind == "ref/resource":
                key = ref.get("uri")
                if not isinstance(key, str) or (key not in server._templates and key not in server._resources):
                    raise RpcError(INVALID_PARAMS, f"Unknown resource or resource template: {key}")
            else:
                raise RpcError(INVALID_PARAMS, f"Invalid params: unknown reference type {kind!r}")
            completer = server._completions.get((kind, key, arg_name))
        values = [str(v) for v in completer(value, dict(context_args))] if completer is not None else []
        return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}


def _raise(error: RpcError) -> JSONDict:
    raise error


_LIST_CHANGED_KEYS = tuple(key for _, key in CHANGE_KINDS.values())


def _accept_filter(params: JSONDict) -> JSONDict:
    """The subset of a `subscriptions/listen` filter the server honours:
    the list_changed flags that are true and `resourceSubscriptions`
    (deduplicated); unknown keys are left out. RpcError -32602 for a missing
    filter or a known key of the wrong type."""
    requested = params.get("notifications")
    if not isinstance(requested, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: subscriptions/listen needs a notifications object")
    accepted: JSONDict = {}
    for key in _LIST_CHANGED_KEYS:
        value = requested.get(key)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise RpcError(INVALID_PARAMS, f"Invalid params: notifications.{key} must be a boolean")
        if value:
            accepted[key] = True
    uris = requested.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise RpcError(INVALID_PARAMS, "Invalid params: notifications.resourceSubscriptions must be an array "
                           "of strings")
        accepted["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return accepted
