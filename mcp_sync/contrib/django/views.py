"""The health view: this process's MCP clients, as JSON."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse  # type: ignore[import-untyped,unused-ignore]

from .. import _clients
from . import _registry


def health(request: Any, start: bool = False) -> Any:
    """This worker's MCP clients: 200 when every client it made is ready, 503 otherwise.

    The body: `status` (`"ok"` or `"unavailable"`), `pid`, and `servers`:
    for each configured server its client's `status` (`"ready"`,
    `"reconnecting"`, `"failed"`, `"closed"`), or `"unused"` when this
    process has not used it, with `requests`, `timeouts`, `reconnects`,
    `in_flight`, `queued` and `uptime` from `client.stats()`. A server never
    used is not started, unless the URL pattern passes `{"start": True}`.

    Args:
        request: The request (any method).
        start: Connect to the servers this process has not used yet.

    Returns:
        A `JsonResponse`, status 200 or 503.

    Settings that cannot be read, or a server that cannot be started,
    answer 503. It raises `TypeError` only for a `start` other than True
    or False: a mistake in the URL pattern, not in the servers.

    Example::

        urlpatterns = [path("health/mcp", health),
                       path("health/mcp/deep", health, {"start": True})]
    """
    body, status = _clients.health(_registry, start=start)
    return JsonResponse(body, status=status)
