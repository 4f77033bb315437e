"""A real engine (`Connection`) over a transport whose server is a function
of the request: the negotiation step and the supervisor are tested on it,
so each era outcome and each state change is decided by the script alone,
with no process, socket or timing in the way."""

from __future__ import annotations

import contextlib
import queue
from typing import Any, Callable

import mcp_sync
from mcp_sync.connection import Connection, new_id_counter
from mcp_sync.negotiation import Identity, Terms
from mcp_sync.transports.base import Target, Transport

Script = Callable[[dict[str, Any]], "dict[str, Any] | None"]

INITIALIZED = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "scripted", "version": "1"}}
DISCOVERED = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
              "serverInfo": {"name": "scripted", "version": "1"}, "resultType": "complete"}


class ScriptedTransport(Transport):
    """Answers each request with `script(message)`: a result dict, an
    `{"error": ...}` dict, or None (silence); raises what the script raises."""

    restarts_server = False

    def __init__(self, script: Script, kind: str = "custom") -> None:
        self.script = script
        self.kind = kind
        self.sent: list[dict[str, Any]] = []
        self.closed = False
        self.sink: Any = None

    def start(self, sink: Any) -> None:
        self.sink = sink

    def send(self, message: Any, headers: Any = None) -> None:
        self.sent.append(dict(message))
        if "id" not in message or "method" not in message:
            return
        answer = self.script(dict(message))
        if answer is None:
            return
        if "error" in answer:
            self.sink.deliver({"jsonrpc": "2.0", "id": message["id"], "error": answer["error"]})
        else:
            self.sink.deliver({"jsonrpc": "2.0", "id": message["id"], "result": answer})

    def close(self) -> None:
        self.closed = True


class ScriptedTarget(Target):
    def __init__(self, script: Script, kind: str = "custom", key: Any = None,
                 fallback_to: Target | None = None) -> None:
        self.script, self.kind, self.key, self.fallback_to = script, kind, key, fallback_to
        self.opened: list[ScriptedTransport] = []

    def open(self) -> Transport:
        transport = ScriptedTransport(self.script, self.kind)
        self.opened.append(transport)
        return transport

    def server_key(self) -> Any:
        return self.key

    def fallback(self, refusal: Any = None) -> Target | None:
        return self.fallback_to


class Starter:
    """The negotiation's `Starter`, counting what it starts and abandons."""

    def __init__(self) -> None:
        self.started: list[Connection] = []
        self.abandoned: list[Connection] = []

    def start(self, target: Any) -> Connection:
        conn = Connection(target.open(), new_id_counter())
        conn.start()
        self.started.append(conn)
        return conn

    def abandon(self, conn: Connection, reason: str) -> None:
        self.abandoned.append(conn)
        conn.close(reason)


def terms(allowed: tuple[str, ...] = mcp_sync.SUPPORTED_VERSIONS, probe_timeout: float = 5.0,
          **more: Any) -> Terms:
    return Terms(allowed=allowed, probe_timeout=probe_timeout, timeout=5.0,
                 identity=lambda: Identity({}, {"name": "t", "version": "1"}, None),
                 on_log=lambda params: None, answerer=lambda conn: (lambda message: None),
                 traced=lambda method, version: contextlib.nullcontext(), **more)


def stateless_server(message: dict[str, Any]) -> dict[str, Any] | None:
    return DISCOVERED if message["method"] == "server/discover" else {}


def initialize_era_server(message: dict[str, Any]) -> dict[str, Any] | None:
    if message["method"] == "server/discover":
        return {"error": {"code": -32601, "message": "Method not found"}}
    if message["method"] == "initialize":
        return INITIALIZED
    return {}




def methods(transport: ScriptedTransport) -> list[str]:
    return [m["method"] for m in transport.sent if "method" in m]


class PlayedTransport(Transport):
    """Records what the engine sends; the test plays the server through
    `sink` (see `respond`), message by message."""

    def __init__(self, by_notification=True):
        self.cancels_by_notification = by_notification
        self.sent = queue.SimpleQueue()
        self.cancelled = []
        self.sink = None
        self.closed = 0

    def start(self, sink):
        self.sink = sink

    def send(self, message, headers=None):
        self.sent.put(message)

    def cancel(self, request_id):
        self.cancelled.append(request_id)

    def close(self):
        self.closed += 1

    def next_sent(self):
        return self.sent.get(timeout=5)


def respond(transport, request_id, result=None):
    transport.sink.deliver({"jsonrpc": "2.0", "id": request_id, "result": result or {}})
