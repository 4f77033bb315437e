"""Writing a stream as one HTTP response: JSON or SSE, resumption cuts, clients going away.

It owns `pump`, run on a connection's thread: it attaches to a `Stream` as
its consumer and writes its messages until the request's response went out
(DONE), the client went away (DISCONNECTED), the stream was cut on purpose
(CUT, `drop_after_first_event`) or ended (ENDED: cancelled, session gone,
server closing). The response mode decides the framing: JSON answers with
the response alone (in "json" mode, notifications before it are dropped),
anything else opens an SSE response (`_framing.SSEWriter`), primed with an
event id (and `retry`) when the stream is resumable.

How it waits: between batches it polls the stream's `Waker` and the client
socket (a readable socket with no data is a close; pipelined bytes stop the
watch) with a 1 s bound, so a consumer never sleeps past its stream's end.
It knows nothing of eras or sessions; the `reply` callback gives the status
and headers of a JSON answer.
"""

from __future__ import annotations

import logging
import select
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable

from ._framing import RequestHandler, SSEWriter, encode
from ._listener import Waker
from ._protocol import INVALID_REQUEST, JSONDict
from ._streams import CUT, DISCONNECTED, DONE, ENDED, Stream
from ._validation import SESSION_NOT_FOUND, error_body

if TYPE_CHECKING:
    from ._streamable import HTTPServer

_log = logging.getLogger("mcp_sync.testing.http")

#: The SSE `retry` of a cut stream when the server has no `retry_ms`.
DEFAULT_RETRY_MS = 500


def pump(
    owner: HTTPServer,
    h: RequestHandler,
    stream: Stream,
    *,
    mode: str,
    reply: Callable[[JSONDict], tuple[int, dict[str, str]]],
    headers: Mapping[str, str] | None = None,
    resume_after: int | None = None,
    may_drop: bool = False,
) -> str:
    """Write `stream` as this request's HTTP response until its response
    went out (DONE), the client went away (DISCONNECTED), the stream was
    cut on purpose (CUT) or ended (ENDED: cancelled, session gone,
    server closing)."""
    waker = h.waker()
    if not stream.attach(waker):
        return "busy"
    sse: SSEWriter | None = None
    cursor = resume_after or 0
    watch = [True]
    try:
        if mode == "sse" or resume_after is not None:
            sse, cut = _open_sse(owner, h, stream, headers, prime=resume_after is None, may_drop=may_drop)
            if cut:
                return _cut(owner, h, sse, stream, waker, cursor)
        while True:
            waker.drain()
            events, ended = stream.take(cursor)
            for seq, message in events:
                is_response = stream.request_id is not None and "method" not in message
                if sse is None:
                    if is_response:
                        status, extra = reply(message)
                        stream.delivering(seq)
                        h.send_json(status, message, {**(headers or {}), **extra})
                        cursor = seq
                        return DONE
                    if mode == "json" and "id" not in message:
                        cursor = seq  # JSON mode: notifications before the response are dropped
                        continue
                    # A server-to-client request (or, in auto/sse mode, any
                    # message before the response) needs an SSE stream.
                    sse, cut = _open_sse(owner, h, stream, headers, prime=True, may_drop=may_drop)
                    if cut:
                        return _cut(owner, h, sse, stream, waker, cursor)
                data = encode(message).decode("utf-8")
                if is_response:
                    stream.delivering(seq)
                sse.event(data, stream.event_id(seq) if stream.resumable else None)
                cursor = seq
                if is_response:
                    sse.end()
                    return DONE
            if ended is not None:
                if sse is not None:
                    sse.end()
                elif ended == "cancelled":
                    SSEWriter(h, headers or {}).end()
                elif ended == "terminated":
                    h.send_json(404, error_body(SESSION_NOT_FOUND, "Session not found"), headers)
                else:
                    h.close_connection = True
                    h.send_json(503, error_body(INVALID_REQUEST, "Service Unavailable: the server is closing",
                                                 stream.request_id), {"Connection": "close"})
                return ENDED
            if not _wait(h, waker, watch):
                h.close_connection = True
                return DISCONNECTED
    except OSError:
        _log.debug("client went away while writing a response", exc_info=True)
        h.close_connection = True
        return DISCONNECTED
    finally:
        stream.detach(waker, cursor)


def _open_sse(
    owner: HTTPServer, h: RequestHandler, stream: Stream, headers: Mapping[str, str] | None, *, prime: bool, may_drop: bool
) -> tuple[SSEWriter, bool]:
    cut = may_drop and stream.resumable and owner._take_drop()
    extra = dict(headers or {})
    if cut:
        extra["Connection"] = "close"
    sse = SSEWriter(h, extra)
    if prime and stream.resumable:
        sse.event("", stream.event_id(0), owner.retry_ms)
    return sse, cut


def _cut(owner: HTTPServer, h: RequestHandler, sse: SSEWriter, stream: Stream, waker: Waker, cursor: int) -> str:
    sse.retry(owner.retry_ms if owner.retry_ms is not None else DEFAULT_RETRY_MS)
    # Let go of the stream before the client can see the cut, so its
    # resuming GET never finds the stream still attached.
    stream.detach(waker, cursor)
    sse.end()
    h.close_connection = True
    return CUT


def _wait(h: RequestHandler, waker: Waker, watch: list[bool]) -> bool:
    """Wait for the stream's waker or the client closing; False once the client is gone."""
    conn: socket.socket = h.connection
    poller = select.poll()
    poller.register(waker.fileno(), select.POLLIN)
    if watch[0]:
        poller.register(conn.fileno(), select.POLLIN)
    for fd, flags in poller.poll(1000):
        if fd != conn.fileno():
            continue
        if flags & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
            return False
        try:
            peeked = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            return False
        if not peeked:
            return False
        watch[0] = False  # the client sent more (pipelining): stop watching, it is not a close
    return True
