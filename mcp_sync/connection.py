"""The engine: the one place in mcp_sync with concurrency.

What it owns: the request id counter (shared by every connection a client
opens, never reset), the pending table (through its `Router`), deadlines
and cancellation. Its threads (the *sender*, the *handler pool*, the log
thread) and the answering of server requests are its collaborator's,
`engine_threads.EngineThreads`. What it must not know: what any method
means, or which transport it drives (the `Transport` interface is all it
sees).

How it works. A caller thread registers a request (getting a `Pending` with
its own `Inbox`) and waits on the inbox until its deadline; `wait()` first
hands the request to `transport.exchange()`, on the caller's thread, so a
transport whose requests have their own answer channel (Streamable HTTP)
does the whole exchange there. Whoever reads a message (a transport's reader
thread, or that caller) calls `deliver()`: the reader side, `Delivery`
(`delivery.py`), which asks the router where the message goes (`router.py`
has the rules) and carries the answer out, into a caller's inbox under the
lock, or to a subscription, the engine's threads or the notification hook.

Who writes: a caller writes its own request (on its own thread). Everything
else (cancellations, answers to server requests, refusals) goes through the
sender's bounded queue, so neither a reader nor a caller that gave up ever
blocks on IO.

Lock discipline: `_lock` guards the router (pending calls, subscriptions,
owed answers), `state` and `_failure`; `Delivery` takes the same lock
(the connection gives it the lock and the router, and a new pair, with a
new `Delivery`, only in a fork child). It is held only for table updates
and inbox puts (which never block); nothing is sent, no user code runs and
nothing is logged while it is held. `EngineThreads` is
never called with `_lock` held: it takes it itself, through `_settle()` and
`_owes()`, to know whether a server request is still owed its answer.

Memory is bounded whatever the server sends: each inbox keeps at most
`INBOX_MAX_PROGRESS` progress and `INBOX_MAX_LOGS` log messages (the
oldest of a kind makes room, so a slow caller still sees the latest) and
at most `max_server_requests` server requests (more are refused with an
error); the response is never dropped. What is dropped is counted in
`drops` and logged once per burst.
"""

from __future__ import annotations

import enum
import itertools
import logging
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from . import router as routes
from .delivery import Delivery
from .engine_threads import MAX_HANDLER_THREADS as MAX_HANDLER_THREADS
from .engine_threads import MAX_QUEUED_LOGS as MAX_QUEUED_LOGS
from .engine_threads import Burst as Burst
from .engine_threads import Answer, EngineThreads, is_engine_thread, log_message
from .errors import ConnectionClosed, RequestTimeout, TransportError, copy_error
from .inbox import CLOSED as CLOSED
from .inbox import CROWDED as CROWDED
from .inbox import INBOX_MAX_LOGS as INBOX_MAX_LOGS
from .inbox import INBOX_MAX_PROGRESS as INBOX_MAX_PROGRESS
from .inbox import Drops as Drops
from .inbox import Inbox as Inbox
from .protocol import codes, jsonrpc
from .router import ADOPTED as ADOPTED
from .router import LOG as LOG
from .router import PROGRESS as PROGRESS
from .router import RESPONSE as RESPONSE
from .router import SERVER_REQUEST as SERVER_REQUEST
from .router import Router
from .transports.base import Transport
from .waiting import MAIN_THREAD_SLICE, expired, on_main_thread, remaining, slice_of

log = logging.getLogger("mcp_sync.connection")

SUBSCRIPTION_ID = routes.SUBSCRIPTION_ID

#: How long `close()` waits for the sender and for running handlers.
CLOSE_JOIN_TIMEOUT = 2.0
#: How long `close()` lets the sender write what it has queued.
CLOSE_FLUSH_TIMEOUT = 0.5

ServerRequestHandler = Callable[[dict[str, Any]], Any]
NotificationHandler = Callable[[dict[str, Any]], None]





class Pending:
    """One in-flight request: its id, method and inbox. Owned by its caller."""

    __slots__ = ("id", "method", "params", "inbox", "cancellable", "unsent", "adopts", "adopted")

    def __init__(self, request_id: int, method: str, cancellable: bool, max_requests: int = 16,
                 adopts: bool = False, params: Mapping[str, Any] | None = None) -> None:
        self.id = request_id
        self.method = method
        self.params = params  # as given, for errors that name what was asked
        self.cancellable = cancellable
        self.adopts = adopts  # takes a server request no call is named for, when it waits alone
        self.adopted = 0  # adopted requests queued or running: changed under the connection's lock
        self.inbox = Inbox(request_id, method, max_requests)
        # (message, headers) for a transport that exchanges on the caller's
        # thread: sent by `wait()`, which knows the deadline.
        self.unsent: tuple[dict[str, Any], Mapping[str, str] | None] | None = None


class State(enum.Enum):
    """Where a connection is in its life. Moves only forward: OPEN, then
    FAILED (the transport failed: `failure` says why) and/or CLOSED
    (`close()` began, or a fork child discarded it)."""

    OPEN = "open"
    FAILED = "failed"
    CLOSED = "closed"


def _timed_out(pending: Pending, timeout: float | None, total: bool, max_total: float | None) -> RequestTimeout:
    """The error of a call past its deadline (`total`: past `max_total_timeout`)."""
    if total:
        return RequestTimeout(
            f"{pending.method}: maximum total timeout exceeded ({max_total:g} s)",
            method=pending.method, timeout=timeout, max_total_timeout=max_total,
        )
    return RequestTimeout(f"{_subject(pending)} timed out after {timeout:g} s: pass a larger timeout= to the call, "
                          "or connect(timeout=...) for every call (None waits as long as it takes)",
                          method=pending.method, timeout=timeout)


def naming_the_calls_timeout(error: RequestTimeout, timeout: float) -> RequestTimeout:
    """`error` of a wait given what was left of a call's `timeout` (the rest
    went to waiting for another caller's identical fetch), naming the
    call's own timeout, as every other timeout of the call does."""
    spent = error.timeout
    if spent is None or spent == timeout or error.max_total_timeout is not None:
        return error
    message = str(error).replace(f"timed out after {spent:g} s", f"timed out after {timeout:g} s", 1)
    return RequestTimeout(message, method=error.method, timeout=timeout)


def _subject(pending: Pending) -> str:
    """The method, and the tool, prompt or resource it names (for errors)."""
    params = pending.params
    named = params.get("name") or params.get("uri") if isinstance(params, Mapping) else None
    return f"{pending.method} {_short(named)!r}" if isinstance(named, str) else pending.method


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


class Connection:
    """A started transport plus the pending table. Thread-safe.

    `ids` is the client's counter, shared across restarts so that an id is
    never reused. `on_server_request` answers a server request that no caller
    can take (it returns a result dict or raises `jsonrpc.Refusal`); it runs on
    the handler pool, at most `max_server_requests` at once (more are
    refused at once), each answered with an error if it takes longer than
    `handler_timeout` from the request's arrival; one that
    `answers_at_once(message)` picks (it must never block nor run user
    code: ping, the server's `tasks/*` about the client's tasks) is
    answered on the thread that read it, without a pool slot. `on_notification`
    receives every other notification, on the thread that read it: it must
    only hand the message on (the client's dispatcher queue). `on_log`
    handles log messages that came for no call, on the handler pool.
    `drops` counts what was dropped to keep memory bounded (see `Drops`).
    `on_cancelled()` is told of each cancellation made (see `_cancel`).
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
        drops: Drops | None = None,
        on_failed: Callable[[Connection, TransportError], None] | None = None,
        on_session_lost: Callable[[Connection, TransportError], None] | None = None,
        on_events_lost: Callable[[Connection, float], None] | None = None,
        answers_at_once: Callable[[dict[str, Any]], bool] | None = None,
        on_cancelled: Callable[[], None] | None = None,
    ) -> None:
        self.transport = transport
        # Told once per request it cancels on the server (`_cancel`), on the
        # thread that gave up: it must only count (`stats().cancellations`).
        self._on_cancelled = on_cancelled
        # Told once when the transport fails (on the thread that noticed:
        # it must only hand the news on, never do IO).
        self._on_failed = on_failed
        self._on_session_lost = on_session_lost
        self._on_events_lost = on_events_lost
        # The transport does a caller's exchange on the caller's thread (it
        # overrides `exchange()`): `wait()` sends, as it knows the deadline.
        self._exchanges = type(transport).exchange is not Transport.exchange
        self._ids = ids
        self._on_notification = on_notification
        self._lock = threading.Lock()
        self._router: Router[Any] = Router()
        self._router.adopting = not transport.relates_server_requests
        # One explicit lifecycle state (see `State`): where the connection
        # is in its life, read by anyone without the lock (a plain attribute:
        # the hot path reads it on every call), written only here, under the
        # lock. `_failure` keeps why it failed even once closed, for the
        # errors of later sends.
        self.state = State.OPEN
        self._failure: TransportError | None = None
        self._close_done = threading.Event()  # set once the first close() finished
        self._closing_thread: int | None = None
        self._max_server_requests = max_server_requests
        #: What was dropped to keep memory bounded (shared with the client's
        #: other connections when it passes its own).
        self.drops = drops if drops is not None else Drops()
        self._threads = EngineThreads(
            self._write, settle=self._settle, owes=self._owes, on_server_request=on_server_request,
            on_log=on_log, max_server_requests=max_server_requests, handler_timeout=handler_timeout,
            drops=self.drops, at_once=answers_at_once, writers=getattr(transport, "parallel_writes", 1))
        self._new_delivery()

    def _new_delivery(self) -> None:
        """Build the reader side on the current lock and table, and expose it."""
        self._delivery = Delivery(self._lock, self._router, self._threads, on_notification=self._on_notification,
                                  drops=self.drops, failed=self.transport_failed, unadopt=self._unadopt)
        # The reader side of the `MessageSink` (the transport calls these):
        # `Delivery`'s own methods, so a message costs no frame of ours.
        self.deliver = self._delivery.deliver
        self.deliver_all = self._delivery.deliver_all

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
        adopts: bool = False,
    ) -> Pending:
        """Register and send a request; the caller then waits with `wait()`.

        With `progress=True` the request id is set as `_meta.progressToken`.
        `headers` are extra transport headers for this request (HTTP only).
        `adopts`: while it is the only call waiting, a server request that
        names no call is answered on its caller's thread (`wait()`).
        """
        # Made before the lock, its id given under it: the lock is held only
        # for the table update (every caller and the reader take it).
        pending = Pending(0, method, cancellable, self._max_server_requests, adopts, params)
        try:
            with self._lock:
                if self.state is not State.OPEN:
                    self._raise_if_unusable()
                pending.id = pending.inbox.id = request_id = next(self._ids)
                self._router.add_call(request_id, pending)
            if progress:
                params = dict(params or {})
                meta = dict(params.get("_meta") or {})
                meta["progressToken"] = request_id
                params["_meta"] = meta
            # `jsonrpc.request()`, written out: this runs on every call.
            message: dict[str, Any] = {"jsonrpc": jsonrpc.JSONRPC, "id": request_id, "method": method}
            if params is not None:
                message["params"] = params
            if self._exchanges:
                pending.unsent = (message, headers)
                return pending
            self.transport.send(message, headers)
        except BaseException:
            # Invariant: a call registered here is forgotten unless its
            # caller holds its `Pending`: a refused send, or an interrupt
            # anywhere (as the lock is released, say). It was not sent, so
            # nothing is cancelled. (Id 0: not registered yet.)
            if pending.id:
                with self._lock:
                    self._router.remove_call(pending.id)
                self._hand_on_leftovers(pending)  # a request adopted meanwhile goes to the handler threads
            raise
        return pending

    def wait(
        self,
        pending: Pending,
        *,
        timeout: float | None,
        until: float | None = None,
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
        propagates. The timeout is absolute, and ends by `until` (a
        `time.monotonic()` value: the call's deadline, of which waiting for
        a slot or a reconnect took part) when that comes first; the error
        names `timeout`, the call's. With `reset_timeout_on_progress`
        each progress notification restarts it, bounded by `max_total_timeout`.
        A response that is already in the inbox when the deadline passes is
        returned, not reported as a timeout (a slow progress callback must not
        turn a result into an error that invites a retry).
        """
        try:  # from the first line: an interrupt anywhere here abandons the call
            started = time.monotonic()
            deadline = started + timeout if timeout is not None else None
            if until is not None and deadline is not None and until < deadline:
                deadline = until
            hard_deadline = (started + max_total_timeout if reset_timeout_on_progress and max_total_timeout is not None
                             and deadline is not None else None)
            if pending.unsent is not None:
                unsent, pending.unsent = pending.unsent, None  # see `send_deferred()`
                limit = deadline if hard_deadline is None or deadline is None else min(deadline, hard_deadline)
                paused = self.transport.exchange(unsent[0], unsent[1], limit)
                if paused and deadline is not None:
                    deadline += paused  # time spent authorizing is not the call's
            # The main thread wakes now and then (`slice_of`), so a simulated
            # Ctrl-C (`_thread.interrupt_main()`) is raised while it waits.
            # (These few lines run on every call: the helpers' bodies are
            # written out here, to keep the per-call budget; after the
            # exchange above, which over stdio writes the request, so that
            # they run while the server works on it.)
            main = threading.current_thread() is threading.main_thread()
            get = pending.inbox.get
            while True:
                if deadline is None:
                    wait_for = MAIN_THREAD_SLICE if main else None
                else:
                    limit = deadline if hard_deadline is None else min(deadline, hard_deadline)
                    remaining = limit - time.monotonic()
                    if remaining <= 0:
                        response = self._expire(pending)
                        if response is not None:
                            return response
                        raise _timed_out(pending, timeout, hard_deadline is not None and limit == hard_deadline,
                                            max_total_timeout)
                    wait_for = remaining if not main or remaining < MAIN_THREAD_SLICE else MAIN_THREAD_SLICE
                try:
                    kind, payload = get(timeout=wait_for)
                except queue.Empty:
                    continue
                if kind is RESPONSE:
                    return payload  # type: ignore[no-any-return]
                if kind is CLOSED:
                    raise copy_error(payload)
                if kind is PROGRESS:
                    if reset_timeout_on_progress and deadline is not None and timeout is not None:
                        deadline = time.monotonic() + timeout
                    if on_progress is not None:
                        on_progress(payload)
                elif (kind is SERVER_REQUEST and on_server_request is not None) or kind is ADOPTED:
                    # The call's clock stops while a handler runs (a person
                    # may be typing); only the total limit keeps running.
                    handler_started = time.monotonic()
                    try:
                        if kind is ADOPTED:
                            try:
                                self._threads.answer_here(payload)
                            finally:
                                self._unadopt(pending)
                        else:
                            on_server_request(payload)  # type: ignore[misc]
                    except BaseException:
                        # Ctrl-C at a prompt: the question is still owed
                        # an answer, and nobody else will give it.
                        self.respond(payload["id"], error={
                            "code": codes.INTERNAL_ERROR, "message": "the request was abandoned by the client"})
                        raise
                    if deadline is not None:
                        paused = time.monotonic() - handler_started
                        limit = self._threads.handler_timeout if kind is ADOPTED else None
                        # An adopted question past its handler timeout has been
                        # answered for the server already: no more of the call's time.
                        deadline += paused if limit is None else min(paused, limit)
                        if hard_deadline is None and max_total_timeout is not None:
                            hard_deadline = started + max_total_timeout
                else:
                    self.meanwhile(kind, payload, on_log)
        except BaseException:
            self.abandon(pending, "request abandoned by the client")
            raise

    def send_deferred(self, pending: Pending, limit: float | None) -> float:
        """Send the request `send_request` left to the waiting caller (an
        exchange that answers in its own response, see `Transport.exchange`);
        the seconds spent authorizing, which are not the call's."""
        assert pending.unsent is not None
        message, headers = pending.unsent
        pending.unsent = None
        return self.transport.exchange(message, headers, limit)

    def meanwhile(self, kind: object, payload: Any, on_log: Callable[[dict[str, Any]], None] | None) -> None:
        """What arrives for a waiting call besides its answer and progress:
        a log message goes to `on_log` (else `logging`), a server request
        nobody waits to handle goes to the handler threads."""
        if kind is LOG:
            (on_log or log_message)(payload)
        elif kind is SERVER_REQUEST:  # (ADOPTED never reaches here: the module's `poll()` does not adopt, `wait()` answers it)
            self._threads.take(payload)

    def _expire(self, pending: Pending) -> dict[str, Any] | None:
        """The deadline passed: forget the call (so nothing more can arrive),
        then take a last look. The response if it made it into the inbox;
        else the call is cancelled on the server and None is returned."""
        with self._lock:
            forgotten = self._router.remove_call(pending.id) is not None
            usable = self.state is State.OPEN
        response = self._last_look(pending)
        if response is None and forgotten and usable:
            self._cancel(pending.id, "request timed out", notify=pending.cancellable)
        return response

    def _last_look(self, pending: Pending) -> dict[str, Any] | None:
        """At the deadline: the response if it is in the inbox already. What
        else is there is past its time; server requests among it are handed
        on to the client's handlers (`abandon()` would, too)."""
        while True:
            try:
                kind, payload = pending.inbox.get_nowait()
            except queue.Empty:
                return None
            if kind is RESPONSE:
                return payload  # type: ignore[no-any-return]
            if kind is CLOSED:
                raise copy_error(payload)
            if kind is SERVER_REQUEST or kind is ADOPTED:
                self._threads.take(payload)

    def abandon_any(self, pending: Pending | None) -> None:
        """`abandon(pending)` for a caller whose own code was interrupted (a
        Ctrl-C as `wait()` starts); nothing when nothing was registered."""
        if pending is not None:
            self.abandon(pending, "request abandoned by the client")

    def abandon(self, pending: Pending, reason: str) -> None:
        """Stop waiting for `pending`: forget it and cancel it on the server.

        Never blocks on IO: the transport's `cancel()` only aborts, and the
        `notifications/cancelled` goes through the sender. Server requests
        left in the inbox are handed to the client's handlers, never dropped.
        A late response is dropped by the router. A request still unsent
        (left to `wait()` by `send_request`) is only forgotten: the server
        never saw it. A second `abandon()` does nothing.
        """
        with self._lock:
            forgotten = self._router.remove_call(pending.id) is not None
            usable = self.state is State.OPEN
        # Nothing can reach the inbox any more (puts happen under the lock).
        self._hand_on_leftovers(pending)
        if not forgotten or not usable or pending.unsent is not None:
            return
        self._cancel(pending.id, reason, notify=pending.cancellable)

    def _cancel(self, request_id: Any, reason: str, *, notify: bool) -> None:
        """Cancel a request that was sent and is still unanswered; with
        `notify` (one that may be cancelled) it counts as one cancellation
        (`on_cancelled`), the one place that counts them."""
        try:
            # Per-request transports close the request's stream (the whole
            # cancellation in 2026-07-28 HTTP); shared streams need the
            # notification, and so does initialize-era HTTP.
            self.transport.cancel(request_id)
        except TransportError as exc:
            log.debug("could not cancel request %s: %s", request_id, exc)
        if not notify:
            return  # (`initialize`, a task-augmented request: not cancelled, not counted)
        made = True  # (closing the request's stream is the whole cancellation: done above)
        if self.transport.cancels_by_notification:
            # Dropped when the sender's queue is crowded (the server copes
            # without it): then no cancellation was made, and none counts.
            made = self._threads.post(jsonrpc.notification(
                "notifications/cancelled", {"requestId": request_id, "reason": reason}), spare=True)
        if made and self._on_cancelled is not None:
            self._on_cancelled()

    def _hand_on_leftovers(self, pending: Pending) -> None:
        while True:
            try:
                kind, payload = pending.inbox.get_nowait()
            except queue.Empty:
                return
            if kind is SERVER_REQUEST or kind is ADOPTED:
                self._threads.take(payload)

    def _unadopt(self, pending: Pending) -> None:
        """An adopted request of `pending` was answered or handed on: it may adopt another."""
        with self._lock:
            pending.adopted -= 1

    def subscribe(self, method: str, params: Mapping[str, Any] | None, on_event: Callable[[str, Any], None]) -> int:
        """Open a long-lived request (`subscriptions/listen`). Everything its
        stream carries goes to `on_event(kind, payload)` on the reading
        thread, where it must only be queued: kind "notification" (the
        message), "end" (the final response), "cancelled" (the server's
        cancellation params) or "broken"/"closed" (an error)."""
        with self._lock:
            self._raise_if_unusable()
            request_id = next(self._ids)
            self._router.add_subscription(request_id, on_event)
        try:
            self.transport.send(jsonrpc.request(request_id, method, params))
        except BaseException:
            with self._lock:
                self._router.remove_subscription(request_id)
            raise
        return request_id

    def unsubscribe(self, request_id: int, reason: str = "subscription closed by the client") -> None:
        """Cancel a subscription as the transport requires. Idempotent."""
        with self._lock:
            if self._router.remove_subscription(request_id) is None:
                return
            usable = self.state is State.OPEN
        if usable:
            self._cancel(request_id, reason, notify=True)

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification of the caller's own (`notifications/initialized`)
        on the calling thread."""
        with self._lock:
            self._raise_if_unusable()
        self.transport.send(jsonrpc.notification(method, params))

    def respond(self, request_id: Any, result: Mapping[str, Any] | None = None,
                error: Mapping[str, Any] | None = None, *, small: bool = False) -> bool:
        """Answer a server request (with `result`, or with `error` {code,
        message, data}) once: a request the server cancelled, or one already
        answered (a handler that timed out), gets nothing more (False). Never
        blocks: the answer goes out through the sender (see `EngineThreads.respond`)."""
        return self._threads.respond(request_id, result, error, small=small)

    def later(self, request_id: Any) -> Answer:
        """The `engine_threads.Answer` of server request `request_id`: for
        a `Later` answered on the caller's thread."""
        return self._threads.later(request_id)

    def arm_handler_timeout(self, request_id: Any) -> None:
        """Answer server request `request_id` with an error if nothing has
        answered it `handler_timeout` seconds from now (for an answer given
        later by other code than a handler: see `engine_threads.Later`)."""
        self._threads.arm_handler_timeout(request_id)

    def _settle(self, request_id: Any) -> bool:
        """True, once, when server request `request_id` is owed an answer:
        the one about to go out (for `EngineThreads`)."""
        with self._lock:
            return self._router.settle(request_id)

    def _owes(self, request_id: Any) -> bool:
        """Is server request `request_id` still owed an answer?"""
        with self._lock:
            return request_id in self._router.owed

    def _write(self, message: Mapping[str, Any]) -> None:
        """The sender's one way out (on the sender's thread). Also while
        `close()` flushes: a closed transport refuses by itself."""
        self.transport.send(message)

    def _raise_if_unusable(self) -> None:
        if self._failure is not None:
            raise copy_error(self._failure)
        if self.state is State.CLOSED:
            raise ConnectionClosed("the connection is closed")

    @property
    def in_flight(self) -> int:
        """Calls waiting for a response now."""
        with self._lock:
            return len(self._router.calls)

    @property
    def owed(self) -> int:
        """Server requests the client has not answered yet."""
        with self._lock:
            return len(self._router.owed)

    @property
    def failure(self) -> TransportError | None:
        return self._failure

    # -- the reader side (MessageSink; the rest is `Delivery`'s) ---------------------

    def transport_failed(self, error: TransportError) -> None:
        with self._lock:
            if self.state is not State.OPEN:
                return
            self._failure, self.state = error, State.FAILED
            calls, subscriptions = self._router.clear()
        log.debug("transport failed: %s", error)
        for pending in calls:
            pending.inbox.put(CLOSED, error)
        for on_event in subscriptions:
            on_event("broken", error)
        if self._on_failed is not None:
            try:
                self._on_failed(self, error)
            except Exception:  # the reader must survive it
                log.exception("the connection's failure callback raised")

    def session_lost(self, error: TransportError) -> None:
        """The transport found its session gone with no request to tell: the
        owner sets up a new one (`on_session_lost`, told on this thread)."""
        self._tell_owner(self._on_session_lost, error, "session-lost")

    def events_lost(self, seconds: float) -> None:
        """The transport's stream for messages related to no request was
        opened again without resuming it: the owner tells whoever counts
        on it (`on_events_lost`, told on this thread)."""
        self._tell_owner(self._on_events_lost, seconds, "events-lost")

    def _tell_owner(self, callback: Callable[[Connection, Any], None] | None, news: Any, what: str) -> None:
        """Hand the transport's news on to the owner's `callback`, while
        the connection is open; the transport's thread survives a raise."""
        if self.state is not State.OPEN or callback is None:
            return
        try:
            callback(self, news)
        except Exception:
            log.exception("the connection's %s callback raised", what)

    def request_failed(self, request_id: int | str, error: TransportError) -> None:
        """One request's own channel failed (per-request transports): only its
        caller gets the error; the connection stays usable."""
        with self._lock:
            pending = self._router.remove_call(request_id)
            subscription = self._router.remove_subscription(request_id) if pending is None else None
            if pending is not None:
                pending.inbox.put(CLOSED, error)
        if subscription is not None:
            subscription("broken", error)
        elif pending is None:
            log.debug("request %r failed after nobody waited for it: %s", request_id, error)

    # -- closing -------------------------------------------------------------------------

    def close(self, reason: str = "the connection was closed by close()") -> None:
        """Fail every pending call with `ConnectionClosed`, close the transport,
        end the sender and the handler threads (waiting a bounded time for a
        handler that is still running). Idempotent, callable from any thread;
        a second caller waits until the first has finished."""
        with self._lock:
            first = self.state is not State.CLOSED
            if first:
                self.state = State.CLOSED
                self._closing_thread = threading.get_ident()
                calls, subscriptions = self._router.clear()
        if not first:
            # Re-entered from a callback that close() itself is running, or
            # from one of the connection's own threads: waiting would only
            # wait for ourselves.
            if threading.get_ident() != self._closing_thread and not is_engine_thread():
                # As long as the first close may take (a stdio server's three
                # shutdown steps), so that no thread outlives this close() either.
                self._close_done.wait(self.close_budget)
            return
        try:
            error = ConnectionClosed(reason)
            for pending in calls:
                pending.inbox.put(CLOSED, error)
            for on_event in subscriptions:
                on_event("closed", error)
            # Send what is queued (cancellations, answers) for a moment, and
            # log what the server said before the end, for a moment too.
            self._threads.flush(CLOSE_FLUSH_TIMEOUT)
        finally:
            # Whatever happens above (a Ctrl-C during the flush), the
            # transport is closed and the threads are told to stop: nested
            # `finally`s, so one failing step does not skip the others.
            try:
                self._threads.stop()
            finally:
                try:
                    self.transport.close()  # also ends a write the sender is blocked in
                finally:
                    try:
                        self._threads.join(CLOSE_JOIN_TIMEOUT)
                    finally:
                        self._close_done.set()

    def discard(self) -> None:
        """In a child process after `os.fork()`: forget this connection
        without any IO, and without the lock (another thread of the parent
        may have held it at the fork; that thread does not exist here).

        The parent still uses the same server through the same sockets and
        pipes, so nothing is sent, cancelled or closed on the wire: the
        transport only closes this process's copies of its descriptors. The
        pending entries belong to threads that were not copied, and so do
        the sender and the handler threads."""
        self._lock = threading.Lock()
        self.state = State.CLOSED
        self._router = Router()
        self._threads.discard()
        self._new_delivery()  # on the new lock and table
        self._close_done = threading.Event()  # the parent's may have been mid-use
        self._close_done.set()
        try:
            self.transport.discard()
        except Exception:  # nothing the child can do about it; it reconnects anyway
            log.debug("discarding the transport after fork failed", exc_info=True)

    @property
    def closed(self) -> bool:
        """True once `close()` began (or a fork child discarded it)."""
        return self.state is State.CLOSED

    @property
    def close_budget(self) -> float:
        """The longest `close()` takes: the two flushes (the sender's queue,
        the log messages), the transport's own close
        (`Transport.close_budget`), and the wait for the engine's threads."""
        return 2 * CLOSE_FLUSH_TIMEOUT + self.transport.close_budget + CLOSE_JOIN_TIMEOUT


def poll(
    conn: Connection,
    pending: Pending,
    timeout: float,
    *,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    on_server_request: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any] | None:
    """The response to `pending` if it arrives within `timeout` seconds
    (0: only if it is there already), else None with the request still
    in flight: unlike `wait()`, running out of time cancels nothing, so
    a caller can watch two requests (the start-up race of `negotiation`).
    Logs and server requests are handled as `wait()` handles them;
    progress is not asked for there and is skipped. An interrupt
    abandons the request."""
    end = time.monotonic() + timeout
    main = on_main_thread()
    try:
        if pending.unsent is not None:
            conn.send_deferred(pending, end)
        while True:
            left = remaining(end)
            try:
                if left <= 0:
                    kind, payload = pending.inbox.get_nowait()
                else:
                    kind, payload = pending.inbox.get(timeout=slice_of(left, main=main))
            except queue.Empty:
                if not expired(end):
                    continue
                return None
            if kind is RESPONSE:
                return payload  # type: ignore[no-any-return]
            if kind is CLOSED:
                raise copy_error(payload)
            if kind is SERVER_REQUEST and on_server_request is not None:
                on_server_request(payload)
            else:
                conn.meanwhile(kind, payload, on_log)
    except BaseException:
        conn.abandon(pending, "request abandoned by the client")
        raise


def new_id_counter() -> Iterator[int]:
    """Request ids: integers from 1, never reset for the life of a client."""
    return itertools.count(1)
