"""The typed calls behind `Client`'s methods: lists, tools, resources,
prompts, completion.

Two parts, both owned by a `Client`:

- `ToolCatalog` keeps the tool definitions the client has seen listed and
  applies the rules that need a definition: output validation against an
  `outputSchema`, and the `x-mcp-header` parameters that HTTP mirrors into
  headers. Its table is replaced whole under its own lock, never mutated in
  place, so readers need no lock.
- `TypedCalls` checks arguments, builds params, sends them through the
  function it was given (the request pipeline's `request`) and turns the result into
  its attrs type. It holds no state of its own beyond the catalog.

`Client` composes them: each public method checks nothing and delegates, so
the client's docstrings stay where users read them and this module can be
tested with any send function.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Protocol

from .errors import (
    InvalidResult,
    OutputValidationError,
)
from .options import RequestOptions, check_options, check_prompt_arguments, check_tool_arguments
from .protocol.headers import (
    HeaderParam,
    InvalidHeaderAnnotation,
    header_params,
    param_headers,
)
from .protocol import pagination
from .protocol.schemas import SchemaCache, Unchecked
from .types import (
    CallToolResult,
    CompleteResult,
    DiscoverResult,
    GetPromptResult,
    ItemList,
    Page,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
    tools_from_wire,
)

log = logging.getLogger("mcp_sync.client")

# list kind -> (method, result key, item type)
_LISTS: dict[str, tuple[str, str, Any]] = {
    "tools": ("tools/list", "tools", Tool),
    "resources": ("resources/list", "resources", Resource),
    "resource_templates": ("resources/templates/list", "resourceTemplates", ResourceTemplate),
    "prompts": ("prompts/list", "prompts", Prompt),
}

HeadersFn = Callable[[], "Mapping[str, str] | None"]


class FinishFn(Protocol):
    """How `call_tool_raw`'s caller types a `tools/call` result and checks
    its output: `deadline` (a `time.monotonic()` instant, the call's) bounds
    the output schema's patterns; None for a result that came later (a
    task's), which `SchemaCache`'s own bound then covers."""

    def __call__(self, wire: Mapping[str, Any], /, *, deadline: float | None = None) -> CallToolResult: ...


def call_deadline(started: float, options: RequestOptions, timeout: float | None) -> float | None:
    """The deadline of a call started at `started` with these options
    (`timeout`: the client's), for its output check: None when it has no
    timeout, or when progress may restart it (`reset_timeout_on_progress`)."""
    if options.get("reset_timeout_on_progress"):
        return None
    limit = options.get("timeout", timeout)
    return None if limit is None else started + limit


class SendFn(Protocol):
    """How `TypedCalls` sends: the client's request path (multi-round input,
    retries, cache), with per-attempt transport headers for `tools/call`."""

    def __call__(self, method: str, params: Mapping[str, Any] | None, options: RequestOptions, /, *,
                 headers: HeadersFn | None = None,
                 refresh_headers: Callable[[], None] | None = None,
                 extensions: Mapping[str, Any] | None = None) -> dict[str, Any]: ...


class ToolCatalog:
    """The tools a client has seen listed, by name, and the rules that need a
    tool's definition."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: The known tools by name. Read without the lock: replaced whole
        #: (under it) by `remember`, never changed in place.
        self.tools: dict[str, Tool] = {}
        #: The names of the known tools that run only as tasks (2025-11-25
        #: `execution.taskSupport: "required"`); replaced whole, never changed.
        self.task_required: frozenset[str] = frozenset()
        # Set when a connection is published: its server runs tools as tasks
        # of the core protocol (2025-11-25), so a tool not yet listed may be
        # one that runs only as a task: `call_tool` lists the tools first,
        # once (cleared by any complete listing).
        self.list_before_calling = False
        #: The names of every tool of the last whole listing (every page),
        #: those left out as unusable included; None before one. Only a name
        #: missing from it says the server lists no such tool. Replaced
        #: whole (one read sees one listing), never changed in place.
        self.listed_names: frozenset[str] | None = None
        # The Tool objects, by name, that passed the x-mcp-header check of a
        # mirroring transport: one listed again unchanged is the same object
        # (see `listed`) and needs no second walk of its schema. Only ever
        # added to, or replaced whole by `remember` (then pruned to the
        # known tools), so an entry is never wrong, at worst missing.
        self._headers_checked: dict[str, Tool] = {}
        self.schemas = SchemaCache()
        # Set when a connection is published: whether its transport mirrors
        # tool parameters into headers (Streamable HTTP, 2026-07-28).
        self.mirrors_headers = False
        # Set likewise: whether its revision has structured tool output
        # (2025-06-18 on). Before, an `outputSchema` an out-of-spec server
        # lists is not one the revision knows, so output is not checked.
        self.structured_output = True

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def remember(self, tools: Sequence[Tool], *, listed_names: frozenset[str] | None = None) -> None:
        """Keep `tools` over the known ones; or, for a whole listing
        (`listed_names`: the names of all its items, those the client
        could not use included), instead of them."""
        replace = listed_names is not None
        with self._lock:
            known = {} if replace else dict(self.tools)
            known.update([(tool.name, tool) for tool in tools])
            self.tools = known
            # (`Tool.task_support == "required"`, read from the field: this
            # runs on every listing, once per tool.)
            self.task_required = frozenset([name for name, tool in known.items() if tool.execution is not None
                                            and tool.execution.get("taskSupport") == "required"])
            if listed_names is not None:
                self.list_before_calling = False
                self.listed_names = listed_names
            self._headers_checked = {name: tool for name, tool in self._headers_checked.items()
                                     if known.get(name) is tool}
            # One compiled validator per known tool with an outputSchema.
            self.schemas.hold(len([tool for tool in known.values() if tool.output_schema is not None]))

    def after_fork(self) -> None:
        """In a child after `os.fork()`: a parent thread may have held the
        lock at the fork; the table itself is still right."""
        self._lock = threading.Lock()
        self.schemas = SchemaCache()
        self.schemas.hold(sum(1 for tool in self.tools.values() if tool.output_schema is not None))

    def listed(self, items: list[Any]) -> list[Tool]:
        """The usable tools of one `tools/list` page's wire items. A
        definition equal to the one known by its name gives back the known
        `Tool` (see `tools_from_wire`): relisting unchanged tools builds no
        second catalog beside the first, and leaves the garbage collector
        no new one to scan."""
        return self.usable(tools_from_wire(items, self.tools))

    def usable(self, tools: list[Tool]) -> list[Tool]:
        """Listed tools minus those an HTTP mirroring transport cannot call.
        A tool known from before is checked again unless it passed on a
        mirroring transport: the transport may have changed since."""
        if not self.mirrors_headers:
            return tools
        checked = self._headers_checked
        kept = []
        for tool in tools:
            if checked.get(tool.name) is not tool:
                if self._header_params_of(tool, listed=True) is None:
                    continue
                checked[tool.name] = tool
            kept.append(tool)
        return kept

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

    def headers_for(self, definition: Tool | None, arguments: Mapping[str, Any] | None) -> dict[str, str] | None:
        """`Mcp-Param-*` headers for a call, on transports that mirror them."""
        if definition is None or not self.mirrors_headers:
            return None
        found = self._header_params_of(definition, listed=False)
        return param_headers(found, arguments) if found else None

    def finish_call(self, name: str, definition: Tool | None, wire: Mapping[str, Any], *,
                    deadline: float | None = None) -> CallToolResult:
        """A `tools/call` result typed, its structured content checked
        against the tool's `outputSchema` when the definition is known.
        `deadline` is the call's (see `check_output`)."""
        result = CallToolResult.from_wire(wire)
        if (definition is not None and definition.output_schema is not None and not result.is_error
                and self.structured_output):
            self.check_output(name, definition.output_schema, result, deadline=deadline)
        return result

    def check_output(self, name: str, schema: Mapping[str, Any], result: CallToolResult, *,
                     deadline: float | None = None) -> None:
        """`OutputValidationError` unless `result` matches `schema`. The
        schema's patterns get until `deadline` (a `time.monotonic()`
        instant; None: `SchemaCache`'s own bound); one still matching then
        is cut off and the result refused as not checked, never waited on."""
        if result.structured_content is None:
            raise OutputValidationError(
                f"tool {name!r} declares an outputSchema but returned no structuredContent",
                result=result.raw, errors=["structuredContent is missing"],
            )
        problems = self.schemas.errors(schema, result.structured_content, deadline=deadline)
        if problems and isinstance(problems[0], Unchecked):
            raise OutputValidationError(
                f"tool {name!r} returned structuredContent that could not be checked against its outputSchema: "
                f"{problems[0]}. The result as received is this error's .result; to call the tool without "
                f"checking its output, pass a definition without the outputSchema: call_tool({{'name': {name!r}}}, ...)",
                result=result.raw, errors=problems,
            )
        if problems:
            raise OutputValidationError(
                f"tool {name!r} returned structuredContent that does not match its outputSchema: {problems[0]}",
                result=result.raw, errors=problems,
            )


class TypedCalls:
    """The typed requests, sent through `send` (see `SendFn`)."""

    def __init__(self, send: SendFn, catalog: ToolCatalog) -> None:
        self._send = send
        self.catalog = catalog

    def request(self, method: str, params: Mapping[str, Any] | None, options: RequestOptions) -> dict[str, Any]:
        check_options(options)
        return self._send(method, params, options)

    def discover(self, options: RequestOptions) -> DiscoverResult:
        return DiscoverResult.from_wire(self.request("server/discover", None, options))

    def ping(self, options: RequestOptions) -> None:
        self.request("ping", None, options)

    def list_page(self, kind: str, cursor: str | None, options: RequestOptions, *, remember: bool = True) -> Page:
        """One page. `list_all` passes remember=False and remembers the
        whole listing once at its end: merging page by page would copy the
        growing table for every page (100 pages of 100 tools: half a
        million copied entries)."""
        if kind not in _LISTS:
            raise ValueError(f"kind must be one of {', '.join(_LISTS)}, not {kind!r}")
        if cursor is not None and not isinstance(cursor, str):
            raise TypeError("cursor must be a string")
        method, key, item_type = _LISTS[kind]
        result = self.request(method, {"cursor": cursor} if cursor is not None else None, options)
        items = result.get(key)
        if not isinstance(items, list):
            raise InvalidResult(f"{method}: the result has no {key!r} list")
        # One bad tool definition is left out with a warning (see tools_from_wire).
        typed = self.catalog.listed(items) if kind == "tools" else [item_type.from_wire(item) for item in items]
        next_cursor = result.get("nextCursor")
        if next_cursor is not None and not isinstance(next_cursor, str):
            raise InvalidResult(f"{method}: nextCursor is not a string")
        if kind == "tools" and remember:
            self.catalog.remember(typed)
        return Page(items=typed, next_cursor=next_cursor, raw=result)

    def list_all(self, kind: str, options: RequestOptions, max_pages: int) -> list[Any]:
        items: list[Any] = ItemList()  # a plain list that Jupyter shows as a table
        names: set[str] = set()  # (tools) every listed name, those left out as unusable too

        def fetch(cursor: str | None) -> tuple[list[Any], str | None]:
            page = self.list_page(kind, cursor, options, remember=False)
            if kind == "tools":
                for item in page.raw["tools"]:  # (a loop: no Python call per item, see test_call_budget)
                    name = item.get("name") if isinstance(item, dict) else None
                    if isinstance(name, str):
                        names.add(name)
            return page.items, page.next_cursor

        for page_items in pagination.pages(_LISTS[kind][0], fetch, max_pages):
            items.extend(page_items)
        if kind == "tools":
            self.catalog.remember(items, listed_names=frozenset(names))
        return items

    def call_tool(self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None,
                  options: RequestOptions, *, max_pages: int, timeout: float | None) -> CallToolResult:
        """`timeout` and `max_pages` are the client's, for the listing that
        refreshes a tool's definition after a header mismatch."""
        started = time.monotonic()
        raw, finish = self.call_tool_raw(tool, arguments, options, max_pages=max_pages, timeout=timeout)
        if raw.get("resultType") == "task":
            raise InvalidResult("tools/call: the server answered with a task, which the call did not ask for")
        return finish(raw, deadline=call_deadline(started, options, timeout))

    def call_tool_raw(
        self, tool: str | Tool | Mapping[str, Any], arguments: Mapping[str, Any] | None,
        options: RequestOptions, *, max_pages: int, timeout: float | None,
        extensions: Mapping[str, Any] | None = None, task: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, Any], FinishFn]:
        """`call_tool` before its result is typed: the raw result (maybe a
        task, see `tasks`) and the function that types a `CallToolResult`
        wire object and checks its output, for the result now or a task's
        result later (see `FinishFn`). `task` goes out as `params.task`
        (2025-11-25)."""
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
            definition = self.catalog.get(name)
        else:
            raise TypeError("tool must be a tool name, a Tool, or a tool definition mapping")
        check_tool_arguments(arguments)
        check_options(options)
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if task is not None:
            params["task"] = dict(task)
        catalog = self.catalog
        known, headers, refresh_headers = self.header_hooks(name, definition, arguments,
                                                             options.get("timeout", timeout), max_pages)
        raw = self._send("tools/call", params, options, headers=headers, refresh_headers=refresh_headers,
                         extensions=extensions)

        def finish(wire: Mapping[str, Any], /, *, deadline: float | None = None) -> CallToolResult:
            return catalog.finish_call(name, known[0], wire, deadline=deadline)

        return raw, finish

    def header_hooks(
        self, name: str, definition: Tool | None, arguments: Mapping[str, Any] | None, timeout: float | None,
        max_pages: int,
    ) -> tuple[list[Tool | None], HeadersFn, Callable[[], None] | None]:
        """What a `tools/call` needs for the `Mcp-Param-*` headers of each
        attempt: the definition it knows (a one-item list, updated when the
        tool is listed again), the headers function, and the refresh that
        lists the tools again after a -32020 (None when the transport
        mirrors no headers)."""
        catalog = self.catalog
        known = [definition]

        def refresh_headers() -> None:
            # The tool may have changed since it was listed: list again.
            self.list_all("tools", {"timeout": timeout}, max_pages)
            known[0] = catalog.get(name) or known[0]

        return (known, lambda: catalog.headers_for(known[0], arguments),
                refresh_headers if catalog.mirrors_headers else None)

    def read_resource(self, uri: str, options: RequestOptions) -> ReadResourceResult:
        if not isinstance(uri, str) or not uri:
            raise TypeError("uri must be a non-empty string")
        return ReadResourceResult.from_wire(self.request("resources/read", {"uri": uri}, options))

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None, options: RequestOptions) -> GetPromptResult:
        if not isinstance(name, str) or not name:
            raise TypeError("name must be a non-empty string")
        params: dict[str, Any] = {"name": name}
        check_prompt_arguments(arguments)
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return GetPromptResult.from_wire(self.request("prompts/get", params, options))

    def complete(self, ref: Prompt | ResourceTemplate | Mapping[str, Any], argument: str, value: str,
                 context: Mapping[str, str] | None, options: RequestOptions) -> CompleteResult:
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
        return CompleteResult.from_wire(self.request("completion/complete", params, options))
