"""What answers one POSTed request over Streamable HTTP: the checks of a JSON
answer, and the SSE stream of one request (`AnswerStream`).

Owns: reading a request's SSE answer into messages for the sink, each tagged
with the request (a batch split, a response for another request dropped:
a wrong id must never reach another caller), where reading stops (the
request's response, the stream's end or break), reading the stream's end so
its connection can be reused, and, in the initialize era, resuming a stream
that broke after an event id, as often as `max_resume_attempts` allows.

Must not know: how the request was sent or a connection is given back
(`http_request`, `pool`), what a session is beyond its `resume()`, which
thread reads (the transport decides, and hands a stream from the caller's
thread to an exchange thread), or what the messages mean. It knows the
transport through `AnswerLink`.

How it works. The transport makes an `AnswerStream` for an answer whose head
says `text/event-stream`. On the caller's thread, `read(on_caller=True)`
stops as soon as a chunk brings something other than the response (the
caller must see it while the stream is open) and raises what a deadline,
cancellation or close() made of a read, as the JSON path does; `end(wait=)`
then reads the stream's end, for a little while only. On an exchange thread
`finish()` reads on from where that stopped, to the response, resuming as
needed, and gives the connection back.

Locks: none. A stream has one reader at a time (the caller until the
hand-off, then one exchange thread); another thread stops it only through
its exchange (`Exchange.abort()`, under the exchange's own lock).
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any, Callable, NamedTuple

from ..errors import ConnectionClosed, InvalidMessage, MessageTooLarge
from ..protocol import jsonrpc
from ..protocol.sse import EventTooLarge, SSEParser
from ..waiting import deadline_in, remaining
from .decoding import DecodingError, UnsupportedEncoding
from .http11 import Response
from .http_request import READ_CHUNK, Requester, sse_events, stream_decoder
from .http_session import DEFAULT_RETRY_MS, Session
from .pool import Exchange

log = logging.getLogger("mcp_sync.transport.http")

#: How long the rest of an SSE stream may take to end after its response
#: (a server SHOULD close it then) for its connection to be reused.
_STREAM_END_SECONDS = 0.5

#: A message, or a batch of them, as the sink takes it.
Message = dict[str, Any] | list[Any]


class AnswerLink(NamedTuple):
    """What an answer stream needs of the transport that reads it."""

    wire: Requester
    session: Session
    #: Hand a message (or batch) for the exchange's request to the sink,
    #: unless the exchange was stopped.
    deliver: Callable[[Exchange, Message], None]
    #: Whether the transport's close() has begun.
    closing: Callable[[], bool]
    #: Whether the connection is in the initialize era (streams may resume).
    initialize_era: Callable[[], bool]
    #: The longest wait a server's `retry` hint may ask for, in seconds.
    retry_ceiling: Callable[[], float]


class AnswerStream:
    """The SSE answer of one request: see the module's docstring. `done` says
    how reading stopped: "delivered" (not read yet, or it stopped for the
    caller: reading goes on), "response" (only the stream's end is left),
    "eof" or "broken" (resumed, if it can be)."""

    def __init__(self, exchange: Exchange, response: Response, link: AnswerLink) -> None:
        self.exchange = exchange
        #: The stream read now: the POST's answer, then a resumption's.
        self.response = response
        self._link = link
        self._parser = SSEParser(max_event_bytes=link.wire.target.max_response_bytes)
        self._decoder = stream_decoder(response)
        self.done = "delivered"

    def finish(self) -> None:
        """Read the stream until its response; resume it with GET and
        `Last-Event-ID` (initialize era) if it breaks after an event id.
        Gives the connection back; raises `ConnectionClosed` when the
        stream ended for good before the response."""
        link, exchange, parser = self._link, self.exchange, self._parser
        if self.done == "delivered":
            self.read()
        self.end()
        attempts = 0
        while self.done != "response" and link.initialize_era() and parser.last_event_id is not None:
            if attempts >= link.wire.target.max_resume_attempts:
                break
            attempts += 1
            delay = min((parser.retry_ms if parser.retry_ms is not None else DEFAULT_RETRY_MS) / 1000.0,
                        link.retry_ceiling())
            if exchange.stop.wait(delay) or link.closing():
                return
            log.debug("resuming the stream of request %r after event %r", exchange.request_id, parser.last_event_id)
            self.response = link.session.resume(exchange, parser.last_event_id)
            self._decoder = stream_decoder(self.response)
            self.read()
            self.end()
        if self.done != "response" and not exchange.stop.is_set():
            raise ConnectionClosed(f"the response stream of request {exchange.request_id!r} ended before the response")

    def end(self, wait: float | None = None) -> bool:
        """Give the stream's connection back: for reuse when the stream ended
        cleanly (a server ends it right after the response: with chunked
        framing, the terminating chunk), else closed. With `wait` (on the
        caller's thread, after the response): when the end has not come
        within `wait` seconds, nothing is given back and True says the
        stream is still open (the caller hands it to an exchange thread)."""
        exchange, response = self.exchange, self.response
        if self.done == "response" and not response.isclosed() and not exchange.stop.is_set():
            try:
                response.deadline = time.monotonic() + _STREAM_END_SECONDS
                waited = deadline_in(wait)
                left = READ_CHUNK
                while left > 0 and not response.isclosed():
                    # The caller reads only what has come (within `wait`).
                    if waited is not None and not response.ready(remaining(waited)):
                        return True
                    chunk = response.read1(left)
                    if not chunk:
                        break
                    left -= len(chunk)
            except (OSError, ValueError):
                pass  # not ended in time, or broken: the connection is closed, not reused
        if self.done == "broken":
            exchange.release(reusable=False)
        else:
            self._link.wire.done(exchange, response)
        return False

    def read(self, *, on_caller: bool = False) -> str:
        """Feed the stream to the parser, and set and return `done`:
        'response' once this request's response arrived (reading stops
        there), 'eof' at the stream's end, 'broken' when it broke (or the
        exchange was aborted). On the caller's thread (`on_caller`), also
        'delivered' once a chunk brought a message other than the response
        (the caller must see it while the stream is open); a read that
        failed because the exchange stopped, the transport closed or the
        caller's deadline passed is raised, as on the JSON path."""
        self.done = self._read(on_caller)
        return self.done

    def _read(self, on_caller: bool) -> str:
        link, exchange, response, parser = self._link, self.exchange, self.response, self._parser
        try:
            delivered = False
            while True:
                chunk = response.read1(READ_CHUNK)
                link.wire.count(received=len(chunk))
                for event in sse_events(parser, self._decoder, chunk):
                    if not event.data.strip():
                        continue  # a priming event: an id and no message
                    try:
                        message = jsonrpc.parse(event.data)
                    except InvalidMessage as exc:
                        raise InvalidMessage(f"an SSE event of request {exchange.request_id!r} is not JSON-RPC: {exc}") from None
                    if isinstance(message, list):  # a batch (2025-03-26): its items, minus others' responses
                        items, answered = batch_for(exchange.request_id, message)
                        if items:
                            link.deliver(exchange, items)
                        if answered:
                            return "response"
                        delivered = delivered or bool(items)
                        continue
                    answer = is_response(message)
                    if answer and message.get("id") != exchange.request_id:
                        log.warning("dropped a response for %r on the stream of request %r",
                                    message.get("id"), exchange.request_id)
                        continue
                    link.deliver(exchange, message)
                    if answer:
                        return "response"
                    delivered = True
                if not chunk:
                    return "eof"
                if on_caller and delivered:
                    return "delivered"
        except EventTooLarge as exc:
            raise MessageTooLarge(
                f"an SSE event of request {exchange.request_id!r} is larger than max_response_bytes={exc.limit}",
                limit=exc.limit,
            ) from None
        except (DecodingError, UnsupportedEncoding) as exc:
            raise InvalidMessage(f"the response stream of request {exchange.request_id!r} could not be decoded: "
                                 f"{exc}") from None
        except (OSError, ValueError) as exc:
            if on_caller and (exchange.stop.is_set() or link.closing() or isinstance(exc, socket.timeout)):
                raise
            if exchange.stop.is_set() or link.closing():
                return "broken"
            if link.initialize_era() and parser.last_event_id is not None:
                log.debug("the stream of request %r broke: %s", exchange.request_id, exc)
                parser.reconnect()  # drop the half-received line; resume from the last id
                return "broken"
            raise ConnectionClosed(f"the response stream of request {exchange.request_id!r} broke: {exc}") from exc


# -- what a JSON answer may hold ---------------------------------------------------------------------


def json_answer(request_id: Any, payload: bytes) -> Message:
    """The message (or batch) of a JSON answer to request `request_id`;
    `InvalidMessage` unless it holds that request's response. Checked
    before delivery: a wrong id must never reach another caller."""
    message = jsonrpc.parse(payload)
    if isinstance(message, list):  # a batch (2025-03-26), which must hold the response
        message, answered = batch_for(request_id, message)
    else:
        answered = message.get("id") == request_id and is_response(message)
    if not answered:
        raise InvalidMessage(
            f"the server answered request {request_id!r} with something else: "
            f"{payload[:200].decode('utf-8', 'replace')}"
        )
    return message


def json_rpc_error(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error response in an HTTP error body, if it holds one."""
    try:
        message = jsonrpc.decode(body)
    except InvalidMessage:
        return None
    if isinstance(message.get("error"), dict) and "code" in message["error"]:
        return message
    return None


def is_response(message: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message)


def batch_for(request_id: Any, batch: list[Any]) -> tuple[list[Any], bool]:
    """A batch that came on the answer channel of `request_id`: its items
    minus responses to other requests (dropped, as a wrong id must never
    reach another caller), and whether it holds this request's response.
    Other items, invalid ones included, are left for the sink to route."""
    kept: list[Any] = []
    answered = False
    for item in batch:
        if is_response(item):
            if item.get("id") != request_id:
                log.warning("dropped a response for %r in a batch on the stream of request %r",
                            item.get("id"), request_id)
                continue
            answered = True
        kept.append(item)
    return kept, answered
