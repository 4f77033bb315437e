"""The benchmark suite's cases of cost as the work grows run and report:
large listings (the server's generated tools, paged), many idle clients in
one process, and the long-session memory case with SSE answers. (Speed
itself is measured by the suite, never asserted here: sizes are tiny.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.benchmark_runs import SERVER, run_suite


def list_pages(count: int, page_size: int) -> list[dict[str, Any]]:
    """Every tools/list page the server gives, following its cursors."""
    lines, cursor, pages = [], None, []
    for request_id in range(1, count // page_size + 3):
        params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
        lines.append(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": params}))
        done = subprocess.run([sys.executable, str(SERVER), "stdio", "--tools", str(count), "--page-size",
                               str(page_size)], input="\n".join(lines[-1:]) + "\n", capture_output=True, text=True,
                              timeout=30)
        result = json.loads(done.stdout)["result"]
        pages.append(result)
        cursor = result.get("nextCursor")
        if cursor is None:
            return pages
    raise AssertionError("the pages did not end")


def test_the_server_lists_many_tools_in_pages() -> None:
    pages = list_pages(25, 10)
    assert [len(page["tools"]) for page in pages] == [10, 10, 5]
    names = [tool["name"] for page in pages for tool in page["tools"]]
    assert names[:2] == ["echo", "blob"] and len(set(names)) == 25
    assert sum("outputSchema" in tool for page in pages for tool in page["tools"]) >= 3


def test_with_vary_each_listing_changes_every_tool_and_paging_stays_within_one() -> None:
    def request(rid: int, cursor: str | None = None) -> str:
        params = {} if cursor is None else {"cursor": cursor}
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": params})

    # Three listings in turn, the first of them paged: page 2 belongs to listing 1.
    lines = [request(1), request(2, "10"), request(3), request(4), request(5)]
    done = subprocess.run([sys.executable, str(SERVER), "stdio", "--tools", "25", "--page-size", "10", "--vary"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=30)
    results = [json.loads(line)["result"] for line in done.stdout.splitlines()]
    descriptions = [{t["name"]: t["description"] for t in r["tools"] if t["name"].startswith("tool_")}
                    for r in results]
    assert all("(listing 1)" in d for d in descriptions[0].values())
    assert all("(listing 1)" in d for d in descriptions[1].values())
    assert [all(f"(listing {n})" in d for d in descriptions[i].values()) for i, n in ((2, 2), (3, 3), (4, 1))] == [
        True, True, True]
    assert descriptions[2].keys() == descriptions[0].keys() and descriptions[2] != descriptions[0]


def test_the_growth_cases_run_and_report(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = run_suite("--only", "listing,listing_paged,listing_changed,many_clients,memory_sse", "--listed-tools", "300",
                     "--many", "4", "--repeat", "1", "--memory-calls", "50", "--growth-calls", "100", json_path=out)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    results = report["results"]
    for case in ("listing", "listing_paged", "listing_changed"):
        for transport in ("stdio", "http"):
            row = results[case][f"mcp_sync/{transport}"]
            assert "error" not in row, row
            assert row["tools"] == 300 and row["seconds"] > 0 and row["floor_seconds"] > 0
    stdio, http = results["many_clients"]["mcp_sync/stdio"], results["many_clients"]["mcp_sync/http"]
    assert "error" not in stdio and "error" not in http, (stdio, http)
    assert stdio["clients"] == 4 and stdio["floor_connect_s"] > 0 and stdio["threads_left_after_close"] == 0
    assert http["threads_per_client"] == 0 and "threads_per_client_session" in http
    assert http["threads_left_after_close"] == 0 == http["threads_left_after_close_session"]
    sse = results["memory_sse"]["mcp_sync/http"]
    assert sse["total"] == 100 and len(sse["rss_steps_mb"]) == 10
    targets = {line["target"] for line in report["targets"]}
    assert "stdio list 300 tools, 100 pages / floor" in targets
    assert "http list 300 tools, 100 pages, all changed / floor" in targets
    assert "http threads per idle connection" in targets
    assert "http SSE answers RSS growth 0k -> 0k calls (MB)" in targets


def test_the_long_mode_is_asked_for_and_checks_its_numbers(tmp_path: Path) -> None:
    done = run_suite("--long", "--memory-calls", "10", "--growth-calls", "5", json_path=tmp_path / "r.json")
    assert done.returncode == 2 and "--growth-calls must be at least --memory-calls" in done.stderr
