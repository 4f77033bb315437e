"""The raw floor: hand-written synchronous JSON-RPC clients.

What a user would write with no SDK at all: `json` over the child's pipes
(once inline, the caller reading its own reply, and once with a reader thread
handing replies to callers by id, which is what any client shared by threads
must do), and `http.client` keep-alive with one connection per thread. They
send the same bytes mcp_sync sends for a 2026-07-28 `tools/call`, check
nothing beyond the id, and so bound from below what any MCP client can cost.
"""

from __future__ import annotations

import http.client
import itertools
import json
import queue
import subprocess
import threading
import urllib.parse
from typing import Any

VERSION = "2026-07-28"
# The per-request _meta a 2026-07-28 client must send: the floor pays for the
# same bytes on the wire as the clients it is compared with.
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-floor", "version": "0"},
}


def _call_params(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "_meta": META}


def _text(response: dict[str, Any]) -> str:
    if "error" in response:
        raise RuntimeError(f"server error: {response['error']}")
    return str(response["result"]["content"][0]["text"])


class _Floor:
    """The two tools every client under test calls, over `_call`."""

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        raise NotImplementedError

    def echo(self, text: str) -> str:
        return self._call("echo", {"text": text})

    def blob(self, n: int) -> int:
        return len(self._call("blob", {"n": n}))

    def _rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def list_tools(self) -> int:
        """Every tool, page by page: decode each page and build one plain
        dict per tool (the floor of any typed listing). Returns the count."""
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"_meta": META} if cursor is None else {"cursor": cursor, "_meta": META}
            result = self._rpc("tools/list", params)
            for tool in result["tools"]:
                tools.append({"name": tool["name"], "title": tool.get("title"),
                              "description": tool.get("description"), "input_schema": tool.get("inputSchema"),
                              "output_schema": tool.get("outputSchema"), "annotations": tool.get("annotations")})
            cursor = result.get("nextCursor")
            if cursor is None:
                return len(tools)


class RawStdioInline(_Floor):
    """One caller at a time: write a line, read the next line."""

    def __init__(self, argv: list[str]) -> None:
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._ids = itertools.count(1)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        request_id = next(self._ids)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": _call_params(name, arguments)})
        self._proc.stdin.write(line.encode() + b"\n")
        self._proc.stdin.flush()
        response = json.loads(self._proc.stdout.readline())
        if response.get("id") != request_id:
            raise RuntimeError("out-of-order response")
        return _text(response)

    def close(self) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait()
        self._proc.stdout.close()


class RawStdioReader(_Floor):
    """Many callers: writes under a lock, one reader thread routing replies
    by id to each caller's own queue."""

    def __init__(self, argv: list[str]) -> None:
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # guards _waiting
        self._write_lock = threading.Lock()  # one line at a time on stdin
        self._waiting: dict[int, queue.SimpleQueue[dict[str, Any]]] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            message = json.loads(line)
            with self._lock:
                inbox = self._waiting.pop(message["id"])
            inbox.put(message)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        return _text(self._send("tools/call", _call_params(name, arguments)))

    def _rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = self._send(method, params)
        if "error" in response:
            raise RuntimeError(f"server error: {response['error']}")
        result: dict[str, Any] = response["result"]
        return result

    def _send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None
        inbox: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        request_id = next(self._ids)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                           "params": params}).encode() + b"\n"
        with self._lock:
            self._waiting[request_id] = inbox
        with self._write_lock:
            self._proc.stdin.write(line)
            self._proc.stdin.flush()
        return inbox.get()

    def close(self) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait()
        self._reader.join()
        self._proc.stdout.close()


class RawHTTP(_Floor):
    """`http.client` keep-alive, one connection per calling thread."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._path = parts.path or "/"
        self._ids = itertools.count(1)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[http.client.HTTPConnection] = []

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self._host, self._port)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        return _text(self._send("tools/call", _call_params(name, arguments), name))

    def _rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = self._send(method, params, None)
        if "error" in response:
            raise RuntimeError(f"server error: {response['error']}")
        result: dict[str, Any] = response["result"]
        return result

    def _send(self, method: str, params: dict[str, Any], name: str | None) -> dict[str, Any]:
        request_id = next(self._ids)
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
        conn = self._connection()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            # The headers 2026-07-28 requires a client to mirror from the body.
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        conn.request("POST", self._path, body, headers)
        reply = conn.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"HTTP {reply.status}")
        response: dict[str, Any] = json.loads(data)
        if response.get("id") != request_id:
            raise RuntimeError("response for another request")
        return response

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
