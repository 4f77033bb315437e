"""The `Transport` interface: how the engine talks to one server over one channel.

A transport moves JSON-RPC messages (dicts) and nothing else: it never looks
inside a result. The engine hands it a `MessageSink` in `start()`; the
transport calls `sink.deliver(message)` for each message that arrives (from
whatever thread reads the channel) and `sink.transport_failed(error)` once if
the channel breaks. `send()` may be called from many threads at once.

A custom transport, for example one line of JSON per message over a socket::

    class SocketTransport(mcp_sync.Transport):
        def start(self, sink):
            self._sink = sink
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()
        def send(self, message, headers=None):
            with self._lock:
                self._sock.sendall(mcp_sync.protocol.jsonrpc.encode(message) + b"\\n")
        def close(self):
            self._sock.close()
            self._thread.join()

and `mcp_sync.connect(Custom(lambda: SocketTransport(...)))`.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Mapping
from typing import Any, Callable, Protocol

from ..errors import McpError, TransportError


class MessageSink(Protocol):
    """Where a transport puts what it receives (the engine implements this).

    `deliver(message, related_to=id)` says the message arrived on the response
    stream of request `id` (per-request transports such as HTTP know this).
    `message` is a dict, or a list for a JSON-RPC batch as
    `jsonrpc.parse` returns it: the sink routes its items one by one.
    `transport_failed(error)` ends the whole channel; `request_failed(id,
    error)` fails one request whose own exchange broke.

    The engine's sink also has `deliver_all(messages)`: the messages of one
    read of a shared stream, in order, handed over together so that each
    waiting caller is woken once per read rather than once per message. It
    is not part of this protocol (a sink need not have it); the stdio
    transport uses it when the sink has it.
    """

    def deliver(self, message: dict[str, Any] | list[Any], related_to: int | str | None = None) -> None:
        """Hand over one decoded message (a dict, or a list for a batch).

        `related_to` is the id of the request on whose own response stream
        it came, when the transport knows it (HTTP); None otherwise. Call
        it from the thread that read the message; it never blocks on IO.

        Args:
            message: The decoded message, or a list for a JSON-RPC batch.
            related_to: The id of the request whose own stream carried it,
                or None.
        """
        ...

    def transport_failed(self, error: TransportError) -> None:
        """Report that the channel broke: every pending request fails with
        `error`. Call it once, when the channel breaks.

        Args:
            error: What every pending request fails with.
        """
        ...

    def session_lost(self, error: TransportError) -> None:
        """The transport found, with no request to tell, that the server
        no longer knows its session (or cannot be reached for it): the
        client sets up a new session. Must only hand the news on.

        Args:
            error: What the server answered (or why it cannot be reached).
        """
        ...

    def events_lost(self, seconds: float) -> None:
        """The transport's stream of messages related to no request (the
        initialize era's GET stream) broke and was opened again without
        resuming it: what the server sent in the last `seconds` may be
        lost. Must only hand the news on.

        Args:
            seconds: How long ago the stream broke.
        """
        ...

    def request_failed(self, request_id: int | str, error: TransportError) -> None:
        """Fail the one request `request_id` whose own exchange broke (its
        HTTP POST or response stream): only its caller (or subscription)
        gets `error`; the channel and other requests are unaffected.

        Args:
            request_id: The JSON-RPC id of the request that failed.
            error: What its caller gets.
        """
        ...


class Transport(abc.ABC):
    """One channel to one server. Subclass it for a custom transport."""

    kind: str = "custom"
    """The kind of transport, as `Client.transport_kind` reports it:
    "stdio", "streamable-http", "sse", "memory", or "custom" for one of
    your own."""

    cancels_by_notification: bool = True
    """True when cancelling a request means sending `notifications/cancelled`
    (stdio and other shared streams); False when the transport cancels by
    closing the request's own stream, through `cancel()`."""

    @abc.abstractmethod
    def start(self, sink: MessageSink) -> None:
        """Open the channel and begin delivering incoming messages to `sink`.

        Args:
            sink: Where every message received goes, from the transport's
                own reading thread.

        Raises:
            TransportError: The channel cannot be opened (`ConnectError`
                for a server that cannot be started or reached).
        """

    restarts_server: bool = True
    """True when the server runs in a process this transport started, so that
    "restart the server" (after the stdio probe) means opening it again."""

    mirrors_headers: bool = False
    """True when the transport mirrors tool parameters into headers
    (`x-mcp-header`), so tools with invalid annotations must be dropped."""

    parallel_writes: int = 1
    """How many of the messages nobody waits on (cancellations, answers to
    the server's requests) `send()` may be called with at once, from as
    many threads: 1 for a shared stream, which writes them in order; more
    where each is a request of its own (HTTP), so that one the server
    leaves unanswered holds up no other."""

    relates_server_requests: bool = False
    """True when a server request related to a call arrives on that call's
    own channel (`deliver(..., related_to=id)`: Streamable HTTP). False for
    one shared stream (stdio, HTTP+SSE, in-process), where a request that
    arrives while exactly one call waits is answered on that call's thread."""

    close_budget: float = 5.0
    """The longest `close()` may take, in seconds: how long a client waits
    for a close it runs on a thread of its own (after a reconnect) before
    its own `close()` returns. A transport whose close may take longer
    says so here."""

    request_timeout: float | None = None
    """The client's default request timeout, set by the client before
    `start()`, for transports that bound work of their own (a DELETE)."""

    retry_ceiling: float = 30.0
    """The longest wait, in seconds, a server may ask for before a stream is
    resumed or reopened (an SSE `retry` field): set by the client before
    `start()` from its reconnect policy's `max_delay`, so a server's hint
    never outlasts the client's own policy."""

    bytes_sent: int = 0
    """Bytes of messages written to the server so far, for `Client.stats()`;
    a transport that does not count leaves it at 0. The bundled ones count
    message bytes (stdio lines, HTTP bodies), not framing such as HTTP heads."""

    bytes_received: int = 0
    """Bytes of messages read from the server so far (stdio lines, HTTP
    bodies and SSE streams), for `Client.stats()`; 0 when not counted."""

    @abc.abstractmethod
    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        """Send one message. Thread-safe. Raises `TransportError` on failure.

        `headers` are per-request transport headers (HTTP); others ignore them.

        Args:
            message: One JSON-RPC message.
            headers: Transport headers for this message, or None.

        Raises:
            TransportError: The message could not be sent.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Close the channel, end every thread the transport started, release
        every resource. Idempotent; after it returns, `sink` is never called."""

    def exchange(
        self, message: Mapping[str, Any], headers: Mapping[str, str] | None, deadline: float | None,
    ) -> float:
        """Send a request whose caller waits for its answer right after, on
        the caller's thread. `deadline` (a `time.monotonic()` value, or None)
        bounds everything this does.

        The default just calls `send()`. A transport where each request has
        its own answer channel (Streamable HTTP) overrides it to do the whole
        exchange here and deliver what it reads to the sink, so the common
        answer needs no thread hand-off. Returns the seconds spent on
        something that must not count against the call's deadline (a person
        approving an authorization), usually 0.

        Args:
            message: The JSON-RPC request.
            headers: Transport headers for it, or None.
            deadline: When the call gives up, as a `time.monotonic()` value;
                None: never.

        Returns:
            The seconds not to count against the call's deadline (usually 0).

        Raises:
            TransportError: The request could not be sent.
        """
        self.send(message, headers)
        return 0.0

    def cancel(self, request_id: int | str) -> None:
        """Stop one request's own stream, if it has one (per-request transports).

        Must not block on IO: it is called from the caller that gave up, and
        from `close()`. (Shutting a socket down is fine; writing is not.) The
        `notifications/cancelled` that `cancels_by_notification` calls for is
        sent by the engine's sender thread, not here.

        Args:
            request_id: The JSON-RPC id of the request given up on.
        """

    def discard(self) -> None:
        """In a child process after `os.fork()`: let go of this transport
        without any IO and without disturbing the parent, which still uses
        the same server, sockets and pipes. Close this process's copies of
        file descriptors only; send nothing (no DELETE, no shutdown, no
        signal to the server process), join nothing (the threads were not
        copied). The default does nothing, which leaks the copies; the
        built-in transports override it."""

    def read_nothing(self) -> bool:
        """Whether the server has read none of what was sent to it, read
        without any IO once it is gone: True only when that is known (a
        stdio pipe still holding every byte written). A server that exited
        without reading anything was not upset by a request; it failed on
        its own, and starting it again would fail the same way. The default
        (False: unknown) suits any transport."""
        return False

    def credential_scope(self) -> str | None:
        """Who requests on this transport are made as, for keeping the
        private results of a shared cache apart: a string that differs
        between identities (a token's digest, say), read without any IO;
        None when requests carry no credentials (the default). Called on
        the calling thread before each cached request."""
        return None

    def negotiated(self, protocol_version: str, stateless: bool) -> None:
        """Told once the protocol version is settled (and again if it changes),
        for transports whose framing depends on it (HTTP headers, sessions).

        Args:
            protocol_version: The revision settled, such as ``"2026-07-28"``.
            stateless: True for a stateless revision (2026-07-28: no
                session), False for the initialize era.
        """

    def describe(self) -> str:
        """A short human description for error messages."""
        return type(self).__name__


class Target(abc.ABC):
    """Something `connect()` can open: it makes a fresh `Transport` each time.

    The engine opens a second transport when it must restart the server
    (the stdio probe fallback), so a target is a recipe, not a channel.
    """

    kind: str = "custom"
    """The kind of transport it opens (see `Transport.kind`)."""

    @abc.abstractmethod
    def open(self) -> Transport:
        """A new, not yet started transport."""

    def fallback(self, refusal: McpError | None = None) -> Target | None:
        """The target to try instead when this one refused the client's
        first exchange with `refusal` (None: the one it falls back to, as
        chosen before); None when there is none. A Streamable HTTP URL
        answers with the old HTTP+SSE transport at the same URL when its
        `sse_fallback` allows it; the others have no fallback.

        Args:
            refusal: The error the first exchange failed with, or None.

        Returns:
            The target to try instead, or None.
        """
        return None

    def server_key(self) -> Hashable | None:
        """What identifies the server this target reaches, for remembering
        its protocol era across connects (a stdio command line, an HTTP
        origin and path); None when there is nothing stable to go by."""
        return None


class Custom(Target):
    """A target from a factory: `Custom(lambda: MyTransport(...))`.

    Args:
        factory: Called with no arguments each time a transport is needed
            (a restart opens another); returns a new, not yet started
            `Transport`.

    Raises:
        TypeError: `factory` is not callable.
    """

    def __init__(self, factory: Callable[[], Transport]) -> None:
        if not callable(factory):
            raise TypeError("Custom() needs a callable that returns a Transport")
        self._factory = factory

    def open(self) -> Transport:
        """A new transport from the factory; `TypeError` if the factory
        returned something that is not a `Transport`."""
        transport = self._factory()
        if not isinstance(transport, Transport):
            raise TypeError(f"the Custom factory returned {type(transport).__name__}, not a Transport")
        return transport
