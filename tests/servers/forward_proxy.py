"""A small forward proxy on loopback, for the proxy tests.

`ForwardProxy` does what a company's HTTP proxy does, and records it:

- `CONNECT host:port`: opens a TCP connection to the target and relays
  bytes both ways (the client's TLS goes through untouched);
- an absolute-form request (`POST http://host:port/path HTTP/1.1`): sends
  it to the target in origin form (without `Proxy-Authorization`) and
  relays the answer, adding `Connection: close` (one request per
  connection keeps the relay simple);
- `credentials=(user, password)`: anything without the matching
  `Proxy-Authorization: Basic` gets 407;
- `hosts`: names only the proxy can resolve (`{"mcp.internal": "127.0.0.1"}`),
  standing for hosts of a network the client cannot see. Any other name
  than 127.0.0.1, localhost or one of these is refused with 502, so no test
  can send traffic off the machine;
- `refuse_connect=403` (or any status): answers every CONNECT with it.

`records` lists what it did: (method, target, the Proxy-Authorization
header it received or None, the status it answered when it answered
itself, else None). It is thread-safe; `close()` ends every connection and
joins every thread it started.
"""

from __future__ import annotations

import base64
import select
import socket
import threading
from typing import NamedTuple
from urllib.parse import urlsplit

_LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1"}


class Record(NamedTuple):
    method: str
    target: str
    proxy_authorization: str | None
    refused: int | None


class ForwardProxy:
    def __init__(self, *, credentials: tuple[str, str] | None = None, hosts: dict[str, str] | None = None,
                 refuse_connect: int | None = None) -> None:
        self.credentials = credentials
        self.hosts = {**_LOOPBACK, **(hosts or {})}
        self.refuse_connect = refuse_connect
        self._records: list[Record] = []
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._accept_thread = threading.Thread(target=self._accept, name="test-proxy-accept", daemon=True)

    # -- life -------------------------------------------------------------------------

    def start(self) -> ForwardProxy:
        self._accept_thread.start()
        return self

    def __enter__(self) -> ForwardProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stopping.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._accept_thread.is_alive():
            self._accept_thread.join(5)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(5)

    def url(self, user: str | None = None, password: str | None = None) -> str:
        auth = f"{user}:{password}@" if user is not None else ""
        return f"http://{auth}127.0.0.1:{self.port}"

    @property
    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def forwarded(self) -> list[Record]:
        """What it carried (tunnels opened, requests relayed), not refused."""
        return [r for r in self.records if r.refused is None]

    # -- work -------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), name="test-proxy-conn", daemon=True)
            with self._lock:
                if self._stopping.is_set():
                    client.close()
                    return
                self._sockets.add(client)
                self._threads.append(thread)
            thread.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
        if self._stopping.is_set():
            sock.close()
            raise OSError("stopping")

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head, rest = _read_head(client)
            if head is None:
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            given = headers.get("proxy-authorization")
            if self.credentials is not None and given != _basic(*self.credentials):
                self._record(method, target, given, 407)
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                               b"Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n"
                               b"Connection: close\r\n\r\n")
                return
            if method == "CONNECT":
                if self.refuse_connect is not None:
                    self._record(method, target, given, self.refuse_connect)
                    client.sendall(b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                                   % self.refuse_connect)
                    return
                host, _, port = target.rpartition(":")
                upstream = self._open(host.strip("[]"), int(port))
                if upstream is None:
                    self._record(method, target, given, 502)
                    client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                self._record(method, target, given, None)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
                self._splice(client, upstream)
                return
            parts = urlsplit(target)
            upstream = self._open(parts.hostname or "", parts.port or 80) if parts.scheme == "http" else None
            if upstream is None:
                self._record(method, target, given, 502)
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self._record(method, target, given, None)
            body = rest
            length = int(headers.get("content-length", "0") or 0)
            while len(body) < length:
                chunk = client.recv(65536)
                if not chunk:
                    return
                body += chunk
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            kept = [line for line in lines[1:] if line.split(":", 1)[0].strip().lower()
                    not in ("proxy-authorization", "connection", "proxy-connection")]
            request = "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close"]) + "\r\n\r\n"
            upstream.sendall(request.encode("latin-1") + body)
            answer_head, answer_rest = _read_head(upstream)
            if answer_head is None:
                return
            status, *fields = answer_head.decode("latin-1").split("\r\n")
            fields = [f for f in fields if f.split(":", 1)[0].strip().lower() != "connection"]
            client.sendall(("\r\n".join([status, *fields, "Connection: close"]) + "\r\n\r\n").encode("latin-1")
                           + answer_rest)
            self._splice(upstream, client)
        except (OSError, ValueError):
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._sockets.discard(sock)
                    sock.close()

    def _open(self, host: str, port: int) -> socket.socket | None:
        address = self.hosts.get(host.lower())
        if address is None:
            return None  # never leave the machine
        try:
            sock = socket.create_connection((address, port), timeout=5)
        except OSError:
            return None
        sock.settimeout(None)
        self._track(sock)
        return sock

    def _record(self, method: str, target: str, given: str | None, refused: int | None) -> None:
        with self._lock:
            self._records.append(Record(method, target, given, refused))

    def _splice(self, a: socket.socket, b: socket.socket) -> None:
        """Relay bytes both ways until a side closes."""
        pairs = {a: b, b: a}
        while not self._stopping.is_set():
            readable, _, _ = select.select(list(pairs), [], [], 0.2)
            for source in readable:
                data = source.recv(65536)
                if not data:
                    return
                pairs[source].sendall(data)


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _read_head(sock: socket.socket) -> tuple[bytes | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
        if len(data) > 65536:
            raise ValueError("head too long")
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest
