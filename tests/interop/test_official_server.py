"""mcp_sync against a server built with the official `mcp` 2.x SDK, over stdio."""

import sys
import threading
from pathlib import Path

import pytest

import mcp_sync

SERVER = [sys.executable, str(Path(__file__).parent / "official_server.py")]
ERAS = [None, "2026-07-28", "2025-11-25", "2025-06-18"]


@pytest.fixture(scope="module", params=ERAS, ids=lambda v: v or "probe")
def client(request):
    with mcp_sync.connect(SERVER, protocol=request.param) as c:
        yield c


def test_version_settled(client, request):
    expected = request.node.callspec.params["client"] or "2026-07-28"
    assert client.protocol_version == expected
    if not client.stateless:
        assert client.session.server_info.name == "official-peer"
        assert client.instructions == "An official-SDK server for interop tests."
        client.ping()


def test_probe_reads_the_discover_result():
    with mcp_sync.connect(SERVER) as client:
        assert client.server_info.name == "official-peer"
        assert "tools" in client.server_capabilities
        assert client.discover().supported_versions


def test_tools(client):
    tools = {t.name: t for t in client.list_tools()}
    assert {"add", "shout", "steps", "broken"} <= set(tools)
    assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
    result = client.call_tool("add", {"a": 20, "b": 22})
    assert result.text == "42"
    if tools["add"].output_schema is not None:
        assert result.structured_content == {"result": 42}
    assert client.call_tool(tools["shout"], {"text": "hey"}).text == "HEY"


def test_tool_error_is_a_result(client):
    result = client.call_tool("broken", {})
    assert result.is_error and "broken" in result.text
    with pytest.raises(mcp_sync.ToolError):
        result.raise_for_error()


def test_progress_on_the_calling_thread(client):
    seen = []
    result = client.call_tool("steps", {"n": 3},
                              progress=lambda p: seen.append((p.progress, p.total, threading.current_thread())))
    assert result.text == "did 3 steps"
    assert [(p, t) for p, t, _ in seen] == [(1, 3), (2, 3), (3, 3)]
    assert {th for _, _, th in seen} == {threading.current_thread()}


def test_resources(client):
    assert "note://hello" in [r.uri for r in client.list_resources()]
    assert client.read_resource("note://hello").text == "hello from the official SDK"
    assert [t.uri_template for t in client.list_resource_templates()] == ["note://items/{item}"]
    assert client.read_resource("note://items/7").text == "item 7"
    with pytest.raises(mcp_sync.ServerError):
        client.read_resource("note://missing")


def test_prompts(client):
    prompts = {p.name: p for p in client.list_prompts()}
    assert [a.name for a in prompts["review"].arguments] == ["code"]
    rendered = client.get_prompt("review", {"code": "x = 1"})
    assert "x = 1" in rendered.messages[0].content.text


def test_unknown_tool(client):
    with pytest.raises(mcp_sync.McpError):
        result = client.call_tool("nope", {})
        result.raise_for_error()


def test_many_threads(client):
    errors = []

    def work(n):
        for i in range(10):
            if client.call_tool("add", {"a": n, "b": i}).text != str(n + i):
                errors.append((n, i))

    pool = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    assert errors == []


def booking_form(asked):
    def form(params):
        asked.append((params["message"], threading.current_thread()))
        return {"action": "accept", "content": {"name": "Ada", "guests": 3}}
    return form


@pytest.mark.parametrize("protocol", ERAS)
def test_elicitation_is_answered_where_it_belongs(protocol):
    """Stateless: the call's own input_required round, on the calling thread.
    Initialize era over stdio: nothing says which call a server request is
    for; the client-level handler answers it, on the thread of the one call
    waiting."""
    asked = []
    with mcp_sync.connect(SERVER, protocol=protocol, input_handlers={"form": booking_form(asked)}) as client:
        assert client.call_tool("book", {"day": "friday"}).text == "friday: 3 for Ada"
    assert [message for message, _ in asked] == ["Who is coming?"]
    assert asked[0][1] is threading.current_thread()


def test_without_a_form_handler_the_server_says_what_is_missing():
    with mcp_sync.connect(SERVER) as client:
        with pytest.raises(mcp_sync.MissingClientCapability):
            client.call_tool("book", {"day": "friday"})


def test_listen_against_the_official_server():
    with mcp_sync.connect(SERVER) as client:
        with client.listen(tools_list_changed=True, resource_subscriptions=["note://hello"]) as sub:
            assert sub.accepted.get("toolsListChanged") is True
            assert client.call_tool("announce", {}).text == "announced"
            events = [sub.next(timeout=10), sub.next(timeout=10)]
        assert {(e.method, e.params.get("uri")) for e in events} == {
            ("notifications/tools/list_changed", None), ("notifications/resources/updated", "note://hello")}
