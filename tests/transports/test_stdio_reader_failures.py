"""No stdio reader dies silently: an unexpected failure while it reads or
routes a line fails the connection (every waiting call gets an `McpError`
at once, even one with no timeout), and the next call reconnects.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import mcp_sync
from mcp_sync.protocol import jsonrpc
from mcp_sync.transports import stdio as stdio_transport
from tests.helpers import demo_command


def poison(monkeypatch: pytest.MonkeyPatch, marker: bytes) -> None:
    real = jsonrpc.parse

    def parse(data: Any) -> Any:
        if marker in (data.encode() if isinstance(data, str) else bytes(data)):
            raise RuntimeError("a failure nobody foresaw")
        return real(data)

    monkeypatch.setattr(stdio_transport.jsonrpc, "parse", parse)


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_an_unexpected_reader_failure_fails_every_waiting_call(monkeypatch, protocol):
    with mcp_sync.connect(demo_command(), protocol=protocol) as client:
        poison(monkeypatch, b"poison-marker")
        errors: list[BaseException] = []

        def wait_long() -> None:
            try:
                client.call_tool("sleep", {"seconds": 30}, timeout=None)
            except BaseException as exc:  # noqa: BLE001 (inspected below)
                errors.append(exc)

        waiter = threading.Thread(target=wait_long, daemon=True)
        waiter.start()
        with pytest.raises(mcp_sync.ConnectionClosed, match="RuntimeError"):
            client.call_tool("echo", {"text": "poison-marker"}, timeout=None)
        waiter.join(10)
        assert not waiter.is_alive(), "a waiting call was left hanging"
        assert len(errors) == 1 and isinstance(errors[0], mcp_sync.McpError), errors
        monkeypatch.undo()
        # The failed connection is replaced: the next call reconnects.
        assert client.call_tool("echo", {"text": "again"}, timeout=10).text == "again"


def test_close_waits_for_a_reader_whose_pipes_have_ended(monkeypatch, caplog):
    # close() waits only a moment for the reader (a process that left the
    # server's group may hold the pipes for ever), then goes on. A reader
    # whose pipes have ended, or are about to (the server is gone), has
    # only its last steps left, and a loaded machine may not run them
    # within that moment: close() must still not return with it alive. A
    # patched `_pipe_done` holds the reader after the first pipe's end
    # (stdout's or stderr's: the order depends on descriptor numbers).
    real = stdio_transport.StdioTransport._pipe_done
    lingering: list[threading.Thread] = []

    def pipe_done_then_linger(self: Any, stream: Any) -> None:
        real(self, stream)
        me = threading.current_thread()
        if me.name.startswith("mcp-sync-reader") and me not in lingering:
            lingering.append(me)
            threading.Event().wait(1.0)  # longer than close()'s first wait; nothing waits for it to pass

    monkeypatch.setattr(stdio_transport.StdioTransport, "_pipe_done", pipe_done_then_linger)
    client = mcp_sync.connect(demo_command(), protocol="2025-11-25")
    client.call_tool("echo", {"text": "x"})
    with caplog.at_level(logging.WARNING, logger="mcp_sync.transport.stdio"):
        client.close()
    assert lingering, "the reader never saw a pipe end"
    assert not lingering[0].is_alive(), "the stdio reader outlived close()"
    assert "still holds" not in caplog.text, "no stray process held the pipes"
