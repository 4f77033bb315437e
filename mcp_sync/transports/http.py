"""The Streamable HTTP transport, for both protocol eras: each request's
exchange.

Owns: `HTTPTransport` (what an `HTTP` target, `http_target`, opens), which moves
JSON-RPC messages for the engine: each request's exchange (a POST and its
answer, JSON or an SSE stream) on the caller's thread or an exchange
thread, per-request deadlines and cancellation, the one-way POSTs
(notifications, answers to server requests), the three connection budgets,
and close(). What the messages mean is the engine's and the client's
business.

Must not know: how a request is sent, redirected and authorized, or a body
read (`http_request`); the session's id, headers, GET stream and DELETE
(`http_session`); how an SSE answer is read and resumed (`http_answer`);
how connections are dialed, counted, reused or stopped (`pool`); how
HTTP/1.1 is framed (`http11`); how credentials are made (`http_auth`).

How it works. Every request is its own POST. A caller that is about to wait
for its answer does the exchange itself (`exchange()`): it POSTs and reads
the answer on its own thread, socket reads bounded by its deadline, so the
common JSON answer costs one read and no thread hand-off. An SSE answer
is read on the caller's thread too while nothing but its response comes,
and so is the stream's end, which follows the response at once: the
connection is back in the pool, for the next call to reuse, before the
call returns. Once something else comes first (progress, log messages,
server requests), the rest of the stream goes to an exchange thread and the
caller waits on its inbox, where its callbacks run; the thread owns the
exchange from then on and forgets it when the stream is done, and a stream
that ended cleanly gives its connection back for reuse. `send()` of a
request nobody waits on at once (`subscriptions/listen`) hands the whole
exchange to an exchange thread. Every message read is delivered to the sink
tagged with the request it belongs to.

Three budgets, so that nothing waits for a slot something else it needs
holds: request exchanges share `pool_size` keep-alive connections; one-way
POSTs have their own `pool_size` (a request's SSE stream may be holding
the last request slot while its server request's answer must go out), each
bounded by `request_timeout`; long-lived streams (the session's GET stream,
`listen()`, resumptions, the DELETEs) get connections of their own, outside
any budget. Every request of every kind goes through `Requester.request()`:
one authorization flow, one HTTP/1.1 writer and reader, one set of errors.

An answer to a server request is owed: the server waits for it. Its POST
is sent again for a short while (under the headers of its own session)
after a failure the server may recover from (a 5xx, a reset), and one
that cannot be delivered is logged at
warning and counted (`_post_one_way`), never dropped in silence.

Sessions the client will never use are ended: one the server opened for an
`initialize` the caller gave up on, once its id is known (the late answer
is still awaited for a while after the caller's deadline; one whose head
named it before is ended when the next `initialize` replaces it); and at
close() the current session, whatever came of its handshake.

Cancelling a request (timeout, abandon, `close()` from another thread)
aborts its exchange, which shuts its socket down under a blocked connect,
handshake or read, on either kind of thread. `close()` aborts every
exchange and the session's GET stream first, then sends the session's
DELETE.

An answer with no JSON-RPC message in it fails that one request with
`HTTPStatusError` (401/403: `AuthenticationError`; 404 on a session:
`SessionExpired`); a JSON-RPC error body of any status is delivered as the
error response it is, which is how the client tells a stateless-era
server's 400 from an initialize-era server's.

Locks. `_lock` guards the table of exchanges (`_exchanges`, `_others`) and
the writes of the closing flag and of the era (`_initialize_era`, the session's
version), which are read without it; `_count_lock` guards the byte sums.
Both are held for bookkeeping only: never during IO, never while another
lock (the session's, an exchange's, a pool's) is taken. `_close_lock` is
held for the whole of close(), the DELETE and the joins included, so that
a second close() returns only once the first is done.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConnectError, ConnectionClosed, HTTPStatusError, InvalidMessage, TransportError
from ..protocol import jsonrpc
from ..protocol.headers import standard_headers
from ..waiting import remaining
from .base import MessageSink, Transport
from .decoding import UnsupportedEncoding, coding_of
from .http11 import CLOSED_WITHOUT_ANSWERING, Response, ResponseError
from .http_answer import AnswerLink, AnswerStream, Message, json_answer, json_rpc_error
from .http_request import ERROR_BODY_PREVIEW, Origin, Requester, session_unknown
from .http_session import GET_JOIN_SECONDS, Session, SessionHost, visible_ascii
from .pool import Exchange, ExchangeThreads, NoFreeSlot, Pool, Stopped

if TYPE_CHECKING:
    from .http_target import HTTP

log = logging.getLogger("mcp_sync.transport.http")

#: The bound of a one-way POST when the client has no timeout.
_ONE_WAY_SECONDS = 30.0

#: How long a caller waits for the end of an SSE stream after its response
#: before handing the rest to an exchange thread: the end usually follows
#: at once (another write of the server's), and read here, it gives the
#: connection back before the call returns, for the next call to reuse.
_CALLER_END_SECONDS = 0.05

#: The first wait before an owed answer's failed POST is sent again, and
#: the longest (the waits double in between): see `_post_one_way`.
_AGAIN_FIRST = 0.05
_AGAIN_MOST = 1.0
#: How long an owed answer is sent again for at most: the retries hold one
#: of the sender's writers, so they must not keep it for the whole
#: `request_timeout` while other answers wait behind them.
_AGAIN_WINDOW = 2.0

#: Statuses of a POST of an answer that say the server did not take it but
#: may take it later (a busy or restarting server, a gateway in front).
_AGAIN_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

#: After a stream that did not end that soon, this many streams' ends are
#: left to exchange threads at once: a server that keeps streams open after
#: the response must not cost every call the wait.
_SKIP_END_WAITS = 100

class HTTPTransport(Transport):
    """A connection to a Streamable HTTP server (see the module's docstring).
    It composes the request loop (`Requester`), the connection budgets
    (`Pool`), the initialize era's `Session` and the exchange threads, and
    talks to each through its public methods."""

    kind = "streamable-http"
    """Always "streamable-http" (see `Target.kind` and `Transport.kind`)."""

    restarts_server = False
    mirrors_headers = True
    relates_server_requests = True
    parallel_writes = 4  # (within the one-way connection budget, `pool_size`)

    def __init__(self, target: HTTP) -> None:
        self._target = target
        self._count_lock = threading.Lock()
        self._wire = Requester(target, self._count)
        self._sink: MessageSink | None = None
        #: Request exchanges: keep-alive connections, at most `pool_size`.
        self._pool = Pool(self._wire.dial, target.pool_size)
        #: One-way POSTs: a budget of their own, so they never wait for a
        #: slot that a request's stream (maybe their own request's) holds.
        self._one_way = Pool(self._wire.dial, target.pool_size)
        #: Long-lived streams and the DELETE: a connection each, no budget.
        self._streams = Pool(self._wire.dial, None, keep_idle=False)
        self._threads = ExchangeThreads("mcp-sync-http")
        self._lock = threading.Lock()
        self._exchanges: dict[int | str, Exchange] = {}
        #: One-way POSTs, resumptions and the DELETE in progress: close() aborts them too.
        self._others: set[Exchange] = set()
        self._closing = False
        self._closed = False
        #: Set by close() (after `_closing`): a wait between the POSTs of an
        #: answer ends at once.
        self._closed_event = threading.Event()
        #: Answers to server requests that could not be delivered (see
        #: `_post_one_way`), under `_count_lock`.
        self.answers_undelivered = 0
        #: Whether the server ever answered a request (a flag: written
        #: without a lock, only ever to True): see `_post_failed`.
        self._heard = False
        #: Streams whose end callers will not wait for (see `_stream_on_caller`).
        self._skip_end_waits = 0
        self._close_lock = threading.Lock()
        #: The initialize era (a session; cancelling by notification); else stateless.
        self._initialize_era = False
        self._session = Session(self._wire, self._streams, SessionHost(
            sink=lambda: self._sink, closing=lambda: self._closing, side_bound=self._side_bound,
            retry_ceiling=lambda: self.retry_ceiling, lost=self._session_lost, events_lost=self._events_lost))
        self._answers = AnswerLink(self._wire, self._session, self._deliver, closing=lambda: self._closing,
                                   initialize_era=lambda: self._initialize_era,
                                   retry_ceiling=lambda: self.retry_ceiling)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, sink: MessageSink) -> None:
        self._sink = sink

    @property
    def cancels_by_notification(self) -> bool:  # type: ignore[override]
        # 2026-07-28: closing the stream is the cancellation. Before it, a
        # disconnect is not a cancellation and the notification is needed.
        return self._initialize_era

    def negotiated(self, protocol_version: str, stateless: bool) -> None:
        with self._lock:
            self._session.version = protocol_version
            self._initialize_era = not stateless

    @property
    def session_id(self) -> str | None:
        return self._session.id

    def credential_scope(self) -> str | None:
        """Who this transport's requests are made as: from the token
        provider, read without network (see `Transport.credential_scope`)."""
        return self._wire.credential_scope()

    def describe(self) -> str:
        return f"Streamable HTTP server {self._target.url}"

    @property
    def close_budget(self) -> float:  # type: ignore[override]
        """`close()`'s bound: the session DELETE, the GET stream's end, and
        a margin for the pools' and helper threads' ends."""
        return self._target.session_close_timeout + GET_JOIN_SECONDS + 2.0

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            with self._lock:
                self._closing = True
                exchanges = [*self._exchanges.values(), *self._others]
            self._closed_event.set()
            # Abort first: no exchange may go on (or start) once the
            # session is deleted, and none may wait behind the DELETE.
            for exchange in exchanges:
                exchange.abort()
            self._session.abort()
            # Whatever the era: a session id was learned only from an
            # answer to `initialize`, and that session is the server's
            # until ended, even if the initialize failed at the client (a
            # connect that timed out, a version it refused).
            if self._session.id is not None:
                self._delete_session()
            for pool in (self._pool, self._one_way, self._streams):
                pool.close()
            self._threads.close()
            self._session.close(GET_JOIN_SECONDS)
            self._closed = True

    def discard(self) -> None:
        """In a child after `os.fork()`: close this process's copies of every
        socket (idle, in use, the GET stream), with no IO: no shutdown, no
        DELETE, no lock (a parent thread may have held one at the fork), no
        join (the threads were not copied). The transport is closed after."""
        self._count_lock = threading.Lock()
        self._closing = True
        self._closed = True
        self._sink = None
        for exchange in [*list(self._exchanges.values()), *list(self._others)]:
            exchange.discard()
        # The GET stream's reader thread was not copied either, and the
        # stream reader of this process forgot it (`streams`).
        self._session.discard()
        for pool in (self._pool, self._one_way, self._streams):
            pool.discard()
        self._threads.discard()

    def _delete_limit(self) -> float:
        """The bound of a DELETE: `session_close_timeout`, and the request timeout."""
        limit = self._target.session_close_timeout
        if self.request_timeout is not None:
            limit = min(limit, self.request_timeout)
        return limit

    def _delete_session(self) -> None:
        """End the session, bounded by `_delete_limit()`."""
        self._session.delete(self._delete_limit())

    def _end_orphan(self, session: str, origin: Origin | None) -> None:
        """DELETE `session`, one the server opened for an `initialize` the
        client gave up on (it will never use it), on an exchange thread:
        this may be a caller's thread, which never waits on such IO. Like
        every exchange, close() aborts it. Best effort: without a thread,
        or once closing, the server keeps it until it expires it."""
        log.info("ending session %s, opened by an initialize the client gave up on", session)
        exchange = Exchange("delete", self._streams, deadline=time.monotonic() + self._delete_limit())
        with self._lock:
            if self._closing:
                return
            self._others.add(exchange)

        def end() -> None:
            try:
                self._session.end(exchange, session, origin)
            finally:
                self._forget(exchange)

        try:
            self._threads.submit(end)
        except ConnectionClosed as exc:
            log.debug("session %s is left to the server to expire: %s", session, exc)
            self._forget(exchange)

    # -- sending ---------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        if self._closing:
            raise ConnectionClosed("the connection is closed")
        if "method" in message and "id" in message:
            # A request nobody waits on at once: a long-lived stream
            # (`subscriptions/listen`), so a connection outside the budget.
            request_id = message["id"]
            exchange = Exchange(request_id, self._streams)
            self._register(exchange)
            body = jsonrpc.encode(message)
            request_headers = self._request_headers(message, headers)
            try:
                self._threads.submit(lambda: self._run(exchange, message, body, request_headers))
            except BaseException:
                self._forget(exchange)
                raise
        else:
            self._post_one_way(message)

    def exchange(
        self, message: Mapping[str, Any], headers: Mapping[str, str] | None, deadline: float | None,
    ) -> float:
        """POST a request and read its answer on this (the caller's) thread.

        Returns once the answer was delivered to the sink, failed, or timed
        out at `deadline` (then nothing is delivered and the caller's own
        deadline check reports the timeout), or once an SSE answer was handed
        to an exchange thread. Raises `ConnectionClosed` when `close()` ran
        meanwhile. Returns the seconds spent getting authorization, which do
        not count against the deadline.
        """
        exchange = Exchange(message["id"], self._pool, on_caller=True, deadline=deadline)
        self._register(exchange)
        self._run(exchange, message, jsonrpc.encode(message), self._request_headers(message, headers))
        return exchange.auth_pause

    def cancel(self, request_id: int | str) -> None:
        with self._lock:
            exchange = self._exchanges.pop(request_id, None)
        if exchange is not None:
            exchange.abort()

    def _register(self, exchange: Exchange) -> None:
        with self._lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            self._exchanges[exchange.request_id] = exchange

    def _forget(self, exchange: Exchange) -> None:
        """The exchange is over: out of the table, slot and connection back
        (the connection was already given back for reuse if it could be)."""
        try:
            with self._lock:
                if self._exchanges.get(exchange.request_id) is exchange:
                    del self._exchanges[exchange.request_id]
                self._others.discard(exchange)
        finally:
            exchange.release(reusable=False)

    def _base_headers(self, *, session: bool) -> dict[str, str]:
        headers = self._wire.base_headers()
        if session:
            self._session.add_headers(headers)
        return headers

    def _request_headers(self, message: Mapping[str, Any], extra: Mapping[str, str] | None) -> dict[str, str]:
        is_initialize = message.get("method") == "initialize"
        if is_initialize and self._initialize_era:
            self._session.generation += 1  # answers owed in the session before are not sent again
        headers = self._base_headers(session=self._initialize_era and not is_initialize)
        headers["Accept"] = "application/json, text/event-stream"
        headers["Content-Type"] = "application/json"
        if not self._initialize_era and not is_initialize:
            headers.update(standard_headers(message))
        if extra:
            headers.update(extra)
        return headers

    def _request(self, exchange: Exchange, method: str, headers: Mapping[str, str], body: bytes | None) -> Response:
        """`Requester.request`, the session id allowed to the origin that issued it."""
        response = self._wire.request(exchange, method, headers, body, session_origin=self._session.origin)
        self._heard = True
        return response

    def _post_failed(self, exc: OSError | ValueError) -> ConnectError:
        """The error of a POST that failed with `exc`: a server that never
        answered and resets (or closes) a plain-HTTP request is most often
        an HTTPS server (Python's and Node's TLS servers do so), which is
        worth saying, as the reset alone says nothing."""
        hint = ""
        if not self._heard and self._target.url[:7].lower() == "http://" and (
                isinstance(exc, ConnectionResetError) or str(exc) == CLOSED_WITHOUT_ANSWERING):
            hint = " (the server never answered: if it speaks HTTPS, try https://)"
        return ConnectError(f"POST to {self._target.url} failed: {exc}{hint}")

    def _side_bound(self) -> float:
        """The bound of a side request (a one-way POST, setting the GET
        stream up): no caller waits on it, so it has its own deadline."""
        return self.request_timeout if self.request_timeout is not None else _ONE_WAY_SECONDS

    def _post_one_way(self, message: Mapping[str, Any]) -> None:
        """A notification or a response to a server request: the server
        answers 202 (or 200) with no message. Bounded by `request_timeout`
        (`_side_bound`) from waiting for the first slot (of the one-way
        budget) to the last read. An answer is owed (see the module notes):
        a POST the server may take later (408, 429, 500, 502, 503, 504; the
        connection reset, refused or closed before any answer) is sent
        again, `_AGAIN_FIRST` later, doubling up to `_AGAIN_MOST`, for
        `_AGAIN_WINDOW` at most (it holds a writer of the sender), with the
        first attempt's headers, never once its session ended (the same id
        in a new session is another request). A copy the server took twice
        is ignored (an id is never reused within a session). One not
        delivered is logged at warning and counted (`answers_undelivered`).
        A notification is one POST: the server copes without it."""
        bound = self._side_bound()
        started = time.monotonic()
        deadline = started + bound
        again_until = started + min(bound, _AGAIN_WINDOW)
        owed = "method" not in message and "id" in message
        body = jsonrpc.encode(message)
        # The headers of the first attempt serve every one: an answer belongs
        # to the session its request came in, and the same request id in a
        # later session is another request (a server numbers its own
        # requests per session), so it must never go out under a newer id.
        headers = self._one_way_headers()
        session = self._session.generation if "Mcp-Session-Id" in headers else None
        pause, attempts = _AGAIN_FIRST, 0
        while True:
            attempts += 1
            try:
                # A retry is bounded by its window (plus a grace): its writer serves other answers.
                self._post_once(body, min(deadline, again_until + _AGAIN_MOST) if attempts > 1 else deadline, bound, headers)
            except ConnectionClosed:
                raise  # close(): every exchange and the session end; nothing is owed any more
            except TransportError as exc:
                if not owed or self._closing:
                    raise
                if _worth_again(exc) and remaining(again_until) > pause:
                    log.debug("POST of the answer to server request %r failed (%s); sending it again in %g s",
                              message.get("id"), exc, pause)
                    if self._closed_event.wait(pause):
                        raise ConnectionClosed("the connection is closed") from None
                    pause = min(pause * 2, _AGAIN_MOST)
                    # Just before the POST: an `initialize` sent since ended the session it was owed in (nothing is owed).
                    if session is None or session == self._session.generation:
                        continue
                    log.info("not sending the answer to server request %r again: its session ended", message.get("id"))
                    raise
                with self._count_lock:
                    self.answers_undelivered += 1
                log.warning("the answer to server request %r was not delivered (%d POST%s in %.1f s): %s",
                            message.get("id"), attempts, "" if attempts == 1 else "s",
                            time.monotonic() - started, exc)
                raise
            if message.get("method") == "notifications/initialized" and self._initialize_era:
                # The handshake is complete: the session is in use (a later
                # `initialize` replaces it only once the server lost it).
                self._session.adopt()
                self._session.open_get_stream()
            return

    def _one_way_headers(self) -> dict[str, str]:
        headers = self._base_headers(session=self._initialize_era)
        headers["Accept"] = "application/json, text/event-stream"
        headers["Content-Type"] = "application/json"
        return headers

    def _post_once(self, body: bytes, deadline: float, bound: float, headers: dict[str, str]) -> None:
        """One POST of a one-way message with `headers`, by `deadline`.
        Raises `ConnectionClosed` when close() stopped it, else the
        `TransportError` of the failure (its cause the `OSError`, if any)."""
        exchange = Exchange("one-way", self._one_way, deadline=deadline)
        with self._lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            self._others.add(exchange)
        try:
            response = self._request(exchange, "POST", headers, body)
            answer = self._wire.read_body(response, ERROR_BODY_PREVIEW * 4, truncate=True)
            self._wire.done(exchange, response)
        except Stopped:
            raise ConnectionClosed("the connection is closed") from None
        except NoFreeSlot:
            raise ConnectError(f"POST to {self._target.url}: no connection was free within {bound:g} s") from None
        except (OSError, ValueError) as exc:
            raise self._post_failed(exc) from exc
        except (TransportError, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            raise ConnectError(f"POST to {self._target.url} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            self._forget(exchange)
        if response.status >= 300:
            raise self._status_error(response, answer, session=self._session.id is not None)

    # -- one exchange ----------------------------------------------------------------------------

    def _run(self, exchange: Exchange, message: Mapping[str, Any], body: bytes, headers: dict[str, str]) -> None:
        """One request's exchange, on the caller's thread or an exchange
        thread. Forgets the exchange when done, unless its stream was handed
        to an exchange thread (which then does)."""
        sent_session = "Mcp-Session-Id" in headers
        handed_off = False
        try:
            response = self._request(exchange, "POST", headers, body)
            handed_off = self._handle(exchange, message, response, sent_session)
        except Exception as exc:
            if message.get("method") == "initialize" and self._gave_up_before_the_head(exchange, exc):
                handed_off = self._await_late_session(exchange)
            if not handed_off:
                self._report(exchange, exc)
        finally:
            if not handed_off:
                self._forget(exchange)

    @staticmethod
    def _gave_up_before_the_head(exchange: Exchange, exc: Exception) -> bool:
        """Whether `exc` is the caller's deadline passing after its request
        was sent, before the head of the answer came (a 1xx aside)."""
        response = exchange.response
        return (isinstance(exc, TimeoutError) and exchange.on_caller and exchange.deadline is not None
                and time.monotonic() >= exchange.deadline - 0.01 and isinstance(response, Response)
                and response.status < 200)

    def _await_late_session(self, exchange: Exchange) -> bool:
        """The caller gave up on its `initialize` before the answer came
        (it reports the timeout itself). A slow server may still open a
        session for it, which the client will never use: the answer is
        awaited on an exchange thread for `_side_bound()` more, and the
        session it names, if any, ended (`_late_session`); else the server
        keeps it until it expires it (its id cannot be known). The
        exchange leaves the request table (a cancellation of the request
        no longer reaches it; close() still aborts it) and the request
        budget (a renewal must not wait for its slot). True when handed
        off (the thread forgets the exchange); else the caller's exchange
        is reported as any other that timed out."""
        response = exchange.response
        assert isinstance(response, Response)
        with self._lock:
            if self._closing:
                return False  # (close() aborts it: nothing could be read)
            if self._exchanges.get(exchange.request_id) is exchange:
                del self._exchanges[exchange.request_id]
            self._others.add(exchange)
        exchange.on_caller = False
        exchange.deadline = response.deadline = time.monotonic() + self._side_bound()
        if exchange.pool is self._pool:  # (after a redirect elsewhere it holds no slot of the budget)
            self._pool.move(exchange, self._streams)
        try:
            self._threads.submit(lambda: self._late_session(exchange, response))
        except ConnectionClosed:  # closing meanwhile, or no thread to be had
            exchange.stop.set()  # (its caller's deadline passed: nothing is reported to it)
            return False
        return True

    def _late_session(self, exchange: Exchange, response: Response) -> None:
        """(On an exchange thread.) Read the head of the answer to an
        `initialize` the caller gave up on, and end the session it names.
        Nothing of it is delivered: nobody waits for it."""
        try:
            response.begin()
            session = response.headers.get("mcp-session-id") if response.status == 200 else None
            if session is not None and visible_ascii(session) and not self._session.in_use(session):
                self._end_orphan(session, self._wire.origin_of(response))
            else:
                log.debug("the late answer to an initialize the client gave up on names no session (HTTP %s)",
                          response.status)
        except Exception as exc:  # aborted by close(), the bound spent, a broken head: nothing to end
            log.debug("no late answer to an initialize the client gave up on: %s", exc)
        finally:
            self._forget(exchange)

    def _report(self, exchange: Exchange, exc: Exception) -> None:
        """Report an exchange's failure `exc` to its caller: through the
        sink, or, for a caller's own exchange that `close()` stopped, as
        `ConnectionClosed` (nothing was delivered for it). Nobody is told of
        an exchange that was cancelled. (Called in the `except` block, not
        a context manager: one keeps the failure in a frame that its own
        traceback holds, a reference cycle per failed request.)"""
        if isinstance(exc, NoFreeSlot):
            exchange.stop.set()  # the caller's deadline passed: it reports the timeout
            return
        if not isinstance(exc, (TransportError, OSError, ValueError)):
            log.warning("request %r failed unexpectedly", exchange.request_id, exc_info=exc)
        if exchange.on_caller and self._closing:
            raise ConnectionClosed("the connection was closed") from None
        if isinstance(exc, TransportError):
            self._fail(exchange, exc)
        elif isinstance(exc, (OSError, ValueError)):
            if (exchange.deadline is not None and isinstance(exc, socket.timeout)
                    and time.monotonic() >= exchange.deadline - 0.01):
                # The caller's deadline passed during a read on its own
                # thread: it reports the timeout itself; deliver nothing.
                exchange.stop.set()
            self._fail(exchange, self._post_failed(exc))
        else:
            # Anything else (RecursionError from a pathological answer, a
            # bug) fails this request, never the thread silently: a caller
            # with no timeout would otherwise wait forever.
            self._fail(exchange, InvalidMessage(
                f"the answer to request {exchange.request_id!r} could not be read: {type(exc).__name__}: {exc}"))

    def _fail(self, exchange: Exchange, error: TransportError) -> None:
        if exchange.stop.is_set() or self._closing:
            return  # cancelled: the caller has gone, nobody to tell
        if self._sink is not None:
            self._sink.request_failed(exchange.request_id, error)

    def _handle(self, exchange: Exchange, message: Mapping[str, Any], response: Response, sent_session: bool) -> bool:
        """Act on the answer's head. True when its stream was handed off."""
        status = response.status
        if message.get("method") == "initialize" and status == 200:
            orphan = self._session.begin(response)
            if orphan is not None:
                self._end_orphan(*orphan)
        if 200 <= status < 300 and status != 202:
            encoding = response.headers.get("content-encoding")
            try:
                if encoding is not None:
                    coding_of(encoding)  # gzip and deflate are decoded
            except UnsupportedEncoding as exc:
                response.shutdown()
                raise InvalidMessage(f"the server answered with {exc}") from None
            content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
            if content_type == "application/json":
                payload = self._wire.read_body(response, self._target.max_response_bytes)
                self._wire.done(exchange, response)
                self._deliver(exchange, json_answer(exchange.request_id, payload))
                return False
            if content_type == "text/event-stream":
                if not exchange.on_caller:
                    AnswerStream(exchange, response, self._answers).finish()
                    return False
                return self._stream_on_caller(exchange, response)
            self._wire.drain(response)
            raise InvalidMessage(f"the server answered with content type {content_type or 'none'!r}")
        preview = self._wire.read_body(response, ERROR_BODY_PREVIEW * 8, truncate=True)
        self._wire.done(exchange, response)
        if sent_session and self._initialize_era and (
                status == 404 or (status == 400 and session_unknown(preview.decode("utf-8", "replace")))):
            raise self._status_error(response, preview, session=True)
        error_message = json_rpc_error(preview)
        if error_message is not None and status not in (401, 403):
            error_message["id"] = exchange.request_id
            self._deliver(exchange, error_message)
            return False
        raise self._status_error(response, preview, session=False)

    def _status_error(self, response: Response, body: bytes, *, session: bool) -> HTTPStatusError:
        """`Requester.status_error`; with `session` (the request carried the
        session id), a 404 from an origin that knows the session is `SessionExpired`."""
        expired = session and self._initialize_era and self._session.owns(response)
        return self._wire.status_error(response, body, expired=expired)

    def _session_lost(self, error: TransportError) -> None:
        sink = self._sink
        if sink is not None and not self._closing:
            sink.session_lost(error)

    def _events_lost(self, seconds: float) -> None:
        sink = self._sink
        if sink is not None and not self._closing:
            sink.events_lost(seconds)

    def _deliver(self, exchange: Exchange, message: Message) -> None:
        sink = self._sink
        if exchange.stop.is_set() or sink is None:
            return
        sink.deliver(message, related_to=exchange.request_id)

    def _stream_on_caller(self, exchange: Exchange, response: Response) -> bool:
        """An SSE answer, read on the caller's thread for as long as nothing
        but its response arrives (the common stream: maybe a priming event,
        the response, the end). The stream's end is read here too, so its
        connection is back in the pool before the call returns and the next
        call reuses it. True when the rest was handed to an exchange thread:
        when a message before the response (progress, a log message, a
        server request) must reach the caller while the stream is open (it
        waits on its inbox meanwhile, and its deadline is kept by cancelling
        the exchange), when the stream broke and may be resumed, or when the
        stream stays open after the response (then it may end later)."""
        stream = AnswerStream(exchange, response, self._answers)
        if stream.read(on_caller=True) == "response":
            if self._skip_end_waits > 0:
                self._skip_end_waits -= 1  # approximate under threads, which is all it needs
            elif not stream.end(wait=_CALLER_END_SECONDS):
                return False  # ended (or not reusable): given back either way
            else:
                # Not ended soon: this server may keep its streams open after
                # the response, so the next ones are not waited for here.
                self._skip_end_waits = _SKIP_END_WAITS
        exchange.on_caller, exchange.deadline = False, None
        response.deadline = None
        self._threads.submit(lambda: self._stream_on_thread(stream))
        return True

    def _stream_on_thread(self, stream: AnswerStream) -> None:
        """The rest of an SSE answer, read on an exchange thread, which owns
        the exchange from the hand-off on."""
        try:
            stream.finish()
        except Exception as exc:
            self._report(stream.exchange, exc)
        finally:
            self._forget(stream.exchange)

    def _count(self, sent: int = 0, received: int = 0) -> None:
        """Bytes of message bodies, for `Client.stats()`; exchanges run on
        many threads, so the sums are kept under a lock."""
        with self._count_lock:
            self.bytes_sent += sent
            self.bytes_received += received

    # -- read by the HTTP+SSE subclass and by tests --------------------------------------------------

    @property
    def _url(self) -> str:
        """Where requests go now (after any redirect)."""
        return self._wire.url

    @property
    def _get_offered(self) -> bool:
        return self._session.get_offered

    @property
    def _get_exchange(self) -> Exchange | None:
        return self._session.get_exchange

    @property
    def _get_thread(self) -> threading.Thread | None:
        return self._session.get_thread


def _worth_again(error: TransportError) -> bool:
    """Whether a failed POST of an answer may be sent again: the server
    said it did not take it for now (`_AGAIN_STATUSES`), or the connection
    broke before any answer (reset, refused, closed), which a server that
    restarts, a proxy, or a keep-alive connection the server closed just as
    it was reused all do. Not a timeout (the server does not read: the
    bound is spent), a TLS failure (an `OSError` that is no
    `ConnectionError`), or a malformed answer."""
    if isinstance(error, HTTPStatusError):
        return error.status in _AGAIN_STATUSES
    cause = error.__cause__
    if isinstance(cause, ResponseError):
        return str(cause) == CLOSED_WITHOUT_ANSWERING
    return isinstance(cause, ConnectionError)
