"""One measurement in a fresh process: ``python -m benchmarks.worker SPEC``.

SPEC is a JSON object: client, transport, case and the case's numbers. The
worker starts the benchmark server (HTTP) or lets the client start it
(stdio), runs the case, and prints one JSON object with the results on its
last line of stdout. A fresh process per measurement keeps memory numbers
to one client and keeps one client's threads from slowing another.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("server.py")


def memory() -> dict[str, float]:
    """This process's resident set now and at its peak, in MB (Linux)."""
    values: dict[str, float] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return {"rss_mb": values.get("VmRSS", 0.0), "peak_rss_mb": values.get("VmHWM", 0.0)}


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Server:
    """The benchmark server for one measurement; its CPU cost is read from
    the stats file it writes on exit."""

    def __init__(self, transport: str, *, gzip: bool = False, extra: tuple[str, ...] = ()) -> None:
        fd, self.stats_path = tempfile.mkstemp(prefix="bench-server-", suffix=".json")
        os.close(fd)
        os.unlink(self.stats_path)
        self.argv = [sys.executable, str(SERVER), "stdio", "--stats", self.stats_path, *extra]
        self.proc: subprocess.Popen[str] | None = None
        self.target: list[str] | str = self.argv
        if transport == "http":
            argv = [sys.executable, str(SERVER), "http", "--port", "0", "--stats", self.stats_path, *extra]
            if gzip:
                argv.append("--gzip")
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert self.proc.stdout is not None
            self.target = self.proc.stdout.readline().strip()
            if not self.target.startswith("http://"):
                raise RuntimeError(f"the benchmark server did not start: {self.target!r}")

    def stop(self) -> dict[str, Any]:
        if self.proc is not None:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
            self.proc.stdout.close()
        # A stdio server writes its stats once the client has closed its stdin.
        deadline = time.monotonic() + 10
        while not os.path.exists(self.stats_path):
            if time.monotonic() > deadline:
                return {}
            time.sleep(0.01)
        with open(self.stats_path) as file:
            stats: dict[str, Any] = json.load(file)
        os.unlink(self.stats_path)
        return stats


# -- cases over a synchronous client ---------------------------------------------


def sequential(client: Any, calls: int) -> dict[str, Any]:
    for i in range(min(100, calls)):  # warm up: caches, first-call paths
        client.echo(f"warm-{i}")
    samples = []
    cpu = time.process_time()
    started = time.perf_counter()
    for i in range(calls):
        text = f"call-{i}"
        t0 = time.perf_counter()
        if client.echo(text) != text:
            raise RuntimeError("echo returned another text")
        samples.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    return {
        "p50_us": percentile(samples, 0.5) * 1e6, "p99_us": percentile(samples, 0.99) * 1e6,
        "calls_s": calls / wall, "client_cpu_us": (time.process_time() - cpu) / calls * 1e6,
    }


def threaded(client: Any, calls: int, threads: int) -> dict[str, Any]:
    per_thread = calls // threads
    barrier = threading.Barrier(threads + 1)
    wrong: list[str] = []

    def work(tid: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            text = f"t{tid}-{i}"
            answer = client.echo(text)
            if answer != text:  # every response must reach its own caller
                wrong.append(f"{text} got {answer}")

    for i in range(20):
        client.echo(f"warm-{i}")
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    # The whole process's CPU (callers, reader, anything else the client
    # runs), per call: what the 32-thread CPU target compares.
    cpu = time.process_time()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    if wrong:
        raise RuntimeError(f"{len(wrong)} responses reached the wrong caller, e.g. {wrong[0]}")
    return {"calls_s": per_thread * threads / wall, "threads": threads,
            "client_cpu_us": cpu / (per_thread * threads) * 1e6}


def side_by_side(transport: str, target: list[str] | str, calls: int, rounds: int) -> dict[str, Any]:
    """mcp_sync and the floor in this one process, taking turns: each round
    runs one client, then the other, with 1, 8 and 32 threads; the medians
    of the rounds' ratios (calls/s, and the process's CPU per call). A slow
    moment of a shared machine falls on both clients of a round, which
    separate workers, minutes apart, cannot promise. The same for the
    median latency of one caller (`p50_ratio`), its rounds in ABBA order
    (`sequential` each), so that a drift within a round falls on both."""
    from .clients import open_sync

    floor = "raw_reader" if transport == "stdio" else "raw_http"
    clients = {"mcp_sync": open_sync("mcp_sync", transport, target), "floor": open_sync(floor, transport, target)}
    result: dict[str, Any] = {}
    try:
        for client in clients.values():
            for i in range(200):
                client.echo(f"warm-{i}")
        for threads in (1, 8, 32):
            speed, cpu = [], []
            for _ in range(rounds):
                mine = threaded(clients["mcp_sync"], calls, threads)
                theirs = threaded(clients["floor"], calls, threads)
                speed.append(mine["calls_s"] / theirs["calls_s"])
                cpu.append(mine["client_cpu_us"] / theirs["client_cpu_us"])
            result[f"calls_ratio_{threads}"] = statistics.median(speed)
            result[f"cpu_ratio_{threads}"] = statistics.median(cpu)
        latency = []
        for _ in range(rounds):
            first = sequential(clients["mcp_sync"], calls // 2)["p50_us"]
            floor_p50 = sequential(clients["floor"], calls)["p50_us"]
            latency.append((first + sequential(clients["mcp_sync"], calls // 2)["p50_us"]) / 2 / floor_p50)
        result["p50_ratio"] = statistics.median(latency)
    finally:
        for client in clients.values():
            client.close()
    result["rounds"] = rounds
    return result


def blob(client: Any, size: int) -> dict[str, Any]:
    client.echo("warm")
    before = memory()
    started = time.perf_counter()
    received = client.blob(size)
    seconds = time.perf_counter() - started
    if received != size:
        raise RuntimeError(f"blob of {received} characters, asked for {size}")
    return {"seconds": seconds, "rss_before_mb": before["rss_mb"], **memory()}


def blob_gzip(target: str, size: int, rounds: int) -> dict[str, Any]:
    """The 10 MB result with compression and without, paired: two clients
    of one process on one gzip-capable server, taking turns, medians."""
    from .clients import HTTP, McpSync

    clients = {True: McpSync(HTTP, target, compress=True), False: McpSync(HTTP, target, compress=False)}
    seconds: dict[bool, list[float]] = {True: [], False: []}
    wire: dict[bool, int] = {}
    try:
        for client in clients.values():
            client.echo("warm")
            client.blob(size)  # the server compresses the blob once, here
        for _ in range(rounds):
            for compress, client in clients.items():
                before = client.received()
                started = time.perf_counter()
                received = client.blob(size)
                seconds[compress].append(time.perf_counter() - started)
                wire[compress] = client.received() - before
                if received != size:
                    raise RuntimeError(f"blob of {received} characters, asked for {size}")
    finally:
        for client in clients.values():
            client.close()
    timed = {compress: statistics.median(samples) for compress, samples in seconds.items()}
    return {"seconds_gzip": timed[True], "seconds_identity": timed[False], "time_ratio": timed[True] / timed[False],
            "wire_mb_gzip": wire[True] / 1e6, "wire_mb_identity": wire[False] / 1e6,
            "wire_ratio": wire[True] / wire[False], **memory()}


def listing(transport: str, target: list[str] | str, rounds: int) -> dict[str, Any]:
    """`list_tools()` of the server's many tools against the floor (decode
    and plain dicts), paired: both clients in this process, taking turns.

    Wall and CPU time (CPU includes reader threads) are means over the
    rounds: a full collection of the garbage collector falls in whichever
    listing crosses its threshold, so a mean spreads it as a program that
    lists again and again pays it, where a median would pick the rounds
    without it. Then CPU once more with the collector off, medians: what
    building the listing costs by itself."""
    import gc

    from .clients import open_sync

    floor = "raw_reader" if transport == "stdio" else "raw_http"
    clients = {"mcp_sync": open_sync("mcp_sync", transport, target), "floor": open_sync(floor, transport, target)}
    seconds: dict[str, list[float]] = {name: [] for name in clients}
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    cpu_no_gc: dict[str, list[float]] = {name: [] for name in clients}
    counts: dict[str, int] = {}
    try:
        for client in clients.values():
            client.list_tools()  # warm up: imports, first-call paths
        for collecting in (True, False):
            for _ in range(rounds):
                for name, client in clients.items():
                    if not collecting:
                        gc.collect()
                        gc.disable()
                    try:
                        started, started_cpu = time.perf_counter(), time.process_time()
                        counts[name] = client.list_tools()
                        used = time.process_time() - started_cpu
                        if collecting:
                            seconds[name].append(time.perf_counter() - started)
                            cpu[name].append(used)
                        else:
                            cpu_no_gc[name].append(used)
                    finally:
                        gc.enable()
    finally:
        for client in clients.values():
            client.close()
    if counts["mcp_sync"] != counts["floor"]:
        raise RuntimeError(f"mcp_sync listed {counts['mcp_sync']} tools, the floor {counts['floor']}")
    wall = {name: statistics.mean(samples) for name, samples in seconds.items()}
    spent = {name: statistics.mean(samples) for name, samples in cpu.items()}
    alone = {name: statistics.median(samples) for name, samples in cpu_no_gc.items()}
    return {"tools": counts["floor"], "seconds": wall["mcp_sync"], "floor_seconds": wall["floor"],
            "ratio": wall["mcp_sync"] / wall["floor"], "cpu_s": spent["mcp_sync"], "floor_cpu_s": spent["floor"],
            "cpu_ratio": spent["mcp_sync"] / spent["floor"], "cpu_no_gc_s": alone["mcp_sync"],
            "floor_cpu_no_gc_s": alone["floor"], "cpu_no_gc_ratio": alone["mcp_sync"] / alone["floor"], **memory()}


def _connect_many(opener: Any, count: int, threads: int) -> tuple[list[Any], float]:
    """`count` clients opened by `threads` threads at once, each making one
    call (so each has a live connection); and the seconds that took."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> Any:
        client = opener()
        if client.echo(f"c{i}") != f"c{i}":
            raise RuntimeError("echo returned another text")
        return client

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        clients = list(pool.map(one, range(count)))
    return clients, time.perf_counter() - started


def _settled() -> tuple[float, int]:
    """RSS (MB) and live threads once garbage is collected and the
    machine's own noise (page reclaim) has had a moment."""
    import gc

    gc.collect()
    time.sleep(0.2)  # RSS settles: freed arenas are returned lazily
    return memory()["rss_mb"], threading.active_count()


def many_clients(transport: str, target: list[str] | str, count: int, threads: int,
                 protocol: str | None) -> dict[str, Any]:
    """`count` mcp_sync clients in this process, idle after one call each:
    memory and threads per extra client (this process only, servers not
    counted), and how long `threads` threads took to connect them all;
    over stdio, against starting as many servers (and one round trip
    each) with the raw floor, the same way."""
    from .clients import McpSync
    from .floors import RawStdioInline

    result: dict[str, Any] = {"clients": count}
    threads_before = threading.active_count()
    if isinstance(target, list):
        argv = target
        floors, result["floor_connect_s"] = _connect_many(lambda: RawStdioInline(argv), count, threads)
        for floor in floors:
            floor.close()

    def opener() -> Any:
        return McpSync(transport, target, protocol=protocol)

    first, _ = _connect_many(opener, 1, 1)  # imports and first-use caches
    rss_one, threads_one = _settled()
    clients, result["connect_s"] = _connect_many(opener, count - 1, threads)
    clients += first
    try:
        rss_many, threads_many = _settled()
    finally:
        for client in clients:
            client.close()
    # Counted at once: no thread may outlive `close()`, so none is waited for.
    threads_closed = threading.active_count()
    rss_closed, _ = _settled()
    result.update(rss_one_mb=rss_one, rss_many_mb=rss_many, mb_per_client=(rss_many - rss_one) / (count - 1),
                  threads_one=threads_one, threads_per_client=(threads_many - threads_one) / (count - 1),
                  threads_left_after_close=threads_closed - threads_before, rss_closed_mb=rss_closed)
    if "floor_connect_s" in result:
        result["connect_ratio"] = result["connect_s"] / result["floor_connect_s"]
    return result


def growth(client: Any, first: int, total: int) -> dict[str, Any]:
    for i in range(first):
        client.echo(f"m{i}")
    at_first = memory()["rss_mb"]
    # RSS at ten steps on the way, in the JSON results: a trend, not a blip.
    step = max((total - first) // 10, 1)
    samples = []
    for i in range(first, total):
        client.echo(f"m{i}")
        if (i + 1 - first) % step == 0:
            samples.append(round(memory()["rss_mb"], 2))
    at_total = memory()["rss_mb"]
    return {"rss_first_mb": at_first, "rss_total_mb": at_total, "growth_mb": at_total - at_first,
            "first": first, "total": total, "rss_steps_mb": samples}


# -- the same cases over the plain async client -------------------------------------


async def async_case(client: Any, spec: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    case = spec["case"]
    if case == "seq":
        calls = spec["calls"]
        for i in range(min(100, calls)):
            await client.echo(f"warm-{i}")
        samples = []
        cpu = time.process_time()
        started = time.perf_counter()
        for i in range(calls):
            t0 = time.perf_counter()
            if await client.echo(f"call-{i}") != f"call-{i}":
                raise RuntimeError("echo returned another text")
            samples.append(time.perf_counter() - t0)
        wall = time.perf_counter() - started
        return {"p50_us": percentile(samples, 0.5) * 1e6, "p99_us": percentile(samples, 0.99) * 1e6,
                "calls_s": calls / wall, "client_cpu_us": (time.process_time() - cpu) / calls * 1e6}
    if case == "threads":
        tasks, per_task = spec["threads"], spec["calls"] // spec["threads"]

        async def work(tid: int) -> None:
            for i in range(per_task):
                if await client.echo(f"t{tid}-{i}") != f"t{tid}-{i}":
                    raise RuntimeError("a response reached the wrong caller")

        await client.echo("warm")
        started = time.perf_counter()
        await asyncio.gather(*(work(t) for t in range(tasks)))
        return {"calls_s": per_task * tasks / (time.perf_counter() - started), "threads": tasks}
    if case == "blob":
        await client.echo("warm")
        before = memory()
        started = time.perf_counter()
        received = await client.blob(spec["size"])
        seconds = time.perf_counter() - started
        if received != spec["size"]:
            raise RuntimeError("short blob")
        return {"seconds": seconds, "rss_before_mb": before["rss_mb"], **memory()}
    if case == "memory":
        for i in range(spec["total"]):
            await client.echo(f"m{i}")
            if i + 1 == spec["first"]:
                at_first = memory()["rss_mb"]
        at_total = memory()["rss_mb"]
        return {"rss_first_mb": at_first, "rss_total_mb": at_total, "growth_mb": at_total - at_first,
                "first": spec["first"], "total": spec["total"]}
    raise ValueError(f"case {case!r} has no async form")


# -- the whole measurement ---------------------------------------------------------------


def cold(spec: dict[str, Any], server: Server) -> dict[str, Any]:
    """Import, connect, first call, close: in this fresh process, where the
    client's modules are not imported yet."""
    started = time.perf_counter()
    if spec["client"] == "official_async":
        import asyncio

        from .clients import open_async

        async def once() -> None:
            client = await open_async(spec["client"], spec["transport"], server.target)
            await client.echo("cold")
            await client.aclose()

        asyncio.run(once())
    else:
        from .clients import open_sync

        client = open_sync(spec["client"], spec["transport"], server.target)
        client.echo("cold")
        client.close()
    return {"seconds": time.perf_counter() - started}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    extra: tuple[str, ...] = ()
    if spec["case"] == "listing":
        extra = ("--tools", str(spec["tools"]), "--page-size", str(spec["page_size"]),
                 *(("--vary",) if spec.get("vary") else ()))
    elif spec["case"] == "many_clients" and spec["transport"] == "http":
        extra = ("--get-stream",)
    elif spec["case"] == "memory_sse":
        extra = ("--sse",)
    server = Server(spec["transport"], gzip=spec["case"] == "blob_gzip", extra=extra)
    try:
        if spec["case"] == "cold":
            result = cold(spec, server)
        elif spec["case"] == "listing":
            result = listing(spec["transport"], server.target, spec["rounds"])
        elif spec["case"] == "side_by_side":
            result = side_by_side(spec["transport"], server.target, spec["calls"], spec["rounds"])
        elif spec["case"] == "many_clients":
            result = many_clients(spec["transport"], server.target, spec["count"], spec["threads"], None)
            if spec["transport"] == "http":
                # The initialize era too: each session holds a GET stream.
                session = many_clients("http", server.target, spec["count"], spec["threads"], "2025-11-25")
                result.update({f"{key}_session": value for key, value in session.items() if key != "clients"})
        elif spec["case"] == "sse":
            from .sse import paired

            assert isinstance(server.target, str)
            result = paired(spec["client"], server.target, spec["calls"], spec["threads"], spec["rounds"])
        elif spec["case"] == "blob_gzip":
            assert isinstance(server.target, str)
            result = blob_gzip(server.target, spec["size"], spec["rounds"])
        elif spec["client"] == "official_async":
            result = run_async(spec, server)
        else:
            result = run_sync(spec, server)
    finally:
        stats = server.stop()
    if stats.get("requests"):
        result["server_cpu_us"] = stats["cpu_s"] / stats["requests"] * 1e6
        result["server_requests"] = stats["requests"]
    return result


def run_sync(spec: dict[str, Any], server: Server) -> dict[str, Any]:
    from .clients import open_sync

    case = spec["case"]
    before = threading.active_count()
    client = open_sync(spec["client"], spec["transport"], server.target)
    try:
        if case == "seq":
            result = sequential(client, spec["calls"])
        elif case == "threads":
            result = threaded(client, spec["calls"], spec["threads"])
        elif case == "blob":
            result = blob(client, spec["size"])
        elif case in ("memory", "memory_sse"):
            result = growth(client, spec["first"], spec["total"])
        elif case == "threads_alive":
            client.echo("one call")
            result = {"threads": threading.active_count() - before}
        elif case == "stats_cost":
            result = client.stats_cost(spec["quads"], spec["block"])
        elif case == "tracing_off_cost":
            result = client.tracing_off_cost(spec["quads"], spec["block"])
        else:
            raise ValueError(f"unknown case {case!r}")
    finally:
        client.close()
    result["threads_left_after_close"] = threading.active_count() - before
    return result


def run_async(spec: dict[str, Any], server: Server) -> dict[str, Any]:
    import asyncio

    from .clients import open_async

    async def main() -> dict[str, Any]:
        client = await open_async(spec["client"], spec["transport"], server.target)
        try:
            if spec["case"] == "threads_alive":
                await client.echo("one call")
                return {"threads": threading.active_count() - 1}
            return await async_case(client, spec)
        finally:
            await client.aclose()

    return asyncio.run(main())


def main() -> int:
    spec = json.loads(sys.argv[1])
    try:
        result: dict[str, Any] = run(spec)
    except Exception as exc:  # reported, not raised: one failure must not stop the suite
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
