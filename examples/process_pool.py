"""Tasks in a pool of forked worker processes, each worker with its own client.

This is how prefork task workers run (multiprocessing's fork start method,
the default on Linux): the pool forks its workers, and each worker makes
its own `mcp_sync.Client` on the first task that needs one, keeps it for
every later task, and closes it when the worker exits. Run it::

    python process_pool.py --tasks 200 --workers 4

It prints one line per task and a JSON summary. `MCP_SERVER` says which
server to call: a URL (Streamable HTTP) or a command line (stdio); by
default the bundled demo server over stdio, one server process per worker.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import multiprocessing.util
import os
import shlex
import statistics
import sys
import time

import mcp_sync

_client: mcp_sync.Client | None = None  # this worker's; a worker runs one task at a time


def server_target() -> str | list[str]:
    """`MCP_SERVER`: a URL, or a command line; the demo server by default."""
    configured = os.environ.get("MCP_SERVER", "")
    if configured.startswith(("http://", "https://")):
        return configured
    if configured:
        return shlex.split(configured)
    return [sys.executable, "-m", "mcp_sync.testing"]


def mcp() -> tuple[mcp_sync.Client, bool]:
    """This worker's client, connected on first use; and whether this call made it."""
    global _client
    if _client is not None:
        return _client, False
    _client = mcp_sync.connect(server_target(), timeout=10)
    # A forked worker leaves with os._exit(), which skips atexit; multiprocessing
    # runs its own finalizers first when a worker ends normally (pool.close()).
    multiprocessing.util.Finalize(_client, _client.close, exitpriority=10)
    return _client, True


def task(n: int) -> tuple[int, int | None, int, bool, float]:
    """One unit of work, a tool call: (n, the sum, worker pid, made the client, seconds)."""
    client, made = mcp()
    began = time.perf_counter()
    result = client.call_tool("add", {"a": n, "b": 1000})
    total = result.structured_content["sum"] if result.structured_content else None
    return n, total, os.getpid(), made, time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    # The dispatcher has a client of its own, open while the pool forks: the
    # workers inherit a copy, which never touches the dispatcher's connection.
    with mcp_sync.connect(server_target(), timeout=10) as client:
        if "add" not in {tool.name for tool in client.list_tools()}:
            print("the server has no 'add' tool", file=sys.stderr)
            return 1
        pool = multiprocessing.get_context("fork").Pool(args.workers)
        try:
            results = pool.map(task, range(args.tasks), chunksize=1)
        finally:
            pool.close()  # not terminate(): workers end normally, closing their clients
            pool.join()
        after = client.call_tool("add", {"a": 1, "b": 1}).structured_content

    errors = 0
    per_worker: collections.Counter[int] = collections.Counter()
    made: collections.Counter[int] = collections.Counter()
    for n, total, pid, made_client, _ in results:
        ok = total == n + 1000
        errors += not ok
        per_worker[pid] += 1
        made[pid] += made_client
        print(f"task {n}: {n}+1000={total} (worker {pid}){'' if ok else ' WRONG'}")
    cuts = statistics.quantiles([seconds for *_, seconds in results], n=100, method="inclusive")
    print("summary", json.dumps({
        "tasks": len(results), "errors": errors, "tasks_per_worker": per_worker, "clients_made": made,
        "p50_ms": round(cuts[49] * 1000, 2), "p95_ms": round(cuts[94] * 1000, 2),
        "dispatcher_after_pool": after,
    }))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
