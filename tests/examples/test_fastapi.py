"""The FastAPI recipe (examples/fastapi_app.py, plain `def` endpoints) served by uvicorn."""

from __future__ import annotations

import pytest

import signal
import sys

from .harness import (REQUESTS, Launched, get_json, server_processes, stdio_command, two_bursts, wait_http,
                      wait_until_gone)

# Started, stopped and closed within each test: no thread or descriptor of this process left.
pytestmark = pytest.mark.usefixtures("no_leaks")


def test_pool_threads_share_one_client(marker: str) -> None:
    server = Launched([sys.executable, "-m", "uvicorn", "fastapi_app:app", "--host", "127.0.0.1", "--port", "0",
                       "--timeout-graceful-shutdown", "5"], env={"MCP_SERVER": stdio_command(marker)})
    try:
        base = server.wait_for(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")[1]
        wait_http(base)
        answers = two_bursts("fastapi def endpoints on uvicorn", base)
        threads = {answer.body["thread"] for answer in answers if answer.body}
        print(f"  {len(threads)} pool threads shared the client")
        assert len(threads) > 1
        # One process, one client, one server process for every thread of the pool.
        assert list(server_processes(marker).values()) == [server.proc.pid]
        status, health = get_json(base + "/health")
        calls = health["stats"]["requests"]["tools/call"]
        print(f"  inside the app, tools/call p50={calls['p50'] * 1000:.1f}ms p99={calls['p99'] * 1000:.1f}ms")
        assert status == 200 and health["stats"]["requests"]["tools/call"]["outcomes"]["ok"] == 2 * REQUESTS
        # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught.
        assert server.stop() in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in server.output
    finally:
        server.stop()
    assert wait_until_gone(marker) == {}, "the server process outlived the app: the client was not closed"
