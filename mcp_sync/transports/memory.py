"""The in-process transport: a client and a server object in one process.

The server is any object with `open_session(send) -> session`, where the
session has `receive(message)` and `close()` (`mcp_sync.testing.Server` is
one). Messages cross as JSON text in both directions, so neither side can
mutate the other's dicts and anything that would not survive the wire fails
here too. The server's own threads deliver to the sink.

The server is user code running in the caller's thread, so what it raises
is turned into the errors every transport raises (`McpError`s): a failing
`open_session()` is a `ConnectError` from `start()`, a failing `receive()`
an `InvalidMessage` from `send()`, the server's exception as `__cause__`.
A `TransportError` it raises itself goes on as it is; `KeyboardInterrupt`
and `SystemExit` are never wrapped.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, Callable, Protocol

from ..errors import ConnectError, ConnectionClosed, InvalidMessage, TransportError
from ..protocol import jsonrpc
from .base import MessageSink, Target, Transport


class ServerSession(Protocol):
    def receive(self, message: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class InProcessServer(Protocol):
    def open_session(self, send: Callable[[dict[str, Any]], None]) -> ServerSession: ...


class MemoryTransport(Transport):
    kind = "memory"
    """Always "memory" (see `Target.kind` and `Transport.kind`)."""

    def __init__(self, server: InProcessServer) -> None:
        self._server = server
        self._session: ServerSession | None = None
        self._sink: MessageSink | None = None
        self._lock = threading.Lock()
        # Its own lock: `_lock` is held by start() while the server may
        # already be sending.
        self._count_lock = threading.Lock()
        self._closed = False

    def start(self, sink: MessageSink) -> None:
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the in-process connection is closed")
            self._sink = sink
            try:
                self._session = self._server.open_session(self._from_server)
            except ConnectError:
                raise
            except Exception as exc:  # the server's bug: the channel cannot be opened
                raise ConnectError(
                    f"the in-process server {type(self._server).__name__} failed in open_session(): "
                    f"{type(exc).__name__}: {exc} (the server's bug: fix it, see this error's __cause__)") from exc

    def _from_server(self, message: dict[str, Any]) -> None:
        if self._closed or self._sink is None:
            return
        try:
            text = jsonrpc.encode(message)
            copy = json.loads(text)
        except (TypeError, ValueError) as exc:
            self._sink.transport_failed(InvalidMessage(f"the in-process server sent an unencodable message: {exc}"))
            return
        with self._count_lock:
            self.bytes_received += len(text)
        self._sink.deliver(copy)

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        session = self._session
        if self._closed or session is None:
            raise ConnectionClosed("the in-process connection is closed")
        text = jsonrpc.encode(message)
        with self._count_lock:
            self.bytes_sent += len(text)
        try:
            session.receive(json.loads(text))
        except TransportError:
            raise
        except Exception as exc:
            # One message failed, not the channel: the session stays, as a
            # network server's connection outlives one failed request.
            raise InvalidMessage(
                f"the in-process server {type(self._server).__name__} failed in receive() on "
                f"{_what(message)}: {type(exc).__name__}: {exc} (the server's bug: fix it, see this error's "
                "__cause__; it may have taken effect, and is not sent again)") from exc

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._session is not None:
            self._session.close()

    def discard(self) -> None:
        """In a child after `os.fork()`: forget the session without closing
        it (its threads, and the session itself, are the parent's)."""
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._closed = True
        self._session = None

    def describe(self) -> str:
        return f"in-process server {type(self._server).__name__}"


def _what(message: Mapping[str, Any]) -> str:
    """A message as an error names it: its method, else the id it answers."""
    if not isinstance(message, Mapping):
        return "a batch"  # (typed a Mapping; a list must not break the error)
    method = message.get("method")
    return repr(method) if isinstance(method, str) else f"the answer to {message.get('id')!r}"


class Memory(Target):
    """Target an in-process server: `connect(Memory(server))` or just `connect(server)`.

    The server is any object with `open_session(send)` (see the module
    docstring); `mcp_sync.testing` makes them. Messages cross as JSON text,
    so what would not survive the wire fails here too.

    Args:
        server: An object with `open_session(send)`, such as
            `mcp_sync.testing.demo_server()`.

    Attributes:
        server (InProcessServer): The in-process server each `open()` opens
            a session on.

    Raises:
        TypeError: `server` has no `open_session()`.

    Example::

        client = mcp_sync.connect(Memory(mcp_sync.testing.demo_server()))
        assert client.transport_kind == "memory"
    """

    kind = "memory"
    """Always "memory" (see `Target.kind` and `Transport.kind`)."""

    def __init__(self, server: InProcessServer) -> None:
        if not callable(getattr(server, "open_session", None)):
            raise TypeError(f"{type(server).__name__} is not an in-process MCP server (no open_session())")
        self.server = server

    def open(self) -> Transport:
        """A new transport; its `start()` opens a session on `server`."""
        return MemoryTransport(self.server)
