"""Tests of `mcp_sync.testing.HTTPServer`: the test server over Streamable HTTP.

Driven with the standard library (`http.client`, raw sockets) so they do not
depend on mcp_sync's own client; one group cross-checks with the official
`mcp` SDK client. Every JSON-RPC message the server emits is validated against
the JSON schema of the revision in use (`tests/schemas/<rev>/schema.json`).
Synchronisation is by waiting on conditions with timeouts, never by sleeping.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable

import pytest

from mcp_sync.testing import Server, ToolContext, demo_server
from mcp_sync.testing import HTTPServer
from mcp_sync.testing._validation import decode_header_value, mcp_param_annotations
from tests.helpers import GENEROUS
from tests.servers.canned import Canned
from tests.testing.peers import WAIT, modern_meta
from tests.testing.raw_http import (
    ACCEPT_BOTH,
    Client,
    SSEReader,
    check_error_body,
    check_messages,
    encode_header,
    modern_headers,
    split_lines,
    sse_events,
    wait_connections,
)
from tests.testing.schema_util import (
    LEGACY,
    META_CAPS,
    META_LOG,
    META_SERVER_INFO,
    META_VERSION,
    MODERN,
    REPO,
    check_notification,
    check_response,
    validate,
)

def spy_tool(server: Server, name: str) -> dict[str, Any]:
    """Wrap a registered tool; the returned dict gets `started` (an Event),
    `ctx`, `result` and `done` (an Event) as the tool runs."""
    record: dict[str, Any] = {"started": threading.Event(), "done": threading.Event()}
    tool = server._tools[name]
    original = tool.fn

    def spy(args: dict[str, Any], ctx: ToolContext) -> Any:
        record["ctx"] = ctx
        record["started"].set()
        try:
            record["result"] = original(args, ctx)
            return record["result"]
        finally:
            record["done"].set()

    tool.fn = spy
    return record


# --------------------------------------------------------------------------
# Stateless era: answers


def test_json_response(client: Client) -> None:
    reply = client.call("echo", {"text": "hi \u4e16\u754c"})
    assert reply.status == 200 and reply.content_type == "application/json"
    assert reply.result["content"] == [{"type": "text", "text": "hi \u4e16\u754c"}]
    assert reply.result["_meta"][META_SERVER_INFO]["name"] == "mcp-sync-demo"
    assert reply.headers.get("Mcp-Session-Id") is None
    assert client.server.sessions == 0


@pytest.mark.parametrize(("method", "params", "key"), [
    ("server/discover", None, "supportedVersions"),
    ("tools/list", None, "tools"),
    ("resources/list", None, "resources"),
    ("resources/templates/list", None, "resourceTemplates"),
    ("resources/read", {"uri": "demo://items/42"}, "contents"),
    ("prompts/list", None, "prompts"),
    ("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}, "messages"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"},
                             "argument": {"name": "style", "value": "f"}}, "completion"),
])
def test_every_stateless_method(client: Client, method: str, params: dict[str, Any] | None, key: str) -> None:
    reply = client.modern(method, params)
    assert reply.status == 200 and key in reply.result


def test_progress_notifications_come_first_on_an_sse_stream(client: Client) -> None:
    reply = client.call("countdown", {"steps": 3, "delay": 0}, meta={"progressToken": "tok"})
    assert reply.status == 200 and reply.content_type == "text/event-stream"
    assert [m.get("method") for m in reply.messages] == ["notifications/progress"] * 3 + [None]
    assert [m["params"]["progress"] for m in reply.messages[:3]] == [1, 2, 3]
    assert reply.result["content"][0]["text"] == "liftoff"
    assert all(e.id is None and e.retry is None for e in reply.events)  # stateless streams are not resumable


def test_log_notifications_on_the_post_stream(client: Client) -> None:
    reply = client.call("log", {"level": "warning", "message": "careful"}, meta={META_LOG: "info"})
    assert reply.content_type == "text/event-stream"
    assert reply.messages[0]["params"] == {"level": "warning", "logger": "demo", "data": "careful"}
    assert reply.result["content"][0]["text"] == "logged"
    quiet = client.call("log", {"level": "debug", "message": "hidden"}, meta={META_LOG: "info"})
    assert quiet.content_type == "application/json" and len(quiet.messages) == 1


def test_response_mode_json_drops_notifications(serve: Callable[..., HTTPServer], connect: Any) -> None:
    client = connect(serve(response_mode="json"))
    reply = client.call("countdown", {"steps": 3, "delay": 0}, meta={"progressToken": 1})
    assert reply.content_type == "application/json"
    assert reply.result["content"][0]["text"] == "liftoff"


def test_response_mode_sse_always_streams(serve: Callable[..., HTTPServer], connect: Any) -> None:
    client = connect(serve(response_mode="sse"))
    reply = client.call("echo", {"text": "x"})
    assert reply.content_type == "text/event-stream" and len(reply.messages) == 1
    error = client.modern("nope/nothing")
    assert error.status == 200 and error.error["code"] == -32601  # the status is sent before the answer exists


def test_notification_post_is_accepted(client: Client) -> None:
    for method in ("notifications/cancelled", "notifications/initialized", "notifications/whatever"):
        reply = client.exchange("POST", json.dumps({"jsonrpc": "2.0", "method": method, "params": {"requestId": 1}}),
                                {"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
        assert reply.status == 202 and reply.body == b""


def test_error_statuses(client: Client) -> None:
    unknown_method = client.modern("no/such/method")
    assert unknown_method.status == 404 and unknown_method.error["code"] == -32601
    unknown_tool = client.call("nope", {})
    assert unknown_tool.status == 200 and unknown_tool.error["code"] == -32602
    bad_args = client.call("add", {"a": "one", "b": 2})
    assert bad_args.status == 200 and bad_args.error["code"] == -32602
    tool_error = client.call("fail", {"message": "broken"})
    assert tool_error.status == 200 and tool_error.result["isError"] is True
    missing = client.modern("resources/read", {"uri": "demo://nothing"})
    assert missing.status == 200 and missing.error["code"] == -32602
    assert client.modern("initialize", {"protocolVersion": LEGACY[0]}).status == 404  # not a stateless method


def test_error_codes_a_tool_raises_map_to_statuses(serve: Callable[..., HTTPServer], connect: Any) -> None:
    from mcp_sync.testing import RpcError

    server = Server()

    @server.tool(input_schema={"type": "object", "properties": {"code": {"type": "integer"}}})
    def raise_code(args: dict[str, Any], ctx: ToolContext) -> str:
        data = {"requiredCapabilities": {"elicitation": {}}} if args["code"] == -32021 else None
        raise RpcError(args["code"], "raised on purpose", data)

    client = connect(serve(server))
    for code, status in ((-32021, 400), (-32601, 404), (-32603, 200), (-32099, 200), (-1, 200)):
        reply = client.call("raise_code", {"code": code})
        assert (reply.status, reply.error["code"]) == (status, code)
    validate(MODERN, "MissingRequiredClientCapabilityError", client.call("raise_code", {"code": -32021}).last)


# --------------------------------------------------------------------------
# Stateless era: validation


def _request(client: Client, method: str = "tools/call", params: dict[str, Any] | None = None) -> dict[str, Any]:
    return client.message(method, params if params is not None else {"name": "echo", "arguments": {"text": "x"}})


@pytest.mark.parametrize(("case", "status", "code"), [
    ("accept missing", 400, -32600),
    ("accept json only", 400, -32600),
    ("accept sse only", 400, -32600),
    ("content-type text", 415, -32600),
    ("not json", 400, -32700),
    ("batch", 400, -32600),
    ("posted response", 400, -32600),
    ("null id", 400, -32600),
    ("boolean id", 400, -32600),
    ("no jsonrpc", 400, -32600),
    ("no _meta", 400, -32602),
    ("_meta without capabilities", 400, -32602),
    ("_meta version not a string", 400, -32020),
    ("version header missing", 400, -32020),
    ("version header differs", 400, -32020),
    ("version header twice", 400, -32020),
    ("method header missing", 400, -32020),
    ("method header differs", 400, -32020),
    ("method header wrong case", 400, -32020),
    ("name header missing", 400, -32020),
    ("name header differs", 400, -32020),
    ("name header twice", 400, -32020),
    ("name header non-ascii", 400, -32020),
    ("name header bad sentinel", 400, -32020),
    ("name header sentinel not canonical", 400, -32020),
    ("prompt name differs", 400, -32020),
    ("resource uri differs", 400, -32020),
    ("unsupported version", 400, -32022),
])
def test_stateless_validation(client: Client, case: str, status: int, code: int) -> None:
    message = _request(client)
    headers: dict[str, Any] = modern_headers(message)
    body: str | None = None
    if case.startswith("accept"):
        headers["Accept"] = {"accept missing": None, "accept json only": "application/json",
                             "accept sse only": "text/event-stream"}[case]
    elif case == "content-type text":
        headers["Content-Type"] = "text/plain"
    elif case == "not json":
        body = "{not json"
    elif case == "batch":
        body = json.dumps([message])
    elif case == "posted response":
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}})
    elif case == "null id":
        message["id"] = None
    elif case == "boolean id":
        message["id"] = True
    elif case == "no jsonrpc":
        del message["jsonrpc"]
    elif case == "no _meta":
        del message["params"]["_meta"]
    elif case == "_meta without capabilities":
        del message["params"]["_meta"][META_CAPS]
    elif case == "_meta version not a string":
        message["params"]["_meta"][META_VERSION] = 20260728
    elif case == "version header missing":
        del headers["MCP-Protocol-Version"]
    elif case == "version header differs":
        headers["MCP-Protocol-Version"] = LEGACY[0]
    elif case == "version header twice":
        headers["MCP-Protocol-Version"] = [MODERN, MODERN]
    elif case == "method header missing":
        del headers["Mcp-Method"]
    elif case == "method header differs":
        headers["Mcp-Method"] = "tools/list"
    elif case == "method header wrong case":
        headers["Mcp-Method"] = "Tools/Call"
    elif case == "name header missing":
        del headers["Mcp-Name"]
    elif case == "name header differs":
        headers["Mcp-Name"] = "add"
    elif case == "name header twice":
        headers["Mcp-Name"] = ["echo", "echo"]
    elif case == "name header non-ascii":
        headers["Mcp-Name"] = "\u00e9cho".encode("latin-1")
    elif case == "name header bad sentinel":
        headers["Mcp-Name"] = "=?base64?not base64!?="
    elif case == "name header sentinel not canonical":
        headers["Mcp-Name"] = "=?base64?ZWNobx==?="  # "echo" with non-zero padding bits
    elif case == "prompt name differs":
        message = _request(client, "prompts/get", {"name": "greet", "arguments": {"name": "x"}})
        headers = modern_headers(message)
        headers["Mcp-Name"] = "other"
    elif case == "resource uri differs":
        message = _request(client, "resources/read", {"uri": "demo://readme"})
        headers = modern_headers(message)
        headers["Mcp-Name"] = "demo://logo.png"
    elif case == "unsupported version":
        message["params"]["_meta"][META_VERSION] = "2099-01-01"
        headers["MCP-Protocol-Version"] = "2099-01-01"
    else:
        raise AssertionError(case)
    reply = client.exchange("POST", body if body is not None else json.dumps(message), headers)
    assert reply.status == status, reply.body
    assert reply.content_type == "application/json"
    error_message = reply.json
    check_error_body(MODERN, error_message)
    assert error_message["error"]["code"] == code
    # The request's id is echoed whenever the server got far enough to read a usable one.
    anonymous = case.startswith(("accept", "content-type")) or case in (
        "not json", "batch", "posted response", "null id", "boolean id")
    assert error_message.get("id") == (None if anonymous else message["id"])
    if code == -32022:
        assert error_message["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
    assert client.server.requests[-1].method == "POST"


def test_mcp_name_base64_sentinel(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = demo_server()
    for name in ("gr\u00fc\u00dfe \u4e16\u754c", "=?base64?literal?=", " padded "):
        server.tool(name, input_schema={"type": "object"})(lambda args, ctx: "ok")
    client = connect(serve(server))
    for name in ("gr\u00fc\u00dfe \u4e16\u754c", "=?base64?literal?=", " padded "):
        assert encode_header(name).startswith("=?base64?")
        assert client.call(name, {}).result["content"][0]["text"] == "ok"
    # A plain value that looks like the sentinel is decoded (and fails), so clients must encode it.
    message = client.message("tools/call", {"name": "=?base64?literal?=", "arguments": {}})
    headers = modern_headers(message)
    headers["Mcp-Name"] = "=?base64?literal?="
    assert client.exchange("POST", json.dumps(message), headers).status == 400
    # A resource URI with spaces travels encoded too.
    reply = client.modern("resources/read", {"uri": "demo://items/a b "})
    assert reply.result["contents"][0]["text"] == "item a b "


def test_decode_header_value() -> None:
    assert decode_header_value("plain") == "plain"
    assert decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=") == "Hello, \u4e16\u754c"
    assert decode_header_value("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=") == "=?base64?literal?="
    assert decode_header_value("=?base64?IHBhZGRlZCA=?=") == " padded "
    assert decode_header_value("=?base64?bGluZTEKbGluZTI=?=") == "line1\nline2"
    assert decode_header_value("=?base64?/w==?=") is None  # not UTF-8
    assert decode_header_value("=?BASE64?YQ==?=") == "=?BASE64?YQ==?="  # markers are case-sensitive


X_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "limit": {"type": "integer", "x-mcp-header": "Limit"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        "query": {"type": "string"},
        "opts": {"type": "object", "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}}},
        "rows": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string", "x-mcp-header": "Row"}}}},
    },
}


def test_mcp_param_annotations() -> None:
    assert mcp_param_annotations(X_SCHEMA) == [
        (("dry",), "Dry-Run"), (("limit",), "Limit"), (("opts", "tenant"), "Tenant"), (("region",), "Region")]
    assert mcp_param_annotations({"type": "object", "x-mcp-header": "Root"}) == []


@pytest.mark.parametrize(("arguments", "headers", "status"), [
    ({"region": "us-west1", "query": "q"}, {"Mcp-Param-Region": "us-west1"}, 200),
    ({"region": "us-west1"}, {"mcp-param-region": "us-west1"}, 200),  # header names are case-insensitive
    ({"region": "us-west1"}, {"MCP-PARAM-REGION": "us-west1", "Mcp-Param-Unknown": "x"}, 200),
    ({"region": "Hello, \u4e16\u754c"}, {"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="}, 200),
    ({"region": " padded "}, {"Mcp-Param-Region": "=?base64?IHBhZGRlZCA=?="}, 200),
    ({"region": " padded "}, {"Mcp-Param-Region": " padded "}, 400),  # HTTP trims it: must be encoded
    ({"region": "line1\nline2"}, {"Mcp-Param-Region": "=?base64?bGluZTEKbGluZTI=?="}, 200),
    ({"region": "=?base64?literal?="}, {"Mcp-Param-Region": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="}, 200),
    ({"region": "us-west1"}, {}, 400),  # value present, header missing
    ({"region": "us-west1"}, {"Mcp-Param-Region": "us-east1"}, 400),
    ({"region": "us-west1"}, {"Mcp-Param-Region": ["us-west1", "us-west1"]}, 400),
    ({"region": "us-west1"}, {"Mcp-Param-Region": "=?base64?%%%?="}, 400),
    ({"region": None}, {}, 200),  # null: no header expected
    ({"region": None}, {"Mcp-Param-Region": "null"}, 400),
    ({}, {"Mcp-Param-Region": "us-west1"}, 400),  # absent: the header must be too
    ({"limit": 42}, {"Mcp-Param-Limit": "42"}, 200),
    ({"limit": 42}, {"Mcp-Param-Limit": "42.0"}, 200),  # integers compare numerically
    ({"limit": 42.0}, {"Mcp-Param-Limit": "42"}, 200),
    ({"limit": -7}, {"Mcp-Param-Limit": "-7"}, 200),
    ({"limit": 42}, {"Mcp-Param-Limit": "43"}, 400),
    ({"limit": 42}, {"Mcp-Param-Limit": "4.2e1"}, 400),
    ({"limit": 42}, {"Mcp-Param-Limit": "forty-two"}, 400),
    ({"dry": True}, {"Mcp-Param-Dry-Run": "true"}, 200),
    ({"dry": False}, {"Mcp-Param-Dry-Run": "false"}, 200),
    ({"dry": True}, {"Mcp-Param-Dry-Run": "True"}, 400),
    ({"dry": False}, {"Mcp-Param-Dry-Run": "0"}, 400),
    ({"opts": {"tenant": "acme"}}, {"Mcp-Param-Tenant": "acme"}, 200),
    ({"opts": {"tenant": "acme"}}, {}, 400),
    ({"opts": {}}, {}, 200),
    ({"opts": "not an object"}, {}, 200),
    ({"rows": [{"id": "r1"}]}, {}, 200),  # under `items`: not a mirrored parameter
    ({"region": "eu", "limit": 5, "dry": False, "opts": {"tenant": "t"}},
     {"Mcp-Param-Region": "eu", "Mcp-Param-Limit": "5", "Mcp-Param-Dry-Run": "false", "Mcp-Param-Tenant": "t"}, 200),
])
def test_x_mcp_header_validation(serve: Callable[..., HTTPServer], connect: Any, arguments: dict[str, Any],
                                 headers: dict[str, Any], status: int) -> None:
    server = Server()
    server.tool("sql", input_schema=X_SCHEMA)(lambda args, ctx: "ran")
    client = connect(serve(server))
    reply = client.call("sql", arguments, headers=headers)
    assert reply.status == status, reply.body
    if status == 200:  # past header validation (a null or mistyped argument then fails the tool's own check)
        assert reply.last.get("result", {}).get("content") == [{"type": "text", "text": "ran"}] \
            or reply.error["code"] == -32602
    else:
        assert reply.error["code"] == -32020 and reply.error["message"].startswith("Header mismatch")
        assert reply.last["id"] == json.loads(client.server.requests[-1].body)["id"]


def test_x_mcp_header_checks_only_the_called_tool(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = Server()
    server.tool("sql", input_schema=X_SCHEMA)(lambda args, ctx: "ran")
    client = connect(serve(server))
    assert client.call("missing-tool", {"region": "x"}).error["code"] == -32602  # unknown tool: the usual error
    assert client.modern("tools/list").status == 200


# --------------------------------------------------------------------------
# Stateless era: cancellation by disconnecting


@pytest.mark.parametrize("mode", ["auto", "sse"])
def test_disconnect_cancels_a_stateless_request(serve: Callable[..., HTTPServer], connect: Any, mode: str) -> None:
    server = demo_server()
    spy = spy_tool(server, "sleep")
    http_server = serve(server, response_mode=mode)
    client = connect(http_server)
    message = client.message("tools/call", {"name": "sleep", "arguments": {"seconds": 600}})
    client.send("POST", json.dumps(message), modern_headers(message))
    assert spy["started"].wait(WAIT)
    if mode == "sse":
        response = client.conn.getresponse()
        assert response.status == 200 and response.headers.get("Content-Type") == "text/event-stream"
    started = time.monotonic()
    client.close()
    assert spy["done"].wait(WAIT), "closing the connection must cancel the request"
    assert spy["result"] == "cancelled" and spy["ctx"].cancelled.is_set()
    assert time.monotonic() - started < WAIT
    wait_connections(http_server, 0)


def test_other_requests_continue_after_a_disconnect(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = demo_server()
    spy = spy_tool(server, "sleep")
    http_server = serve(server)
    quitter, stayer = connect(http_server), connect(http_server)
    message = quitter.message("tools/call", {"name": "sleep", "arguments": {"seconds": 600}})
    quitter.send("POST", json.dumps(message), modern_headers(message))
    assert spy["started"].wait(WAIT)
    quitter.close()
    assert spy["done"].wait(WAIT)
    assert stayer.call("echo", {"text": "still here"}).result["content"][0]["text"] == "still here"


# --------------------------------------------------------------------------
# Legacy era: sessions


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_session(serve: Callable[..., HTTPServer], connect: Any, version: str) -> None:
    http_server = serve()
    client = connect(http_server)
    init = client.initialize(version)
    assert init.result["protocolVersion"] == version and init.content_type == "application/json"
    assert http_server.sessions == 1
    echo = client.legacy("tools/call", {"name": "echo", "arguments": {"text": "old"}})
    assert echo.result == {"content": [{"type": "text", "text": "old"}]}
    assert echo.headers.get("Mcp-Session-Id") == client.session_id
    assert client.legacy("ping").result == {}
    assert "tools" in client.legacy("tools/list").result
    unknown = client.legacy("no/such/method")
    assert unknown.status == 200 and unknown.error["code"] == -32601
    assert client.legacy("resources/read", {"uri": "demo://none"}).error["code"] == -32002
    second = connect(http_server)
    second.initialize()
    assert second.session_id != client.session_id and http_server.sessions == 2


def test_legacy_sse_mode(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve(response_mode="sse")
    client = connect(http_server)
    init = client.initialize()
    assert init.content_type == "text/event-stream" and init.headers.get("Mcp-Session-Id") == client.session_id
    assert client.legacy("ping").content_type == "text/event-stream"
    failed = client.exchange("POST", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
    assert failed.status == 200 and failed.error["code"] == -32602  # a stream's status is sent before its answer
    assert http_server.sessions == 1  # the failed one is gone again


def test_delete_ends_requests_in_flight(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = demo_server()
    spy = spy_tool(server, "sleep")
    http_server = serve(server)
    client, other = connect(http_server), connect(http_server)
    client.initialize()
    other.session_id, other.version = client.session_id, client.version
    client.send("POST", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                    "params": {"name": "sleep", "arguments": {"seconds": 600}}}),
                client.legacy_headers())
    assert spy["started"].wait(WAIT)
    assert other.exchange("DELETE", None, other.legacy_headers()).status == 200
    pending = client.conn.getresponse()
    body = json.loads(pending.read())
    assert pending.status == 404 and body["error"]["code"] == -32001
    check_error_body(LEGACY[0], body)
    assert spy["done"].wait(WAIT) and spy["result"] == "cancelled"


def test_legacy_negotiates_a_supported_version(client: Client) -> None:
    assert client.initialize("2024-11-05").result["protocolVersion"] == LEGACY[0]


def test_legacy_session_header_rules(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    client.initialize()
    ping = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping"})
    cases: list[tuple[dict[str, Any], int, int, str]] = [
        # Without a session id a dual-era server serves it statelessly: no _meta.
        ({"Mcp-Session-Id": None}, 400, -32602, MODERN),
        ({"Mcp-Session-Id": "0" * 32}, 404, -32001, LEGACY[0]),
        ({"MCP-Protocol-Version": None}, 400, -32000, LEGACY[0]),
        ({"MCP-Protocol-Version": "2025-06-18"}, 400, -32000, LEGACY[0]),
        ({"MCP-Protocol-Version": "1999-01-01"}, 400, -32000, LEGACY[0]),
    ]
    for override, status, code, revision in cases:
        reply = client.exchange("POST", ping, {**client.legacy_headers(), **override})
        assert reply.status == status, (override, reply.body)
        assert reply.json["error"]["code"] == code
        check_error_body(revision, reply.json)
    assert client.legacy("ping").status == 200


def test_legacy_only_server_requires_a_session(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve(demo_server(versions=["2025-11-25"]))
    client = connect(http_server)
    # A modern client probing a legacy-only server: 400 with no recognisable modern error.
    reply = client.modern("server/discover")
    assert reply.status == 400
    assert reply.json["error"]["code"] == -32000 and "session" in reply.json["error"]["message"].lower()
    assert "id" not in reply.json
    check_error_body(LEGACY[0], reply.json)
    assert client.exchange("POST", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})).status == 400
    assert client.exchange("GET", None, {"Accept": "text/event-stream"}).status == 400
    client.initialize()
    assert client.legacy("tools/call", {"name": "echo", "arguments": {"text": "x"}}).status == 200


def test_stateless_only_server_rejects_initialize(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve(demo_server(versions=[MODERN]))
    client = connect(http_server)
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": LEGACY[0], "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
    reply = client.exchange("POST", json.dumps(message))
    assert reply.status == 400 and reply.headers.get("Mcp-Session-Id") is None
    assert reply.json["error"]["code"] == -32602 and MODERN in reply.json["error"]["message"]
    assert reply.json["error"]["data"]["supported"] == [MODERN]
    check_error_body(MODERN, reply.json)
    assert http_server.sessions == 0
    for method in ("GET", "DELETE"):
        refused = client.exchange(method, None, {"Accept": "text/event-stream", "Mcp-Session-Id": "abc"})
        assert refused.status == 405 and refused.headers.get("Allow") == "POST"
    # A session id on a stateless request is ignored and never echoed.
    echo = client.call("echo", {"text": "x"}, headers={"Mcp-Session-Id": "stale"})
    assert echo.status == 200 and echo.headers.get("Mcp-Session-Id") is None


def test_dual_era_server_ignores_a_session_id_on_stateless_requests(client: Client) -> None:
    client.initialize()
    reply = client.call("echo", {"text": "modern"}, headers={"Mcp-Session-Id": client.session_id})
    assert reply.result["resultType"] == "complete"
    assert client.call("echo", {"text": "x"}, headers={"Mcp-Session-Id": "unknown"}).status == 200


def test_failed_initialize_creates_no_session(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    reply = client.exchange("POST", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
    assert reply.status == 400 and reply.json["error"]["code"] == -32602
    assert reply.headers.get("Mcp-Session-Id") is None and http_server.sessions == 0
    check_error_body(LEGACY[0], reply.json)


def test_expire_sessions(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    first, second = connect(http_server), connect(http_server)
    first.initialize()
    second.initialize()
    assert http_server.sessions == 2
    http_server.expire_sessions()
    assert http_server.sessions == 0
    for client in (first, second):
        reply = client.legacy("ping")
        assert reply.status == 404 and reply.error["code"] == -32001
        assert client.legacy_notify("notifications/initialized").status == 404
        assert client.open_get().status == 404
        client.conn.close()
    first.session_id = first.version = None
    first.initialize()
    assert first.legacy("ping").status == 200 and http_server.sessions == 1


def test_delete_ends_the_session(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    client.initialize()
    assert client.exchange("DELETE", None, {"MCP-Protocol-Version": client.version}).status == 400  # no session id
    reply = client.exchange("DELETE", None, client.legacy_headers())
    assert reply.status == 200 and reply.body == b"" and http_server.sessions == 0
    assert client.exchange("DELETE", None, client.legacy_headers()).status == 404
    assert client.legacy("ping").status == 404


def test_legacy_posts_of_notifications_and_responses(client: Client) -> None:
    client.initialize()
    assert client.legacy_notify("notifications/roots/list_changed").status == 202
    response = json.dumps({"jsonrpc": "2.0", "id": "s1", "result": {}})
    assert client.exchange("POST", response, client.legacy_headers()).status == 202
    error = json.dumps({"jsonrpc": "2.0", "id": "s2", "error": {"code": -1, "message": "no"}})
    assert client.exchange("POST", error, client.legacy_headers()).status == 202


def test_legacy_progress_and_logs_on_the_post_stream(client: Client) -> None:
    client.initialize()
    assert client.legacy("logging/setLevel", {"level": "info"}).result == {}
    logged = client.legacy("tools/call", {"name": "log", "arguments": {"level": "error", "message": "bad"}})
    assert logged.content_type == "text/event-stream"
    assert [m.get("method") for m in logged.messages] == ["notifications/message", None]
    counted = client.legacy("tools/call", {"name": "countdown", "arguments": {"steps": 2, "delay": 0},
                                           "_meta": {"progressToken": 5}})
    assert [m["params"]["progress"] for m in counted.messages[:-1]] == [1, 2]
    assert counted.result["content"][0]["text"] == "liftoff"


def test_legacy_cancellation(serve: Callable[..., HTTPServer], connect: Any) -> None:
    server = demo_server()
    spy = spy_tool(server, "sleep")
    http_server = serve(server)
    client = connect(http_server)
    client.initialize()
    other = connect(http_server)
    other.session_id, other.version = client.session_id, client.version
    message = {"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
               "params": {"name": "sleep", "arguments": {"seconds": 600}}}
    client.send("POST", json.dumps(message), client.legacy_headers())
    assert spy["started"].wait(WAIT)
    duplicate = other.legacy("tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id="slow")
    assert duplicate.status == 400 and duplicate.error["code"] == -32600
    assert other.legacy_notify("notifications/cancelled", {"requestId": "slow", "reason": "user"}).status == 202
    assert spy["done"].wait(WAIT) and spy["result"] == "cancelled"
    # The cancelled request's stream ends without a response.
    response = client.conn.getresponse()
    assert response.status == 200 and response.headers.get("Content-Type") == "text/event-stream"
    assert response.read() == b""
    assert client.legacy("ping").status == 200  # and the connection is reusable


def test_legacy_disconnect_does_not_cancel(serve: Callable[..., HTTPServer], connect: Any) -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    cancelled: list[bool] = []
    server = Server()

    @server.tool(input_schema={"type": "object"})
    def hold(args: dict[str, Any], ctx: ToolContext) -> str:
        started.set()
        release.wait(WAIT)
        cancelled.append(ctx.cancelled.is_set())
        finished.set()
        return "held"

    http_server = serve(server)
    client = connect(http_server)
    client.initialize()
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hold"}}
    client.send("POST", json.dumps(message), client.legacy_headers())
    assert started.wait(WAIT)
    client.close()
    wait_connections(http_server, 0)  # the server noticed the disconnect ...
    release.set()
    assert finished.wait(WAIT)
    assert cancelled == [False]  # ... and did not cancel the request
    assert http_server.sessions == 1


# --------------------------------------------------------------------------
# Legacy era: the GET stream


def test_get_stream_carries_unrelated_messages(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    client.initialize()
    assert http_server.notify("notifications/tools/list_changed") == 0  # no GET stream yet: dropped
    stream = connect(http_server)
    stream.session_id, stream.version = client.session_id, client.version
    response = stream.open_get()
    assert response.status == 200 and response.headers.get("Content-Type") == "text/event-stream"
    assert response.headers.get("X-Accel-Buffering") == "no" and response.headers.get("Cache-Control") == "no-cache"
    reader = SSEReader(response)
    assert http_server.notify("notifications/tools/list_changed") == 1
    assert http_server.notify("notifications/message", {"level": "info", "data": "unrelated"}) == 1
    first, second = reader.next(), reader.next()
    assert first is not None and second is not None and first.id is None
    messages = [json.loads(first.data or ""), json.loads(second.data or "")]
    assert [m["method"] for m in messages] == ["notifications/tools/list_changed", "notifications/message"]
    for m in messages:
        check_notification(LEGACY[0], m)
    # Request-related messages stay on their POST stream.
    counted = client.legacy("tools/call", {"name": "countdown", "arguments": {"steps": 1, "delay": 0},
                                           "_meta": {"progressToken": 1}})
    assert [m.get("method") for m in counted.messages] == ["notifications/progress", None]
    third = connect(http_server)
    third.session_id, third.version = client.session_id, client.version
    assert third.exchange("GET", None, {"Accept": "text/event-stream", **third.legacy_headers()}).status == 409
    # Ending the session ends the stream.
    assert client.exchange("DELETE", None, client.legacy_headers()).status == 200
    assert reader.rest() == []


def test_get_stream_rules(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    client.initialize()
    assert client.exchange("GET", None, {"Accept": "application/json", **client.legacy_headers()}).status == 400
    assert client.exchange("GET", None, {"Accept": "text/event-stream"}).status == 400
    assert client.exchange("GET", None, {"Accept": "text/event-stream", **client.legacy_headers(),
                                         "MCP-Protocol-Version": "2025-06-18"}).status == 400
    no_get = connect(serve(get_stream=False))
    no_get.initialize()
    refused = no_get.exchange("GET", None, {"Accept": "text/event-stream", **no_get.legacy_headers()})
    assert refused.status == 405 and refused.headers.get("Allow") == "POST, DELETE"


def test_get_stream_reconnects_after_the_client_leaves(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    client.initialize()
    first = connect(http_server)
    first.session_id, first.version = client.session_id, client.version
    assert first.open_get().status == 200
    first.close()
    wait_connections(http_server, 1)  # the server noticed the closed GET stream
    again = connect(http_server)
    again.session_id, again.version = client.session_id, client.version
    response = again.open_get()
    assert response.status == 200
    assert http_server.notify("notifications/resources/list_changed") == 1
    event = SSEReader(response).next()
    assert event is not None and json.loads(event.data or "")["method"] == "notifications/resources/list_changed"


# --------------------------------------------------------------------------
# Legacy era: SSE ids and resumption


def test_sse_ids_and_priming_events(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve(sse_ids=True, retry_ms=250)
    client = connect(http_server)
    client.initialize()
    reply = client.legacy("tools/call", {"name": "countdown", "arguments": {"steps": 2, "delay": 0},
                                         "_meta": {"progressToken": 1}})
    priming, *rest = reply.events
    assert priming.data == "" and priming.retry == 250 and priming.id is not None
    ids = [priming.id] + [e.id for e in rest]
    assert all(ids) and len(set(ids)) == len(ids) == 4
    quick = client.legacy("ping")
    assert quick.content_type == "application/json"  # auto mode: nothing to stream
    get = connect(http_server)
    get.session_id, get.version = client.session_id, client.version
    reader = SSEReader(get.open_get())
    get_priming = reader.next()
    assert get_priming is not None and get_priming.data == "" and get_priming.id not in ids


def test_stateless_streams_have_no_ids_even_with_sse_ids(serve: Callable[..., HTTPServer], connect: Any) -> None:
    client = connect(serve(sse_ids=True, response_mode="sse"))
    reply = client.call("echo", {"text": "x"})
    assert [e.id for e in reply.events] == [None]


@pytest.mark.parametrize("mode", ["auto", "sse"])
def test_resumption_after_a_dropped_stream(serve: Callable[..., HTTPServer], connect: Any, mode: str) -> None:
    http_server = serve(sse_ids=True, response_mode=mode)
    client = connect(http_server)
    client.initialize()
    http_server.drop_after_first_event()
    message = {"jsonrpc": "2.0", "id": "r1", "method": "tools/call",
               "params": {"name": "countdown", "arguments": {"steps": 3, "delay": 0}, "_meta": {"progressToken": 9}}}
    cut = client.exchange("POST", json.dumps(message), client.legacy_headers())
    assert cut.status == 200 and cut.headers.get("Connection") == "close"
    assert [(e.data, e.retry) for e in cut.events][-1] == (None, 500)
    priming = cut.events[0]
    assert priming.data == "" and priming.id and cut.messages == []
    resumed = client.exchange("GET", None, {"Accept": "text/event-stream", "Last-Event-ID": priming.id,
                                            **client.legacy_headers()})
    assert resumed.status == 200
    check_messages(LEGACY[0], "tools/call", resumed.messages)
    assert [m.get("method") for m in resumed.messages] == ["notifications/progress"] * 3 + [None]
    assert resumed.last["id"] == "r1" and resumed.result["content"][0]["text"] == "liftoff"
    assert all(e.id for e in resumed.events)
    # Fully delivered: that stream cannot be resumed again; the next POST is not cut.
    again = client.exchange("GET", None, {"Accept": "text/event-stream", "Last-Event-ID": priming.id,
                                          **client.legacy_headers()})
    assert again.status == 400
    assert client.legacy("tools/call", {"name": "echo", "arguments": {"text": "whole"}}).status == 200


def test_resume_from_the_middle_of_a_stream(serve: Callable[..., HTTPServer], connect: Any) -> None:
    step = threading.Event()
    server = Server()

    @server.tool(input_schema={"type": "object"})
    def two_steps(args: dict[str, Any], ctx: ToolContext) -> str:
        ctx.progress(1, 2)
        step.wait(WAIT)
        ctx.progress(2, 2)
        return "both"

    http_server = serve(server, sse_ids=True, retry_ms=10)
    client = connect(http_server)
    client.initialize()
    http_server.drop_after_first_event()
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "two_steps", "_meta": {"progressToken": "p"}}}
    cut = client.exchange("POST", json.dumps(message), client.legacy_headers())
    assert cut.events[0].retry == 10 and cut.events[-1].retry == 10
    client.close()
    first = connect(http_server)
    first.session_id, first.version = client.session_id, client.version
    reader = SSEReader(first.open_get({"Last-Event-ID": cut.events[0].id}))
    progress = reader.next()
    assert progress is not None and json.loads(progress.data or "")["params"]["progress"] == 1
    busy = connect(http_server)
    busy.session_id, busy.version = client.session_id, client.version
    assert busy.exchange("GET", None, {"Accept": "text/event-stream", "Last-Event-ID": cut.events[0].id,
                                       **busy.legacy_headers()}).status == 409  # being read
    first.close()
    wait_connections(http_server, 1)  # the server noticed the dropped GET
    step.set()
    rest = busy.exchange("GET", None, {"Accept": "text/event-stream", "Last-Event-ID": progress.id,
                                       **busy.legacy_headers()})
    assert [m.get("method") for m in rest.messages] == ["notifications/progress", None]
    assert rest.messages[0]["params"]["progress"] == 2 and rest.result["content"][0]["text"] == "both"
    assert busy.exchange("GET", None, {"Accept": "text/event-stream", "Last-Event-ID": "999-0",
                                       **busy.legacy_headers()}).status == 400


def test_drop_needs_sse_ids(serve: Callable[..., HTTPServer]) -> None:
    with pytest.raises(RuntimeError):
        serve().drop_after_first_event()


# --------------------------------------------------------------------------
# HTTP mechanics


def test_keep_alive_serves_many_requests_on_one_connection(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    assert client.call("echo", {"text": "one"}).status == 200
    sock = client.conn.sock
    assert sock is not None
    assert client.call("countdown", {"steps": 2, "delay": 0}, meta={"progressToken": 1}).content_type == \
        "text/event-stream"
    assert client.call("echo", {"text": "three"}).status == 200
    assert client.exchange("POST", "{bad json").status == 400
    assert client.call("echo", {"text": "five"}).status == 200
    assert client.conn.sock is sock and http_server.connections == 1


def test_recorded_requests(client: Client) -> None:
    reply = client.call("echo", {"text": "rec"}, headers={"X-Test": "yes"})
    assert reply.status == 200
    client.exchange("GET", None, {"Accept": "text/event-stream"}, path="/mcp?x=1")
    recorded = client.server.requests
    assert [r.method for r in recorded] == ["POST", "GET"]
    post = recorded[0]
    assert post.path == "/mcp" and post.headers.get("x-test") == "yes" and post.headers.get("MCP-METHOD") == "tools/call"
    assert post.json["params"]["arguments"] == {"text": "rec"} and json.loads(post.body) == post.json
    assert recorded[1].path == "/mcp?x=1" and recorded[1].body == b"" and recorded[1].json is None


def test_canned_responses(serve: Callable[..., HTTPServer], connect: Any) -> None:
    canned = Canned()
    http_server = serve(gate=canned)
    client = connect(http_server)
    canned.add(400, "Bad Request: not an MCP server", times=2)
    canned.add(401, b"", {"WWW-Authenticate": 'Bearer resource_metadata="http://x/.well-known"'})
    canned.add(404, json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}}))
    canned.add(500, "boom", {"Content-Type": "text/html"}, method="GET")
    for _ in range(2):
        plain = client.call("echo", {"text": "x"})
        assert plain.status == 400 and plain.content_type == "text/plain"
        assert plain.body == b"Bad Request: not an MCP server"
    unauthorized = client.call("echo", {"text": "x"})
    assert unauthorized.status == 401 and unauthorized.body == b""
    assert unauthorized.headers.get("WWW-Authenticate", "").startswith("Bearer")
    not_found = client.call("echo", {"text": "x"})
    assert not_found.status == 404 and not_found.content_type == "application/json"
    assert not_found.json["error"]["code"] == -32601
    assert client.call("echo", {"text": "served"}).status == 200
    broken = client.exchange("GET", None, {"Accept": "text/event-stream"})
    assert broken.status == 500 and broken.body == b"boom" and broken.content_type == "text/html"
    assert client.exchange("GET", None, {"Accept": "text/event-stream"}).status == 400  # served: no session
    assert len(http_server.requests) == 7


def test_http_level_rejections(client: Client) -> None:
    assert client.call("echo", {"text": "x"}, headers={"Origin": "http://localhost:3000"}).status == 200
    assert client.call("echo", {"text": "x"}, headers={"Origin": "http://127.0.0.1"}).status == 200
    evil = client.call("echo", {"text": "x"}, headers={"Origin": "http://evil.example"})
    assert evil.status == 403 and "id" not in evil.json
    check_error_body(MODERN, evil.json)
    assert client.exchange("POST", "{}", {}, path="/other").status == 404
    for method in ("PUT", "PATCH", "OPTIONS"):
        refused = client.exchange(method, None)
        assert refused.status == 405 and refused.headers.get("Allow") == "GET, POST, DELETE"


def test_chunked_request_body(client: Client) -> None:
    message = client.message("tools/call", {"name": "echo", "arguments": {"text": "chunks"}})
    data = json.dumps(message).encode()
    client.conn.request("POST", "/mcp", body=iter([data[:10], data[10:]]), encode_chunked=True,
                        headers={"Accept": ACCEPT_BOTH, "Content-Type": "application/json", **modern_headers(message)})
    response = client.conn.getresponse()
    assert response.status == 200 and json.loads(response.read())["result"]["content"][0]["text"] == "chunks"


def test_http_1_0_sse_is_close_delimited(serve: Callable[..., HTTPServer]) -> None:
    http_server = serve(response_mode="sse")
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "old http"}, "_meta": modern_meta()}}
    body = json.dumps(message).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in {
        "Host": "127.0.0.1", "Accept": ACCEPT_BOTH, "Content-Type": "application/json",
        "Content-Length": str(len(body)), **modern_headers(message)}.items())
    with socket.create_connection(("127.0.0.1", http_server.port), timeout=WAIT) as sock:
        sock.sendall(f"POST /mcp HTTP/1.0\r\n{head}\r\n".encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    header_block, _, payload = data.partition(b"\r\n\r\n")
    assert header_block.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding" not in header_block
    events = list(sse_events(split_lines(payload.decode())))
    assert json.loads(events[0].data or "")["result"]["content"][0]["text"] == "old http"


def test_the_package_uses_only_the_standard_library() -> None:
    """mcp_sync.testing must not import the rest of mcp_sync nor the `mcp` SDK.

    One exception: the authorization server's JWT code (`_jwt.py`) checks
    asymmetric signatures with `cryptography` (the optional `jwt` extra),
    imported inside the functions that need it, so the module loads without it."""
    import ast

    package = REPO / "mcp_sync" / "testing"
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = set(tree.body)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1, f"{path.name} imports from outside mcp_sync.testing"
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                if top == "cryptography" and path.name == "_jwt.py" and node not in top_level:
                    continue
                assert top == "__future__" or top in sys.stdlib_module_names, f"{path.name} imports {name}"


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def test_close_leaves_no_threads_or_sockets() -> None:
    threads_before, fds_before = _thread_idents(), _fd_count()
    server = demo_server()
    spy = spy_tool(server, "sleep")
    http_server = HTTPServer(server, sse_ids=True).start()
    clients = [Client(http_server) for _ in range(4)]
    try:
        # Idle keep-alive connection, a stateless SSE answer, a legacy session with a GET stream, a tool in flight.
        assert clients[0].call("countdown", {"steps": 2, "delay": 0}, meta={"progressToken": 1}).status == 200
        clients[1].initialize()
        clients[2].session_id, clients[2].version = clients[1].session_id, clients[1].version
        get = SSEReader(clients[2].open_get())
        assert get.next() is not None  # the priming event
        message = clients[3].message("tools/call", {"name": "sleep", "arguments": {"seconds": 600}})
        clients[3].send("POST", json.dumps(message), modern_headers(message))
        assert spy["started"].wait(WAIT)
        assert len(_thread_idents() - threads_before) > 0
        started = time.monotonic()
        http_server.close()
        assert time.monotonic() - started < GENEROUS  # it cancelled the 600 s tool, not waited for it
        assert spy["result"] == "cancelled"
        assert _thread_idents() <= threads_before, [t.name for t in threading.enumerate()]
        assert get.rest() == []  # the GET stream ended
        http_server.close()  # idempotent
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", http_server.port), timeout=WAIT).close()
    finally:
        for c in clients:
            c.close()
    assert _fd_count() == fds_before
    with pytest.raises(RuntimeError):
        http_server.start()


def test_context_manager_and_constructor_checks() -> None:
    with HTTPServer(demo_server()) as http_server:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", http_server.url)
        with pytest.raises(RuntimeError):
            http_server.start()
    with pytest.raises(RuntimeError):
        HTTPServer(demo_server()).url
    with pytest.raises(ValueError):
        HTTPServer(demo_server(), response_mode="xml")
    with pytest.raises(ValueError):
        HTTPServer(demo_server(), retry_ms=-1)
    with pytest.raises(ValueError):
        HTTPServer(demo_server(), path="mcp")
    HTTPServer(demo_server()).close()  # never started: nothing to do


def test_custom_path(serve: Callable[..., HTTPServer], connect: Any) -> None:
    http_server = serve(path="/api/v1/mcp")
    assert http_server.url.endswith("/api/v1/mcp")
    client = connect(http_server)
    assert client.call("echo", {"text": "x"}).status == 200
    assert client.exchange("POST", "{}", path="/mcp").status == 404


def test_concurrent_clients(serve: Callable[..., HTTPServer]) -> None:
    http_server = serve()
    errors: list[BaseException] = []

    def work(n: int) -> None:
        client = Client(http_server)
        try:
            if n % 2:
                client.initialize()
            for i in range(10):
                text = f"{n}-{i}"
                reply = client.legacy("tools/call", {"name": "echo", "arguments": {"text": text}}) if n % 2 \
                    else client.call("echo", {"text": text})
                assert reply.result["content"][0]["text"] == text
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 3)
    assert not errors, errors[0]
    assert http_server.sessions == 4


# --------------------------------------------------------------------------
# The program: python -m mcp_sync.testing.server --http PORT


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_http_program(sig: int) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen([sys.executable, "-m", "mcp_sync.testing.server", "--http", "0", "--sse-ids"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        found = re.fullmatch(r"listening on (http://127\.0\.0\.1:(\d+)/mcp)\n", line)
        assert found, line
        port = int(found.group(2))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        message = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}}
        conn.request("POST", "/mcp", json.dumps(message),
                     {"Accept": ACCEPT_BOTH, "Content-Type": "application/json", **modern_headers(message)})
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 200 and body["result"]["_meta"][META_SERVER_INFO]["name"] == "mcp-sync-demo"
        check_response(MODERN, "server/discover", body)
        proc.send_signal(sig)
        assert proc.wait(WAIT) == 0
        conn.close()
        assert proc.stdout is not None and proc.stdout.read() == b""
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# --------------------------------------------------------------------------
# Cross-check with the official `mcp` SDK client


async def _sdk_session(url: str, mode: str) -> dict[str, Any]:
    from mcp import Client as SDKClient

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with SDKClient(url, mode=mode) as sdk:
        echo = await sdk.call_tool("echo", {"text": "from the sdk"})
        counted = await sdk.call_tool("countdown", {"steps": 3, "delay": 0}, progress_callback=on_progress)
        tools = await sdk.list_tools()
        read = await sdk.read_resource("demo://items/7")
        return {
            "version": sdk.session.protocol_version,
            "echo": echo.content[0].text,  # type: ignore[union-attr]
            "countdown": counted.content[0].text,  # type: ignore[union-attr]
            "progress": progress,
            "tools": sorted(t.name for t in tools.tools),
            "read": read.contents[0].text,  # type: ignore[union-attr]
        }


@pytest.mark.parametrize(("versions", "mode", "options", "expected"), [
    (None, "auto", {}, MODERN),
    (None, "legacy", {}, LEGACY[0]),
    (["2025-11-25"], "auto", {}, LEGACY[0]),
    ([MODERN], "auto", {}, MODERN),
    (None, MODERN, {"response_mode": "sse"}, MODERN),
    (None, "legacy", {"response_mode": "json"}, LEGACY[0]),
    (None, "legacy", {"response_mode": "sse", "sse_ids": True, "retry_ms": 5}, LEGACY[0]),
])
def test_official_sdk_client(serve: Callable[..., HTTPServer], versions: list[str] | None, mode: str,
                             options: dict[str, Any], expected: str) -> None:
    import asyncio

    pytest.importorskip("mcp")
    http_server = serve(demo_server(versions=versions), **options)
    if options.get("sse_ids"):
        http_server.drop_after_first_event(2)  # the SDK must resume with GET + Last-Event-ID
    outcome = asyncio.run(_sdk_session(http_server.url, mode))
    assert outcome["version"] == expected
    assert outcome["echo"] == "from the sdk" and outcome["countdown"] == "liftoff"
    assert outcome["progress"] == ([] if options.get("response_mode") == "json" else [1, 2, 3])
    assert "echo" in outcome["tools"] and outcome["read"] == "item 7"
    methods = [r.method for r in http_server.requests]
    if expected == MODERN:
        assert set(methods) == {"POST"} and http_server.sessions == 0
    else:
        assert methods[-1] == "DELETE" and http_server.sessions == 0  # the SDK ends its session
    if options.get("sse_ids"):
        resumes = [r for r in http_server.requests if r.method == "GET" and r.headers.get("Last-Event-ID")]
        assert len(resumes) == 2


@pytest.mark.parametrize("server_class", ["HTTPServer", "SSEServer"])
@pytest.mark.parametrize("options", [{"path": "mcp"}, {"max_records": 0}, {"max_records": True}])
def test_both_loopback_servers_refuse_a_bad_path_or_record_limit(server_class, options):
    from tests.servers.http_sse import SSEServer

    make = {"HTTPServer": HTTPServer, "SSEServer": SSEServer}[server_class]
    with pytest.raises(ValueError, match="path|max_records"):
        make(demo_server(), **options)
