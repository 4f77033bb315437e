"""Change notifications, subscriptions and caching hints of mcp_sync.testing.

Initialize era: list_changed / resources/updated related to no request
(in-process, stdio, the HTTP GET stream). Stateless era: subscriptions/listen
(acknowledgement, subscription ids, client cancellation, graceful and
cancelling server ends) in-process, over stdio and as an HTTP SSE stream.
Every emitted message is schema-checked. No sleeps: Condition waits only.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import pytest

from mcp_sync.testing import HTTPServer, Server, ToolContext
from tests.testing.schema_util import LEGACY, META_SERVER_INFO, MODERN, check_notification, check_response, validate
from tests.testing.peers import WAIT, Conn, Proc
from tests.testing.raw_http import Client, SSEReader, modern_headers

SUB = "io.modelcontextprotocol/subscriptionId"
CONFIG = "test://config"


def make_server(**options: Any) -> Server:
    server = Server(name="changes", version="1.0.0", **options)

    @server.tool
    def first(args: dict[str, Any], ctx: ToolContext) -> str:
        return "first"

    server.set_resource_text(CONFIG, "v0", name="config", mime_type="text/plain")
    server.set_resource_text("test://other", "o0", name="other")
    return server


def noop(args: dict[str, Any], ctx: ToolContext) -> str:
    return "noop"


def methods(conn: Conn) -> list[str]:
    return [m["method"] for m in conn.notifications()]


def wait_count(conn: Conn, method: str, count: int) -> list[dict[str, Any]]:
    """Wait until `conn` got `count` notifications `method`; returns them."""
    with conn.cond:
        if not conn.cond.wait_for(lambda: len(conn.notifications(method)) >= count, WAIT):
            pytest.fail(f"timed out waiting for {count} {method}; got {conn.messages[-5:]}")
    return conn.notifications(method)


# --------------------------------------------------------------------------
# Initialize era, in-process


def test_legacy_capabilities_declare_notifications(conns: Any) -> None:
    conn = conns(make_server(), stateless=False)
    caps = conn.initialize()["capabilities"]
    assert caps["tools"] == {"listChanged": True} and caps["prompts"] == {"listChanged": True}
    assert caps["resources"] == {"subscribe": True, "listChanged": True}


def test_legacy_list_changed_on_every_change(conns: Any) -> None:
    server = make_server()
    conn = conns(server, stateless=False)
    silent = conns(server, stateless=False)  # not initialized: gets nothing
    conn.initialize()
    server.tool(name="second")(noop)
    server.remove_tool("second")
    server.prompt("hello")(lambda args: "hi")
    server.remove_prompt("hello")
    server.resource_template("test://items/{id}", "item")(lambda params: params["id"])
    server.remove_resource_template("test://items/{id}")
    server.set_resource_text("test://new", "fresh")  # a new resource: the list changed
    server.remove_resource("test://new")
    server.notify_changed("tools")
    expected = ["notifications/tools/list_changed"] * 2 + ["notifications/prompts/list_changed"] * 2 + \
        ["notifications/resources/list_changed"] * 4 + ["notifications/tools/list_changed"]
    wait_count(conn, "notifications/tools/list_changed", 3)
    assert methods(conn) == expected  # in order, related to no request
    for message in conn.notifications():
        check_notification(LEGACY[0], message)
        assert "params" not in message
    assert silent.messages == []
    with pytest.raises(KeyError):
        server.remove_tool("second")
    with pytest.raises(ValueError):
        server.notify_changed("nothing")


def test_legacy_related_none_in_process() -> None:
    server = make_server()
    got: list[tuple[dict[str, Any], Any]] = []
    cond = threading.Condition()

    def send(message: dict[str, Any], related: Any) -> None:
        with cond:
            got.append((message, related))
            cond.notify_all()

    session = server.open_session(send, related=True)
    try:
        session.receive({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        with cond:
            assert cond.wait_for(lambda: len(got) == 1, WAIT)
        server.notify_changed("prompts")
        with cond:
            assert cond.wait_for(lambda: len(got) == 2, WAIT)
        assert got[1] == ({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}, None)
        check_notification("2025-06-18", got[1][0])
    finally:
        session.close()
    server.notify_changed("prompts")  # a closed session is forgotten
    assert len(got) == 2


def test_legacy_resource_subscriptions_are_per_session(conns: Any) -> None:
    server = make_server()
    a, b = conns(server, stateless=False), conns(server, stateless=False)
    a.initialize()
    b.initialize("2025-06-18")
    assert a.result("resources/subscribe", {"uri": CONFIG}) == {}
    assert b.result("resources/subscribe", {"uri": "test://other"}) == {}
    server.set_resource_text(CONFIG, "v1")
    server.set_resource_text("test://other", "o1")  # b's sentinel: b's messages are in order
    updates = wait_count(a, "notifications/resources/updated", 1)
    assert updates[0]["params"] == {"uri": CONFIG}
    b_updates = wait_count(b, "notifications/resources/updated", 1)
    assert [m["params"]["uri"] for m in b_updates] == ["test://other"]  # nothing for CONFIG first
    assert a.result("resources/read", {"uri": CONFIG})["contents"] == [
        {"uri": CONFIG, "mimeType": "text/plain", "text": "v1"}]
    assert a.result("resources/unsubscribe", {"uri": CONFIG}) == {}
    assert a.result("resources/subscribe", {"uri": "test://other"}) == {}
    server.set_resource_text(CONFIG, "v2")
    server.notify_updated("test://other")
    updates = wait_count(a, "notifications/resources/updated", 2)
    assert [m["params"]["uri"] for m in updates] == [CONFIG, "test://other"]
    assert a.error("resources/subscribe", {"uri": 5})["code"] == -32602
    for conn in (a, b):
        for message in conn.notifications():
            check_notification(conn.revision, message)


def test_without_change_notifications(conns: Any) -> None:
    server = make_server(change_notifications=False)
    legacy = conns(server, stateless=False)
    caps = legacy.initialize()["capabilities"]
    assert caps["tools"] == {"listChanged": False}
    assert caps["resources"] == {"subscribe": False, "listChanged": False}
    assert legacy.error("resources/subscribe", {"uri": CONFIG})["code"] == -32601
    modern = conns(server)
    assert modern.result("server/discover")["capabilities"]["prompts"] == {"listChanged": False}
    assert modern.error("subscriptions/listen", {"notifications": {"toolsListChanged": True}})["code"] == -32601
    server.tool(name="later")(noop)
    server.set_resource_text(CONFIG, "changed")
    assert legacy.result("ping") == {}
    assert legacy.notifications() == [] and modern.notifications() == []


# --------------------------------------------------------------------------
# Stateless era: subscriptions/listen, in-process


def open_listen(conn: Conn, notifications: dict[str, Any], request_id: Any = None) -> tuple[Any, dict[str, Any]]:
    """Start a listen; wait for and check its acknowledgement."""
    rid = conn.start("subscriptions/listen", {"notifications": notifications}, request_id=request_id)
    ack = conn.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged"
                        and m["params"]["_meta"].get(SUB) == rid)
    check_notification(MODERN, ack)
    validate(MODERN, "SubscriptionsAcknowledgedNotification", ack)
    return rid, ack


def on_subscription(conn: Conn, rid: Any) -> list[dict[str, Any]]:
    return [m for m in conn.notifications() if m.get("params", {}).get("_meta", {}).get(SUB) == rid]


def test_listen_acknowledges_filters_and_ends_gracefully(conns: Any) -> None:
    server = make_server()
    conn = conns(server)
    rid, ack = open_listen(conn, {"toolsListChanged": True, "promptsListChanged": False,
                                  "resourceSubscriptions": [CONFIG, CONFIG], "somethingNew": True})
    assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
        "_meta": {SUB: rid}, "notifications": {"toolsListChanged": True, "resourceSubscriptions": [CONFIG]}}}
    assert server.listening() == 1
    server.prompt("p")(lambda args: "x")  # not asked for
    server.set_resource_text("test://other", "o1")  # not asked for
    server.tool(name="second")(noop)
    server.set_resource_text(CONFIG, "v1")
    with conn.cond:
        assert conn.cond.wait_for(lambda: len(on_subscription(conn, rid)) == 3, WAIT)
    ack_, changed, updated = on_subscription(conn, rid)
    assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                       "params": {"_meta": {SUB: rid}}}
    assert updated == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                       "params": {"_meta": {SUB: rid}, "uri": CONFIG}}
    assert methods(conn) == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed",
                             "notifications/resources/updated"]
    for message in conn.notifications():
        check_notification(MODERN, message)
    assert rid not in conn.by_id  # no response while the subscription lives
    server.notify_changed("tools")  # queued before the end: delivered before the final response
    assert server.end_subscriptions() == 1
    final = conn.response(rid)  # schema-checked as a SubscriptionsListenResult
    validate(MODERN, "SubscriptionsListenResultResponse", final)
    assert final["result"]["resultType"] == "complete" and final["result"]["_meta"][SUB] == rid
    assert set(final["result"]["_meta"]) == {SUB, META_SERVER_INFO}
    assert conn.index_of(final) == len(conn.messages) - 1
    assert methods(conn)[-1] == "notifications/tools/list_changed"
    assert server.listening() == 0 and server.end_subscriptions() == 0


def test_listen_cancelled_by_the_client(conns: Any) -> None:
    server = make_server()
    conn = conns(server)
    first, _ = open_listen(conn, {"toolsListChanged": True}, request_id="L1")
    second, _ = open_listen(conn, {"toolsListChanged": True, "resourcesListChanged": True}, request_id="L2")
    conn.cancel(first)
    # The cancellation is a notification: nothing answers it. The changes
    # below are made once the server has closed the first subscription, or
    # it could rightly notify it of them (the test raced there under load).
    deadline = time.monotonic() + WAIT
    while server.listening() != 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert server.listening() == 1
    server.tool(name="second")(noop)
    server.set_resource_text("test://brand-new", "x")
    with conn.cond:
        assert conn.cond.wait_for(lambda: len(on_subscription(conn, second)) == 3, WAIT)
    assert [m["method"] for m in on_subscription(conn, second)] == [
        "notifications/subscriptions/acknowledged", "notifications/tools/list_changed",
        "notifications/resources/list_changed"]
    assert [m["method"] for m in on_subscription(conn, first)] == ["notifications/subscriptions/acknowledged"]
    assert server.end_subscriptions() == 1  # only the second is still open
    conn.response(second)
    assert conn.responses_for(first) == []


def test_listen_torn_down_with_cancelled(conns: Any) -> None:
    server = make_server()
    conn = conns(server)
    rid, _ = open_listen(conn, {"promptsListChanged": True})
    assert server.end_subscriptions(graceful=False) == 1
    cancelled = conn.wait_for(lambda m: m.get("method") == "notifications/cancelled")
    assert cancelled["params"] == {"_meta": {SUB: rid}, "requestId": rid,
                                   "reason": "the server ended the subscription"}
    check_notification(MODERN, cancelled)
    validate(MODERN, "CancelledNotification", cancelled)
    assert conn.result("tools/list")["tools"]  # the session goes on
    assert conn.responses_for(rid) == []
    assert server.listening() == 0


@pytest.mark.parametrize("notifications", [None, [], {"toolsListChanged": "yes"},
                                           {"resourceSubscriptions": "test://x"},
                                           {"resourceSubscriptions": [1]}])
def test_listen_invalid_filter(conns: Any, notifications: Any) -> None:
    conn = conns(make_server())
    params = {} if notifications is None else {"notifications": notifications}
    assert conn.error("subscriptions/listen", params)["code"] == -32602


def test_listen_empty_filter_and_session_close(conns: Any) -> None:
    server = make_server()
    conn = conns(server)
    rid, ack = open_listen(conn, {})
    assert ack["params"]["notifications"] == {}
    server.notify_changed("tools")
    server.notify_updated(CONFIG)
    conn.close()  # closing the session cancels the listen: no response
    assert server.listening() == 0
    assert methods(conn) == ["notifications/subscriptions/acknowledged"] and conn.responses_for(rid) == []


# --------------------------------------------------------------------------
# stdio


def test_stdio_legacy_notifications_on_stdout(procs: Any) -> None:
    proc: Proc = procs(module="tests.testing.changing_server", stateless=False)
    proc.initialize()
    assert proc.result("resources/subscribe", {"uri": CONFIG}) == {}
    assert proc.call_tool("add_tool", {"name": "extra"})["content"][0]["text"] == "added"
    changed = proc.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed")
    assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert "extra" in [t["name"] for t in proc.result("tools/list")["tools"]]
    proc.call_tool("touch", {"text": "v1"})
    updated = proc.wait_for(lambda m: m.get("method") == "notifications/resources/updated")
    assert updated["params"] == {"uri": CONFIG}
    assert proc.result("resources/read", {"uri": CONFIG})["contents"][0]["text"] == "v1"
    assert proc.finish() == 0
    for message in proc.notifications():
        check_notification(proc.revision, message)


def test_stdio_listen_and_cancel(procs: Any) -> None:
    proc: Proc = procs(module="tests.testing.changing_server")
    rid = proc.start("subscriptions/listen", {"notifications": {"toolsListChanged": True,
                                                                "resourceSubscriptions": [CONFIG]}})
    proc.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    proc.call_tool("add_tool", {"name": "extra"})
    proc.call_tool("touch", {"text": "v1"})
    updated = proc.wait_for(lambda m: m.get("method") == "notifications/resources/updated")
    changed = proc.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed")
    assert updated["params"] == {"_meta": {SUB: rid}, "uri": CONFIG}
    assert changed["params"] == {"_meta": {SUB: rid}}
    proc.cancel(rid)
    proc.call_tool("touch", {"text": "v2"})  # after the cancel: not delivered
    assert proc.result("resources/read", {"uri": CONFIG})["contents"][0]["text"] == "v2"
    assert proc.finish() == 0
    assert len(proc.notifications("notifications/resources/updated")) == 1
    assert proc.responses_for(rid) == []
    for message in proc.notifications():
        check_notification(MODERN, message)


# --------------------------------------------------------------------------
# HTTP


def test_http_legacy_notifications_on_the_get_stream(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = make_server()
    http_server = serve(server)
    client: Client = connect(http_server)
    client.initialize()
    assert client.legacy("resources/subscribe", {"uri": CONFIG}).result == {}
    stream: Client = connect(http_server)
    stream.session_id, stream.version = client.session_id, client.version
    response = stream.open_get()
    assert response.status == 200
    reader = SSEReader(response)
    server.tool(name="second")(noop)
    server.set_resource_text(CONFIG, "v1")
    events = [reader.next(), reader.next()]
    messages = [json.loads(e.data or "") for e in events if e is not None]
    assert messages == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
                        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": CONFIG}}]
    for message in messages:
        check_notification(LEGACY[0], message)


def post_listen(client: Client, notifications: dict[str, Any], request_id: Any = "sub-1") -> SSEReader:
    message = client.message("subscriptions/listen", {"notifications": notifications}, request_id=request_id)
    response = client.open("POST", json.dumps(message), modern_headers(message))
    assert response.status == 200 and response.headers.get("Content-Type") == "text/event-stream"
    return SSEReader(response)


def next_message(reader: SSEReader) -> dict[str, Any]:
    event = reader.next()
    assert event is not None and event.data
    message: dict[str, Any] = json.loads(event.data)
    return message


@pytest.mark.parametrize("response_mode", ["auto", "json", "sse"])
def test_http_listen_stream_ends_gracefully(serve: Callable[..., HTTPServer], connect: Any,
                                            response_mode: str) -> None:
    server = make_server()
    http_server = serve(server, response_mode=response_mode)
    reader = post_listen(connect(http_server), {"toolsListChanged": True, "resourceSubscriptions": [CONFIG]})
    ack = next_message(reader)
    assert ack["method"] == "notifications/subscriptions/acknowledged" and ack["params"]["_meta"] == {SUB: "sub-1"}
    server.tool(name="second")(noop)
    changed = next_message(reader)
    server.set_resource_text(CONFIG, "v1")
    updated = next_message(reader)
    assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                       "params": {"_meta": {SUB: "sub-1"}}}
    assert updated["params"] == {"_meta": {SUB: "sub-1"}, "uri": CONFIG}
    for message in (ack, changed, updated):
        check_notification(MODERN, message)
    assert server.end_subscriptions() == 1
    final = next_message(reader)
    check_response(MODERN, "subscriptions/listen", final)
    assert final["id"] == "sub-1" and final["result"]["_meta"][SUB] == "sub-1"
    assert reader.next() is None  # the stream ends after the completion result


def test_http_listen_closed_by_the_client(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = make_server()
    http_server = serve(server)
    client: Client = connect(http_server)
    reader = post_listen(client, {"promptsListChanged": True})
    assert next_message(reader)["method"] == "notifications/subscriptions/acknowledged"
    assert server.listening() == 1
    reader.response.close()
    client.close()  # closing the stream cancels the subscription
    assert http_server.wait_for(lambda: http_server.connections == 0, WAIT)
    assert server.listening() == 0


def test_http_close_ends_listen_gracefully(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = make_server()
    http_server = serve(server)
    reader = post_listen(connect(http_server), {"toolsListChanged": True}, request_id=7)
    assert next_message(reader)["method"] == "notifications/subscriptions/acknowledged"
    http_server.close()
    final = next_message(reader)
    check_response(MODERN, "subscriptions/listen", final)
    assert final["id"] == 7 and final["result"] == {
        "resultType": "complete", "_meta": {SUB: 7, META_SERVER_INFO: {"name": "changes", "version": "1.0.0"}}}
    assert reader.next() is None


def test_http_listen_torn_down_with_cancelled(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = make_server()
    http_server = serve(server)
    reader = post_listen(connect(http_server), {"toolsListChanged": True})
    next_message(reader)
    assert server.end_subscriptions(graceful=False) == 1
    cancelled = next_message(reader)
    assert cancelled["method"] == "notifications/cancelled" and cancelled["params"]["requestId"] == "sub-1"
    check_notification(MODERN, cancelled)
    assert reader.next() is None


def test_http_listen_without_capability(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve(make_server(change_notifications=False))
    reply = connect(http_server).modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    assert reply.status == 404 and reply.error["code"] == -32601


# --------------------------------------------------------------------------
# Caching hints and the served counter


def test_cache_hints_defaults_and_overrides(conns: Any) -> None:
    server = make_server(ttl_ms=5000, cache_scope="private")
    conn = conns(server)
    listed = conn.result("tools/list")
    assert (listed["ttlMs"], listed["cacheScope"]) == (5000, "private")
    server.set_cache_hint("tools/list", ttl_ms=0, cache_scope="public")
    server.set_cache_hint("resources/read", ttl_ms=42)
    server.set_cache_hint("resources/read", uri=CONFIG, cache_scope="public")
    listed = conn.result("tools/list")
    assert (listed["ttlMs"], listed["cacheScope"]) == (0, "public")
    read = conn.result("resources/read", {"uri": CONFIG})
    assert (read["ttlMs"], read["cacheScope"]) == (42, "public")  # per-URI scope, method-wide ttl
    other = conn.result("resources/read", {"uri": "test://other"})
    assert (other["ttlMs"], other["cacheScope"]) == (42, "private")
    server.set_cache_hint("tools/list")  # removed
    assert conn.result("tools/list")["ttlMs"] == 5000
    server.clear_cache_hints()
    assert conn.result("resources/read", {"uri": CONFIG})["cacheScope"] == "private"
    with pytest.raises(ValueError):
        server.set_cache_hint("tools/call", ttl_ms=1)
    with pytest.raises(ValueError):
        server.set_cache_hint("tools/list", uri=CONFIG, ttl_ms=1)
    with pytest.raises(ValueError):
        server.set_cache_hint("tools/list", ttl_ms=-1)
    with pytest.raises(ValueError):
        Server(cache_scope="shared")


def test_served_counts_requests(conns: Any, serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = make_server()
    conn = conns(server)
    assert server.served("tools/list") == 0
    for _ in range(3):
        conn.result("tools/list")
    conn.error("no/such")
    assert server.served("tools/list") == 3 and server.served("no/such") == 1 and server.served() == 4
    client: Client = connect(serve(server))
    client.modern("tools/list")
    assert server.served("tools/list") == 4
    server.reset_served()
    assert server.served() == 0

    counts: list[int] = []
    barrier = threading.Barrier(4)

    def hammer() -> None:
        barrier.wait()
        for _ in range(50):
            server._count("x")
        counts.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert server.served("x") == 200
