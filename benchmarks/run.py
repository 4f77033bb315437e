"""The benchmark suite's command: ``python -m benchmarks [--only CASES]``.

Runs every case for every client in fresh worker processes, repeats the
timed ones and keeps the medians, prints one table per case, then the
targets as ratios measured within this run, and writes everything to a JSON
file. A CPU calibration line before and after shows a starved machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .clients import CLIENTS, HTTP, STDIO, THREAD_SAFE

ROOT = Path(__file__).resolve().parent.parent
CASES = ("import", "cold", "seq", "threads8", "threads32", "side_by_side", "blob", "blob_gzip", "memory", "threads_alive",
         "stats_cost", "tracing_off_cost", "sse",
         "listing", "listing_paged", "listing_changed", "many_clients", "memory_sse", "connect_real", "notifications")
#: What `--long` runs: sessions of a million calls (about an hour on two cores).
LONG_CASES = ("memory", "memory_sse")
LONG_FIRST, LONG_TOTAL = 100_000, 1_000_000
BLOB_SIZE = 10_000_000
LISTED_TOOLS = 10_000


def calibrate() -> float:
    """Thousands of small JSON round trips per second on one core: a fixed
    amount of pure-Python work, to compare runs and spot a starved one."""
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x" * 32}]}}
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(20_000):
            json.loads(json.dumps(message))
        best = min(best, time.perf_counter() - started)
    return 20_000 / best / 1000


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks.worker", json.dumps(spec)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": f"worker exited {done.returncode}: {done.stderr.strip()[-500:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def median_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-metric medians of repeated runs; the first error wins."""
    for result in results:
        if "error" in result:
            return result
    merged: dict[str, Any] = {}
    for key in results[0]:
        values = [r[key] for r in results if key in r]
        if all(isinstance(v, (int, float)) for v in values):
            merged[key] = statistics.median(values)
        else:
            merged[key] = values[0]
    merged["runs"] = len(results)
    return merged


def import_times(modules: dict[str, str], repeat: int) -> dict[str, dict[str, Any]]:
    """The median wall time of each import statement (`modules`: row name ->
    what to import) in fresh interpreters, net of the interpreter's start.
    The modules take turns, so a slow moment of the machine falls on all.
    A first, untimed round compiles what is not compiled yet (see `main`)."""
    samples: dict[str, list[float]] = {name: [] for name in modules}
    errors: dict[str, str] = {}
    for module in modules.values():
        subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True)
    for _ in range(repeat):
        for name, module in modules.items():
            if name in errors:
                continue
            code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
            done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                errors[name] = done.stderr.strip()[-300:]
                continue
            samples[name].append(float(done.stdout))
    return {name: {"error": errors[name]} if name in errors else
            {"seconds": statistics.median(samples[name]), "runs": repeat} for name in modules}


def plan(case: str, args: argparse.Namespace) -> list[tuple[str, str, dict[str, Any], int]]:
    """(client, transport, spec, repeats) for every run of one case."""
    runs = []
    for client, transports in CLIENTS.items():
        if args.clients and client not in args.clients:
            continue
        for transport in transports:
            if args.transports and transport not in args.transports:
                continue
            spec: dict[str, Any] = {"client": client, "transport": transport, "case": case}
            repeat = args.repeat
            if case == "cold":
                if transport != STDIO:
                    continue
                repeat = max(args.repeat, 5)
            elif case == "seq":
                spec["calls"] = args.calls
            elif case in ("threads8", "threads32"):
                if client not in THREAD_SAFE:
                    continue
                spec.update(case="threads", threads=int(case[len("threads"):]), calls=args.calls)
            elif case == "blob":
                spec["size"] = BLOB_SIZE
            elif case == "sse":
                # Paired in one worker: SSE-answered and JSON-answered calls,
                # taking turns, for mcp_sync and the official client.
                if transport != HTTP or client not in ("mcp_sync", "official_sync"):
                    continue
                spec.update(calls=args.calls, threads=32, rounds=max(args.repeat, 3))
                repeat = 1
            elif case == "blob_gzip":
                # Paired in one worker: compression on and off, taking turns.
                if client != "mcp_sync" or transport != HTTP:
                    continue
                spec.update(size=BLOB_SIZE, rounds=args.repeat)
                repeat = 1
            elif case == "memory":
                if client in ("raw_inline", "official_async"):
                    continue
                # The official client is too slow for 100,000 calls in a
                # few minutes; it reports its RSS after 10,000 only.
                total = args.growth_calls if client != "official_sync" else args.memory_calls
                spec.update(first=args.memory_calls, total=total)
                repeat = 1
            elif case == "memory_sse":
                # The same over HTTP with every answer an SSE stream.
                if client != "mcp_sync" or transport != HTTP:
                    continue
                spec.update(first=args.memory_calls, total=args.growth_calls)
                repeat = 1
            elif case == "threads_alive":
                repeat = 1
            elif case == "stats_cost":
                # Paired in one worker (see paired.py): at the default
                # --calls, 2,000 quads of four blocks of 10 calls.
                if client != "mcp_sync":
                    continue
                spec.update(quads=max(args.calls, 500), block=10)
                repeat = 1
            elif case == "many_clients":
                # 100 idle clients in one worker (HTTP: both eras, in turn).
                if client != "mcp_sync":
                    continue
                spec.update(count=args.many, threads=16)
                repeat = 1
            elif case == "side_by_side":
                # Paired in one worker: mcp_sync and its floor taking turns.
                if client != "mcp_sync":
                    continue
                spec.update(calls=args.calls * 3 // 2, rounds=max(args.repeat, 5))
                repeat = 1
            elif case in ("listing", "listing_paged", "listing_changed"):
                # Paired in one worker: mcp_sync and the floor (decode and
                # plain dicts) taking turns on one server; listing_changed:
                # every tool changed since the client's last listing.
                if client != "mcp_sync":
                    continue
                pages = 1 if case == "listing" else 100
                spec.update(case="listing", tools=args.listed_tools, rounds=max(args.repeat, 8),
                            page_size=max(args.listed_tools // pages, 1), vary=case == "listing_changed")
                repeat = 1
            elif case == "tracing_off_cost":
                # The sequential stdio case, with the hook and without it.
                if client != "mcp_sync" or transport != STDIO:
                    continue
                spec.update(quads=max(args.calls, 500), block=10)
                repeat = 1
            runs.append((client, transport, spec, repeat))
    return runs


COLUMNS = {
    "cold": [("seconds", "s", 3)],
    "seq": [("p50_us", "p50 us", 0), ("p99_us", "p99 us", 0), ("calls_s", "calls/s", 0),
            ("client_cpu_us", "client cpu us/call", 0), ("server_cpu_us", "server cpu us/req", 0)],
    "threads8": [("calls_s", "calls/s", 0), ("client_cpu_us", "client cpu us/call", 0)],
    "threads32": [("calls_s", "calls/s", 0), ("client_cpu_us", "client cpu us/call", 0)],
    "blob": [("seconds", "s", 3), ("peak_rss_mb", "peak RSS MB", 1), ("rss_before_mb", "RSS before MB", 1)],
    # No target: the ratios show what compression does (same run, same worker).
    "blob_gzip": [("seconds_gzip", "s gzip", 3), ("seconds_identity", "s identity", 3),
                  ("time_ratio", "time gzip/identity", 2), ("wire_mb_gzip", "wire MB gzip", 2),
                  ("wire_mb_identity", "wire MB identity", 1), ("wire_ratio", "wire gzip/identity", 4)],
    "memory": [("rss_first_mb", "RSS@first MB", 1), ("rss_total_mb", "RSS@total MB", 1),
               ("growth_mb", "growth MB", 2), ("total", "calls", 0)],
    "memory_sse": [("rss_first_mb", "RSS@first MB", 1), ("rss_total_mb", "RSS@total MB", 1),
                   ("growth_mb", "growth MB", 2), ("total", "calls", 0)],
    "threads_alive": [("threads", "threads", 0), ("threads_left_after_close", "left after close", 0)],
    "stats_cost": [("cpu_a_us", "cpu us/call with stats", 1), ("cpu_b_us", "cpu us/call without", 1),
                   ("cpu_total_ratio", "cpu with/without", 4), ("cpu_ratio", "median of quads", 4),
                   ("cpu_ratio_lo", "95% low", 4), ("cpu_ratio_hi", "95% high", 4)],
    "sse": [("p50_json_us", "p50 us JSON", 0), ("p50_sse_us", "p50 us SSE", 0), ("p50_ratio", "p50 SSE/JSON", 2),
            ("calls_s_json", "32 thr calls/s JSON", 0), ("calls_s_sse", "32 thr calls/s SSE", 0),
            ("threads_ratio", "32 thr SSE/JSON", 2), ("sse_connections", "SSE connections", 0)],
    "many_clients": [("mb_per_client", "MB/extra client", 3), ("threads_per_client", "threads/client", 2),
                     ("connect_s", "s connect 16 thr", 2), ("connect_ratio", "connect / raw start", 2),
                     ("mb_per_client_session", "MB/client session", 3),
                     ("threads_per_client_session", "thr/client session", 2)],
    "listing": [("seconds", "s mcp_sync", 3), ("floor_seconds", "s floor", 3), ("ratio", "time / floor", 2),
                ("cpu_ratio", "cpu / floor", 2), ("cpu_no_gc_ratio", "cpu/floor no gc", 2), ("tools", "tools", 0)],
    "listing_paged": [("seconds", "s mcp_sync", 3), ("floor_seconds", "s floor", 3), ("ratio", "time / floor", 2),
                      ("cpu_ratio", "cpu / floor", 2), ("cpu_no_gc_ratio", "cpu/floor no gc", 2),
                      ("tools", "tools", 0)],
    "side_by_side": [("p50_ratio", "1 caller p50", 2), ("calls_ratio_1", "1 caller calls/s", 2),
                     ("cpu_ratio_1", "1 caller cpu", 2),
                     ("calls_ratio_8", "8 thr calls/s", 2), ("cpu_ratio_8", "8 thr cpu", 2),
                     ("calls_ratio_32", "32 thr calls/s", 2), ("cpu_ratio_32", "32 thr cpu", 2)],
    "listing_changed": [("seconds", "s mcp_sync", 3), ("floor_seconds", "s floor", 3), ("ratio", "time / floor", 2),
                        ("cpu_ratio", "cpu / floor", 2), ("cpu_no_gc_ratio", "cpu/floor no gc", 2),
                        ("tools", "tools", 0)],
    "tracing_off_cost": [("cpu_a_us", "cpu us/call hook", 1), ("cpu_b_us", "cpu us/c bypassed", 1),
                         ("cpu_total_ratio", "cpu hook/bypassed", 4), ("cpu_ratio", "median of quads", 4),
                         ("cpu_ratio_lo", "95% low", 4), ("cpu_ratio_hi", "95% high", 4),
                         ("wall_ratio", "wall hook/bypassed", 4)],
}


def print_case(case: str, rows: dict[str, dict[str, Any]]) -> None:
    columns = COLUMNS[case]
    header = f"{'client / transport':28}" + "".join(f"{title:>20}" for _, title, _ in columns)
    print(f"\n== {case}\n{header}")
    for name, result in rows.items():
        if "error" in result:
            print(f"{name:28}  ERROR {result['error']}")
            continue
        cells = []
        for key, _, digits in columns:
            value = result.get(key)
            cells.append(f"{value:>20.{digits}f}" if isinstance(value, (int, float)) else f"{'-':>20}")
        print(f"{name:28}" + "".join(cells))


def value(results: dict[str, Any], case: str, row: str, key: str) -> float | None:
    found = results.get(case, {}).get(row, {}).get(key)
    return float(found) if isinstance(found, (int, float)) else None


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets as ratios within this run: (name, measured, limit, ok)."""
    lines: list[dict[str, Any]] = []

    def ratio(name: str, a: float | None, b: float | None, limit: float, at_most: bool) -> None:
        if a is None or b is None or b == 0:
            return
        measured = a / b
        ok = measured <= limit if at_most else measured >= limit
        lines.append({"target": name, "measured": measured, "limit": limit,
                      "kind": "at most" if at_most else "at least", "ok": ok, "unit": "x"})

    def absolute(name: str, measured: float | None, limit: float) -> None:
        if measured is not None:
            lines.append({"target": name, "measured": measured, "limit": limit, "kind": "at most",
                          "ok": measured <= limit, "unit": ""})

    # stdio against the reader-thread floor: the performance issue's targets.
    ratio("stdio p50 / raw reader-thread p50", value(results, "seq", "mcp_sync/stdio", "p50_us"),
          value(results, "seq", "raw_reader/stdio", "p50_us"), 1.15, True)
    ratio("stdio 1 caller client CPU/call / raw reader", value(results, "seq", "mcp_sync/stdio", "client_cpu_us"),
          value(results, "seq", "raw_reader/stdio", "client_cpu_us"), 1.5, True)
    for case, threads in (("threads8", 8), ("threads32", 32)):
        ratio(f"stdio {threads} threads calls/s / raw reader", value(results, case, "mcp_sync/stdio", "calls_s"),
              value(results, case, "raw_reader/stdio", "calls_s"), 0.8, False)
    ratio("stdio 32 threads client CPU/call / raw reader", value(results, "threads32", "mcp_sync/stdio",
                                                                 "client_cpu_us"),
          value(results, "threads32", "raw_reader/stdio", "client_cpu_us"), 1.5, True)
    # The same targets, measured side by side in one worker (see `side_by_side`).
    for key, label, limit, at_most in (("p50_ratio", "p50", 1.15, True),
                                       ("calls_ratio_8", "8 threads calls/s", 0.8, False),
                                       ("calls_ratio_32", "32 threads calls/s", 0.8, False),
                                       ("cpu_ratio_1", "1 caller client CPU/call", 1.5, True),
                                       ("cpu_ratio_32", "32 threads client CPU/call", 1.5, True)):
        found = value(results, "side_by_side", "mcp_sync/stdio", key)
        if found is not None:
            ratio(f"stdio {label} / raw reader, side by side", found, 1.0, limit, at_most)
    ratio("HTTP p50 / http.client p50", value(results, "seq", "mcp_sync/http", "p50_us"),
          value(results, "seq", "raw_http/http", "p50_us"), 1.5, True)
    ratio("HTTP 32 threads calls/s / http.client", value(results, "threads32", "mcp_sync/http", "calls_s"),
          value(results, "threads32", "raw_http/http", "calls_s"), 0.7, False)
    # What stats() costs: client CPU per call with and without its recorder,
    # over short ABBA blocks, the ratio of the totals (see paired.py).
    for transport in (STDIO, HTTP):
        ratio(f"{transport} client CPU with stats() / without",
              value(results, "stats_cost", f"mcp_sync/{transport}", "cpu_total_ratio"), 1.0, 1.02, True)
    # What the tracing hook costs with no provider: the same estimator,
    # against the same client with the hook compiled out.
    ratio("stdio client CPU tracing hook (off) / bypassed",
          value(results, "tracing_off_cost", "mcp_sync/stdio", "cpu_total_ratio"), 1.0, 1.02, True)
    # SSE-answered calls against JSON-answered ones, paired in one worker.
    for key, label, limit, at_most in (("p50_ratio", "p50", 1.3, True), ("threads_ratio", "32 threads calls/s", 0.8,
                                                                         False)):
        found = value(results, "sse", "mcp_sync/http", key)
        if found is not None:
            ratio(f"HTTP SSE-answered / JSON-answered {label}", found, 1.0, limit, at_most)
    # list_tools() of 10,000 tools against decoding the same pages into
    # plain dicts, paired in one worker.
    # 100 idle clients in one process: this process's memory and threads
    # per extra client (server processes not counted); over stdio, 100
    # connected from 16 threads against as many raw server starts.
    for transport in (STDIO, HTTP):
        row = f"mcp_sync/{transport}"
        absolute(f"{transport} RSS per extra idle client (MB)",
                 value(results, "many_clients", row, "mb_per_client"), 1.0)
        absolute(f"{transport} threads per idle connection", value(results, "many_clients", row, "threads_per_client"),
                 1.0 if transport == STDIO else 0.0)
    absolute("HTTP threads per idle session (2025-11-25, GET stream)",
             value(results, "many_clients", "mcp_sync/http", "threads_per_client_session"), 0.0)
    many = int(value(results, "many_clients", "mcp_sync/stdio", "clients") or 0)
    ratio(f"stdio connect {many} from 16 threads / raw server starts", value(results, "many_clients", "mcp_sync/stdio",
                                                                         "connect_s"),
          value(results, "many_clients", "mcp_sync/stdio", "floor_connect_s"), 1.5, True)
    for transport in (STDIO, HTTP):
        for case, label in (("listing", "1 page"), ("listing_paged", "100 pages"),
                            ("listing_changed", "100 pages, all changed")):
            listed = int(value(results, case, f"mcp_sync/{transport}", "tools") or 0)
            ratio(f"{transport} list {listed} tools, {label} / floor",
                  value(results, case, f"mcp_sync/{transport}", "seconds"),
                  value(results, case, f"mcp_sync/{transport}", "floor_seconds"), 2.0, True)
    for transport in (STDIO, HTTP):
        for case, label in (("seq", "1 caller"), ("threads8", "8 threads")):
            ratio(f"{transport} {label} calls/s / official from sync",
                  value(results, case, f"mcp_sync/{transport}", "calls_s"),
                  value(results, case, f"official_sync/{transport}", "calls_s"), 3.0, False)
        floor = "raw_reader/stdio" if transport == STDIO else "raw_http/http"
        ratio(f"{transport} 10 MB time / raw", value(results, "blob", f"mcp_sync/{transport}", "seconds"),
              value(results, "blob", floor, "seconds"), 1.5, True)
        ratio(f"{transport} 10 MB peak RSS / raw", value(results, "blob", f"mcp_sync/{transport}", "peak_rss_mb"),
              value(results, "blob", floor, "peak_rss_mb"), 1.5, True)
        mine = value(results, "memory", f"mcp_sync/{transport}", "rss_first_mb")
        raw = value(results, "memory", floor, "rss_first_mb")
        if mine is not None and raw is not None:
            absolute(f"{transport} RSS after 10k calls - raw (MB)", mine - raw, 15.0)
        for case, label in (("memory", ""), ("memory_sse", " SSE answers")):
            row = results.get(case, {}).get(f"mcp_sync/{transport}", {})
            if "first" in row:
                # A long session (--long) must stay flat; the default run's
                # 10k -> 100k allows for the allocator settling.
                long = row["first"] >= LONG_FIRST
                absolute(f"{transport}{label} RSS growth {row['first'] // 1000}k -> {row['total'] // 1000}k calls (MB)",
                         value(results, case, f"mcp_sync/{transport}", "growth_mb"), 1.0 if long else 2.0)
    absolute("import mcp_sync (s)", value(results, "import", "mcp_sync", "seconds"), 0.15)
    ratio("import mcp_sync / import requests", value(results, "import", "mcp_sync", "seconds"),
          value(results, "import", "requests", "seconds"), 1.0, True)
    for name, row in results.get("notifications", {}).items():
        ratio(f"{name} events/s / raw reader loop", row["events_s"], row["floor_events_s"], 0.7, False)
        absolute(f"{name} events dropped (of {row['events']:,})", row["events"] - row["delivered_min"], 0)
    for name, row in results.get("connect_real", {}).items():
        ratio(f"connect {name} / official SDK", row["first_s"], row["official_s"], 1.0, True)
    mine = value(results, "cold", "mcp_sync/stdio", "seconds")
    raw = value(results, "cold", "raw_inline/stdio", "seconds")
    if mine is not None and raw is not None:
        absolute("cold start - raw cold start (s)", mine - raw, 0.35)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help=f"comma-separated cases to run, of: {', '.join(CASES)}")
    parser.add_argument("--clients", help=f"comma-separated clients, of: {', '.join(CLIENTS)}")
    parser.add_argument("--transports", help="stdio, http or both (default)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each timed case; the median is kept")
    parser.add_argument("--calls", type=int, default=2000, help="echo calls per timed run")
    parser.add_argument("--events", type=int, default=100_000,
                        help="notifications: progress and log messages sent during one call")
    parser.add_argument("--memory-calls", type=int, help="calls before the first RSS reading (default 10,000; "
                        f"--long: {LONG_FIRST:,})")
    parser.add_argument("--growth-calls", type=int, help="calls in all, for the second (default 100,000; "
                        f"--long: {LONG_TOTAL:,})")
    parser.add_argument("--listed-tools", type=int, default=LISTED_TOOLS,
                        help="tools the listing cases list (listing_paged: in 100 pages)")
    parser.add_argument("--many", type=int, default=100, help="idle clients in the many_clients case")
    parser.add_argument("--long", action="store_true",
                        help=f"long sessions only: {', '.join(LONG_CASES)} for mcp_sync, {LONG_FIRST:,} -> "
                        f"{LONG_TOTAL:,} calls unless given")
    parser.add_argument("--json", default="benchmark-results.json", help="where to write the results")
    args = parser.parse_args(argv)
    if args.memory_calls is None:
        args.memory_calls = LONG_FIRST if args.long else 10_000
    if args.growth_calls is None:
        args.growth_calls = LONG_TOTAL if args.long else 100_000
    if args.growth_calls < args.memory_calls:
        parser.error("--growth-calls must be at least --memory-calls")
    if args.long and not args.clients:
        args.clients = "mcp_sync"
    default_cases = LONG_CASES if args.long else [case for case in CASES if case != "memory_sse"]
    cases = args.only.split(",") if args.only else list(default_cases)
    for case in cases:
        if case not in CASES:
            parser.error(f"unknown case {case!r}; choose from {', '.join(CASES)}")
    args.clients = set(args.clients.split(",")) if args.clients else None
    args.transports = set(args.transports.split(",")) if args.transports else None

    # Every process the suite starts imports from compiled bytecode, as an
    # installed package does (pip compiles it): kept in a directory of the
    # run's own, so nothing is written into the checkout, and written even
    # where PYTHONDONTWRITEBYTECODE is set (without it, each fresh process
    # would compile mcp_sync's sources and `import` and `cold` would time the
    # compiler).
    pycache = tempfile.TemporaryDirectory(prefix="bench-pycache-")
    os.environ["PYTHONPYCACHEPREFIX"] = pycache.name
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        return _run(args, cases)
    finally:
        pycache.cleanup()


def _run(args: argparse.Namespace, cases: list[str]) -> int:
    calibration_before = calibrate()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}; calibration {calibration_before:.0f}k JSON round trips/s")
    results: dict[str, Any] = {}
    started = time.monotonic()
    for case in cases:
        rows: dict[str, dict[str, Any]] = {}
        if case == "import":
            modules = {"mcp_sync": "mcp_sync", "requests": "requests"}
            if not args.clients or args.clients & {"official_sync", "official_async"}:
                modules["official (mcp)"] = "mcp, mcp.client.stdio, mcp.client.streamable_http"
            rows.update(import_times(modules, max(args.repeat, 7)))
            results[case] = rows
            print("\n== import\n" + "\n".join(f"{k:28}{v.get('seconds', float('nan')):>20.3f} s"
                                               for k, v in rows.items()))
            continue
        if case == "notifications":
            # Its own worker process (see benchmarks/notifications.py).
            done = subprocess.run([sys.executable, "-m", "benchmarks.notifications", "--events", str(args.events),
                                   "--rounds", str(max(args.repeat, 3))], cwd=ROOT, capture_output=True, text=True,
                                  check=True)
            for line in done.stdout.splitlines():
                row = json.loads(line)
                rows[f"mcp_sync/stdio {row['kind']}"] = row
            results[case] = rows
            print(f"\n== notifications ({args.events:,} in one call, a counting callback)")
            for name, row in rows.items():
                print(f"{name:24} {row['events_s']:>10,.0f} events/s   floor {row['floor_events_s']:>10,.0f}   "
                      f"{row['ratio']:.2f}x   delivered {row['delivered_min']:,}-{row['delivered_max']:,}")
            continue
        if case == "connect_real":
            from .connect import connect_real

            rows.update(connect_real(max(args.repeat, 7)))
            results[case] = rows
            print("\n== connect_real (fresh process: import, connect, first tools/list)")
            for name, row in rows.items():
                print(f"{name:24} official {row['official_s']:.3f} s   mcp_sync first {row['first_s']:.3f} s "
                      f"({row['first_ratio']:.2f}x)   remembered {row['remembered_s']:.3f} s "
                      f"({row['remembered_ratio']:.2f}x)   [{row['versions']}]")
            continue
        # Repeats go round the clients in turn, so that a slow minute of a
        # shared machine falls on all of them rather than on one.
        runs = plan(case, args)
        samples: dict[str, list[dict[str, Any]]] = {f"{c}/{t}": [] for c, t, _, _ in runs}
        for round_number in range(max((r for _, _, _, r in runs), default=0)):
            for client, transport, spec, repeat in runs:
                if round_number < repeat:
                    print(f"  {case}: {client}/{transport} run {round_number + 1} of {repeat}",
                          file=sys.stderr, flush=True)
                    samples[f"{client}/{transport}"].append(worker(spec))
        rows = {name: median_of(measured) for name, measured in samples.items()}
        results[case] = rows
        print_case(case, rows)
    calibration_after = calibrate()
    print(f"\ncalibration after: {calibration_after:.0f}k JSON round trips/s "
          f"({calibration_after / calibration_before:.2f} of before); suite took {time.monotonic() - started:.0f} s")

    checked = targets(results)
    if checked:
        print("\n== targets (ratios within this run)")
        for line in checked:
            mark = "ok  " if line["ok"] else "MISS"
            print(f"{mark} {line['target']:48} {line['measured']:8.2f}{line['unit']}  "
                  f"({line['kind']} {line['limit']}{line['unit']})")
    report = {
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "calibration_kops": [calibration_before, calibration_after],
        "args": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
        "results": results, "targets": checked,
    }
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"\nresults written to {args.json}")
    return 0
