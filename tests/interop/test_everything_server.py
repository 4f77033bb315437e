"""mcp_sync against the reference `@modelcontextprotocol/server-everything`
(pinned in `everything/package.json`), the server every MCP client is tried
against, built on the TypeScript SDK: over stdio and Streamable HTTP, in the
era it speaks (2025-11-25).

Its HTTP side is the TypeScript SDK's example wiring, which most deployed
TypeScript servers copy: an unknown session gets 400 "Bad Request: No valid
session ID provided" (not the spec's 404), on POST and GET alike. A client
must still notice a restarted server and set up a new session by itself.
It listens on every interface by default, so it is started with
`loopback.cjs` preloaded, which binds it to 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import mcp_sync
from mcp_sync.status import Status
from mcp_sync.options import Reconnect
from tests.helpers import next_event, wait_until
from tests.interop.everything_peer import http_server, stdio_command
from tests.interop.listening import free_port

HERE = Path(__file__).parent
STARTS = str(HERE.parent / "servers" / "starts.py")
FAST = Reconnect(initial_delay=0.05, max_delay=0.5)


def test_stdio_one_start_its_era_and_its_tools(tmp_path):
    count = tmp_path / "starts"
    with mcp_sync.connect([sys.executable, STARTS, str(count), "--", *stdio_command()]) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info.name
        names = {tool.name for tool in client.list_tools()}
        assert {"echo", "get-sum"} <= names
        assert client.call_tool("echo", {"message": "hi"}).text == "Echo: hi"
    assert len(count.read_text().split()) == 1, "the server was started more than once"


def test_stdio_sixteen_threads_each_get_their_own_answers():
    with mcp_sync.connect(stdio_command()) as client:
        def call(i: int) -> str:
            return client.call_tool("echo", {"message": f"thread {i}"}).text

        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(call, range(160)))
    assert got == [f"Echo: thread {i}" for i in range(160)]


def test_an_idle_stdio_client_heals_after_the_server_died():
    with mcp_sync.connect(stdio_command(), reconnect=FAST) as client:
        changes: list[tuple[str, str]] = []
        client.on_status(lambda change: changes.append((change.old.value, change.new.value)))
        old = client._conn.transport.pid
        os.kill(old, 9)
        assert wait_until(lambda: changes[-1:] == [("reconnecting", "ready")], 30), changes
        assert changes == [("ready", "reconnecting"), ("reconnecting", "ready")]
        assert client._conn.transport.pid != old
        assert client.call_tool("echo", {"message": "back"}).text == "Echo: back"


def test_http_calls_and_sixteen_threads():
    with http_server(free_port()) as url, mcp_sync.connect(url) as client:
        assert client.protocol_version == "2025-11-25"
        assert client._conn.transport.session_id
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda i: client.call_tool("get-sum", {"a": i, "b": 1}).text, range(64)))
        assert [text.rsplit(" ", 1)[-1].rstrip(".") for text in got] == [str(i + 1) for i in range(64)]


def test_a_restarted_http_server_gets_a_new_session_and_the_subscription_resumes():
    # No call is made: the GET stream ends with the old process, the new one
    # answers the old session's GET with 400, and the client sets up a new
    # session, opens the subscription again and says so.
    port = free_port()
    with ExitStack() as first:
        url = first.enter_context(http_server(port))
        with mcp_sync.connect(url, reconnect=FAST) as client:
            changes: list[tuple[str, str]] = []
            client.on_status(lambda change: changes.append((change.old.value, change.new.value)))
            sub = client.listen(tools_list_changed=True)
            old_session = client._conn.transport.session_id
            first.close()  # the server goes away...
            with http_server(port):  # ...and comes back on the same port, knowing no session
                event = next_event(sub, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken), 30)
                assert isinstance(event, mcp_sync.SubscriptionResumed), event
                assert wait_until(lambda: changes[-1:] == [("reconnecting", "ready")], 10), changes
                assert ("ready", "reconnecting") in changes and client.status is Status.READY
                assert client._conn.transport.session_id not in (None, old_session)
                assert client.call_tool("echo", {"message": "again"}).text == "Echo: again"
                sub.close()


def test_a_call_that_meets_the_400_of_an_unknown_session_gets_a_new_one():
    # Lazy healing and no GET stream to notice: the call itself meets the
    # 400 "No valid session ID provided", which is a lost session, not a
    # server error; it is sent again in a new session.
    port = free_port()
    lazy = Reconnect(initial_delay=0.05, max_delay=0.5, eager=False)
    with ExitStack() as first:
        url = first.enter_context(http_server(port))
        with mcp_sync.connect(url, reconnect=lazy) as client:
            old_session = client._conn.transport.session_id
            first.close()
            with http_server(port):
                assert client.call_tool("echo", {"message": "again"}).text == "Echo: again"
                assert client._conn.transport.session_id != old_session


def test_the_readme_example_against_it(capsys):
    """The README's "A real server" example, run as written but for the
    command (npx fetching the package becomes the pinned install); each
    line it prints is the one its comment shows, and it names the pinned
    version."""
    import json
    import re

    readme = (HERE.parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A real server", 1)[1]
    code = re.search(r"^```py\n(.*?)^```", section, re.M | re.S).group(1)
    pinned = json.loads((HERE / "everything" / "package.json").read_text())["dependencies"][
        "@modelcontextprotocol/server-everything"]
    npx = f'["npx", "-y", "@modelcontextprotocol/server-everything@{pinned}"]'
    assert npx in code, "the README's example must start the pinned version with npx"
    namespace: dict = {"_command": stdio_command()}
    exec(compile(code.replace(npx, "_command"), "README.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    shown = [line.split("# -> ", 1)[1].strip() for line in code.splitlines() if "# -> " in line]
    assert printed == shown
