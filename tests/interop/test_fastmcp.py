"""mcp_sync against a FastMCP server (the standalone `fastmcp`, pinned in
`fastmcp-VERSION.txt`; the server is `fastmcp_server.py`), over stdio and
Streamable HTTP, in both eras: as `connect()` settles it (FastMCP answers
`server/discover`, so 2026-07-28) and pinned to 2025-11-25.

FastMCP cannot ask the client back from inside a tool on a 2026-07-28
connection: `ctx.elicit()` refuses before sending anything, and the
session's `create_message()` / `list_roots()` fail for want of a
back-channel. Each such tool call ends as a tool error (`is_error`), with
the input handlers never asked. The tests assert exactly that, so that a
FastMCP release that lifts the limit (or a change of the client's era
choice) shows up here, and that pinning 2025-11-25 makes the same tools
work. FastMCP's own way to ask on 2026-07-28, a tool returning an
`InputRequiredResult`, works there (and only there). docs/server-quirks.md
describes all of it for users.

Every case is one client per test, connected the way a user would: a
command list or a URL, the input handlers, and `protocol=` only where the
case is pinned. The HTTP server is shared by the module.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import urllib.parse
from contextlib import AbstractContextManager, ExitStack
from typing import Any, Iterator

import pytest

import mcp_sync
from mcp_sync.errors import ResourceNotFound
from mcp_sync.options import Reconnect
from tests.helpers import check_echoes, hammer_echo, wait_until
from tests.interop import old_peers
from tests.interop.listening import free_port, listening

SETTLED = "2026-07-28"  # what connect() settles on with FastMCP when nothing is pinned
PINNED = "2025-11-25"
ROOT_URI = "file:///srv/project"
NO_BACK_CHANNEL = ("Error calling tool {tool!r}: Cannot send {method!r}: this transport context has no "
                   "back-channel for server-initiated requests.")


def stdio_command() -> list[str]:
    python, script = old_peers.fastmcp_server()
    return [python, script, "stdio"]


def http_server(port: int) -> AbstractContextManager[str]:
    python, script = old_peers.fastmcp_server()
    return listening([python, script, "http", str(port)], port)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server(free_port()) as url:
        yield url


class Asked:
    """The input handlers of a client, and what the server asked them, in order."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()  # over stdio in the initialize era they run on handler threads
        self.handlers = {"form": self.form, "sampling": self.sampling, "roots": self.roots}

    def _record(self, kind: str, params: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((kind, params))

    def form(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("form", params)
        values = {"name": "Ada", "guests": 4}
        return {"action": "accept",
                "content": {key: values[key] for key in params["requestedSchema"]["properties"]}}

    def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("sampling", params)
        asked = params["messages"][-1]["content"]["text"]
        return {"role": "assistant", "content": {"type": "text", "text": f"short ({len(asked)} chars)"},
                "model": "test-model"}

    def roots(self, params: dict[str, Any]) -> dict[str, Any]:
        self._record("roots", params)
        return {"roots": [{"uri": ROOT_URI, "name": "project"}]}

    def kinds(self) -> list[str]:
        with self._lock:
            return [kind for kind, _ in self.requests]


@pytest.fixture
def asked() -> Asked:
    return Asked()


def _connect(transport: str, era: str, http_url: str, asked: Asked) -> mcp_sync.Client:
    target: Any = stdio_command() if transport == "stdio" else http_url
    pin = {} if era == "settled" else {"protocol": PINNED}
    return mcp_sync.connect(target, input_handlers=asked.handlers, log_level="info", **pin)


@pytest.fixture(params=[("stdio", "settled"), ("http", "settled"), ("stdio", "pinned"), ("http", "pinned")],
                ids=lambda case: "-".join(case))
def client(request, http_url, asked) -> Iterator[mcp_sync.Client]:
    transport, era = request.param
    with _connect(transport, era, http_url, asked) as connected:
        yield connected


@pytest.fixture(params=["stdio", "http"])
def settled(request, http_url, asked) -> Iterator[mcp_sync.Client]:
    """A client connected with nothing pinned."""
    with _connect(request.param, "settled", http_url, asked) as connected:
        yield connected


@pytest.fixture(params=["stdio", "http"])
def pinned(request, http_url, asked) -> Iterator[mcp_sync.Client]:
    """A client connected with protocol="2025-11-25"."""
    with _connect(request.param, "pinned", http_url, asked) as connected:
        yield connected


def test_with_nothing_pinned_connect_settles_on_2026_07_28(settled):
    assert (settled.protocol_version, settled.stateless) == (SETTLED, True)
    assert (settled.server_info.name, settled.server_info.version) == ("fastmcp-interop", old_peers.FASTMCP_VERSION)
    assert settled.instructions == "Test server for the mcp_sync interop tests."
    assert settled.discover().supported_versions == [SETTLED]
    # What the server believes it serves, from inside a tool.
    assert settled.call_tool("era").structured_content == {"result": SETTLED}


def test_pinned_it_is_an_initialize_era_session(pinned):
    assert (pinned.protocol_version, pinned.stateless) == (PINNED, False)
    assert pinned.session.protocol_version == PINNED
    assert (pinned.server_info.name, pinned.server_info.version) == ("fastmcp-interop", old_peers.FASTMCP_VERSION)
    assert pinned.call_tool("era").structured_content == {"result": PINNED}


def test_listings(client):
    tools = {tool.name: tool for tool in client.list_tools()}
    assert set(tools) == {"add", "echo", "book", "book_guarded", "summarize", "roots", "count", "era"}
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert set(tools["add"].output_schema["properties"]) == {"a", "b", "sum"}
    assert [(r.uri, r.name, r.mime_type) for r in client.list_resources()] == [
        ("config://app", "app_config", "application/json")]
    assert [(t.uri_template, t.name) for t in client.list_resource_templates()] == [("greeting://{name}", "greeting")]
    [prompt] = client.list_prompts()
    assert prompt.name == "review"
    assert [(a.name, a.required) for a in prompt.arguments] == [("code", True), ("language", False)]


def test_a_tool_with_structured_output(client):
    result = client.call_tool("add", {"a": 2, "b": 40})
    assert not result.is_error
    assert result.structured_content == {"a": 2, "b": 40, "sum": 42}
    assert client.call_tool("echo", {"text": "über 🚀"}).text == "über 🚀"


def test_progress_and_log_messages(client):
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            # The server's stderr lines share the logger (its start-up banner may come late).
            if record.getMessage().startswith("[counter]"):
                messages.append(record.getMessage())

    server_log = logging.getLogger("mcp_sync.server")
    handler = Collect(logging.INFO)
    server_log.addHandler(handler)
    old_level = server_log.level
    server_log.setLevel(logging.INFO)
    try:
        steps = []
        result = client.call_tool("count", {"to": 3}, progress=steps.append)
        assert result.text == "counted to 3"
        assert [(p.progress, p.total, p.message) for p in steps] == [(n, 3, f"step {n}") for n in (1, 2, 3)]
        # In the initialize era over stdio a log message belongs to no call
        # and is logged on the client's notification thread: wait for it.
        assert wait_until(lambda: len(messages) >= 3, 10), messages
        # FastMCP sends each message's data as an object {"msg", "extra"},
        # not a string, and the client logs the data as sent, as JSON.
        assert messages == [f'[counter] {{"msg": "counted {n}", "extra": null}}' for n in (1, 2, 3)]
    finally:
        server_log.removeHandler(handler)
        server_log.setLevel(old_level)


def test_resources_and_the_template(client):
    config = client.read_resource("config://app")
    assert (config.contents[0].uri, config.contents[0].mime_type) == ("config://app", "application/json")
    assert config.text == '{"theme": "dark", "retries": 3}'
    assert client.read_resource("greeting://Ada").text == "Hello, Ada!"


def test_the_prompt(client):
    result = client.get_prompt("review", {"code": "x = 1", "language": "lua"})
    assert result.description == "Asks for a code review."
    [message] = result.messages
    assert (message.role, message.content.text) == ("user", "Please review this lua code:\nx = 1")


def test_an_unknown_resource_is_resource_not_found_with_its_uri(client):
    # FastMCP answers -32602 "Resource not found: '<uri>'" with data.uri, in both eras.
    with pytest.raises(ResourceNotFound) as caught:
        client.read_resource("config://missing")
    assert caught.value.uri == "config://missing"
    assert caught.value.code == -32602
    with pytest.raises(ResourceNotFound) as caught:
        client.read_resource("greeting://")  # the template does not match an empty name
    assert caught.value.uri == "greeting://"


def test_sixteen_threads_each_get_their_own_answers(client):
    results, errors = hammer_echo(client, threads=16, calls=10)
    check_echoes(results, errors, threads=16, calls=10)


# -- asking the client back --------------------------------------------------------------------------------


def test_on_2026_07_28_fastmcp_cannot_ask_back_from_a_tool(settled, asked):
    assert settled.protocol_version == SETTLED
    # ctx.elicit() refuses before sending anything: a tool error, not an exception.
    book = settled.call_tool("book", {"day": "friday"})
    assert book.is_error
    assert book.text == "elicitation via server-initiated requests is unavailable on 2026-07-28 connections."
    with pytest.raises(mcp_sync.ToolError, match="unavailable on 2026-07-28"):
        book.raise_for_error()
    summary = settled.call_tool("summarize", {"text": "a long text"})
    assert summary.is_error
    assert summary.text == NO_BACK_CHANNEL.format(tool="summarize", method="sampling/createMessage")
    roots = settled.call_tool("roots")
    assert roots.is_error
    assert roots.text == NO_BACK_CHANNEL.format(tool="roots", method="roots/list")
    assert asked.kinds() == []  # nothing reached the client's handlers
    # The same client connection answers the 2026-07-28 way when asked that way.
    assert settled.call_tool("book_guarded", {"day": "friday"}).text == "Booked on friday for Ada"
    assert asked.requests == [("form", {
        "mode": "form", "message": "Booking for friday: under which name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}})]


def test_pinned_to_2025_11_25_the_same_tools_ask_back_and_work(pinned, asked):
    assert pinned.protocol_version == PINNED
    assert pinned.call_tool("book", {"day": "friday"}).text == "Booked 4 on friday for Ada"
    assert pinned.call_tool("summarize", {"text": "a long text"}).text == "test-model: short (22 chars)"
    assert pinned.call_tool("roots").structured_content == {"result": [ROOT_URI]}
    assert asked.kinds() == ["form", "sampling", "roots"]
    form, sampling = asked.requests[0][1], asked.requests[1][1]
    assert form["message"] == "Booking for friday: under which name, how many guests?"
    assert form["requestedSchema"]["required"] == ["name", "guests"]
    assert sampling["maxTokens"] == 50
    assert sampling["messages"] == [{"role": "user", "content": {"type": "text", "text": "Summarize: a long text"}}]


def test_pinned_to_2025_11_25_the_guard_tool_is_refused(pinned, asked):
    # An InputRequiredResult exists only in 2026-07-28; FastMCP refuses to send it in an older session.
    with pytest.raises(mcp_sync.InvalidParams) as caught:
        pinned.call_tool("book_guarded", {"day": "friday"})
    assert caught.value.code == -32602
    assert "only exists at MCP 2026-07-28; this connection negotiated '2025-11-25'" in caught.value.message
    assert asked.kinds() == []


def test_an_unknown_session_gets_404(http_url):
    # The spec's answer, on POST and GET alike (the TypeScript SDK's servers answer 400).
    url = urllib.parse.urlsplit(http_url)
    for method, body in (("POST", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'), ("GET", None)):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        try:
            conn.request(method, url.path, body=body, headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": "0123456789abcdef", "MCP-Protocol-Version": PINNED})
            response = conn.getresponse()
            assert response.status == 404, method
            assert json.loads(response.read())["error"] == {"code": -32600, "message": "Session not found"}
        finally:
            conn.close()


def test_a_restarted_http_server_answers_404_and_the_call_gets_a_new_session():
    # FastMCP answers a request for a session it does not know with 404
    # "Session not found", as the spec says (the TypeScript SDK's servers
    # answer 400): the call runs `initialize` again and is sent once more.
    port = free_port()
    lazy = Reconnect(initial_delay=0.05, max_delay=0.5, eager=False)
    with ExitStack() as first:
        url = first.enter_context(http_server(port))
        with mcp_sync.connect(url, protocol=PINNED, reconnect=lazy) as client:
            old_session = client.session_id
            assert old_session
            first.close()
            with http_server(port):
                assert client.call_tool("echo", {"text": "again"}).text == "again"
                assert client.session_id not in (None, old_session)
