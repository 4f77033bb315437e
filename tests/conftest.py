"""Shared test fixtures.

Every message any client transport sends during the tests is validated
against the published JSON schema of its protocol revision (see
`tests/schemas/`): the autouse fixture `validate_sent_messages` wraps the
`send()` of the stdio and memory transports.
"""

import atexit
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.schema_check import SchemaChecker

# The on-disk era memory goes to a directory of this run's own: a test never
# reads or writes the user's cache, and child processes inherit the setting.
_ERA_CACHE = tempfile.mkdtemp(prefix="mcp-sync-tests-")
os.environ["MCP_SYNC_CACHE_DIR"] = _ERA_CACHE
atexit.register(shutil.rmtree, _ERA_CACHE, True)

HERE = Path(__file__).parent
SCRIPTED = str(HERE / "servers" / "scripted.py")

_checker = SchemaChecker(HERE / "schemas")


def scripted(*args: str) -> list[str]:
    """The command line of the scripted stdio server with these options."""
    return [sys.executable, SCRIPTED, *args]


def next_event(sub, kinds, timeout: float = 10.0):
    """The next event of a subscription that is one of `kinds`, skipping
    others (`sub.next` raises `RequestTimeout` when none comes in time)."""
    limit = time.monotonic() + timeout
    while True:
        event = sub.next(timeout=max(limit - time.monotonic(), 0.01))
        if isinstance(event, kinds):
            return event


def process_alive(pid: int) -> bool:
    """Is `pid` running? A zombie (dead, not yet reaped by whoever adopted it) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return not os.path.isdir("/proc")  # gone meanwhile; without /proc, kill() is all we know


def reap(pids, timeout: float):
    """Exit codes of forked children, waited for until `timeout`; a child
    still running then is killed and reported as hung (None)."""
    codes = {}
    deadline = time.monotonic() + timeout
    while len(codes) < len(pids) and time.monotonic() < deadline:
        for pid in pids:
            if pid in codes:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes[pid] = os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    for pid in pids:
        if pid not in codes:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            codes[pid] = None
    return [codes[pid] for pid in pids]


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll `predicate` until it is true or `timeout` runs out; its result.

    For conditions the code under test offers no event for (a counter on
    another thread); never a stand-in for an outcome the test asserts on.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


class NoThread(threading.Thread):
    """A thread that cannot start, as when the process is out of threads:
    patched in for `threading.Thread` where a module makes its threads."""

    def start(self) -> None:
        raise RuntimeError("can't start new thread")


def demo_command(*args: str) -> list[str]:
    """The command line of the bundled demo server as a stdio program."""
    return [sys.executable, "-m", "mcp_sync.testing.server", *args]


def hanging_server(tmp_path):
    """(flag, launcher): a demo server launcher that, once `flag` exists,
    starts a server that never answers and ignores the end of its input (a
    wedged restart). Each start adds a line to `tmp_path / "starts"`."""
    flag = tmp_path / "hang"
    launcher = tmp_path / "launch_hanging.py"
    launcher.write_text(
        "import os, sys, time\n"
        f"open({str(tmp_path / 'starts')!r}, 'a').write('x\\n')\n"
        f"if os.path.exists({str(flag)!r}):\n"
        "    sys.stdin.read()\n"
        "    time.sleep(60)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_sync.testing.server'])\n")
    return flag, launcher


_failures: list = []


def _install_checker() -> None:
    """Wrap `send()` of the bundled transports once, for the whole session
    (module-scoped fixtures send before any function fixture runs)."""
    from mcp_sync.transports.memory import MemoryTransport
    from mcp_sync.transports.stdio import StdioTransport

    for cls in (StdioTransport, MemoryTransport):
        original = cls.send

        def checked(self, message, *args, _original=original, **kwargs):
            problem = _checker.check(self, message)
            if problem:
                _failures.append(problem)
            return _original(self, message, *args, **kwargs)

        cls.send = checked

        # The revision a connection negotiated (an older one after a
        # negotiation down) is the schema its later messages are checked by.
        original_negotiated = cls.negotiated

        def negotiated(self, version, stateless, _original=original_negotiated):
            _checker.negotiated(self, version)
            return _original(self, version, stateless)

        cls.negotiated = negotiated


_install_checker()


@pytest.fixture(autouse=True)
def fresh_era_memory():
    # The era a server settled on is remembered for the process; each test
    # starts as a new process would, whatever an earlier test connected to.
    from mcp_sync import negotiation as era_memory

    era_memory.forget()
    yield


@pytest.fixture(autouse=True)
def validate_sent_messages():
    first = len(_failures)
    yield _checker
    found = _failures[first:]
    assert not found, "the client sent messages that break the schema:\n" + "\n".join(found[:5])


@pytest.fixture
def no_leaks():
    """Asserts that a test leaves no thread and no file descriptor behind."""
    before_threads = {t.ident for t in threading.enumerate()}
    before_fds = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    yield
    extra = [t for t in threading.enumerate() if t.ident not in before_threads]
    assert not extra, f"threads left running: {extra}"
    if before_fds is not None:
        after = set(os.listdir("/proc/self/fd"))
        assert len(after - before_fds) == 0, f"file descriptors left open: {sorted(after - before_fds)}"
