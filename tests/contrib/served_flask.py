"""A Flask app using the extension, served by gunicorn in test_flask.py.

Made by a factory, as most Flask apps are. Its one server, "demo", is the
bundled demo server over stdio, named by `${MCP_TEST_MARKER}`. With
`MCP_STARTUP_CHECK=1` the module uses the client at import: under
`--preload`, in gunicorn's master, before the fork.
"""

from __future__ import annotations

import os
import sys

from flask import Flask, request
from flask.typing import ResponseReturnValue

from mcp_sync.contrib.flask import MCP

mcp = MCP()


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["MCP_SERVERS"] = {"demo": {"command": sys.executable,
                                          "args": ["-m", "mcp_sync.testing.server", "--name", "${MCP_TEST_MARKER}"]}}
    app.config["MCP_CLIENT_OPTIONS"] = {"timeout": 20}
    mcp.init_app(app)
    app.register_blueprint(mcp.health_blueprint(), url_prefix="/health")

    @app.get("/echo")
    def echo() -> ResponseReturnValue:
        result = mcp.client("demo").call_tool("echo", {"text": request.args.get("text", "")})
        return {"text": result.text, "pid": os.getpid()}

    @app.get("/client")
    def client() -> ResponseReturnValue:
        """Whether this worker's client is the one the startup check made (in the master, under --preload)."""
        made = mcp.client("demo")
        return {"pid": os.getpid(), "made_at_startup": getattr(made, "made_at_startup", False),
                "methods": sorted(made.stats().requests)}

    return app


app = create_app()

if os.environ.get("MCP_STARTUP_CHECK") == "1":
    with app.app_context():
        startup = mcp.client("demo")
        startup.list_tools()
        startup.made_at_startup = True  # type: ignore[attr-defined]  # a tag the /client view reports
