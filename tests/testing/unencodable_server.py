"""A test server whose handlers answer with values JSON cannot carry, for
test_server: `python -m tests.testing.unencodable_server` serves it over
stdio (reads JSON-RPC lines on stdin)."""

from __future__ import annotations

import sys
from typing import Any

from mcp_sync.testing import RpcError, Server, ToolContext
from mcp_sync.testing.server import serve_stdio


class When:
    """Not JSON: what a handler returns by mistake (a datetime, a model object)."""

    def __repr__(self) -> str:
        return "<When 2026-01-01>"


def build() -> Server:
    server = Server(name="unencodable")

    @server.tool
    def when(args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"content": [{"type": "text", "text": "now"}], "structuredContent": {"at": [1, When()]}}

    @server.tool
    def rpc_data(args: dict[str, Any], ctx: ToolContext) -> Any:
        raise RpcError(-32000, "boom", data={"when": When()})

    @server.tool
    def logs(args: dict[str, Any], ctx: ToolContext) -> Any:
        ctx.log("info", {"obj": When()})
        return "logged"

    @server.tool
    def ok(args: dict[str, Any], ctx: ToolContext) -> str:
        return "fine"

    @server.prompt("when")
    def prompt(args: dict[str, str]) -> Any:
        return [{"role": "user", "content": {"type": "text", "text": "now", "_meta": {"at": When()}}}]

    return server


if __name__ == "__main__":
    sys.exit(serve_stdio(build()))
