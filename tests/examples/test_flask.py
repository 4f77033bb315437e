"""The Flask recipe (examples/flask_app.py) served by gunicorn: 200 requests at once, twice."""

from __future__ import annotations

import sys

import pytest

from .harness import (REQUESTS, Launched, get_json, gunicorn, server_processes, stdio_command, two_bursts,
                      wait_until_gone)

# Started, stopped and closed within each test: no thread or descriptor of this process left.
pytestmark = pytest.mark.usefixtures("no_leaks")


def test_threads_share_one_client_made_on_first_use(marker: str) -> None:
    env = {"MCP_SERVER": stdio_command(marker)}
    with gunicorn("flask_app:app", "--threads", "8", env=env) as (server, base):
        answers = two_bursts("flask gunicorn --threads 8", base)
        (worker,) = {answer.body["pid"] for answer in answers if answer.body}
        assert {answer.body["client_made_in"] for answer in answers if answer.body} == {worker}
        # Eight threads, 400 requests, 200 at once, one client: one server process.
        assert list(server_processes(marker).values()) == [worker]
        status, health = get_json(base + "/health")
        calls = health["stats"]["requests"]["tools/call"]
        print(f"  inside the app, tools/call p50={calls['p50'] * 1000:.1f}ms p99={calls['p99'] * 1000:.1f}ms")
        assert status == 200 and health["status"] == "ready"
        assert health["stats"]["requests"]["tools/call"]["outcomes"]["ok"] == 2 * REQUESTS
        assert server.stop() == 0
    assert wait_until_gone(marker) == {}, "a server process outlived its worker: the client was not closed"


def test_preload_workers_reconnect_after_the_fork(marker: str) -> None:
    # The startup check connects in gunicorn's master, before it forks the workers.
    env = {"MCP_SERVER": stdio_command(marker), "MCP_STARTUP_CHECK": "1"}
    with gunicorn("flask_app:app", "--preload", "--workers", "2", "--threads", "8", env=env) as (server, base):
        master = server.proc.pid
        answers = two_bursts("flask gunicorn --preload --workers 2 --threads 8", base)
        workers = {answer.body["pid"] for answer in answers if answer.body}
        print(f"  answered by {len(workers)} worker(s)")
        assert master not in workers
        # Every worker used the client the master made...
        assert {answer.body["client_made_in"] for answer in answers if answer.body} == {master}
        # ...and each reconnected on its own: its own server process, the master's left alone.
        parents = sorted(server_processes(marker).values())
        assert sorted(parents) == sorted([master, *workers])
        assert server.stop() == 0
    assert wait_until_gone(marker) == {}, "a server process outlived gunicorn: a client was not closed"


def test_startup_check_fails_a_bad_deployment_at_once() -> None:
    # A server that exits at once: under --preload the master's import fails, so gunicorn never serves.
    env = {"MCP_SERVER": f"{sys.executable} -c 'raise SystemExit(3)'", "MCP_STARTUP_CHECK": "1"}
    server = Launched([sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:0", "--preload", "flask_app:app"],
                      env=env)
    try:
        server.proc.wait(15)
        assert server.proc.returncode != 0
        server.wait_for(r"ServerExited: .*exited with code 3")
        assert "Listening at" not in server.output
    finally:
        server.stop()
