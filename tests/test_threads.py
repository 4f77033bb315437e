"""One client shared by many threads: every caller gets its own answer."""

import collections
import threading
import time

import mcp_sync
from mcp_sync.testing import demo_server
from tests.helpers import check_echoes as check
from tests.helpers import demo_command
from tests.helpers import hammer_echo as hammer

THREADS = 64
CALLS = 200


def test_64_threads_x_200_calls_over_stdio(no_leaks):
    started = time.monotonic()
    with mcp_sync.connect(demo_command()) as client:
        results, errors = hammer(client, THREADS, CALLS)
        assert client._conn.in_flight == 0
    check(results, errors, THREADS, CALLS)
    elapsed = time.monotonic() - started
    print(f"\n{THREADS * CALLS} calls from {THREADS} threads over stdio in {elapsed:.1f} s "
          f"({THREADS * CALLS / elapsed:.0f} calls/s)")


def test_64_threads_in_process_initialize_era():
    with mcp_sync.connect(demo_server(), protocol="2025-11-25") as client:
        results, errors = hammer(client, THREADS, calls=50)
    check(results, errors, THREADS, calls=50)


def test_concurrent_progress_reaches_only_its_own_caller():
    with mcp_sync.connect(demo_command()) as client:
        seen = collections.defaultdict(list)
        errors = []

        def worker(n):
            try:
                steps = 3 + n % 4
                result = client.call_tool(
                    "countdown", {"steps": steps, "delay": 0},
                    progress=lambda p: seen[n].append((threading.get_ident(), p.progress, p.total)))
                assert result.text == "liftoff"
                assert [s[1] for s in seen[n]] == list(range(1, steps + 1))
                assert {s[2] for s in seen[n]} == {steps}
                assert {s[0] for s in seen[n]} == {threading.get_ident()}
            except Exception as exc:
                errors.append(exc)

        pool = [threading.Thread(target=worker, args=(n,)) for n in range(32)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=120)
    assert errors == []
    assert len(seen) == 32


def test_timeouts_under_load_never_deliver_a_late_answer_to_another_caller():
    with mcp_sync.connect(demo_command()) as client:
        errors = []

        def slow(n):
            try:
                client.call_tool("sleep", {"seconds": 0.5}, timeout=0.05)
                errors.append("no timeout")
            except mcp_sync.RequestTimeout:
                pass

        def fast(n):
            for i in range(50):
                text = f"{n}:{i}"
                got = client.call_tool("echo", {"text": text}).text
                if got != text:
                    errors.append((text, got))

        pool = [threading.Thread(target=slow, args=(n,)) for n in range(8)]
        pool += [threading.Thread(target=fast, args=(n,)) for n in range(8)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=120)
        assert errors == []
        assert client._conn.in_flight == 0
