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
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Iterator, Union

import attrs

from .connection import SUBSCRIPTION_ID
from .errors import ConnectionClosed, McpError, RequestTimeout
from .notifications import OVERFLOW_POLICIES, Notification


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
    is open again on the new connection. Notifications the server sent in
    the `gap` (seconds) were lost; read again what you depend on.

    Example::

        for event in sub:
            if isinstance(event, mcp_sync.SubscriptionResumed):
                tools = client.list_tools()   # catch up on what the gap hid

    Attributes:
        gap (float): How long the subscription was cut off, in seconds (from
            the connection's failure to the stream being open again).
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
    """

    def __init__(self, cancel: Callable[[Subscription], None], max_buffer: int = 100,
                 overflow: str = "drop_oldest") -> None:
        if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 1:
            raise ValueError("max_buffer must be a positive integer")
        if overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}, not {overflow!r}")
        self._cancel = cancel
        self._max = max_buffer
        self._overflow = overflow
        self._cond = threading.Condition()
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

    # -- the reading thread's side ------------------------------------------------------

    def _on_event(self, kind: str, payload: Any) -> None:
        with self._cond:
            if self._end is not None:
                return
            if kind == "notification":
                if payload.get("method") == "notifications/subscriptions/acknowledged":
                    if self.accepted is None:
                        params = payload.get("params") or {}
                        notifications = params.get("notifications")
                        self.accepted = dict(notifications) if isinstance(notifications, dict) else {}
                        self.acknowledged.set()
                    else:  # the acknowledgement of a stream opened again
                        self._resumed_locked()
                    return
                self._push(_notification(payload))
            elif kind == "end" and "error" in payload:
                self.error_response = payload
                self._end = SubscriptionEnded(dict(payload))
            elif kind in ("end", "cancelled"):
                result = payload.get("result") if kind == "end" else payload
                self._end = SubscriptionEnded(dict(result) if isinstance(result, dict) else {})
            else:
                self._end = SubscriptionBroken(payload)
            self.acknowledged.set()  # wakes a listen() still waiting
            self._cond.notify_all()

    def _push(self, event: SubscriptionEvent) -> None:
        if len(self._events) >= self._max:
            self.dropped += 1
            if self._overflow == "drop_newest":
                return
            self._events.popleft()
        self._events.append(event)
        self._cond.notify()

    @property
    def interrupted(self) -> bool:
        """True while the connection is being re-established under it."""
        return self._interrupted_at is not None and self._end is None

    def _interrupt(self) -> None:
        """The connection failed and the client will reconnect: keep the
        iterator open; the gap starts now (kept from the first failure)."""
        with self._cond:
            if self._end is None and self._interrupted_at is None:
                self._interrupted_at = time.monotonic()

    def _resumed(self) -> None:
        """Open again on a new connection: tell the consumer of the gap."""
        with self._cond:
            self._resumed_locked()

    def _resumed_locked(self) -> None:
        if self._end is not None or self._interrupted_at is None:
            return
        gap = time.monotonic() - self._interrupted_at
        self._interrupted_at = None
        self._push(SubscriptionResumed(gap))

    def _orphan(self, error: McpError) -> None:
        """In a fork child: end the stream with `error`. The condition is
        replaced first: a parent thread may have held its lock at the fork."""
        self._cond = threading.Condition()
        if self._end is None:
            self._end = SubscriptionBroken(error)
        self.acknowledged = threading.Event()
        self.acknowledged.set()

    # -- the consumer's side ------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> SubscriptionEvent:
        """The next event; `RequestTimeout` (a `TimeoutError`) after
        `timeout` seconds; `StopIteration` once the end was taken."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._events:
                    return self._events.popleft()
                if self._end is not None:
                    if self._finished:
                        raise StopIteration
                    self._finished = True
                    return self._end
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise RequestTimeout(f"no subscription event within {timeout:g} s", timeout=timeout)
                self._cond.wait(remaining)

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
        with self._cond:
            if self._end is None:
                self._end = SubscriptionBroken(ConnectionClosed("the subscription was closed by the client"))
                self._cond.notify_all()
        self._cancel(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _notification(message: dict[str, Any]) -> Notification:
    params = dict(message.get("params") or {})
    meta = params.get("_meta")
    if isinstance(meta, dict) and SUBSCRIPTION_ID in meta:
        meta = {k: v for k, v in meta.items() if k != SUBSCRIPTION_ID}
        if meta:
            params["_meta"] = meta
        else:
            del params["_meta"]
    return Notification(method=str(message.get("method")), params=params, raw=message)
