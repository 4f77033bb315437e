"""`path("health/mcp", include("mcp_sync.contrib.django.urls"))`: the health view
at that path (servers never used are not started)."""

from __future__ import annotations

from django.urls import path  # type: ignore[import-untyped,unused-ignore]

from . import views

app_name = "mcp_sync"
urlpatterns = [path("", views.health, name="health")]
