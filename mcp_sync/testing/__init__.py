"""A small, spec-faithful MCP server for in-process tests, the CLI demo and users' tests.

Standard library only; it shares no code with the client, so it can check it.

* `Server`: register tools, resources, resource templates, prompts and
  completions with its decorators; `Server.open_session(send)` serves one
  connection in-process (this is what `mcp_sync`'s memory transport calls).
* `ToolContext`: what a tool gets besides its arguments (progress, logging,
  cancellation, protocol version, request `_meta`).
* `RpcError`: raise it from a tool to answer with a JSON-RPC error.
* Asking the client (`ctx.elicit`, `ctx.elicit_url`, `ctx.sample`,
  `ctx.list_roots`, `ctx.ping_client`, `ctx.ask_all`) works in both eras;
  failures raise `ClientError`, `MissingClientCapability`,
  `RequestCancelled` or `TimeoutError` (see `ToolContext`).
* Change notifications: `Server.notify_changed(kind)`, `notify_updated(uri)`
  (also sent when something is registered or removed: `remove_tool`,
  `remove_prompt`, `remove_resource`, `remove_resource_template`,
  `set_resource_text`); legacy sessions get list_changed after `initialize`
  and resources/updated after `resources/subscribe`; stateless clients get
  them on `subscriptions/listen` streams (`end_subscriptions()`, `listening()`).
* Caching hints: `Server(ttl_ms=, cache_scope=)`, `set_cache_hint()`;
  `served(method)` counts the requests that reached the server.
* `demo_server()`: the demo server used by the tests and the CLI.
* `SUPPORTED_VERSIONS`: the protocol revisions the server speaks by default,
  newest first; `Server(versions=["2025-03-26"])` (or `"2024-11-05"`) speaks
  an older initialize-era revision too, with that revision's result shapes.

Over stdio: `python -m mcp_sync.testing.server` (see `mcp_sync.testing.server`).
Over Streamable HTTP: `HTTPServer(server).start()` serves it on 127.0.0.1
(both protocol eras), or `python -m mcp_sync.testing.server --http 0`;
`gate=` sees each request first and may answer it instead (`Gated`,
`GateAnswer`).

Example::

    from mcp_sync.testing import Server

    server = Server(name="calc")

    @server.tool(input_schema={"type": "object", "properties": {"x": {"type": "number"}},
                               "required": ["x"]})
    def double(args, ctx):
        return str(args["x"] * 2)
"""

from ._asking import ClientError, MissingClientCapability, RequestCancelled
from ._context import RequestContext, ToolContext
from ._protocol import SUPPORTED_VERSIONS, RpcError
from ._registry import Server
from ._session import ServerSession
from .demo import demo_server
from ._loopback import RecordedRequest
from ._streamable import GateAnswer, Gated, HTTPServer
from ._tasks import TaskContext, close_tasks, task_tool

__all__ = [
    "SUPPORTED_VERSIONS", "ClientError", "GateAnswer", "Gated", "HTTPServer", "MissingClientCapability", "RecordedRequest",
    "RequestCancelled", "RequestContext", "RpcError", "Server", "ServerSession", "TaskContext", "ToolContext",
    "close_tasks", "demo_server", "task_tool",
]
