"""Stdio server processes against Ctrl-C, grandchildren and a server that
stops reading.

- Ctrl-C in a terminal and Jupyter's "Interrupt kernel" send SIGINT to the
  client's whole process group. The tests play that on a child Python
  process started in its own session (so the test runner is never hit): the
  signal must reach the client only, never its servers, in both eras.
- `close()` ends the server's whole process group and returns within
  `3 x shutdown_timeout + 1 s`, even when a grandchild holds the server's
  stdout and ignores SIGTERM, or left the group altogether.
- A caller's own write is bounded by its deadline: a server that does not
  read its stdin cannot keep a call past its timeout, and a message cut off
  at the deadline fails the connection instead of leaving half a message.
"""

import _thread
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync import Stdio
from mcp_sync.transports import stdio
from tests.helpers import SLACK, demo_command, process_alive, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups")

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "tests" / "servers"
STATELESS = "2026-07-28"
ERAS = [STATELESS, "2025-11-25"]

# The client process a person interrupts. Each client's server is the demo
# server; `one`'s call is in flight on the main thread when the SIGINT comes
# (it said so on its first progress), `two`'s on a worker thread.
INTERRUPTED_CLIENT = r"""
import json, signal, sys, threading
import mcp_sync

signal.signal(signal.SIGINT, signal.default_int_handler)
protocol, clients = sys.argv[1], int(sys.argv[2])
server = [sys.executable, "-m", "mcp_sync.testing.server"]
one = mcp_sync.connect(server, protocol=protocol, timeout=30)
two = mcp_sync.connect(server, protocol=protocol, timeout=30) if clients == 2 else None
pids = {"one": one._conn.transport.pid, "two": two._conn.transport.pid if two else None}
report = {"pids_before": pids}
other_started = threading.Event()

def other_call():
    report["other_call"] = two.call_tool(
        "countdown", {"steps": 2, "delay": 1.0}, progress=lambda p: other_started.set()).text

if two is not None:
    worker = threading.Thread(target=other_call)
    worker.start()
    other_started.wait(30)

said = []
def in_flight(progress):
    if not said:
        said.append(1)
        print("in-flight", flush=True)

try:
    one.call_tool("countdown", {"steps": 2, "delay": 60}, progress=in_flight)
    report["interrupted"] = False
except KeyboardInterrupt:
    report["interrupted"] = True
report["after"] = one.call_tool("echo", {"text": "after"}).text
if two is not None:
    worker.join(30)
    report["other_after"] = two.call_tool("echo", {"text": "other"}).text
report["pids_after"] = {"one": one._conn.transport.pid, "two": two._conn.transport.pid if two else None}
one.close()
if two is not None:
    two.close()
print(json.dumps(report), flush=True)
"""


def _lines(stream) -> "queue.Queue[str]":
    """The lines of `stream`, read on a thread, so the test can wait with a bound."""
    lines: queue.Queue[str] = queue.Queue()

    def pump():
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _interrupt_a_client(protocol: str, clients: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_CLIENT, protocol, str(clients)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT), env=env,
        start_new_session=True,  # its own process group: the SIGINT below never reaches pytest
    )
    try:
        lines = _lines(child.stdout)
        first = lines.get(timeout=60)
        assert first == "in-flight", f"{first!r}; stderr: {child.stderr.read()}"
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C and Jupyter's Interrupt do
        last = lines.get(timeout=60)
        child.wait(timeout=30)
        assert last, f"no report; exit {child.returncode}; stderr: {child.stderr.read()}"
        assert child.returncode == 0, child.stderr.read()
        return json.loads(last)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        child.stdout.close()
        child.stderr.close()


@pytest.mark.parametrize("protocol", ERAS)
def test_sigint_to_the_clients_group_interrupts_the_call_and_spares_the_server(protocol):
    report = _interrupt_a_client(protocol, clients=1)
    assert report["interrupted"] is True
    assert report["after"] == "after"
    # The same process answered: it was never killed (nor restarted).
    assert report["pids_after"]["one"] == report["pids_before"]["one"]


def test_interrupting_one_clients_call_leaves_another_clients_server_and_call_alone():
    report = _interrupt_a_client("2025-11-25", clients=2)
    assert report["interrupted"] is True
    assert report["after"] == "after"
    assert report["other_call"] == "liftoff"  # in flight on another thread during the SIGINT
    assert report["other_after"] == "other"
    assert report["pids_after"] == report["pids_before"]


# -- close() and grandchildren ---------------------------------------------------------------------------


def _close_within(client, bound: float) -> float:
    """close() on a thread; the seconds it took, or fails the test after `bound` + 5 s."""
    done = threading.Event()
    took = []

    def close():
        started = time.monotonic()
        client.close()
        took.append(time.monotonic() - started)
        done.set()

    threading.Thread(target=close, daemon=True).start()
    assert done.wait(bound + 5), f"close() did not return within {bound + 5:g} s"
    return took[0]


def _kill(pid: int | None) -> None:
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _grandchild_server(tmp_path, *options):
    pidfile = tmp_path / "grandchild.pid"
    target = Stdio(sys.executable, [str(SERVERS / "grandchild.py"), str(pidfile), *options], shutdown_timeout=0.5)
    client = mcp_sync.connect(target, protocol=STATELESS, timeout=30)
    try:
        # The server writes the pid file before it reads anything: once it
        # answered, the file is there.
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        return client, int(pidfile.read_text())
    except BaseException:
        client.close()
        raise


def test_close_ends_a_grandchild_that_holds_stdout_and_ignores_sigterm(tmp_path):
    client, grandchild = _grandchild_server(tmp_path)
    try:
        server = client._conn.transport.pid
        bound = 3 * 0.5 + 1
        took = _close_within(client, bound)
        assert took <= bound, f"close() took {took:.2f} s"
        assert wait_until(lambda: not process_alive(grandchild), timeout=10), "the grandchild survived close()"
        assert not process_alive(server)
    finally:
        _kill(grandchild)


def test_close_is_bounded_when_a_process_outside_the_group_holds_stdout(tmp_path):
    client, grandchild = _grandchild_server(tmp_path, "--escape")
    transport = client._conn.transport
    try:
        bound = 3 * 0.5 + 1
        took = _close_within(client, bound)
        assert took <= bound, f"close() took {took:.2f} s"
        assert process_alive(grandchild)  # out of reach, as a daemon is meant to be
    finally:
        _kill(grandchild)
    # Once the pipe's last holder is gone, the reader (and the stderr drain,
    # where there is one) end on their own and close the pipes they were left holding.
    for thread in (transport._reader, transport._drain):
        if thread is None:
            continue
        thread.join(10)
        assert not thread.is_alive()
    assert transport._proc.stdout.closed and transport._proc.stderr.closed


@pytest.mark.parametrize("era", ERAS)
def test_a_server_that_dies_while_a_grandchild_holds_its_stdout_is_seen_to_exit(tmp_path, era):
    # Its stdout never ends (the grandchild holds it), and nothing else told
    # of the exit: the call in flight waited out its timeout (for ever with
    # timeout=None), every later call timed out, and the server was never
    # started again. The reader watches the process itself (Linux: a
    # pidfd), and its stdin: once nobody is left to read it, it is gone.
    pidfile = tmp_path / "grandchild.pid"
    target = Stdio(sys.executable, [str(SERVERS / "grandchild.py"), str(pidfile), "--stdout-only"],
                   shutdown_timeout=0.5)
    client = mcp_sync.connect(target, protocol=era, timeout=30)
    grandchild = None
    try:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        grandchild = int(pidfile.read_text())
        server = client._conn.transport.pid
        outcome, started = queue.SimpleQueue(), threading.Event()

        def call():
            try:
                outcome.put(client.call_tool("countdown", {"steps": 600, "delay": 0.1}, timeout=None,
                                             progress=lambda progress: started.set()))
            except BaseException as exc:  # noqa: BLE001 - reported to the test
                outcome.put(exc)

        threading.Thread(target=call, daemon=True).start()
        assert started.wait(10)  # its first progress: the server has the request
        os.kill(server, signal.SIGKILL)
        error = outcome.get(timeout=30)  # no timeout of its own: only the exit can end it
        assert isinstance(error, mcp_sync.ServerExited), repr(error)
        assert error.returncode == -signal.SIGKILL
        assert process_alive(grandchild)  # still holding the pipe
        # Healed as after any exit: the next call starts the server again.
        assert client.call_tool("echo", {"text": "again"}).text == "again"
        assert client._conn.transport.pid != server
    finally:
        client.close()
        _kill(grandchild)


def test_a_write_that_finds_stdin_closed_waits_for_the_exit_code_within_the_calls_time(tmp_path, monkeypatch):
    # The write's EPIPE was explained by waiting up to 1 s for the server's
    # exit code (and its last stderr) on the caller's thread, whatever the
    # call's timeout: a timeout=0.2 call took 1 s. The wait ends by the
    # call's deadline (the waits are recorded, not timed).
    from mcp_sync.transports.stdio_process import ServerProcess

    waits = []
    exit_code = ServerProcess.exit_code

    def recorded(self, wait):
        waits.append((wait, threading.current_thread().name))
        return exit_code(self, wait)

    record = tmp_path / "record"
    server = Stdio(sys.executable, [str(SERVERS / "stops_reading.py"), str(record)], shutdown_timeout=0.5)
    with mcp_sync.connect(server, protocol=STATELESS, reconnect=False, timeout=10, probe_timeout=0.2) as client:
        held = threading.Thread(target=lambda: pytest.raises(mcp_sync.McpError, client.call_tool, "hold",
                                                             {"seconds": 30}))
        held.start()
        assert wait_until(lambda: record.exists() and "hold ran" in record.read_text(), 10)  # stdin closed
        monkeypatch.setattr(ServerProcess, "exit_code", recorded)
        with pytest.raises(mcp_sync.McpError):
            client.call_tool("echo", {"text": "x"}, timeout=0.2)
        mine = [wait for wait, thread in waits if thread == threading.current_thread().name]
        assert mine and max(mine) <= 0.2, waits  # (the sender's thread, writing for no caller, may wait longer)
    held.join(10)


@pytest.mark.parametrize("era", ERAS)
def test_a_server_started_by_a_launcher_that_exits_goes_on_working(tmp_path, era):
    # The process started exits at once; the server it started holds the
    # pipes and answers. Taken for the server's exit, it failed every call.
    pidfile = tmp_path / "server.pid"
    target = Stdio(sys.executable, [str(SERVERS / "launcher.py"), str(pidfile)], shutdown_timeout=0.5)
    with mcp_sync.connect(target, protocol=era, timeout=30) as client:
        conn, transport = client._conn, client._conn.transport
        assert transport._process.exit_code(30) == 0  # the launcher is gone
        server = int(pidfile.read_text())
        # Five times what a server that exited is given to end its stdout:
        # the connection stands (the server it started still reads stdin).
        assert not wait_until(lambda: conn.failure is not None, timeout=5 * stdio._AFTER_EXIT_SECONDS)
        for i in range(3):
            assert client.call_tool("echo", {"text": str(i)}).text == str(i)
        assert client._conn.transport is transport and client.status == "ready"
    assert wait_until(lambda: not process_alive(server), timeout=10)  # its group went with close()


# -- a server that does not read its stdin ---------------------------------------------------------------


def _deaf_server(tmp_path, **options):
    record = tmp_path / "record"
    target = Stdio(sys.executable, [str(SERVERS / "deaf.py"), str(record)], shutdown_timeout=0.5)
    # The pin is probed: the probe waits in the pipe unanswered, and the
    # pin is trusted after probe_timeout.
    client = mcp_sync.connect(target, protocol=STATELESS, timeout=30, probe_timeout=0.2, **options)
    return client, record


def _call_on_a_thread(client, text: str, timeout: float, bound: float):
    """call_tool on a thread: (exception or result, seconds), failing the test after `bound`."""
    outcome = []

    def call():
        started = time.monotonic()
        try:
            result = client.call_tool("echo", {"text": text}, timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            result = exc
        outcome.append((result, time.monotonic() - started))

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(bound)
    assert outcome, f"the call was still blocked after {bound:g} s (timeout={timeout:g})"
    return outcome[0]


def test_a_request_cut_off_at_its_deadline_fails_the_connection_and_is_never_continued(tmp_path):
    client, record = _deaf_server(tmp_path, restart=False)
    server = client._conn.transport.pid
    try:
        error, took = _call_on_a_thread(client, "x" * 300_000, timeout=0.5, bound=10)
        assert isinstance(error, mcp_sync.ConnectionClosed), repr(error)
        assert took <= 0.5 + SLACK, f"took {took:.2f} s"
        assert "cut off" in str(error)
        started = time.monotonic()
        with pytest.raises(mcp_sync.ConnectionClosed, match="cut off"):
            client.call_tool("echo", {"text": "next"}, timeout=5)
        assert time.monotonic() - started < SLACK  # fails fast, not at the 5 s timeout: nothing more is written
        os.kill(server, signal.SIGUSR1)  # the server reads again: what did it get?
    finally:
        client.close()
    assert wait_until(record.exists, timeout=10)
    seen = record.read_text().splitlines()
    # The unanswered probe (and its cancellation, unless the sender thread
    # came to it after the cut), half a request, and nothing after it.
    assert seen[0] == "server/discover" and seen[1:-1] in ([], ["notifications/cancelled"]), seen
    assert seen[-1].startswith("partial "), seen
    assert 0 < int(seen[-1].split()[1]) < 300_000


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="interrupts the main thread")
def test_an_interrupt_that_cuts_a_request_off_fails_the_connection(tmp_path):
    client, _ = _deaf_server(tmp_path, restart=False)
    try:
        # What a notebook front end that interrupts with interrupt_main() does;
        # the write waits for room in slices, so the flag is seen.
        timer = threading.Timer(0.3, _thread.interrupt_main)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            timer.start()
            client.call_tool("echo", {"text": "x" * 300_000}, timeout=None)
        assert time.monotonic() - started < 0.3 + SLACK
        with pytest.raises(mcp_sync.ConnectionClosed, match="cut off"):
            client.call_tool("echo", {"text": "next"}, timeout=5)
    finally:
        timer.cancel()
        client.close()


def test_a_request_that_finds_no_room_times_out_and_leaves_the_connection_usable(tmp_path):
    client, record = _deaf_server(tmp_path)
    server = client._conn.transport.pid
    try:
        # Frames under PIPE_BUF (4096) are written whole or not at all, so the
        # pipe (64 KiB) fills without a frame ever being cut.
        for i in range(24):  # 24 x 3.6 KB: more than the pipe holds
            error, took = _call_on_a_thread(client, f"{i:03d}" + "y" * 3500, timeout=0.1, bound=10)
            assert isinstance(error, mcp_sync.RequestTimeout), (i, repr(error))
            assert took <= 0.1 + SLACK, f"call {i} took {took:.2f} s"
        os.kill(server, signal.SIGUSR1)
        assert client.call_tool("echo", {"text": "usable"}, timeout=10).text == "usable"
        assert client._conn.transport.pid == server
    finally:
        client.close()


def test_the_demo_server_still_exits_on_its_own_at_close(no_leaks):
    with mcp_sync.connect(demo_command(), protocol=STATELESS) as client:
        transport = client._conn.transport
        assert client.call_tool("echo", {"text": "x"}).text == "x"
    assert transport._proc.returncode == 0  # closing stdin was enough: no signal
