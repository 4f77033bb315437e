"""A test client of the standard library for `HTTPServer` (`http.client`, so
the server's tests do not depend on mcp_sync's own client): `Client` sends
raw or conforming requests of either era and schema-checks every JSON-RPC
message of the answer; `SSEReader` reads a live SSE response event by event."""

from __future__ import annotations

import base64
import http.client
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import pytest

from mcp_sync.testing import HTTPServer
from tests.testing.peers import WAIT, modern_meta
from tests.testing.schema_util import (
    LEGACY,
    META_VERSION,
    MODERN,
    check_notification,
    check_response,
    validate,
)

ACCEPT_BOTH = "application/json, text/event-stream"

#: Error code -> its 2026-07-28 schema definition of the `error` object ...
MODERN_ERROR_OBJECTS = {
    -32700: "ParseError",
    -32600: "InvalidRequestError",
    -32601: "MethodNotFoundError",
    -32602: "InvalidParamsError",
    -32603: "InternalError",
}
#: ... or of the whole error response.
MODERN_ERROR_RESPONSES = {
    -32020: "HeaderMismatchError",
    -32022: "UnsupportedProtocolVersionError",
}


def wait_connections(server: HTTPServer, count: int) -> None:
    """Wait (on the server's condition) until it has `count` open connections."""
    if not server.wait_for(lambda: server.connections == count, WAIT):
        pytest.fail(f"timed out waiting for {count} open connections (have {server.connections})")


# --------------------------------------------------------------------------
# A tiny SSE parser


@dataclass
class Event:
    data: str | None = None
    id: str | None = None
    event: str | None = None
    retry: int | None = None


def sse_events(lines: Iterable[str]) -> Iterator[Event]:
    """Parse SSE lines (without line ends) into events; unlike a browser it
    also yields blocks without data (a `retry:`-only block), so tests see them."""
    current = Event()
    data: list[str] = []
    seen = False
    for line in lines:
        if line == "":
            if seen:
                current.data = "\n".join(data) if data else None
                yield current
            current, data, seen = Event(), [], False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        seen = True
        if name == "data":
            data.append(value)
        elif name == "id":
            current.id = value
        elif name == "event":
            current.event = value
        elif name == "retry" and value.isdigit():
            current.retry = int(value)


def split_lines(text: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", text)


class SSEReader:
    """Reads the events of a live SSE response one at a time."""

    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.response = response

    def _lines(self) -> Iterator[str]:
        while True:
            raw = self.response.readline()
            if not raw:
                return
            yield raw.decode("utf-8").rstrip("\r\n")

    def next(self) -> Event | None:
        """The next event, or None at the end of the stream."""
        return next(sse_events(self._lines()), None)

    def rest(self) -> list[Event]:
        return list(sse_events(self._lines()))


# --------------------------------------------------------------------------
# Schema checks of what the server emits


def check_error_body(revision: str, body: dict[str, Any]) -> None:
    assert body.get("jsonrpc") == "2.0" and "result" not in body
    code = body["error"]["code"]
    if revision == MODERN:
        validate(MODERN, "JSONRPCErrorResponse", body)
        if code in MODERN_ERROR_OBJECTS:
            validate(MODERN, MODERN_ERROR_OBJECTS[code], body["error"])
        if code in MODERN_ERROR_RESPONSES:
            validate(MODERN, MODERN_ERROR_RESPONSES[code], body)
    elif revision == "2025-06-18" and "id" not in body:
        validate("2025-11-25", "JSONRPCErrorResponse", body)  # 2025-06-18 cannot express an id-less error
    else:
        validate(revision, "JSONRPCError" if revision == "2025-06-18" else "JSONRPCErrorResponse", body)


def check_messages(revision: str, method: str | None, messages: list[dict[str, Any]]) -> None:
    """Notifications must fit `revision`; the response must be the last message."""
    for i, msg in enumerate(messages):
        if "method" in msg:
            check_notification(revision, msg)
        elif "error" in msg:
            assert i == len(messages) - 1
            check_error_body(revision, msg)
        else:
            assert i == len(messages) - 1
            check_response(revision, method or "", msg)


# --------------------------------------------------------------------------
# An HTTP client of the standard library


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes
    events: list[Event] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";")[0].strip()

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def last(self) -> dict[str, Any]:
        return self.messages[-1]

    @property
    def result(self) -> dict[str, Any]:
        assert self.status == 200 and "result" in self.last, (self.status, self.body)
        result: dict[str, Any] = self.last["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.last, (self.status, self.body)
        error: dict[str, Any] = self.last["error"]
        return error


def encode_header(value: str) -> str:
    """The spec's header value encoding (Base64 sentinel when not plain-safe)."""
    safe = re.fullmatch(r"[\x20-\x7e]*", value) is not None and value == value.strip()
    if safe and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def modern_headers(message: dict[str, Any]) -> dict[str, str]:
    """The routing headers a conforming client sends for a stateless request."""
    params = message.get("params") or {}
    headers = {"MCP-Protocol-Version": params.get("_meta", {}).get(META_VERSION, MODERN),
               "Mcp-Method": message["method"]}
    key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(message["method"])
    if key is not None and isinstance(params.get(key), str):
        headers["Mcp-Name"] = encode_header(params[key])
    return headers


class Client:
    """One keep-alive HTTP connection to an HTTPServer."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT)
        self.ids = itertools.count(1)
        self.session_id: str | None = None
        self.version: str | None = None

    def close(self) -> None:
        self.conn.close()

    # -- raw -------------------------------------------------------------------

    def open(self, method: str, body: bytes | str | None = None, headers: dict[str, Any] | None = None,
             path: str | None = None) -> http.client.HTTPResponse:
        """Send a request; return the response with its body unread."""
        self.send(method, body, headers, path)
        return self.conn.getresponse()

    def send(self, method: str, body: bytes | str | None = None, headers: dict[str, Any] | None = None,
             path: str | None = None) -> None:
        """Send a request without waiting for the answer."""
        sent = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"} if method == "POST" else {}
        for name, value in (headers or {}).items():
            for existing in [k for k in sent if k.lower() == name.lower()]:
                del sent[existing]
            if value is not None:
                sent[name] = value
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.conn.putrequest(method, path or self.server.path, skip_accept_encoding=True)
        for name, value in sent.items():
            for one in value if isinstance(value, list) else [value]:
                self.conn.putheader(name, one)
        if body is not None:
            self.conn.putheader("Content-Length", str(len(body)))
        self.conn.endheaders(body)

    def exchange(self, method: str, body: bytes | str | None = None, headers: dict[str, Any] | None = None, *,
                 path: str | None = None, revision: str | None = None, rpc_method: str | None = None) -> Reply:
        """Send a request and read the whole answer; when `revision` is given
        every JSON-RPC message in it is schema-checked."""
        response = self.open(method, body, headers, path)
        data = response.read()
        reply = Reply(response.status, response.headers, data)
        if reply.content_type == "text/event-stream":
            assert response.headers.get("Cache-Control") == "no-cache"
            assert response.headers.get("X-Accel-Buffering") == "no"
            assert response.headers.get("Transfer-Encoding") == "chunked"
            reply.events = list(sse_events(split_lines(data.decode("utf-8"))))
            reply.messages = [json.loads(e.data) for e in reply.events if e.data]
        elif reply.content_type == "application/json" and data:
            assert response.headers.get("Content-Length") == str(len(data))
            reply.messages = [json.loads(data)]
        if revision is not None:
            check_messages(revision, rpc_method, reply.messages)
        else:  # no revision agreed (yet): an error must fit both eras
            for message in reply.messages:
                if "error" in message:
                    validate(MODERN, "JSONRPCErrorResponse", message)
                    validate("2025-11-25", "JSONRPCErrorResponse", message)
        return reply

    # -- stateless -------------------------------------------------------------

    def message(self, method: str, params: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None,
                request_id: Any = None) -> dict[str, Any]:
        body = dict(params or {})
        body["_meta"] = modern_meta(**(meta or {}))
        return {"jsonrpc": "2.0", "id": next(self.ids) if request_id is None else request_id,
                "method": method, "params": body}

    def modern(self, method: str, params: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None,
               headers: dict[str, Any] | None = None) -> Reply:
        """A conforming stateless request (routing headers included; `headers` override them)."""
        message = self.message(method, params, meta=meta)
        sent: dict[str, Any] = modern_headers(message)
        sent.update(headers or {})
        return self.exchange("POST", json.dumps(message), sent, revision=MODERN, rpc_method=method)

    def call(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Reply:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.modern("tools/call", params, **kw)

    # -- legacy ----------------------------------------------------------------

    def legacy_headers(self) -> dict[str, Any]:
        headers: dict[str, Any] = {}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        return headers

    def initialize(self, version: str = LEGACY[0]) -> Reply:
        message = {"jsonrpc": "2.0", "id": next(self.ids), "method": "initialize",
                   "params": {"protocolVersion": version, "capabilities": {},
                              "clientInfo": {"name": "test-client", "version": "1"}}}
        reply = self.exchange("POST", json.dumps(message))
        assert reply.status == 200, reply.body
        self.version = reply.result["protocolVersion"]
        check_messages(self.version, "initialize", reply.messages)
        self.session_id = reply.headers.get("Mcp-Session-Id")
        assert self.session_id is not None and re.fullmatch(r"[0-9a-f]{32}", self.session_id)
        ack = self.legacy_notify("notifications/initialized")
        assert ack.status == 202 and ack.body == b""
        return reply

    def legacy(self, method: str, params: dict[str, Any] | None = None, *, headers: dict[str, Any] | None = None,
               request_id: Any = None) -> Reply:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self.ids) if request_id is None else request_id,
                                   "method": method}
        if params is not None:
            message["params"] = params
        sent = self.legacy_headers()
        sent.update(headers or {})
        assert self.version is not None
        return self.exchange("POST", json.dumps(message), sent, revision=self.version, rpc_method=method)

    def legacy_notify(self, method: str, params: dict[str, Any] | None = None,
                      headers: dict[str, Any] | None = None) -> Reply:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        sent = self.legacy_headers()
        sent.update(headers or {})
        return self.exchange("POST", json.dumps(message), sent)

    def open_get(self, headers: dict[str, Any] | None = None) -> http.client.HTTPResponse:
        sent = {"Accept": "text/event-stream", **self.legacy_headers()}
        sent.update(headers or {})
        return self.open("GET", None, sent)
