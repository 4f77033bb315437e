"""The Django recipe (examples/django_app.py) served by gunicorn: 200 requests at once, twice."""

from __future__ import annotations

import pytest

from .harness import REQUESTS, get_json, gunicorn, server_processes, stdio_command, two_bursts, wait_until_gone

# Started, stopped and closed within each test: no thread or descriptor of this process left.
pytestmark = pytest.mark.usefixtures("no_leaks")


def test_threads_share_one_client_over_http(http_mcp: str) -> None:
    with gunicorn("django_app", "--threads", "8", env={"MCP_SERVER": http_mcp}) as (server, base):
        answers = two_bursts("django gunicorn --threads 8 (MCP over HTTP)", base)
        (worker,) = {answer.body["pid"] for answer in answers if answer.body}
        assert {answer.body["client_made_in"] for answer in answers if answer.body} == {worker}
        status, health = get_json(base + "/health")
        calls = health["stats"]["requests"]["tools/call"]
        print(f"  inside the app, tools/call p50={calls['p50'] * 1000:.1f}ms p99={calls['p99'] * 1000:.1f}ms")
        assert status == 200 and health["status"] == "ready"
        assert health["stats"]["requests"]["tools/call"]["outcomes"]["ok"] == 2 * REQUESTS
        assert server.stop() == 0


def test_threads_share_one_client_over_stdio(marker: str) -> None:
    with gunicorn("django_app", "--threads", "8", env={"MCP_SERVER": stdio_command(marker)}) as (server, base):
        answers = two_bursts("django gunicorn --threads 8 (MCP over stdio)", base)
        (worker,) = {answer.body["pid"] for answer in answers if answer.body}
        assert list(server_processes(marker).values()) == [worker]
        assert server.stop() == 0
    assert wait_until_gone(marker) == {}, "a server process outlived its worker: the client was not closed"


def test_preload_workers_reconnect_after_the_fork(marker: str) -> None:
    env = {"MCP_SERVER": stdio_command(marker), "MCP_STARTUP_CHECK": "1"}
    with gunicorn("django_app", "--preload", "--workers", "2", "--threads", "8", env=env) as (server, base):
        master = server.proc.pid
        answers = two_bursts("django gunicorn --preload --workers 2 --threads 8", base)
        workers = {answer.body["pid"] for answer in answers if answer.body}
        print(f"  answered by {len(workers)} worker(s)")
        assert master not in workers
        assert {answer.body["client_made_in"] for answer in answers if answer.body} == {master}
        assert sorted(server_processes(marker).values()) == sorted([master, *workers])
        assert server.stop() == 0
    assert wait_until_gone(marker) == {}, "a server process outlived gunicorn: a client was not closed"
