"""The `sse` case: calls answered by an SSE stream against the same calls
answered with JSON, paired in one worker.

Two benchmark servers run side by side, one answering JSON and one (`--sse`)
answering every request with an SSE stream the way the official SDK's server
does by default (one event, then the stream's end in a write of its own).
One client of the kind under test talks to each; they take turns, batch by
batch, so a slow minute of a shared machine falls on both. Reported: the
p50 of one caller and the calls/s of `threads` threads for each answer
kind, their ratios, and how many connections the SSE server accepted
(a client that reuses connections needs about one per thread).
"""

from __future__ import annotations

import statistics
import time
from typing import Any


def paired(client_name: str, json_target: str, calls: int, threads: int, rounds: int) -> dict[str, Any]:
    from .clients import open_sync
    from .worker import Server, percentile, threaded

    sse_server = Server("http", extra=("--sse",))
    assert isinstance(sse_server.target, str)
    targets = {"json": json_target, "sse": sse_server.target}
    clients: dict[str, Any] = {}
    samples: dict[str, list[float]] = {"json": [], "sse": []}
    rates: dict[str, list[float]] = {"json": [], "sse": []}
    try:
        for kind, target in targets.items():
            clients[kind] = open_sync(client_name, "http", target)
            for i in range(100):  # warm up: caches, first-call paths
                clients[kind].echo(f"warm-{i}")
        batch = max(calls // rounds, 1)
        for _ in range(rounds):
            for kind, client in clients.items():
                for i in range(batch):
                    text = f"call-{i}"
                    started = time.perf_counter()
                    if client.echo(text) != text:
                        raise RuntimeError("echo returned another text")
                    samples[kind].append(time.perf_counter() - started)
        for _ in range(rounds):
            for kind, client in clients.items():
                rates[kind].append(threaded(client, calls, threads)["calls_s"])
    finally:
        for client in clients.values():
            client.close()
        stats = sse_server.stop()
    p50 = {kind: percentile(values, 0.5) * 1e6 for kind, values in samples.items()}
    rate = {kind: statistics.median(values) for kind, values in rates.items()}
    return {"p50_json_us": p50["json"], "p50_sse_us": p50["sse"], "p50_ratio": p50["sse"] / p50["json"],
            "calls_s_json": rate["json"], "calls_s_sse": rate["sse"], "threads_ratio": rate["sse"] / rate["json"],
            "threads": threads, "sse_connections": stats.get("connections", -1),
            "sse_requests": stats.get("requests", -1)}
