"""mcp_sync against the official `mcp` 2.x server over Streamable HTTP:
stateless (2026-07-28) and stateful (initialize era, with sessions)."""

import subprocess
import sys
import threading
from pathlib import Path

import pytest

import mcp_sync
from tests.helpers import wait_until
from tests.interop.listening import free_port, wait_until_listening

SERVER = [sys.executable, str(Path(__file__).parent / "official_server.py"), "--http"]


def run_server(mode):
    port = free_port()
    proc = subprocess.Popen([*SERVER, str(port), mode], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_listening(proc, port)
        yield mode, f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()


@pytest.fixture(scope="module")
def stateful():
    yield from run_server("stateful")


@pytest.fixture(scope="module")
def stateless():
    yield from run_server("stateless")


@pytest.fixture(params=["stateful", "stateless"])
def server(request):
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("protocol", [None, "2026-07-28", "2025-11-25", "2025-06-18"])
def test_tools_resources_prompts_progress(server, protocol):
    mode, url, _ = server
    with mcp_sync.connect(url, protocol=protocol) as client:
        assert client.protocol_version == (protocol or "2026-07-28")
        transport = client._conn.transport
        if client.stateless or mode == "stateless":
            assert transport.session_id is None
        else:
            assert transport.session_id
        assert {t.name for t in client.list_tools()} >= {"add", "shout", "steps", "broken"}
        assert client.call_tool("add", {"a": 2, "b": 40}).text == "42"
        seen = []
        result = client.call_tool("steps", {"n": 3}, progress=lambda p: seen.append((p.progress, threading.get_ident())))
        assert result.text == "did 3 steps"
        assert [p for p, _ in seen] == [1, 2, 3] and {t for _, t in seen} == {threading.get_ident()}
        assert client.read_resource("note://hello").text == "hello from the official SDK"
        assert "x = 1" in client.get_prompt("review", {"code": "x = 1"}).messages[0].content.text
        assert client.call_tool("broken", {}).is_error


def test_session_is_deleted_on_close(stateful):
    _, url, _ = stateful
    client = mcp_sync.connect(url, protocol="2025-11-25")
    session = client._conn.transport.session_id
    assert session
    client.close()
    # The server forgot the session: a request that carries it is answered 404.
    import urllib.request

    request = urllib.request.Request(url, method="POST", data=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 404


def test_many_threads_share_one_http_client(server):
    _, url, _ = server
    errors = []
    with mcp_sync.connect(url) as client:
        def work(n):
            for i in range(20):
                got = client.call_tool("add", {"a": n, "b": i}).text
                if got != str(n + i):
                    errors.append((n, i, got))

        pool = [threading.Thread(target=work, args=(n,)) for n in range(16)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=120)
    assert errors == []


def test_elicitation_over_http_stateless(server):
    # 2026-07-28 asks inside the result (input_required), whatever the server's mode.
    check_elicitation(server[1], None)


@pytest.mark.parametrize("protocol", ["2025-11-25", "2025-06-18"])
def test_elicitation_over_http_sessions(stateful, protocol):
    # The initialize era asks with a server request on the call's SSE stream,
    # which needs the server's stateful mode (its stateless mode has no back-channel).
    check_elicitation(stateful[1], protocol)


def check_elicitation(url, protocol):
    asked = []

    def form(params):
        asked.append(threading.current_thread())
        return {"action": "accept", "content": {"name": "Ada", "guests": 4}}

    with mcp_sync.connect(url, protocol=protocol, input_handlers={"form": form}) as client:
        assert client.call_tool("book", {"day": "monday"}).text == "monday: 4 for Ada"
    assert asked == [threading.current_thread()]


def test_listen_over_http_against_the_official_server(server):
    _, url, _ = server
    with mcp_sync.connect(url) as client:
        with client.listen(tools_list_changed=True) as sub:
            assert client.call_tool("announce", {}).text == "announced"
            event = sub.next(timeout=10)
        assert event.method == "notifications/tools/list_changed"


def test_a_restarted_stateful_server_gets_a_new_session_and_the_subscription_resumes():
    # The official server restarted on its port: the GET stream ends, the
    # new process answers the old session with 404, and the idle client sets
    # up a new session and opens its subscription again, with no call.
    first = run_server("stateful")
    _, url, _ = next(first)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    fast = mcp_sync.Reconnect(initial_delay=0.05, max_delay=0.5)
    try:
        with mcp_sync.connect(url, protocol="2025-11-25", reconnect=fast) as client:
            changes = []
            client.on_status(lambda change: changes.append((change.old.value, change.new.value)))
            sub = client.listen(tools_list_changed=True)
            old_session = client._conn.transport.session_id
            first.close()  # the generator's finally: the server process ends
            proc = subprocess.Popen([*SERVER, str(port), "stateful"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            try:
                wait_until_listening(proc, port)
                event = sub.next(timeout=30)
                while not isinstance(event, (mcp_sync.SubscriptionResumed, mcp_sync.SubscriptionBroken)):
                    event = sub.next(timeout=30)
                assert isinstance(event, mcp_sync.SubscriptionResumed), event
                assert wait_until(lambda: changes[-1:] == [("reconnecting", "ready")], 10), changes
                assert client._conn.transport.session_id not in (None, old_session)
                assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
                sub.close()
            finally:
                proc.terminate()
                proc.wait(timeout=30)
                proc.stderr.close()
    finally:
        first.close()
