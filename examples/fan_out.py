"""A script that fans calls out over a thread pool sharing one client.

One `mcp_sync.Client`, many threads: each call waits for its own answer,
so the calls run at once over the one connection. Run it::

    python fan_out.py --calls 200 --threads 16
    python fan_out.py --server http://127.0.0.1:8000/mcp

It prints one line per call and a JSON summary. The server is `--server`
(a URL, or a command line), else `MCP_SERVER`, else the bundled demo server
over stdio.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import mcp_sync


def server_target(configured: str) -> str | list[str]:
    """A URL, or a command line; the demo server when empty."""
    if configured.startswith(("http://", "https://")):
        return configured
    if configured:
        return shlex.split(configured)
    return [sys.executable, "-m", "mcp_sync.testing"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--server", default=os.environ.get("MCP_SERVER", ""))
    args = parser.parse_args()
    tokens = [f"call-{i}-{uuid.uuid4().hex[:8]}" for i in range(args.calls)]

    with mcp_sync.connect(server_target(args.server), timeout=10) as client:

        def one(token: str) -> tuple[str, str, float]:
            began = time.perf_counter()
            text = client.call_tool("echo", {"text": token}).text
            return token, text, time.perf_counter() - began

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.threads) as pool:
            results = list(pool.map(one, tokens))
        elapsed = time.perf_counter() - started

    errors = 0
    for token, text, _ in results:
        errors += text != token
        print(f"{token} -> {text}{'' if text == token else ' WRONG'}")
    cuts = statistics.quantiles([seconds for *_, seconds in results], n=100, method="inclusive")
    print("summary", json.dumps({
        "calls": len(results), "errors": errors, "threads": args.threads, "seconds": round(elapsed, 3),
        "p50_ms": round(cuts[49] * 1000, 2), "p95_ms": round(cuts[94] * 1000, 2),
    }))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
