"""The fast lane of `call_tool` (a tool called by name with no options) and
the reader's shortcuts: what they send, route and return is what the
general path sends, routes and returns."""

import json
import threading
import time

import pytest

import mcp_sync
from mcp_sync import router as routes
from mcp_sync.protocol import jsonrpc, meta
from mcp_sync.router import Router
from mcp_sync.testing import HTTPServer, Server
from tests.helpers import demo_command


def meta_server(**options):
    """A server whose tool answers with the `_meta` and arguments it got,
    and one that is slow in its first round and then asks for input."""
    server = Server(name="meta", **options)
    rounds = []

    @server.tool(input_schema={"type": "object"})
    def show(args, ctx):
        return json.dumps({"meta": ctx.meta, "args": args}, sort_keys=True)

    @server.tool(input_schema={"type": "object"})
    def slow_then_ask(args, ctx):
        rounds.append(time.monotonic())
        if len(rounds) == 1:
            time.sleep(0.5)  # the first round alone outlasts max_total_timeout
        answer = ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}},
                                      "required": ["name"]})
        return f"hello {answer['content']['name']}"

    server.rounds = rounds
    return server


def form(params):
    return {"action": "accept", "content": {"name": "Ada"}}


def general_only(client, monkeypatch):
    """Make the general path fail, so a call that succeeds took the fast lane."""
    def refuse(*args, **kwargs):
        raise AssertionError("the general path was taken")

    monkeypatch.setattr(client._pipeline.calls, "call_tool", refuse)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25", "2025-03-26"])
def test_a_plain_call_takes_the_fast_lane_and_sends_what_the_general_path_sends(version, monkeypatch):
    older = {"versions": [version]} if version == "2025-03-26" else {}
    with mcp_sync.connect(meta_server(**older), protocol=version, log_level="warning",
                          input_handlers={"form": form}) as client:
        general = client.call_tool("show", {"a": [1, {"b": None}]}, timeout=30).text
        general_only(client, monkeypatch)
        plain = client.call_tool("show", {"a": [1, {"b": None}]}).text
        assert plain == general
        seen = json.loads(plain)
        assert seen["args"] == {"a": [1, {"b": None}]}
        if version == "2026-07-28":
            assert seen["meta"][meta.META_PROTOCOL_VERSION] == version
            assert seen["meta"][meta.META_LOG_LEVEL] == "warning"
            assert seen["meta"][meta.META_CLIENT_CAPABILITIES]["elicitation"]
        else:
            assert seen["meta"] == {}
        with pytest.raises(AssertionError, match="general path"):
            client.call_tool("show", {}, timeout=30)  # an option: the general path


def test_the_shared_meta_is_made_of_the_options_and_left_alone_by_per_call_handlers(monkeypatch):
    with mcp_sync.connect(meta_server(), protocol="2026-07-28", log_level="error",
                          client_info={"name": "renamed", "version": "2"}) as client:
        general_only(client, monkeypatch)
        second = json.loads(client.call_tool("show").text)["meta"]
        assert second[meta.META_LOG_LEVEL] == "error"
        assert second[meta.META_CLIENT_INFO] == {"name": "renamed", "version": "2"}
        # Per-call handlers (the general path) get their own, and leave the shared one alone.
        monkeypatch.undo()
        asked = json.loads(client.call_tool("show", input_handlers={"form": form}).text)["meta"]
        assert asked[meta.META_CLIENT_CAPABILITIES].get("elicitation")
        again = json.loads(client.call_tool("show").text)["meta"]
        assert not again[meta.META_CLIENT_CAPABILITIES].get("elicitation")


def test_arguments_are_copied_and_checked_as_on_the_general_path(monkeypatch):
    with mcp_sync.connect(meta_server()) as client:
        general_only(client, monkeypatch)
        arguments = {"n": 1}
        assert json.loads(client.call_tool("show", arguments).text)["args"] == {"n": 1}
        assert arguments == {"n": 1}
        with pytest.raises(TypeError, match="mapping"):
            client.call_tool("show", ["not", "a", "mapping"])  # type: ignore[arg-type]


@pytest.mark.parametrize("where", ["memory", "stdio"])
def test_input_required_on_the_fast_lane_goes_on_to_the_next_rounds(where, monkeypatch):
    target = meta_server() if where == "memory" else demo_command()
    handler_threads = []

    def answer(params):
        handler_threads.append(threading.current_thread())
        return {"action": "accept", "content": {k: "x" for k in params["requestedSchema"]["properties"]}}

    with mcp_sync.connect(target, input_handlers={"form": answer}) as client:
        assert client.protocol_version == "2026-07-28"
        general_only(client, monkeypatch)
        if where == "memory":
            assert client.call_tool("slow_then_ask", {}).text == "hello x"
        else:
            assert client.call_tool("ask_twice", {}).text == "x and x"
            assert len(handler_threads) == 2
        assert set(handler_threads) == {threading.current_thread()}


def test_max_total_timeout_counts_the_fast_lanes_first_round():
    server = meta_server()
    with mcp_sync.connect(server, input_handlers={"form": form}, max_total_timeout=0.3) as client:
        with pytest.raises(mcp_sync.RequestTimeout, match="maximum total timeout"):
            client.call_tool("slow_then_ask", {})
        assert len(server.rounds) == 1  # the second round was never sent


def test_the_fast_lane_under_32_threads_mixed_with_the_general_path():
    """Every thread checks that each answer is its own, whichever lane
    sent it, with input rounds in between."""
    wrong, errors = [], []

    def answer(params):
        return {"action": "accept", "content": {k: threading.current_thread().name for k in
                                                params["requestedSchema"]["properties"]}}

    with mcp_sync.connect(demo_command(), input_handlers={"form": answer}) as client:
        def work(n):
            try:
                for i in range(30):
                    text = f"{n}-{i}"
                    options = {"timeout": 30} if i % 3 == 0 else {}
                    got = client.call_tool("echo", {"text": text}, **options).text
                    if got != text:
                        wrong.append((text, got))
                    if i % 10 == 5:
                        me = threading.current_thread().name
                        if client.call_tool("ask_twice", {}).text != f"{me} and {me}":
                            wrong.append(("ask_twice", me))
            except Exception as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,), name=f"caller-{n}") for n in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads)
        assert not errors and not wrong
        # Each call counted once, whichever lane (ask_twice: three rounds, three requests).
        calls = client.stats().requests["tools/call"]
        assert calls.count == calls.outcomes["ok"] == 32 * (30 + 3 * 3)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_the_fast_lane_over_http(version, monkeypatch):
    with HTTPServer(meta_server()) as httpd, mcp_sync.connect(httpd.url, protocol=version) as client:
        general_only(client, monkeypatch)
        assert json.loads(client.call_tool("show", {"k": "v"}).text)["args"] == {"k": "v"}


# -- the router's shortcut ---------------------------------------------------------

VARIANTS = [
    {"jsonrpc": "2.0", "id": 1, "result": {}},
    {"jsonrpc": "2.0", "id": 1, "result": None},
    {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "both"}},
    {"jsonrpc": "2.0", "id": 1, "result": {}, "method": None},
    {"jsonrpc": "2.0", "id": 1, "result": {}, "method": "tools/call"},
    {"jsonrpc": "1.0", "id": 1, "result": {}},
    {"id": 1, "result": {}},
    {"jsonrpc": "2.0", "id": True, "result": {}},
    {"jsonrpc": "2.0", "id": 1.0, "result": {}},
    {"jsonrpc": "2.0", "id": "1", "result": {}},
    {"jsonrpc": "2.0", "id": 2, "result": {}},   # a subscription's end
    {"jsonrpc": "2.0", "id": 3, "result": {}},   # nobody waits
    {"jsonrpc": "2.0", "result": {}},
    {"jsonrpc": "2.0", "id": None, "result": {}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
    [{"jsonrpc": "2.0", "id": 1, "result": {}}],
    "text",
]


def fresh_router():
    router = Router()
    router.add_call(1, "caller one")
    router.add_subscription(2, "subscription two")
    return router


@pytest.mark.parametrize("message", VARIANTS, ids=[json.dumps(v)[:60] for v in VARIANTS])
def test_the_routers_shortcut_routes_as_the_general_rules_do(message):
    shortcut, general = fresh_router(), fresh_router()
    assert shortcut.receive(message) == general.route(message)
    assert shortcut.calls == general.calls and shortcut.subscriptions == general.subscriptions


def test_the_shortcut_is_taken_for_a_waiting_calls_result():
    router = fresh_router()
    assert router.receive({"jsonrpc": "2.0", "id": 1, "result": {"x": 1}})[:3] == (
        routes.CALL, "caller one", routes.RESPONSE)
    assert 1 not in router.calls


# -- the line parser -----------------------------------------------------------------

LINES = [
    b'{"jsonrpc":"2.0","id":1,"result":{}}\n',
    b'{"a":1}',
    '{}'.encode("utf-16-le"),
    '{"a":1}'.encode("utf-32-le"),
    b'{"a":1}  \r\n\t',
    b'{"a":1} x\n',
    b'{"a":1}{"b":2}\n',
    b'  {"a":1}\n',
    b'\xef\xbb\xbf{"a":1}\n',
    '{"a":"\u00e9"}\n'.encode("utf-16"),
    b'{"a":"\xff"}\n',
    b'{"a":"\\ud800"}\n',
    b'{"a":"\xed\xa0\x80"}\n',
    b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
    b'{"a":1' + b"0" * 5000 + b"}\n",
    b'{"a":NaN}\n',
    b'{"a":1\n',
    b'[{"a":1}]\n',
    b"",
    '{"a":1}\n',
]


def outcome(parse, line):
    try:
        return ("ok", parse(line))
    except mcp_sync.InvalidMessage as exc:
        return ("invalid", str(exc))


@pytest.mark.parametrize("line", LINES, ids=[repr(v[:30]) for v in LINES])
def test_the_line_parser_accepts_and_refuses_what_json_loads_does(line, monkeypatch):
    fast = outcome(jsonrpc.parse, line)
    monkeypatch.setattr(jsonrpc, "_loads", json.loads)
    assert fast == outcome(jsonrpc.parse, line)


def test_the_fast_lanes_call_and_plan_are_the_ones_their_constructors_build():
    # The plain call builds its `Call` and `Plan` with `tuple.__new__`,
    # every field given: they must be the very tuples `Call(...)` and
    # `Plan(...)` make with their defaults (equal, same type and repr,
    # read-only), so that a default added later cannot be missed here.
    from mcp_sync.pipeline import NO_OPTIONS, Call, Plan, _new_call, _new_plan

    handlers = {"elicitation": object()}
    params = {"name": "echo", "arguments": {"text": "x"}}
    fast = _new_call(Call, ("tools/call", params, NO_OPTIONS, handlers, None, None, None))
    slow = Call("tools/call", params, NO_OPTIONS, handlers)
    assert type(fast) is Call and fast == slow and repr(fast) == repr(slow)
    assert fast.options is NO_OPTIONS and fast.handlers is handlers and fast._fields == slow._fields
    with pytest.raises(AttributeError):
        fast.method = "tools/list"  # type: ignore[misc]
    assert fast._replace(params={"name": "other"}) == slow._replace(params={"name": "other"})
    plan = _new_plan(Plan, (30.0, 123.0, None, False, None, False, None))
    assert type(plan) is Plan and plan == Plan(30.0, 123.0, None) and repr(plan) == repr(Plan(30.0, 123.0, None))


@pytest.mark.parametrize("route", ["send", "resumed"])
def test_the_plain_calls_plan_is_the_one_the_general_path_would_make(route, monkeypatch):
    # The plain call spells out every field of its `Plan`, defaults
    # included, both where it goes through `send()` (here: no lane) and
    # where the retry loop goes on from the lane's attempt (here: an error
    # answer): each must be what `Plan(timeout, deadline, max_total)` and
    # `_plan()` make for a call with no options (no progress, no reset of
    # the timeout on progress, no `_meta` layers).
    from mcp_sync.pipeline import Call, Plan, _plan

    with mcp_sync.connect(meta_server(), timeout=12.5, max_total_timeout=40.0) as client:
        pipeline = client._pipeline
        plans = []
        real = pipeline._send_mending

        def recording(call, plan, attempt=None):
            plans.append(plan)
            return real(call, plan, attempt)

        monkeypatch.setattr(pipeline, "_send_mending", recording)
        before = time.monotonic()
        if route == "send":
            monkeypatch.setattr(pipeline, "_new_lane", lambda: None)
            assert client.call_tool("show", {"a": 1}).text
        else:
            with pytest.raises(mcp_sync.ServerError):
                client.call_tool("no-such-tool", {"a": 1})
        after = time.monotonic()
        general = _plan(Call("tools/call", {"name": "show"}, {}, {}), pipeline.timeouts)
    fast = plans[0]
    assert type(fast) is Plan and fast == Plan(12.5, fast.deadline, 40.0)
    assert before + 12.5 <= fast.deadline <= after + 12.5  # the call's own deadline, set when it began
    assert fast._replace(deadline=None) == general._replace(deadline=None)
