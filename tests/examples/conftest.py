"""Fixtures of the recipe tests: a marker for the MCP servers a recipe starts, an HTTP MCP server."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from .harness import Launched, kill_marked, new_marker


@pytest.fixture
def marker() -> Iterator[str]:
    """A name for the MCP servers of one test; whatever still carries it afterwards is killed."""
    name = new_marker()
    try:
        yield name
    finally:
        kill_marked(name)


@pytest.fixture
def http_mcp(marker: str) -> Iterator[str]:
    """The bundled demo server over Streamable HTTP on a free loopback port: its URL."""
    server = Launched([sys.executable, "-m", "mcp_sync.testing", "--http", "0", "--name", marker])
    try:
        yield server.wait_for(r"listening on (http://127\.0\.0\.1:\d+/mcp)")[1]
    finally:
        server.stop()
