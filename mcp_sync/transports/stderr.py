"""Where a stdio server's stderr lines go: the `stderr=` option of `Stdio`.

Owns the choice between the logger, `sys.stderr` and a user's callable,
the rate limit that keeps a chatty server from flooding a notebook cell, and
the test for "running in a Jupyter kernel", and `Handoff`, which takes the
lines off the stdio reader: a logging handler or a `print` to a notebook is
code the reader must never wait for (a slow one would delay every
response). It knows nothing of processes or pipes: the stdio transport
hands it one decoded line at a time and calls `finish()` when the pipe ends.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time
from typing import Callable, Literal, Union

from ..waiting import deadline_in, remaining

stderr_logger = logging.getLogger("mcp_sync.server.stderr")
log = logging.getLogger("mcp_sync.transport.stdio")

#: What `Stdio(stderr=...)` takes: "log", "print", a callable per line, or
#: None (the default: "print" limited to a rate in a Jupyter kernel, else "log").
StderrOption = Union[Literal["log", "print"], Callable[[str], object], None]

#: How much stderr text `Handoff` holds for a destination slower than the
#: server before the reader stops reading stderr for a while.
HANDOFF_CHARS = 256 * 1024
#: How long `Handoff`'s thread waits for another line before it ends (the
#: next line starts a new one): an idle connection keeps one thread.
HANDOFF_IDLE_SECONDS = 2.0

#: The notebook default: at most this many lines a second once a burst of
#: `NOTEBOOK_BURST` lines is spent.
NOTEBOOK_RATE = 20.0
NOTEBOOK_BURST = 100


def check_option(stderr: object) -> None:
    """Raise TypeError/ValueError for anything `Stdio(stderr=)` does not take."""
    if stderr is None or callable(stderr):
        return
    if isinstance(stderr, str):
        if stderr not in ("log", "print"):
            raise ValueError(f"stderr must be 'log', 'print' or a callable taking one line, not {stderr!r}")
        return
    raise TypeError(f"stderr must be 'log', 'print' or a callable taking one line, not {type(stderr).__name__}")


def in_jupyter_kernel() -> bool:
    """True inside a running Jupyter (ipykernel) kernel, where nobody has
    configured logging and `sys.stderr` is the cell's output."""
    if "ipykernel" not in sys.modules:
        return False
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is None:
        return False
    try:
        shell = get_ipython()
    except Exception:  # an IPython half torn down: not a kernel we can show anything in
        return False
    return shell is not None and any(cls.__name__ == "ZMQInteractiveShell" for cls in type(shell).__mro__)


class RateLimit:
    """A token bucket: `allow()` is True for at most `burst` lines at once
    and `rate` lines a second after that. Not thread-safe: one drain uses it."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def allow(self) -> bool:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class StderrLines:
    """One server's stderr destination. `line()` and `finish()` are called
    by that server's stderr drain thread only."""

    def __init__(self, option: StderrOption, name: str, *, limit: RateLimit | None = None) -> None:
        check_option(option)
        if option is None:
            if in_jupyter_kernel():
                option = "print"
                limit = limit or RateLimit(NOTEBOOK_RATE, NOTEBOOK_BURST)
            else:
                option = "log"
        self._option = option
        self._name = name
        # Printed lines carry the program's name only: a cell has little room.
        self._short = os.path.basename(name) or name
        self._limit = limit
        self._hidden = 0
        self._limited = False
        self._callback_failed = False

    def line(self, text: str) -> None:
        option = self._option
        if option == "log":
            stderr_logger.info("[%s] %s", self._name, text)
        elif option == "print":
            if self._limit is not None and not self._limit.allow():
                if not self._limited:
                    # Once, at once: the count may only come much later (the
                    # next line shown, or the server's exit).
                    self._limited = True
                    rate = self._limit.rate
                    self._print(f"[{self._short}] \u2026 more server stderr than {rate:g} "
                                f"{'line' if rate == 1 else 'lines'} a second: the rest is counted, not shown")
                self._hidden += 1
                # Not shown, but not lost to whoever configured logging.
                stderr_logger.info("[%s] %s", self._name, text)
                return
            self._summarise()
            self._print(f"[{self._short}] {text}")
        else:
            self._call(text)

    def finish(self) -> None:
        """The pipe ended: say how many lines were not shown, if any."""
        self._summarise()

    def _summarise(self) -> None:
        if self._hidden:
            hidden, self._hidden = self._hidden, 0
            lines = "line" if hidden == 1 else "lines"
            self._print(f"[{self._short}] \u2026 {hidden} {lines} of server stderr not shown")

    @staticmethod
    def _print(text: str) -> None:
        # sys.stderr looked up each time: a notebook (or a test) may replace it.
        stream = sys.stderr
        if stream is None:  # pythonw: nowhere to print
            return
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass

    def _call(self, text: str) -> None:
        callback = self._option
        assert callable(callback)
        try:
            callback(text)
        except Exception:
            # The drain must go on (a full pipe would stall the server);
            # say so once with the traceback, then quietly.
            if not self._callback_failed:
                self._callback_failed = True
                log.warning("the stderr callback of server %s raised; further failures are logged at debug level",
                            self._name, exc_info=True)
            else:
                log.debug("the stderr callback of server %s raised", self._name, exc_info=True)


class Handoff:
    """Hands stderr lines to a `StderrLines` on a thread of its own, so the
    thread that reads them (the stdio reader, which also reads responses)
    only queues. The thread starts at the first line and ends after
    `HANDOFF_IDLE_SECONDS` with nothing to do, or once `finish()` was
    called and every line was forwarded. Nothing is dropped while the
    client is open: once `HANDOFF_CHARS` wait, `full()` says so and the
    reader stops reading stderr until half of that is forwarded
    (`has_room()`; the server's stderr writes wait, its responses do not).
    At close, `stop()` ends the forwarding after the line in hand and
    counts what was left, so a destination that hangs cannot hold `close()`.

    Lock discipline: `_cond` guards the queue, its size, `_thread`,
    `_finished` and `_stopped`; nothing is logged and no destination is
    called under it.
    """

    def __init__(self, lines: StderrLines, name: str, *, max_chars: int = HANDOFF_CHARS,
                 idle: float = HANDOFF_IDLE_SECONDS) -> None:
        self._lines = lines
        self._name = name
        self._max = max_chars
        self._idle = idle
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[str] = collections.deque()
        self._chars = 0  # the length of the lines queued
        self._finished = False
        self._stopped = False
        self._any = False  # a line was queued: `finish()` has something to conclude
        self._thread: threading.Thread | None = None

    def line(self, text: str) -> None:
        """Queue one line (never waits for the destination)."""
        with self._cond:
            self._queue.append(text)
            self._chars += len(text) + 1
            self._any = True
            failed = self._wake()
        if failed is not None:
            log.debug("no thread to forward the stderr of server %s (retried later): %s", self._name, failed)

    def full(self) -> bool:
        """True while `HANDOFF_CHARS` or more wait: read no more for now."""
        return self._chars >= self._max

    def has_room(self) -> bool:
        """True once at most half of `HANDOFF_CHARS` waits: read again. A
        forwarding thread that could not be started is tried again here."""
        if self._chars > self._max // 2:
            if self._thread is None and self._queue:
                with self._cond:
                    self._wake()
            return False
        return True

    def finish(self) -> None:
        """The pipe ended: forward what is queued, then `StderrLines.finish()`."""
        with self._cond:
            self._finished = True
            failed = self._wake() if self._any else None
        if failed is not None:
            log.debug("no thread to forward the last stderr lines of server %s: %s", self._name, failed)

    def flush(self, timeout: float) -> None:
        """Wait up to `timeout` for the lines queued now to be forwarded
        (not on the forwarding thread): a server's last words reach their
        destination before its connection is reported lost, so a log reads
        in the order things happened."""
        if self._thread is threading.current_thread():
            return
        deadline = deadline_in(timeout)
        with self._cond:
            while self._chars > 0 and self._thread is not None and not self._stopped:
                left = remaining(deadline)
                if left <= 0:
                    return
                self._cond.wait(left)

    def stop(self, timeout: float) -> None:
        """At close: wait up to `timeout` for the lines queued to be
        forwarded, then forward no more (the line in hand is finished;
        the rest are counted in a warning)."""
        with self._cond:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify()

    @property
    def thread(self) -> threading.Thread | None:
        """The forwarding thread running now, if any."""
        return self._thread

    def _wake(self) -> RuntimeError | None:
        # Called with `_cond` held; returns why no thread could be started.
        if self._thread is not None:
            self._cond.notify()
            return None
        thread = threading.Thread(target=self._run, name=f"mcp-sync-stderr-{os.path.basename(self._name)}",
                                  daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to be had: `has_room()` and `finish()` try again
            return exc
        self._thread = thread
        return None

    def _run(self) -> None:
        me = threading.current_thread()
        left = 0  # lines not forwarded because of `stop()`
        try:
            while True:
                with self._cond:
                    if not self._queue and not self._finished and not self._stopped:
                        self._cond.wait(self._idle)
                    if self._stopped:
                        left += len(self._queue)
                        self._queue, self._chars = collections.deque(), 0
                        break
                    batch, self._queue = self._queue, collections.deque()
                    finish = self._finished and not batch
                    if not batch and not finish:
                        self._thread = None  # idle, under the lock: the next line starts a new thread
                        return
                for done, text in enumerate(batch, 1):
                    self._forward(text)
                    with self._cond:  # room again, line by line, for a reader that paused
                        self._chars -= len(text) + 1
                        stopped = self._stopped
                        if not self._chars:
                            self._cond.notify_all()  # a `flush()` waiting
                    if stopped:
                        left += len(batch) - done
                        break
                if finish:
                    self._forward_end()
                    return
            if left:
                log.warning("%d stderr lines of server %s were not logged: the client closed while their "
                            "destination was still busy", left, self._name)
        finally:
            with self._cond:
                if self._thread is me:
                    self._thread = None

    def _forward(self, text: str) -> None:
        try:
            self._lines.line(text)
        except Exception:  # a logging filter or handler that raises: the next line still goes
            log.debug("forwarding a stderr line of server %s failed", self._name, exc_info=True)

    def _forward_end(self) -> None:
        try:
            self._lines.finish()
        except Exception:
            log.debug("ending the stderr of server %s failed", self._name, exc_info=True)
