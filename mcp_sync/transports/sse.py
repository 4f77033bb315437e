"""The HTTP+SSE transport of protocol revision 2024-11-05 (deprecated since
2025-03-26, still served by many servers at `/sse`).

Owns: what goes over HTTP for that transport: the one event stream (a GET
whose first event, `endpoint`, names where messages go), the POSTs of every
message to that endpoint, and the reader thread that delivers what the
stream carries. It moves JSON-RPC messages; what they mean is the engine's
business.

Must not know: how connections are dialed, counted or stopped (`pool`), how
HTTP/1.1 is framed (`http11`), how credentials are made (`http_auth`), or
what the options of an HTTP target mean: it is built on the Streamable
HTTP transport (`http`), whose request loop (`http_request`: authorization,
redirects, TLS, errors, byte counts) every request here goes through.

How it works. `start()` sends the GET on the calling thread and reads the
stream until its `endpoint` event, all bounded by `connect_timeout`; the
endpoint is resolved against the stream's URL and refused when it names
another origin. The stream then goes to a reader thread, which delivers each
`message` event to the sink as a message related to no request (responses,
notifications and server requests alike: the engine routes them by id and
progress token, as over stdio). Every message the client sends is its own
POST to the endpoint, answered 202 with no message: a caller's request on
the caller's thread, bounded by its deadline (or by `request_timeout` when
it has none), everything else bounded by `request_timeout`. Cancelling is
the `notifications/cancelled` message (`cancels_by_notification`); the
stream is never closed for one request.

The stream ending or breaking ends the connection: the engine fails every
pending call with `ConnectionClosed` (an oversize event with
`MessageTooLarge`), and the client's reconnect policy, if any, opens a new
stream, gets a new endpoint and initializes again. `close()` aborts the
stream and every POST and joins the reader.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConnectError, ConnectionClosed, InvalidMessage, MessageTooLarge, TransportError
from ..protocol import jsonrpc
from ..protocol.sse import Event, EventTooLarge, SSEParser
from .base import MessageSink
from .decoding import Decoder
from .http import HTTPTransport
from .http_request import ERROR_BODY_PREVIEW, READ_CHUNK, decoder_for, sse_events
from .http_session import GET_JOIN_SECONDS
from .http11 import Response
from .pool import Exchange, NoFreeSlot, Stopped

if TYPE_CHECKING:
    from .http_target import SSE

log = logging.getLogger("mcp_sync.transport.sse")


class SSETransport(HTTPTransport):

    kind = "sse"
    """Always "sse" (see `Target.kind` and `Transport.kind`)."""
    restarts_server = False
    mirrors_headers = False
    relates_server_requests = False  # one stream carries every answer

    def __init__(self, target: SSE) -> None:
        super().__init__(target)
        self._session.get_offered = False  # Streamable HTTP's own GET stream does not exist here
        self._stream_url = target.url
        self._stream: Exchange | None = None
        self._reader: threading.Thread | None = None
        self._endpoint: str | None = None
        self._parser = SSEParser(max_event_bytes=target.max_response_bytes)
        self._decoder: Decoder | None = None  # a compressed stream's (gzip, deflate)

    @property
    def cancels_by_notification(self) -> bool:  # type: ignore[override]
        return True  # one shared stream: closing it would cancel everything

    @property
    def endpoint(self) -> str | None:
        """Where messages are POSTed: the URL the `endpoint` event named."""
        return self._endpoint

    def describe(self) -> str:
        return f"HTTP+SSE server {self._stream_url}"

    # -- the stream ----------------------------------------------------------------------

    def start(self, sink: MessageSink) -> None:
        self._sink = sink
        limit = self._target.connect_timeout
        exchange = Exchange("sse-stream", self._streams, deadline=time.monotonic() + limit)
        with self._lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            self._stream = exchange
        try:
            response = self._open_stream(exchange, limit)
            with self._lock:
                if self._closing:
                    raise ConnectionClosed("the connection was closed while it opened")
                # From here on the stream lasts as long as the connection.
                exchange.deadline = response.deadline = None
                self._reader = threading.Thread(target=self._read, args=(exchange, response), daemon=True,
                                                name="mcp-sync-sse-reader")
                self._reader.start()
        except BaseException:
            exchange.release(reusable=False)
            raise

    def _open_stream(self, exchange: Exchange, limit: float) -> Response:
        """GET the stream and read it up to its `endpoint` event (delivering
        any message before it); the endpoint is then where POSTs go."""
        url = self._stream_url
        try:
            response = self._session.get(exchange, {"Cache-Control": "no-cache"})
            self._stream_url = url = self._url  # after any redirect the GET followed
            if response.status != 200:
                preview = self._wire.read_body(response, ERROR_BODY_PREVIEW, truncate=True)
                error = self._status_error(response, preview, session=False)
                if response.status in (400, 405, 406) and not getattr(self._target, "automatic", True):
                    # What a Streamable HTTP server answers a GET without a
                    # session (or one it does not serve): the other transport.
                    error.args = (f"{error}; a server on the newer Streamable HTTP transport answers a GET so: "
                                  "connect to the URL itself (or HTTP(url); \"type\": \"http\" in a config file), "
                                  "not SSE(url)",)
                raise error
            content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
            if content_type != "text/event-stream":
                self._wire.drain(response)
                raise ConnectError(f"{url} answered the GET with {content_type or 'no content type'!r}, not an "
                                   "event stream: it does not serve the HTTP+SSE transport")
            self._decoder = decoder_for(response)
            while self._endpoint is None:
                chunk = response.read1(READ_CHUNK)
                self._count(received=len(chunk))
                for event in sse_events(self._parser, self._decoder, chunk):
                    self._on_event(event)
                if not chunk and self._endpoint is None:
                    if self._closing:  # (closing it ends the read this way too)
                        raise Stopped
                    raise ConnectError(f"the event stream of {url} ended before its endpoint event: "
                                       "it does not serve the HTTP+SSE transport")
            return response
        except Stopped:
            raise ConnectionClosed("the connection was closed while it opened") from None
        except EventTooLarge as exc:
            raise MessageTooLarge(f"an SSE event from {url} is larger than max_response_bytes={exc.limit}",
                                  limit=exc.limit) from None
        except socket.timeout:
            if self._closing:
                raise ConnectionClosed("the connection was closed while it opened") from None
            raise ConnectError(f"{url} sent no endpoint event within connect_timeout={limit:g} s: it does not "
                               "serve the HTTP+SSE transport, or is too slow") from None
        except (OSError, ValueError) as exc:
            if self._closing:
                raise ConnectionClosed("the connection was closed while it opened") from None
            raise ConnectError(f"GET {url} failed: {exc}") from exc
        except (TransportError, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            # A token function that fails (its secrets store is down), or a
            # defect: the caller still gets an McpError.
            raise ConnectError(f"GET {url} failed: {type(exc).__name__}: {exc}") from exc

    def _on_event(self, event: Event) -> None:
        """One event of the stream: the endpoint (the first one), or a message."""
        if event.event == "endpoint":
            if self._endpoint is None:
                self._use_endpoint(event.data.strip())
            else:
                log.debug("ignored another endpoint event from %s: %r", self._stream_url, event.data[:200])
            return
        if event.event != "message" or not event.data.strip():
            log.debug("ignored an SSE event of type %r from %s", event.event, self._stream_url)
            return
        try:
            message = jsonrpc.parse(event.data)
        except InvalidMessage as exc:
            raise InvalidMessage(f"an SSE event from {self._stream_url} is not JSON-RPC: {exc}") from None
        sink = self._sink
        if sink is not None and not self._closing:
            sink.deliver(message)

    def _use_endpoint(self, data: str) -> None:
        """Send every message to the URL the endpoint event names, once it
        is known to be on the stream's origin: messages (and credentials)
        go only to the server the user named."""
        url = urllib.parse.urljoin(self._stream_url, data)
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = -1
        here = (self._target.scheme, self._target.host.strip("[]").lower(), self._target.port)
        if not data or (parts.scheme, (parts.hostname or "").lower(), port) != here:
            raise ConnectError(f"the endpoint event of {self._stream_url} names {url!r}, which is not on the "
                               f"stream's origin {self._target.origin}: refused (messages are only sent to the "
                               "server that was given)")
        # Percent-encoded where the server left a space or a non-ASCII
        # character: the request line must stay one valid line.
        path = urllib.parse.quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                                  safe="/?&=%:@!$'()*+,;~-._")
        # Like a followed redirect: every later request goes there.
        self._wire.retarget(path, f"{parts.scheme}://{parts.netloc}{path}")
        self._endpoint = self._url
        log.debug("the HTTP+SSE server %s takes messages at %s", self._stream_url, self._url)

    def _read(self, exchange: Exchange, response: Response) -> None:
        """The reader thread: the stream's events until it ends, breaks or
        the transport closes. Its end is the connection's end."""
        error: TransportError
        try:
            while True:
                chunk = response.read1(READ_CHUNK)
                self._count(received=len(chunk))
                for event in sse_events(self._parser, self._decoder, chunk):
                    self._on_event(event)
                if not chunk:
                    break
            error = ConnectionClosed(f"the server ended the event stream of {self._stream_url}")
        except EventTooLarge as exc:
            error = MessageTooLarge(f"an SSE event from {self._stream_url} is larger than "
                                    f"max_response_bytes={exc.limit}", limit=exc.limit)
        except TransportError as exc:
            error = exc
        except (OSError, ValueError) as exc:
            error = ConnectionClosed(f"the event stream of {self._stream_url} broke: {exc}")
        except Exception as exc:  # a bug, or a pathological message: the connection ends, never silently
            log.warning("the event stream of %s failed unexpectedly", self._stream_url, exc_info=True)
            error = InvalidMessage(f"the event stream of {self._stream_url} could not be read: "
                                   f"{type(exc).__name__}: {exc}")
        finally:
            exchange.release(reusable=False)
        sink = self._sink
        if sink is not None and not self._closing and not exchange.stop.is_set():
            log.debug("%s", error)
            sink.transport_failed(error)

    # -- sending ---------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        """POST a message nobody waits on here (a notification, an answer to
        a server request), bounded by `request_timeout`."""
        exchange = Exchange("one-way", self._one_way, deadline=time.monotonic() + self._side_bound())
        with self._lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            self._others.add(exchange)
        try:
            self._post(exchange, message, headers)
        finally:
            self._forget(exchange)

    def exchange(
        self, message: Mapping[str, Any], headers: Mapping[str, str] | None, deadline: float | None,
    ) -> float:
        """POST a caller's request on the caller's thread, bounded by its
        deadline; its response comes on the stream. A POST still unanswered
        at the deadline is given up quietly: the caller reports the timeout."""
        own_deadline = deadline if deadline is not None else time.monotonic() + self._side_bound()
        exchange = Exchange(message["id"], self._pool, on_caller=True, deadline=own_deadline)
        self._register(exchange)
        try:
            self._post(exchange, message, headers)
        except ConnectError:
            if deadline is not None and time.monotonic() >= deadline - 0.01:
                return exchange.auth_pause  # the caller's deadline passed: it says so
            raise
        except ConnectionClosed:
            if exchange.stop.is_set() and not self._closing:
                return exchange.auth_pause  # cancelled by the caller, who has gone
            raise
        finally:
            self._forget(exchange)
        return exchange.auth_pause

    def _post(self, exchange: Exchange, message: Mapping[str, Any], extra: Mapping[str, str] | None) -> None:
        """One message to the endpoint; a 2xx answer (202 as a rule) carries
        no message. Raises `TransportError` (an HTTP error status as
        `HTTPStatusError`)."""
        headers = self._base_headers(session=True)
        headers["Content-Type"] = "application/json"
        if extra:
            headers.update(extra)
        try:
            response = self._request(exchange, "POST", headers, jsonrpc.encode(message))
            answer = self._wire.read_body(response, ERROR_BODY_PREVIEW * 4, truncate=True)
            self._wire.done(exchange, response)
        except Stopped:
            reason = "the connection is closed" if self._closing else "the request was cancelled"
            raise ConnectionClosed(reason) from None
        except NoFreeSlot:
            raise ConnectError(f"POST to {self._url}: no connection was free in time") from None
        except (OSError, ValueError) as exc:
            if self._closing:
                raise ConnectionClosed("the connection is closed") from None
            raise ConnectError(f"POST to {self._url} failed: {exc}") from exc
        except (TransportError, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            raise ConnectError(f"POST to {self._url} failed: {type(exc).__name__}: {exc}") from exc
        if response.status >= 300:
            raise self._status_error(response, answer, session=False)

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._closing = True  # before the abort: the reader must not report its own end
            stream, reader = self._stream, self._reader
        if stream is not None:
            stream.abort()
        super().close()
        if reader is not None and reader is not threading.current_thread():
            reader.join(GET_JOIN_SECONDS)
            if reader.is_alive():
                log.warning("the HTTP+SSE reader of %s did not end in time", self._stream_url)

    def discard(self) -> None:
        stream = self._stream
        super().discard()
        if stream is not None:
            stream.discard()
