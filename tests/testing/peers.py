"""Test-side peers of the test server, driven with plain dicts: `Conn` (a
session of an in-process `Server`) and `Proc` (the stdio program in a
subprocess). Each records every server message, waits on a Condition for
the ones a test needs, and schema-checks each response."""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import sys
import threading
from typing import Any, Callable

import pytest

from mcp_sync.testing import Server
from tests.testing.schema_util import LEGACY, META_CAPS, META_VERSION, MODERN, REPO, check_response

WAIT = 10.0  # seconds: generous upper bound for anything that should happen "now"


def modern_meta(**extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        META_VERSION: MODERN,
        META_CAPS: {},
        "io.modelcontextprotocol/clientInfo": {"name": "test-client", "version": "0.0.1"},
    }
    meta.update(extra)
    return meta


class Peer:
    """A test-side client: sends dicts, records every server message, waits
    on a Condition for the ones it needs, validates each response."""

    def __init__(self, stateless: bool = True) -> None:
        self.cond = threading.Condition()
        self.messages: list[dict[str, Any]] = []
        self._ids = itertools.count(1000)
        self.stateless = stateless
        self.legacy_version: str | None = None
        self.methods: dict[Any, str] = {}
        self.by_id: dict[Any, dict[str, Any]] = {}

    # transport hooks
    def write(self, message: Any) -> None:
        raise NotImplementedError

    def record(self, message: dict[str, Any]) -> None:
        with self.cond:
            self.messages.append(message)
            if "method" not in message and "id" in message:
                self.by_id.setdefault(message["id"], message)
            self.cond.notify_all()

    # helpers
    @property
    def revision(self) -> str:
        if self.stateless:
            return MODERN
        assert self.legacy_version is not None, "initialize first"
        return self.legacy_version

    def start(self, method: str, params: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None,
              request_id: Any = None) -> Any:
        """Send a request without waiting; returns its id."""
        rid = next(self._ids) if request_id is None else request_id
        body = dict(params or {})
        if self.stateless:
            body["_meta"] = modern_meta(**(meta or {}))
        elif meta:
            body["_meta"] = dict(meta)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if body:
            message["params"] = body
        self.methods[rid] = method
        self.write(message)
        return rid

    def request(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        rid = self.start(method, params, **kw)
        return self.response(rid)

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        msg = self.request(method, params, **kw)
        assert "result" in msg, f"expected a result for {method}, got {msg}"
        result: dict[str, Any] = msg["result"]
        return result

    def error(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        msg = self.request(method, params, **kw)
        assert "error" in msg, f"expected an error for {method}, got {msg}"
        error: dict[str, Any] = msg["error"]
        return error

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.result("tools/call", params, **kw)

    def initialize(self, version: str = LEGACY[0]) -> dict[str, Any]:
        self.stateless = False
        rid = next(self._ids)
        self.methods[rid] = "initialize"
        self.write({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test-client", "version": "1"}}})
        msg = self.wait_for(lambda m: m.get("id") == rid and ("result" in m or "error" in m))
        assert "result" in msg, msg
        self.legacy_version = msg["result"]["protocolVersion"]
        check_response(self.revision, "initialize", msg)
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result: dict[str, Any] = msg["result"]
        return result

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.write(message)

    def cancel(self, request_id: Any, reason: str = "test") -> None:
        self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def ready() -> bool:
            found[:] = [m for m in self.messages if predicate(m)]
            return bool(found)

        with self.cond:
            if not self.cond.wait_for(ready, timeout):
                pytest.fail(f"timed out waiting for a server message; got {self.messages[-5:]}")
        return found[0]

    def response(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        with self.cond:
            if not self.cond.wait_for(lambda: request_id in self.by_id, timeout):
                pytest.fail(f"timed out waiting for the response to {request_id!r}; got {self.messages[-5:]}")
            msg = self.by_id[request_id]
        check_response(self.revision, self.methods.get(request_id, ""), msg)
        return msg

    def responses_for(self, request_id: Any) -> list[dict[str, Any]]:
        with self.cond:
            return [m for m in self.messages if m.get("id") == request_id and "method" not in m]

    def notifications(self, method: str | None = None) -> list[dict[str, Any]]:
        with self.cond:
            return [m for m in self.messages if "method" in m and (method is None or m["method"] == method)]

    def index_of(self, msg: dict[str, Any]) -> int:
        with self.cond:
            return next(i for i, m in enumerate(self.messages) if m is msg)


class Conn(Peer):
    """A session of an in-process `Server`."""

    def __init__(self, server: Server, stateless: bool = True) -> None:
        super().__init__(stateless)
        self.session = server.open_session(self._on_send)
        self.send_threads: set[str] = set()
        self.concurrent_sends = 0
        self._in_send = 0

    def _on_send(self, message: dict[str, Any]) -> None:
        with self.cond:
            self._in_send += 1
            self.concurrent_sends = max(self.concurrent_sends, self._in_send)
            self.send_threads.add(threading.current_thread().name)
        try:
            self.record(json.loads(json.dumps(message, allow_nan=False)))  # must survive the wire
        finally:
            with self.cond:
                self._in_send -= 1

    def write(self, message: Any) -> None:
        self.session.receive(copy.deepcopy(message))

    def close(self) -> None:
        self.session.close()


class Proc(Peer):
    """The stdio program in a subprocess; every stdout line must be one compact JSON message."""

    def __init__(self, *args: str, module: str = "mcp_sync.testing.server", stateless: bool = True) -> None:
        super().__init__(stateless)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env,
        )
        self.bad_lines: list[bytes] = []
        self.stderr = b""
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._reader.start()
        self._err_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
                assert raw == json.dumps(message, separators=(",", ":")).encode() + b"\n"
            except (ValueError, AssertionError):
                self.bad_lines.append(raw)
                continue
            self.record(message)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def write(self, message: Any) -> None:
        self.write_raw(json.dumps(message).encode("utf-8") + b"\n")

    def write_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def finish(self, timeout: float = WAIT) -> int:
        """Close stdin and wait for the exit code; checks every line was a valid message."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        self._err_reader.join(timeout)
        assert self.bad_lines == [], f"stdout lines that are not compact JSON messages: {self.bad_lines[:3]}"
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
