"""The typed calls of `Client`: lists, tools, resources, prompts, completion.

Each is a thin layer over `Client.request()`: it checks its arguments,
builds the params, and turns the result into its attrs type. Pagination
and the tool rules that need a definition (output validation, the
`x-mcp-header` parameters of HTTP) live here too. `Calls` is a mixin: the
state it reads (`_tools`, `_schemas`, ...) belongs to `Client`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable

from .errors import (
    InvalidResult,
    OutputValidationError,
    PaginationError,
)
from .options import RequestOptions, check_option_names
from .protocol.headers import (
    HeaderParam,
    InvalidHeaderAnnotation,
    header_params,
    param_headers,
)
from .protocol.schemas import SchemaCache
from .types import (
    CallToolResult,
    CompleteResult,
    DiscoverResult,
    GetPromptResult,
    Page,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger("mcp_sync.client")

# list kind -> (method, result key, item type)
_LISTS: dict[str, tuple[str, str, Any]] = {
    "tools": ("tools/list", "tools", Tool),
    "resources": ("resources/list", "resources", Resource),
    "resource_templates": ("resources/templates/list", "resourceTemplates", ResourceTemplate),
    "prompts": ("prompts/list", "prompts", Prompt),
}


class Calls:
    """The typed request methods; mixed into `Client`."""

    # Owned by Client; declared here for the type checker.
    _mirrors: bool
    _state_lock: threading.Lock
    _tools: dict[str, Tool]
    _schemas: SchemaCache
    _discovered: DiscoverResult | None
    max_pages: int
    timeout: float | None

    def request(self, method: str, params: Mapping[str, Any] | None = None,
                **options: Unpack[RequestOptions]) -> dict[str, Any]:
        raise NotImplementedError  # Client's

    def _request(self, method: str, original: Mapping[str, Any] | None, options: RequestOptions, *,
                 headers: Callable[[], Mapping[str, str] | None] | None = None,
                 refresh_headers: Callable[[], None] | None = None) -> dict[str, Any]:
        raise NotImplementedError  # Client's

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
        return self._mirrors

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
        check_option_names(options)
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        known = [definition]

        def refresh_headers() -> None:
            # The tool may have changed since it was listed: list again.
            self.list_tools(timeout=options.get("timeout", self.timeout))
            known[0] = self._tools.get(name, known[0])

        raw = self._request(
            "tools/call", params, options,
            headers=lambda: self._tool_headers(known[0], arguments),
            refresh_headers=refresh_headers if self._mirrors_headers() else None,
        )
        definition = known[0]
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
