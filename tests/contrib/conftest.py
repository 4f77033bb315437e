"""Fixtures of the framework integration tests: a marker for the MCP servers a test starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.examples.harness import kill_marked, new_marker


@pytest.fixture
def marker() -> Iterator[str]:
    """A name for the MCP servers of one test; whatever still carries it afterwards is killed."""
    name = new_marker()
    try:
        yield name
    finally:
        kill_marked(name)
