"""A Flask app that calls an MCP server: one client per worker process.

Serve it with gunicorn (from this folder)::

    gunicorn --threads 8 flask_app:app
    gunicorn --preload --workers 2 --threads 8 flask_app:app

    curl 'http://127.0.0.1:8000/echo?text=hello'

The request threads of a worker share one `mcp_sync.Client`. It is made on
the first request that needs it (under a lock, so two threads never make
two) and closed when the process exits.

`MCP_SERVER` says which server to call: a URL (Streamable HTTP) or a
command line (stdio); by default the bundled demo server over stdio, one
server process per worker. With `MCP_STARTUP_CHECK=1` the app pings the
server when it is imported (it lists the tools), so that a misconfigured deployment fails at
start. Under `--preload` that import happens in gunicorn's master, before
it forks the workers: the client made there is inherited by every worker,
and each worker's copy lets go of what it inherited and reconnects on its
first call (its own server process, its own HTTP connections).
"""

from __future__ import annotations

import atexit
import os
import shlex
import sys
import threading

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue

import mcp_sync

app = Flask(__name__)

_client: mcp_sync.Client | None = None
_client_pid = 0  # the process that made the client (gunicorn's master under --preload)
_client_lock = threading.Lock()


def server_target() -> str | list[str]:
    """`MCP_SERVER`: a URL, or a command line; the demo server by default."""
    configured = os.environ.get("MCP_SERVER", "")
    if configured.startswith(("http://", "https://")):
        return configured
    if configured:
        return shlex.split(configured)
    return [sys.executable, "-m", "mcp_sync.testing"]


def mcp() -> mcp_sync.Client:
    """The client of this process, connected on first use."""
    global _client, _client_pid
    with _client_lock:
        if _client is None:
            _client = mcp_sync.connect(server_target(), timeout=10)
            _client_pid = os.getpid()
            # Runs in every process that has the client: in a forked worker,
            # close() ends only that worker's own connection.
            atexit.register(_client.close)
        return _client


@app.get("/echo")
def echo() -> ResponseReturnValue:
    text = request.args.get("text", "")
    try:
        result = mcp().call_tool("echo", {"text": text})
    except TimeoutError:
        return jsonify(error="the MCP server did not answer in time"), 504
    except mcp_sync.McpError as exc:
        return jsonify(error=str(exc)), 502
    if result.is_error:
        return jsonify(error=result.text), 502
    return jsonify(text=result.text, pid=os.getpid(), client_made_in=_client_pid)


@app.get("/health")
def health() -> ResponseReturnValue:
    client = mcp()
    return jsonify(pid=os.getpid(), client_made_in=_client_pid, status=client.status.value,
                   stats=client.stats().as_dict())


if os.environ.get("MCP_STARTUP_CHECK") == "1":
    if "echo" not in {tool.name for tool in mcp().list_tools()}:
        raise SystemExit("the MCP server has no 'echo' tool")
