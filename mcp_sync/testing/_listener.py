"""A loopback HTTP/1.1 listener with one tracked thread per connection.

It owns the listening socket, the accept thread and the connection threads
of a test server (`HTTPServer`, `AuthServer`), so that `close()` can stop
accepting, shut every connection down and join every thread it started. It
knows nothing of what is served: each connection runs `http.server`'s
request loop with the server's handler class, and the handler reaches its
server through `self.server.owner`.

How it works: the accept thread waits in a selector on the listening socket
and a `Waker` (no polling, unlike `serve_forever`); `stop_accepting()` sets
the closing flag and wakes it. Each accepted socket gets `TCP_NODELAY`
(small writes must not wait for delayed ACKs), then a daemon thread,
registered under the owner's lock before it starts so `join()` never misses
one; a connection arriving while closing is shut at once. A TLS handshake
runs on the connection's own thread, so a client that never completes it
blocks nothing else. The lock is the owner's, and when the owner passes a
condition on it, every change of the connection set notifies it (its
`wait_for` predicates may read `connections`).
"""

from __future__ import annotations

import http.server
import logging
import selectors
import socket
import socketserver
import ssl
import threading
from typing import Any

_log = logging.getLogger("mcp_sync.testing.http")

#: How many entries each per-request log of a test server keeps by default
#: (`HTTPServer.requests`, `AuthServer.requests`, ...): the newest ones, so
#: memory stays flat however long a server runs.
DEFAULT_MAX_RECORDS = 1000


class Waker:
    """A socketpair whose read end makes a `select`/`poll` return when written to."""

    def __init__(self) -> None:
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)

    def fileno(self) -> int:
        return self._r.fileno()

    def wake(self) -> None:
        try:
            self._w.send(b"\0")
        except OSError:  # full (already awake) or closed
            pass

    def drain(self) -> None:
        try:
            while self._r.recv(4096):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self._r.close()
        self._w.close()


class SocketServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 overflows when a client pool opens
    # many connections at once (the kernel may then reset one).
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler], owner: Any) -> None:
        #: What the handlers serve for (`self.server.owner` in a handler).
        self.owner = owner
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, which can be slow.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        _log.debug("error serving %s", client_address, exc_info=True)


class Listener:
    """Accept connections on `address` and serve each on its own tracked thread.

    `owner` is what the handlers reach as `self.server.owner`; `lock` is the
    owner's lock (it guards the connection set), `changed` an optional
    condition on it, notified when connections come and go."""

    def __init__(
        self,
        owner: Any,
        address: tuple[str, int],
        handler: type[http.server.BaseHTTPRequestHandler],
        *,
        lock: threading.Lock | threading.RLock,
        changed: threading.Condition | None = None,
        ssl_context: ssl.SSLContext | None = None,
        name: str,
    ) -> None:
        self._lock = lock
        self._changed = changed
        self._ssl_context = ssl_context
        self._name = name
        self._httpd = SocketServer(address, handler, owner)
        self._waker = Waker()
        self._thread: threading.Thread | None = None
        self._threads: set[threading.Thread] = set()
        self._connections: set[socket.socket] = set()
        self._closing = False

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def connections(self) -> int:
        """How many connections are open (callers hold the lock or accept a racy count)."""
        return len(self._connections)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._accept_loop, name=self._name, daemon=True)
        self._thread.start()

    def stop_accepting(self) -> None:
        """Stop the accept thread, join it and close the listening socket."""
        with self._lock:
            self._closing = True
        if self._thread is not None:
            self._waker.wake()
            self._thread.join()
        self._httpd.server_close()
        self._waker.close()

    def shutdown_connections(self) -> None:
        """Shut every open connection down: wakes handlers blocked reading the next request."""
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def join(self) -> None:
        """Join every connection thread (except the calling one)."""
        while True:
            with self._lock:
                threads = [t for t in self._threads if t is not threading.current_thread()]
            if not threads:
                return
            for t in threads:
                t.join()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.notify_all()

    def _accept_loop(self) -> None:
        httpd, waker = self._httpd, self._waker
        with selectors.DefaultSelector() as selector:
            selector.register(httpd.socket, selectors.EVENT_READ)
            selector.register(waker.fileno(), selectors.EVENT_READ)
            while True:
                ready = selector.select()
                with self._lock:
                    if self._closing:
                        return
                if any(key.fileobj is httpd.socket for key, _ in ready):
                    try:
                        request, client_address = httpd.get_request()
                    except OSError:
                        continue
                    if httpd.verify_request(request, client_address):
                        self._start_connection(request, client_address)
                    else:
                        httpd.shutdown_request(request)

    def _start_connection(self, request: socket.socket, client_address: Any) -> None:
        try:  # small writes (headers, then a body or an event) must not wait for delayed ACKs
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        thread = threading.Thread(target=self._connection, args=(request, client_address),
                                  name=f"{self._name}-conn", daemon=True)
        with self._lock:
            closing = self._closing
            if not closing:
                self._threads.add(thread)
                self._connections.add(request)
                self._notify()
        if closing:
            self._httpd.shutdown_request(request)
            return
        thread.start()

    def _connection(self, request: socket.socket, client_address: Any) -> None:
        httpd = self._httpd
        plain = request
        try:
            if self._ssl_context is not None:
                # The handshake runs here, on the connection's own thread, so a
                # client that never completes it blocks nothing else.
                request = self._ssl_context.wrap_socket(request, server_side=True)
                with self._lock:
                    # wrap_socket detached the plain socket: track the one that can be shut down.
                    self._connections.discard(plain)
                    self._connections.add(request)
            httpd.finish_request(request, client_address)
        except Exception:
            httpd.handle_error(request, client_address)
        finally:
            httpd.shutdown_request(request)
            with self._lock:
                self._connections.discard(plain)
                self._connections.discard(request)
                self._threads.discard(threading.current_thread())
                self._notify()
