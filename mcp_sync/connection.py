"""The engine: the one place in mcp_sync with concurrency.

What it owns: the request id counter (shared by every connection a client
opens, never reset), the pending table of in-flight requests, deadlines,
cancellation, and routing every incoming message to where it belongs.
What it must not know: what any method means. It routes by JSON-RPC shape,
by id and by progress token only.

How it works. A caller thread registers a request (getting a `Pending` with
its own inbox), sends it, and waits on the inbox until its deadline. A
transport with `exchange_on_caller()` (Streamable HTTP, where each request
has its own answer) is sent the request from `wait()` instead, which knows
the deadline: the caller does its exchange on its own thread and then finds
the answer in its inbox, with no thread hand-off. Whoever reads a message
(the transport's reader thread, or that caller) calls `deliver()`, which
routes under the lock:

- a response goes to the inbox of the request with its id, which leaves the
  table at once; a response nobody waits for any more (timed out, abandoned)
  is dropped and logged at debug;
- `notifications/progress` goes to the inbox of the request whose id is the
  progress token (the engine always uses the request id as the token);
- a log message (`notifications/message`) or a server request goes to the
  request whose own response stream carried it (per-request transports say
  which), else to the one request in flight when there is exactly one, else
  to the worker;
- anything on a `subscriptions/listen` stream (by subscription id, or by
  the stream it came on) goes to that subscription's callback;
- any other notification goes to the `on_notification` hook, which only
  queues it for the client's dispatcher thread.

The *worker* is one thread per connection, started on first use, that runs
what relates to no caller: unrelated log messages and server requests with
no caller to answer them (bounded by `max_server_requests`). So the reader
never runs user code and never blocks.

Lock discipline: `_lock` guards `_pending`, `_subscriptions`, `_answering`,
`_worker_requests`, `_timers`, `_closed` and `_failure`. Nothing is sent,
and no user code runs, while it is held.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from .errors import (
    ConnectionClosed,
    InvalidMessage,
    McpError,
    RequestTimeout,
    ServerError,
    TransportError,
)
from .protocol import jsonrpc
from .transports.base import Transport

log = logging.getLogger("mcp_sync.connection")

# Inbox event kinds.
RESPONSE = "response"
PROGRESS = "progress"
LOG = "log"
SERVER_REQUEST = "server_request"
CLOSED = "closed"

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

ServerRequestHandler = Callable[[dict[str, Any]], Any]
NotificationHandler = Callable[[dict[str, Any]], None]


def _clone(exc: McpError) -> McpError:
    """A fresh copy of an exception, so that threads never share one (raising
    the same instance from many threads tangles its traceback)."""
    new = exc.__class__.__new__(exc.__class__, *exc.args)
    new.__dict__.update(exc.__dict__)
    new.args = exc.args
    new.__cause__ = exc.__cause__
    return new


class Pending:
    """One in-flight request: its id, method and inbox. Owned by its caller."""

    __slots__ = ("id", "method", "inbox", "cancellable", "unsent")

    def __init__(self, request_id: int, method: str, cancellable: bool) -> None:
        self.id = request_id
        self.method = method
        self.cancellable = cancellable
        self.inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        # (message, headers) for a transport that exchanges on the caller's
        # thread: sent by `wait()`, which knows the deadline.
        self.unsent: tuple[dict[str, Any], Mapping[str, str] | None] | None = None


class Connection:
    """A started transport plus the pending table. Thread-safe.

    `ids` is the client's counter, shared across restarts so that an id is
    never reused. `on_server_request` answers a server request that no caller
    can take (it returns a result dict or raises `ServerError`);
    `on_notification` receives every other notification, on the thread that
    read it: it must only hand the message on (the client's dispatcher
    queue), never block or run user code.
    """

    def __init__(
        self,
        transport: Transport,
        ids: Iterator[int],
        *,
        on_server_request: ServerRequestHandler | None = None,
        on_notification: NotificationHandler | None = None,
        on_log: NotificationHandler | None = None,
        max_server_requests: int = 16,
        handler_timeout: float | None = None,
    ) -> None:
        self.transport = transport
        #: The transport POSTs on the caller's thread (HTTP): `wait()` sends.
        self._on_caller = getattr(transport, "exchange_on_caller", None) is not None
        self._ids = ids
        self._on_server_request = on_server_request
        self._on_notification = on_notification
        self._on_log = on_log
        self._lock = threading.Lock()
        self._pending: dict[int | str, Pending] = {}
        self._closed = False
        self._failure: TransportError | None = None
        self._close_done = threading.Event()
        self._close_started = False
        self._worker: threading.Thread | None = None
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        # Server requests we owe an answer, by id: an answer is sent only for
        # an id still here (not cancelled by the server, not timed out).
        self._answering: set[Any] = set()
        self._worker_requests = 0  # server requests queued for, or on, the worker
        self._max_server_requests = max_server_requests
        self._handler_timeout = handler_timeout
        self._timers: set[threading.Timer] = set()
        # Open subscriptions (subscriptions/listen), by request id: each gets
        # its stream's events through a callback that must not block.
        self._subscriptions: dict[Any, Callable[[str, Any], None]] = {}

    def start(self) -> None:
        self.transport.start(self)

    # -- the caller side ---------------------------------------------------------

    def send_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        progress: bool = False,
        cancellable: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> Pending:
        """Register and send a request; the caller then waits with `wait()`.

        With `progress=True` the request id is set as `_meta.progressToken`.
        `headers` are extra transport headers for this request (HTTP only).
        """
        with self._lock:
            self._raise_if_unusable()
            request_id = next(self._ids)
            pending = Pending(request_id, method, cancellable)
            self._pending[request_id] = pending
        if progress:
            params = dict(params or {})
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = request_id
            params["_meta"] = meta
        message = jsonrpc.request(request_id, method, params)
        if self._on_caller:
            pending.unsent = (message, headers)
            return pending
        try:
            self.transport.send(message, headers)
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
            raise
        return pending

    def wait(
        self,
        pending: Pending,
        *,
        timeout: float | None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_total_timeout: float | None = None,
        on_log: Callable[[dict[str, Any]], None] | None = None,
        on_server_request: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Wait for the response to `pending`, handling what arrives meanwhile
        in this (the calling) thread. Returns the whole response message.

        On timeout, on an exception from a callback, or on KeyboardInterrupt,
        the request is abandoned (cancelled on the server) and the exception
        propagates. The timeout is absolute; with `reset_timeout_on_progress`
        each progress notification restarts it, bounded by `max_total_timeout`.
        """
        started = time.monotonic()
        deadline = started + timeout if timeout is not None else None
        hard_deadline = (
            started + max_total_timeout
            if reset_timeout_on_progress and max_total_timeout is not None and deadline is not None
            else None
        )
        get = pending.inbox.get
        try:
            if pending.unsent is not None:
                message, headers = pending.unsent
                pending.unsent = None
                limit = deadline if hard_deadline is None or deadline is None else min(deadline, hard_deadline)
                paused = self.transport.exchange_on_caller(message, headers, limit)  # type: ignore[attr-defined]
                if paused and deadline is not None:
                    deadline += paused  # time spent authorizing is not the call's
            while True:
                if deadline is None:
                    kind, payload = get()
                else:
                    limit = deadline if hard_deadline is None else min(deadline, hard_deadline)
                    remaining = limit - time.monotonic()
                    if remaining <= 0:
                        raise self._timeout(pending, timeout, hard_deadline is not None and limit == hard_deadline, max_total_timeout)
                    try:
                        kind, payload = get(timeout=remaining)
                    except queue.Empty:
                        continue
                if kind is RESPONSE:
                    return payload  # type: ignore[no-any-return]
                if kind is CLOSED:
                    raise _clone(payload)
                if kind is PROGRESS:
                    if reset_timeout_on_progress and deadline is not None and timeout is not None:
                        deadline = time.monotonic() + timeout
                    if on_progress is not None:
                        on_progress(payload)
                elif kind is LOG:
                    (on_log or self._log_default)(payload)
                elif kind is SERVER_REQUEST:
                    if on_server_request is not None:
                        # The call's clock stops while a handler runs (a person
                        # may be typing); only the total limit keeps running.
                        handler_started = time.monotonic()
                        on_server_request(payload)
                        if deadline is not None:
                            deadline += time.monotonic() - handler_started
                            if hard_deadline is None and max_total_timeout is not None:
                                hard_deadline = started + max_total_timeout
                    else:
                        self._answer_on_worker(payload)
        except BaseException:
            self.abandon(pending, "request abandoned by the client")
            raise

    def _timeout(self, pending: Pending, timeout: float | None, total: bool, max_total: float | None) -> RequestTimeout:
        if total:
            return RequestTimeout(
                f"{pending.method}: maximum total timeout exceeded ({max_total:g} s)",
                method=pending.method, timeout=timeout, max_total_timeout=max_total,
            )
        return RequestTimeout(
            f"{pending.method} timed out after {timeout:g} s", method=pending.method, timeout=timeout
        )

    def abandon(self, pending: Pending, reason: str) -> None:
        """Stop waiting for `pending`: forget it and cancel it on the server.

        A no-op when its response already arrived. A late response is dropped.
        """
        with self._lock:
            if self._pending.pop(pending.id, None) is None:
                return
            usable = not self._closed and self._failure is None
        if not usable:
            return
        try:
            # Per-request transports close the request's stream (the whole
            # cancellation in 2026-07-28 HTTP); shared streams need the
            # notification, and so does initialize-era HTTP.
            self.transport.cancel(pending.id)
            if pending.cancellable and self.transport.cancels_by_notification:
                self.transport.send(jsonrpc.notification(
                    "notifications/cancelled", {"requestId": pending.id, "reason": reason}
                ))
        except TransportError as exc:
            log.debug("could not cancel request %s: %s", pending.id, exc)

    def subscribe(self, method: str, params: Mapping[str, Any] | None, on_event: Callable[[str, Any], None]) -> int:
        """Open a long-lived request (`subscriptions/listen`). Everything its
        stream carries goes to `on_event(kind, payload)` on the reading
        thread, where it must only be queued: kind "notification" (the
        message), "end" (the final response), "cancelled" (the server's
        cancellation params) or "broken"/"closed" (an error)."""
        with self._lock:
            self._raise_if_unusable()
            request_id = next(self._ids)
            self._subscriptions[request_id] = on_event
        try:
            self.transport.send(jsonrpc.request(request_id, method, params))
        except BaseException:
            with self._lock:
                self._subscriptions.pop(request_id, None)
            raise
        return request_id

    def unsubscribe(self, request_id: int, reason: str = "subscription closed by the client") -> None:
        """Cancel a subscription as the transport requires. Idempotent."""
        with self._lock:
            if self._subscriptions.pop(request_id, None) is None:
                return
            usable = not self._closed and self._failure is None
        if not usable:
            return
        try:
            self.transport.cancel(request_id)
            if self.transport.cancels_by_notification:
                self.transport.send(jsonrpc.notification(
                    "notifications/cancelled", {"requestId": request_id, "reason": reason}))
        except TransportError as exc:
            log.debug("could not cancel subscription %s: %s", request_id, exc)

    def _subscription(self, request_id: Any, *, remove: bool = False) -> Callable[[str, Any], None] | None:
        if not jsonrpc.is_valid_id(request_id):
            return None
        with self._lock:
            return self._subscriptions.pop(request_id, None) if remove else self._subscriptions.get(request_id)

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            self._raise_if_unusable()
        self.transport.send(jsonrpc.notification(method, params))

    def respond(self, request_id: Any, result: Mapping[str, Any] | None = None, error: Mapping[str, Any] | None = None) -> None:
        """Answer a server request (with `result`, or with `error` {code,
        message, data}) once: a request the server cancelled, or one already
        answered (a handler that timed out), gets nothing more."""
        with self._lock:
            if request_id not in self._answering:
                log.debug("not answering server request %r: cancelled or answered already", request_id)
                return
            self._answering.discard(request_id)
        if error is not None:
            message = jsonrpc.error_response(request_id, error["code"], error["message"], error.get("data"))
        else:
            message = jsonrpc.result_response(request_id, result or {})
        try:
            self.transport.send(message)
        except TransportError as exc:
            log.debug("could not answer server request %r: %s", request_id, exc)

    def _raise_if_unusable(self) -> None:
        if self._failure is not None:
            raise _clone(self._failure)
        if self._closed:
            raise ConnectionClosed("the connection is closed")

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    @property
    def failure(self) -> TransportError | None:
        return self._failure

    # -- the reader side (MessageSink) ---------------------------------------------

    def deliver(self, message: dict[str, Any], related_to: int | str | None = None) -> None:
        try:
            kind = jsonrpc.classify(message)
        except InvalidMessage as exc:
            self.transport_failed(InvalidMessage(f"the server sent an invalid message: {exc}"))
            return
        if kind is jsonrpc.Kind.RESPONSE or kind is jsonrpc.Kind.ERROR:
            request_id = message.get("id")
            ended = pending = None
            if jsonrpc.is_valid_id(request_id):
                with self._lock:  # once per response: this is the hot path
                    ended = self._subscriptions.pop(request_id, None)
                    if ended is None:
                        pending = self._pending.pop(request_id, None)  # type: ignore[arg-type]
            if ended is not None:
                ended("end", message)
                return
            if pending is not None:
                pending.inbox.put((RESPONSE, message))
            elif request_id is None:
                log.warning("the server sent an error about no request: %s", message.get("error"))
            else:
                log.debug("dropped a response for request %r, which nobody waits for", request_id)
            return
        method = message["method"]
        params = message.get("params") or {}
        if kind is jsonrpc.Kind.NOTIFICATION:
            raw_meta = params.get("_meta")
            meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
            subscription = self._subscription(meta.get(SUBSCRIPTION_ID)) or self._subscription(related_to)
            if subscription is not None:
                if method == "notifications/cancelled":
                    self._subscription(params.get("requestId"), remove=True)
                    subscription("cancelled", params)
                else:
                    subscription("notification", message)
                return
            if method == "notifications/cancelled":
                withdrawn = self._subscription(params.get("requestId"), remove=True)
                if withdrawn is not None:
                    withdrawn("cancelled", params)
                    return
            if method == "notifications/progress":
                token = params.get("progressToken")
                with self._lock:
                    pending = self._pending.get(token) if jsonrpc.is_valid_id(token) else None  # type: ignore[arg-type]
                if pending is not None:
                    pending.inbox.put((PROGRESS, params))
                else:
                    log.debug("dropped progress for token %r, which no request holds", token)
                return
            if method == "notifications/cancelled" and self._cancel_server_request(params.get("requestId")):
                return
            if method == "notifications/message":
                single = self._related(related_to) or self._single_pending()
                if single is not None:
                    single.inbox.put((LOG, params))
                else:
                    self._submit(lambda: (self._on_log or self._log_default)(params))
                return
            if self._on_notification is not None:
                self._on_notification(message)
            else:
                log.debug("server notification %s (no handler)", method)
            return
        # A request from the server: owed an answer from now on.
        with self._lock:
            self._answering.add(message["id"])
        single = self._related(related_to) or self._single_pending()
        if single is not None:
            single.inbox.put((SERVER_REQUEST, message))
        else:
            self._answer_on_worker(message)

    def _cancel_server_request(self, request_id: Any) -> bool:
        """The server withdrew a request we owe an answer: never send one."""
        with self._lock:
            if request_id not in self._answering:
                return False
            self._answering.discard(request_id)
        log.debug("the server cancelled its request %r; its answer will not be sent", request_id)
        return True

    def transport_failed(self, error: TransportError) -> None:
        with self._lock:
            if self._closed or self._failure is not None:
                return
            self._failure = error
            waiting = list(self._pending.values())
            self._pending.clear()
            subscriptions = list(self._subscriptions.values())
            self._subscriptions.clear()
        log.debug("transport failed: %s", error)
        for pending in waiting:
            pending.inbox.put((CLOSED, error))
        for on_event in subscriptions:
            on_event("broken", error)

    def request_failed(self, request_id: int | str, error: TransportError) -> None:
        """One request's own channel failed (per-request transports): only its
        caller gets the error; the connection stays usable."""
        with self._lock:
            pending = self._pending.pop(request_id, None)
            subscription = self._subscriptions.pop(request_id, None)
        if pending is not None:
            pending.inbox.put((CLOSED, error))
        elif subscription is not None:
            subscription("broken", error)
        else:
            log.debug("request %r failed after nobody waited for it: %s", request_id, error)

    def _related(self, request_id: int | str | None) -> Pending | None:
        """The pending request a message arrived for (on its own stream)."""
        if request_id is None:
            return None
        with self._lock:
            return self._pending.get(request_id)

    def _single_pending(self) -> Pending | None:
        with self._lock:
            if len(self._pending) == 1:
                return next(iter(self._pending.values()))
        return None

    # -- the worker ------------------------------------------------------------------

    def _answer_on_worker(self, message: dict[str, Any]) -> None:
        with self._lock:
            full = self._worker_requests >= self._max_server_requests
            if not full:
                self._worker_requests += 1
        if full:
            # Refused at once, so a flood costs bounded memory and time.
            self.respond(message["id"], error={"code": -32603, "message": "too many server requests in progress"})
            return
        self._submit(lambda: self._answer_bounded(message))

    def _answer_bounded(self, message: dict[str, Any]) -> None:
        timer = None
        if self._handler_timeout is not None:
            limit = self._handler_timeout
            timer = threading.Timer(limit, lambda: self.respond(message["id"], error={
                "code": -32603, "message": f"the client's handler did not answer within {limit:g} s"}))
            timer.daemon = True
            with self._lock:
                self._timers.add(timer)
            timer.start()
        try:
            self._answer(message)
        finally:
            with self._lock:
                self._worker_requests -= 1
                if timer is not None:
                    self._timers.discard(timer)
            if timer is not None:
                timer.cancel()
                timer.join()

    def _answer(self, message: dict[str, Any]) -> None:
        handler = self._on_server_request
        try:
            if handler is None:
                raise ServerError(-32601, f"Method not found: {message['method']}")
            result = handler(message)
        except ServerError as exc:
            self.respond(message["id"], error={"code": exc.code, "message": exc.message, "data": exc.data})
        except Exception as exc:  # a handler bug must not kill the worker
            log.exception("handler for server request %s failed", message.get("method"))
            self.respond(message["id"], error={"code": -32603, "message": f"client handler failed: {exc}"})
        else:
            self.respond(message["id"], result=result)

    def _submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                return
            if self._worker is None:
                self._worker = threading.Thread(target=self._run_worker, name="mcp-sync-worker", daemon=True)
                self._worker.start()
        self._work.put(job)

    def _run_worker(self) -> None:
        while True:
            job = self._work.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("a notification or server-request handler raised")

    @staticmethod
    def _log_default(params: dict[str, Any]) -> None:
        log.info("server log: %s", params)

    # -- closing -------------------------------------------------------------------------

    def close(self, reason: str = "the connection was closed by close()") -> None:
        """Fail every pending call with `ConnectionClosed`, close the transport,
        end the worker. Idempotent, callable from any thread; a second caller
        waits until the first has finished."""
        with self._lock:
            if self._close_started:
                first = False
            else:
                first = True
                self._close_started = True
                self._closed = True
                waiting = list(self._pending.values())
                self._pending.clear()
                subscriptions = list(self._subscriptions.values())
                self._subscriptions.clear()
                worker = self._worker
        if not first:
            if threading.current_thread() is not self._worker:
                self._close_done.wait()
            return
        try:
            error = ConnectionClosed(reason)
            for pending in waiting:
                pending.inbox.put((CLOSED, error))
            for on_event in subscriptions:
                on_event("closed", error)
            self.transport.close()
            if worker is not None:
                self._work.put(None)
                if worker is not threading.current_thread():
                    worker.join()
            with self._lock:
                timers = list(self._timers)
            for timer in timers:
                timer.cancel()
                if timer is not threading.current_thread():
                    timer.join()
        finally:
            self._close_done.set()

    @property
    def closed(self) -> bool:
        return self._closed


def new_id_counter() -> Iterator[int]:
    """Request ids: integers from 1, never reset for the life of a client."""
    return itertools.count(1)
