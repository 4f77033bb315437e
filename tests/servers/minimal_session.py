"""The POST and DELETE of a minimal initialize-era Streamable HTTP server,
for tests whose point is elsewhere (most often the session's GET stream).

`SessionHandler` answers a notification with 202, `initialize` with its
`capabilities` and a session id (`new_session()`), any other request with
an empty result, and DELETE with 200; a subclass writes `do_GET`.
"""

from __future__ import annotations

import http.server
import json
from typing import Any


class SessionHandler(http.server.BaseHTTPRequestHandler):
    """See the module docstring. Class attributes to override:
    `capabilities`, `server_name`, `mcp_version` (None: the version the
    client asked for)."""

    protocol_version = "HTTP/1.1"
    capabilities: dict[str, Any] = {"logging": {}}
    server_name = "minimal"
    mcp_version: str | None = None

    def log_message(self, *args: Any) -> None:
        pass

    def new_session(self) -> str | None:
        """The `Mcp-Session-Id` of a new session (None: sessionless)."""
        return "s-1"

    def json_answer(self, status: int, payload: dict[str, Any] | None, session: str | None = None) -> None:
        body = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if session is not None:
            self.send_header("Mcp-Session-Id", session)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:
            self.json_answer(202, None)
        elif message["method"] == "initialize":
            version = self.mcp_version or message["params"]["protocolVersion"]
            self.json_answer(200, {"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": version, "capabilities": self.capabilities,
                "serverInfo": {"name": self.server_name, "version": "1"}}}, self.new_session())
        else:
            self.json_answer(200, {"jsonrpc": "2.0", "id": message["id"], "result": {}})

    def do_DELETE(self) -> None:
        self.json_answer(200, None)
