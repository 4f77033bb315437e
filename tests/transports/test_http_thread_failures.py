"""No HTTP thread dies silently: an unexpected failure while reading an
answer (a `RecursionError` from a pathological body, or a bug) fails that
request with an `McpError`, on the caller's thread or an exchange thread,
and the client stays usable. A caller with no timeout must never hang.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import mcp_sync
from mcp_sync.protocol import jsonrpc
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.transports import http as http_transport


@pytest.fixture(params=["json", "sse"])
def server(request):
    """Answers in JSON (read on the caller's thread) or as an SSE stream
    (read on an exchange thread)."""
    httpd = HTTPServer(demo_server(), response_mode=request.param).start()
    yield httpd
    httpd.close()


def poison(monkeypatch: pytest.MonkeyPatch, marker: bytes) -> None:
    """Make decoding any answer that holds `marker` fail unexpectedly."""
    real = jsonrpc.parse

    def parse(data: Any) -> Any:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if marker in raw:
            raise RecursionError("maximum recursion depth exceeded while decoding")
        return real(data)

    monkeypatch.setattr(http_transport.jsonrpc, "parse", parse)


def call_in_thread(fn) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 (the test inspects it)
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the call hung: a thread died without failing it"
    return out


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_an_unexpected_failure_reading_an_answer_fails_that_call(server, monkeypatch, protocol):
    with mcp_sync.connect(server.url, protocol=protocol) as client:
        poison(monkeypatch, b"poison-marker")
        out = call_in_thread(lambda: client.call_tool("echo", {"text": "poison-marker"}, timeout=None))
        assert isinstance(out.get("error"), mcp_sync.InvalidMessage), out
        assert "RecursionError" in str(out["error"])
        assert client.call_tool("echo", {"text": "fine"}, timeout=5).text == "fine"
