"""The request handlers of the server features: discovery, tools, resources, prompts, completion.

Each handler takes the session and the `Call` being served and returns the
result body, or raises `RpcError` for a JSON-RPC error answer. `HANDLERS`
maps each feature method to its handler; the session picks the era, checks
the method is served in it and runs the handler on a worker thread. The
handlers read the `Server`'s registered definitions under its lock (and
never call user code while holding it); tool, resource and prompt functions
get a `ToolContext` when they take one. A tool's exception becomes an
`isError` result, whatever it is (SystemExit and pytest's `Failed` too,
which are BaseExceptions: on a worker thread they exit nothing and must not
leave the call unanswered), and so does a result JSON cannot encode;
`RpcError` raised by a tool is a JSON-RPC error on purpose, and the
private `InputRequired` unwinds to the session. This module must not know
about eras beyond the error code of a missing resource, nor about how
results are delivered.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from . import _tasks
from ._asking import InputRequired
from ._context import Call, ToolContext
from ._features import ArgumentError, failure_result, paginate, resource_contents
from ._protocol import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, JSONDict, RpcError

if TYPE_CHECKING:
    from ._session import ServerSession

_log = logging.getLogger("mcp_sync.testing")


def _not_found(call: Call, uri: str) -> RpcError:
    code = INVALID_PARAMS if call.stateless else RESOURCE_NOT_FOUND_LEGACY
    return RpcError(code, "Resource not found", {"uri": uri})


def _page(session: ServerSession, call: Call, kind: str, items: list[JSONDict]) -> JSONDict:
    try:
        page, next_cursor = paginate(kind, items, call.params.get("cursor"), session._server.page_size)
    except ValueError as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid cursor: {exc}") from None
    result: JSONDict = {kind: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _discover(session: ServerSession, call: Call) -> JSONDict:
    server = session._server
    result: JSONDict = {
        "supportedVersions": list(server.stateless_versions),
        "capabilities": server.capabilities(),
    }
    if server.instructions is not None:
        result["instructions"] = server.instructions
    return result


def _tools_list(session: ServerSession, call: Call) -> JSONDict:
    with session._server._lock:
        items = [tool.describe() for tool in session._server._tools.values()]
    return _page(session, call, "tools", items)


def _tools_call(session: ServerSession, call: Call) -> JSONDict:
    name = call.params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs a string name")
    with session._server._lock:
        tool = session._server._tools.get(name)
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
    created = _tasks.call_task_tool(session, call, tool, checked)  # a task tool, run as a task
    if created is not None:
        return created
    try:
        value = tool.fn(checked, ToolContext(session, call))
    except (RpcError, InputRequired):
        raise  # a JSON-RPC error on purpose; a question for the client (stateless era)
    except BaseException as exc:  # KeyboardInterrupt too: on a worker thread it is never a user's Ctrl-C
        _log.debug("tool %s failed: %r", name, exc)
        return failure_result(exc)
    return tool.answer(value)


def _resources_list(session: ServerSession, call: Call) -> JSONDict:
    with session._server._lock:
        items = [res.describe() for res in session._server._resources.values()]
    return _page(session, call, "resources", items)


def _templates_list(session: ServerSession, call: Call) -> JSONDict:
    with session._server._lock:
        items = [tpl.describe() for tpl in session._server._templates.values()]
    return _page(session, call, "resourceTemplates", items)


def _resources_read(session: ServerSession, call: Call) -> JSONDict:
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: resources/read needs a string uri")
    with session._server._lock:
        resource = session._server._resources.get(uri)
        templates = list(session._server._templates.values())
    if resource is not None:
        data = resource.fn(ToolContext(session, call)) if resource.with_context else resource.fn()
        return {"contents": [resource_contents(uri, resource.mime_type, data)]}
    for template in templates:
        variables = template.match(uri)
        if variables is None:
            continue
        try:
            found = template.fn(variables, ToolContext(session, call)) if template.with_context else template.fn(variables)
        except LookupError:
            raise _not_found(call, uri) from None
        if found is None:
            raise _not_found(call, uri)
        return {"contents": [resource_contents(uri, template.mime_type, found)]}
    raise _not_found(call, uri)


def _prompts_list(session: ServerSession, call: Call) -> JSONDict:
    with session._server._lock:
        items = [prompt.describe() for prompt in session._server._prompts.values()]
    return _page(session, call, "prompts", items)


def _prompts_get(session: ServerSession, call: Call) -> JSONDict:
    name = call.params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: prompts/get needs a string name")
    with session._server._lock:
        prompt = session._server._prompts.get(name)
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
    value = prompt.fn(checked, ToolContext(session, call)) if prompt.with_context else prompt.fn(checked)
    result["messages"] = prompt.messages_from(value)
    return result


def _complete(session: ServerSession, call: Call) -> JSONDict:
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
    server = session._server
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


#: Feature method -> its handler.
HANDLERS: dict[str, Callable[[ServerSession, Call], JSONDict]] = {
    "server/discover": _discover,
    "tools/list": _tools_list,
    "tools/call": _tools_call,
    "resources/list": _resources_list,
    "resources/templates/list": _templates_list,
    "resources/read": _resources_read,
    "prompts/list": _prompts_list,
    "prompts/get": _prompts_get,
    "completion/complete": _complete,
}

from ._skills import SKILL_HANDLERS  # noqa: E402  (it needs nothing of this module)

HANDLERS.update(SKILL_HANDLERS)
