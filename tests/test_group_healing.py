"""`ClientGroup`: a member whose reconnecting gave up is connected anew.

A client whose `Reconnect` policy ran out of attempts is `failed` for good:
every call on it fails at once, for the life of the process. A group holds
its clients for days (a web process), so it replaces such a member with a
fresh connect at its next use, at most once every `max_delay` of the policy
(so a dead server is not hammered), and closes the failed client. So it
does for a member whose connection died with `reconnect=False`, and never
with `restart=False` ("never open a failed connection again").

Real stdio servers throughout, started through a launcher that counts its
starts and fails while a flag file exists; an initialize-era HTTP server
stopped and started again on its port. The group's clock is injected where
the rate limit is what is tested.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

import mcp_sync
from mcp_sync.options import Reconnect
from mcp_sync.status import Status
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import demo_command

#: Gives up after two quick attempts; replaced at most every 0.05 s.
SHORT = Reconnect(max_attempts=2, initial_delay=0.01, max_delay=0.05)
#: Gives up after one quick attempt; replaced at most every 60 s (of the injected clock).
ONCE_A_MINUTE = Reconnect(max_attempts=1, initial_delay=0.01, max_delay=60)


class Launcher:
    """A demo server command that counts its starts and fails to start while `broken`."""

    def __init__(self, tmp_path) -> None:
        self.flag = tmp_path / "broken"
        self.starts = tmp_path / "starts"
        script = tmp_path / "launch.py"
        script.write_text(
            "import os, sys\n"
            f"with open({str(self.starts)!r}, 'a') as f:\n"
            "    f.write('x')\n"
            f"if os.path.exists({str(self.flag)!r}):\n"
            "    sys.exit('the server is broken now')\n"
            "os.execv(sys.executable, [sys.executable, '-m', 'mcp_sync.testing.server'])\n")
        self.command = [sys.executable, str(script)]

    @property
    def count(self) -> int:
        return len(self.starts.read_text()) if self.starts.exists() else 0

    def break_it(self) -> None:
        self.flag.write_text("x")

    def mend(self) -> None:
        self.flag.unlink()


def failed(client: mcp_sync.Client) -> threading.Event:
    """Set once `client` says `failed` (its reconnect policy gave up)."""
    event = threading.Event()
    client.on_status(lambda change: event.set() if change.new is Status.FAILED else None)
    if client.status is Status.FAILED:
        event.set()
    return event


def give_up(group: mcp_sync.ClientGroup, server: str, launcher: Launcher) -> mcp_sync.Client:
    """Kill `server`'s process while its command is broken, and wait until
    its client's reconnecting gave up; that client."""
    client = group.client(server)
    gave_up = failed(client)
    launcher.break_it()
    os.kill(client._conn.transport.pid, signal.SIGKILL)
    assert gave_up.wait(30), f"reconnecting never gave up: {client.status}"
    with pytest.raises(mcp_sync.ConnectionClosed, match="gave up"):
        client.call_tool("echo", {"text": "x"})  # what every call routed to it met, for good
    return client


def test_a_member_that_gave_up_is_connected_anew_once_its_server_is_back(tmp_path, no_leaks):
    launcher = Launcher(tmp_path)
    with mcp_sync.ClientGroup({"a": launcher.command, "b": demo_command()}, timeout=20, reconnect=SHORT) as group:
        assert group.call_tool("a.echo", {"text": "first"}).text == "first"
        other = group.client("b")
        gone = give_up(group, "a", launcher)
        launcher.mend()

        assert group.call_tool("a.echo", {"text": "back"}).text == "back"
        fresh = group.client("a")
        assert fresh is not gone and fresh.status is Status.READY
        assert gone.status is Status.CLOSED  # closed when replaced: its threads and pipes are let go
        tools = group.list_tools()
        assert tools.errors == {}
        assert {"a.echo", "b.echo"} <= set(tools.names)
        assert group.read_resource("demo://readme", server="a").text
        assert group.client("b") is other  # the healthy member was left alone
        assert group.client("a") is fresh


def test_a_listing_connects_anew_a_member_that_gave_up(tmp_path, no_leaks):
    launcher = Launcher(tmp_path)
    with mcp_sync.ClientGroup({"a": launcher.command, "b": demo_command()}, timeout=20, reconnect=SHORT) as group:
        assert not group.list_tools().errors
        gone = give_up(group, "a", launcher)
        launcher.mend()
        tools = group.list_tools()
        assert tools.errors == {}, tools.errors
        assert "a.echo" in tools.names
        assert group.client("a") is not gone and gone.status is Status.CLOSED


def test_fresh_connects_to_a_dead_member_are_at_most_one_per_max_delay(tmp_path, no_leaks):
    launcher = Launcher(tmp_path)
    now = [1000.0]
    with mcp_sync.ClientGroup({"a": launcher.command}, timeout=20, reconnect=ONCE_A_MINUTE) as group:
        group._clock = lambda: now[0]
        gone = give_up(group, "a", launcher)
        starts = launcher.count

        # The first use after it gave up connects anew, at once: the server is still down.
        with pytest.raises(mcp_sync.McpError) as first:
            group.call_tool("a.echo", {"text": "x"})
        assert not isinstance(first.value, mcp_sync.RoutingError)
        assert launcher.count == starts + 1

        # Within max_delay (60 s) nothing more is started: calls, listings
        # and reads fail at once with the failed client's error.
        for _ in range(5):
            with pytest.raises(mcp_sync.ConnectionClosed, match="gave up"):
                group.call_tool("a.echo", {"text": "x"})
        assert "a" in group.list_tools().errors
        with pytest.raises(mcp_sync.ConnectionClosed):
            group.read_resource("demo://readme", server="a")
        now[0] += 59.0
        with pytest.raises(mcp_sync.ConnectionClosed, match="gave up"):
            group.call_tool("a.echo", {"text": "x"})
        assert launcher.count == starts + 1
        assert group.client("a") is gone  # kept until a fresh connect succeeds

        # Once max_delay passed, the next use connects anew: the server is back.
        launcher.mend()
        now[0] += 1.0
        assert group.call_tool("a.echo", {"text": "back"}).text == "back"
        assert launcher.count == starts + 2
        assert gone.status is Status.CLOSED


def test_a_ctrl_c_during_a_fresh_connect_gives_the_turn_back(tmp_path, no_leaks, monkeypatch):
    # Interrupted before it could try, the fresh connect was no attempt: the
    # next use tries at once, not after max_delay (60 s of the injected
    # clock, which does not move here), and what was made is let go.
    launcher = Launcher(tmp_path)
    with mcp_sync.ClientGroup({"a": launcher.command}, timeout=20, reconnect=ONCE_A_MINUTE) as group:
        group._clock = lambda: 1000.0
        gone = give_up(group, "a", launcher)
        launcher.mend()
        opened = mcp_sync.Client.open

        def interrupted(self, *args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(mcp_sync.Client, "open", interrupted)
        with pytest.raises(KeyboardInterrupt):
            group.client("a")  # (connects on the calling thread, where a Ctrl-C lands)
        monkeypatch.setattr(mcp_sync.Client, "open", opened)
        assert group.call_tool("a.echo", {"text": "back"}).text == "back"
        assert group.client("a") is not gone and gone.status is Status.CLOSED


def test_threads_meeting_a_member_that_gave_up_share_one_fresh_connect(tmp_path, no_leaks):
    launcher = Launcher(tmp_path)
    with mcp_sync.ClientGroup({"a": launcher.command}, timeout=20, reconnect=SHORT) as group:
        give_up(group, "a", launcher)
        launcher.mend()
        starts = launcher.count
        barrier = threading.Barrier(8)
        results: list[str] = []
        errors: list[BaseException] = []

        def use(n: int) -> None:
            barrier.wait()
            try:
                results.append(group.call_tool("a.echo", {"text": str(n)}).text)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=use, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        assert sorted(results) == sorted(str(n) for n in range(8))
        assert launcher.count == starts + 1  # one server started for all eight


def test_with_reconnect_false_a_member_whose_server_died_is_connected_anew(tmp_path, no_leaks):
    # reconnect=False: the client stays failed (an initialize-era server is
    # not started again by it); the group still connects the server anew.
    with mcp_sync.ClientGroup({"a": demo_command()}, timeout=20, protocol="2025-11-25", reconnect=False) as group:
        client = group.client("a")
        dead = failed(client)
        os.kill(client._conn.transport.pid, signal.SIGKILL)
        assert dead.wait(30)
        with pytest.raises(mcp_sync.McpError):
            client.call_tool("echo", {"text": "x"})  # the client alone does not heal
        assert group.call_tool("a.echo", {"text": "back"}).text == "back"
        assert group.client("a") is not client and client.status is Status.CLOSED


def test_with_restart_false_a_failed_member_stays_failed(tmp_path, no_leaks):
    # restart=False: "never open a failed connection again". The group keeps to it.
    launcher = Launcher(tmp_path)
    with mcp_sync.ClientGroup({"a": launcher.command}, timeout=20, restart=False) as group:
        client = group.client("a")
        dead = failed(client)
        os.kill(client._conn.transport.pid, signal.SIGKILL)
        assert dead.wait(30)
        starts = launcher.count
        with pytest.raises(mcp_sync.McpError):
            group.call_tool("a.echo", {"text": "x"})
        assert launcher.count == starts and group.client("a") is client


def test_an_http_member_that_gave_up_is_found_again_once_the_server_is_back():
    # An initialize-era HTTP server stopped for longer than the policy's
    # attempts last, then started again on its port.
    first = HTTPServer(demo_server(), retry_ms=20).start()
    port = first.port
    with mcp_sync.ClientGroup({"web": first.url, "b": demo_command()}, timeout=20, protocol="2025-11-25",
                              reconnect=SHORT) as group:
        assert group.call_tool("web.echo", {"text": "first"}).text == "first"
        gone = group.client("web")
        gave_up = failed(gone)
        first.close()
        assert gave_up.wait(30), f"reconnecting never gave up: {gone.status}"
        with HTTPServer(demo_server(), port=port) as second:
            assert group.call_tool("web.echo", {"text": "back"}).text == "back"
            assert group.list_tools().errors == {}
            assert second.requests
        assert group.client("web") is not gone and gone.status is Status.CLOSED
