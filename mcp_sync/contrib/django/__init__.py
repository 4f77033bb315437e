"""Django integration: MCP servers configured in the settings, one shared
client per server in each worker process, a system check, a health view and
a `manage.py mcp` command.

Add `"mcp_sync.contrib.django"` to `INSTALLED_APPS` and configure the
servers with one of:

- `MCP_SERVERS`: an `mcpServers` object (as in `.mcp.json`), with
  `${env:NAME}` / `${NAME}` taken from the environment when a server is
  first used;
- `MCP_CONFIG`: the path of such a config file.

`MCP_CLIENT_OPTIONS` (optional) holds keyword arguments for
`mcp_sync.connect()`, for every server (`{"timeout": 10}`).

Importing this package imports only `django.conf`; the settings are read on
first use. See docs/django.md.
"""

from __future__ import annotations

from typing import Any

from ...client import Client
from ...config import ServerConfig
from .. import _clients

__all__ = ["close_clients", "configured_servers", "get_client"]


def _from_settings() -> tuple[ServerConfig, dict[str, Any]]:
    from django.conf import settings  # type: ignore[import-untyped,unused-ignore]

    return _clients.read_settings(getattr(settings, "MCP_SERVERS", None), getattr(settings, "MCP_CONFIG", None),
                                  getattr(settings, "MCP_CLIENT_OPTIONS", None), prefix="settings.")


#: The process's clients. Made at import and never replaced; it reads the
#: settings on first use, again after `close_clients()`, and owns its locks
#: (see `Clients`).
_registry = _clients.Clients(_from_settings)


def get_client(name: str) -> Client:
    """The shared client of the configured server `name` in this process.

    Made on the first call in each process (a gunicorn worker connects on
    its own first use, with its own server process, even when its master
    made one before forking), shared by every thread, closed at interpreter
    exit. Its calls are thread-safe; do not close it yourself.

    Args:
        name: A server of `settings.MCP_SERVERS` (or of the file
            `settings.MCP_CONFIG`).

    Returns:
        The connected client.

    Raises:
        ConfigError: The settings are missing or wrong, `name` is not
            configured (also a `KeyError`), or its entry cannot be used (a
            missing environment variable).
        McpError: The server could not be started or reached (as
            `mcp_sync.connect()` raises); the next call tries again.

    Example::

        from mcp_sync.contrib.django import get_client

        def weather(request):
            result = get_client("weather").call_tool("forecast", {"city": request.GET["city"]})
            return JsonResponse({"forecast": result.text})
    """
    return _registry.get(name)


def configured_servers() -> list[str]:
    """The names of the servers the settings configure, in their order.

    Returns:
        The server names (without the disabled ones).

    Raises:
        ConfigError: The settings are missing or wrong.

    Example::

        for name in configured_servers():
            print(name, get_client(name).status)
    """
    return _registry.names()


def close_clients() -> None:
    """Close this process's clients and forget the settings read: the next
    `get_client()` reads them again and connects again. Done at interpreter
    exit, and when a test changes an `MCP_*` setting (`override_settings`).
    A client that fails to close is logged, and the others are closed.

    Returns:
        None.

    Example::

        close_clients()  # in a test's tearDown, after changing settings by hand
    """
    _registry.close()
