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
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from typing import Any, Callable, Iterator

import attrs

log = logging.getLogger("mcp_sync.notifications")

LIST_CHANGED = frozenset({
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
})
COALESCE_WINDOW = 0.25
OVERFLOW_POLICIES = ("drop_oldest", "drop_newest")


@attrs.frozen
class Notification:
    """One notification from the server: `method`, `params`, and the whole message in `raw`."""

    method: str
    params: dict[str, Any]
    raw: dict[str, Any] = attrs.field(repr=False, eq=False)

    @classmethod
    def from_wire(cls, message: dict[str, Any]) -> Notification:
        params = message.get("params")
        return cls(method=str(message.get("method")), params=dict(params) if isinstance(params, dict) else {},
                   raw=message)


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
    """

    def __init__(self, on_close: Callable[[NotificationStream], None], max_buffer: int, overflow: str) -> None:
        if isinstance(max_buffer, bool) or not isinstance(max_buffer, int) or max_buffer < 1:
            raise ValueError("max_buffer must be a positive integer")
        if overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}, not {overflow!r}")
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
        """The next notification; `TimeoutError` after `timeout` seconds,
        `StopIteration` once the stream (or the client) is closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._buffer:
                if self._closed:
                    raise StopIteration
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no notification within {timeout:g} s")
                self._cond.wait(remaining)
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
        return self._closed

    def __enter__(self) -> NotificationStream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class Dispatcher:
    """Runs notification callbacks and feeds streams on one thread, in order."""

    def __init__(self, name: str = "mcp-sync-notifications") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._callbacks: tuple[Callable[[Notification], Any], ...] = ()
        self._streams: tuple[NotificationStream, ...] = ()
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- consumers ------------------------------------------------------------------

    def add_callback(self, callback: Callable[[Notification], Any]) -> Callable[[], None]:
        if not callable(callback):
            raise TypeError("the notification callback must be callable")
        with self._lock:
            self._callbacks = self._callbacks + (callback,)
        self._ensure_thread()

        def remove() -> None:
            with self._lock:
                self._callbacks = tuple(c for c in self._callbacks if c is not callback)

        return remove

    def open_stream(self, max_buffer: int = 100, overflow: str = "drop_oldest") -> NotificationStream:
        stream = NotificationStream(self._remove_stream, max_buffer, overflow)
        with self._lock:
            if self._closed:
                stream.close()
                return stream
            self._streams = self._streams + (stream,)
        self._ensure_thread()
        return stream

    def _remove_stream(self, stream: NotificationStream) -> None:
        with self._lock:
            self._streams = tuple(s for s in self._streams if s is not stream)

    # -- producers ------------------------------------------------------------------

    def put(self, message: dict[str, Any]) -> None:
        """Queue a notification (called on the thread that read it)."""
        if not self._closed:
            self._queue.put(message)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

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
                message = self._queue.get(timeout=max(timeout, 0) if timeout is not None else None)
            except queue.Empty:
                continue
            if message is None:
                return
            method = message.get("method")
            if method in LIST_CHANGED:
                if method in windows:
                    held[str(method)] = message
                    continue
                windows[str(method)] = time.monotonic() + COALESCE_WINDOW
            self._emit(message)

    def _emit(self, message: dict[str, Any]) -> None:
        notification = Notification.from_wire(message)
        for callback in self._callbacks:
            try:
                callback(notification)
            except Exception:
                log.exception("a notification callback raised")
        for stream in self._streams:
            stream._push(notification)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            streams = self._streams
        self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        for stream in streams:
            stream.close()
