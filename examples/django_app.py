"""A Django app that calls an MCP server: one client per worker process.

A whole Django project in one file, to keep the recipe short; in a project
of your own, `mcp()` goes in a module of one of your apps (say
`myapp/mcp.py`) and the views import it. Serve it with gunicorn (from this
folder)::

    gunicorn --threads 8 django_app
    gunicorn --preload --workers 2 --threads 8 django_app

    curl 'http://127.0.0.1:8000/echo?text=hello'

The request threads of a worker share one `mcp_sync.Client`, made on the
first request that needs it (under a lock) and closed when the process
exits. `MCP_SERVER` says which server to call: a URL (Streamable HTTP) or a
command line (stdio); by default the bundled demo server over stdio. With
`MCP_STARTUP_CHECK=1` the module lists the server's tools when it is
imported; under `--preload` that happens in gunicorn's master, and each
forked worker's inherited client reconnects on its first call.
"""

from __future__ import annotations

import atexit
import os
import shlex
import sys
import threading

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="recipe-only-not-secret",
    INSTALLED_APPS=[],
    MIDDLEWARE=[],
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after settings.configure)
from django.http import HttpRequest, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402

import mcp_sync  # noqa: E402

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
            atexit.register(_client.close)
        return _client


def echo(request: HttpRequest) -> JsonResponse:
    text = request.GET.get("text", "")
    try:
        result = mcp().call_tool("echo", {"text": text})
    except TimeoutError:
        return JsonResponse({"error": "the MCP server did not answer in time"}, status=504)
    except mcp_sync.McpError as exc:
        return JsonResponse({"error": str(exc)}, status=502)
    if result.is_error:
        return JsonResponse({"error": result.text}, status=502)
    return JsonResponse({"text": result.text, "pid": os.getpid(), "client_made_in": _client_pid})


def health(request: HttpRequest) -> JsonResponse:
    client = mcp()
    return JsonResponse({"pid": os.getpid(), "client_made_in": _client_pid, "status": client.status.value,
                         "stats": client.stats().as_dict()})


urlpatterns = [path("echo", echo), path("health", health)]
application = get_wsgi_application()

if os.environ.get("MCP_STARTUP_CHECK") == "1":
    if "echo" not in {tool.name for tool in mcp().list_tools()}:
        raise SystemExit("the MCP server has no 'echo' tool")
