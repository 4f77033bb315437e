"""Shared test fixtures.

Every message any client transport sends during the tests is validated
against the published JSON schema of its protocol revision (see
`tests/schemas/`): the autouse fixture `validate_sent_messages` wraps the
`send()` of the stdio and memory transports.
"""

import atexit
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.schema_check import SchemaChecker

# The on-disk era memory goes to a directory of this run's own: a test never
# reads or writes the user's cache, and child processes inherit the setting.
_ERA_CACHE = tempfile.mkdtemp(prefix="mcp-sync-tests-")
os.environ["MCP_SYNC_CACHE_DIR"] = _ERA_CACHE
atexit.register(shutil.rmtree, _ERA_CACHE, True)

# The tests start hundreds of Python servers as subprocesses. Without the
# bytecode cache each one compiles the package afresh, which doubles its
# start-up (0.3 s to 0.6 s here): in an environment that turns the cache off
# (PYTHONDONTWRITEBYTECODE), the suite takes twice as long and tests that
# give a server's start a short timeout fail. The test processes write it
# (into the gitignored __pycache__ folders), as a user's servers would.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

HERE = Path(__file__).parent

_checker = SchemaChecker(HERE / "schemas")


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
def engine():
    """A started `Connection` over a `PlayedTransport`: (conn, transport)."""
    from mcp_sync.connection import Connection, new_id_counter
    from tests.scripted_engine import PlayedTransport

    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter())
    conn.start()
    yield conn, transport
    conn.close()


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


@pytest.fixture
def serve():
    """serve(server=None, *, using=HTTPServer, **options): a started test
    server on 127.0.0.1 serving `server` (the demo server by default), or a
    ready-made one passed as `server` (an `AuthServer`, `ProtectedMCP`,
    `SSEServer`...: anything with start() and close()), started here. All
    are closed at teardown, the last started first."""
    from mcp_sync.testing import HTTPServer, Server, demo_server

    started = []

    def start(server=None, *, using=HTTPServer, **options):
        if server is not None and not isinstance(server, Server):
            assert not options, "options are for a server this fixture makes"
            served = server
        else:
            served = using(server if server is not None else demo_server(), **options)
        served.start()
        started.append(served)
        return served

    yield start
    for served in reversed(started):
        served.close()
