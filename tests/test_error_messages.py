"""Errors a newcomer meets in the first five minutes say what to do next."""

import contextlib
import sys
from collections.abc import Iterator

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server


@contextlib.contextmanager
def answering(post: int, get: int | None = None, page: bytes = b"", content_type: str = "text/plain") -> Iterator[str]:
    """A plain HTTP server on loopback (no MCP) that answers every POST with
    `post` and every GET with `get` (else `post`), with `page` as the body;
    yields its URL's origin (`http://127.0.0.1:PORT`)."""
    import http.server
    import threading

    class Answering(http.server.BaseHTTPRequestHandler):
        def answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def do_POST(self) -> None:
            self.answer(post)

        def do_GET(self) -> None:
            self.answer(post if get is None else get)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def client():
    with mcp_sync.connect(demo_server()) as c:
        yield c


def test_tool_arguments_given_as_keywords_are_told_to_go_in_a_dict(client):
    with pytest.raises(TypeError) as info:
        client.call_tool("add", a=2, b=3)
    assert "tool arguments go in a dict: call_tool('add', {'a': ..., 'b': ...})" in str(info.value)


@pytest.mark.parametrize("call, meant", [
    (lambda c: c.call_tool("add", {"a": 1, "b": 2}, timout=3), "'timout' (did you mean 'timeout'?)"),
    (lambda c: c.list_tools(progres=print), "'progres' (did you mean 'progress'?)"),
])
def test_a_misspelt_request_option_names_the_one_meant(client, call, meant):
    with pytest.raises(TypeError) as info:
        call(client)
    assert str(info.value) == f"unknown request option(s): {meant}"  # a near miss is not a tool argument


def test_a_misspelt_connect_option_names_the_one_meant():
    with pytest.raises(TypeError, match=r"got unexpected keyword argument\(s\): 'timout' \(did you mean 'timeout'\?\)"):
        mcp_sync.connect(demo_server(), timout=3)
    with pytest.raises(TypeError, match=r"'verfy' \(did you mean 'verify'\?\)"):
        mcp_sync.connect("http://127.0.0.1:9/mcp", verfy=False)
    with pytest.raises(TypeError, match=r"ClientGroup\(\) got unexpected .*'timout' \(did you mean 'timeout'\?\)"):
        mcp_sync.ClientGroup({"demo": demo_server()}, timout=3)


@pytest.mark.parametrize("target", ["127.0.0.1:8799/mcp", "localhost:8000/mcp", "example.com/mcp", "[::1]:8000"])
def test_an_address_without_a_scheme_is_told_to_add_one(target):
    with pytest.raises(TypeError) as info:
        mcp_sync.connect(target)
    assert f"connect('http://{target}')" in str(info.value)


@pytest.mark.parametrize("target", ["python server.py", "./server.py", "server.py"])
def test_a_command_line_string_is_still_told_to_be_a_list(target):
    with pytest.raises(TypeError, match="pass a stdio command as a list of strings"):
        mcp_sync.connect(target)


def test_a_call_after_close_says_the_client_was_closed_and_how_to_get_another():
    client = mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing.server"])
    client.close()
    for call in (lambda: client.call_tool("echo", {"text": "x"}), client.list_tools):
        with pytest.raises(mcp_sync.ConnectionClosed) as info:
            call()
        assert "this client is closed" in str(info.value) and "mcp_sync.connect()" in str(info.value)


def test_a_timeout_names_the_tool_and_how_to_allow_more_time(client):
    with pytest.raises(mcp_sync.RequestTimeout) as info:
        client.call_tool("countdown", {"steps": 50, "delay": 0.1}, timeout=0.2)
    said = str(info.value)
    assert said.startswith("tools/call 'countdown' timed out after 0.2 s")
    assert "timeout=" in said and "connect(timeout=...)" in said
    assert info.value.method == "tools/call" and info.value.timeout == 0.2


def test_repr_shows_transport_server_status_and_revision():
    with mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing.server"], protocol="2025-11-25") as client:
        assert repr(client) == "<mcp_sync.Client stdio 'mcp-sync-demo' ready 2025-11-25>"
    assert repr(client) == "<mcp_sync.Client stdio 'mcp-sync-demo' closed 2025-11-25>"


@pytest.mark.parametrize("versions", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("call, method, capability", [
    (lambda c: c.list_prompts(), "prompts/list", "prompts"),
    (lambda c: c.list_resources(), "resources/list", "resources"),
    (lambda c: c.read_resource("file:///x"), "resources/read", "resources"),
    (lambda c: c.get_prompt("p"), "prompts/get", "prompts"),
])
def test_a_method_the_server_never_declared_says_which_capability_it_lacks(versions, call, method, capability):
    # A tools-only server (most stdio servers are) answers -32601 to a list
    # it does not offer; the error says why, and what to look at.
    from tests.helpers import scripted

    with mcp_sync.connect(scripted("--versions", versions)) as client:
        assert client.server_capabilities == {"tools": {}}
        with pytest.raises(mcp_sync.MethodNotFound) as info:
            call(client)
    assert info.value.capability == capability
    assert str(info.value) == (f"server error -32601 ({method}): Method not found: {method}; the server does not "
                               f"declare the {capability!r} capability (client.server_capabilities lists what "
                               f"it offers)")


def test_method_not_found_for_a_declared_capability_names_none():
    # The demo server declares prompts: a -32601 there is not about a capability.
    from mcp_sync.testing import Server

    server = Server(name="bare")
    server.tool(input_schema={"type": "object"})(lambda args, ctx: "x")
    with mcp_sync.connect(server) as client:
        with pytest.raises(mcp_sync.MethodNotFound) as info:
            client.request("nope/nothing")
    assert info.value.capability is None
    assert str(info.value) == "server error -32601 (nope/nothing): Method not found: nope/nothing"


@pytest.mark.parametrize("options", [{}, {"timeout": 5}])
def test_an_unknown_tool_is_named_with_the_listed_one_meant(client, options):
    with pytest.raises(mcp_sync.InvalidParams) as info:
        client.call_tool("ad", {"a": 1, "b": 2}, **options)
    assert str(info.value) == "server error -32602 (tools/call): Unknown tool: ad"  # nothing listed yet: nothing to add
    client.list_tools()
    with pytest.raises(mcp_sync.InvalidParams) as info:
        client.call_tool("ad", {"a": 1, "b": 2}, **options)
    assert str(info.value) == ("server error -32602 (tools/call): Unknown tool: ad; "
                               "the tools the server listed do not include 'ad' (did you mean 'add'?)")
    with pytest.raises(mcp_sync.InvalidParams) as info:
        client.call_tool("add", {"a": "x", "b": 2}, **options)  # a listed tool's bad argument: as the server said
    assert "listed" not in str(info.value)


def test_an_unknown_tool_is_not_said_missing_from_one_page_of_the_list():
    # One page is not the whole list: the name may be on another.
    with mcp_sync.connect(demo_server()) as client:
        client.list_page("tools")
        with pytest.raises(mcp_sync.InvalidParams) as info:
            client.call_tool("ad", {"a": 1, "b": 2})
    assert str(info.value) == "server error -32602 (tools/call): Unknown tool: ad"


@pytest.mark.parametrize("version, capability", [("2025-11-25", "completions"), ("2024-11-05", None)])
def test_completions_undeclared_before_they_were_a_capability_name_none(version, capability):
    # 2024-11-05 has no completions capability: its absence says nothing.
    from tests.helpers import scripted

    with mcp_sync.connect(scripted("--versions", version)) as client:
        assert client.protocol_version == version
        with pytest.raises(mcp_sync.MethodNotFound) as info:
            client.complete({"type": "ref/prompt", "name": "p"}, "a", "x")
    assert info.value.capability == capability


def test_a_listed_tool_the_client_could_not_use_is_not_said_missing():
    # A definition nested deeper than the client reads is left out of
    # list_tools(), but the server did list it: its refusals stay as said.
    from mcp_sync.protocol.schemas import MAX_SCHEMA_DEPTH
    from mcp_sync.testing import Server

    deep: dict = {"type": "object"}
    for _ in range(MAX_SCHEMA_DEPTH + 2):
        deep = {"type": "object", "properties": {"x": deep}}
    server = Server(name="deep")
    server.tool(name="deep", input_schema={**deep, "properties": {**deep["properties"], "a": {"type": "string"}},
                                           "required": ["a"]})(lambda args, ctx: "ran")
    with mcp_sync.connect(server) as client:
        assert [tool.name for tool in client.list_tools()] == []
        with pytest.raises(mcp_sync.InvalidParams) as info:
            client.call_tool("deep", {})
    assert str(info.value) == "server error -32602 (tools/call): Invalid arguments for tool deep: Missing required property 'a'"


@pytest.mark.parametrize("path, options", [
    ("/nowhere", {}),                       # POST 404, then the HTTP+SSE fallback's GET 404
    ("/nowhere", {"sse_fallback": False}),  # POST 404 alone
    ("/", {}),
])
def test_a_url_path_nothing_serves_names_the_usual_endpoints(path, options):
    with HTTPServer(demo_server()) as http:
        base = http.url.removesuffix("/mcp")
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(base + path, **options)
        methods = [r.method for r in http.requests]
    assert info.value.status == 404
    assert str(info.value).endswith(f"; nothing serves MCP at that path: servers usually serve Streamable HTTP at "
                                    f"{base}/mcp and HTTP+SSE at {base}/sse (the server's documentation or start-up "
                                    f"log says which)")
    assert methods == (["POST", "POST"] if options else ["POST", "POST", "GET"])  # no other path was tried


@pytest.mark.parametrize("path, meant, other", [
    ("/sse", "HTTP+SSE", "/mcp for Streamable HTTP"),
    ("/api/mcp", "Streamable HTTP", "/api/sse for HTTP+SSE"),
])
def test_a_usual_path_nothing_serves_is_said_to_be_one(path, meant, other):
    with HTTPServer(demo_server()) as http:
        base = http.url.removesuffix("/mcp")
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(base + path)
    assert str(info.value).endswith(
        f"; nothing serves MCP there, although it is the usual path for {meant} (and {base}{other}): the server "
        f"may be mounted elsewhere, or another part of the URL may be wrong (its documentation or start-up log "
        f"says where it listens)")
    assert "fallback failed too" in str(info.value)


def test_a_usual_path_with_a_trailing_slash_is_told_to_drop_it():
    # It was said to be the usual path, which it is not quite.
    with HTTPServer(demo_server()) as http:
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(http.url + "/")
    assert str(info.value).endswith(f"; nothing serves MCP at that path: try it without the trailing slash, "
                                    f"{http.url} (servers tell the two apart)")


@pytest.mark.parametrize("url, usual", [
    ("http://h:8/api/mcp", ("http://h:8/api/mcp", "http://h:8/api/sse")),
    ("http://h:8/api/sse?key=1", ("http://h:8/api/mcp", "http://h:8/api/sse")),  # the query is not repeated
    ("https://h/v1/tools", ("https://h/mcp", "https://h/sse")),
    ("http://[::1]:8/", ("http://[::1]:8/mcp", "http://[::1]:8/sse")),
])
def test_the_usual_endpoints_sit_beside_an_mcp_or_sse_path_else_at_the_root(url, usual):
    from mcp_sync.transports.http_target import usual_endpoints

    assert usual_endpoints(url) == usual



def test_an_http_sse_target_at_a_path_nothing_serves_names_the_usual_endpoints():
    with HTTPServer(demo_server()) as http:
        base = http.url.removesuffix("/mcp")
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(mcp_sync.SSE(base + "/events"))
        methods = [r.method for r in http.requests]
    assert info.value.status == 404
    assert f"servers usually serve Streamable HTTP at {base}/mcp and HTTP+SSE at {base}/sse" in str(info.value)
    assert methods == ["GET"]



def test_a_pinned_stateless_revision_at_a_path_nothing_serves_names_the_usual_endpoint():
    with HTTPServer(demo_server()) as http:
        base = http.url.removesuffix("/mcp")
        with pytest.raises(mcp_sync.VersionNegotiationError) as info:
            mcp_sync.connect(base + "/nowhere", protocol="2026-07-28")
    assert str(info.value).endswith(
        "server/discover answered HTTP 404, which is how an initialize-era server answers. Allow its revision "
        "(protocol=None negotiates, or pin '2025-11-25' or older), or check the URL: nothing may serve MCP at that "
        f"path (servers usually serve Streamable HTTP at {base}/mcp)")


def test_a_pinned_stateless_revision_refused_at_the_usual_path_says_only_check_the_url():
    with answering(404) as origin:
        with pytest.raises(mcp_sync.VersionNegotiationError) as info:
            mcp_sync.connect(f"{origin}/mcp", protocol="2026-07-28")
    assert str(info.value).endswith("or pin '2025-11-25' or older), or check the URL")


@pytest.mark.parametrize("post, get, options", [
    (500, 500, {"sse_fallback": False}),
    (405, 405, {"sse_fallback": False}),
    (404, 401, {}),  # the fallback's GET found something there: it wants credentials
    (404, 500, {}),
])
def test_another_refusal_is_not_told_the_path_is_wrong(post, get, options):
    with answering(post, get) as origin:
        with pytest.raises(mcp_sync.McpError) as info:
            mcp_sync.connect(f"{origin}/mcp", reconnect=False, **options)
    assert "nothing serves MCP" not in str(info.value)
    assert f"HTTP {get}" in str(info.value)


def test_an_html_error_page_is_quoted_by_its_text_on_one_line():
    # The reference server's Express 404 page: the message quoted ~20 lines
    # of markup, so the CLI's one-line error said only `<!DOCTYPE html>`.
    import io

    from mcp_sync.cli import main

    page = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n"
            "</head>\n<body>\n<pre>Cannot POST /</pre>\n</body>\n</html>\n").encode()
    with answering(404, page=page, content_type="text/html; charset=utf-8") as origin:
        url = f"{origin}/"
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(url)
        err = io.StringIO()
        code = main(["tools", "--url", url], stdout=io.StringIO(), stderr=err)
    assert "\n" not in str(info.value) and "<" not in str(info.value)
    assert str(info.value).startswith(f"{url} answered HTTP 404: Cannot POST / (the HTTP+SSE fallback failed too: ")
    assert info.value.body.startswith("<!DOCTYPE html>")  # the body itself is kept as it came
    assert code == 1 and err.getvalue().startswith(f"mcp-sync: error: {url} answered HTTP 404: Cannot POST /")
    assert "servers usually serve Streamable HTTP at" in err.getvalue()


@pytest.mark.parametrize("options, error, said", [
    # Checked under the names given: the messages named Timeouts' fields (`request must be ...`).
    ({"timeout": 0}, ValueError, "timeout must be a positive number of seconds, not 0"),
    ({"probe_timeout": -1}, ValueError, "probe_timeout must be a positive number of seconds, not -1"),
    ({"max_total_timeout": float("nan")}, ValueError, "max_total_timeout must be a positive number of seconds"),
    ({"handler_timeout": 0}, ValueError, "handler_timeout must be a positive number of seconds, not 0"),
    # Python's own words: "'int' object is not iterable".
    ({"protocol": 2025}, TypeError, "protocol must be a version string such as '2025-11-25', a list of them, "
                                    "or None, not 2025"),
])
def test_a_bad_option_is_named_as_it_was_given(options, error, said):
    server = demo_server()
    with pytest.raises(error) as info:
        mcp_sync.connect(server, **options)
    assert str(info.value).startswith(said)
    assert server.served() == 0


def test_an_sse_target_at_a_streamable_http_server_is_told_to_use_the_url():
    # It said only the server's 400 ("Mcp-Session-Id header is required").
    with HTTPServer(demo_server()) as http:
        with pytest.raises(mcp_sync.HTTPStatusError) as info:
            mcp_sync.connect(mcp_sync.SSE(http.url))
    assert str(info.value).endswith("; a server on the newer Streamable HTTP transport answers a GET so: connect to "
                                    "the URL itself (or HTTP(url); \"type\": \"http\" in a config file), not SSE(url)")
    # The client's own fallback to HTTP+SSE, from the URL itself, is not told so.
    with answering(405, 400) as origin:
        with pytest.raises(mcp_sync.McpError) as info:
            mcp_sync.connect(f"{origin}/mcp")
    assert "fallback failed too" in str(info.value) and "not SSE(url)" not in str(info.value)
