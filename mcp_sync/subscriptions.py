"""`subscriptions/listen`: the handle of one open notification stream.

The engine hands every event of the stream to `Subscription._on_event` on
the thread that read it; the handle only queues it in a bounded buffer, so
a slow consumer never holds up the reader or anyone else. The consumer
takes events on its own thread, by iterating or with `next()`.

Events are of three types, told apart by class:

- `Notification`: a notification the filter asked for (`method`, `params`
  without the subscription id);
- `SubscriptionEnded`: the server ended the stream gracefully (`result` is
  its final result, or its cancellation params);
- `SubscriptionBroken`: the stream broke (`error`: a transport failure, or
  the client closed).

After the end (either kind) is taken, iteration stops.

Opening one (`listen()`, which `Client.listen()` delegates to) is here too,
for both eras: a `subscriptions/listen` stream in 2026-07-28; in the
initialize era, `resources/subscribe` and the session's unsolicited
notifications filtered to what was asked. It reaches the client only
through the request pipeline's narrow interface (`ListenHost`), and the
supervisor re-opens an interrupted subscription after a reconnect
(`reopen_on`), or ends it (`fail`).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Union

import attrs

from . import forking
from .connection import SUBSCRIPTION_ID
from .errors import ConnectionClosed, McpError, RequestTimeout, copy_error, server_error_from_wire
from .notifications import Notification, check_buffer, notification_of
from .negotiation import TASKS_EXTENSION
from .options import check_flag, check_timeout
from .waiting import LONGEST_WAIT, acquire_until, check_seconds, deadline_in, remaining, slice_of, wait_for_event

if TYPE_CHECKING:
    from .protocol.versions import Dialect
    from .supervisor import Supervisor

log = logging.getLogger("mcp_sync.client")


#: The types a timeout may be without a closer look (a bool is an int's subclass, not its type).
_PLAIN_NUMBERS = (int, float)


@attrs.frozen
class SubscriptionEnded:
    """The server ended the subscription; `result` is what it sent last.

    Attributes:
        result (dict[str, Any]): The stream's final result (empty when it
            had none), the params of the server's `notifications/cancelled`
            when it cancelled the stream, or the whole error response (with
            its `error` member) when it answered with an error.
    """

    result: dict[str, Any]


@attrs.frozen
class SubscriptionBroken:
    """The subscription ended for good: the client closed, reconnecting gave
    up (or is off), or the server refused to open it again; `error` says how.

    Attributes:
        error (McpError): Why it ended: a `ConnectionClosed` when the client
            or the subscription was closed or reconnecting gave up, otherwise
            the error that broke the stream.
    """

    error: McpError


@attrs.frozen
class SubscriptionResumed:
    """The connection failed and the client reconnected: the subscription
    is open again on the new connection (or, in the initialize era over
    HTTP, the session's GET stream was opened again without resuming it).
    Notifications the server sent in the `gap` (seconds) were lost; read
    again what you depend on.

    Example::

        for event in sub:
            if isinstance(event, mcp_sync.SubscriptionResumed):
                tools = client.list_tools()   # catch up on what the gap hid

    Attributes:
        gap (float): How long the subscription was cut off, in seconds (from
            the connection's or stream's failure to the stream being open
            again).
    """

    gap: float


SubscriptionEvent = Union[Notification, SubscriptionEnded, SubscriptionBroken, SubscriptionResumed]


class Subscription:
    """An open `subscriptions/listen` stream. Use `Client.listen()`.

    Example::

        with client.listen(tools_list_changed=True, resource_subscriptions=["demo://readme"]) as sub:
            print(sub.accepted)              # what the server agreed to send
            for event in sub:
                if isinstance(event, mcp_sync.Notification):
                    print(event.method, event.params)

    `max_buffer` events wait at most; when full, `overflow` ("drop_oldest",
    the default, or "drop_newest") decides, and `dropped` counts them.

    Attributes:
        id (int | None): The JSON-RPC id of the `subscriptions/listen`
            request on its current connection (it changes when the client
            reconnects); None before it is sent, and in the initialize era,
            where no such request exists.
        accepted (dict[str, Any] | None): The filter the server agreed to
            (its acknowledgement's `notifications`, maybe a subset of what
            was asked); None until acknowledged.
        acknowledged (threading.Event): Set once the server acknowledged the
            stream, or once it ended before that.
        error_response (dict[str, Any] | None): The error response the
            server answered the request with, as received; None when it did
            not answer with an error.
        dropped (int): Events dropped because `max_buffer` were waiting.

    Args:
        cancel: Called with the subscription by `close()`, to end the
            stream on the server (the client passes its own).
        max_buffer: The most events that wait to be read.
        overflow: ``"drop_oldest"`` or ``"drop_newest"``: which event a
            full buffer drops.

    Raises:
        ValueError: `max_buffer` is not a positive integer, or an unknown
            `overflow`.
    """

    def __init__(self, cancel: Callable[[Subscription], None], max_buffer: int = 100,
                 overflow: str = "drop_oldest") -> None:
        check_buffer(max_buffer, overflow)
        self._cancel = cancel
        self._max = max_buffer
        self._overflow = overflow
        self._new_lock()
        self._events: collections.deque[SubscriptionEvent] = collections.deque()
        self._end: SubscriptionEvent | None = None
        self._finished = False  # the end event was taken
        self.id: int | None = None
        self.accepted: dict[str, Any] | None = None
        self.acknowledged = threading.Event()
        self.error_response: dict[str, Any] | None = None
        self.dropped = 0
        # Reconnecting: how the client opens this subscription again on a
        # new connection (set by the client), and since when it is cut off.
        self._reopen: Callable[[Any], None] | None = None
        self._interrupted_at: float | None = None
        # The initialize era: the resources this listen holds in the session.
        self._resource_uris: tuple[str, ...] = ()

    # -- the reading thread's side ------------------------------------------------------

    def _new_lock(self) -> None:
        # `_lock` guards the end, the fields the supervisor reads and every
        # change to the events but one: `next()` takes a waiting event
        # without it (a deque's `popleft` is atomic), so a drop under the
        # lock may find the event it meant to drop taken. `_cond` is on
        # it. `_sleepers` counts the readers waiting in
        # `next()`, so a push wakes somebody only when somebody sleeps
        # (`Condition.notify` is Python code: per event, it was 6-7 % of
        # the reader's time in a flood). An RLock: `_on_notifications` hands
        # an acknowledgement to `_on_event` with the lock held.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._sleepers = 0

    def _on_event(self, kind: str, payload: Any) -> None:
        if kind == "notification" and payload.get("method") != _ACKNOWLEDGED:
            self._on_notifications((payload,), _still_current)  # one notification: queued as many are
            return
        with self._lock:  # the lock itself: `with self._cond` costs a Python frame per event
            if self._end is not None:
                return
            if kind == "notification":
                if self.accepted is None:
                    params = payload.get("params") or {}
                    notifications = params.get("notifications")
                    self.accepted = dict(notifications) if isinstance(notifications, dict) else {}
                    self.acknowledged.set()
                else:  # the acknowledgement of a stream opened again
                    self._resumed_locked()
            else:
                if kind == "end" and "error" in payload:
                    self.error_response = payload
                    if self._interrupted_at is not None:  # the server refused to open it again after a reconnect
                        self._end = SubscriptionBroken(server_error_from_wire(payload["error"],
                                                                              method="subscriptions/listen"))
                    else:
                        self._end = SubscriptionEnded(dict(payload))
                elif kind in ("end", "cancelled"):
                    result = payload.get("result") if kind == "end" else payload
                    self._end = SubscriptionEnded(dict(result) if isinstance(result, dict) else {})
                else:
                    self._end = SubscriptionBroken(payload)
                self.acknowledged.set()  # wakes a listen() still waiting
                self._cond.notify_all()

    def _on_notifications(self, messages: Sequence[dict[str, Any]], current: Callable[[], bool]) -> None:
        """Queue `messages` (the notifications one read brought for this
        stream, in order) while `current()` says the stream is still this
        subscription's, under one pass of the lock and with one wake-up of
        a sleeping reader, until the buffer is half full: then the lock is
        let go and the GIL given up after each event (on the transport's
        reader thread), so that a reader of the stream who keeps up on
        average takes them before the bound drops any (see
        `inbox.CROWDED`); it never waits for them."""
        remaining_messages = iter(messages)  # a pass that stops half full leaves the rest to the next
        crowded = True
        while crowded:
            crowded = False
            with self._lock:
                # Checked under the lock, once a pass: a reconnect's
                # `SubscriptionResumed` is queued under it too, so nothing of
                # the old stream's read can follow it.
                if self._end is not None or not current():
                    return
                events, limit = self._events, self._max
                pushed = 0
                try:
                    for message in remaining_messages:
                        method = message.get("method")
                        if method == _ACKNOWLEDGED:
                            self._on_event("notification", message)  # rare: the lock is re-entrant
                            continue
                        # The `Notification`: the params without the subscription's
                        # id in `_meta` (the message, its `raw`, keeps its own);
                        # then `_push`'s body, with one notify for the pass (below).
                        params = message.get("params")
                        params = dict(params) if params else {}
                        meta = params.get("_meta")
                        if isinstance(meta, dict) and SUBSCRIPTION_ID in meta:
                            if len(meta) == 1:
                                del params["_meta"]
                            else:
                                params["_meta"] = meta = dict(meta)  # the message keeps its own
                                del meta[SUBSCRIPTION_ID]
                        event = notification_of(method if type(method) is str else str(method), params, message)
                        if len(events) >= limit:
                            if self._overflow == "drop_newest":
                                self.dropped += 1
                                crowded = True  # full: the GIL is given up after each (above)
                                break
                            self._drop_oldest()
                        events.append(event)
                        pushed += 1
                        if 2 * len(events) >= limit:
                            crowded = True
                            break
                finally:
                    if pushed and self._sleepers:
                        # As many readers as one per event would have woken;
                        # none of them runs before the lock is let go.
                        self._cond.notify(pushed)
            if crowded:
                time.sleep(0)  # (see above)

    def _push(self, event: SubscriptionResumed) -> None:
        """Queue a gap notice: never dropped (the consumer must learn of
        the gap), whatever `overflow` says; a full buffer drops its oldest
        notification instead."""
        if len(self._events) >= self._max:
            self._drop_oldest()
        self._events.append(event)
        if self._sleepers:
            self._cond.notify()

    def _drop_oldest(self) -> None:
        """Drop the oldest waiting notification (under the lock), unless
        `next()` took it meanwhile. A gap notice (`SubscriptionResumed`) is
        kept: the event after it goes (with none, nothing: the buffer holds
        one more than its bound, for as long as the notice waits)."""
        events = self._events
        try:
            if type(events[0]) is SubscriptionResumed:
                del events[1]
            else:
                events.popleft()
        except IndexError:
            return
        self.dropped += 1

    @property
    def interrupted(self) -> bool:
        """True while the connection is being re-established under it."""
        return self._interrupted_at is not None and self._end is None

    def interrupt(self) -> None:
        """The connection failed and the client will reconnect: keep the
        iterator open; the gap starts now (kept from the first failure)."""
        with self._cond:
            if self._end is None and self._interrupted_at is None:
                self._interrupted_at = time.monotonic()

    def missed(self, seconds: float) -> None:
        """What the server sent in the last `seconds` did not reach this
        open subscription (its session's notification stream was opened
        again without resuming): tell the consumer of the gap, unless a
        reconnect under way will.

        Args:
            seconds: How long the notifications were not heard.
        """
        with self._lock:
            if self._end is None and self._interrupted_at is None:
                self._push(SubscriptionResumed(seconds))

    def _resumed(self) -> None:
        """Open again on a new connection: tell the consumer of the gap."""
        with self._cond:
            self._resumed_locked()

    # -- the supervisor's side (reconnecting under an open subscription) ----------------------

    @property
    def reopened(self) -> bool:
        """True unless it is cut off and not yet open again."""
        return self._interrupted_at is None

    @property
    def settled(self) -> bool:
        """True once open again after an interruption, or ended."""
        return self._interrupted_at is None or self._end is not None

    def reopen_on(self, conn: Any) -> bool:
        """Open it again on the new connection `conn`; False when it cannot
        be opened again (nothing was sent).

        Args:
            conn: The client's new connection.

        Returns:
            Whether the request to open it again was sent.
        """
        reopen = self._reopen  # (read once: `close()` may let it go meanwhile)
        if reopen is None:
            return False
        reopen(conn)
        return True

    def fail(self, error: McpError) -> None:
        """End it with `SubscriptionBroken(error)`.

        Args:
            error: Why the stream ended, carried by the `SubscriptionBroken`.
        """
        self._on_event("broken", error)

    def _resumed_locked(self) -> None:
        if self._end is not None or self._interrupted_at is None:
            return
        gap = time.monotonic() - self._interrupted_at
        self._interrupted_at = None
        self._push(SubscriptionResumed(gap))

    def orphan(self, error: McpError) -> None:
        """In a fork child: end the stream with `error`. The condition is
        replaced first: a parent thread may have held its lock at the fork.

        Args:
            error: Why the stream ended, carried by the `SubscriptionBroken`.
        """
        self._new_lock()
        if self._end is None:
            self._end = SubscriptionBroken(error)
        self.acknowledged = threading.Event()
        self.acknowledged.set()

    # -- the consumer's side ------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> SubscriptionEvent:
        """The next event; `RequestTimeout` (a `TimeoutError`) after
        `timeout` seconds; `StopIteration` once the end was taken.

        Args:
            timeout: The most seconds to wait; None: no limit.

        Returns:
            A `Notification`, a `SubscriptionResumed` after a reconnect, or,
            last, the `SubscriptionEnded` or `SubscriptionBroken` that ends
            the stream.

        Raises:
            RequestTimeout: No event within `timeout`.
            StopIteration: The end event was already taken.
            TypeError: `timeout` is not a number (or None).
            ValueError: `timeout` is negative, NaN or infinite.
        """
        # A plain number in range is checked here without a call (a reader
        # taking one event at a time runs this per event); any other value
        # gets the one rule's verdict. 0: look without waiting.
        if timeout is not None and not (type(timeout) in _PLAIN_NUMBERS and 0.0 <= timeout <= LONGEST_WAIT):
            check_seconds("timeout", timeout, allow_none=True, allow_zero=True)
        events = self._events
        if events:
            # A waiting event, for a reader who keeps up: taken without the
            # lock, a deadline or the fork check (after a fork the events
            # already queued are read first anyway: `orphan` keeps them).
            try:
                return events.popleft()
            except IndexError:  # another reader took it
                pass
        # Before the lock: a child forked from C may have inherited it held
        # by a parent thread (`check()` gives the stream a new one, and ends
        # it, as after os.fork()).
        if os.getpid() != forking.pid:
            forking.check()
        with self._lock:  # `_cond` is on it; the lock itself costs no Python frame per event
            if self._events:
                return self._events.popleft()
            deadline = None if timeout is None else time.monotonic() + timeout  # (`deadline_in`, one call less)
            while True:
                if self._events:
                    return self._events.popleft()
                if self._end is not None:
                    if self._finished:
                        raise StopIteration
                    self._finished = True
                    return self._end
                left = remaining(deadline)
                if left is not None and left <= 0:
                    raise RequestTimeout(f"no subscription event within {timeout:g} s", timeout=timeout)
                self._sleepers += 1
                try:
                    self._cond.wait(slice_of(left))  # (an interrupt lands on the main thread)
                finally:
                    self._sleepers -= 1

    def __iter__(self) -> Iterator[SubscriptionEvent]:
        return self

    def __next__(self) -> SubscriptionEvent:
        return self.next()

    @property
    def ended(self) -> bool:
        """True once the stream ended, whatever the way."""
        return self._end is not None

    def close(self) -> None:
        """Cancel the subscription (idempotent). Iteration ends after the
        events already received."""
        forking.check()  # never cancel the parent's stream from a child forked from C
        with self._cond:
            if self._end is None:
                self._end = SubscriptionBroken(ConnectionClosed("the subscription was closed by the client"))
                self._cond.notify_all()
            # Never opened again. (The reopen closure holds this
            # subscription: without it, a closed one is freed with its last
            # reference, not by the cyclic collector.)
            self._reopen = None
        self._cancel(self)  # (each time: a cancel cut short is tried again)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class _StreamEvents:
    """What the stream of a `subscriptions/listen` opened on `stream_conn`
    carries, for its subscription: called with each event as
    `Connection.subscribe` says, and with the notifications of one read at
    once (`many`, which the engine's delivery uses when it has it). Once
    the subscription moved to another connection (`current[0]`), the old
    stream's late events (its "broken", above all) are not about it any
    more."""

    __slots__ = ("_stream_conn", "_current", "_host", "_supervisor", "_subscription")

    def __init__(self, stream_conn: Any, current: list[Any], host: ListenHost, supervisor: Supervisor,
                 subscription: Subscription) -> None:
        self._stream_conn = stream_conn
        self._current = current
        self._host = host
        self._supervisor = supervisor
        self._subscription = subscription

    def __call__(self, kind: str, payload: Any) -> None:
        if self._stream_conn is not self._current[0]:
            return
        if kind == "notification":
            self._host.forget_cached((payload,))
        if (kind == "broken" and self._subscription.accepted is not None
                and self._supervisor.stream_broken(self._stream_conn, self._subscription)):
            return  # not the end: the supervisor opens it again
        self._subscription._on_event(kind, payload)

    def many(self, messages: list[dict[str, Any]]) -> None:
        """Each of `messages` as `self("notification", message)`, in order."""
        # Current here, before the cache forgets anything for a stream that
        # is no longer the subscription's; and again under the subscription's
        # lock at each pass (`_is_current`), since a reconnect may move it
        # between two passes of one read.
        if self._stream_conn is not self._current[0]:
            return
        self._host.forget_cached(messages)
        self._subscription._on_notifications(messages, self._is_current)

    def _is_current(self) -> bool:
        return self._stream_conn is self._current[0]


_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
_CLOSED = "the client was closed while the subscription was being opened"
#: The least timeout a request of a listen whose deadline passed gets (it
#: times out at once; None would wait for ever).
_LEAST = 1e-3


def _still_current() -> bool:
    """A stream's `current()` when the caller checked it already."""
    return True


# -- opening one: `Client.listen()` --------------------------------------------------------


class ListenHost(Protocol):
    """What opening a subscription needs of the request pipeline."""

    @property
    def supervisor(self) -> Supervisor: ...

    @property
    def dialect(self) -> Dialect: ...

    @property
    def default_timeout(self) -> float | None: ...

    @property
    def server_capabilities(self) -> dict[str, Any] | None: ...

    def request_meta(self, extensions: Mapping[str, Any] | None = None) -> Mapping[str, Any]: ...

    def forget_cached(self, notifications: Sequence[dict[str, Any]]) -> None: ...

    def request(self, method: str, params: Mapping[str, Any] | None, options: Any, *,
                extensions: Mapping[str, Any] | None = None) -> dict[str, Any]: ...


def listen(host: ListenHost, *, tools_list_changed: bool = False, prompts_list_changed: bool = False,
           resources_list_changed: bool = False, resource_subscriptions: Iterable[str] | None = None,
           extra: Mapping[str, Any] | None = None, timeout: float | None = None, max_buffer: int = 100,
           overflow: str = "drop_oldest") -> Subscription:
    """`Client.listen()`: see there."""
    dialect = host.dialect
    check_flag("tools_list_changed", tools_list_changed)
    check_flag("prompts_list_changed", prompts_list_changed)
    check_flag("resources_list_changed", resources_list_changed)
    wait = host.default_timeout if timeout is None else timeout
    check_timeout("timeout", wait)
    if isinstance(resource_subscriptions, (str, bytes)):  # (a list of its characters otherwise)
        raise TypeError(f"resource_subscriptions takes a list of URIs, not one: "
                        f"resource_subscriptions=[{resource_subscriptions!r}]")
    uris = list(resource_subscriptions or [])
    if not all(isinstance(uri, str) for uri in uris):
        raise TypeError("resource_subscriptions must be URI strings")
    flags = {"toolsListChanged": tools_list_changed, "promptsListChanged": prompts_list_changed,
             "resourcesListChanged": resources_list_changed}
    wanted: dict[str, Any] = {key: True for key, flag in flags.items() if flag}
    if uris:
        wanted["resourceSubscriptions"] = uris
    if extra:
        wanted.update(extra)
    if not dialect.stateless:
        return _listen_initialize_era(host, wanted, wait, max_buffer, overflow)
    return _listen_stateless(host, wanted, wait, max_buffer, overflow)


def _listen_stateless(host: ListenHost, wanted: dict[str, Any], wait: float | None, max_buffer: int,
                      overflow: str) -> Subscription:
    supervisor = host.supervisor
    # Bounded by the listen's own timeout, also while a reconnect is under way.
    conn = supervisor.live(deadline_in(wait))
    # The tasks extension's filter key is declared with the extension.
    extensions: dict[str, Any] | None = {TASKS_EXTENSION: {}} if "taskIds" in wanted else None
    params = {"notifications": wanted, "_meta": host.request_meta(extensions)}
    current = [conn]  # the connection the stream is open on now (a reconnect moves it)

    def cancel(sub: Subscription) -> None:
        if sub.id is not None:
            current[0].unsubscribe(sub.id)

    subscription = Subscription(cancel, max_buffer, overflow)

    def events_of(stream_conn: Any) -> _StreamEvents:
        return _StreamEvents(stream_conn, current, host, supervisor, subscription)

    def reopen(new: Any) -> None:
        current[0] = new
        subscription.id = new.subscribe("subscriptions/listen", params, events_of(new))
        if subscription.ended:  # closed by its user meanwhile
            new.unsubscribe(subscription.id)

    subscription._reopen = reopen
    supervisor.register(subscription)
    subscription.id = conn.subscribe("subscriptions/listen", params, events_of(conn))
    try:
        acknowledged = wait_for_event(subscription.acknowledged, wait)
    except BaseException:  # an interrupt: the stream is not left open on the server
        subscription.close()
        raise
    if not acknowledged:
        subscription.close()
        raise RequestTimeout(f"subscriptions/listen: no acknowledgement within {wait:g} s",
                             method="subscriptions/listen", timeout=wait)
    if subscription.accepted is None:
        subscription.close()
        if subscription.error_response is not None:
            raise server_error_from_wire(subscription.error_response.get("error"), method="subscriptions/listen")
        end = subscription.next(timeout=0)
        if isinstance(end, SubscriptionBroken):
            # A copy: the one the subscription keeps would hold this frame
            # (its traceback), which holds the subscription (a cycle).
            raise copy_error(end.error)
        raise ConnectionClosed("the subscriptions/listen stream ended before the acknowledgement")
    return subscription


def _listen_initialize_era(host: ListenHost, wanted: dict[str, Any], timeout: float | None, max_buffer: int,
                           overflow: str) -> Subscription:
    """The same `listen()` for a 2025 server: `resources/subscribe` for
    the URIs (see `_SessionResources`), and its unsolicited notifications
    filtered to what was asked (and what its capabilities offer)."""
    supervisor = host.supervisor
    # One deadline for the whole listen: a reconnect under way, another
    # listen's requests it waits for, and its own requests.
    deadline = deadline_in(timeout)
    supervisor.live(deadline)  # (a closed client raises `ConnectionClosed` here)
    capabilities = host.server_capabilities or {}

    def offered(section: str, flag: str) -> bool:
        return bool((capabilities.get(section) or {}).get(flag))

    offers = {"toolsListChanged": offered("tools", "listChanged"),
              "promptsListChanged": offered("prompts", "listChanged"),
              "resourcesListChanged": offered("resources", "listChanged"),
              "resourceSubscriptions": offered("resources", "subscribe")}
    accepted = {key: value for key, value in wanted.items() if offers.get(key)}
    uris = tuple(dict.fromkeys(accepted.get("resourceSubscriptions") or []))
    methods = {method for key, method in (
        ("toolsListChanged", "notifications/tools/list_changed"),
        ("promptsListChanged", "notifications/prompts/list_changed"),
        ("resourcesListChanged", "notifications/resources/list_changed")) if accepted.get(key)}
    stop: list[Callable[[], None]] = []

    def cancel(sub: Subscription) -> None:
        while True:  # each remover once, whoever cancels (the callback holds the subscription)
            try:
                remove = stop.pop()
            except IndexError:
                break
            remove()
        with supervisor.lock:
            supervisor.initialize_era_subscriptions.discard(sub)
        resources.release(sub, timeout)

    resources = _SessionResources(host, uris)
    subscription = Subscription(cancel, max_buffer, overflow)
    subscription._resource_uris = uris
    try:
        resources.hold(subscription, deadline, timeout)
    except BaseException:
        subscription.close()  # gives up what was asked (`cancel`)
        raise
    end = subscription._end
    if end is not None:  # the client closed meanwhile (nothing else ends it before it is returned)
        subscription.close()
        raise copy_error(end.error) if isinstance(end, SubscriptionBroken) else ConnectionClosed(_CLOSED)

    def deliver(note: Notification) -> None:
        if note.method in methods or (note.method == "notifications/resources/updated"
                                      and note.params.get("uri") in uris):
            subscription._on_event("notification", note.raw)

    stop.append(supervisor.dispatcher.add_callback(deliver, methods=methods | {"notifications/resources/updated"}))

    def reopen(new: Any) -> None:
        if resources.ask_again(subscription, timeout):
            subscription._resumed()

    subscription._reopen = reopen
    subscription.accepted = accepted
    subscription.acknowledged.set()
    return subscription


class _SessionResources:
    """The resource subscriptions one initialize-era listen holds in the
    session.

    A session holds one subscription per URI, whoever asked for it, so
    listens that share a URI share it: a URI is asked for when no other
    open listen of the client holds it, and given up (`resources/
    unsubscribe`) when the last one that holds it closes. Those requests
    are sent under the supervisor's `subscribe_lock`, so the server sees
    them in the order the listens opened and closed; every wait for that
    lock is bounded by the listen's timeout. `unreleased` (the URIs still
    to give up, each once) is changed only under that lock."""

    # It does not hold the subscription (the subscription's `cancel` holds
    # it): a closed subscription is freed with its last reference.

    def __init__(self, host: ListenHost, uris: tuple[str, ...]) -> None:
        self.host = host
        self.supervisor = host.supervisor
        self.uris = uris
        self.unreleased: list[str] = []

    def hold(self, subscription: Subscription, deadline: float | None, timeout: float | None) -> None:
        """Register the listen and ask for the URIs no other listen holds,
        by `deadline`. On a failure (or an interrupt) `unreleased` is the
        URIs asked so far (a request that failed may have been applied);
        the caller closes the subscription, which gives them up."""
        supervisor = self.supervisor
        if not self.uris:
            supervisor.register(subscription, initialize_era=True)
            return
        if not acquire_until(supervisor.subscribe_lock, deadline):
            raise RequestTimeout(f"listen: other listens' resources/subscribe requests took all of the {timeout:g} s",
                                 method="resources/subscribe", timeout=timeout)
        try:
            held = self._held_by_others(subscription)
            # Registered first: a listen opening or closing meanwhile sees
            # this one's URIs as held. (A closed client ends it at once.)
            supervisor.register(subscription, initialize_era=True)
            for uri in self.uris:
                if uri not in held:
                    self.unreleased.append(uri)
                    self._request("resources/subscribe", uri, deadline)
            # Every URI: one held by others now is this listen's to give up
            # if it is the last holder when it closes.
            self.unreleased[:] = self.uris
        finally:
            supervisor.subscribe_lock.release()

    def release(self, subscription: Subscription, timeout: float | None) -> None:
        """Give up the URIs no other open listen holds (at `close()`). When
        other listens' requests outlast `timeout`, what is left goes at the
        next `close()`, or with the session."""
        supervisor = self.supervisor
        if not self.unreleased:
            return
        until = deadline_in(timeout)
        if not acquire_until(supervisor.subscribe_lock, until):
            log.debug("resources/unsubscribe of %s not sent: other listens' requests held it up", self.unreleased)
            return
        try:
            held = self._held_by_others(subscription)
            while self.unreleased:  # each once: a close cut short by an interrupt goes on next time
                uri = self.unreleased[0]
                if uri not in held and not supervisor.closed:
                    try:
                        self._request("resources/unsubscribe", uri, until)
                    except McpError as exc:
                        log.debug("resources/unsubscribe %s failed: %s", uri, exc)
                del self.unreleased[0]
        finally:
            supervisor.subscribe_lock.release()

    def ask_again(self, subscription: Subscription, timeout: float | None) -> bool:
        """In a new session (which has no subscriptions), ask for the URIs
        again, unless the user closed the listen meanwhile (its `release`,
        under the same lock, gives up what no other listen holds). False
        when it was closed. (The healer's thread: it waits for another
        listen's requests, each bounded by its timeout, and
        `client.close()` ends them.)"""
        with self.supervisor.subscribe_lock:
            if subscription.ended:
                return False
            until = deadline_in(timeout)
            for uri in self.uris:
                self._request("resources/subscribe", uri, until)
        return True

    def _request(self, method: str, uri: str, until: float | None) -> None:
        self.host.request(method, {"uri": uri}, {"timeout": remaining(until, at_least=_LEAST)})

    def _held_by_others(self, subscription: Subscription) -> set[str]:
        """The URIs the client's other open initialize-era listens hold in
        the session now: one cut off by a reconnect holds nothing until the
        healer opens it again (it asks for its URIs then; twice is harmless)."""
        supervisor = self.supervisor
        with supervisor.lock:
            others = [each for each in supervisor.initialize_era_subscriptions
                      if each is not subscription and not each.ended and not each.interrupted]
        return {uri for each in others for uri in each._resource_uris}
