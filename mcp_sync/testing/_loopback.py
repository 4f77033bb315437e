"""What the HTTP test servers share: `LoopbackServer`, and `RecordedRequest`.

`HTTPServer` (Streamable HTTP, `_streamable`) and the suite's HTTP+SSE
server serve a `Server` on a loopback
`Listener` and give tests the same knobs. This module owns what is the
same in both: starting (`start`, `port`, `url`, the context manager), the
order of `close()` (stop accepting, end what the subclass serves, shut the
connections down, join their threads), the request log (`requests`,
`RecordedRequest`), `connections` and `wait_for`, and the first steps of
serving a request (reading its body, recording it).

A subclass owns its sessions and streams, what `close()` ends of them
(`_end_all`) and how a request is served (`_serve`, called by
`_framing.RequestHandler` for every request).
"""

from __future__ import annotations

import collections
import email.message
import json
import ssl
import threading
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ._framing import RequestHandler
from ._listener import Listener
from ._registry import Server

_S = TypeVar("_S", bound="LoopbackServer")


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the server received it.

    `headers` is the `http.client.HTTPMessage` parsed by `http.server` (an
    `email.message.Message`): `headers.get(name)` and `headers.get_all(name)`
    are case-insensitive. `path` is the request target as sent (with any
    query). `json` is the parsed body, or None when it is empty or not JSON."""

    method: str
    path: str
    headers: email.message.Message
    body: bytes
    json: Any


class LoopbackServer:
    """The lifecycle and test knobs shared by `HTTPServer` and other loopback servers.

    Not used on its own: a subclass sets `_thread_name` and defines
    `_serve` (each request) and `_end_all` (what `close()` ends)."""

    #: The name of the listener's threads.
    _thread_name = "mcp-testing"

    def __init__(self, server: Server, host: str, port: int, *, path: str,
                 ssl_context: ssl.SSLContext | None, max_records: int) -> None:
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
            raise ValueError("max_records must be a positive integer")
        self.server = server
        self.host = host
        self.path = path
        self.ssl_context = ssl_context
        self._port = port
        self._lock = threading.RLock()
        #: Notified whenever `requests`, `sessions` or `connections` change.
        self._changed = threading.Condition(self._lock)
        self._close_lock = threading.Lock()
        self._listener: Listener | None = None
        #: The newest `max_records` requests, oldest first.
        self._requests: collections.deque[RecordedRequest] = collections.deque(maxlen=max_records)
        self._closing = False
        self._closed = False

    # -- lifecycle --------------------------------------------------------------

    def start(self: _S) -> _S:
        """Bind, listen and serve on a background thread; returns self."""
        with self._close_lock:
            if self._closing:
                raise RuntimeError(f"this {type(self).__name__} is closed")
            if self._listener is not None:
                raise RuntimeError(f"this {type(self).__name__} is already started")
            self._listener = Listener(self, (self.host, self._port), RequestHandler, lock=self._lock,
                                      changed=self._changed, ssl_context=self.ssl_context, name=self._thread_name)
            self._listener.start()
        return self

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("start() the server first")
        return self._listener.port

    @property
    def url(self) -> str:
        """The URL of `path`, e.g. "http://127.0.0.1:PORT/mcp" (after start())."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{self.port}{self.path}"

    def close(self) -> None:
        """Stop serving: end every session and stream, shut every connection
        down, join every thread started. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            with self._lock:
                self._closing = True
            listener = self._listener
            if listener is not None:
                listener.stop_accepting()
            # Sessions and streams end before the connections are shut, so a
            # stream being written ends the way its transport ends one.
            self._end_all()
            if listener is not None:
                listener.shutdown_connections()
                listener.join()
            self._closed = True

    def _end_all(self) -> None:
        """End every session and stream; `close()` calls it once accepting stopped."""
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self.start() if self._listener is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- test knobs -------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """The HTTP requests received, oldest first (a copy): all of them, or
        the newest `max_records` once more arrived."""
        with self._lock:
            return list(self._requests)

    @property
    def connections(self) -> int:
        """How many client connections are open (a connection counts until
        the server has noticed its end and its thread is finishing)."""
        with self._lock:
            return self._listener.connections if self._listener is not None else 0

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until `predicate()` is true; it is re-checked whenever
        `requests`, `sessions` or `connections` change (it may read them).
        Returns its last value (False after `timeout` seconds)."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    # -- serving ------------------------------------------------------------------

    def _serve(self, h: RequestHandler, method: str) -> None:
        raise NotImplementedError

    def _read_body(self, h: RequestHandler) -> bytes | None:
        """The request's body, or None when it could not be read: then a 400
        went out and the connection closes (where the next request would
        start is unknown)."""
        try:
            return h.read_body()
        except (ValueError, OSError):
            h.close_connection = True
            h.send_body(400, b"Bad Request: unreadable body", "text/plain; charset=utf-8", {"Connection": "close"})
            return None

    def _record(self, h: RequestHandler, method: str, body: bytes) -> Any:
        """Keep one received request (callers hold `_lock`); returns its body
        parsed as JSON, None when it is empty or not JSON."""
        try:
            parsed: Any = json.loads(body) if body else None
        except (ValueError, RecursionError):
            parsed = None
        self._requests.append(RecordedRequest(method, h.path, h.headers, body, parsed))
        self._changed.notify_all()
        return parsed
