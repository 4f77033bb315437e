"""The reader side of a connection: every message read, carried where it goes.

Whoever reads a message (a transport's reader thread, or a caller doing
its own exchange) calls `Delivery.deliver()`; `Connection` hands these
methods to its transport as its own (the `MessageSink`). The router
(`router.py`) says where the message goes; this carries the route out:

- into a caller's inbox (its response, progress, and the log messages and
  server requests that came on its own response stream), under the
  connection's lock, so that once a call is forgotten nothing more can
  reach its inbox;
- to a subscription's callback (it only queues);
- to the engine's threads: server requests no caller can take and log
  messages that came for no call;
- to the `on_notification` hook, which only queues for the client's
  dispatcher thread.

A JSON-RPC batch (a list, as `jsonrpc.parse` returns it; revision
2025-03-26 lets a server send one) is split here, so every transport gets
it: each item is routed as if it had come alone, in order, and invalid
items fail the channel as an invalid message does, once the valid ones are
routed.

A request that is JSON-RPC but malformed (`router.MALFORMED`) is no
invalid message: it is answered with its error (or dropped with a warning
when nobody can be answered), and the channel, and every call on it, goes on.

Lock discipline: the lock and the router are the connection's (it makes
them and replaces them only in a fork child, with a new `Delivery`). The
lock is held for the routing decision and the inbox put, never while
anything is sent, logged or handed to user code: the rest of a route is
carried out after it is released (`_carry`).
"""

from __future__ import annotations

import logging
import threading
import time
from operator import itemgetter
from typing import Any, Callable

from . import router as routes
from .engine_threads import MAX_QUEUED_LOGS, EngineThreads
from .errors import InvalidMessage, TransportError
from .inbox import CROWDED, FIRST_DROP, REFUSED, Drops
from .protocol import codes, jsonrpc
from .router import ADOPTED, LOG, NOTIFIED, PROGRESS, RESPONSE, Router

log = logging.getLogger("mcp_sync.connection")

_CALL = routes.CALL
_CLIENT_LOG = routes.CLIENT_LOG
_params = itemgetter("params")
_SUBSCRIPTION = routes.SUBSCRIPTION
#: The most log messages (for no call) a read hands on at once: a quarter
#: of the log queue's bound, so a hand-off that finds it half full lets the
#: log thread run before the next part, well before anything is dropped.
_LOG_RUN = MAX_QUEUED_LOGS // 4


#: Seconds between two warnings about malformed messages from the server.
MALFORMED_QUIET = 1.0


class Delivery:
    """Routes what a connection reads. Thread-safe (any reading thread).

    Collaborators, all given by the connection: `lock` and `router` (its
    table), `threads` (its `EngineThreads`), `on_notification` (the hook
    for notifications for no call), `drops` (its counts), `failed(error)`
    (ends the channel: an invalid message) and `unadopt(pending)` (an
    adopted server request was handed on).
    """

    __slots__ = ("_lock", "_router", "_threads", "_on_notification", "_drops", "_failed", "_unadopt", "_log_run",
                 "_malformed_warned", "_malformed_since")

    def __init__(self, lock: threading.Lock, router: Router[Any], threads: EngineThreads, *,
                 on_notification: Callable[[dict[str, Any]], None] | None, drops: Drops,
                 failed: Callable[[TransportError], None], unadopt: Callable[[Any], None]) -> None:
        self._lock = lock
        self._router = router
        self._threads = threads
        self._on_notification = on_notification
        self._drops = drops
        self._failed = failed
        self._unadopt = unadopt
        self._log_run = _LOG_RUN  # one at a time while the last hand-off found the log queue half full
        # Malformed messages logged at warning at most once a `MALFORMED_QUIET`
        # (with how many came since): a server that sends nothing else must
        # not fill the log, nor run its handlers once a message on the reader.
        # Read and set without the lock: a lost count only blurs the number.
        self._malformed_warned = -MALFORMED_QUIET
        self._malformed_since = 0

    def deliver(self, message: dict[str, Any] | list[Any], related_to: int | str | None = None, *,
                held: list[Any] | None = None, invalid: list[str] | None = None,
                gathered: list[Any] | None = None, logs: list[dict[str, Any]] | None = None) -> None:
        """Route one message (a dict, or a list for a batch) and carry the
        route out. `related_to`: see `MessageSink.deliver`.

        For the engine's own use: with `held`, a progress or log event does
        not wake its caller; its call is added to `held`, for the one who
        passed it to wake (`deliver_all`). With `invalid`, the reason a
        message is not JSON-RPC is added there instead of failing the
        channel (the items of a batch). With `gathered` (`deliver_all`, who
        hands on what is left there at the end), a notification for a
        subscription that takes them many at a time waits there, after its
        owner, to be handed on with the others of the read (`_hand_on`).
        With `logs` (`deliver_all` too), a log message for no call waits
        there, to go to the log thread with the others of the read."""
        if type(message) is not dict:
            if gathered:
                self._hand_on(gathered)  # (see below)
            if logs:
                self._hand_on_logs(logs)
            if type(message) is list:
                self._deliver_batch(message, related_to, held)
                return
        elif (gathered or logs) and "id" in message:
            # A response or a request comes after what was gathered before
            # it: whoever it wakes finds those notifications queued already
            # (and a close() it leads to flushes those log messages).
            if gathered:
                self._hand_on(gathered)
            if logs:
                self._hand_on_logs(logs)
        overflow = None
        with self._lock:  # once per message: this is the hot path
            route = self._router.receive(message, related_to)
            if route[0] is _CALL:
                # Under the lock: once `abandon()` has forgotten a call,
                # nothing more can land in its inbox unseen.
                inbox, event = route[1].inbox, route[2]
                if event is RESPONSE:
                    inbox.answer(route[3])
                    return
                if held is not None and (event is PROGRESS or event is LOG):
                    overflow = inbox.put(event, route[3], wake=False)
                    if not held or held[-1] is not route[1]:
                        held.append(route[1])
                else:
                    overflow = inbox.put(event, route[3])
                if overflow is None and event is not ADOPTED:
                    return
            elif gathered and route[1] is gathered[0] and route[2] == NOTIFIED and route[0] is _SUBSCRIPTION:
                # One more for the subscription whose notifications this
                # read gathers (the likeliest message in a flood of them).
                gathered.append(message)
                return
            elif route[0] is _CLIENT_LOG and logs is not None:
                # (After a call's routes: the answer's path pays nothing for it.)
                logs.append(route[3])
                return
        if overflow is CROWDED and held is not None:
            route[1].inbox.wake()  # then `_carry` lets the caller run
        if gathered is not None and route[0] is _SUBSCRIPTION and route[2] == NOTIFIED:
            if gathered:
                self._hand_on(gathered)  # another subscription's
            if getattr(route[1], "many", None) is not None:
                gathered += (route[1], message)
                return
            # (An owner that takes them one at a time: `_carry` hands it this one.)
        elif gathered:
            self._hand_on(gathered)
        if logs and route[0] is not routes.DROP:
            self._hand_on_logs(logs)  # whoever this wakes (a failure, an ended subscription) finds them queued
        reason = self._carry(route, overflow)
        if reason is None:
            return
        if invalid is not None:
            invalid.append(reason)
        else:
            self._failed(InvalidMessage(f"the server sent an invalid message: {reason}"))

    def deliver_all(self, messages: list[Any]) -> None:
        """Messages read together from a shared stream (stdio: the lines of
        one read), in order, each routed as `deliver()` routes it; the
        wake-ups of the callers their progress and log events are for are
        held until the end: a caller who keeps up is woken once per read,
        not once per event (a thread switch each, which cost more than the
        event). A lane half full wakes its caller at once (see CROWDED).
        The notifications for a subscription whose owner takes many at a
        time (`many`) are gathered and handed on together: before a
        response, a request or a batch read after them is routed, and before
        any other route is carried out (a call's progress and log events,
        for other threads, go into its inbox as they are routed)."""
        held: list[Any] = []  # the calls whose wake-up is held
        gathered: list[Any] = []
        logs: list[dict[str, Any]] = []  # log messages for no call, for the log thread
        log_run = self._log_run
        deliver, lock, run_for = self.deliver, self._lock, self._router.run_for
        index, count = 0, len(messages)
        while index < count:
            size = len(gathered)
            message = messages[index]
            deliver(message, None, held=held, gathered=gathered, logs=logs)
            index += 1
            if len(logs) >= log_run:
                # Handed on in parts, and one at a time while the log queue
                # is half full or more: each such hand-off lets the log
                # thread run (`log_all`), so a handler that keeps up on
                # average loses none of a long read's.
                log_run = self._log_run = 1 if self._hand_on_logs(logs) else _LOG_RUN
            if index == count:
                break
            # A flood comes in runs: the events for one subscription or one
            # call that follow in this read are taken with one pass of the
            # lock and no route each (`Router.run_for`: routing them changes
            # nothing); the first that is not one is delivered as usual.
            if len(gathered) > size:
                with lock:
                    end = run_for(gathered[0], messages, index)
                if end > index:
                    gathered += messages[index:end]
                    index = end
            elif held and held[-1].inbox.room(PROGRESS):
                # Progress for the call whose wake-up was held last, as far
                # as its lane takes them without CROWDED (`Inbox.put_run`;
                # `run_for` says whether any follows); then `deliver` goes
                # on, with what a crowded or full lane does.
                owner = held[-1]
                with lock:  # as `deliver` puts: under it
                    end = run_for(owner, messages, index, index + owner.inbox.room(PROGRESS))
                    if end > index:
                        index += owner.inbox.put_run(PROGRESS, map(_params, messages[index:end]))
        if gathered:
            self._hand_on(gathered)
        if logs:
            self._log_run = 1 if self._hand_on_logs(logs) else _LOG_RUN
        for owner in held:
            owner.inbox.wake()

    def _hand_on_logs(self, logs: list[dict[str, Any]]) -> bool:
        """Hand the log messages gathered for the log thread on, in order;
        `logs` is left empty. True when the log queue is half full or more."""
        crowded = self._threads.log_all(logs)
        logs.clear()
        return crowded

    @staticmethod
    def _hand_on(gathered: list[Any]) -> None:
        """Hand the notifications gathered for one subscription
        (`gathered[1:]`) to its owner (`gathered[0]`) at once, in order;
        `gathered` is left empty."""
        owner, messages = gathered[0], gathered[1:]
        gathered.clear()
        owner.many(messages)

    def _deliver_batch(self, batch: list[Any], related_to: int | str | None, held: list[Any] | None) -> None:
        """A JSON-RPC batch: each item is routed as if it had come alone, in
        order. Invalid items are reported the way an invalid message is (the
        channel fails) only once every valid item has been routed, so a
        response in the same batch still reaches its caller first (it
        precedes the failure in its inbox)."""
        try:
            jsonrpc.check_batch(batch)
        except InvalidMessage as exc:
            self._failed(InvalidMessage(f"the server sent an invalid batch: {exc}"))
            return
        invalid: list[str] = []
        for index, item in enumerate(batch):
            found = len(invalid)
            self.deliver(item, related_to, held=held, invalid=invalid)
            if len(invalid) > found:
                invalid[-1] = f"item {index}: {invalid[-1]}"
        if invalid:
            self._failed(InvalidMessage(
                f"the server sent a batch (a JSON list) of {len(batch)} messages, {len(invalid)} of them "
                f"invalid: {invalid[0]}"))

    def _carry(self, route: routes.Route, overflow: str | None) -> str | None:
        """Carry out a route outside the lock: all but a call's event that
        its inbox took (`deliver()` put it in under the lock). The reason
        when the message is not valid JSON-RPC."""
        dest, owner, event, payload = route
        if dest is _CALL:
            if overflow is None:  # adopted: its handler timeout counts from now, as in the pool
                self._threads.arm_handler_timeout(payload["id"])
                return None
            if overflow is CROWDED:
                # The reader outruns the caller within one turn of the GIL
                # (5 ms, a few hundred events): it lets go of it here, so
                # that a caller that keeps up on average takes its events
                # before the lane's bound drops any. One who falls behind
                # still loses the oldest: the reader never waits for it.
                time.sleep(0)
                return None
            self._overflowed(owner, event, payload, overflow)
        elif dest is routes.SUBSCRIPTION:
            owner(event, payload)
        elif dest is routes.NOTIFICATION:
            if self._on_notification is not None:
                self._on_notification(payload)
            else:
                log.debug("server notification %s (no handler)", payload.get("method"))
        elif dest is routes.HANDLERS:
            self._threads.take(payload)
        elif dest is routes.CLIENT_LOG:
            self._threads.log(payload)
        elif dest is routes.INVALID:
            return str(event)
        elif dest is routes.MALFORMED:
            # A server bug the channel survives, logged at warning: for a
            # dropped one (a notification) the log is its only trace.
            self._log_malformed(str(event))
            if payload is not None:
                # A refusal, as `_overflowed`'s: owed since it was routed,
                # so it goes out once, unless the server withdrew it.
                request_id, error = payload
                self._threads.respond(request_id, None, error, small=True)
        elif payload.get("method") == "notifications/cancelled":
            # Withdrawn by the server: its handler timeout is moot.
            self._threads.withdrawn((payload.get("params") or {}).get("requestId"))
            log.debug("dropped %s", event)
        elif "error" in payload and payload.get("id") is None:
            log.warning("the server sent an error about no request: %s", payload.get("error"))
        else:
            log.debug("dropped %s", event)
        return None

    def _log_malformed(self, reason: str) -> None:
        now = time.monotonic()
        if now - self._malformed_warned < MALFORMED_QUIET:
            self._malformed_since += 1
            log.debug("the server sent a malformed message: %s", reason)
            return
        since, self._malformed_since, self._malformed_warned = self._malformed_since, 0, now
        log.warning("the server sent a malformed message: %s%s", reason,
                    f" ({since} more since the last warning)" if since else "")

    def _overflowed(self, pending: Any, event: str, payload: Any, overflow: str | None) -> None:
        """A call's inbox was full (outside the lock: this refuses and logs)."""
        inbox = pending.inbox
        if overflow is REFUSED and event is ADOPTED:
            self._unadopt(pending)
            self._threads.take(payload)  # the handler threads take what the call has no room for
            return
        if overflow is REFUSED:
            self._drops.add("refused_requests")
            log.debug("refused server request %r: %d wait for %s already", payload.get("id"),
                      inbox.max_requests, pending.method)
            self._threads.respond(payload["id"], None, {
                "code": codes.INTERNAL_ERROR, "message": "too many server requests are waiting for this call"},
                small=True)
            return
        self._drops.add("progress" if event is PROGRESS else "logs")
        if overflow is FIRST_DROP:
            log.warning("%s (request %s): the caller is behind; its oldest progress and log messages are "
                        "dropped beyond %d and %d waiting until it catches up", pending.method, pending.id,
                        inbox.max_progress, inbox.max_logs)
