"""A process forked from C: fork(2) called directly, as an application
server's master or an extension does, so no `os.register_at_fork` hook runs.

`python -m tests.fork_from_c SCENARIO [PROTOCOL]`, from the repository
root, runs one scenario in a fresh interpreter: the parent sets up, forks
with `ctypes.PyDLL(None).fork()` (which keeps the GIL across the call, as
`os.fork()` does), the child does what the scenario says and reports by its
exit status, and the parent checks that its own connections were left
alone. Exit status 0 when both sides behaved; otherwise what went wrong is
on stderr. `tests/test_fork.py` runs every scenario.

Without `PyOS_AfterFork_Child` CPython itself is safe in such a child only
if no thread was waiting for the GIL at the fork (its condition variable
keeps that waiter for ever, and the child hangs at its next release of the
GIL). So every scenario forks with the process quiet: only the client's own
threads, each blocked reading a stdio server that has nothing more to say
(an HTTP server in this process, or an event stream still settling, would
make the test fail at random for CPython's reason, not the client's).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Callable

import mcp_sync
from tests.helpers import reap

DEMO = [sys.executable, "-m", "mcp_sync.testing.server"]
PEER = [sys.executable, str(Path(__file__).parent / "servers" / "fork_peer.py")]
CHILD_DEADLINE = 60.0


def fork_from_c(child: Callable[[], None]) -> None:
    """Fork from C, run `child` there (exit 0 unless it raises), and wait for
    it in the parent; a child still running at the deadline is killed."""
    pid = ctypes.PyDLL(None).fork()
    if pid == 0:
        code = 1
        try:
            child()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    [code] = reap([pid], CHILD_DEADLINE)
    assert code is not None, f"the child hung for {CHILD_DEADLINE:g} s and was killed"
    assert code == 0, "the child failed (its traceback is above)"


def echo(client: mcp_sync.Client, text: str) -> None:
    got = client.call_tool("echo", {"text": text}).text
    assert got == text, f"sent {text!r}, got {got!r}"


def server_pid(client: mcp_sync.Client) -> int:
    return client._conn.transport.pid  # type: ignore[union-attr]


def calls(protocol: str) -> None:
    """The child's calls get their own server and their own answers."""
    with mcp_sync.connect(DEMO, protocol=protocol, timeout=20) as client:
        echo(client, "before")
        parents = server_pid(client)

        def child() -> None:
            for i in range(20):
                echo(client, f"child-{i}")
            assert server_pid(client) != parents, "the child used the parent's server"
            client.close()

        fork_from_c(child)
        for i in range(20):
            echo(client, f"parent-{i}")
        assert server_pid(client) == parents


def close_only(protocol: str) -> None:
    """A child that only closes the client leaves the parent's server running."""
    with mcp_sync.connect(DEMO, protocol=protocol, timeout=20) as client:
        echo(client, "before")
        parents = server_pid(client)
        fork_from_c(client.close)
        echo(client, "after")
        assert server_pid(client) == parents, "the child's close() stopped the parent's server"


def dropped(protocol: str) -> None:
    """A client the child drops unclosed (its finalizer closes it) leaves the parent's server running."""
    held = [mcp_sync.connect(DEMO, protocol=protocol, timeout=20)]
    client = held[0]
    echo(client, "before")
    parents = server_pid(client)
    del client

    def child() -> None:
        held.clear()
        gc.collect()
        for thread in threading.enumerate():
            if thread.name == "mcp-sync-finalizer":
                thread.join(10)

    fork_from_c(child)
    client = held[0]
    try:
        echo(client, "after")
        assert server_pid(client) == parents, "the child's finalizer stopped the parent's server"
    finally:
        client.close()


def group(protocol: str) -> None:
    """A group's listing and close() in the child use the child's own threads and servers."""
    with mcp_sync.ClientGroup({"a": DEMO, "b": DEMO}, protocol=protocol, timeout=20) as clients:
        assert {"a.echo", "b.echo"} <= set(clients.list_tools().names)  # the pool's threads exist now
        parents = {name: server_pid(clients.client(name)) for name in ("a", "b")}

        def child() -> None:
            listing = clients.list_tools()
            assert not listing.errors and {"a.echo", "b.echo"} <= set(listing.names), listing.errors
            assert clients.call_tool("a.echo", {"text": "child"}).text == "child"
            assert server_pid(clients.client("a")) != parents["a"]
            clients.close()

        fork_from_c(child)
        assert clients.call_tool("b.echo", {"text": "parent"}).text == "parent"
        assert {name: server_pid(clients.client(name)) for name in ("a", "b")} == parents


def subscription(protocol: str) -> None:
    """An inherited subscription ends at once in the child, whose close() leaves the parent's stream alone."""
    with mcp_sync.connect(PEER, protocol=protocol, timeout=20) as client:
        sub = client.listen(tools_list_changed=True)

        def child() -> None:
            event = sub.next(timeout=5)
            assert isinstance(event, mcp_sync.SubscriptionBroken) and "parent process" in str(event.error), event
            sub.close()
            client.close()

        fork_from_c(child)
        client.call_tool("add_tool", {"name": "new"})
        event = sub.next(timeout=10)
        assert isinstance(event, mcp_sync.Notification), f"the parent's subscription got {event!r}"
        assert event.method == "notifications/tools/list_changed"
        sub.close()


def cache(protocol: str) -> None:
    """A read the parent's cache has in flight at the fork is not waited for in the child."""
    hold = Path(tempfile.gettempdir()) / f"fork-peer-hold-{os.getpid()}"
    hold.touch()  # the parent's server holds its first read; the child's, started once it is gone, does not
    try:
        client = mcp_sync.connect([*PEER, "--hold-if", str(hold)], protocol=protocol, cache=True, timeout=20)
        echo(client, "started")  # a stateless connect needs no round trip: this one proves the server is up
    finally:
        hold.unlink()
    with client:
        reader = threading.Thread(target=lambda: client.read_resource("test://slow", timeout=30))
        reader.start()
        assert client.call_tool("reading").text == "yes"

        def child() -> None:
            # The child's first use is that same read. Without the reset first
            # it joins the parent's fetch, which no thread of its own finishes.
            assert client.read_resource("test://slow", timeout=5).text == "fresh"
            client.close()

        try:
            fork_from_c(child)
        finally:
            client.call_tool("release")
            reader.join(30)


SCENARIOS = {"cache": cache, "calls": calls, "close_only": close_only, "dropped": dropped, "group": group,
             "subscription": subscription}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2] if len(sys.argv) > 2 else "2026-07-28")
