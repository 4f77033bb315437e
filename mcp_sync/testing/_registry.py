"""What a test server offers and how it is configured: `Server`.

It owns the registration API (decorators for tools, resources, resource
templates, prompts and completions, and their removal), the configuration
(name, versions, page size, caching hints, change notifications, worker
count, the `requestState` sealer), the count of requests served, and the
fan-out of change notifications to its live sessions. `open_session(send)`
makes a `ServerSession`, which does the protocol work.

A `Server` is shared, read-mostly and thread-safe: its tables are guarded by
`_lock`, which sessions also take (briefly, never while calling user code or
`send`) to read the definitions. Live sessions are held weakly, so a session
nobody closed does not leak. Nothing here does IO.
"""

from __future__ import annotations

import collections
import inspect
import threading
import weakref
from typing import Any, Callable, Iterable, Literal, Mapping, TypeVar, overload

from ._asking import StateSealer
from ._features import (
    Completer,
    CompletionKey,
    PromptDef,
    ResourceDef,
    TemplateDef,
    ToolDef,
    compile_template,
)
from ._protocol import (
    ALL_VERSIONS,
    CACHE_SCOPES,
    CACHEABLE,
    CHANGE_KINDS,
    LEGACY_VERSIONS,
    OLD_VERSIONS,
    STATELESS_VERSIONS,
    SUPPORTED_VERSIONS,
    JSONDict,
    RequestId,
)
from ._session import ServerSession
from ._skills import SkillShelf
from . import _tasks

_F = TypeVar("_F", bound=Callable[..., Any])

#: `send(message, related_request_id)` of a session opened with `related=True`.
RelatedSend = Callable[[JSONDict, RequestId | None], None]


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
        unknown = [v for v in wanted if v not in ALL_VERSIONS]
        if unknown:
            raise ValueError(f"unsupported protocol version(s) {unknown}; choose from {list(ALL_VERSIONS)}")
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
        self.max_workers = max_workers  # checked by the property's setter
        #: Seals the stateless era's `requestState` (HMAC key: `request_state_key`,
        #: random per Server by default; lifetime: `request_state_ttl` seconds).
        self._sealer = StateSealer(request_state_key, request_state_ttl)
        self.versions: tuple[str, ...] = tuple(v for v in ALL_VERSIONS if v in wanted)
        self.stateless_versions: tuple[str, ...] = tuple(v for v in self.versions if v in STATELESS_VERSIONS)
        self.legacy_versions: tuple[str, ...] = tuple(
            v for v in self.versions if v in LEGACY_VERSIONS or v in OLD_VERSIONS)
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
        #: The Skills extension, made by the first use of `skills`.
        self._skill_shelf: SkillShelf | None = None

    @property
    def max_workers(self) -> int:
        """How many worker threads each session may run handlers on (at least 1)."""
        return self._max_workers

    @max_workers.setter
    def max_workers(self, value: int) -> None:
        # Checked here, where the mistake is made: a session's pool refuses
        # it only when a client connects, far from the line to fix.
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"max_workers must be a positive integer (the worker threads per session), not {value!r}")
        self._max_workers = value

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
        if name is not None:
            _check_str("tool name", name)
            if not name:
                raise ValueError("a tool needs a non-empty name")
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
        _check_str("resource uri", uri)
        _check_str("resource name", name)

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
        _check_str("resource template uri_template", uri_template)
        _check_str("resource template name", name)
        compile_template(uri_template)  # reject unsupported templates now, not when decorating

        def register(fn: _F) -> _F:
            template = TemplateDef(uri_template, name, fn, mime_type, description, title, _takes_context(fn, 1))
            with self._lock:
                self._templates[uri_template] = template
            self.notify_changed("resources")
            return fn

        return register

    @overload
    def prompt(self, name: _F, /) -> _F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        description: str | None = None,
        arguments: Iterable[Mapping[str, Any]] | None = None,
        *,
        title: str | None = None,
    ) -> Callable[[_F], _F]: ...

    def prompt(
        self,
        name: Any = None,
        description: str | None = None,
        arguments: Iterable[Mapping[str, Any]] | None = None,
        *,
        title: str | None = None,
    ) -> Any:
        """Register `fn(args: dict[str, str]) -> str | list` as a prompt
        (decorator; bare `@server.prompt` works too, as for `tool`). `name`
        defaults to the function's name. `arguments` is a list of `{"name",
        "description", "required"}`. A str becomes one user text message;
        list items are str (user text) or `{"role", "content"}` messages.
        `fn(args, ctx)` also gets a `RequestContext` (to ask the client, see
        `ToolContext`)."""
        if callable(name):  # bare `@server.prompt`: `name` is the function
            return self.prompt()(name)
        if name is not None:
            _check_str("prompt name", name)
            if not name:
                raise ValueError("a prompt needs a non-empty name")
        args = [dict(arg) for arg in arguments or ()]
        for arg in args:
            if not isinstance(arg.get("name"), str):
                raise ValueError("every prompt argument needs a string 'name'")

        def register(fn: _F) -> _F:
            prompt_name = name if name is not None else fn.__name__
            with self._lock:
                self._prompts[prompt_name] = PromptDef(prompt_name, fn, description, args, title,
                                                       _takes_context(fn, 1))
            self.notify_changed("prompts")
            return fn

        return register

    def completion(self, ref_type: str, ref: str, argument: str) -> Callable[[_F], _F]:
        """Register `fn(value: str, context: dict[str, str]) -> list[str]`
        completing `argument` of a prompt (`ref_type` "ref/prompt" or
        "prompt", `ref` its name) or of a resource template ("ref/resource"
        or "resource", `ref` the template or URI) (decorator)."""
        kind = _normalize_ref_type(ref_type)
        _check_str("completion ref", ref)
        _check_str("completion argument", argument)
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
        if method not in CACHEABLE:
            raise ValueError(f"{method!r} is not a cacheable method; choose from {', '.join(sorted(CACHEABLE))}")
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

    @property
    def skills(self) -> SkillShelf:
        """The skills this server serves (Skills extension, SEP-2640); see
        `SkillShelf.add`. The extension is declared once a skill is added."""
        with self._lock:
            if self._skill_shelf is None:
                self._skill_shelf = SkillShelf(self)
            return self._skill_shelf

    def capabilities(self) -> JSONDict:
        notifies = self.change_notifications
        capabilities: JSONDict = {
            "tools": {"listChanged": notifies},
            "resources": {"subscribe": notifies, "listChanged": notifies},
            "prompts": {"listChanged": notifies},
            "completions": {},
            "logging": {},
        }
        skills = self._skill_shelf.capability() if self._skill_shelf is not None else None
        if skills is not None:
            capabilities["extensions"] = skills
        if _tasks.store_of(self) is not None:  # the Tasks extension: a task tool is registered
            capabilities["extensions"] = {**capabilities.get("extensions", {}), _tasks.EXTENSION: {}}
        return capabilities

    def server_info(self) -> JSONDict:
        return {"name": self.name, "version": self.version}


def _check_str(what: str, value: Any) -> None:
    """TypeError at the registration for a value a client could not read as a string."""
    if not isinstance(value, str):
        raise TypeError(f"the {what} must be a string, not {type(value).__name__} {value!r}")


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

