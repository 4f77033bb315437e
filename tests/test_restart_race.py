"""A stdio server restart racing `close()` and other callers.

A restarted connection is published only once it started, under the lock
`close()` takes; a restart that loses the race with `close()` closes what it
opened. So nothing outlives `close()`, and no caller ever sees a connection
that is not started yet.
"""

import os
import signal
import sys
import threading

import mcp_sync
from mcp_sync.transports.stdio import Stdio, StdioTransport
from tests.helpers import demo_command, wait_until

STATELESS = "2026-07-28"


class GatedRestart(Stdio):
    """The demo server, whose second start (the restart) waits at the gate:
    `restarting` is set when it gets there, `release` lets it go on. This
    holds open the window in which a restart races everything else."""

    def __init__(self):
        super().__init__(sys.executable, ["-m", "mcp_sync.testing.server"])
        self.starts = 0
        self.restarting = threading.Event()
        self.release = threading.Event()

    def open(self):
        target = self

        class Transport(StdioTransport):
            def start(self, sink):
                target.starts += 1
                if target.starts == 2:
                    target.restarting.set()
                    assert target.release.wait(20)
                super().start(sink)

        return Transport(self)


def children() -> set[int]:
    """The pids of this process's child processes (zombies included)."""
    me = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command may hold spaces and parentheses: fields follow the last ")".
        if stat[stat.rindex(")") + 2:].split()[1] == me:
            found.add(int(entry))
    return found


def kill_server(client) -> None:
    conn = client._conn
    os.kill(conn.transport.pid, signal.SIGKILL)
    assert wait_until(lambda: conn.failure is not None, 10)


def test_a_restart_racing_close_leaks_no_process_and_no_thread():
    children_before = children()
    threads_before = set(threading.enumerate())
    for round_ in range(40):
        client = mcp_sync.connect(demo_command(), protocol=STATELESS, timeout=10)
        kill_server(client)
        start = threading.Barrier(2)

        def call():
            start.wait()
            try:
                client.call_tool("echo", {"text": str(round_)})
            except mcp_sync.McpError:
                pass  # closed under it, or the restart lost the race: both fine

        def close():
            start.wait()
            client.close()

        racers = [threading.Thread(target=call), threading.Thread(target=close)]
        for t in racers:
            t.start()
        for t in racers:
            t.join(30)
        assert not any(t.is_alive() for t in racers)
        # A restart that lost the race would leave a server running and its
        # reader threads with it, for ever: a bounded wait cannot hide that.
        assert wait_until(lambda: children() <= children_before, 5), \
            f"round {round_}: server processes left: {children() - children_before}"
        assert wait_until(lambda: set(threading.enumerate()) <= threads_before, 5), \
            f"round {round_}: threads left: {set(threading.enumerate()) - threads_before}"


def test_a_restart_held_up_while_close_runs_is_stopped_not_leaked():
    children_before = children()
    threads_before = set(threading.enumerate())
    for round_ in range(5):
        target = GatedRestart()
        client = mcp_sync.connect(target, protocol=STATELESS, timeout=10)
        kill_server(client)
        outcome = []
        caller = threading.Thread(target=lambda: outcome.append(_call(client, round_)))
        caller.start()
        assert target.restarting.wait(10)
        client.close()  # while the restart is between "opened" and "started"
        target.release.set()
        caller.join(30)
        assert not caller.is_alive()
        assert isinstance(outcome[0], mcp_sync.ConnectionClosed), outcome
        assert wait_until(lambda: children() <= children_before, 5), \
            f"round {round_}: server processes left: {children() - children_before}"
        assert wait_until(lambda: set(threading.enumerate()) <= threads_before, 5), \
            f"round {round_}: threads left: {set(threading.enumerate()) - threads_before}"


def _call(client, n):
    try:
        return client.call_tool("echo", {"text": str(n)})
    except mcp_sync.McpError as exc:
        return exc


def test_callers_wait_for_a_restart_instead_of_using_it_unstarted():
    target = GatedRestart()
    errors: list[BaseException] = []
    generation = [0]
    entered = [-1] * 16
    stop = threading.Event()
    with mcp_sync.connect(target, protocol=STATELESS, timeout=10) as client:

        def caller(n):
            while not stop.is_set():
                entered[n] = generation[0]
                try:
                    text = f"{n}-{entered[n]}"
                    assert client.call_tool("echo", {"text": text}).text == text
                except mcp_sync.McpError as exc:
                    errors.append(exc)  # a call in flight when the server died

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        assert wait_until(lambda: min(entered) == 0, 10)
        generation[0] = 1
        kill_server(client)
        assert target.restarting.wait(10)
        # Callers try again while the restart is held up at the gate. (Not
        # necessarily all: a caller whose call began before the kill may
        # itself be waiting for this restart, and returns only after it.)
        assert wait_until(lambda: sum(e >= 1 for e in entered) >= 8, 10), entered
        wait_until(lambda: min(entered) == 1, 1)  # more of them, if they come
        target.release.set()
        generation[0] = 2
        assert wait_until(lambda: min(entered) == 2, 20)  # calls flow again
        stop.set()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
    not_started = [e for e in errors if "not started" in str(e)]
    assert not not_started, f"{len(not_started)} calls saw an unstarted connection: {not_started[0]}"
    # A call in flight when the server died fails with a transport error; a
    # call that waited for the restart longer than its own timeout (a slow
    # machine) gets RequestTimeout: callers wait only up to their deadline.
    unexpected = [e for e in errors if not isinstance(e, (mcp_sync.TransportError, mcp_sync.RequestTimeout))]
    assert not unexpected, [f"{type(e).__name__}: {e}" for e in unexpected[:3]]


def test_callers_never_see_a_restarted_connection_before_it_started():
    errors: list[BaseException] = []
    answered = [0] * 16
    stop = threading.Event()
    with mcp_sync.connect(demo_command(), protocol=STATELESS, timeout=10) as client:

        def caller(n):
            i = 0
            while not stop.is_set():
                i += 1
                text = f"{n}-{i}"
                try:
                    assert client.call_tool("echo", {"text": text}).text == text
                    answered[n] += 1
                except mcp_sync.McpError as exc:
                    errors.append(exc)  # a call in flight when the server died

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for _ in range(5):
            before = sum(answered)
            assert wait_until(lambda: sum(answered) >= before + 32, 20)  # calls flow (again)
            kill_server(client)
        before = sum(answered)
        assert wait_until(lambda: sum(answered) >= before + 32, 20)  # and flow after the last restart
        stop.set()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
    not_started = [e for e in errors if "not started" in str(e)]
    assert not not_started, f"{len(not_started)} calls saw an unstarted connection: {not_started[0]}"
    # Every failure was a call in flight when its server was killed.
    assert all(isinstance(e, mcp_sync.TransportError) for e in errors), errors[:3]
