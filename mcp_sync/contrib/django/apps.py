"""The app config: registers the system check and forgets the clients when
an `MCP_*` setting changes (as `override_settings` does in tests)."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig  # type: ignore[import-untyped,unused-ignore]


class McpSyncConfig(AppConfig):  # type: ignore[misc,unused-ignore]  # Django ships no type stubs
    """The `mcp_sync.contrib.django` app, labelled `mcp_sync`.

    Example::

        INSTALLED_APPS = [..., "mcp_sync.contrib.django"]
    """

    name = "mcp_sync.contrib.django"
    label = "mcp_sync"
    verbose_name = "MCP servers"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        """Register the check and the settings listener."""
        from django.core import checks  # type: ignore[import-untyped,unused-ignore]
        from django.core.signals import setting_changed  # type: ignore[import-untyped,unused-ignore]

        from .checks import check_mcp_settings

        checks.register(check_mcp_settings)

        setting_changed.connect(_setting_changed, dispatch_uid="mcp_sync.contrib.django")


def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("MCP_SERVERS", "MCP_CONFIG", "MCP_CLIENT_OPTIONS"):
        from . import close_clients

        close_clients()
