"""A Django project in one module, served by gunicorn in test_django.py.

Its one server, "demo", is the bundled demo server over stdio, named by
`${MCP_TEST_MARKER}` (substituted from the environment) so that the test
finds its processes. With `MCP_STARTUP_CHECK=1` the module uses the client
at import: under `--preload`, in gunicorn's master, before the fork.
"""

from __future__ import annotations

import os
import sys

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="test-only-not-secret",
    INSTALLED_APPS=["mcp_sync.contrib.django"],
    MIDDLEWARE=[],
    MCP_SERVERS={"demo": {"command": sys.executable,
                          "args": ["-m", "mcp_sync.testing.server", "--name", "${MCP_TEST_MARKER}"]}},
    MCP_CLIENT_OPTIONS={"timeout": 20},
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after settings.configure)
from django.http import HttpRequest, JsonResponse  # noqa: E402
from django.urls import include, path  # noqa: E402

from mcp_sync.contrib.django import get_client  # noqa: E402


def echo(request: HttpRequest) -> JsonResponse:
    result = get_client("demo").call_tool("echo", {"text": request.GET.get("text", "")})
    return JsonResponse({"text": result.text, "pid": os.getpid()})


def client(request: HttpRequest) -> JsonResponse:
    """Whether this worker's client is the one the startup check made (in the master, under --preload)."""
    made = get_client("demo")
    return JsonResponse({"pid": os.getpid(), "made_at_startup": getattr(made, "made_at_startup", False),
                         "methods": sorted(made.stats().requests)})


urlpatterns = [path("echo", echo), path("client", client),
               path("health/mcp", include("mcp_sync.contrib.django.urls"))]
application = get_wsgi_application()

if os.environ.get("MCP_STARTUP_CHECK") == "1":
    startup = get_client("demo")
    startup.list_tools()
    startup.made_at_startup = True  # type: ignore[attr-defined]  # a tag the /client view reports
