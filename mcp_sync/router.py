"""The router: where each incoming message goes. Sans-IO.

What it owns: the pending table (the calls and subscriptions in flight, by
request id) and the set of server requests the client still owes an answer.
What it must not know: threads, locks, IO, clocks, or what a method means
beyond routing. It is plain data in, a route out, so every rule below is
tested on plain data (`tests/test_router.py`, with hypothesis); the engine
(`connection.py`) holds its lock around every call and carries the route out.

It routes one message at a time: the engine splits a JSON-RPC batch and
hands its items here one by one (an item that is not an object is INVALID).

A message that is not JSON-RPC 2.0 at all, or neither a request, a
notification nor a response, is INVALID: the channel is broken. A request
or notification that is JSON-RPC but malformed (a method that is not a
string, params that are not an object; `jsonrpc.request_flaw`) is MALFORMED
instead: the client answers it with that error when it has an id that can
be answered, and drops it with a warning otherwise; the channel goes on.

The rules, in the order they are tried:

- A malformed request whose id can be answered is owed its error (see
  MALFORMED), unless a request with the same id is owed an answer already:
  the one answer under that id is then the valid request's. Any other
  malformed message is dropped.
- A response goes to the call or subscription with its id, which leaves the
  table at once (so a second response with the same id is dropped). A
  response for an id nobody waits for any more (timed out, abandoned) is
  dropped.
- A notification for an open subscription (its `_meta` names the
  subscription id, or it came on the subscription's own stream) goes to that
  subscription; `notifications/cancelled` for a subscription ends it.
- `notifications/progress` goes to the call whose id is the progress token
  (the engine always uses the request id as the token).
- `notifications/cancelled` for a server request we owe an answer withdraws
  it: no answer will be sent.
- A log message or a server request goes to a call only when the transport
  says which request it came for (`related_to`: it arrived on that request's
  own response stream). Otherwise it belongs to the client as a whole: the
  handlers' pool or the client's log; except that, on a transport that
  cannot relate requests (`adopting`), a question for a person
  (`elicitation/create`, `sampling/createMessage`) is adopted by the one
  call that waits, when exactly one adopting call waits and has no adopted
  request already: its caller answers it with the client's own handlers,
  never the call's (a call's handlers apply only to what is known to be
  its own).
- Any other notification goes to the client's notification hook.

A server request is owed an answer from the moment it is routed until
`settle()` says the answer may go out (once) or the server withdraws it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from .errors import InvalidMessage
from .protocol import jsonrpc
from .protocol.meta import SUBSCRIPTION_ID as SUBSCRIPTION_ID

_JSONRPC = jsonrpc.JSONRPC

class Dest(enum.Enum):
    """Where a message goes: the first item of the route `receive()` returns."""

    CALL = "call"                  # (CALL, owner, event, payload): into a caller's inbox
    SUBSCRIPTION = "subscription"  # (SUBSCRIPTION, owner, event, payload): a listen stream's callback
    HANDLERS = "handlers"          # (HANDLERS, None, "server_request", message): the client's handlers
    CLIENT_LOG = "client_log"      # (CLIENT_LOG, None, "log", params): the client's log handler
    NOTIFICATION = "notification"  # (NOTIFICATION, None, "notification", message): the notification hook
    DROP = "drop"                  # (DROP, None, reason, message): nobody wants it (logged at debug)
    INVALID = "invalid"            # (INVALID, None, reason, message): not JSON-RPC; the channel is broken
    MALFORMED = "malformed"        # (MALFORMED, None, reason, answer): see MALFORMED below


CALL = Dest.CALL
SUBSCRIPTION = Dest.SUBSCRIPTION
HANDLERS = Dest.HANDLERS
CLIENT_LOG = Dest.CLIENT_LOG
NOTIFICATION = Dest.NOTIFICATION
DROP = Dest.DROP
INVALID = Dest.INVALID
#: A request or notification that is JSON-RPC but malformed (see
#: `jsonrpc.request_flaw`). Its answer is `(request_id, error)`, the error
#: (`{"code", "message"}`) the client owes request `request_id` (routing it
#: made the id owed, so `settle()` lets exactly that one answer out); None
#: when nobody can be answered (a notification, or an id that cannot be
#: answered or is owed another answer): dropped with a warning. Either way
#: the channel goes on.
MALFORMED = Dest.MALFORMED

#: Events in a caller's inbox.
RESPONSE = "response"
PROGRESS = "progress"
LOG = "log"
SERVER_REQUEST = "server_request"
#: A server request that names no call, given to the one call waiting
#: (see `Router.adopting`): its caller answers it as the client would on a
#: handler thread, with the client's own handlers.
ADOPTED = "adopted"
#: The event of a notification for an open subscription (its others:
#: "end", "cancelled").
NOTIFIED = "notification"
#: The server requests that may be adopted: questions for a person, whom
#: the caller's thread can reach. Others (`ping`, `roots/list`) are for the
#: client, and the handler pool answers them at once.
ADOPTABLE = frozenset({"elicitation/create", "sampling/createMessage"})


Owner = TypeVar("Owner")
#: (destination, owner, event or reason, payload). A plain tuple, typed:
#: one is made per message on the reader's hot path, where a NamedTuple
#: would cost a Python call each.
Route = tuple[Dest, Any, str, Any]


class Router(Generic[Owner]):
    """The pending table and the routing rules. Not thread-safe by design:
    its one user holds a lock around every call.

    Example::

        router = Router()
        router.add_call(1, "inbox of call 1")
        router.receive({"jsonrpc": "2.0", "id": 1, "result": {}})
        # -> ("call", "inbox of call 1", "response", {...}); id 1 has left the table
    """

    __slots__ = ("calls", "subscriptions", "owed", "adopting")

    def __init__(self) -> None:
        #: Calls waiting for a response, by request id.
        self.calls: dict[Any, Owner] = {}
        #: Open subscriptions (`subscriptions/listen`), by request id.
        self.subscriptions: dict[Any, Owner] = {}
        #: Server requests the client owes an answer, by their id.
        self.owed: set[Any] = set()
        #: Whether a server request that names no call goes to the one call
        #: waiting, when exactly one waits and its owner's `adopts` is true:
        #: set for transports that cannot relate a request to a call (one
        #: shared stream), where that call is then the caller to ask.
        self.adopting = False

    # -- the table --------------------------------------------------------------

    def add_call(self, request_id: Any, owner: Owner) -> None:
        if request_id in self.calls or request_id in self.subscriptions:
            raise ValueError(f"request id {request_id!r} is in flight already")
        self.calls[request_id] = owner

    def add_subscription(self, request_id: Any, owner: Owner) -> None:
        if request_id in self.calls or request_id in self.subscriptions:
            raise ValueError(f"request id {request_id!r} is in flight already")
        self.subscriptions[request_id] = owner

    def remove_call(self, request_id: Any) -> Owner | None:
        """Forget a call (abandoned, failed): None when it already left."""
        return self.calls.pop(request_id, None)

    def remove_subscription(self, request_id: Any) -> Owner | None:
        return self.subscriptions.pop(request_id, None)

    def clear(self) -> tuple[list[Owner], list[Owner]]:
        """Empty the table (the channel failed or closed): the calls and the
        subscriptions that must be told. Nothing is owed any more."""
        calls, subscriptions = list(self.calls.values()), list(self.subscriptions.values())
        self.calls.clear()
        self.subscriptions.clear()
        self.owed.clear()
        return calls, subscriptions

    # -- answers we owe ---------------------------------------------------------------

    def settle(self, request_id: Any) -> bool:
        """May the answer to server request `request_id` go out? True once;
        False when it was answered already or the server withdrew it."""
        if request_id in self.owed:
            self.owed.discard(request_id)
            return True
        return False

    # -- routing ----------------------------------------------------------------------

    def receive(self, message: Any, related_to: Any = None) -> Route:
        """The route of one incoming message. `related_to` is the id of the
        request on whose own response stream it arrived, when the transport
        knows (HTTP); None otherwise (a shared stream such as stdio)."""
        if type(message) is dict:
            if "id" in message:
                if "result" in message and "method" not in message:
                    # The common message first: a result for a waiting call.
                    # The same rule as below (`_response`), with the checks
                    # `classify` would make for it done inline.
                    request_id = message["id"]
                    if type(request_id) is int and message.get("jsonrpc") == _JSONRPC:
                        owner = self.calls.pop(request_id, None)
                        if owner is not None:
                            return (CALL, owner, RESPONSE, message)
            elif message.get("jsonrpc") == _JSONRPC:
                # The next most common, in floods: progress for a waiting
                # call and a log message on a shared stream (stdio), and a
                # notification tagged for an open subscription.
                # `_notification`'s rules for them, inline.
                method, params = message.get("method"), message.get("params")
                if type(params) is dict and type(method) is str:
                    meta = params.get("_meta")
                    if meta is None:
                        if related_to is None:
                            if method == "notifications/progress":
                                token = params.get("progressToken")
                                if type(token) is int:
                                    owner = self.calls.get(token)
                                    if owner is not None:
                                        return (CALL, owner, PROGRESS, params)
                            elif method == "notifications/message":
                                # A log message on a shared stream, for no
                                # call: the client's log (`_notification`'s
                                # last rule).
                                return (CLIENT_LOG, None, LOG, params)
                    elif type(meta) is dict and method != "notifications/cancelled":
                        subscription_id = meta.get(SUBSCRIPTION_ID)
                        if type(subscription_id) is int:
                            owner = self.subscriptions.get(subscription_id)
                            if owner is not None:
                                return (SUBSCRIPTION, owner, NOTIFIED, message)
        # Anything else goes the long way.
        return self.route(message, related_to)

    def run_for(self, owner: Owner, messages: Sequence[Any], start: int, stop: int | None = None) -> int:
        """Where the run of `messages[start:stop]` that `receive` (with no
        `related_to`) routes to `owner` as events of one kind ends: the
        index of the first message it would route elsewhere, or `stop`
        (default: `len(messages)`). The events: progress for a call, notifications for
        a subscription. Routing those changes nothing in the table, so this
        is `receive`'s shortcut for each, with no route made: a flood on a
        shared stream (stdio) is taken a read at a time
        (`Delivery.deliver_all`). A message the shortcut does not take ends
        the run, even when `receive` would route it to `owner` too (it is
        routed the general way)."""
        calls, subscriptions = self.calls, self.subscriptions
        index, end = start, len(messages) if stop is None else min(stop, len(messages))
        while index < end:
            message = messages[index]
            if type(message) is not dict or "id" in message or message.get("jsonrpc") != _JSONRPC:
                break
            method, params = message.get("method"), message.get("params")
            if type(params) is not dict or type(method) is not str:
                break
            meta = params.get("_meta")
            if meta is None:
                if method != "notifications/progress":
                    break
                token = params.get("progressToken")
                if type(token) is not int or calls.get(token) is not owner:
                    break
            elif type(meta) is dict and method != "notifications/cancelled":
                subscription_id = meta.get(SUBSCRIPTION_ID)
                if type(subscription_id) is not int or subscriptions.get(subscription_id) is not owner:
                    break
            else:
                break
            index += 1
        return index

    def route(self, message: Any, related_to: Any = None) -> Route:
        """`receive` without its shortcut: the rules for every message."""
        if not isinstance(message, dict):
            return (INVALID, None, f"not a JSON object: {type(message).__name__}", message)
        try:
            kind = jsonrpc.classify(message)
        except InvalidMessage as exc:
            flaw = jsonrpc.request_flaw(message)
            if flaw is None:
                return (INVALID, None, str(exc), message)
            return self._malformed(message, flaw, str(exc))
        if kind is jsonrpc.Kind.RESPONSE or kind is jsonrpc.Kind.ERROR:
            return self._response(message)
        if kind is jsonrpc.Kind.NOTIFICATION:
            return self._notification(message, related_to)
        return self._server_request(message, related_to)

    def _response(self, message: dict[str, Any]) -> Route:
        request_id = message.get("id")
        if not jsonrpc.is_valid_id(request_id):
            return (DROP, None, "an error about no request", message)
        owner = self.calls.pop(request_id, None)
        if owner is not None:
            return (CALL, owner, RESPONSE, message)
        owner = self.subscriptions.pop(request_id, None)
        if owner is not None:
            return (SUBSCRIPTION, owner, "end", message)
        return (DROP, None, f"a response for request {request_id!r}, which nobody waits for", message)

    def _notification(self, message: dict[str, Any], related_to: Any) -> Route:
        method = message["method"]
        owner: Owner | None
        params = message.get("params")
        if not isinstance(params, dict):
            params = {}
        meta = params.get("_meta")
        subscription_id = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        for candidate in (subscription_id, related_to):
            if jsonrpc.is_valid_id(candidate) and candidate in self.subscriptions:
                if method == "notifications/cancelled":
                    if params.get("requestId") != candidate:
                        break  # about another request: the general rules below
                    return (SUBSCRIPTION, self.subscriptions.pop(candidate), "cancelled", params)
                return (SUBSCRIPTION, self.subscriptions[candidate], NOTIFIED, message)
        if method == "notifications/progress":
            token = params.get("progressToken")
            owner = self.calls.get(token) if jsonrpc.is_valid_id(token) else None
            if owner is not None:
                return (CALL, owner, PROGRESS, params)
            return (DROP, None, f"progress for token {token!r}, which no request holds", message)
        if method == "notifications/cancelled":
            withdrawn = params.get("requestId")
            if not jsonrpc.is_valid_id(withdrawn):
                return (DROP, None, "a cancellation of no request", message)
            owner = self.subscriptions.pop(withdrawn, None)
            if owner is not None:
                return (SUBSCRIPTION, owner, "cancelled", params)
            if withdrawn in self.owed:
                self.owed.discard(withdrawn)
                return (DROP, None, f"the server withdrew its request {withdrawn!r}", message)
        if method == "notifications/message":
            owner = self.calls.get(related_to) if jsonrpc.is_valid_id(related_to) else None
            if owner is not None:
                return (CALL, owner, LOG, params)
            return (CLIENT_LOG, None, LOG, params)
        return (NOTIFICATION, None, "notification", message)

    def _server_request(self, message: dict[str, Any], related_to: Any) -> Route:
        if not jsonrpc.is_valid_id(message["id"]):
            return (DROP, None, "a server request whose id cannot be answered", message)
        self.owed.add(message["id"])
        owner = self.calls.get(related_to) if jsonrpc.is_valid_id(related_to) else None
        if owner is not None:
            return (CALL, owner, SERVER_REQUEST, message)
        if self.adopting and related_to is None and message["method"] in ADOPTABLE:
            only = self._lone_adopter()
            if only is not None:
                only.adopted += 1
                return (CALL, only, ADOPTED, message)
        return (HANDLERS, None, SERVER_REQUEST, message)

    def _malformed(self, message: dict[str, Any], flaw: jsonrpc.Refusal, what: str) -> Route:
        """A request or notification `request_flaw` found fault with: its
        error is owed when its id can be answered and is not owed already."""
        if "id" not in message:
            return (MALFORMED, None, f"{what}; a notification, so nobody to answer: dropped", None)
        request_id = message["id"]
        if not jsonrpc.is_valid_id(request_id):
            return (MALFORMED, None, f"{what}; its id cannot be answered: dropped", None)
        if request_id in self.owed:
            # Answering it would settle the answer owed to the request that
            # holds the id, and that request's own answer would be dropped.
            return (MALFORMED, None, f"{what}; its id {request_id!r} is owed another answer already: dropped", None)
        self.owed.add(request_id)
        return (MALFORMED, None, f"{what}; answered with error {flaw.code}", (request_id, flaw.error()))

    def _lone_adopter(self) -> Any:
        """The one call that adopts, when exactly one does and it holds no
        adopted request yet (a second would wait behind the first); else
        None. Calls that do not adopt (a keepalive ping) do not count."""
        found: Any = None
        for owner in self.calls.values():
            if getattr(owner, "adopts", False):
                if found is not None:
                    return None
                found = owner
        return found if found is not None and found.adopted == 0 else None
