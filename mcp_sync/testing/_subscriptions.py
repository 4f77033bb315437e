"""Change notifications of the stateless era: `subscriptions/listen`.

It owns `Listen`, one open subscription (its accepted filter and the
notifications queued for it), `accept_filter` (the part of a listen filter
the server honours) and `serve_listen`, the handler that runs a
subscription on a worker thread of its session. The session decides which
notifications match (`ServerSession._changed`/`_updated` push them here);
this module must not know about transports.

How a subscription runs: the handler registers the `Listen` on its session,
sends `notifications/subscriptions/acknowledged` tagged with the listen
request's id, then waits on `Listen.cond` and sends what was queued, in
order, until the client cancels (no response), `stop("complete")` (the
response) or `stop("cancel")` (a server-sent `notifications/cancelled`, no
response). Every message goes through the session's `_deliver`, under the
call's lock, so nothing is sent once the call is finished or cancelled.
"""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING

from ._asking import RequestCancelled
from ._protocol import CHANGE_KINDS, INVALID_PARAMS, META_SUBSCRIPTION_ID, JSONDict, RpcError

if TYPE_CHECKING:
    from ._context import Call
    from ._session import ServerSession


class Listen:
    """One `subscriptions/listen` subscription (stateless era): its accepted
    filter and the notifications waiting to go out on it. Its handler (on a
    worker thread) acknowledges, then delivers queued notifications in order
    until the client cancels or the server ends it (`stop`)."""

    def __init__(self, call: Call, accepted: JSONDict) -> None:
        self.call = call
        self.accepted = accepted
        self.cond = threading.Condition()
        self.queue: collections.deque[JSONDict] = collections.deque()
        #: None while open; "complete" (graceful end) or "cancel" (server-sent notifications/cancelled).
        self.end: str | None = None
        #: Set once the handler is done (its final message, if any, sent).
        self.finished = threading.Event()

    def tag(self, method: str, params: JSONDict | None = None) -> JSONDict:
        body: JSONDict = {"_meta": {META_SUBSCRIPTION_ID: self.call.id}}
        body.update(params or {})
        return {"jsonrpc": "2.0", "method": method, "params": body}

    def push(self, message: JSONDict) -> None:
        with self.cond:
            if self.end is None:
                self.queue.append(message)
                self.cond.notify_all()

    def stop(self, how: str) -> None:
        with self.cond:
            if self.end is None:
                self.end = how
            self.cond.notify_all()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()



def serve_listen(session: ServerSession, call: Call) -> JSONDict:
    """The handler of a `subscriptions/listen` call (on a worker thread of
    `session`): acknowledge, then deliver the subscription's notifications
    until the client cancels (no response) or the server ends it (`Listen.stop`)."""
    listen = call.listen
    assert listen is not None
    with session._lock:
        if session._closed:
            raise RequestCancelled("the session is closed")
        session._listens[call.id] = listen
    try:
        _send_on(session, call, listen.tag("notifications/subscriptions/acknowledged",
                                       {"notifications": listen.accepted}))
        while True:
            with listen.cond:
                while not listen.queue and listen.end is None and not call.cancelled.is_set():
                    listen.cond.wait()
                batch = list(listen.queue)
                listen.queue.clear()
                end = listen.end
            for message in batch:
                _send_on(session, call, message)
            if call.cancelled.is_set():
                raise RequestCancelled(f"subscription {call.id!r} was cancelled")
            if end is not None:
                break
    finally:
        with session._lock:
            session._listens.pop(call.id, None)
    if end == "cancel":
        _send_on(session, call, listen.tag("notifications/cancelled",
                                       {"requestId": call.id, "reason": "the server ended the subscription"}))
        raise RequestCancelled(f"subscription {call.id!r} was ended by the server")
    return {"_meta": {META_SUBSCRIPTION_ID: call.id}}


def _send_on(session: ServerSession, call: Call, message: JSONDict) -> None:
    """Deliver a message belonging to `call` unless it is finished or cancelled."""
    with call.lock:
        if call.done or call.cancelled.is_set():
            raise RequestCancelled(f"request {call.id!r} was cancelled")
        session._deliver(message, call.id)


LIST_CHANGED_KEYS = tuple(key for _, key in CHANGE_KINDS.values())


def accept_filter(params: JSONDict) -> JSONDict:
    """The subset of a `subscriptions/listen` filter the server honours:
    the list_changed flags that are true and `resourceSubscriptions`
    (deduplicated); unknown keys are left out. RpcError -32602 for a missing
    filter or a known key of the wrong type."""
    requested = params.get("notifications")
    if not isinstance(requested, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: subscriptions/listen needs a notifications object")
    accepted: JSONDict = {}
    for key in LIST_CHANGED_KEYS:
        value = requested.get(key)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise RpcError(INVALID_PARAMS, f"Invalid params: notifications.{key} must be a boolean")
        if value:
            accepted[key] = True
    uris = requested.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise RpcError(INVALID_PARAMS, "Invalid params: notifications.resourceSubscriptions must be an array "
                           "of strings")
        accepted["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return accepted
