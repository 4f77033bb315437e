"""The initialize-era revisions older than 2025-06-18: 2025-03-26 and 2024-11-05.

Servers built on SDK releases still in wide use answer `initialize` with one
of these; the client must accept them when negotiating down from its default
list and when pinned with `protocol=`. Every message the client sends here is
checked against the schema of the negotiated revision by the autouse fixture
in `tests/conftest.py` (stdio); the HTTP test checks what it receives itself.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import mcp_sync
import mcp_sync.testing
from mcp_sync.protocol import versions
from mcp_sync.types import AudioContent, CallToolResult, Tool
from tests.helpers import demo_command, recorded_messages, scripted
from tests.schema_check import SchemaChecker

OLD = ["2025-03-26", "2024-11-05"]
SCHEMAS = SchemaChecker(Path(__file__).parent / "schemas")


# -- stdio ------------------------------------------------------------------------


@pytest.mark.parametrize("version", OLD)
def test_negotiated_down_from_the_default_list(tmp_path, version):
    # The server knows only `version`: it refuses the probe (-32601) and
    # answers initialize (asked with the newest initialize-era version) with its own.
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--versions", version, "--record", str(record))) as client:
        assert client.protocol_version == version
        assert client.stateless is False
        assert [t.name for t in client.list_tools()] == ["echo"]
        assert client.call_tool("echo", {"text": "hi"}).content[0].text == "hi"
    sent = recorded_messages(record)
    initialize = next(m for m in sent if m.get("method") == "initialize")
    assert initialize["params"]["protocolVersion"] == versions.INITIALIZE_VERSIONS[0]
    assert [m.get("method") for m in sent][-3:] == ["notifications/initialized", "tools/list", "tools/call"]
    # What follows initialize is sent under the negotiated revision: its schema applies.
    for message in sent[sent.index(initialize) + 1:]:
        assert SCHEMAS.check(None, message, version=version) is None


@pytest.mark.parametrize("version", OLD)
def test_pinned(tmp_path, version, validate_sent_messages):
    record = tmp_path / "record"
    checked = validate_sent_messages.checked
    with mcp_sync.connect(scripted("--versions", version, "--record", str(record)), protocol=version) as client:
        assert client.protocol_version == version
        assert [t.name for t in client.list_tools()] == ["echo"]
        assert client.call_tool("echo", {"text": "pinned"}).content[0].text == "pinned"
    sent = recorded_messages(record)
    # A pin to an initialize-era version skips the probe and asks for exactly that version.
    assert [m.get("method") for m in sent] == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    assert sent[0]["params"]["protocolVersion"] == version
    # The pinned initialize names `version`, so every message was checked
    # against that revision's schema (and not skipped as unknown).
    assert validate_sent_messages.checked - checked == 4


def test_pinned_old_revision_declares_no_elicitation(tmp_path):
    # Elicitation only exists from 2025-06-18 on; a 2025-03-26 initialize
    # must not declare a capability the revision lacks.
    record = tmp_path / "record"
    with mcp_sync.connect(
        scripted("--versions", "2025-03-26", "--record", str(record)), protocol="2025-03-26",
        client_capabilities={"elicitation": {}, "roots": {"listChanged": True}},
    ) as client:
        assert client.protocol_version == "2025-03-26"
    capabilities = recorded_messages(record)[0]["params"]["capabilities"]
    assert "elicitation" not in capabilities
    assert capabilities["roots"] == {"listChanged": True}


def test_an_old_answer_outside_the_pin_is_still_refused():
    with pytest.raises(mcp_sync.errors.VersionNegotiationError):
        mcp_sync.connect(scripted("--answer-version", "2024-11-05"), protocol=["2025-06-18", "2025-03-26"])


# -- versions.py ------------------------------------------------------------------


def test_old_revisions_are_offered_after_the_newer_ones():
    assert versions.SUPPORTED_VERSIONS == ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert versions.allowed_versions(["2024-11-05", "2025-03-26", "2026-07-28"]) == (
        "2026-07-28", "2025-03-26", "2024-11-05")
    for version in OLD:
        dialect = versions.dialect_for(version)
        assert not dialect.stateless
        assert dialect.defines("ping") and dialect.defines("logging/setLevel")
        assert not dialect.defines("server/discover")
        assert dialect.request_meta({}, {"name": "c", "version": "1"}, "info") == {}


@pytest.mark.parametrize(("version", "header"), [
    ("2026-07-28", True), ("2025-11-25", True), ("2025-06-18", True), ("2025-03-26", False), ("2024-11-05", False),
])
def test_protocol_version_header_only_where_the_revision_has_it(version, header):
    assert versions.dialect_for(version).protocol_version_header is header


@pytest.mark.parametrize("version", OLD)
def test_capabilities_a_revision_lacks_are_dropped(version):
    declared = versions.dialect_for(version).declarable_capabilities(
        {"elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": False}, "experimental": {"x": {}}})
    assert declared == {"sampling": {}, "roots": {"listChanged": False}, "experimental": {"x": {}}}
    newer = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}
    assert versions.dialect_for("2025-11-25").declarable_capabilities(newer) == newer


# -- results shaped by the old revisions --------------------------------------------


def test_old_results_parse():
    # 2024-11-05: no title, no outputSchema, no annotations, no structuredContent.
    tool = Tool.from_wire({"name": "echo", "description": "d", "inputSchema": {"type": "object"}})
    assert tool.name == "echo" and tool.title is None and tool.output_schema is None
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": "x"}], "isError": False})
    assert result.structured_content is None and result.content[0].text == "x"
    # 2025-03-26: audio content and tool annotations.
    audio = CallToolResult.from_wire({"content": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]})
    assert isinstance(audio.content[0], AudioContent) and audio.content[0].mime_type == "audio/wav"
    annotated = Tool.from_wire({"name": "rm", "inputSchema": {"type": "object"},
                                "annotations": {"destructiveHint": True, "title": "Remove"}})
    assert annotated.annotations == {"destructiveHint": True, "title": "Remove"}


# -- Streamable HTTP (2025-03-26) -------------------------------------------------------


class _OldHTTPServer(ThreadingHTTPServer):
    """A 2025-03-26 Streamable HTTP server on loopback: answers with JSON
    bodies and records each POST's headers and message."""

    daemon_threads = True

    def __init__(self, version):
        super().__init__(("127.0.0.1", 0), _OldHandler)
        self.version = version
        self.posts = []


class _OldHandler(BaseHTTPRequestHandler):
    server: _OldHTTPServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

    def log_message(self, *args):
        pass

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.posts.append((dict(self.headers), message))
        if "id" not in message:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        method = message["method"]
        if method == "initialize":
            body = {"protocolVersion": self.server.version, "capabilities": {"tools": {}},
                    "serverInfo": {"name": "old", "version": "1"}}
        elif method == "tools/list":
            body = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            body = {"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]}
        else:
            self._reply({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}}, None)
            return
        self._reply({"jsonrpc": "2.0", "id": message["id"], "result": body},
                    "s-1" if method == "initialize" else None)

    def _reply(self, message, session):
        data = json.dumps(message).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if session:
            self.send_header("Mcp-Session-Id", session)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        self.do_GET()


@pytest.fixture
def old_http():
    servers = []

    def start(version):
        server = _OldHTTPServer(version)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("pin", [False, True])
def test_streamable_http_2025_03_26(old_http, pin):
    server = old_http("2025-03-26")
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    protocol = "2025-03-26" if pin else versions.INITIALIZE_VERSIONS
    with mcp_sync.connect(url, protocol=protocol) as client:
        assert client.protocol_version == "2025-03-26"
        assert [t.name for t in client.list_tools()] == ["echo"]
        assert client.call_tool("echo", {"text": "http"}).content[0].text == "http"
    posts = server.posts
    assert [m.get("method") for _, m in posts] == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    for headers, message in posts:
        # Checked against the revision the message is sent under: initialize
        # names its own, everything after it is 2025-03-26.
        under = None if message["method"] == "initialize" else "2025-03-26"
        assert SCHEMAS.check(None, message, version=under) is None
        if under is not None:
            assert headers.get("Mcp-Session-Id") == "s-1"
            # 2025-03-26 has no MCP-Protocol-Version header (added in 2025-06-18).
            assert "MCP-Protocol-Version" not in headers, message["method"]


# -- the test server pinned to an old revision: everything the client sends ----------


SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "short."}, "model": "m"}
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}


@pytest.fixture
def sent_methods(monkeypatch):
    """Every message the stdio and memory transports send, in order (the
    schema checker of conftest validates each against the revision)."""
    from mcp_sync.transports.memory import MemoryTransport
    from mcp_sync.transports.stdio import StdioTransport

    sent = []
    for cls in (StdioTransport, MemoryTransport):
        def send(self, message, *args, _original=cls.send, **kwargs):
            sent.append(message)
            return _original(self, message, *args, **kwargs)

        monkeypatch.setattr(cls, "send", send)
    return sent


def _old_target(kind, version):
    if kind == "memory":
        return mcp_sync.testing.demo_server(versions=[version])
    return demo_command("--versions", version)


@pytest.mark.parametrize("kind", ["memory", "stdio"])
@pytest.mark.parametrize("version", OLD)
def test_every_request_kind_at_an_old_revision(kind, version, sent_methods, validate_sent_messages):
    # tools, progress, structured output's absence, resources, prompts,
    # completion, logging/setLevel, ping, cancellation, and answers to
    # roots/list and sampling/createMessage: each message checked against
    # the schema of `version` by the conftest checker.
    checked = validate_sent_messages.checked
    handlers = {"roots": lambda params: ROOTS, "sampling": lambda params: SAMPLED,
                "form": lambda params: {"action": "decline"}}
    with mcp_sync.connect(_old_target(kind, version), protocol=version, input_handlers=handlers,
                          log_level="info", client_info={"name": "c", "version": "1", "title": "The C"}) as client:
        assert client.protocol_version == version
        tools = {t.name: t for t in client.list_tools()}
        assert all(t.title is None and t.output_schema is None for t in tools.values())
        # Tool annotations came with 2025-03-26.
        assert (tools["echo"].annotations is not None) is (version == "2025-03-26")
        seen = []
        assert client.call_tool("countdown", {"steps": 2, "delay": 0}, progress=seen.append).text == "liftoff"
        assert [p.progress for p in seen] == [1, 2]
        weather = client.call_tool("weather", {"city": "Oslo"})
        assert weather.structured_content is None and weather.content
        assert client.call_tool("show_roots", {}).text == "file:///work"
        assert client.call_tool("summarize", {"text": "long"}).text == "short."
        assert client.call_tool("log", {"level": "warning", "message": "hi"}).text == "logged"
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("sleep", {"seconds": 5}, timeout=0.2)
        assert client.list_resources() and client.list_resource_templates()
        assert client.read_resource("demo://readme").contents
        prompts = client.list_prompts()
        assert all(p.title is None for p in prompts)
        assert client.get_prompt("greet", {"name": "Ada"}).messages
        assert client.complete({"type": "ref/prompt", "name": "greet"}, "style", "f").values is not None
        client.request("logging/setLevel", {"level": "debug"})
        client.ping()
    methods = [m.get("method") for m in sent_methods]
    for method in ("initialize", "notifications/initialized", "logging/setLevel", "tools/list", "tools/call",
                   "notifications/cancelled", "resources/list", "resources/templates/list", "resources/read",
                   "prompts/list", "prompts/get", "completion/complete", "ping"):
        assert method in methods, method
    answers = [m for m in sent_methods if "method" not in m]
    assert {"roots", "model"} <= {key for m in answers for key in m.get("result", {})}, answers
    initialize = sent_methods[0]
    # Pinned: the revision's own shapes, no elicitation, no clientInfo title.
    assert initialize["params"]["clientInfo"] == {"name": "c", "version": "1"}
    assert set(initialize["params"]["capabilities"]) == {"roots", "sampling"}
    assert validate_sent_messages.checked - checked == len(sent_methods)


@pytest.mark.parametrize("version", OLD)
def test_elicitation_is_not_offered_to_an_old_server(version):
    # The client has a form handler, yet declares no elicitation: the
    # server's tool learns that the client lacks the capability.
    server = mcp_sync.testing.demo_server(versions=[version])
    with mcp_sync.connect(server, protocol=version,
                          input_handlers={"form": lambda params: {"action": "accept", "content": {}}}) as client:
        result = client.call_tool("book_table", {"date": "today"})
    assert result.is_error and "elicitation" in result.text


def test_client_info_title_is_kept_where_the_revision_has_it(tmp_path):
    record = tmp_path / "record"
    info = {"name": "c", "version": "1", "title": "The C"}
    with mcp_sync.connect(scripted("--versions", "2025-06-18", "--record", str(record)), protocol="2025-06-18",
                          client_info=info):
        pass
    assert recorded_messages(record)[0]["params"]["clientInfo"] == info
    for version in OLD:
        assert versions.dialect_for(version).client_info(info) == {"name": "c", "version": "1"}


def test_no_output_validation_before_structured_output():
    # A 2025-03-26 server that lists an outputSchema (not in its revision)
    # and answers with text only, as that revision's servers do: no
    # OutputValidationError, since the revision has no structured output.
    from tests.test_batches import BATCHING

    assert versions.dialect_for("2025-03-26").structured_output is False
    assert versions.dialect_for("2025-06-18").structured_output is True
    with mcp_sync.connect(BATCHING, protocol="2025-03-26") as client:
        assert client.list_tools()[0].output_schema is not None
        result = client.call_tool("weather", {})
    assert result.text == "sunny" and result.structured_content is None


def test_results_with_fields_of_other_revisions_parse():
    # An old server's result with fields its revision lacks (or unknown
    # ones) still parses; what the types do not name stays in `raw`.
    tool = Tool.from_wire({"name": "t", "inputSchema": {"type": "object"}, "icons": [{"src": "x"}],
                           "somethingNew": 1})
    assert tool.name == "t" and tool.raw["somethingNew"] == 1
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": "x"}, {"type": "future", "z": 1}],
                                       "structuredContent": {"a": 1}, "extra": True})
    assert result.structured_content == {"a": 1} and result.content[0].text == "x" and len(result.content) == 2


@pytest.mark.parametrize("version", OLD)
def test_streamable_http_test_server_at_an_old_revision(version):
    # The bundled test server pinned to an old revision over Streamable
    # HTTP: no MCP-Protocol-Version header (the server accepts its absence
    # only there), progress on the POST stream, roots and sampling answered
    # by POST; every posted message valid under `version`.
    handlers = {"roots": lambda params: ROOTS, "sampling": lambda params: SAMPLED}
    with mcp_sync.testing.HTTPServer(mcp_sync.testing.demo_server(versions=[version])) as http:
        with mcp_sync.connect(http.url, protocol=version, input_handlers=handlers) as client:
            assert client.protocol_version == version
            seen = []
            assert client.call_tool("countdown", {"steps": 2, "delay": 0}, progress=seen.append).text == "liftoff"
            assert [p.progress for p in seen] == [1, 2]
            assert client.call_tool("show_roots", {}).text == "file:///work"
            assert client.call_tool("summarize", {"text": "long"}).text == "short."
            assert client.call_tool("weather", {"city": "Oslo"}).structured_content is None
        posts = [r for r in http.requests if r.method == "POST" and isinstance(r.json, dict)]
    assert {"roots", "model"} <= {k for r in posts for k in r.json.get("result", {})}
    for record in posts:
        under = None if record.json.get("method") == "initialize" else version
        assert SCHEMAS.check(None, record.json, version=under) is None
        assert record.headers.get("MCP-Protocol-Version") is None, record.json


def test_the_test_server_wants_the_version_header_from_2025_06_18_on():
    # The leniency above is for the old revisions only.
    import urllib.request

    with mcp_sync.testing.HTTPServer(mcp_sync.testing.demo_server(versions=["2025-06-18"])) as http:
        with mcp_sync.connect(http.url, protocol="2025-06-18") as client:
            client.list_tools()
            session = next(r.headers.get("Mcp-Session-Id") for r in http.requests
                           if r.json and r.json.get("method") == "tools/list")
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
            request = urllib.request.Request(http.url, body, method="POST", headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": session})
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400 and b"MCP-Protocol-Version" in info.value.read()


def test_the_test_server_shapes_results_per_revision():
    from mcp_sync.testing._shapes import shape

    content = [{"type": "text", "text": "t"}, {"type": "audio", "data": "AA", "mimeType": "audio/wav"},
               {"type": "resource_link", "uri": "demo://x", "name": "x"}]
    call = {"content": content, "structuredContent": {"a": 1}}
    assert shape("2025-06-18", "tools/call", call) is call
    assert [c["type"] for c in shape("2025-03-26", "tools/call", call)["content"]] == ["text", "audio"]
    old = shape("2024-11-05", "tools/call", call)
    assert [c["type"] for c in old["content"]] == ["text"] and "structuredContent" not in old
    assert call["structuredContent"] == {"a": 1}  # the original is left alone
    tools = {"tools": [{"name": "t", "title": "T", "inputSchema": {}, "outputSchema": {}, "annotations": {}}]}
    assert shape("2025-03-26", "tools/list", tools)["tools"] == [{"name": "t", "inputSchema": {}, "annotations": {}}]
    assert shape("2024-11-05", "tools/list", tools)["tools"] == [{"name": "t", "inputSchema": {}}]
    init = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}, "completions": {}},
            "serverInfo": {"name": "s", "version": "1", "title": "S"}}
    shaped = shape("2024-11-05", "initialize", init)
    assert shaped["serverInfo"] == {"name": "s", "version": "1"} and shaped["capabilities"] == {"tools": {}}
    prompts = {"prompts": [{"name": "p", "title": "P", "arguments": [{"name": "a", "title": "A"}]}]}
    assert shape("2025-03-26", "prompts/list", prompts)["prompts"] == [{"name": "p", "arguments": [{"name": "a"}]}]
