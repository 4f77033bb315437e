"""The stdio server of the fork-from-C scenarios (`tests/fork_from_c.py`):
`python tests/servers/fork_peer.py` (reads JSON-RPC lines on stdin).

* `echo`: the demo tool.
* `add_tool(name)`: registers a tool, so listeners get tools/list_changed.
* `test://slow`: answers "fresh". With `--hold-if FILE` and FILE there when
  the server starts, its first read waits (up to 30 s) until `release` is
  called (so a server started later, once FILE is gone, never waits).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from mcp_sync.testing import Server, ToolContext
from mcp_sync.testing.server import serve_stdio


def build(hold: bool = False) -> Server:
    server = Server(name="fork-peer", version="1.0.0")
    first, released = threading.Event(), threading.Event()

    @server.tool(input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    def echo(args: dict[str, Any], ctx: ToolContext) -> str:
        return str(args["text"])

    @server.tool(input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    def add_tool(args: dict[str, Any], ctx: ToolContext) -> str:
        server.tool(name=args["name"])(lambda a, c: "new")
        return "added"

    @server.tool
    def release(args: dict[str, Any], ctx: ToolContext) -> str:
        released.set()
        return "released"

    @server.tool
    def reading(args: dict[str, Any], ctx: ToolContext) -> str:
        """Whether the first read of test://slow has started (waits up to 10 s for it)."""
        return "yes" if first.wait(10) else "no"

    @server.resource("test://slow", "slow")
    def slow() -> str:
        if hold and not first.is_set():
            first.set()
            released.wait(30)
        return "fresh"

    return server


if __name__ == "__main__":
    sys.exit(serve_stdio(build(hold=sys.argv[1:2] == ["--hold-if"] and os.path.exists(sys.argv[2]))))
