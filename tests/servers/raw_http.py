"""A bare HTTP/1.1 server for transport tests that need what no real
server does on purpose (a held answer, a reset, a session kept for ever).

`RawHTTPServer` listens on 127.0.0.1, serves each connection on a thread
of its own, and reads requests with `read_request`; a subclass answers
them in `handle(sock, method, headers, body)`, returning False to end the
connection. `close()` wakes every thread (the listener and each socket
shut down) and joins them all, so nothing outlives a test.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any, BinaryIO


def read_request(reader: BinaryIO) -> tuple[bytes, dict[str, str], Any] | None:
    """The next request on a connection: its method, its headers (names in
    lower case) and its JSON body ({} when it has none); None at the end."""
    line = reader.readline()
    if not line:
        return None
    method = line.split(b" ", 1)[0]
    headers: dict[str, str] = {}
    while True:
        line = reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    return method, headers, (json.loads(reader.read(length)) if length else {})


class RawHTTPServer:
    """See the module. `release` is set by `close()`, for subclasses whose
    handlers wait on it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/mcp"

    def handle(self, sock: socket.socket, method: bytes, headers: dict[str, str], body: Any) -> bool:
        raise NotImplementedError

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            with self._lock:
                self._socks.append(sock)
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        try:
            while True:
                request = read_request(reader)
                if request is None or not self.handle(sock, *request):
                    return
        except (OSError, ValueError):
            return
        finally:
            reader.close()
            sock.close()

    def close(self) -> None:
        self.release.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accepter.join(5)
        for thread in threads:
            thread.join(5)
