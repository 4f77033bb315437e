"""Streams: the server messages of one HTTP response, and the legacy sessions that own them.

It owns `Stream` (the messages of one POST's request, or of a session's
standalone GET stream, kept in order and numbered for SSE ids and
resumption) and `LegacySession` (one `initialize`-based session: its
`ServerSession`, opened with `related=True`, and its streams by number and
by request id). A session's `send` callback routes each message to the
stream of the request it relates to (None: the standalone stream) and
wakes that stream's consumer, the connection thread writing it
(`_responses.pump`). It must not write to sockets.

Locks: `Stream.lock` guards a stream's events and consumer;
`LegacySession.lock` guards its stream tables; neither is held while
calling into the `ServerSession` or waking a consumer.
"""

from __future__ import annotations

import itertools
import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any

from ._listener import Waker
from ._protocol import JSONDict, RequestId, is_request_id
from ._registry import Server
from ._session import ServerSession

if TYPE_CHECKING:
    from ._streamable import HTTPServer

_log = logging.getLogger("mcp_sync.testing.http")

#: How a response stream's writing ended (see `_responses.pump`).
DONE, DISCONNECTED, ENDED, CUT = "done", "disconnected", "ended", "cut"


class Stream:
    """The server messages of one HTTP response stream, kept in order.

    A POST stream (`request_id` set) is finished by its request's response; a
    session's standalone stream (`request_id` None) never finishes. Events are
    numbered 1, 2, ... (the priming event is 0); a resumable stream keeps them
    all so a client can resume after any event id."""

    def __init__(self, number: int, request_id: RequestId | None, resumable: bool) -> None:
        self.number = number
        self.request_id = request_id
        self.resumable = resumable
        self.lock = threading.Lock()
        self.events: list[JSONDict] = []
        self.finished = False
        self.ended: str | None = None  # "terminated", "closing" or "cancelled"
        self.consumer: Waker | None = None
        self.delivered = 0

    def event_id(self, seq: int) -> str:
        return f"{self.number}-{seq}"

    def push(self, message: JSONDict) -> bool:
        """Queue a message; False when the stream no longer takes any."""
        with self.lock:
            if self.ended is not None or self.finished:
                return False
            self.events.append(message)
            if self.request_id is not None and "method" not in message:
                self.finished = True
            consumer = self.consumer
        if consumer is not None:
            consumer.wake()
        return True

    def end(self, reason: str) -> None:
        with self.lock:
            if self.ended is None:
                self.ended = reason
            consumer = self.consumer
        if consumer is not None:
            consumer.wake()

    def take(self, after: int) -> tuple[list[tuple[int, JSONDict]], str | None]:
        with self.lock:
            return [(seq, msg) for seq, msg in enumerate(self.events[after:], after + 1)], self.ended

    def attach(self, waker: Waker) -> bool:
        with self.lock:
            if self.consumer is not None:
                return False
            self.consumer = waker
            return True

    def detach(self, waker: Waker, delivered: int) -> None:
        with self.lock:
            if self.consumer is waker:
                self.consumer = None
            self.delivered = max(self.delivered, delivered)

    def delivering(self, seq: int) -> None:
        """Count events up to `seq` as delivered (called just before writing
        the response, so a finished stream is never found for resumption)."""
        with self.lock:
            self.delivered = max(self.delivered, seq)

    @property
    def complete(self) -> bool:
        """The response was written to some consumer."""
        with self.lock:
            return self.finished and self.delivered >= len(self.events)


class LegacySession:
    """One `initialize`-based session: its `ServerSession` and its streams."""

    def __init__(self, owner: HTTPServer, server: Server) -> None:
        self.owner = owner
        self.id = uuid.uuid4().hex
        self.lock = threading.Lock()
        self.streams: dict[int, Stream] = {}
        self.by_request: dict[RequestId, Stream] = {}
        self.standalone: Stream | None = None
        self.ended = False
        self.initialize_id: RequestId | None = None
        self._numbers = itertools.count(1)
        self.session: ServerSession = server.open_session(self._send, related=True)

    @property
    def version(self) -> str | None:
        return self.session.protocol_version

    def _send(self, message: JSONDict, related: RequestId | None) -> None:
        if related is not None and related == self.initialize_id and "error" in message:
            # A failed initialize creates no session: unknown before the client can see the error.
            self.owner._forget(self)
        with self.lock:
            if related is None:
                stream = self.standalone
            else:
                stream = self.by_request.get(related)
                if stream is not None and "method" not in message:
                    del self.by_request[related]
        if stream is not None:
            stream.push(message)
        else:
            _log.debug("session %s: no stream for %r (related to %r); dropped", self.id, message.get("method"), related)

    def open_request_stream(self, request_id: RequestId) -> Stream | None:
        """A new POST stream for `request_id`; None if that id is in flight."""
        with self.lock:
            if self.ended or request_id in self.by_request:
                return None
            stream = Stream(next(self._numbers), request_id, self.owner.sse_ids)
            self.streams[stream.number] = stream
            self.by_request[request_id] = stream
            return stream

    def open_standalone(self) -> Stream | None:
        """A new standalone stream; None if one is being consumed."""
        with self.lock:
            if self.ended:
                return None
            old = self.standalone
            if old is not None:
                with old.lock:
                    busy = old.consumer is not None
                if busy:
                    return None
                self.streams.pop(old.number, None)
            stream = Stream(next(self._numbers), None, self.owner.sse_ids)
            self.streams[stream.number] = stream
            self.standalone = stream
            return stream

    def find(self, event_id: str) -> tuple[Stream, int] | None:
        number, sep, seq = event_id.partition("-")
        if not sep or not number.isdigit() or not seq.isdigit():
            return None
        with self.lock:
            stream = self.streams.get(int(number))
        if stream is None or not stream.resumable or stream.complete:
            return None
        with stream.lock:
            if int(seq) > len(stream.events):
                return None
        return stream, int(seq)

    def release(self, stream: Stream, outcome: str) -> None:
        """Forget a stream its consumer is done with, unless it can still be resumed."""
        keep = stream.resumable and outcome in (DISCONNECTED, CUT) and not stream.complete
        if stream.request_id is None:
            keep = keep or (stream.resumable and outcome == DISCONNECTED)
        with self.lock:
            if keep and not self.ended:
                return
            if self.streams.get(stream.number) is stream:
                del self.streams[stream.number]
            if stream.request_id is not None and self.by_request.get(stream.request_id) is stream:
                del self.by_request[stream.request_id]
            if self.standalone is stream:
                self.standalone = None

    def cancel(self, request_id: Any) -> None:
        with self.lock:
            stream = self.by_request.pop(request_id, None) if is_request_id(request_id) else None
        if stream is not None:
            stream.end("cancelled")

    def terminate(self, reason: str = "terminated") -> None:
        with self.lock:
            if self.ended:
                return
            self.ended = True
            streams = list(self.streams.values())
            self.streams.clear()
            self.by_request.clear()
            self.standalone = None
        for stream in streams:
            stream.end(reason)
        self.session.close()
