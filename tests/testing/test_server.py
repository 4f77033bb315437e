"""Tests of mcp_sync.testing: the in-process server through `open_session`
with plain dicts, and the stdio program through a subprocess.

Every message the server emits is checked against the JSON schema of the
revision in use, from `tests/schemas/<rev>/schema.json`.
Synchronisation is by Condition/Event waits with timeouts, never by sleeping.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mcp_sync
from mcp_sync.testing import SUPPORTED_VERSIONS, RpcError, Server, ToolContext, demo_server
from tests.helpers import GENEROUS
from tests.testing import unencodable_server
from tests.testing.peers import Conn, Proc, WAIT, modern_meta
from tests.testing.schema_util import (
    LEGACY,
    META_CAPS,
    META_LOG,
    META_SERVER_INFO,
    META_VERSION,
    MODERN,
    REPO,
    check_all_notifications,
    check_error_any_revision,
    check_notification,
    check_response,
)

# --------------------------------------------------------------------------
# Discovery, versions and eras


def test_discover(conn: Conn) -> None:
    result = conn.result("server/discover")
    assert result["supportedVersions"] == [MODERN]
    caps = result["capabilities"]
    assert set(caps) >= {"tools", "resources", "prompts", "completions", "logging"}
    assert caps["resources"] == {"subscribe": True, "listChanged": True}
    assert caps["tools"] == {"listChanged": True} and caps["prompts"] == {"listChanged": True}
    assert result["_meta"][META_SERVER_INFO] == {"name": "mcp-sync-demo", "version": "1.0.0"}
    assert isinstance(result["instructions"], str) and result["instructions"]
    assert result["ttlMs"] >= 0 and result["cacheScope"] == "public"
    assert SUPPORTED_VERSIONS == (MODERN,) + LEGACY


def test_stateless_requires_meta_fields(conn: Conn) -> None:
    no_meta = {"jsonrpc": "2.0", "id": "a", "method": "tools/list"}
    conn.write(no_meta)
    msg = conn.wait_for(lambda m: m.get("id") == "a")
    assert msg["error"]["code"] == -32602 and META_VERSION in msg["error"]["message"]
    check_error_any_revision(msg)

    conn.write({"jsonrpc": "2.0", "id": "b", "method": "tools/list", "params": {"_meta": {META_VERSION: MODERN}}})
    msg = conn.wait_for(lambda m: m.get("id") == "b")
    assert msg["error"]["code"] == -32602 and META_CAPS in msg["error"]["message"]
    check_error_any_revision(msg)


@pytest.mark.parametrize("requested", ["1900-01-01", "2025-11-25", "2025-06-18"])
def test_unsupported_stateless_version(conn: Conn, requested: str) -> None:
    error = conn.error("tools/list", meta={META_VERSION: requested})
    assert error == {"code": -32022, "message": "Unsupported protocol version",
                     "data": {"supported": [MODERN], "requested": requested}}


def test_invalid_log_level_in_meta(conn: Conn) -> None:
    assert conn.error("tools/list", meta={META_LOG: "loud"})["code"] == -32602


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "initialize", "resources/subscribe", "no/such"])
def test_methods_not_in_the_stateless_revision(conn: Conn, method: str) -> None:
    error = conn.error(method, {"level": "info"} if method == "logging/setLevel" else None)
    assert error["code"] == -32601


@pytest.mark.parametrize("requested,expected", [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2024-11-05", "2025-11-25"), (MODERN, "2025-11-25"),
])
def test_initialize_negotiation(conns: Any, requested: str, expected: str) -> None:
    conn = conns()
    result = conn.initialize(requested)
    assert result["protocolVersion"] == expected
    assert result["serverInfo"] == {"name": "mcp-sync-demo", "version": "1.0.0"}
    assert set(result["capabilities"]) >= {"tools", "resources", "prompts", "completions", "logging"}
    assert result["instructions"]
    assert conn.result("ping") == {}
    echoed = conn.call_tool("echo", {"text": "legacy"})
    assert echoed == {"content": [{"type": "text", "text": "legacy"}]}


def test_initialize_respects_restricted_versions(conns: Any) -> None:
    conn = conns(Server(versions=["2025-06-18"]))
    assert conn.initialize("2025-11-25")["protocolVersion"] == "2025-06-18"


def test_initialize_twice_and_bad_params(conns: Any) -> None:
    conn = conns()
    conn.stateless = False
    conn.legacy_version = LEGACY[0]
    assert conn.error("initialize", {"protocolVersion": 20251125})["code"] == -32602
    conn.initialize()
    assert conn.error("initialize", {"protocolVersion": LEGACY[0], "capabilities": {},
                                     "clientInfo": {"name": "x", "version": "1"}})["code"] == -32600


def test_legacy_results_and_resource_not_found(conns: Any) -> None:
    conn = conns()
    conn.initialize("2025-06-18")
    tools = conn.result("tools/list")["tools"]
    assert [t["name"] for t in tools][:2] == ["echo", "add"]
    error = conn.error("resources/read", {"uri": "demo://nope"})
    assert error == {"code": -32002, "message": "Resource not found", "data": {"uri": "demo://nope"}}
    assert conn.error("server/discover")["code"] == -32601
    assert conn.result("resources/subscribe", {"uri": "demo://readme"}) == {}
    assert conn.error("resources/subscribe", {})["code"] == -32602
    assert conn.error("subscriptions/listen", {"notifications": {}})["code"] == -32601


def test_legacy_logging_follows_set_level(conns: Any) -> None:
    conn = conns()
    conn.initialize()
    assert conn.call_tool("log", {"level": "emergency", "message": "before setLevel"})["content"][0]["text"] == "logged"
    assert conn.notifications("notifications/message") == []
    assert conn.error("logging/setLevel", {"level": "chatty"})["code"] == -32602
    assert conn.result("logging/setLevel", {"level": "warning"}) == {}
    conn.call_tool("log", {"level": "info", "message": "too quiet"})
    rid = conn.start("tools/call", {"name": "log", "arguments": {"level": "error", "message": "loud"}})
    response = conn.response(rid)
    logs = conn.notifications("notifications/message")
    assert [n["params"] for n in logs] == [{"level": "error", "logger": "demo", "data": "loud"}]
    assert conn.index_of(logs[0]) < conn.index_of(response)


def test_sessions_have_separate_eras(conns: Any) -> None:
    server = demo_server()
    legacy, fresh = conns(server), conns(server)
    legacy.initialize()
    fresh.write({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert fresh.wait_for(lambda m: m.get("id") == 1)["error"]["code"] == -32602
    assert legacy.result("tools/list")["tools"]


def test_stateless_request_on_initialized_session(conns: Any) -> None:
    conn = conns()
    conn.initialize()
    conn.stateless = True
    result = conn.call_tool("echo", {"text": "modern"})
    assert result["resultType"] == "complete"


def test_pre_initialize_ping_is_answered(conn: Conn) -> None:
    conn.write({"jsonrpc": "2.0", "id": "p", "method": "ping"})
    msg = conn.wait_for(lambda m: m.get("id") == "p")
    assert msg["result"] == {}
    check_response(LEGACY[0], "ping", msg)


def test_legacy_only_server(conns: Any) -> None:
    conn = conns(demo_server(versions=list(LEGACY)))
    conn.write({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}})
    assert conn.wait_for(lambda m: m.get("id") == 1)["error"]["code"] == -32601
    conn.write({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    error = conn.wait_for(lambda m: m.get("id") == 2)
    assert error["error"] == {"code": -32600, "message": "Server not initialized"}
    check_error_any_revision(error)
    conn.initialize("2025-06-18")
    # _meta means nothing to a legacy-only server: served under 2025-06-18
    assert "resultType" not in conn.call_tool("echo", {"text": "x"}, meta=modern_meta())


def test_stateless_only_server_rejects_initialize(conns: Any) -> None:
    server = demo_server(versions=[MODERN])
    conn = conns(server)
    assert conn.result("server/discover")["supportedVersions"] == [MODERN]
    conn.write({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
    msg = conn.wait_for(lambda m: m.get("id") == 5)
    assert msg["error"]["code"] == -32602
    assert MODERN in msg["error"]["message"]
    assert msg["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
    check_error_any_revision(msg)


def test_server_constructor_validation() -> None:
    with pytest.raises(ValueError):
        Server(versions=["1999-01-01"])
    with pytest.raises(ValueError):
        Server(versions=[])
    with pytest.raises(ValueError):
        Server(page_size=0)
    assert Server(versions=["2025-06-18", MODERN]).versions == (MODERN, "2025-06-18")


# --------------------------------------------------------------------------
# Tools


def test_tools_list(conn: Conn) -> None:
    tools = {t["name"]: t for t in conn.result("tools/list")["tools"]}
    assert list(tools) == ["echo", "add", "countdown", "sleep", "weather", "bad_weather", "fail", "log", "crash",
                           "book_table", "ask_twice", "login", "summarize", "show_roots", "defaults_form", "nag"]
    assert tools["add"]["outputSchema"]["properties"]["sum"] == {"type": "number"}
    assert tools["echo"]["inputSchema"]["required"] == ["text"]
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])


def test_echo_and_add(conn: Conn) -> None:
    result = conn.call_tool("echo", {"text": "héllo\nwörld"})
    assert result["content"] == [{"type": "text", "text": "héllo\nwörld"}]
    assert not result.get("isError")
    result = conn.call_tool("add", {"a": 2, "b": 3.5})
    assert result["content"] == [{"type": "text", "text": "5.5"}]
    assert result["structuredContent"] == {"sum": 5.5}
    assert conn.call_tool("add", {"a": 1, "b": 2})["structuredContent"] == {"sum": 3}


def test_weather_output_schema(conn: Conn) -> None:
    tools = {t["name"]: t for t in conn.result("tools/list")["tools"]}
    good = conn.call_tool("weather", {"city": "Oslo"})
    assert set(good["structuredContent"]) == {"city", "temperature", "conditions"}
    assert good["structuredContent"]["city"] == "Oslo"
    jsonschema.validate(good["structuredContent"], tools["weather"]["outputSchema"])
    assert json.loads(good["content"][0]["text"]) == good["structuredContent"]
    assert conn.call_tool("weather", {"city": "Oslo"}) == good  # deterministic
    bad = conn.call_tool("bad_weather", {"city": "Oslo"})
    assert not bad.get("isError")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad["structuredContent"], tools["bad_weather"]["outputSchema"])


def test_fail_and_in_process_crash(conn: Conn) -> None:
    result = conn.call_tool("fail", {"message": "it broke"})
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "it broke"}]
    crashed = conn.call_tool("crash", {})
    assert crashed["isError"] is True and "crash" in crashed["content"][0]["text"]


@pytest.mark.parametrize("name,arguments,fragment", [
    ("echo", {}, "Missing required property 'text'"),
    ("echo", {"text": 5}, "'text' must be of type string"),
    ("add", {"a": 1, "b": "2"}, "'b' must be of type number"),
    ("add", {"a": True, "b": 2}, "'a' must be of type number"),
    ("countdown", {"steps": 2.5}, "'steps' must be of type integer"),
    ("crash", {"unexpected": 1}, "Unexpected properties: unexpected"),
])
def test_invalid_tool_arguments(conn: Conn, name: str, arguments: dict[str, Any], fragment: str) -> None:
    error = conn.error("tools/call", {"name": name, "arguments": arguments})
    assert error["code"] == -32602
    assert error["message"].startswith(f"Invalid arguments for tool {name}: ")
    assert fragment in error["message"]


@pytest.mark.parametrize("arguments, accepted", [
    ({"a": "1", "x-trace": "t"}, True),   # a name a pattern allows
    ({"a": "1", "trace": "t"}, False),    # ... and one it does not
    ({}, False),                          # the one required name that is a name
])
def test_arguments_are_checked_as_json_schema_reads_the_schema(arguments: dict[str, Any], accepted: bool) -> None:
    # patternProperties widen additionalProperties: false (as jsonschema
    # says), and a `required` entry that is not a string names nothing.
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^x-": {}},
              "additionalProperties": False, "required": ["a", {"not": "a name"}]}
    server = Server(name="schema")
    server.tool(name="t", input_schema=schema)(lambda args, ctx: "ran")
    assert jsonschema.Draft202012Validator({**schema, "required": ["a"]}).is_valid(arguments) is accepted
    with mcp_sync.connect(server) as client:
        if accepted:
            assert client.call_tool("t", arguments).text == "ran"
        else:
            with pytest.raises(mcp_sync.InvalidParams):
                client.call_tool("t", arguments)


def test_unknown_tool_and_bad_call_params(conn: Conn) -> None:
    assert conn.error("tools/call", {"name": "nope", "arguments": {}}) == {"code": -32602, "message": "Unknown tool: nope"}
    assert conn.error("tools/call", {"arguments": {}})["code"] == -32602
    assert conn.error("tools/call", {"name": "echo", "arguments": ["x"]})["code"] == -32602


def test_countdown_progress(conn: Conn) -> None:
    rid = conn.start("tools/call", {"name": "countdown", "arguments": {"steps": 4, "delay": 0.001}},
                     meta={"progressToken": "tok-1"})
    response = conn.response(rid)
    assert response["result"]["content"] == [{"type": "text", "text": "liftoff"}]
    progress = conn.notifications("notifications/progress")
    assert [n["params"] for n in progress] == [
        {"progressToken": "tok-1", "progress": i, "total": 4, "message": f"step {i}/4"} for i in range(1, 5)
    ]
    assert all(conn.index_of(n) < conn.index_of(response) for n in progress)


def test_countdown_defaults_and_no_progress_without_token(conn: Conn) -> None:
    # defaults: 5 steps, 0.1 s apart
    assert conn.call_tool("countdown", {"steps": 2, "delay": 0})["content"][0]["text"] == "liftoff"
    assert conn.notifications("notifications/progress") == []
    rid = conn.start("tools/call", {"name": "countdown"}, meta={"progressToken": 7})
    conn.response(rid)
    assert [n["params"]["progress"] for n in conn.notifications("notifications/progress")] == [1, 2, 3, 4, 5]


def test_stateless_logging(conn: Conn) -> None:
    conn.call_tool("log", {"level": "emergency", "message": "no logLevel in _meta"})
    assert conn.notifications("notifications/message") == []
    conn.call_tool("log", {"level": "info", "message": "below"}, meta={META_LOG: "warning"})
    assert conn.notifications("notifications/message") == []
    rid = conn.start("tools/call", {"name": "log", "arguments": {"level": "warning", "message": "at"}},
                     meta={META_LOG: "warning"})
    response = conn.response(rid)
    logs = conn.notifications("notifications/message")
    assert [n["params"] for n in logs] == [{"level": "warning", "logger": "demo", "data": "at"}]
    assert conn.index_of(logs[0]) < conn.index_of(response)
    bad = conn.call_tool("log", {"level": "shouting", "message": "x"}, meta={META_LOG: "debug"})
    assert bad["isError"] is True


# --------------------------------------------------------------------------
# Cancellation, concurrency and close()


def blocking_server() -> tuple[Server, dict[str, threading.Event]]:
    """A server whose `block` tool waits for cancellation (or `release`)."""
    events = {name: threading.Event() for name in ("started", "observed", "release")}
    server = Server(name="blocking")

    @server.tool(name="block")
    def block(args: dict[str, Any], ctx: ToolContext) -> str:
        events["started"].set()
        if args.get("ignore_cancel"):
            events["release"].wait(WAIT)
            return "released"
        if ctx.cancelled.wait(WAIT):
            events["observed"].set()
            return "cancelled"
        return "timed out"

    @server.tool(name="echo")
    def echo(args: dict[str, Any], ctx: ToolContext) -> str:
        return str(args.get("text", ""))

    return server, events


def test_cancel_in_flight_request(conns: Any) -> None:
    server, events = blocking_server()
    conn = conns(server)
    rid = conn.start("tools/call", {"name": "block"}, meta={"progressToken": "p"})
    assert events["started"].wait(WAIT)
    conn.cancel(rid, "user pressed stop")
    assert events["observed"].wait(WAIT), "the tool never saw ctx.cancelled"
    assert conn.call_tool("echo", {"text": "still alive"})["content"][0]["text"] == "still alive"
    conn.close()  # joins the worker that ran the cancelled tool
    assert conn.responses_for(rid) == []


def test_cancel_queued_request_and_ignore_bogus_cancels(conns: Any) -> None:
    server, events = blocking_server()
    server.max_workers = 1  # one worker: the echo queues behind the blocked tool
    conn = conns(server)
    blocked = conn.start("tools/call", {"name": "block"})
    assert events["started"].wait(WAIT)
    queued = conn.start("tools/call", {"name": "echo", "arguments": {"text": "queued"}})
    conn.cancel(queued)
    conn.cancel("no-such-request")
    conn.notify("notifications/cancelled", {"requestId": {"bad": "type"}})
    conn.notify("notifications/cancelled", {})
    conn.cancel(blocked)
    final = conn.call_tool("echo", {"text": "after"})
    assert final["content"][0]["text"] == "after"
    assert conn.responses_for(blocked) == [] and conn.responses_for(queued) == []


def test_demo_sleep_is_cancellable_and_slow_tools_do_not_block(conn: Conn) -> None:
    rid = conn.start("tools/call", {"name": "sleep", "arguments": {"seconds": 60}})
    assert conn.call_tool("echo", {"text": "fast"})["content"][0]["text"] == "fast"
    assert conn.responses_for(rid) == []
    started = time.monotonic()
    conn.cancel(rid)
    conn.close()
    assert time.monotonic() - started < WAIT
    assert conn.responses_for(rid) == []


def test_sleep_completes(conn: Conn) -> None:
    assert conn.call_tool("sleep", {"seconds": 0.01})["content"][0]["text"] == "slept"


def test_close_cancels_joins_and_silences(conns: Any) -> None:
    server, events = blocking_server()
    conn = conns(server)
    rid = conn.start("tools/call", {"name": "block", "arguments": {"ignore_cancel": True}})
    assert events["started"].wait(WAIT)
    workers = conn.session._pool.threads()
    assert workers and all(t.is_alive() for t in workers)
    closer = threading.Thread(target=conn.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "close() returned while a tool was still running on a session thread"
    events["release"].set()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert not any(t.is_alive() for t in workers)
    assert conn.responses_for(rid) == []  # finished after close(): never sent
    count = len(conn.messages)
    conn.write({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "echo", "_meta": modern_meta()}})
    conn.close()  # idempotent
    assert len(conn.messages) == count


def test_close_from_inside_send_does_not_deadlock() -> None:
    server = demo_server()
    holder: dict[str, Any] = {}
    sent: list[dict[str, Any]] = []
    done = threading.Event()

    def send(message: dict[str, Any]) -> None:
        sent.append(message)
        holder["session"].close()
        done.set()

    holder["session"] = session = server.open_session(send)
    for i in range(5):
        session.receive({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": str(i)}, "_meta": modern_meta()}})
    assert done.wait(WAIT)
    session.close()
    assert len(sent) == 1


def test_close_from_inside_a_tool() -> None:
    server = Server()
    holder: dict[str, Any] = {}
    sent: list[dict[str, Any]] = []

    @server.tool(name="quit")
    def quit_tool(args: dict[str, Any], ctx: ToolContext) -> str:
        holder["session"].close()
        return "bye"

    holder["session"] = session = server.open_session(sent.append)
    session.receive({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "quit", "_meta": modern_meta()}})
    for thread in session._pool.threads():
        thread.join(WAIT)
        assert not thread.is_alive()
    assert sent == []


def test_concurrent_requests_from_many_threads(conn: Conn) -> None:
    per_thread, threads = 150, 8
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            ids = [conn.start("tools/call", {"name": "echo", "arguments": {"text": f"{n}-{i}"}}, request_id=f"{n}-{i}")
                   for i in range(per_thread)]
            for rid in ids:
                assert conn.response(rid)["result"]["content"][0]["text"] == rid
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(60)
    assert not errors, errors[0]
    assert len(conn.messages) == per_thread * threads
    assert conn.concurrent_sends == 1, "send must never be entered by two threads at once"
    assert 1 <= conn.session._pool.thread_count <= 16


def test_send_is_never_entered_concurrently() -> None:
    """The first send holds on until another send enters or 0.5 s pass; with
    serialised sends nothing can enter meanwhile."""
    entered = threading.Event()
    lock = threading.Lock()
    state = {"inside": 0, "overlap": 0, "count": 0}
    all_sent = threading.Event()

    def send(message: dict[str, Any]) -> None:
        with lock:
            state["inside"] += 1
            state["count"] += 1
            first = state["count"] == 1
            if state["inside"] > 1:
                state["overlap"] += 1
                entered.set()
        if first:
            entered.wait(0.5)
        with lock:
            state["inside"] -= 1
            if state["count"] == 8:
                all_sent.set()

    session = demo_server().open_session(send)
    try:
        for i in range(8):
            session.receive({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                             "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": modern_meta()}})
        assert all_sent.wait(WAIT)
    finally:
        session.close()
    assert state["overlap"] == 0


def test_related_send_names_the_request_of_each_message() -> None:
    """open_session(send, related=True): send(message, related_id) with the id
    of the request a response, progress or log notification belongs to, and
    None for messages related to no request."""
    got: list[tuple[dict[str, Any], Any]] = []
    cond = threading.Condition()

    def send(message: dict[str, Any], related: Any) -> None:
        with cond:
            got.append((message, related))
            cond.notify_all()

    session = demo_server().open_session(send, related=True)
    try:
        session.receive({"jsonrpc": "2.0", "id": "cd", "method": "tools/call",
                         "params": {"name": "countdown", "arguments": {"steps": 2, "delay": 0},
                                    "_meta": modern_meta(progressToken="t")}})
        session.receive({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": "log", "arguments": {"level": "error", "message": "boom"},
                                    "_meta": modern_meta(**{META_LOG: "debug"})}})
        session.receive({"jsonrpc": "2.0", "id": 8, "method": "no/such/method", "params": {"_meta": modern_meta()}})
        session.receive({"jsonrpc": "2.0", "id": None, "method": "tools/list"})  # unusable id
        session.receive(["not", "an", "object"])
        with cond:
            assert cond.wait_for(lambda: len(got) == 8, WAIT), got
    finally:
        session.close()
    by_related: dict[Any, list[dict[str, Any]]] = {}
    for message, related in got:
        by_related.setdefault(related, []).append(message)
    assert [m.get("method") for m in by_related["cd"]] == ["notifications/progress", "notifications/progress", None]
    assert by_related["cd"][-1]["id"] == "cd" and by_related["cd"][-1]["result"]["content"][0]["text"] == "liftoff"
    assert [m.get("method") for m in by_related[7]] == ["notifications/message", None]
    assert by_related[8] == [{"jsonrpc": "2.0", "id": 8, "error": by_related[8][0]["error"]}]
    assert by_related[8][0]["error"]["code"] == -32601
    assert [m["error"]["code"] for m in by_related[None]] == [-32600, -32600]
    assert all("id" not in m for m in by_related[None])
    for message, _ in got:
        if "method" in message:
            check_notification(MODERN, message)
        else:
            check_error_any_revision(message) if "error" in message else check_response(MODERN, "tools/call", message)


def test_default_send_gets_one_argument() -> None:
    """Without related=True, send keeps its one-argument form (the client's memory transport relies on it)."""
    got: list[dict[str, Any]] = []
    done = threading.Event()

    def send(*args: Any) -> None:
        assert len(args) == 1
        got.append(args[0])
        done.set()

    for session in (demo_server().open_session(send), demo_server().open_session(send, related=False)):
        done.clear()
        try:
            session.receive({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}})
            assert done.wait(WAIT)
        finally:
            session.close()
    assert [m["id"] for m in got] == [1, 1]


def test_input_schema_lookup() -> None:
    server = demo_server()
    assert server.input_schema("echo") == {"type": "object", "properties": {"text": {"type": "string"}},
                                           "required": ["text"]}
    assert server.input_schema("nope") is None


def test_duplicate_in_flight_id(conns: Any) -> None:
    server, events = blocking_server()
    conn = conns(server)
    conn.start("tools/call", {"name": "block"}, request_id="dup")
    assert events["started"].wait(WAIT)
    conn.write({"jsonrpc": "2.0", "id": "dup", "method": "tools/call",
                "params": {"name": "echo", "_meta": modern_meta()}})
    msg = conn.wait_for(lambda m: m.get("id") == "dup")
    assert msg["error"]["code"] == -32600
    conn.cancel("dup")


# --------------------------------------------------------------------------
# Progress and context details


def test_tool_context_and_progress_rules(conns: Any) -> None:
    server = Server()
    kept: list[ToolContext] = []

    @server.tool(name="ctx")
    def ctx_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        kept.append(ctx)
        return {"version": ctx.protocol_version, "request_id": ctx.request_id,
                "token": ctx.progress_token, "client": ctx.meta["io.modelcontextprotocol/clientInfo"]["name"]}

    @server.tool(name="backwards")
    def backwards(args: dict[str, Any], ctx: ToolContext) -> str:
        ctx.progress(2, 10)
        ctx.progress(1, 10)
        return "unreachable"

    conn = conns(server)
    rid = conn.start("tools/call", {"name": "ctx"}, meta={"progressToken": "t", META_LOG: "debug"}, request_id="r1")
    result = conn.response(rid)["result"]
    assert result["structuredContent"] == {"version": MODERN, "request_id": "r1", "token": "t", "client": "test-client"}
    count = len(conn.messages)
    kept[0].progress(1, 2, "after the response")  # the request is over: dropped
    kept[0].log("emergency", "after the response")
    assert len(conn.messages) == count

    rid = conn.start("tools/call", {"name": "backwards"}, meta={"progressToken": "b"})
    result = conn.response(rid)["result"]
    assert result["isError"] is True and "progress must increase" in result["content"][0]["text"]
    assert [n["params"]["progress"] for n in conn.notifications("notifications/progress")] == [2]


# --------------------------------------------------------------------------
# Resources, prompts, completion


def test_resources(conn: Conn) -> None:
    resources = conn.result("resources/list")["resources"]
    assert [(r["uri"], r["mimeType"]) for r in resources] == [
        ("demo://readme", "text/markdown"), ("demo://logo.png", "image/png")]
    templates = conn.result("resources/templates/list")["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["demo://items/{id}", "demo://secret/{id}"]

    readme = conn.result("resources/read", {"uri": "demo://readme"})["contents"]
    assert readme[0]["uri"] == "demo://readme" and readme[0]["text"].startswith("# ")
    logo = conn.result("resources/read", {"uri": "demo://logo.png"})["contents"][0]
    assert logo["mimeType"] == "image/png" and "text" not in logo
    assert base64.b64decode(logo["blob"]).startswith(b"\x89PNG\r\n\x1a\n")
    item = conn.result("resources/read", {"uri": "demo://items/42"})["contents"]
    assert item == [{"uri": "demo://items/42", "mimeType": "text/plain", "text": "item 42"}]


def test_resource_not_found_stateless(conn: Conn) -> None:
    for uri in ("demo://missing", "demo://items/", "demo://items/1/2"):
        assert conn.error("resources/read", {"uri": uri}) == {
            "code": -32602, "message": "Resource not found", "data": {"uri": uri}}
    assert conn.error("resources/read", {})["code"] == -32602


def test_prompts(conn: Conn) -> None:
    prompts = conn.result("prompts/list")["prompts"]
    assert prompts == [{"name": "greet", "description": "Greet someone.", "arguments": [
        {"name": "name", "description": "Who to greet", "required": True},
        {"name": "style", "description": "formal, friendly or pirate", "required": False}]},
        {"name": "personal_greeting",
         "description": "A greeting for the user, who is asked for their name."}]
    result = conn.result("prompts/get", {"name": "greet", "arguments": {"name": "Ada", "style": "pirate"}})
    assert result["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "Please greet Ada in a pirate style."}}]
    assert conn.error("prompts/get", {"name": "greet", "arguments": {}})["code"] == -32602
    assert conn.error("prompts/get", {"name": "greet", "arguments": {"name": 3}})["code"] == -32602
    assert conn.error("prompts/get", {"name": "nope"}) == {"code": -32602, "message": "Unknown prompt: nope"}


@pytest.mark.parametrize("ref,argument,value,expected", [
    ({"type": "ref/prompt", "name": "greet"}, "style", "f", ["formal", "friendly"]),
    ({"type": "ref/prompt", "name": "greet"}, "style", "", ["formal", "friendly", "pirate"]),
    ({"type": "ref/prompt", "name": "greet"}, "name", "A", []),
    ({"type": "ref/resource", "uri": "demo://items/{id}"}, "id", "4", ["42"]),
    ({"type": "ref/resource", "uri": "demo://items/{id}"}, "id", "", ["1", "2", "3", "42"]),
])
def test_completion(conn: Conn, ref: dict[str, str], argument: str, value: str, expected: list[str]) -> None:
    result = conn.result("completion/complete", {"ref": ref, "argument": {"name": argument, "value": value}})
    assert result["completion"] == {"values": expected, "total": len(expected), "hasMore": False}


def test_completion_errors(conn: Conn) -> None:
    for ref in ({"type": "ref/prompt", "name": "nope"}, {"type": "ref/resource", "uri": "demo://nope/{x}"},
                {"type": "ref/other", "name": "greet"}):
        assert conn.error("completion/complete", {"ref": ref, "argument": {"name": "a", "value": ""}})["code"] == -32602
    assert conn.error("completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"}})["code"] == -32602


# --------------------------------------------------------------------------
# Pagination


def many_server(page_size: int | None) -> Server:
    server = Server(page_size=page_size)
    for i in range(5):
        server.tool(name=f"t{i}")(lambda args, ctx: "x")
        server.prompt(f"p{i}")(lambda args: "x")
        server.resource(f"test://r{i}", f"r{i}")(lambda: "x")
        server.resource_template(f"test://t{i}/{{v}}", f"t{i}")(lambda params: "x")
    return server


@pytest.mark.parametrize("stateless", [True, False])
@pytest.mark.parametrize("method,key", [("tools/list", "tools"), ("prompts/list", "prompts"),
                                        ("resources/list", "resources"),
                                        ("resources/templates/list", "resourceTemplates")])
def test_pagination(conns: Any, method: str, key: str, stateless: bool) -> None:
    conn = conns(many_server(page_size=2))
    if not stateless:
        conn.initialize()
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        result = conn.result(method, {"cursor": cursor} if cursor is not None else None)
        pages.append(result[key])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
        assert isinstance(cursor, str)
    assert [len(p) for p in pages] == [2, 2, 1]
    unpaged = conns(many_server(page_size=None))
    if not stateless:
        unpaged.initialize()
    everything = unpaged.result(method)
    assert "nextCursor" not in everything
    assert [x for p in pages for x in p] == everything[key]


def test_invalid_cursors(conns: Any) -> None:
    conn = conns(many_server(page_size=2))
    prompt_cursor = conn.result("prompts/list")["nextCursor"]
    for cursor in ("garbage", "", prompt_cursor, 3, base64.urlsafe_b64encode(b"tools:99").decode()):
        assert conn.error("tools/list", {"cursor": cursor})["code"] == -32602


# --------------------------------------------------------------------------
# The registration API


def test_custom_tools(conns: Any) -> None:
    server = Server(name="custom", version="9.9", instructions=None)

    @server.tool
    def plain(args: dict[str, Any], ctx: ToolContext) -> list[Any]:
        """Docstring description."""
        return ["one", {"type": "text", "text": "two"}]

    @server.tool(name="structured", output_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    def structured_fn(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"n": args["n"]}

    @server.tool(input_schema={"type": "object", "properties": {
        "n": {"type": "integer", "default": 7}, "flag": {"type": "boolean"}, "tags": {"type": "array"},
        "opt": {"type": ["string", "null"]}}})
    def defaults(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": json.dumps(args, sort_keys=True)}], "isError": False}

    @server.tool()
    def raises(args: dict[str, Any], ctx: ToolContext) -> str:
        raise KeyError("missing thing")

    @server.tool()
    def nothing(args: dict[str, Any], ctx: ToolContext) -> None:
        return None

    @server.tool(title="Bad return")
    def bad_return(args: dict[str, Any], ctx: ToolContext) -> Any:
        return [object()]

    with pytest.raises(ValueError):
        server.tool(input_schema={"type": "array"})

    conn = conns(server)
    tools = {t["name"]: t for t in conn.result("tools/list")["tools"]}
    assert tools["plain"]["description"] == "Docstring description."
    assert tools["plain"]["inputSchema"] == {"type": "object"}
    assert tools["bad_return"]["title"] == "Bad return"
    assert conn.call_tool("plain")["content"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    result = conn.call_tool("structured", {"n": 4})
    assert result["structuredContent"] == {"n": 4} and json.loads(result["content"][0]["text"]) == {"n": 4}
    result = conn.call_tool("defaults", {"n": 3.0, "flag": True, "tags": [], "opt": None})
    assert json.loads(result["content"][0]["text"]) == {"flag": True, "n": 3.0, "opt": None, "tags": []}
    assert json.loads(conn.call_tool("defaults", {})["content"][0]["text"]) == {"n": 7}
    bad_arguments: list[dict[str, Any]] = [{"flag": 1}, {"tags": {}}, {"opt": 5}]
    for bad in bad_arguments:
        assert conn.error("tools/call", {"name": "defaults", "arguments": bad})["code"] == -32602
    result = conn.call_tool("raises")
    assert result == {"resultType": "complete", "content": [{"type": "text", "text": "'missing thing'"}],
                      "isError": True, "_meta": {META_SERVER_INFO: {"name": "custom", "version": "9.9"}}}
    assert conn.call_tool("nothing")["content"] == []
    assert conn.call_tool("bad_return")["isError"] is True
    assert "instructions" not in conn.result("server/discover")


def test_custom_resources_prompts_completions(conns: Any) -> None:
    server = Server()

    @server.resource("test://bin", "bin")
    def binary() -> bytes:
        return bytes(range(256))

    @server.resource("test://broken", "broken")
    def broken() -> str:
        raise RuntimeError("disk on fire")

    @server.resource_template("test://users/{user}/files/{name}", "file", mime_type="text/plain")
    def user_file(params: dict[str, str]) -> str:
        if params["user"] == "ghost":
            raise KeyError(params["user"])
        return f"{params['user']}:{params['name']}"

    @server.prompt("chat", arguments=[{"name": "topic", "required": True}])
    def chat(args: dict[str, str]) -> list[Any]:
        return [{"role": "assistant", "content": {"type": "text", "text": "Hi"}}, f"Tell me about {args['topic']}"]

    @server.completion("prompt", "chat", "topic")
    def topics(value: str, context: dict[str, str]) -> list[str]:
        return [f"topic{i}" for i in range(150)]

    with pytest.raises(ValueError):
        server.completion("tool", "x", "y")
    with pytest.raises(ValueError):
        server.resource_template("test://{a}/{a}", "dup")

    conn = conns(server)
    blob = conn.result("resources/read", {"uri": "test://bin"})["contents"][0]
    assert base64.b64decode(blob["blob"]) == bytes(range(256)) and "mimeType" not in blob
    assert conn.error("resources/read", {"uri": "test://broken"})["code"] == -32603
    text = conn.result("resources/read", {"uri": "test://users/ada%20l/files/notes.txt"})["contents"][0]
    assert text["text"] == "ada l:notes.txt"
    assert conn.error("resources/read", {"uri": "test://users/ghost/files/x"})["code"] == -32602
    messages = conn.result("prompts/get", {"name": "chat", "arguments": {"topic": "owls"}})["messages"]
    assert messages == [{"role": "assistant", "content": {"type": "text", "text": "Hi"}},
                        {"role": "user", "content": {"type": "text", "text": "Tell me about owls"}}]
    completion = conn.result("completion/complete", {"ref": {"type": "ref/prompt", "name": "chat"},
                                                     "argument": {"name": "topic", "value": ""},
                                                     "context": {"arguments": {}}})["completion"]
    assert len(completion["values"]) == 100 and completion["total"] == 150 and completion["hasMore"] is True


# --------------------------------------------------------------------------
# Malformed JSON-RPC


def test_malformed_messages(conns: Any) -> None:
    server = demo_server()
    server.max_workers = 1  # one worker: answers come out in the order of the messages
    conn = conns(server)
    conn.write({"jsonrpc": "2.0", "id": 5})
    conn.write({"jsonrpc": "2.0", "id": 1.5, "method": "ping"})
    conn.write({"jsonrpc": "2.0", "id": None, "method": "ping"})
    conn.write({"jsonrpc": "2.0", "id": True, "method": "ping"})
    conn.write({"jsonrpc": "1.0", "id": 9, "method": "tools/list"})
    conn.write({"jsonrpc": "2.0", "id": 10, "method": 5})
    conn.write([{"jsonrpc": "2.0", "id": 11, "method": "ping"}])
    conn.write({"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": ["x"]})
    conn.write({"jsonrpc": "2.0", "id": 13, "method": "tools/list", "params": {"_meta": "x"}})
    # ignored: a response from the client, notifications of any kind
    conn.write({"jsonrpc": "2.0", "id": 77, "result": {}})
    conn.write({"jsonrpc": "2.0", "id": 78, "error": {"code": 1, "message": "no"}})
    conn.write({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"x": 1}})
    conn.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
    conn.write({"jsonrpc": "2.0", "method": "notifications/progress", "params": 5})
    last = conn.call_tool("echo", {"text": "end"})
    assert last["content"][0]["text"] == "end"
    replies = conn.messages[:-1]
    assert [(m.get("id", "<none>"), m["error"]["code"]) for m in replies] == [
        (5, -32600), ("<none>", -32600), ("<none>", -32600), ("<none>", -32600), (9, -32600), (10, -32600),
        ("<none>", -32600), (12, -32602), (13, -32602)]
    for msg in replies:
        check_error_any_revision(msg)


# --------------------------------------------------------------------------
# Properties


_prop_server = demo_server()


@settings(max_examples=60, deadline=None)
@given(text=st.text())
def test_echo_roundtrips_any_text(text: str) -> None:
    conn = Conn(_prop_server)
    try:
        assert conn.call_tool("echo", {"text": text})["content"] == [{"type": "text", "text": text}]
    finally:
        conn.close()


@settings(max_examples=60, deadline=None)
@given(a=st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6, allow_nan=False),
       b=st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6, allow_nan=False))
def test_add_matches_python(a: float, b: float) -> None:
    conn = Conn(_prop_server)
    try:
        result = conn.call_tool("add", {"a": a, "b": b})
        assert result["structuredContent"] == {"sum": a + b}
        assert result["content"][0]["text"] == str(a + b)
    finally:
        conn.close()


# --------------------------------------------------------------------------
# The stdio program


def test_stdio_session(procs: Any) -> None:
    proc = procs()
    discovered = proc.result("server/discover")
    assert discovered["_meta"][META_SERVER_INFO]["name"] == "mcp-sync-demo"
    assert proc.call_tool("echo", {"text": "line\nbreak \u2028 and \"quotes\""})["content"][0]["text"] == \
        "line\nbreak \u2028 and \"quotes\""
    proc.write_raw(b"this is not json\n")
    parse_error = proc.wait_for(lambda m: m.get("error", {}).get("code") == -32700)
    assert "id" not in parse_error
    check_error_any_revision(parse_error)
    proc.write_raw(b"\xff\xfe{}\n\n   \n")
    proc.wait_for(lambda m: len([x for x in proc.messages if x.get("error", {}).get("code") == -32700]) == 2)
    rid = proc.start("tools/call", {"name": "countdown", "arguments": {"steps": 3, "delay": 0}},
                     meta={"progressToken": "p", META_LOG: "debug"})
    assert proc.response(rid)["result"]["content"][0]["text"] == "liftoff"
    assert [n["params"]["progress"] for n in proc.notifications("notifications/progress")] == [1, 2, 3]
    proc.call_tool("log", {"level": "notice", "message": "hello"}, meta={META_LOG: "info"})
    assert proc.notifications("notifications/message")[0]["params"]["data"] == "hello"
    assert proc.finish() == 0
    check_all_notifications(MODERN, proc.messages)
    assert proc.stderr == b"", proc.stderr.decode(errors="replace")


def test_stdio_exits_promptly_at_eof_with_work_in_flight(procs: Any) -> None:
    proc = procs()
    slow = proc.start("tools/call", {"name": "countdown", "arguments": {"steps": 10000, "delay": 0.05}},
                      meta={"progressToken": 1})
    sleeper = proc.start("tools/call", {"name": "sleep", "arguments": {"seconds": 600}})
    proc.wait_for(lambda m: m.get("method") == "notifications/progress")
    started = time.monotonic()
    assert proc.finish() == 0
    assert time.monotonic() - started < GENEROUS  # not after the 600 s sleep or the 500 s countdown
    assert proc.responses_for(slow) == [] and proc.responses_for(sleeper) == []


def test_stdio_cancellation(procs: Any) -> None:
    proc = procs()
    rid = proc.start("tools/call", {"name": "countdown", "arguments": {"steps": 1000, "delay": 0.02}},
                     meta={"progressToken": "c"})
    proc.wait_for(lambda m: m.get("method") == "notifications/progress")
    proc.cancel(rid)
    assert proc.call_tool("echo", {"text": "after cancel"})["content"][0]["text"] == "after cancel"
    assert proc.finish() == 0
    assert proc.responses_for(rid) == []
    progress = [n["params"]["progress"] for n in proc.notifications("notifications/progress")]
    assert progress == sorted(set(progress)) and len(progress) < 1000


def test_stdio_crash(procs: Any) -> None:
    proc = procs()
    assert proc.call_tool("echo", {"text": "before"})["content"][0]["text"] == "before"
    rid = proc.start("tools/call", {"name": "crash", "arguments": {}})
    assert proc.proc.wait(WAIT) == 3
    proc._err_reader.join(WAIT)
    assert b"crashing on purpose" in proc.stderr
    assert proc.responses_for(rid) == []


def test_stdio_options(procs: Any) -> None:
    proc = procs("--page-size", "4", "--name", "renamed")
    first = proc.result("tools/list")
    assert len(first["tools"]) == 4 and first["_meta"][META_SERVER_INFO]["name"] == "renamed"
    second = proc.result("tools/list", {"cursor": first["nextCursor"]})
    assert [t["name"] for t in second["tools"]] == ["weather", "bad_weather", "fail", "log"]
    assert proc.finish() == 0

    legacy = procs("--versions", "2025-11-25")
    assert legacy.error("server/discover")["code"] == -32601
    assert legacy.initialize("2025-06-18")["protocolVersion"] == "2025-11-25"
    assert legacy.call_tool("echo", {"text": "old"}) == {"content": [{"type": "text", "text": "old"}]}
    assert legacy.finish() == 0

    bad = procs("--versions", "1999-01-01")
    assert bad.finish() == 2
    assert b"1999-01-01" in bad.stderr


def test_python_dash_m_package(procs: Any) -> None:
    proc = procs(module="mcp_sync.testing")
    assert proc.result("server/discover")["supportedVersions"] == [MODERN]
    assert proc.finish() == 0
    assert proc.stderr == b""


#: The most one sequential echo over stdio may take on average on a loaded
#: machine (a fraction of a millisecond when healthy): a server that answered
#: on a timer or a poll tick of 15 ms or more would take longer.
ECHO_BUDGET = 0.015


def test_stdio_sequential_throughput(procs: Any) -> None:
    proc = procs()
    count = 2000
    started = time.monotonic()
    for i in range(count):
        proc.write({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": str(i)}, "_meta": modern_meta()}})
        with proc.cond:
            assert proc.cond.wait_for(lambda: len(proc.messages) > i, WAIT)
    elapsed = time.monotonic() - started
    assert proc.finish() == 0
    assert [m["result"]["content"][0]["text"] for m in proc.messages] == [str(i) for i in range(count)]
    print(f"{count} sequential echo calls over stdio: {elapsed:.2f}s ({count / elapsed:.0f}/s)")
    assert elapsed < count * ECHO_BUDGET


@pytest.fixture(scope="module")
def shared_proc() -> Any:
    proc = Proc()
    yield proc
    proc.kill()


@settings(max_examples=40, deadline=None)
@given(text=st.text())
def test_stdio_echo_roundtrips_any_text(shared_proc: Proc, text: str) -> None:
    assert shared_proc.call_tool("echo", {"text": text})["content"] == [{"type": "text", "text": text}]


@pytest.mark.parametrize("transport", ["memory", "stdio", "http"])
@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_text_with_a_lone_surrogate_is_answered(transport, protocol):
    # JSON carries "\ud800" escaped, and a model may write one: the server
    # failed to hash the request (2026-07-28) or to write its answer
    # (HTTP) and never answered; the call waited out its timeout.
    from mcp_sync.testing import HTTPServer

    from tests.helpers import demo_command

    if transport == "http":
        with HTTPServer(demo_server()) as http, mcp_sync.connect(http.url, protocol=protocol) as client:
            assert client.call_tool("echo", {"text": "a\ud800b"}, timeout=20).text == "a\ud800b"
        return
    target = demo_server() if transport == "memory" else demo_command()
    with mcp_sync.connect(target, protocol=protocol) as client:
        assert client.call_tool("echo", {"text": "a\ud800b"}, timeout=20).text == "a\ud800b"


def test_a_request_the_server_fails_to_handle_is_answered_with_an_internal_error(monkeypatch):
    import mcp_sync.testing._session as session

    def broken(self, message):
        raise RuntimeError("a bug in the test server")

    with mcp_sync.connect(demo_server(), protocol="2026-07-28") as client:
        monkeypatch.setattr(session.ServerSession, "_receive", broken)
        with pytest.raises(mcp_sync.ServerError, match="Internal error: a bug in the test server") as info:
            client.call_tool("echo", {"text": "hi"}, timeout=20)
    assert info.value.code == -32603


# --------------------------------------------------------------------------
# Mistakes in handlers: every request is answered, none waits out its timeout


# What `pytest.fail()` and `pytest.skip()` raise derives from BaseException,
# as SystemExit and KeyboardInterrupt do.
_BASE_EXCEPTIONS = [SystemExit(1), KeyboardInterrupt(), GeneratorExit(),
                    pytest.fail.Exception("failed in the server"), pytest.skip.Exception("skipped in the server")]


@pytest.mark.parametrize("exc", _BASE_EXCEPTIONS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("stateless", [True, False])
def test_a_handler_raising_a_base_exception_is_answered(conns: Any, exc: BaseException, stateless: bool) -> None:
    # On a worker thread none of these can be a user's Ctrl-C or an exit of
    # the process: they are the handler's failure, answered like any other
    # (a tool: an isError result; a prompt or resource: -32603), where they
    # used to be logged and dropped, and the client waited out its timeout.
    server = Server()

    @server.tool(name="raises")
    def raises(args: dict[str, Any], ctx: ToolContext) -> str:
        raise exc

    @server.prompt("raises")
    def prompt(args: dict[str, str]) -> str:
        raise exc

    @server.resource("test://raises", "raises")
    def resource() -> str:
        raise exc

    conn = conns(server, stateless)
    if not stateless:
        conn.initialize()
    result = conn.call_tool("raises")
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": str(exc) or type(exc).__name__}]
    for method, params in [("prompts/get", {"name": "raises"}), ("resources/read", {"uri": "test://raises"})]:
        error = conn.error(method, params)
        assert error["code"] == -32603 and (str(exc) or type(exc).__name__) in error["message"]
    assert conn.result("tools/list")["tools"][0]["name"] == "raises"  # the session still serves


@pytest.mark.parametrize("transport", ["memory", "http"])
def test_a_tool_raising_system_exit_is_an_error_result_through_the_client(transport: str) -> None:
    from mcp_sync.testing import HTTPServer

    server = Server()

    @server.tool
    def exits(args: dict[str, Any], ctx: ToolContext) -> str:
        raise SystemExit("the tool called sys.exit()")

    @server.tool
    def fails(args: dict[str, Any], ctx: ToolContext) -> str:
        pytest.fail("an assertion in the server")

    def check(client: mcp_sync.Client) -> None:
        result = client.call_tool("exits", timeout=WAIT)
        assert result.is_error and result.text == "the tool called sys.exit()"
        result = client.call_tool("fails", timeout=WAIT)
        assert result.is_error and result.text == "an assertion in the server"

    if transport == "http":
        with HTTPServer(server) as http, mcp_sync.connect(http.url) as client:
            check(client)
    else:
        with mcp_sync.connect(server) as client:
            check(client)


def test_an_answer_that_cannot_be_encoded_is_an_error_naming_the_value(conns: Any) -> None:
    # The answer is checked before it reaches `send`: a transport that
    # cannot encode it used to drop it (stdio: the client waited out its
    # timeout; HTTP: "closed the connection without answering").
    conn = conns(unencodable_server.build())
    result = conn.call_tool("when")
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "cannot be encoded as JSON" in text and "structuredContent.at[1]" in text and "<When 2026-01-01>" in text
    error = conn.error("tools/call", {"name": "rpc_data"})
    assert error["code"] == -32603 and "error.data.when" in error["message"]
    error = conn.error("prompts/get", {"name": "when"})
    assert error["code"] == -32603 and "<When 2026-01-01>" in error["message"]
    # ctx.log fails in the tool, at the mistake, whether or not the level lets it out.
    result = conn.call_tool("logs")
    assert result["isError"] is True and "log data" in result["content"][0]["text"]
    assert conn.call_tool("ok")["content"] == [{"type": "text", "text": "fine"}]


def test_an_answer_that_cannot_be_encoded_is_answered_over_every_transport() -> None:
    from mcp_sync.testing import HTTPServer

    stderr: list[str] = []

    def check(client: mcp_sync.Client) -> None:
        result = client.call_tool("when", timeout=WAIT)
        assert result.is_error and "structuredContent.at[1]" in result.text
        with pytest.raises(mcp_sync.ServerError, match=r"error\.data\.when") as info:
            client.call_tool("rpc_data", timeout=WAIT)
        assert info.value.code == -32603
        assert client.call_tool("ok", timeout=WAIT).text == "fine"

    with mcp_sync.connect(unencodable_server.build()) as client:
        check(client)
    with HTTPServer(unencodable_server.build()) as http, mcp_sync.connect(http.url) as client:
        check(client)
    command = mcp_sync.Stdio(sys.executable, ["-m", "tests.testing.unencodable_server"], cwd=REPO,
                             stderr=stderr.append)
    with mcp_sync.connect(command) as client:
        check(client)
    # The stdio server says so on its stderr too, where its operator looks.
    assert any("the result of tool when cannot be encoded as JSON" in line for line in stderr), stderr
    assert any("the answer to tools/call cannot be encoded as JSON" in line for line in stderr), stderr


# --------------------------------------------------------------------------
# Mistakes in registrations and construction: an error at the mistake


def test_a_bare_prompt_decorator_registers_the_function_under_its_name(conns: Any) -> None:
    server = Server()

    @server.prompt
    def greet(args: dict[str, str]) -> str:
        return "hi"

    assert callable(greet) and greet({}) == "hi"  # the function itself, not a decorator
    conn = conns(server)
    assert [p["name"] for p in conn.result("prompts/list")["prompts"]] == ["greet"]
    messages = conn.result("prompts/get", {"name": "greet"})["messages"]
    assert messages == [{"role": "user", "content": {"type": "text", "text": "hi"}}]


@pytest.mark.parametrize("register, error, fragment", [
    (lambda s: s.prompt(123), TypeError, "prompt name must be a string"),
    (lambda s: s.prompt(""), ValueError, "a prompt needs a non-empty name"),
    (lambda s: s.resource(123, "x"), TypeError, "resource uri must be a string"),
    (lambda s: s.resource("test://x", 5), TypeError, "resource name must be a string"),
    (lambda s: s.resource_template("test://{a}", None), TypeError, "resource template name must be a string"),
    (lambda s: s.completion("prompt", 7, "arg"), TypeError, "completion ref must be a string"),
    (lambda s: s.completion("prompt", "p", None), TypeError, "completion argument must be a string"),
    (lambda s: s.tool(5), TypeError, "tool name must be a string"),
    (lambda s: s.tool(""), ValueError, "a tool needs a non-empty name"),
])
def test_a_registration_with_a_wrong_value_fails_at_once(register: Any, error: type[Exception], fragment: str) -> None:
    # At the registration, not when a client lists or calls what it made.
    with pytest.raises(error, match=fragment):
        register(Server())


def test_bare_decorators_that_need_arguments_fail_at_once() -> None:
    # Python's own TypeError (a missing uri, name, ref...) says what to add.
    server = Server()
    for decorator in (server.resource, server.resource_template, server.completion):
        with pytest.raises(TypeError, match="missing"):
            decorator(lambda: "x")


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "4", None])
def test_max_workers_is_checked_when_the_server_is_made(value: Any) -> None:
    with pytest.raises(ValueError, match="max_workers must be a positive integer"):
        Server(max_workers=value)
    server = Server()
    with pytest.raises(ValueError, match="max_workers must be a positive integer"):
        server.max_workers = value
    assert server.max_workers == 16  # unchanged by the refused value


@pytest.mark.parametrize("args, fragment", [
    (("-32000", "boom"), "RpcError code must be an int"),
    ((True, "boom"), "RpcError code must be an int"),
    ((-32000.0, "boom"), "RpcError code must be an int"),
    ((-32000, None), "RpcError message must be a str"),
    ((-32000, b"boom"), "RpcError message must be a str"),
])
def test_rpc_error_checks_its_arguments(args: tuple[Any, ...], fragment: str) -> None:
    with pytest.raises(TypeError, match=fragment):
        RpcError(*args)
    assert RpcError(-32000, "boom", {"n": 1}).to_json() == {"code": -32000, "message": "boom", "data": {"n": 1}}

