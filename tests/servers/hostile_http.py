"""A hostile HTTP front for deadline and fault tests.

`HostileFront` listens on loopback and relays every request to a real
upstream MCP server (`mcp_sync.testing.HTTPServer`), except the JSON-RPC
methods named in `faults`: those get a misbehaving answer written straight to
the socket (a trickled head or body, endless interim answers, endless
trailers, a hang). It records what it relayed (`methods`) and whether the
client hung up on a hostile answer (`hung_up`), so a test can check that the
server was told. The initialize-era GET stream is refused (405) so that
relaying stays one request, one answer.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

#: A fault writes its answer to the socket until the client hangs up (an
#: OSError) or the front stops.
Fault = Callable[["HostileFront", socket.socket, dict[str, Any]], None]

STEP = 0.05  # seconds between trickled pieces


def _trickle(front: HostileFront, sock: socket.socket, data: bytes) -> None:
    for i in range(len(data)):
        if front.stopping.wait(STEP):
            return
        sock.sendall(data[i:i + 1])


def _answer_body(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": message.get("id"),
                       "result": {"content": [{"type": "text", "text": "late"}]}}).encode()


def trickle_body(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    body = _answer_body(message) * 20  # long enough to outlast any deadline in the tests
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body))
    _trickle(front, sock, body)


def trickle_head(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    _trickle(front, sock, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Slow: y\r\n" * 200)


def endless_continue(front: HostileFront, sock: socket.socket, message: dict[str, Any], step: float = 4 * STEP) -> None:
    while not front.stopping.wait(step):
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")


def many_continues(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    endless_continue(front, sock, message, step=0.001)


def endless_trailers(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"2\r\n{}\r\n0\r\n")
    n = 0
    while not front.stopping.wait(STEP):
        sock.sendall(b"X-Trailer-%d: v\r\n" % n)
        n += 1


def wait_for_hangup(front: HostileFront, sock: socket.socket) -> None:
    """Send nothing more; raise once the client closes the connection."""
    sock.settimeout(STEP)
    while not front.stopping.is_set():
        try:
            if sock.recv(1) == b"":
                raise ConnectionResetError("the client hung up")
        except socket.timeout:
            continue


def hang_after_headers(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
    wait_for_hangup(front, sock)


def trickle_sse(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    while not front.stopping.wait(STEP):
        sock.sendall(b": still here\n\n")


FAULTS: dict[str, Fault] = {
    "trickle_body": trickle_body,
    "trickle_head": trickle_head,
    "endless_continue": endless_continue,
    "endless_trailers": endless_trailers,
    "hang_after_headers": hang_after_headers,
    "trickle_sse": trickle_sse,
}


class HostileFront:
    def __init__(self, upstream_url: str, faults: dict[str, Fault]) -> None:
        from urllib.parse import urlsplit
        parts = urlsplit(upstream_url)
        self._up_host, self._up_port, self._path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
        self.faults = dict(faults)
        self.methods: list[str] = []
        self.hung_up = threading.Event()
        self.hostile_started = threading.Event()
        self.stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}{self._path}"

    def start(self) -> HostileFront:
        self._spawn(self._accept_loop)
        return self

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        self._listener.settimeout(STEP)
        while not self.stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._socks.append(sock)
            self._spawn(self._serve, sock)

    def _serve(self, sock: socket.socket) -> None:
        upstream = http.client.HTTPConnection(self._up_host, self._up_port, timeout=30)
        reader = sock.makefile("rb")
        try:
            while not self.stopping.is_set():
                request_line = reader.readline(65537)
                if not request_line:
                    return
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    line = reader.readline(65537)
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip()] = value.strip()
                length = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
                body = reader.read(length) if length else b""
                message: dict[str, Any] = {}
                if body:
                    try:
                        message = json.loads(body)
                    except ValueError:
                        message = {}
                rpc_method = message.get("method") if isinstance(message, dict) else None
                if isinstance(rpc_method, str):
                    with self._lock:
                        self.methods.append(rpc_method)
                fault = self.faults.get(rpc_method) if isinstance(rpc_method, str) else None
                if fault is not None:
                    self.hostile_started.set()
                    try:
                        fault(self, sock, message)
                    except OSError:
                        self.hung_up.set()
                    return
                if method == "GET":
                    sock.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    continue
                forward = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
                upstream.request(method, path, body=body or None, headers=forward)
                answer = upstream.getresponse()
                data = answer.read()
                out = [f"HTTP/1.1 {answer.status} {answer.reason}\r\n"]
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                        out.append(f"{name}: {value}\r\n")
                out.append(f"Content-Length: {len(data)}\r\n\r\n")
                sock.sendall("".join(out).encode("latin-1") + data)
        except (OSError, ValueError):
            return
        finally:
            upstream.close()
            reader.close()
            try:
                sock.close()
            except OSError:
                pass

    def close(self) -> None:
        self.stopping.set()
        self._listener.close()
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in threads:
            thread.join(5)

    def __enter__(self) -> HostileFront:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
