"""Notification throughput: how many of a server's notifications per second
reach a callback that only counts them, against a raw reader loop on the
same kind of pipe.

One `tools/call` of the benchmark server's `flood` tool makes the server
write n notifications (progress for the call's token, or log messages)
before its result, as fast as the pipe takes them. The floor is a loop in
one thread that reads the server's stdout line by line, decodes each line
and hands it to the same counting callback (a log message through a
logger, as mcp_sync hands it on): no routing, no threads, no bounds. mcp_sync receives the same flood through `call_tool(...,
progress=callback)` (progress), its server logger (log messages, which
over stdio belong to no call and go to the client's log handler thread),
or a `listen()` stream read by a thread of its own (resource updates).
The two take turns in one worker; each round starts a server of its own
for the floor and reuses one mcp_sync client. Reported: events/s of each,
their ratio (the median of the rounds'), and how many events mcp_sync
delivered of the n sent: its inboxes are bounded and drop the oldest
events of a consumer that falls behind, so a shortfall says the counting
callback did not keep up.
"""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("server.py")
MODERN = "2026-07-28"


class Counter:
    """The callback: counts what reaches it (one call's, on its caller's thread)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, _event: object) -> None:
        self.count += 1  # the callback of one call runs on its caller's thread only


class CountingHandler(logging.Handler):
    """A logging handler that counts the server's log messages."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def raw_flood(n: int, kind: str) -> float:
    """The floor: seconds from the request to the result, reading and
    decoding every line in one loop and counting each notification (a log
    message is also logged, to a logger with the counting handler: the
    work mcp_sync is asked to do with one)."""
    floor_log = logging.getLogger("bench.floor")
    floor_log.handlers[:] = [CountingHandler()]
    floor_log.setLevel(logging.INFO)
    floor_log.propagate = False
    proc = subprocess.Popen([sys.executable, str(SERVER), "stdio"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    counter = Counter()
    try:
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "flood", "arguments": {"n": n, "kind": kind},
                              "_meta": {"progressToken": 1, "io.modelcontextprotocol/protocolVersion": MODERN}}}
        reader = open(proc.stdout.fileno(), "rb", closefd=False)
        # The server's start is not counted: it answers one echo first.
        warm = {"jsonrpc": "2.0", "id": 0, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "warm"}}}
        proc.stdin.write(json.dumps(warm).encode() + b"\n")
        reader.readline()
        if kind == "updates":  # the stream the updates come on, acknowledged
            listen = {"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
                      "params": {"notifications": {"resourceSubscriptions": ["bench://1"]},
                                 "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}}
            proc.stdin.write(json.dumps(listen).encode() + b"\n")
            reader.readline()
        started = time.perf_counter()
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        for line in reader:
            message = json.loads(line)
            if "id" in message:
                break
            if kind == "log":  # logged, as mcp_sync logs a server's message
                params = message["params"]
                floor_log.log(logging.INFO, "[%s] %s", params.get("logger"), json.dumps(params.get("data")))
            counter(message)
        elapsed = time.perf_counter() - started
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    if counter.count != n:
        raise RuntimeError(f"the floor read {counter.count} of {n} notifications")
    return elapsed


def _updates(client: Any, n: int, counter: Counter) -> int:
    """n resource updates on a `listen()` stream, read by a thread of
    their own as they come (the call that makes the server send them runs
    on this one): how many reached the reader."""
    import mcp_sync

    with client.listen(resource_subscriptions=["bench://1"], max_buffer=100) as subscription:
        def consume() -> None:
            while counter.count < n:
                try:
                    event = subscription.next(timeout=1.0)
                except (mcp_sync.RequestTimeout, StopIteration):
                    return  # none for a second: the rest were dropped
                if isinstance(event, mcp_sync.Notification):
                    counter(event)

        reader = threading.Thread(target=consume)
        reader.start()
        client.call_tool("flood", {"n": n, "kind": "updates"})
        reader.join()
    return counter.count


def run(n: int, kind: str, rounds: int) -> dict[str, Any]:
    """Both clients, taking turns, `rounds` times; see the module docstring."""
    import mcp_sync

    handler = CountingHandler()
    server_logs = logging.getLogger("mcp_sync.server")
    server_logs.addHandler(handler)
    server_logs.setLevel(logging.INFO)
    server_logs.propagate = False
    ratios, mine, theirs, delivered = [], [], [], []
    try:
        with mcp_sync.connect([sys.executable, str(SERVER), "stdio"], log_level="info") as client:
            client.call_tool("echo", {"text": "warm"})
            for _ in range(rounds):
                floor = raw_flood(n, kind)
                counter = Counter()
                handler.count = 0
                started = time.perf_counter()
                if kind == "progress":
                    client.call_tool("flood", {"n": n, "kind": kind}, progress=counter)
                    got = counter.count
                elif kind == "updates":
                    got = _updates(client, n, counter)
                else:
                    client.call_tool("flood", {"n": n, "kind": kind})
                    # The log handler thread may still hold the last few:
                    # done when all came, or when none came for 0.2 s (some
                    # were dropped; that time is not counted).
                    deadline, last, quiet_since = time.monotonic() + 30, -1, time.monotonic()
                    while handler.count < n and time.monotonic() < deadline:
                        if handler.count != last:
                            last, quiet_since = handler.count, time.monotonic()
                        elif time.monotonic() - quiet_since > 0.2:
                            break
                        time.sleep(0.005)
                    got = handler.count
                    if got < n:
                        started += time.monotonic() - quiet_since
                elapsed = time.perf_counter() - started
                mine.append(got / elapsed)
                theirs.append(n / floor)
                ratios.append((got / elapsed) / (n / floor))
                delivered.append(got)
    finally:
        server_logs.removeHandler(handler)
    return {"kind": kind, "events": n, "rounds": rounds, "events_s": statistics.median(mine),
            "floor_events_s": statistics.median(theirs), "ratio": statistics.median(ratios),
            "delivered_min": min(delivered), "delivered_max": max(delivered)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kind", choices=("progress", "log", "updates"), action="append")
    args = parser.parse_args(argv)
    for kind in args.kind or ["progress", "log", "updates"]:
        print(json.dumps(run(args.events, kind, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
