"""Fixtures shared by the authorization tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def serve() -> Iterator[Callable[[Any], Any]]:
    """serve(obj) starts an AuthServer/ProtectedMCP/HTTPServer and closes it
    at teardown (last started, first closed)."""
    started: list[Any] = []

    def start(obj: Any) -> Any:
        obj.start()
        started.append(obj)
        return obj

    yield start
    for obj in reversed(started):
        obj.close()
