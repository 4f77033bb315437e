"""mcp_sync against the official `mcp` server's HTTP+SSE transport
(`mcp.server.sse.SseServerTransport`): explicitly with `SSE(url)`, and
through the automatic fallback of a plain URL."""

import subprocess
import sys
import threading
from pathlib import Path

import pytest

import mcp_sync
from tests.interop.listening import free_port, wait_until_listening

SERVER = [sys.executable, str(Path(__file__).parent / "official_sse_server.py")]


@pytest.fixture(scope="module")
def url():
    port = free_port()
    proc = subprocess.Popen([*SERVER, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_listening(proc, port)
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()


def guest(params):
    return {"action": "accept", "content": {"name": "Ada", "guests": 4}}


@pytest.mark.parametrize("explicit", [True, False])
def test_tools_progress_resources_prompts_and_elicitation(url, explicit):
    target = mcp_sync.SSE(url) if explicit else url
    with mcp_sync.connect(target, input_handlers={"form": guest}) as client:
        assert client.transport_kind == "sse"
        assert not client.stateless
        assert {t.name for t in client.list_tools()} >= {"add", "shout", "steps", "broken", "book"}
        assert client.call_tool("add", {"a": 2, "b": 40}).text == "42"
        seen = []
        result = client.call_tool("steps", {"n": 3},
                                  progress=lambda p: seen.append((p.progress, threading.get_ident())))
        assert result.text == "did 3 steps"
        assert [p for p, _ in seen] == [1, 2, 3] and {t for _, t in seen} == {threading.get_ident()}
        assert client.call_tool("broken", {}).is_error
        assert client.read_resource("note://hello").text == "hello from the official SDK"
        assert "Please review" in client.get_prompt("review", {"code": "x = 1"}).messages[0].content.text
        assert client.call_tool("book", {"day": "friday"}).text == "friday: 4 for Ada"


def test_sixteen_threads(url):
    with mcp_sync.connect(mcp_sync.SSE(url)) as client:
        errors = []

        def work(n):
            try:
                for i in range(5):
                    assert client.call_tool("add", {"a": n, "b": i}).text == str(n + i)
            except Exception as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n * 100,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads), "a caller never returned"
        assert not errors


@pytest.mark.parametrize("protocol", ["2025-06-18", "2025-03-26", "2024-11-05"])
def test_older_revisions_over_sse(url, protocol):
    with mcp_sync.connect(mcp_sync.SSE(url), protocol=protocol) as client:
        assert client.protocol_version == protocol
        assert client.call_tool("shout", {"text": "hi"}).text == "HI"
