"""The requests a `Client` sends: tools, resources, prompts, tasks,
completions, and any request by method name.

`ClientRequests` is a base class of `Client`, kept apart so that each file
says one thing: `client.py` holds the connection's life (open, close,
status, notifications, what was settled) and this file what you ask the
server. It holds no state of its own and reads two attributes `Client`
sets in its constructor: `options` (the `ClientOptions`) and `_pipeline`
(the request pipeline every request goes through: options, the
multi-round loop, cache, admission, retries). Typed calls are built in
`calls.py`; task calls in `tasks.py`, imported on first use.

Every method takes the request options as keyword arguments
(`RequestOptions`: `timeout=`, `progress=`, `meta=`, ...); a misspelt one
is a `TypeError` naming the one meant, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

from .errors import InvalidParams, MissingClientCapability, ResourceNotFound
from .options import ClientOptions, RequestOptions, check_flag, check_options, unknown_names
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

    from .pipeline import Pipeline
    from .tasks import Task

__all__ = ["ClientRequests"]


#: How `call_tool()` says its whole listing lacks a tool the server
#: refused: `mcp-sync` looks for it, so as not to say the same twice.
UNLISTED_TOOL = "the tools the server listed do not include"


class ClientRequests:
    """The request methods of `Client` (see there); not made on its own."""

    options: ClientOptions
    _pipeline: Pipeline

    def request(self, method: str, params: Mapping[str, Any] | None = None,
                **options: Unpack[RequestOptions]) -> dict[str, Any]:
        """Send any request by its method name and return its raw result.

        The protocol's `_meta` is merged into `params["_meta"]` (keys already
        there win; `meta=` wins over both).

        Args:
            method: The JSON-RPC method, e.g. `"tools/list"`.
            params: The request's params, or None for none.

        Returns:
            The result object as the server sent it.

        Raises:
            TypeError: `method` is not a non-empty string or `params` not a
                mapping (nothing is sent).
            ServerError: the server answered with an error (the matching
                subclass, such as `MethodNotFound`).
            RequestTimeout: no answer within the timeout.
            TransportError: the connection failed.

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
        check_options(options)
        return self._pipeline.request(method, params, options)

    def roots_changed(self) -> bool:
        """Tell the server that the roots your ``"roots"`` input handler
        answers have changed, so that it asks for them again.

        Initialize era: sends `notifications/roots/list_changed`, which the
        client may send only when it declared the capability at `connect()`
        with ``client_capabilities={"roots": {"listChanged": True}}``. The
        stateless era (2026-07-28) has no such notification: the server
        asks for roots in each request that needs them.

        Returns:
            True when the notification went out; False when there was
            nothing to tell (the stateless era, or a connection being
            re-established, whose new session asks afresh).

        Raises:
            ValueError: the capability was not declared (nothing is sent).

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

    def discover(self, **options: Unpack[RequestOptions]) -> DiscoverResult:
        """Ask the server for its versions, capabilities and identity
        (`server/discover`, 2026-07-28).

        Returns:
            The server's answer.

        Raises:
            UnsupportedMethod: an initialize-era connection (nothing is sent).
            RequestTimeout: no answer within the timeout.

        Example::

            info = client.discover()
            print(info.supported_versions, info.server_info)
        """
        return self._pipeline.discover(options)

    def ping(self, **options: Unpack[RequestOptions]) -> None:
        """Check that the server answers (`ping`, initialize era).

        Raises:
            UnsupportedMethod: a 2026-07-28 connection, which has no ping
                (nothing is sent).
            RequestTimeout: no answer within the timeout.

        Example::

            client.ping(timeout=5)
        """
        self._pipeline.calls.ping(options)

    def list_page(self, kind: str, cursor: str | None = None, **options: Unpack[RequestOptions]) -> Page:
        """One page of a list, for paging through a long one yourself.

        Args:
            kind: "tools", "resources", "resource_templates" or "prompts".
            cursor: The previous page's `next_cursor`, or None for the first page.

        Returns:
            The page: its `items` and the `next_cursor` (None on the last page).

        Raises:
            ValueError: an unknown `kind` (nothing is sent).

        Example::

            page = client.list_page("tools")
            while page.next_cursor:
                page = client.list_page("tools", page.next_cursor)
        """
        return self._pipeline.calls.list_page(kind, cursor, options)

    def list_tools(self, **options: Unpack[RequestOptions]) -> list[Tool]:
        """Every tool the server offers, following `nextCursor` to the end.

        The definitions are remembered, so that `call_tool()` can check a
        result against the tool's `outputSchema`.

        Returns:
            The tools, in the server's order.

        Raises:
            PaginationError: a cursor came back twice, or more than
                `Limits.max_pages` pages.

        Example::

            for tool in client.list_tools():
                print(tool.name, tool.description)
        """
        tools: list[Tool] = self._pipeline.calls.list_all("tools", options, self.options.limits.max_pages)
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
        """Call a tool and wait for its result.

        A tool that runs and fails is not an exception: its result has
        `is_error` set (`CallToolResult.raise_for_error()` turns it into a
        `ToolError`). When the tool's definition is known (from
        `list_tools()`, or passed as `tool`) and has an `outputSchema`,
        `structured_content` is checked against it.

        Args:
            tool: The tool's name, or its definition from `list_tools()`.
            arguments: The tool's arguments, as a dict (not as keywords of
                this method).
            task: Run the call as a task and return a `Task` handle
                (already completed when the server answered at once): the
                tasks extension (2026-07-28) or the core protocol's task
                augmentation (2025-11-25). A tool whose definition says it
                runs only as a task is called so by itself, and waited for.
                See [Tasks](../tasks.md).
            wait: With `task=True`, wait for the task's result instead of
                returning the handle; `timeout` then bounds the whole wait.

        Returns:
            The `CallToolResult`; a `Task` when `task=True` and not `wait`.

        Raises:
            TypeError: `arguments` is not a mapping, tool arguments were
                given as keywords, an option is misspelt, or `task` or
                `wait` is not True or False (nothing is sent).
            RequestTimeout: no result within `timeout` (the request is
                cancelled on the server).
            OutputValidationError: `structured_content` does not match the
                tool's `outputSchema`.
            ServerError: the server refused the request (for example
                `InvalidParams` for an unknown tool).
            InputRequired: the server asked for input the client could not
                give (see [When the server asks back](../input.md)).
            ExtensionNotDeclared: `task=True` with a server that offers no
                tasks (nothing is sent).
            TransportError: the connection failed.

        Example::

            result = client.call_tool("countdown", {"steps": 3},
                                      progress=lambda p: print(p.progress, p.total))
            print(result.text)
        """
        if options:  # checked first, so that tool arguments given as keywords are told so
            check_options(options, tool=tool if isinstance(tool, str) else getattr(tool, "name", None))
        pipeline = self._pipeline
        try:
            catalog = pipeline.catalog
            if (not options and pipeline.plain_calls and type(tool) is str and tool and task is False
                    and wait is False and not catalog.list_before_calling and not catalog.task_required):
                return pipeline.call_tool_plain(tool, arguments)  # the usual call: nothing below applies to it
            check_flag("task", task)
            check_flag("wait", wait)
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
            return pipeline.calls.call_tool(tool, arguments, options, max_pages=self.options.limits.max_pages,
                                            timeout=self.options.timeouts.request)
        except MissingClientCapability as exc:
            from . import tasks as _tasks

            better = _tasks.explained(exc)  # a tool that only runs as a task says so
            if better is not exc:
                try:
                    raise better from None
                finally:
                    del better  # the traceback holds this frame: no reference cycle through it
            del better  # (as above)
            raise
        except InvalidParams as exc:
            # The server refused a call of a tool its last whole listing
            # did not hold: most likely a misspelt name. Said as a fact about
            # that listing (the tool may be one the server keeps out of it).
            # The error is this call's own (each answer builds its own), so
            # it is amended in place.
            listed = pipeline.catalog.listed_names  # (one read: one listing)
            if (exc.method == "tools/call" and type(tool) is str and listed is not None and tool not in listed
                    and not isinstance(exc, ResourceNotFound)):
                exc.args = (f"{exc.args[0]}; {UNLISTED_TOOL} {unknown_names([tool], listed)}",)
            raise

    def get_task(self, task_id: str, **options: Unpack[RequestOptions]) -> Task:
        """Re-attach to a task by its id (`tasks/get`): from another client,
        process, or a later request of a web app. The result is typed but
        not checked against the tool's `outputSchema`.

        Args:
            task_id: The id of a task this client's server keeps
                (`Task.id` of the task that was started).

        Returns:
            A handle on the task as it stands now.

        Raises:
            ExtensionNotDeclared: the server offers no tasks (nothing is sent).
            ServerError: the server does not know the task.

        Example::

            task = client.get_task(saved_id)
            result = task.wait(timeout=60)
        """
        check_options(options)
        from . import tasks as _tasks

        return _tasks.get_task(self._pipeline, task_id, options)

    def list_tasks(self, **options: Unpack[RequestOptions]) -> list[Task]:
        """Every task the server keeps for this client (`tasks/list`,
        following `nextCursor`). Only 2025-11-25 servers that declare the
        `tasks.list` capability offer it.

        Returns:
            A handle on each task.

        Raises:
            ExtensionNotDeclared: the server does not offer the list
                (nothing is sent).

        Example::

            for task in client.list_tasks():
                print(task.id, task.status)
        """
        check_options(options)
        from . import tasks as _tasks

        return _tasks.list_tasks(self._pipeline, options)

    def list_resources(self, **options: Unpack[RequestOptions]) -> list[Resource]:
        """Every direct resource, following `nextCursor` to the end.

        Returns:
            The resources, in the server's order.

        Raises:
            PaginationError: a cursor came back twice, or too many pages.

        Example::

            uris = [r.uri for r in client.list_resources()]
        """
        resources: list[Resource] = self._pipeline.calls.list_all("resources", options, self.options.limits.max_pages)
        return resources

    def list_resource_templates(self, **options: Unpack[RequestOptions]) -> list[ResourceTemplate]:
        """Every resource template, following `nextCursor` to the end.

        Returns:
            The templates, in the server's order.

        Raises:
            PaginationError: a cursor came back twice, or too many pages.

        Example::

            templates = [t.uri_template for t in client.list_resource_templates()]
        """
        templates: list[ResourceTemplate] = self._pipeline.calls.list_all("resource_templates", options, self.options.limits.max_pages)
        return templates

    def read_resource(self, uri: str, **options: Unpack[RequestOptions]) -> ReadResourceResult:
        """Read a resource by its URI.

        Args:
            uri: The resource's URI, e.g. from `list_resources()` or a
                resource link in a tool's result.

        Returns:
            The contents (`.text` joins the text parts).

        Raises:
            ResourceNotFound: the server has no such resource.
            RequestTimeout: no answer within the timeout.

        Example::

            print(client.read_resource("demo://readme").text)
        """
        return self._pipeline.calls.read_resource(uri, options)

    def list_prompts(self, **options: Unpack[RequestOptions]) -> list[Prompt]:
        """Every prompt, following `nextCursor` to the end.

        Returns:
            The prompts, in the server's order.

        Raises:
            PaginationError: a cursor came back twice, or too many pages.

        Example::

            names = [p.name for p in client.list_prompts()]
        """
        prompts: list[Prompt] = self._pipeline.calls.list_all("prompts", options, self.options.limits.max_pages)
        return prompts

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Unpack[RequestOptions],
    ) -> GetPromptResult:
        """Render a prompt with its arguments.

        Args:
            name: The prompt's name.
            arguments: The prompt's arguments; MCP prompt arguments are strings.

        Returns:
            The rendered messages.

        Raises:
            InvalidParams: an unknown prompt or a missing argument, as the
                server says.

        Example::

            prompt = client.get_prompt("greet", {"name": "Ada"})
            print(prompt.messages[0].content)
        """
        return self._pipeline.calls.get_prompt(name, arguments, options)

    def complete(
        self, ref: Prompt | ResourceTemplate | Mapping[str, Any], argument: str, value: str,
        *, context: Mapping[str, str] | None = None, **options: Unpack[RequestOptions],
    ) -> CompleteResult:
        """Suggestions for one argument of a prompt or resource template
        (`completion/complete`).

        Args:
            ref: A `Prompt`, a `ResourceTemplate`, or a wire reference such
                as ``{"type": "ref/prompt", "name": "greet"}``.
            argument: The argument's name.
            value: What has been typed so far.
            context: The values of arguments already chosen.

        Returns:
            The suggested `values` (and `total`, `has_more` when the server
            says).

        Example::

            client.complete({"type": "ref/prompt", "name": "greet"}, "style", "f").values
        """
        return self._pipeline.calls.complete(ref, argument, value, context, options)
