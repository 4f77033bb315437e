"""The gunicorn run both integrations' tests share: `--preload`, several
workers, the demo server over stdio, a client made in the master first."""

from __future__ import annotations

import collections
from pathlib import Path

from tests.examples.harness import (
    check_answers,
    fire,
    get_json,
    gunicorn,
    server_processes,
    wait_until_gone,
)

ROOT = Path(__file__).resolve().parents[2]
#: Requests sent at once, per burst (two bursts: first use, then warm).
BURST = 120


def check_preloaded(app: str, marker: str, *, workers: int, label: str) -> None:
    """Serve `app` with `--preload --workers N`; check answers, clients, health, and the shutdown."""
    env = {"MCP_TEST_MARKER": marker, "MCP_STARTUP_CHECK": "1"}
    options = ["--chdir", str(ROOT), "--preload", "--workers", str(workers), "--threads", "8"]
    with gunicorn(app, *options, env=env) as (server, base):
        master = server.proc.pid
        # The startup check ran in the master, before the fork: one server, the master's.
        assert list(server_processes(marker).values()) == [master]
        answers = fire(base, n=BURST)  # while no worker has a client yet
        check_answers(f"{label} [first use]", answers)
        warm = fire(base, n=BURST)
        check_answers(f"{label} [warm]", warm)
        answers += warm
        served = collections.Counter(answer.body["pid"] for answer in answers if answer.body)
        print(f"  answered by {len(served)} worker(s): {dict(served)}")
        assert master not in served
        # Each worker that answered has one server process of its own (one
        # client for all its threads, made once under the burst), and the
        # master's is still its own.
        assert sorted(server_processes(marker).values()) == sorted([master, *served])

        # A worker's client was made in the worker, not inherited from the
        # master (whose client the startup check tagged), and it counts the
        # worker's own calls only.
        with_client = set(served)
        for answer in fire(base, n=40, path="/client?token="):
            assert answer.status == 200 and answer.body is not None, answer
            assert answer.body["made_at_startup"] is False, answer.body
            expected = ["tools/call"] if answer.body["pid"] in served else []
            assert answer.body["methods"] == expected, answer.body
            with_client.add(answer.body["pid"])

        for answer in fire(base, n=20, path="/health/mcp?token="):
            assert answer.status == 200 and answer.body is not None, answer
            demo = answer.body["servers"]["demo"]
            assert answer.body["status"] == "ok", answer.body
            if answer.body["pid"] not in with_client:
                assert demo == {"status": "unused"}, answer.body  # the health check started nothing
                continue
            assert demo["status"] == "ready", answer.body
            # The counts are the worker's own client's: exactly the echo calls it answered.
            assert demo["requests"] == served[answer.body["pid"]], (answer.body, served)
        status, _ = get_json(base + "/health/mcp")
        assert status == 200
        assert server.stop() == 0
    assert wait_until_gone(marker) == {}, "a server process outlived gunicorn: a client was not closed"
