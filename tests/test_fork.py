"""A client used across `os.fork()`: each process gets its own answers.

Two children forked from a process whose client is connected call the same
client concurrently with the parent. Each child must reconnect on first use
(stdio: its own server process; HTTP: its own pool and, in the initialize
era, its own session), never read the parent's answers, never end the
parent's session with its `close()`, and never hang.
"""

import os
import subprocess
import sys
import threading
import traceback
import weakref
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import demo_command, hanging_server, reap, wait_until

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")

CALLS = 50
ROOT = Path(__file__).parent.parent
CHILD_DEADLINE = 60.0

# Exit codes a child reports.
OK, WRONG_ANSWER, RAISED, PARENT_PID_SEEN = 0, 3, 4, 5


def _child(client, tag: str, parent_server_pid) -> int:
    try:
        for i in range(CALLS):
            text = f"{tag}-{i}"
            answer = client.call_tool("echo", {"text": text}).text
            if answer != text:
                print(f"child {tag}: sent {text!r}, got {answer!r}", file=sys.stderr)
                return WRONG_ANSWER
        transport = client._conn.transport
        if parent_server_pid is not None and getattr(transport, "pid", None) == parent_server_pid:
            return PARENT_PID_SEEN
        client.close()
        return OK
    except BaseException:
        traceback.print_exc()
        return RAISED


def _fork_children(client, tags, parent_server_pid=None):
    pids = []
    for tag in tags:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = RAISED
            try:
                code = _child(client, tag, parent_server_pid)
            finally:
                os._exit(code)
        pids.append(pid)
    return pids


def _reap(pids, timeout: float = CHILD_DEADLINE):
    """Exit codes of the children (None: hung, killed at the deadline)."""
    return reap(pids, timeout)


def _calls_in_parent(client, tag: str = "parent"):
    for i in range(CALLS):
        text = f"{tag}-{i}"
        assert client.call_tool("echo", {"text": text}).text == text


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_stdio_children_and_parent_each_get_their_own_answers(protocol):
    with mcp_sync.connect(demo_command(), protocol=protocol, timeout=20) as client:
        assert client.call_tool("echo", {"text": "before"}).text == "before"
        parent_pid = client._conn.transport.pid
        children = _fork_children(client, ["a", "b"], parent_server_pid=parent_pid)
        _calls_in_parent(client)
        assert _reap(children) == [OK, OK]
        # The children's close() stopped their own servers, not the parent's.
        assert client._conn.transport.pid == parent_pid
        _calls_in_parent(client, "after")


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_http_children_and_parent_each_get_their_own_answers(protocol):
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol=protocol, timeout=20) as client:
            assert client.call_tool("echo", {"text": "before"}).text == "before"
            session = getattr(client._conn.transport, "session_id", None)
            children = _fork_children(client, ["a", "b"])
            _calls_in_parent(client)
            assert _reap(children) == [OK, OK]
            _calls_in_parent(client, "after")
            # The parent's session survived the children's close(): it was
            # never renewed, and it is still the one the parent uses.
            assert client._supervisor.session_generation == 0
            assert getattr(client._conn.transport, "session_id", None) == session


def test_a_child_that_only_closes_leaves_the_parent_working():
    with mcp_sync.connect(demo_command(), protocol="2025-11-25", timeout=20) as client:
        client.call_tool("echo", {"text": "x"})
        pid = os.fork()
        if pid == 0:
            code = RAISED
            try:
                client.close()
                code = OK
            finally:
                os._exit(code)
        assert _reap([pid]) == [OK]
        _calls_in_parent(client)


def _pidfds() -> int:
    """How many of this process's descriptors are pidfds."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[pidfd]"
        except OSError:
            pass  # (the listing's own descriptor, closed since)
    return count


@pytest.mark.skipif(not hasattr(os, "pidfd_open") or not os.path.isdir("/proc/self/fd"), reason="Linux pidfds")
def test_a_child_closes_its_copy_of_the_watch_on_the_parents_server():
    with mcp_sync.connect(demo_command(), timeout=20) as client:
        client.call_tool("echo", {"text": "x"})
        watching = _pidfds()
        assert watching >= 1  # the reader's watch on the server process
        pid = os.fork()
        if pid == 0:
            code = RAISED
            try:
                client.close()
                code = OK if _pidfds() == watching - 1 else WRONG_ANSWER
            finally:
                os._exit(code)
        assert _reap([pid]) == [OK]
        _calls_in_parent(client)


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_subscription_inherited_by_a_child_ends_there_and_goes_on_in_the_parent(protocol):
    """The stream is the parent's: in the child the subscription ends at once
    with `SubscriptionBroken` (not silence until a timeout), and the child
    can listen again on its own connection."""
    with HTTPServer(demo_server()) as httpd:
        client = mcp_sync.connect(httpd.url, protocol=protocol)
        try:
            sub = client.listen(tools_list_changed=True)
            pid = os.fork()
            if pid == 0:
                code = RAISED
                try:
                    event = sub.next(timeout=5)
                    broken = isinstance(event, mcp_sync.SubscriptionBroken) and "parent process" in str(event.error)
                    again = client.listen(tools_list_changed=True)
                    code = OK if broken and again.accepted is not None else WRONG_ANSWER
                    again.close()
                finally:
                    os._exit(code)
            assert _reap([pid]) == [OK]
            # The parent's subscription is untouched: a change still reaches it.
            assert not sub.ended
            client.call_tool("echo", {"text": "still here"})
            sub.close()
        finally:
            client.close()


def test_a_child_forked_while_a_closer_runs_lets_go_of_that_connection(tmp_path):
    """A reconnect closes the given-up connection on a closer thread; a child
    forked meanwhile has no such thread: it lets go of its copy of that
    connection (no IO) and works on a server of its own."""
    from mcp_sync.options import Reconnect

    flag, launcher = hanging_server(tmp_path)
    target = mcp_sync.Stdio(sys.executable, [str(launcher)], shutdown_timeout=2.0)
    with mcp_sync.connect(target, protocol="2025-11-25", reconnect=Reconnect(initial_delay=0.01, max_delay=0.05)) \
            as client:
        flag.touch()
        conn = client._conn
        os.kill(conn.transport.pid, 9)
        assert wait_until(lambda: conn.failure is not None)
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("echo", {"text": "x"}, timeout=1.0)  # the new server hangs: given up
        flag.unlink()
        assert client._supervisor.closers.running  # the wedged server is being shut down
        pid = os.fork()
        if pid == 0:
            code = RAISED
            try:
                code = WRONG_ANSWER if client._supervisor.closers.running else _child(client, "child", None)
            finally:
                os._exit(code)
        assert _reap([pid]) == [OK]
        _calls_in_parent(client)  # waits for the closer, then a server of its own
    assert not [t for t in threading.enumerate() if t.name == "mcp-sync-closer"]


def test_a_fork_child_answers_server_requests_with_its_own_schema_cache():
    # The child's tool catalog gets a fresh schema cache (a parent thread
    # may have held the old one's lock at the fork): the answers to the
    # server's requests must check with the new one, not the parent's.
    with mcp_sync.connect(demo_server()) as client:
        parents = client._pipeline.catalog.schemas
        client._after_fork()
        pipeline = client._pipeline
        assert pipeline.catalog.schemas is not parents
        assert pipeline.server_requests.schemas is pipeline.catalog.schemas


def test_every_fork_hook_runs_in_the_child_even_after_one_fails():
    # One registry (`mcp_sync.forking`): the hooks run in the order they were
    # registered, and a hook that raises is logged, not fatal to the others.
    from mcp_sync import forking

    ran: list[str] = []

    def failing() -> None:
        ran.append("failing")
        raise RuntimeError("this component could not reset")

    def after() -> None:
        ran.append("after")

    forking.in_child(failing)
    forking.in_child(after)
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:  # the child: report what ran, then leave at once
            try:
                os.write(write_end, ",".join(ran).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        reported = os.read(read_end, 1000).decode()
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        forking._in_child.remove(failing)
        forking._in_child.remove(after)
        os.close(read_end)
    assert reported == "failing,after"
    assert ran == []  # the parent ran none of them


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("scenario", ["calls", "close_only", "dropped", "group", "subscription", "cache"])
def test_a_child_forked_from_c_lets_go_of_what_it_inherited(scenario, protocol):
    # fork(2) called directly runs no os.register_at_fork hook: the pid check
    # at the entry points (`forking.check`) resets the child on its first
    # use instead. Each scenario runs in a fresh interpreter (see the
    # script), whose only threads at the fork are the client's own.
    command = [sys.executable, "-W", "ignore::ResourceWarning", "-m", "tests.fork_from_c", scenario, protocol]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr


def test_members_copies_a_weak_set_that_grows_meanwhile():
    # In a child forked from C other threads may be creating clients while
    # the reset walks the live ones: the copy is taken again, not lost.
    from mcp_sync import forking

    class Item:
        pass

    kept = [Item(), Item()]

    class Growing(weakref.WeakSet):
        grew = False

        def __iter__(self):
            for item in super().__iter__():
                if not self.grew:
                    self.grew = True
                    self.add(kept[1])  # as another thread would, mid-iteration
                yield item

    objects = Growing([kept[0]])
    with pytest.raises(RuntimeError):
        list(Growing([kept[0]]))
    assert set(forking.members(objects)) == set(kept)


_SETTINGS_HELD_AT_A_C_FORK = r'''
import ctypes, os, sys, threading
from mcp_sync.contrib import _clients
from tests.helpers import reap

parent = os.getpid()
entered, release = threading.Event(), threading.Event()

def source():
    if os.getpid() == parent:  # the parent's read holds the registry's lock across the fork
        entered.set()
        release.wait()
    return _clients.read_settings({"demo": {"command": "x"}}, None, None)

registry = _clients.Clients(source)
reading = threading.Thread(target=registry.names)
reading.start()
assert entered.wait(30)
pid = ctypes.PyDLL(None).fork()
if pid == 0:
    code = 1
    try:
        code = 0 if registry.names() == ["demo"] else 2
    finally:
        os._exit(code)
release.set()
reading.join()
[code] = reap([pid], 20.0)
print("child:", code)
sys.exit(0 if code == 0 else 1)
'''


def test_a_child_forked_from_c_reads_the_settings_with_a_lock_of_its_own():
    # `configured_servers()`, the health view and `manage.py mcp` read the
    # settings first: in a child forked from C (no at-fork hook) while a
    # parent thread held the registry's lock, that read waited for ever on
    # the inherited lock (the child was killed at the deadline). It checks
    # the fork first, as every entry point does.
    done = subprocess.run([sys.executable, "-c", _SETTINGS_HELD_AT_A_C_FORK], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "child: 0" in done.stdout, done.stdout + done.stderr

