"""The initialize era's session over Streamable HTTP.

Owns: the session's state and what travels because of it: its id (taken
from the answer to `initialize`, refused unless visible ASCII) and the
origin that issued it, the headers every later request carries
(`Mcp-Session-Id`, and `MCP-Protocol-Version` from 2025-06-18), whether a
404 means the session is gone (`owns`), the GETs of the session (its
standalone stream, and the resumption of a request's broken stream with
`Last-Event-ID`), the standalone GET stream itself (`_GetStream`: opened
after `notifications/initialized`, read, reconnected), the DELETE that
ends the session at close, and which replaced session is an orphan to end
(`begin`, `adopt`, `end`).

Must not know: how a request is sent, redirected, authorized or its body
read (`http_request`), how connections are dialed or stopped (`pool`),
how the stream's socket is read without a thread of its own (`streams`),
or what a request's exchange is for (it resumes one's stream when asked,
from its last event id, and nothing more). It knows the transport only through
`SessionHost`: where messages go, whether close() has begun, and the
bound of a side request.

How it works. The transport tells the session its protocol version
(`version`) and hands it the answer to `initialize` (`begin`). It asks for
the session's headers on every request of the era, for `open_get_stream()`
once `notifications/initialized` went out, and, at close, for `abort()`,
`delete()` and `close()` in that order: no GET may go on, or start, once
the session is deleted, and the DELETE waits behind none.

Locks. `Session._lock` guards the GET stream's slot (`_get_stream`); it is
held while a new stream is set up (which registers it with the stream
reader, taking the reader's lock after this one), never during IO. A
`_GetStream`'s own `_lock` guards its `_closing` and `_opener`. The
session's id, origin and version are written before the requests that
read them (from the answer to `initialize`, then by `negotiated()`), and
`get_offered` only ever turns False (a 405): all are read with no lock.
`_adopted` is written (`adopt`) and read (`begin`) by the one handshake
under way at a time (renewals are serialised above the transport).
"""

from __future__ import annotations

import errno
import itertools
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Callable, NamedTuple

from ..errors import ConnectError, ConnectionClosed, InvalidMessage, SessionExpired, TransportError
from ..protocol import jsonrpc, versions
from ..protocol.sse import Event, EventTooLarge, SSEParser
from ..waiting import remaining
from .base import MessageSink
from .decoding import Decoder
from .http11 import Response
from .http_request import ERROR_BODY_PREVIEW, Origin, Requester, decoder_for, sse_events
from .pool import Exchange, Pool
from .streams import READER, TURN_BYTES, BodyFrames, take_body

log = logging.getLogger("mcp_sync.transport.http")

DEFAULT_RETRY_MS = 1000

#: A GET stream that lasted this long before it ended, even with no event,
#: worked (a proxy cut it while idle): opened again after the server's
#: `retry` interval, as one that brought events.
IDLE_CUT_SECONDS = 5.0

#: The least wait before opening again a stream that lasted less than
#: `IDLE_CUT_SECONDS` (never a loop of GETs, whatever the server's `retry`);
#: doubled for each such stream in a row that brought nothing, up to the
#: retry ceiling.
_QUICK_END_WAIT = 0.1

#: The longest `open_get_stream` waits for the server to answer the GET.
_GET_OPEN_WAIT = 2.0

#: The longest `close()` waits for the GET stream's reader to end.
GET_JOIN_SECONDS = 5.0


class SessionHost(NamedTuple):
    """What the session needs of the transport that owns it."""

    #: Where messages related to no request go (None: nowhere, yet or any more).
    sink: Callable[[], MessageSink | None]
    #: Whether the transport's close() (or discard()) has begun.
    closing: Callable[[], bool]
    #: The bound, in seconds, of a request no caller waits on.
    side_bound: Callable[[], float]
    #: The longest wait a server's `retry` hint may ask for, in seconds.
    retry_ceiling: Callable[[], float]
    #: Told (on the stream's thread: hand on only) that the GET stream found
    #: the session gone (404, or a 400 saying the session is unknown: the
    #: server restarted or ended it) or the server unreachable (three
    #: attempts in a row could not connect), with no request to tell.
    lost: Callable[[TransportError], None]
    #: Told (on the stream's thread: hand on only) that the GET stream was
    #: opened again without resuming the one that broke this many seconds
    #: ago (the server gave no event id, or refused to resume from it).
    events_lost: Callable[[float], None]


class Session:
    """One transport's initialize-era session: see the module's docstring.
    The transport keeps one for its whole life; it has an id only once a
    server named one."""

    def __init__(self, wire: Requester, streams: Pool, host: SessionHost) -> None:
        self._wire = wire
        #: The pool of connections outside every budget (the GET stream,
        #: resumptions, the DELETE).
        self._streams = streams
        self._host = host
        #: The protocol version settled for the connection (None: not yet).
        self.version: str | None = None
        self.id: str | None = None
        #: The origin that issued the id when it was another one (a
        #: followed redirect): the only other origin it is ever sent to.
        self.origin: Origin | None = None
        #: False once the server said it offers no GET stream (405).
        self.get_offered = True
        #: The id of the last session whose handshake completed (None: none
        #: yet); written and read by the one renewal at a time.
        self._adopted: str | None = None
        #: Counts the `initialize`s sent and the sessions begun: a server
        #: may name each session the same (one per user), so the id alone
        #: cannot tell an old session from the one that replaced it.
        #: Written by the one handshake at a time.
        self.generation = 0
        self._lock = threading.Lock()
        self._get_stream: _GetStream | None = None

    def begin(self, response: Response) -> tuple[str, Origin | None] | None:
        """The answer (200) to `initialize`: the session it names, if any.
        Returns the session it replaces when that one is an orphan, to be
        ended (`end`): one whose handshake the client gave up on (never
        `adopt`ed: the server made it, the client will never use it). An
        adopted one it replaces is not returned: the server lost it, which
        is why a new one is begun."""
        session = response.headers.get("mcp-session-id")
        if not session:
            return None
        if not visible_ascii(session):
            # It goes back in every request's head: anything else could
            # split a header or be refused there.
            self._wire.drain(response)
            raise InvalidMessage(f"the server's Mcp-Session-Id is not visible ASCII: {session[:80]!r}")
        old = self.id
        replaced = None if old is None or old in (session, self._adopted) else (old, self.origin)
        self.id = session
        self.generation += 1
        self.origin = self._wire.origin_of(response)
        return replaced

    def in_use(self, session: str) -> bool:
        """Whether `session` is the one the client uses (or the last it
        adopted): a server that names the same session for every
        `initialize` (one per user, say) must not have it ended as an orphan."""
        return session in (self.id, self._adopted)

    def adopt(self) -> None:
        """The handshake that began the current session is complete (its
        `notifications/initialized` went out): the client uses it, and a
        later `begin` replaces it only once the server lost it."""
        self._adopted = self.id

    def add_headers(self, headers: dict[str, str]) -> None:
        """The session's headers, into `headers`."""
        # Revisions before 2025-06-18 had no such header.
        if self.version is not None and versions.dialect_for(self.version).protocol_version_header:
            headers["MCP-Protocol-Version"] = self.version
        if self.id is not None:
            headers["Mcp-Session-Id"] = self.id

    def owns(self, response: Response) -> bool:
        """Whether `response` came from an origin that knows the session:
        this transport's own, or the other one that issued the id."""
        origin = self._wire.origin_of(response)
        return origin is None or origin == self.origin

    # -- the session's requests --------------------------------------------------------------

    def get(self, exchange: Exchange, extra: Mapping[str, str]) -> Response:
        """A GET of the session (an event stream), with the `extra` headers."""
        headers = self._wire.base_headers()
        self.add_headers(headers)
        headers["Accept"] = "text/event-stream"
        headers.update(extra)
        return self._wire.request(exchange, "GET", headers, None, session_origin=self.origin)

    def resume(self, exchange: Exchange, last_event_id: str) -> Response:
        """Resume a request's broken stream after `last_event_id`, on a
        connection outside the budgets (the request's slot was given back
        with its first stream). A status other than 200 fails the request
        (404 from the session's origin: `SessionExpired`)."""
        exchange.pool = self._streams
        resumed = self.get(exchange, {"Last-Event-ID": last_event_id})
        if resumed.status != 200:
            preview = self._wire.read_body(resumed, ERROR_BODY_PREVIEW, truncate=True)
            exchange.release(reusable=False)
            raise self._wire.status_error(resumed, preview, expired=self.owns(resumed))
        return resumed

    def delete(self, limit: float) -> None:
        """End the session, within `limit` seconds; its outcome is never an
        error (the spec lets a server refuse with 405, and we are leaving
        anyway)."""
        if self.id is not None:
            self.end(Exchange("delete", self._streams, deadline=time.monotonic() + limit), self.id, self.origin,
                     what="session")

    def end(self, exchange: Exchange, session: str, origin: Origin | None, *, what: str = "orphan session") -> None:
        """DELETE `session` (issued by `origin`: None, this transport's),
        on `exchange` (of the stream pool, bounded by its deadline): the
        current session, or an orphan (see `begin`). Its outcome is never
        an error, only logged (as `what`)."""
        headers = self._wire.base_headers()
        self.add_headers(headers)
        headers["Mcp-Session-Id"] = session
        try:
            response = self._wire.request(exchange, "DELETE", headers, None, session_origin=origin)
            self._wire.drain(response)
            log.debug("%s DELETE answered %s", what, response.status)
        except (TransportError, OSError, ValueError) as exc:
            log.debug("%s DELETE failed: %s", what, exc)
        finally:
            exchange.release(reusable=False)

    # -- the standalone GET stream -------------------------------------------------------------

    def open_get_stream(self) -> None:
        """(After `notifications/initialized`.) Listen on the session's GET
        stream, if the server offers one (a 405 says it does not) and none
        is open already."""
        with self._lock:
            start_get = self.get_offered and not self._host.closing()
            if start_get and self._get_stream is not None and not self._get_stream.ended:
                start_get = False
            if start_get:
                try:
                    stream = _GetStream(self, self._wire, self._streams, self._host)
                except ConnectionClosed as exc:
                    # The GET stream is optional: without a reader for it the
                    # session goes on as after a 405, with no GET stream.
                    log.warning("no GET stream for this session: %s", exc)
                    start_get = False
                else:
                    self._get_stream = stream
        if start_get:
            stream.start()
            # Wait (briefly) until the server has answered the GET, so the
            # stream exists before the first request is sent: a server may
            # otherwise take a late GET for something else, such as the
            # resumption of a request's stream.
            stream.opened.wait(min(_GET_OPEN_WAIT, self._wire.target.connect_timeout))

    @property
    def get_exchange(self) -> Exchange | None:
        """The exchange of the GET stream's connections (None: never opened)."""
        stream = self._get_stream
        return None if stream is None else stream.exchange

    @property
    def get_thread(self) -> threading.Thread | None:
        """The thread at work on the GET stream: the one opening it, else the
        process's stream reader while the stream is open."""
        stream = self._get_stream
        return None if stream is None else stream.thread

    def abort(self) -> None:
        """(close(), first.) The GET stream reconnects no more; a GET being
        opened or read fails at once."""
        with self._lock:
            stream = self._get_stream
        if stream is not None:
            stream.abort()

    def close(self, timeout: float) -> None:
        """(close(), last.) Wait, at most `timeout` seconds, until the GET
        stream's threads let go of it."""
        with self._lock:
            stream = self._get_stream
        if stream is not None:
            stream.close(timeout)

    def discard(self) -> None:
        """(In a child after `os.fork()`.) Close this process's copy of the
        GET stream's socket: no IO, no lock."""
        exchange = self.get_exchange
        if exchange is not None:
            exchange.discard()


class _GetStream:
    """The initialize era's standalone GET stream of one session: messages
    related to no request, handed to the sink as they come. Reconnects after
    the server's retry interval (with `Last-Event-ID`) while events keep
    coming; gives up after three attempts in a row that failed or brought
    nothing, after 405 (the server offers no GET stream) or another status.

    Threads. Opening the stream (the GET and its answer's head: maybe a
    dial, TLS and authorization) blocks, so it runs on a thread of its own
    (`mcp-sync-http-get`) that ends once the head came. The stream is then
    read by the process's stream reader (`streams.READER`), one thread for
    every session's GET stream: an idle session costs no thread. The delay
    before a reconnection is the reader's timer, which starts the next
    opener.

    Ownership. The connection's reading state (`_frames`, `_decoder`,
    `_parser`, `_got_any`) and the counters (`_failures`, `_last_id`,
    `_retry_ms`) have one owner at a time: the opener until it hands the
    socket to the reader (through the reader's lock), then the reader
    thread, which starts the next opener only once the connection is
    given back. `_lock` guards `_closing` and `_opener`.
    """

    def __init__(self, session: Session, wire: Requester, streams: Pool, host: SessionHost) -> None:
        self._session = session
        self._wire = wire
        self._host = host
        #: One exchange for every connection of the stream: close() aborts it.
        self.exchange = Exchange("get", streams)
        #: Set once the first GET has an answer (or failed).
        self.opened = threading.Event()
        self._lock = threading.Lock()
        self._closing = False
        self._opener: threading.Thread | None = None
        self._failures = 0
        self._last_id: str | None = None
        self._retry_ms = DEFAULT_RETRY_MS
        self._frames = BodyFrames(done=True)
        self._decoder: Decoder | None = None
        self._parser = SSEParser()
        self._got_any = False
        #: Set once a GET of this stream was answered 200: only then does a
        #: later 404 (or 400 that says so) mean the session was lost. A
        #: server without a GET route, or a balancer that sends the GET
        #: elsewhere, refuses the first GET: no GET stream, as after a 405.
        self._was_open = False
        #: When the open stream broke (`time.monotonic()`), and in which
        #: session; None while one is open, and before the first.
        self._broken_at: float | None = None
        self._broken_in: str | None = None
        #: The session the last GET answered 200 was sent in.
        self._open_in: str | None = None
        #: When the open stream was answered 200 (None: none is open); whether
        #: the last one to end lasted less than `IDLE_CUT_SECONDS`; and how
        #: many in a row ended so with no event.
        self._open_since: float | None = None
        self._short = False
        self._quick_ends = 0
        #: The work of what was read that is still to do (a compressed
        #: burst is done a slice per turn of the reader): bytes decoded by each step.
        self._backlog: Iterator[int] | None = None
        try:
            self._stream = READER.open(self._on_data, self._on_end, self._on_timer, self._on_close)
        except (OSError, RuntimeError) as exc:  # no thread or descriptor left for the reader
            raise ConnectionClosed(f"the GET stream cannot be read: {exc}") from exc

    @property
    def ended(self) -> bool:
        """Whether the stream is over for good (given up, or closed)."""
        return self._stream.done

    @property
    def thread(self) -> threading.Thread | None:
        """The thread at work on it: the opener's, else the stream reader
        while the stream lasts."""
        opener = self._opener
        if opener is not None and opener.is_alive():
            return opener
        return None if self._stream.done else READER.thread

    def start(self) -> None:
        if not self._start_opener():
            self.opened.set()

    def abort(self) -> None:
        """(close(), first.) No reconnection from now on; a GET being opened
        or read fails at once."""
        with self._lock:
            self._closing = True
        self.exchange.abort()

    def close(self, timeout: float) -> None:
        """(close(), after `abort`.) Wait, at most `timeout` seconds in all,
        until the opener has ended and the reader let go of the stream (and
        ended, if this was its last stream)."""
        limit = time.monotonic() + timeout
        with self._lock:
            self._closing = True
            opener = self._opener
        if opener is not None and opener is not threading.current_thread():
            opener.join(remaining(limit))
        if not self._stream.close(remaining(limit)):
            log.warning("the GET stream was not let go of within %g s", timeout)

    def _start_opener(self) -> bool:
        """Start the opener's thread; False if closing, or if it could not be
        started (a failed attempt then: retried, or given up)."""
        with self._lock:
            if self._closing:
                return False
            thread = threading.Thread(target=self._open, name="mcp-sync-http-get", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # no thread left: close() must not join this one
                refused: RuntimeError | None = exc
            else:
                refused = None
                self._opener = thread
        if refused is not None:
            self._failed(ConnectionClosed(f"the GET stream's opener could not start: {refused}"))
            return False
        return True

    # -- the opener's thread ---------------------------------------------------------------------

    def _open(self) -> None:
        exchange = self.exchange
        extra = {"Last-Event-ID": self._last_id} if self._last_id else {}
        sent_in = self._session.id  # a loss is reported for this session only, never a newer one
        try:
            # Setting the stream up is bounded like a one-way POST; the
            # stream itself then lasts as long as the session.
            exchange.deadline = time.monotonic() + self._host.side_bound()
            try:
                response = self._session.get(exchange, extra)
            finally:
                self.opened.set()
            exchange.deadline = response.deadline = None
            if response.status == 200:
                self._was_open = True
                self._open_since = time.monotonic()
                self._open_in = sent_in
                broken_at, self._broken_at = self._broken_at, None
                if broken_at is not None and not extra and self._broken_in == sent_in and not self._host.closing():
                    # Not resumed: what the server sent since the break is
                    # lost. (A break in an earlier session is not told: the
                    # new session's listens were opened again, and told so.)
                    self._host.events_lost(time.monotonic() - broken_at)
            else:
                lost: TransportError | None = None
                if response.status == 405:
                    self._session.get_offered = False
                    log.debug("the server offers no GET stream (405)")
                    self._wire.drain(response)
                else:
                    log.debug("the GET stream answered %s", response.status)
                    preview = self._wire.read_body(response, ERROR_BODY_PREVIEW, truncate=True)
                    error = self._wire.status_error(response, preview, expired=self._session.owns(response))
                    if isinstance(error, SessionExpired) and self._was_open and self._session.id == sent_in:
                        lost = error
                    elif extra and 400 <= response.status < 500:
                        # The server will not resume from that event (it no
                        # longer has it): a fresh stream, whose notifications
                        # go on; what it sent in between is lost.
                        log.warning("the server refused to resume the session's event stream after event %r "
                                    "(%s); opening a fresh one: notifications sent meanwhile are lost",
                                    self._last_id, error)
                        exchange.release(reusable=False)
                        self._last_id = None  # (so this happens once: the next GET asks for no event)
                        self._failures = 0  # the server answered: not a failure to reach it
                        self._again()
                        return
                exchange.release(reusable=False)
                self._stream.close(GET_JOIN_SECONDS)  # over for good
                if lost is not None and not self._host.closing():
                    self._host.lost(lost)
                return
            self._decoder = decoder_for(response)
            self._parser = SSEParser(max_event_bytes=self._wire.target.max_response_bytes)
            self._got_any = False
            self._backlog = None
            self._frames, first = take_body(response)
            conn = exchange.conn
            sock = None if conn is None else conn.sock
            if sock is None:
                raise ConnectionClosed("the GET stream's connection was closed")
        except Exception as exc:  # the stream is retried, never left dead silently
            self._failed(exc)
            return
        if not self._stream.watch(sock, first):
            exchange.release(reusable=False)  # closed meanwhile

    # -- the reader's thread (or the opener's, before the hand-over) -------------------------------

    def _on_data(self, data: bytes) -> bool:
        """What the socket had (b"": go on with the backlog). True when work
        was kept back: a reader's turn's worth of decoded bytes was done,
        so that one session's compressed burst cannot hold the others up."""
        try:
            if data:
                work = self._work(self._frames.feed(data))
                self._backlog = work if self._backlog is None else itertools.chain(self._backlog, work)
            if self._backlog is not None:
                done = 0
                for size in self._backlog:
                    done += size
                    if done >= TURN_BYTES:
                        return True
                self._backlog = None
            if self._frames.done:
                self._stream.unwatch()
                self._ended()
        except Exception as exc:
            self._backlog = None
            self._stream.unwatch()
            self._failed(exc)
        return False

    def _work(self, pieces: list[bytes]) -> Iterator[int]:
        """Deliver the events of body `pieces`, a step at a time: each step
        decodes one piece (at most `decoding.PIECE` bytes) and yields its
        size (0 for a body not compressed: the reader's own count of the
        bytes read bounds that work)."""
        count, decoder, parser = self._wire.count, self._decoder, self._parser
        for chunk in pieces:
            count(received=len(chunk))
            if decoder is None:
                self._deliver(parser.feed(chunk))
                yield 0
                continue
            for piece in decoder.feed(chunk):
                self._deliver(parser.feed(piece))
                yield len(piece)

    def _on_end(self, error: OSError | None) -> None:
        """The socket ended (no longer watched)."""
        try:
            if error is not None:
                raise error
            self._frames.end()
        except Exception as exc:
            self._failed(exc)
            return
        self._ended()

    def _events(self, chunk: bytes) -> None:
        """Deliver the events `chunk` of the body completes (b"": its end)."""
        self._wire.count(received=len(chunk))
        self._deliver(sse_events(self._parser, self._decoder, chunk))

    def _deliver(self, events: Iterable[Event]) -> None:
        """Hand `events` on, noting the id of each once it was: a reconnection
        names the last event delivered, never one parsed but lost with a
        failure after it (an event too large, or not JSON-RPC, further on)."""
        for event in events:
            if event.data.strip():
                self._got_any = True
                sink = self._host.sink()
                if sink is not None:
                    sink.deliver(jsonrpc.parse(event.data))  # a batch is split by the sink
            if event.id is not None:  # "" too: SSE's reset of the last event id
                self._last_id = event.id
        # Every event the parser completed was handed on: an id it took from
        # an event without data (dispatched by SSE, not returned) counts too.
        if self._parser.last_event_id is not None:
            self._last_id = self._parser.last_event_id

    def _broke(self) -> bool:
        """Note that the open stream (if one was) ended or broke: when (the
        first of a row), whether it was short, and whether it worked (it
        brought an event, or lasted `IDLE_CUT_SECONDS`), which ends a row
        of failures and of quick ends. Returns whether it worked."""
        now = time.monotonic()
        if self._was_open and self._broken_at is None:
            self._broken_at = now
            # The session the stream was opened in, not the current one: a
            # break read only after a renewal began a new session belongs
            # to the old one, whose gap the renewal told already.
            self._broken_in = self._open_in
        since, self._open_since = self._open_since, None
        if since is None:  # no stream was open: a GET that failed
            return False
        self._short = now - since < IDLE_CUT_SECONDS
        worked = self._got_any or not self._short
        if worked:
            self._failures = self._quick_ends = 0
        return worked

    def _ended(self) -> None:
        """The body ended cleanly: reconnect after the retry interval."""
        worked = self._broke()
        if self._host.closing() or self.exchange.stop.is_set():
            self.exchange.release(reusable=False)
            return
        try:
            self._events(b"")
        except Exception as exc:
            self._failed(exc)
            return
        self.exchange.release(reusable=False)  # a stream's connection is its own
        self._take_resumption()
        # The server answered and ended the stream: not a failure to reach
        # it (those give the stream up), whatever the stream brought. One
        # that ended soon with nothing is opened again after a wait that
        # doubles with each in a row (see `_again`).
        self._failures = 0
        if not worked:
            self._quick_ends += 1
        self._again()

    def _take_resumption(self) -> None:
        """The retry interval the connection set (it takes effect at once;
        the parser of an earlier connection gives what was taken already).
        The last event id is `_deliver`'s: the parser's may name events
        parsed with the one that failed, and never delivered."""
        parser = self._parser
        self._retry_ms = parser.retry_ms if parser.retry_ms is not None else self._retry_ms

    def _failed(self, exc: BaseException) -> None:
        """The GET or its stream failed: logged, then retried from the last
        event delivered (the events before the failure were)."""
        self._broke()  # (one that worked starts a new row of failures)
        self.exchange.release(reusable=False)
        self._backlog = None
        self._take_resumption()
        if self._host.closing() or self.exchange.stop.is_set():
            return
        expected = isinstance(exc, (TransportError, EventTooLarge, OSError, ValueError))
        log.log(logging.DEBUG if expected else logging.WARNING, "the GET stream failed: %s", exc,
                exc_info=None if expected else exc)
        self._failures += 1
        self._again(exc if _unreachable(exc) else None)

    def _again(self, unreachable: BaseException | None = None) -> None:
        if self._failures >= 3:
            self._stream.close(GET_JOIN_SECONDS)  # given up
            if unreachable is not None and self._was_open and not self._host.closing():
                self._host.lost(ConnectionClosed(
                    f"the server could not be reached for the session's event stream ({self._failures} attempts "
                    f"in a row): {unreachable}"))
        else:
            wait = self._retry_ms / 1000.0
            if self._short:
                wait = max(wait, _QUICK_END_WAIT) * 2 ** max(min(self._quick_ends, 17) - 1, 0)
            self._stream.later(min(wait, self._host.retry_ceiling()))

    def _on_timer(self) -> None:
        self._start_opener()

    def _on_close(self) -> None:
        self.exchange.release(reusable=False)


def _unreachable(exc: BaseException) -> bool:
    """Whether a GET failed because the server could not be reached at all
    (refused, no route, no answer in time), not because of what it said."""
    if isinstance(exc, (ConnectError, ConnectionRefusedError, TimeoutError)):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH)


def visible_ascii(text: str) -> bool:
    """Only 0x21-0x7E, as the spec requires of a session id."""
    return all("!" <= char <= "~" for char in text)
