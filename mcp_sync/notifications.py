"""Server notifications that belong to no call: callbacks and streams.

Owns one *dispatcher* thread per client (started on first use, joined by
`close()`). The engine hands each unsolicited notification to `put()` on
the thread that read it; `put()` only queues it, so the reader never runs
user code and never waits. The dispatcher delivers notifications in order
to every callback and every open `NotificationStream`.

Bursts are coalesced per `list_changed` kind: the first of a burst goes out
at once, and whatever else of that kind arrives within the next 250 ms goes
out as one notification when the window closes. A consumer that only
re-lists on a change therefore re-lists at most twice per burst.

Memory is bounded whatever the server sends. A notification of a kind that
no callback and no stream listens to is not queued at all (`put()` only
counts it in `unlistened`). The queue holds at most `max_queued`; beyond,
the oldest waiting notification is dropped, counted in `drops`, and a
warning is logged when the dropping starts and once more, with the count,
when the listeners have caught up. A `list_changed` is never lost that way:
the oldest of each kind is set aside instead (at most three, one per kind)
and goes out first, as it came first.

The client's own events (a change of connection status) run on the same
thread through `call_soon()`, so user callbacks never run on the reader nor
on the thread that noticed the event. Those functions wait in a queue of
their own, bounded like the notifications' and served first: there are few
of them, and they must not wait behind a flood from the server.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any, Callable, Iterator, Optional

import attrs

from .connection import Drops
from .errors import RequestTimeout
from .waiting import check_seconds, deadline_in, remaining, slice_of

log = logging.getLogger("mcp_sync.notifications")

#: The longest `Dispatcher.close()` waits for a callback that is running.
CLOSE_JOIN_SECONDS = 2.0

LIST_CHANGED = frozenset({
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
})
COALESCE_WINDOW = 0.25
OVERFLOW_POLICIES = ("drop_oldest", "drop_newest")


def check_buffer(max_buffer: Any, overflow: Any) -> None:
    """A stream's bound and overflow policy, as `NotificationStream` and
    `Subscription` take them: ValueError for anything else."""
    if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 1:
        raise ValueError("max_buffer must be a positive integer")
    if overflow not in OVERFLOW_POLICIES:
        raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}, not {overflow!r}")
#: The most notifications waiting for the dispatcher thread; beyond, the oldest is dropped.
MAX_QUEUED_NOTIFICATIONS = 1000


@attrs.frozen
class Notification:
    """One notification from the server: `method`, `params`, and the whole message in `raw`.

    Example::

        client.on_notification(lambda n: print(n.method, n.params.get("uri")),
                               methods=["notifications/resources/updated"])

    Attributes:
        method (str): The notification's method, such as
            ``"notifications/tools/list_changed"``.
        params (dict[str, Any]): Its params; empty when it had none.
        raw (dict[str, Any]): The whole JSON-RPC message as received (not
            compared by `==`).
    """

    method: str
    params: dict[str, Any]
    raw: dict[str, Any] = attrs.field(repr=False, eq=False)

    @classmethod
    def from_wire(cls, message: dict[str, Any]) -> Notification:
        """The `Notification` of a JSON-RPC notification message (a
        missing or non-object `params` becomes ``{}``).

        Args:
            message: The JSON-RPC notification, as decoded.

        Returns:
            The notification, with `message` as its `raw`.
        """
        params = message.get("params")
        return cls(method=str(message.get("method")), params=dict(params) if isinstance(params, dict) else {},
                   raw=message)


# `Notification(method, params, raw)` without attrs' generated `__init__`,
# which sets each frozen slot through `object.__setattr__` (a third of the
# cost of building one): the per-event path of a stream of updates. The
# slots' own setters write the same fields; `tests/test_notifications.py`
# checks that the two agree.
_new = object.__new__
_set_method, _set_params, _set_raw = (Notification.__dict__[name].__set__ for name in ("method", "params", "raw"))


def notification_of(method: str, params: dict[str, Any], raw: dict[str, Any]) -> Notification:
    """The same `Notification` as `Notification(method, params, raw)`, built faster."""
    made: Notification = _new(Notification)
    _set_method(made, method)
    _set_params(made, params)
    _set_raw(made, raw)
    return made


class NotificationStream:
    """An iterator over server notifications, with a bounded buffer.

    Example::

        with client.notifications() as stream:
            for note in stream:
                if note.method == "notifications/tools/list_changed":
                    tools = client.list_tools()

    When the buffer (`max_buffer`) is full, `overflow` decides: drop the
    oldest waiting notification (default) or the newest; `dropped` counts
    them. A slow consumer never holds up the dispatcher or anyone else.

    Args:
        on_close: Called with the stream by `close()` (the client passes
            its own, to stop feeding it).
        max_buffer: The most notifications that wait to be read.
        overflow: ``"drop_oldest"`` or ``"drop_newest"``: which one a full
            buffer drops.

    Attributes:
        dropped (int): Notifications dropped because the buffer was full.

    Raises:
        ValueError: `max_buffer` is not a positive integer, or an unknown
            `overflow`.
    """

    def __init__(self, on_close: Callable[[NotificationStream], None], max_buffer: int, overflow: str) -> None:
        check_buffer(max_buffer, overflow)
        self._on_close = on_close
        self._max = max_buffer
        self._overflow = overflow
        self._buffer: collections.deque[Notification] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def _push(self, notification: Notification) -> None:
        with self._cond:
            if self._closed:
                return
            if len(self._buffer) >= self._max:
                self.dropped += 1
                if self._overflow == "drop_newest":
                    return
                self._buffer.popleft()
            self._buffer.append(notification)
            self._cond.notify()

    def next(self, timeout: float | None = None) -> Notification:
        """The next notification; `RequestTimeout` (also a `TimeoutError`)
        after `timeout` seconds, `StopIteration` once the stream (or the
        client) is closed.

        Args:
            timeout: The most seconds to wait; None: no limit.

        Returns:
            The oldest notification waiting.

        Raises:
            RequestTimeout: None arrived within `timeout`.
            StopIteration: The stream is closed and its buffer read.
            TypeError: `timeout` is not a number (or None).
            ValueError: `timeout` is negative, NaN or infinite.
        """
        if timeout is not None:  # (None, the common case, costs one test)
            check_seconds("timeout", timeout, allow_none=True, allow_zero=True)  # 0: look without waiting
        deadline = deadline_in(timeout)
        with self._cond:
            while not self._buffer:
                if self._closed:
                    raise StopIteration
                left = remaining(deadline)
                if left is not None and left <= 0:
                    raise RequestTimeout(f"no notification within {timeout:g} s", timeout=timeout)
                self._cond.wait(slice_of(left))  # (an interrupt lands on the main thread)
            return self._buffer.popleft()

    def __iter__(self) -> Iterator[Notification]:
        return self

    def __next__(self) -> Notification:
        return self.next()

    def close(self) -> None:
        """Stop receiving; iteration ends once the buffer is read."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._on_close(self)

    @property
    def closed(self) -> bool:
        """True once the stream (or its client) is closed; notifications
        already buffered can still be read."""
        return self._closed

    def __enter__(self) -> NotificationStream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


Listener = tuple[Callable[[Notification], Any], Optional[frozenset[str]]]


class _Queue:
    """The dispatcher's queue, with what its lock guards: the waiting
    notifications, the current burst of drops, the unlistened count, and
    whether the dispatcher is ending. The bound is the dispatcher's."""

    __slots__ = ("items", "set_aside", "calls", "cond", "burst", "unlistened", "ending")

    def __init__(self) -> None:
        self.items: collections.deque[dict[str, Any]] = collections.deque()
        # list_changed notifications the bound pushed out of `items`: one per
        # kind, older than everything in `items`.
        self.set_aside: dict[str, dict[str, Any]] = {}
        # Functions from `call_soon()`, served before `items`.
        self.calls: collections.deque[Callable[[], None]] = collections.deque()
        self.cond = threading.Condition(threading.Lock())
        self.burst = 0       # dropped since the queue was last empty
        self.unlistened = 0  # not queued: nobody listens to their kind
        self.ending = False  # `close()`: deliver what waits, then stop


class Dispatcher:
    """Runs notification callbacks and feeds streams on one thread, in order.

    Example::

        dispatcher = Dispatcher()
        stop = dispatcher.add_callback(print, methods={"notifications/tools/list_changed"})
        dispatcher.put({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        dispatcher.put({"jsonrpc": "2.0", "method": "notifications/resources/updated"})  # not queued
        dispatcher.close()

    `drops.notifications` counts what the bound dropped (the client passes
    its own `Drops`, shared with its connections); `unlistened` counts what
    nobody listened to.
    """

    def __init__(self, name: str = "mcp-sync-notifications", *, max_queued: int = MAX_QUEUED_NOTIFICATIONS,
                 drops: Drops | None = None) -> None:
        if isinstance(max_queued, bool) or not isinstance(max_queued, int) or max_queued < 1:
            raise ValueError("max_queued must be a positive integer")
        self._name = name
        self._lock = threading.Lock()
        self._queue = _Queue()
        self._callbacks: tuple[Listener, ...] = ()
        self._streams: tuple[NotificationStream, ...] = ()
        # The kinds someone listens to, read without a lock by `put()`:
        # None means every kind (a stream, or a callback without a filter).
        self._wanted: frozenset[str] | None = frozenset()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.max_queued = max_queued
        self.drops = drops if drops is not None else Drops()

    # -- consumers ------------------------------------------------------------------

    def add_callback(self, callback: Callable[[Notification], Any],
                     methods: Iterable[str] | None = None) -> Callable[[], None]:
        """Call `callback` with every notification, or only with those whose
        method is in `methods`. Returns a function that removes it."""
        if not callable(callback):
            raise TypeError("the notification callback must be callable")
        kinds = None if methods is None else frozenset((methods,) if isinstance(methods, str) else methods)
        if kinds is not None and not all(isinstance(kind, str) for kind in kinds):
            raise TypeError("methods must be method names (strings)")
        listener: Listener = (callback, kinds)
        with self._lock:
            self._callbacks = self._callbacks + (listener,)
            self._update_wanted()
        self._ensure_thread()

        def remove() -> None:
            with self._lock:
                self._callbacks = tuple(entry for entry in self._callbacks if entry is not listener)
                self._update_wanted()

        return remove

    def open_stream(self, max_buffer: int = 100, overflow: str = "drop_oldest") -> NotificationStream:
        stream = NotificationStream(self._remove_stream, max_buffer, overflow)
        with self._lock:
            if self._closed:
                stream.close()
                return stream
            self._streams = self._streams + (stream,)
            self._update_wanted()
        self._ensure_thread()
        return stream

    def _remove_stream(self, stream: NotificationStream) -> None:
        with self._lock:
            self._streams = tuple(s for s in self._streams if s is not stream)
            self._update_wanted()

    def _update_wanted(self) -> None:
        """(Under `_lock`.) Which kinds `put()` queues from now on."""
        if self._streams or any(kinds is None for _, kinds in self._callbacks):
            self._wanted = None
        else:
            self._wanted = frozenset().union(*(kinds for _, kinds in self._callbacks if kinds is not None))

    # -- producers ------------------------------------------------------------------

    def put(self, message: dict[str, Any]) -> None:
        """Queue a notification (called on the thread that read it; never
        blocks). A kind nobody listens to is only counted; when the queue is
        full, the oldest waiting notification makes room."""
        wanted = self._wanted
        q = self._queue
        if wanted is not None and message.get("method") not in wanted:
            with q.cond:
                q.unlistened += 1
            return
        with q.cond:
            if self._closed or q.ending:
                return
            dropped = first = False
            if len(q.items) >= self.max_queued:
                oldest = q.items.popleft()
                kind = oldest.get("method")
                if kind in LIST_CHANGED:
                    # A change must not be missed; a later one of its kind
                    # says the same, so one per kind is enough.
                    q.set_aside.pop(str(kind), None)
                    q.set_aside[str(kind)] = oldest
                else:
                    dropped = True
                    q.burst += 1
                    first = q.burst == 1
            q.items.append(message)
            q.cond.notify()
        if dropped:
            self.drops.add("notifications")
            if first:
                log.warning("notifications come faster than the listeners take them; the oldest are dropped "
                            "beyond %d waiting until they catch up", self.max_queued)

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run `fn()` on the dispatcher thread, after the functions already
        waiting there and before the waiting notifications; never on the
        caller's thread, and never blocks. Starts the thread if needed.

        Example::

            dispatcher = Dispatcher()
            done = threading.Event()
            dispatcher.call_soon(done.set)
            done.wait(5)
            dispatcher.close()

        A function that raises is logged; the thread goes on. Beyond
        `max_queued` waiting functions the oldest is dropped with a warning.
        Once the dispatcher is closed, `fn` is dropped: what was queued before
        `close()` still runs.
        """
        if not callable(fn):
            raise TypeError("call_soon needs a callable")
        # Start the thread first: a `close()` after this point either sees
        # the function queued (and runs it before ending) or refuses it below.
        self._ensure_thread()
        q = self._queue
        dropped = None
        with q.cond:
            if self._closed or q.ending:
                log.debug("the dispatcher is closed; dropped %r", fn)
                return
            if len(q.calls) >= self.max_queued:
                dropped = q.calls.popleft()
            q.calls.append(fn)
            q.cond.notify()
        if dropped is not None:
            log.warning("more than %d functions wait for the dispatcher thread; dropped the oldest, %r",
                        self.max_queued, dropped)

    @property
    def queued(self) -> int:
        """Notifications waiting for the dispatcher thread now."""
        with self._queue.cond:
            return len(self._queue.items) + len(self._queue.set_aside)

    @property
    def unlistened(self) -> int:
        """Notifications not queued because nobody listened to their kind."""
        with self._queue.cond:
            return self._queue.unlistened

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def _take(self, timeout: float | None) -> dict[str, Any] | Callable[[], None] | None:
        """The next function from `call_soon()` or notification; None when the
        dispatcher ends; `queue.Empty` after `timeout`."""
        q = self._queue
        with q.cond:
            if not q.calls and not q.items and not q.set_aside and not q.ending:
                q.cond.wait(timeout)
            if q.calls:
                return q.calls.popleft()
            if q.set_aside:
                message = q.set_aside.pop(next(iter(q.set_aside)))
            elif q.items:
                message = q.items.popleft()
            elif q.ending:
                return None
            else:
                raise queue.Empty
            ended = 0
            if not q.items and not q.set_aside and q.burst:
                ended, q.burst = q.burst, 0
        if ended:
            log.warning("%d notifications were dropped while the listeners were behind", ended)
        return message

    def _run(self) -> None:
        windows: dict[str, float] = {}   # list_changed kind -> when its window closes
        held: dict[str, dict[str, Any]] = {}  # the latest notification held back per kind
        while True:
            now = time.monotonic()
            for kind in [k for k, end in windows.items() if end <= now]:
                del windows[kind]
                if kind in held:
                    self._emit(held.pop(kind))
                    windows[kind] = now + COALESCE_WINDOW
            timeout = min(windows.values()) - now if windows else None
            try:
                message = self._take(max(timeout, 0) if timeout is not None else None)
            except queue.Empty:
                continue
            if message is None:
                return
            if not isinstance(message, dict):
                self._call(message)
                continue
            method = message.get("method")
            if method in LIST_CHANGED:
                if method in windows:
                    held[str(method)] = message
                    continue
                windows[str(method)] = time.monotonic() + COALESCE_WINDOW
            self._emit(message)

    @staticmethod
    def _call(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # the user's callback must not end the dispatcher thread
            log.exception("a function run on the dispatcher thread raised")

    def _emit(self, message: dict[str, Any]) -> None:
        try:
            notification = Notification.from_wire(message)
        except Exception:  # a malformed one must not end the dispatcher thread
            log.warning("dropped a malformed notification: %.200r", message, exc_info=True)
            return
        for callback, kinds in self._callbacks:
            if kinds is not None and notification.method not in kinds:
                continue
            try:
                callback(notification)
            except Exception:
                log.exception("a notification callback raised")
        for stream in self._streams:
            stream._push(notification)

    def after_fork(self) -> None:
        """In a fork child: the dispatcher thread was not copied, and its
        locks may have been held by a thread that does not exist here. A
        fresh lock and queue; the thread starts again if anyone listens."""
        self._lock = threading.Lock()
        self._queue = _Queue()
        self._thread = None
        if self._callbacks or self._streams:
            self._ensure_thread()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            streams = self._streams
        q = self._queue
        with q.cond:
            q.ending = True
            q.cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            # Bounded: a callback of the user's that never returns must not
            # hang `close()`; its (daemon) thread then ends when it does.
            thread.join(CLOSE_JOIN_SECONDS)
            if thread.is_alive():
                log.warning("a notification or status callback was still running %g s after close(); "
                            "left to finish on its own", CLOSE_JOIN_SECONDS)
        for stream in streams:
            stream.close()
