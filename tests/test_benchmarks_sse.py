"""The suite's `sse` case: its server answers with SSE streams when asked
(`--sse`) and counts the connections it accepted, and a small run of the
case pairs SSE-answered and JSON-answered calls for mcp_sync and the
official client. (Speed itself is measured by the suite, never asserted.)"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path

from tests.benchmark_runs import META, SERVER, request, run_suite


def test_the_server_answers_with_sse_streams_and_counts_connections(tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    server = subprocess.Popen([sys.executable, str(SERVER), "http", "--port", "0", "--sse", "--stats", str(stats)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdin is not None
    try:
        url = server.stdout.readline().strip()
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        for connection in range(2):
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            for i in range(2):  # a stream that ended leaves the connection usable
                conn.request("POST", "/mcp", request(i, "tools/call",
                                                     {"name": "echo", "arguments": {"text": f"t{i}"}, "_meta": META}),
                             headers)
                reply = conn.getresponse()
                assert reply.status == 200 and reply.getheader("Content-Type") == "text/event-stream"
                assert reply.getheader("Transfer-Encoding") == "chunked"
                event = reply.read().decode()
                assert event.startswith("event: message\r\ndata: ") and event.endswith("\r\n\r\n")
                assert json.loads(event.split("data: ", 1)[1])["result"]["content"][0]["text"] == f"t{i}"
            conn.close()
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    reported = json.loads(stats.read_text())
    assert reported["requests"] == 4 and reported["connections"] == 2


def test_a_small_run_pairs_sse_and_json_answers(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = run_suite("--only", "sse", "--clients", "mcp_sync,official_sync", "--calls", "64", "--repeat", "1",
                     json_path=out)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["results"]["sse"]
    assert set(rows) == {"mcp_sync/http", "official_sync/http"}
    for name, row in rows.items():
        assert "error" not in row, (name, row)
        assert row["p50_sse_us"] > 0 and row["calls_s_sse"] > 0 and row["calls_s_json"] > 0
        assert row["sse_connections"] >= 1
    assert "HTTP SSE-answered / JSON-answered p50" in done.stdout
