"""close(): nothing outlives it — no thread, no file descriptor, no process."""

import gc
import os
import threading

import mcp_sync
from mcp_sync.testing import demo_server
from tests.helpers import scripted


def snapshot():
    return threading.active_count(), len(os.listdir("/proc/self/fd"))


def test_200_stdio_connect_close_cycles_leak_nothing():
    command = scripted()
    # One cycle first, so lazily created module state (loggers, caches) exists.
    with mcp_sync.connect(command) as client:
        client.call_tool("echo", {"text": "warm"})
    # Garbage left by earlier tests is finalized now, not in the middle of
    # the count (a collected socket would make the count drop).
    gc.collect()
    threads_before, fds_before = snapshot()
    pids = []
    for i in range(200):
        client = mcp_sync.connect(command)
        assert client.call_tool("echo", {"text": str(i)}).text == str(i)
        pids.append(client._conn.transport.pid)
        client.close()
    assert snapshot() == (threads_before, fds_before)
    # Every child was reaped: none is left as a zombie of this process.
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
            raise AssertionError(f"child {pid} was not reaped")
        except ChildProcessError:
            pass


def test_in_process_cycles_leak_nothing():
    server = demo_server()
    threads_before, fds_before = snapshot()
    for i in range(200):
        with mcp_sync.connect(server) as client:
            client.call_tool("countdown", {"steps": 2, "delay": 0}, progress=lambda p: None)
    assert snapshot() == (threads_before, fds_before)


def test_close_from_another_thread_and_twice():
    client = mcp_sync.connect(scripted())
    closers = [threading.Thread(target=client.close) for _ in range(4)]
    for t in closers:
        t.start()
    for t in closers:
        t.join()
    client.close()
    assert client._conn.closed


def test_a_failed_connect_leaks_nothing():
    threads_before, fds_before = snapshot()
    for _ in range(20):
        try:
            mcp_sync.connect(scripted("--mode", "unsupported-version"))
        except mcp_sync.VersionNegotiationError:
            pass
    assert snapshot() == (threads_before, fds_before)
