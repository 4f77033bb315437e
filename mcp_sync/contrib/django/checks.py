"""The system check (`manage.py check`): the MCP settings, without connecting.
Registered by the app's `ready()`.

| id | level | what |
| --- | --- | --- |
| `mcp_sync.E001` | error | both `MCP_SERVERS` and `MCP_CONFIG` are set |
| `mcp_sync.E002` | error | the config cannot be read: a wrong kind of value, a missing or malformed file, an entry with neither `command` nor `url`, an unknown `type`, ... |
| `mcp_sync.E003` | error | a server's entry cannot be used: a missing environment variable, an unreadable `envFile`, a VS Code `${input:...}` |
| `mcp_sync.E004` | error | `MCP_CLIENT_OPTIONS` is not a mapping of valid `connect()` options |
| `mcp_sync.W001` | warning | neither `MCP_SERVERS` nor `MCP_CONFIG` is set |
| `mcp_sync.W002` | warning | an `MCP_SERVERS` entry has keys mcp_sync ignores (a typo?) |
"""

from __future__ import annotations

from typing import Any

from django.conf import settings  # type: ignore[import-untyped,unused-ignore]
from django.core import checks  # type: ignore[import-untyped,unused-ignore]

from .. import _clients


def check_mcp_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """The MCP settings' problems, as Django check messages (ids `mcp_sync.E00n`, `mcp_sync.W00n`).

    Args:
        app_configs: The apps checked (unused: the settings are global).
        **kwargs: What Django passes besides.

    Returns:
        A list of `checks.Error` and `checks.Warning`; empty when the app
        is not installed.

    It raises nothing: every problem found is a message. Nothing is started.

    Example::

        $ python manage.py check
        ?: (mcp_sync.E003) settings.MCP_SERVERS ... environment variable WEATHER_KEY is not set ...
    """
    from django.apps import apps  # type: ignore[import-untyped,unused-ignore]

    if not apps.is_installed("mcp_sync.contrib.django"):
        return []  # registered by an app a test installed for a while, and removed since
    found = _clients.problems(getattr(settings, "MCP_SERVERS", None), getattr(settings, "MCP_CONFIG", None),
                              getattr(settings, "MCP_CLIENT_OPTIONS", None), prefix="settings.")
    return [(checks.Error if problem.error else checks.Warning)(problem.msg, hint=problem.hint,
                                                                 id=f"mcp_sync.{problem.id}")
            for problem in found]
