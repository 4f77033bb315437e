"""The script recipes, run as programs: a process pool and a thread-pool fan-out."""

from __future__ import annotations

import re

import pytest

from .harness import REQUESTS, run_script, stdio_command, summary_of, wait_until_gone

# Started, stopped and closed within each test: no thread or descriptor of this process left.
pytestmark = pytest.mark.usefixtures("no_leaks")


def test_process_pool_one_client_per_worker(marker: str) -> None:
    code, output = run_script(["process_pool.py", "--tasks", str(REQUESTS), "--workers", "2"],
                              env={"MCP_SERVER": stdio_command(marker)})
    assert code == 0, output
    summary = summary_of(output)
    print(f"RECIPE process pool (fork, 2 workers): requests={summary['tasks']} errors={summary['errors']} "
          f"p50={summary['p50_ms']}ms p95={summary['p95_ms']}ms tasks_per_worker={summary['tasks_per_worker']}")
    assert summary["tasks"] == REQUESTS and summary["errors"] == 0
    answers = re.findall(r"^task (\d+): \d+\+1000=(\d+) \(worker \d+\)$", output, re.M)
    assert sorted(int(n) + 1000 for n, _ in answers) == sorted(int(total) for _, total in answers)
    assert len(answers) == REQUESTS
    # Each worker that ran tasks made its client once, on its first task, and kept it.
    assert set(summary["clients_made"].values()) == {1}
    assert summary["clients_made"].keys() == summary["tasks_per_worker"].keys()
    # The dispatcher's own client, open while the pool forked, still works afterwards.
    assert summary["dispatcher_after_pool"] == {"sum": 2}
    assert wait_until_gone(marker) == {}, "a server process outlived its worker: a client was not closed"


def test_fan_out_over_stdio(marker: str) -> None:
    check_fan_out("fan-out script, 16 threads, one client (stdio)", stdio_command(marker))
    assert wait_until_gone(marker) == {}, "the server process outlived the script"


def test_fan_out_over_http(http_mcp: str) -> None:
    check_fan_out("fan-out script, 16 threads, one client (HTTP)", http_mcp)


def check_fan_out(recipe: str, server: str) -> None:
    code, output = run_script(["fan_out.py", "--calls", str(REQUESTS), "--threads", "16", "--server", server])
    assert code == 0, output
    summary = summary_of(output)
    print(f"RECIPE {recipe}: requests={summary['calls']} errors={summary['errors']} "
          f"p50={summary['p50_ms']}ms p95={summary['p95_ms']}ms total={summary['seconds']}s")
    pairs = re.findall(r"^(call-\d+-\w+) -> (\S+)$", output, re.M)
    assert len(pairs) == REQUESTS and all(token == text for token, text in pairs)
    assert summary["errors"] == 0
