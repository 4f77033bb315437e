"""The public API against the bundled demo server (in-process and over stdio)."""

import logging
import time
import re
import threading

import pytest

import mcp_sync
from mcp_sync.testing import RpcError, Server, demo_server
from tests.helpers import demo_command, wait_until

ERAS = ["2026-07-28", "2025-11-25", "2025-06-18"]


@pytest.fixture(params=ERAS)
def client(request):
    with mcp_sync.connect(demo_server(), protocol=request.param) as c:
        yield c


def test_connect_settles_the_newest_version_by_default():
    with mcp_sync.connect(demo_server()) as client:
        assert client.protocol_version == "2026-07-28" and client.stateless
        assert client.server_info.name == "mcp-sync-demo"
        assert "tools" in client.server_capabilities
        assert client.session is None
        assert repr(client) == "<mcp_sync.Client memory 'mcp-sync-demo' ready 2026-07-28>"


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_initialize_era_session(version):
    with mcp_sync.connect(demo_server(), protocol=version) as client:
        assert client.protocol_version == version and not client.stateless
        assert client.session.protocol_version == version
        assert client.session.server_info.name == "mcp-sync-demo"
        assert client.server_info.name == "mcp-sync-demo"
        assert client.instructions
        client.ping()
        with pytest.raises(mcp_sync.UnsupportedMethod):
            client.discover()


def test_stateless_has_no_ping_and_says_so_locally():
    with mcp_sync.connect(demo_server(), protocol="2026-07-28") as client:
        with pytest.raises(mcp_sync.UnsupportedMethod) as info:
            client.ping()
        assert not isinstance(info.value, mcp_sync.ServerError)
        assert client.server_info.name == "mcp-sync-demo"  # the pin's probe said
        found = client.discover()
        assert found.supported_versions == ["2026-07-28"]


def test_list_and_call_tools(client):
    tools = {tool.name: tool for tool in client.list_tools()}
    assert {"echo", "add", "countdown", "weather", "fail"} <= set(tools)
    assert tools["echo"].input_schema["type"] == "object"
    assert client.call_tool("echo", {"text": "hé\nllo"}).text == "hé\nllo"
    result = client.call_tool(tools["add"], {"a": 2, "b": 40})
    assert result.structured_content == {"sum": 42} and not result.is_error
    assert result.raise_for_error() is result


def test_tool_failure_is_a_result_not_an_exception(client):
    result = client.call_tool("fail", {"message": "it broke"})
    assert result.is_error and "it broke" in result.text
    with pytest.raises(mcp_sync.ToolError) as info:
        result.raise_for_error()
    assert info.value.result is result


def test_unknown_tool_is_invalid_params(client):
    with pytest.raises(mcp_sync.InvalidParams) as info:
        client.call_tool("no_such_tool", {})
    assert info.value.code == -32602 and info.value.kind == "protocol"
    assert info.value.method == "tools/call"


def test_unknown_method_is_method_not_found(client):
    with pytest.raises(mcp_sync.MethodNotFound) as info:
        client.request("vendor/unknown", {})
    assert info.value.code == -32601


def test_output_schema_is_enforced_when_the_tool_is_known(client):
    # Not listed yet: the client does not know the schema and cannot check.
    unchecked = client.call_tool("bad_weather", {"city": "Oslo"})
    assert isinstance(unchecked.structured_content["temperature"], str)
    client.list_tools()
    with pytest.raises(mcp_sync.OutputValidationError) as info:
        client.call_tool("bad_weather", {"city": "Oslo"})
    assert "temperature" in info.value.errors[0]
    assert info.value.result["structuredContent"]["city"] == "Oslo"
    good = client.call_tool("weather", {"city": "Oslo"})
    assert isinstance(good.structured_content["temperature"], (int, float))


def test_output_schema_validators_are_compiled_once(client):
    client.list_tools()
    for _ in range(20):
        client.call_tool("weather", {"city": "Oslo"})
        client.call_tool("add", {"a": 1, "b": 2})
    assert len(client._pipeline.catalog.schemas) == 2


def test_definition_passed_directly_is_used_for_validation():
    with mcp_sync.connect(demo_server()) as client:
        definition = {"name": "bad_weather", "inputSchema": {"type": "object"},
                      "outputSchema": {"type": "object", "properties": {"temperature": {"type": "number"}}}}
        with pytest.raises(mcp_sync.OutputValidationError):
            client.call_tool(definition, {"city": "x"})


def test_missing_structured_content_with_an_output_schema_is_invalid():
    server = Server()

    @server.tool(output_schema={"type": "object"})
    def lazy(args, ctx):
        return {"content": [{"type": "text", "text": "no structure"}]}

    with mcp_sync.connect(server) as client:
        client.list_tools()
        with pytest.raises(mcp_sync.OutputValidationError):
            client.call_tool("lazy", {})


def test_resources(client):
    resources = {r.uri: r for r in client.list_resources()}
    assert "demo://readme" in resources
    assert client.read_resource("demo://readme").text.startswith("# mcp_sync demo server")
    blob = client.read_resource("demo://logo.png").contents[0]
    assert blob.bytes.startswith(b"\x89PNG")
    templates = client.list_resource_templates()
    assert [t.uri_template for t in templates] == ["demo://items/{id}", "demo://secret/{id}"]
    assert client.read_resource("demo://items/42").text == "item 42"


def test_missing_resource(client):
    with pytest.raises(mcp_sync.ResourceNotFound) as info:
        client.read_resource("demo://nope")
    assert info.value.uri == "demo://nope"
    assert isinstance(info.value, mcp_sync.InvalidParams)
    assert info.value.code == (-32602 if client.stateless else -32002)


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("answer", [
    RpcError(-32602, "Resource demo://gone/1 not found"),           # how TypeScript-SDK servers answer
    RpcError(-32602, "Unknown resource", {"uri": "demo://gone/1"}),  # FastMCP names the URI
])
def test_a_not_found_answered_with_invalid_params_is_resource_not_found_in_every_era(protocol, answer):
    server = Server("invalid-params-for-not-found")

    @server.resource_template("demo://gone/{id}", "gone")
    def gone(params):
        raise answer

    with mcp_sync.connect(server, protocol=protocol) as client:
        with pytest.raises(mcp_sync.ResourceNotFound) as info:
            client.read_resource("demo://gone/1")
        assert info.value.uri == "demo://gone/1" and info.value.code == -32602


def test_prompts_and_completion(client):
    prompts = {p.name: p for p in client.list_prompts()}
    assert [a.name for a in prompts["greet"].arguments] == ["name", "style"]
    assert prompts["greet"].arguments[0].required
    rendered = client.get_prompt("greet", {"name": "Ada", "style": "pirate"})
    assert rendered.messages[0].role == "user" and "Ada" in rendered.messages[0].content.text
    assert client.complete(prompts["greet"], "style", "f").values == ["formal", "friendly"]
    template = client.list_resource_templates()[0]
    assert client.complete(template, "id", "4").values == ["42"]


def test_pagination_follows_cursors_to_the_end():
    with mcp_sync.connect(demo_server(page_size=2)) as client:
        first = client.list_page("tools")
        assert len(first.items) == 2 and first.next_cursor
        second = client.list_page("tools", first.next_cursor)
        assert [t.name for t in second.items] != [t.name for t in first.items]
        everything = client.list_tools()
        assert len(everything) == 16 and len({t.name for t in everything}) == 16
        assert len(client.list_resources()) == 2


def test_progress_runs_on_the_calling_thread(client):
    seen = []

    def on_progress(p):
        seen.append((p.progress, p.total, p.message, threading.current_thread()))

    def run():
        result = client.call_tool("countdown", {"steps": 4, "delay": 0}, progress=on_progress)
        assert result.text == "liftoff"

    caller = threading.Thread(target=run, name="the-caller")
    caller.start()
    caller.join()
    assert [s[0] for s in seen] == [1, 2, 3, 4]
    assert all(s[1] == 4 for s in seen)
    assert seen[0][2] == "step 1/4"
    assert {s[3].name for s in seen} == {"the-caller"}


def test_timeout_cancels_the_request_on_the_server(client):
    server_saw_cancel = threading.Event()
    server = Server()

    @server.tool()
    def wait_for_cancel(args, ctx):
        if ctx.cancelled.wait(30):
            server_saw_cancel.set()
        return "too late"

    @server.tool()
    def quick(args, ctx):
        return "quick"

    with mcp_sync.connect(server, protocol=client.protocol_version) as c:
        with pytest.raises(mcp_sync.RequestTimeout) as info:
            c.call_tool("wait_for_cancel", {}, timeout=0.2)
        assert isinstance(info.value, TimeoutError)
        assert server_saw_cancel.wait(10)
        assert c.call_tool("quick", {}).text == "quick"


def test_reset_timeout_on_progress(client):
    # Six steps 0.3 s apart: 1.8 s in all, never 1 s between two progress reports.
    result = client.call_tool("countdown", {"steps": 6, "delay": 0.3}, timeout=1.0,
                              progress=lambda p: None, reset_timeout_on_progress=True)
    assert result.text == "liftoff"
    with pytest.raises(mcp_sync.RequestTimeout):
        client.call_tool("countdown", {"steps": 6, "delay": 0.3}, timeout=1.0, progress=lambda p: None)
    with pytest.raises(mcp_sync.RequestTimeout) as info:
        client.call_tool("countdown", {"steps": 6, "delay": 0.3}, timeout=1.0, progress=lambda p: None,
                         reset_timeout_on_progress=True, max_total_timeout=0.7)
    assert info.value.max_total_timeout == 0.7


def test_a_raising_progress_callback_cancels_and_propagates():
    with mcp_sync.connect(demo_server()) as client:
        def bad(p):
            raise RuntimeError("callback bug")

        with pytest.raises(RuntimeError, match="callback bug"):
            client.call_tool("countdown", {"steps": 3, "delay": 0.05}, progress=bad)
        assert client.call_tool("echo", {"text": "fine"}).text == "fine"


def test_meta_and_trace_context_reach_the_server(client):
    server = Server()

    @server.tool()
    def show_meta(args, ctx):
        return {"content": [{"type": "text", "text": "ok"}], "structuredContent": dict(ctx.meta)}

    parent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    with mcp_sync.connect(server, protocol=client.protocol_version) as c:
        meta = c.call_tool("show_meta", {}, meta={"com.example/tag": "t1"},
                           trace_context={"traceparent": parent, "tracestate": "a=b"}).structured_content
        assert meta["com.example/tag"] == "t1"
        assert meta["traceparent"] == parent and meta["tracestate"] == "a=b"
        if c.stateless:
            assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
            assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcp_sync"
            assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
        else:
            assert "io.modelcontextprotocol/protocolVersion" not in meta
        with pytest.raises(ValueError):
            c.call_tool("show_meta", {}, trace_context={"traceparent": "garbage"})
        with pytest.raises(ValueError):
            c.call_tool("show_meta", {}, meta={"progressToken": 5})


def test_client_info_and_capabilities_are_sent():
    server = Server()

    @server.tool()
    def whoami(args, ctx):
        return {"content": [], "structuredContent": dict(ctx.meta)}

    with mcp_sync.connect(server, client_info={"name": "my-app", "version": "2.0"},
                          client_capabilities={"experimental": {"x": {}}}) as c:
        meta = c.call_tool("whoami", {}).structured_content
    assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "my-app", "version": "2.0"}
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"experimental": {"x": {}}}


@pytest.mark.parametrize("version", ERAS)
def test_server_log_messages_go_to_logging(version, caplog):
    with mcp_sync.connect(demo_server(), protocol=version, log_level="info") as client:
        with caplog.at_level(logging.DEBUG, logger="mcp_sync.server"):
            client.call_tool("log", {"level": "warning", "message": "disk almost full"})
            client.call_tool("log", {"level": "debug", "message": "below the level"})
    records = [r for r in caplog.records if r.name.startswith("mcp_sync.server") and r.name != "mcp_sync.server.stderr"]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert "disk almost full" in records[0].getMessage()


def test_log_messages_received_before_close_are_all_logged():
    # A slow logging handler keeps the server's messages queued when the call
    # returns; close() right after must still log them (it dropped the queue).
    seen = []

    class Slow(logging.Handler):
        def emit(self, record):
            time.sleep(0.05)
            seen.append(record.getMessage())

    logger = logging.getLogger("mcp_sync.server")
    handler = Slow(level=logging.INFO)
    logger.addHandler(handler)
    try:
        with mcp_sync.connect(demo_server(), protocol="2025-11-25", log_level="info") as client:
            for n in range(3):
                client.call_tool("log", {"level": "warning", "message": f"last words {n}"})
    finally:
        logger.removeHandler(handler)
    assert [n for n in range(3) if any(f"last words {n}" in m for m in seen)] == [0, 1, 2]


def test_no_log_messages_without_a_level(caplog):
    with mcp_sync.connect(demo_server()) as client:
        with caplog.at_level(logging.DEBUG, logger="mcp_sync.server"):
            client.call_tool("log", {"level": "error", "message": "unasked"})
    assert not [r for r in caplog.records if r.name.startswith("mcp_sync.server") and r.name != "mcp_sync.server.stderr"]


def test_close_fails_pending_calls_from_another_thread():
    client = mcp_sync.connect(demo_server())
    errors = []
    started = threading.Event()

    def call():
        started.set()
        try:
            client.call_tool("sleep", {"seconds": 30}, timeout=60)
        except mcp_sync.ConnectionClosed as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    started.wait()
    assert wait_until(lambda: client._conn.in_flight == 1)
    client.close()
    caller.join(timeout=10)
    assert not caller.is_alive() and len(errors) == 1
    with pytest.raises(mcp_sync.ConnectionClosed):
        client.list_tools()
    client.close()


def test_with_block_closes(no_leaks):
    with mcp_sync.connect(demo_command()) as client:
        client.list_tools()
    with pytest.raises(mcp_sync.ConnectionClosed):
        client.list_tools()


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_an_interrupt_inside_close_leaves_no_thread_running(era):
    # Ctrl-C landing while close() closed the connection (the end of a
    # `with` block in a notebook): the keepalive and notification threads
    # ran on for good, and nothing would close them again.
    before = set(threading.enumerate())
    client = mcp_sync.connect(demo_command(), protocol=era, keepalive=5)
    client.on_status(lambda change: None)  # (the notification thread)
    client.call_tool("echo", {"text": "x"})
    conn = client._conn
    closing = conn.close

    def interrupted_close(*args, **kwargs):
        closing(*args, **kwargs)
        raise KeyboardInterrupt

    conn.close = interrupted_close
    with pytest.raises(KeyboardInterrupt):
        client.close()
    del conn.close  # (the connection's own again)
    assert client.status == "closed"
    assert wait_until(lambda: not set(threading.enumerate()) - before, timeout=10), \
        [t.name for t in set(threading.enumerate()) - before]
    client.close()  # idempotent after an interrupted close


def test_results_keep_unknown_fields():
    server = Server()

    @server.tool()
    def newer(args, ctx):
        return {"content": [{"type": "text", "text": "x"}, {"type": "hologram", "depth": 3}],
                "futureField": {"a": 1}}

    with mcp_sync.connect(server) as client:
        result = client.call_tool("newer", {})
    assert result.extra["futureField"] == {"a": 1}
    assert result.raw["futureField"] == {"a": 1}
    assert isinstance(result.content[1], mcp_sync.UnknownContent)
    assert result.content[1].raw == {"type": "hologram", "depth": 3}
    assert result.to_wire()["content"][1]["depth"] == 3


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.call_tool(123),
        lambda c: c.call_tool("echo", ["not", "a", "mapping"]),
        lambda c: c.call_tool("echo", {}, surprise=True),
        lambda c: c.request("", {}),
        lambda c: c.request("x", [1]),
        lambda c: c.read_resource(""),
        lambda c: c.get_prompt("greet", {"name": 5}),
        lambda c: c.complete({"type": "ref/nothing"}, "a", "b"),
        lambda c: c.list_page("tools", 5),
        lambda c: c.call_tool("echo", {}, progress="not callable"),
    ],
)
def test_bad_arguments_raise_type_error_before_sending(call):
    with mcp_sync.connect(demo_server()) as client:
        with pytest.raises(TypeError):
            call(client)
        assert client.call_tool("echo", {"text": "still fine"}).text == "still fine"


#: Look-alikes of a switch: a string that reads false but is truthy, and
#: values that may stand for "not given" or a count.
NOT_A_SWITCH = ["", "false", "no", 0, 1, None, [], 2.0]


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("value", NOT_A_SWITCH)
@pytest.mark.parametrize("call", [
    lambda c, v: c.call_tool("echo", {"text": "x"}, task=v),
    lambda c, v: c.call_tool("echo", {"text": "x"}, wait=v),
    lambda c, v: c.listen(tools_list_changed=v),
    lambda c, v: c.listen(prompts_list_changed=v),
    lambda c, v: c.listen(resources_list_changed=v, resource_subscriptions=["demo://readme"]),
], ids=["task", "wait", "tools_list_changed", "prompts_list_changed", "resources_list_changed"])
def test_a_switch_is_true_or_false_and_anything_else_is_refused_before_sending(protocol, value, call):
    """`listen(tools_list_changed="no")` subscribed, and `call_tool(task="")`
    called without a task: each switch now takes True or False only."""
    server = demo_server()
    with mcp_sync.connect(server, protocol=protocol) as client:
        before = server.served()
        with pytest.raises(TypeError, match=r"must be True or False, not "):
            call(client, value)
        assert server.served() == before
        # The same switch off is still a call, and on is still taken.
        assert client.call_tool("echo", {"text": "fine"}, task=False, wait=False).text == "fine"
    with mcp_sync.connect(server, protocol=protocol) as client, client.listen(tools_list_changed=True) as sub:
        assert sub.accepted is not None


@pytest.mark.parametrize("option", ["restart", "stale_if_error", "era_cache", "tasks"])
@pytest.mark.parametrize("value", NOT_A_SWITCH)
def test_a_connect_switch_is_true_or_false(option, value):
    with pytest.raises(TypeError, match=rf"{option} must be True or False, not "):
        mcp_sync.connect(demo_server(), **{option: value}).close()


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("option", ["answer_input", "bypass_cache", "reset_timeout_on_progress"])
@pytest.mark.parametrize("call", [
    lambda c, o: c.call_tool("echo", {"text": "x"}, **o),
    lambda c, o: c.read_resource("demo://readme", **o),
    lambda c, o: c.list_tools(**o),
    lambda c, o: c.get_prompt("greet", {"name": "x"}, **o),
    lambda c, o: c.request("tools/list", {}, **o),
], ids=["call_tool", "read_resource", "list_tools", "get_prompt", "request"])
def test_a_request_option_that_is_a_switch_is_true_or_false(protocol, option, call):
    """`answer_input="no"` still answered the server's questions: the
    option was taken for its truth value."""
    server = demo_server()
    with mcp_sync.connect(server, protocol=protocol, cache=True) as client:
        before = server.served()
        with pytest.raises(TypeError, match=rf"{option} must be True or False, not 'no'"):
            call(client, {option: "no"})
        assert server.served() == before
        call(client, {option: False})  # the same switch, off
        assert server.served() == before + 1


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.call_tool("echo", {}, timeout=-1),
        lambda c: c.call_tool("echo", {}, timeout=0),
        lambda c: c.call_tool("echo", {}, timeout=float("nan")),  # before: as if no timeout
        lambda c: c.listen(tools_list_changed=True, timeout=float("nan")),
        lambda c: c.list_page("widgets"),
        lambda c: c.call_tool("echo", {}, max_total_timeout=-5),
        lambda c: c.call_tool({"inputSchema": {}}, {}),
        lambda c: c.call_tool({"name": "echo", "outputSchema": "not an object"}, {}),
        lambda c: c.call_tool("echo", {}, meta={"io.modelcontextprotocol/protocolVersion": "2025-06-18"}),
    ],
)
def test_bad_values_raise_value_error(call):
    with mcp_sync.connect(demo_server()) as client:
        with pytest.raises(ValueError):
            call(client)


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        ({"protocol": "1999-01-01"}, ValueError),
        ({"protocol": []}, ValueError),
        ({"timeout": "soon"}, TypeError),
        ({"timeout": float("nan")}, ValueError),
        ({"probe_timeout": 0}, ValueError),
        ({"log_level": "loud"}, ValueError),
        ({"max_pages": 0}, ValueError),
        ({"client_info": {"name": "x"}}, ValueError),
        ({"client_capabilities": ["roots"]}, TypeError),
    ],
)
def test_bad_connect_options(kwargs, exc):
    with pytest.raises(exc):
        mcp_sync.connect(demo_server(), **kwargs)


def test_unknown_connect_options_are_named():
    with pytest.raises(TypeError, match="timout"):
        mcp_sync.connect(demo_server(), timout=5)


def test_reset_timeout_on_progress_works_without_a_callback():
    with mcp_sync.connect(demo_server()) as client:
        result = client.call_tool("countdown", {"steps": 6, "delay": 0.3}, timeout=1.0,
                                  reset_timeout_on_progress=True)
        assert result.text == "liftoff"


@pytest.mark.parametrize("target,exc", [
    (object(), TypeError), ("python server.py", TypeError), ([], TypeError), ([1, 2], TypeError),
    ("ftp://example.com/mcp", ValueError),
])
def test_bad_targets(target, exc):
    with pytest.raises(exc):
        mcp_sync.connect(target)


def test_a_command_line_as_one_string_gets_a_hint_that_splits_it():
    with pytest.raises(TypeError, match=re.escape("e.g. ['python', 'server.py', '--port', '8080']")):
        mcp_sync.connect("python server.py --port 8080")
    with pytest.raises(mcp_sync.ConnectError, match=re.escape("separate strings: ['python', 'server.py']")):
        mcp_sync.connect(["python server.py"])


def test_custom_target_and_bare_transport():
    from mcp_sync.transports.memory import MemoryTransport

    server = demo_server()
    with mcp_sync.connect(mcp_sync.Custom(lambda: MemoryTransport(server))) as client:
        assert client.call_tool("echo", {"text": "custom"}).text == "custom"
    with mcp_sync.connect(MemoryTransport(server), protocol="2025-11-25") as client:
        assert client.call_tool("echo", {"text": "bare"}).text == "bare"
    with pytest.raises(TypeError):
        mcp_sync.Custom("not callable")
    with pytest.raises(TypeError):
        mcp_sync.connect(mcp_sync.Custom(lambda: object()))


@pytest.mark.parametrize("code,cls,kind", [
    (-32020, mcp_sync.HeaderMismatch, "protocol"),
    (-32021, mcp_sync.MissingClientCapability, "protocol"),
    (-32603, mcp_sync.ServerError, "execution"),
    (-32600, mcp_sync.ServerError, "json_rpc"),
    (-32000, mcp_sync.ServerError, "protocol"),
])
def test_server_errors_arrive_as_their_classes_with_data(code, cls, kind):
    server = Server()

    @server.tool()
    def refuse(args, ctx):
        raise RpcError(code, "refused", {"requiredCapabilities": {"roots": {}}})

    with mcp_sync.connect(server) as client:
        with pytest.raises(cls) as info:
            client.call_tool("refuse", {})
    assert type(info.value) is cls
    assert (info.value.code, info.value.message, info.value.kind) == (code, "refused", kind)
    assert info.value.data == {"requiredCapabilities": {"roots": {}}}


def test_keyboard_interrupt_cancels_the_request_on_the_server():
    server = Server()
    cancelled = threading.Event()

    @server.tool()
    def long_job(args, ctx):
        ctx.progress(1, 10)
        if ctx.cancelled.wait(30):
            cancelled.set()
        return "never seen"

    def interrupt(progress):
        raise KeyboardInterrupt  # what Ctrl-C in a notebook does mid-call

    with mcp_sync.connect(server) as client:
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("long_job", {}, progress=interrupt)
        assert cancelled.wait(10)
        assert client._conn.in_flight == 0


def test_client_options_are_built_and_validated_once():
    options = mcp_sync.ClientOptions(timeout=7, protocol=["2026-07-28"])
    assert options.allowed_versions == ("2026-07-28",)
    built = [mcp_sync.Client(demo_server(), options),
             # Keywords over the options, and keywords alone.
             mcp_sync.Client(demo_server(), options, timeout=3),
             mcp_sync.Client(demo_server(), max_pages=5)]
    assert built[0].options is options and built[0].options.timeouts.request == 7
    assert built[1].options.timeouts.request == 3 and built[1].options.protocol == ("2026-07-28",)
    assert built[2].options.limits.max_pages == 5
    for client in built:
        client.close()
    with pytest.raises(ValueError):
        mcp_sync.ClientOptions(timeout=0)
    with pytest.raises(TypeError):
        mcp_sync.Client(demo_server(), timout=5)
    with mcp_sync.connect(demo_server(), timeout=4, max_pages=9) as connected:
        assert connected.options.timeouts.request == 4 and connected.options.limits.max_pages == 9
