"""A randomized, seeded stress test of the whole client (issue 12).

Many threads share one client and mix: calls whose answers name their
caller, timeouts close to the server's latency, progress callbacks that
raise `KeyboardInterrupt` at random points, questions from the server
(elicitation), `listen()` streams, the stdio server killed under them
(a stateless client starts it again), and finally `close()` from another
thread while calls are in flight. Over stdio and HTTP, in both eras.

After each run it checks the invariants: every caller got its own answer or
an `McpError` (or the interrupt its own callback raised); the pending table
and the owed answers are empty; no thread, file descriptor or server process
is left.

The default is a short run for CI. A long run:

    MCP_SYNC_STRESS_ROUNDS=50 MCP_SYNC_STRESS_SEED=7 python -m pytest tests/test_stress.py

prints nothing more: a failure names its seed, configuration and round.
"""

import os
import random
import signal
import threading
import time

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import demo_command, process_alive, wait_until

SEED = int(os.environ.get("MCP_SYNC_STRESS_SEED", "20261201"))
ROUNDS = int(os.environ.get("MCP_SYNC_STRESS_ROUNDS", "1"))
THREADS = 8
OPERATIONS = 12

CONFIGS = [("stdio", "2026-07-28"), ("stdio", "2025-11-25"), ("http", "2026-07-28"), ("http", "2025-11-25")]


class Interrupted(KeyboardInterrupt):
    """The interrupt a progress callback raises (Ctrl-C in the middle of a call)."""


def connection_of(client):
    held = getattr(client, "_held", None)
    return held.conn if held is not None else client._conn


def worker(client, rng, me, era, related, problems):
    """One caller's random operations; any crossed answer or foreign
    exception goes to `problems`."""
    def own_form(params):
        return {"action": "accept", "content": {"name": me, "guests": 2}}

    for n in range(OPERATIONS):
        op = rng.choice(["echo", "echo", "timeout", "progress", "elicit", "listen"])
        try:
            if op == "echo":
                text = f"{me}/{n}"
                got = client.call_tool("echo", {"text": text}).text
                if got != text:
                    problems.append(f"{me}: asked echo {text!r}, got {got!r}")
            elif op == "timeout":
                latency = rng.uniform(0.005, 0.03)
                try:
                    got = client.call_tool("sleep", {"seconds": latency}, timeout=rng.uniform(0.005, 0.04)).text
                    if got not in ("slept", "cancelled"):
                        problems.append(f"{me}: sleep answered {got!r}")
                except mcp_sync.RequestTimeout:
                    pass
            elif op == "progress":
                stop_at = rng.randint(1, 4)
                caller = threading.current_thread()

                def on_progress(p, stop_at=stop_at):
                    if threading.current_thread() is not caller:
                        problems.append(f"{me}: a progress callback ran on {threading.current_thread().name}")
                    if p.progress >= stop_at:
                        raise Interrupted()

                try:
                    client.call_tool("countdown", {"steps": 3, "delay": 0.005}, progress=on_progress)
                except Interrupted:
                    pass
            elif op == "elicit":
                got = client.call_tool("book_table", {"date": "x"}, input_handlers={"form": own_form}).text
                # Where the client can tell whose question it is, the caller's
                # own handler answers; elsewhere (a shared stream in the
                # initialize era) the client's handler does. Never another caller's.
                expected = f"Booked for 2 under {me}" if related else "Booked for 2 under client"
                if got != expected:
                    problems.append(f"{me}: elicitation answered {got!r}, expected {expected!r}")
            elif op == "listen" and era == "2026-07-28":
                with client.listen(tools_list_changed=True, timeout=5):
                    pass
        except Interrupted:
            problems.append(f"{me}: an interrupt escaped its own call")
        except mcp_sync.McpError:
            pass  # a clear error: a killed server, a close() from another thread
        except BaseException as exc:  # noqa: BLE001 - anything else is a defect
            problems.append(f"{me}: {type(exc).__name__}: {exc}")


def run(where, era, seed, *, close_midway):
    rng = random.Random(seed)
    client_form = lambda params: {"action": "accept", "content": {"name": "client", "guests": 2}}  # noqa: E731
    threads_before = {t.ident for t in threading.enumerate()}
    fds_before = set(os.listdir("/proc/self/fd"))
    server = HTTPServer(demo_server()) if where == "http" else None
    if server is not None:
        server.__enter__()
    problems = []
    try:
        target = server.url if server is not None else demo_command()
        client = mcp_sync.connect(target, protocol=era, input_handlers={"form": client_form}, timeout=10)
        related = era == "2026-07-28" or where == "http"
        pids = set()
        callers = [threading.Thread(target=worker, args=(client, random.Random(rng.random()), f"caller-{i}",
                                                         era, related, problems), name=f"caller-{i}")
                   for i in range(THREADS)]
        for thread in callers:
            thread.start()
        chaos_done = threading.Event()

        def chaos():
            try:
                for _ in range(3):
                    time.sleep(rng.uniform(0.05, 0.2))
                    conn = connection_of(client)
                    pid = getattr(conn.transport, "pid", None) if conn is not None else None
                    if pid is not None:
                        pids.add(pid)
                    if where == "stdio" and era == "2026-07-28" and pid is not None and rng.random() < 0.5:
                        try:
                            os.kill(pid, signal.SIGKILL)  # the next call starts the server again
                        except ProcessLookupError:
                            pass  # killed by an earlier round and already reaped
                if close_midway:
                    client.close()
            finally:
                chaos_done.set()

        chaos_thread = threading.Thread(target=chaos, name="chaos")
        chaos_thread.start()
        for thread in callers:
            thread.join(60)
            assert not thread.is_alive(), f"{thread.name} hung (seed {seed})"
        chaos_thread.join(30)
        assert problems == [], f"seed {seed}, {where} {era}: {problems[:5]}"
        if not close_midway:
            conn = connection_of(client)
            assert wait_until(lambda: conn.in_flight == 0 and conn.owed == 0, timeout=5), \
                f"seed {seed}: {conn.in_flight} calls and {conn.owed} answers left"
            pool = getattr(conn.transport, "_pool", None)
            in_use = getattr(pool, "in_use", None)
            if in_use is not None:
                assert wait_until(lambda: pool.in_use == 0, timeout=5), f"seed {seed}: pool slots still in use"
        client.close()
        conn = connection_of(client)
        if conn is not None:
            pid = getattr(conn.transport, "pid", None)
            if pid is not None:
                pids.add(pid)
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    assert wait_until(lambda: not any(process_alive(pid) for pid in pids), timeout=10), "a server process was left"
    left = [t for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()]
    assert wait_until(lambda: not any(t.is_alive() for t in left), timeout=10), \
        f"seed {seed}: threads left: {[t.name for t in left if t.is_alive()]}"
    assert wait_until(lambda: set(os.listdir("/proc/self/fd")) <= fds_before, timeout=10), \
        f"seed {seed}: file descriptors left: {sorted(set(os.listdir('/proc/self/fd')) - fds_before)}"


@pytest.mark.parametrize("where,era", CONFIGS)
@pytest.mark.parametrize("close_midway", [False, True], ids=["then-close", "close-midway"])
def test_stress(where, era, close_midway):
    for round_ in range(ROUNDS):
        seed = SEED + 1000 * round_ + CONFIGS.index((where, era)) * 10 + int(close_midway)
        run(where, era, seed, close_midway=close_midway)
