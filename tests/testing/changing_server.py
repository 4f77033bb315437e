"""A stdio test server whose tools change what it offers, for test_changes:
`python -m tests.testing.changing_server` (reads JSON-RPC lines on stdin)."""

from __future__ import annotations

import sys
from typing import Any

from mcp_sync.testing import Server, ToolContext
from mcp_sync.testing.server import serve_stdio

CONFIG = "test://config"


def build() -> Server:
    server = Server(name="changing", version="1.0.0")
    server.set_resource_text(CONFIG, "v0", name="config", mime_type="text/plain")

    @server.tool(input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    def add_tool(args: dict[str, Any], ctx: ToolContext) -> str:
        """Register a new tool (tools/list_changed)."""
        server.tool(name=args["name"])(lambda a, c: "new")
        return "added"

    @server.tool(input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    def touch(args: dict[str, Any], ctx: ToolContext) -> str:
        """Change the config resource (resources/updated)."""
        server.set_resource_text(CONFIG, args["text"])
        return "touched"

    return server


if __name__ == "__main__":
    sys.exit(serve_stdio(build()))
