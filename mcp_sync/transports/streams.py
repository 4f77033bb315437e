"""Long-lived response streams, all read by one thread of the process.

Owns: the process-wide reader thread (`SharedReader`, the one instance
`READER`), a `selectors` loop over the sockets of every long-lived stream
with a timer per stream; and what lets one thread read many streams without
ever blocking on one of them: the push parser of a response body's HTTP/1.1
framing (`BodyFrames`), fed whatever bytes a socket had, and the hand-over
of a response whose head `http11` has read (`take_body`).

Must not know: what a stream carries (SSE, MCP), how its request was made,
or how its connection is dialed and given back. To the reader a stream is
a socket and four callbacks (`SharedReader.open`).

How it works. A socket handed to the reader (`Stream.watch`) is
non-blocking; when the selector says it is readable, the reader receives
until the socket would block (a TLS socket too: its `recv` then also
returns what TLS had already decrypted, so nothing waits in its buffer
unseen), at most `TURN_BYTES` per stream and turn, and hands each piece to
the stream's `on_data`. The work a piece brings may be far more than its
size (a compressed burst): `on_data` then does a turn's worth of it, keeps
the rest back and says so (returns True); the stream's turn ends there and,
on its next one, `on_data(b"")` goes on with it before the socket is read
again. A TLS record that is only partly there, a chunk
size line cut in two, an event half sent: each just waits for the next
turn, and the other streams are served meanwhile. At the socket's end (or
error) the socket is taken off the selector and `on_end` is called. A
stream's timer (`Stream.later`) calls `on_timer` (a reconnection's delay).

Failure. A thread that could not be started (no thread or no descriptor
left) leaves nothing behind: `open()` raises and the reader is as before.
Should the thread die of an error of its own, each stream it was reading
is ended (`on_end`, as if its socket had failed, so its owner reconnects),
its timer kept, and a new thread takes the streams over; after a few
deaths in a row with no data read in between, the streams are closed
(`on_close`) instead, and the next `open()` starts afresh.

Lock discipline. `SharedReader._cond` (a Condition) guards the reader's
shared state: the open streams (and their number), the command queue and the
current run (its thread, selector and wake socket). It is held for short
bookkeeping only: never during IO (but a non-blocking one-byte send on
the wake socket, and making a new run's selector and wake socket), never
while a callback runs. The selector, the sockets it
watches and every stream's reading state belong to the reader thread
alone; other threads ask for changes with commands (watch, a timer, close),
which the thread applies at the top of its loop, in order. Callbacks run
on the reader thread with no lock held and must never block: they parse
and hand messages to queues.

Lifetime. The thread starts with the first open stream and ends once the
last one is closed; `Stream.close()` waits (bounded) until its own stream
is done and, when it was the last one, until the thread has ended (a
thread that took over from a dead one, or started while the last one was
still ending, first waits for that one to end), so no thread outlives the
last owner's close(). After `os.fork()` the child
forgets the reader (its thread was not copied) and closes its copies of
the selector's and the wake socket's descriptors, with no IO and no change
to the selector the parent still uses; a stream opened in the child starts
the child's own thread.
"""

from __future__ import annotations

import collections
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from typing import Any, Callable

from .. import forking

from ..waiting import remaining
from .http11 import MAX_HEADERS, MAX_LINE, Response, ResponseError

__all__ = ["READER", "TURN_BYTES", "BodyFrames", "SharedReader", "Stream", "take_body"]

log = logging.getLogger("mcp_sync.transport.http")

#: The name of the reader thread.
THREAD_NAME = "mcp-sync-streams"

#: The most bytes read from one stream per turn of the loop, so that a
#: stream that never stops sending cannot starve the others.
TURN_BYTES = 256 * 1024

_RECV_SIZE = 65536

#: How many times in a row (with no data read in between) a dead reader
#: thread is replaced before its streams are closed instead.
_MOST_DEATHS = 3


class Stream:
    """One long-lived stream the shared reader serves: a socket at a time
    (a stream may reconnect), a timer, and the owner's callbacks. Made by
    `SharedReader.open()`."""

    __slots__ = ("_reader", "on_data", "on_end", "on_timer", "on_close", "_closing", "_done",
                 "sock", "deadline", "_want_write", "_more")

    def __init__(self, reader: SharedReader, on_data: Callable[[bytes], bool | None],
                 on_end: Callable[[OSError | None], None], on_timer: Callable[[], None],
                 on_close: Callable[[], None]) -> None:
        self._reader = reader
        self.on_data = on_data
        self.on_end = on_end
        self.on_timer = on_timer
        self.on_close = on_close
        self._closing = False  # under the reader's lock
        self._done = threading.Event()
        # The reader thread's own (see the module docstring).
        self.sock: socket.socket | None = None
        self.deadline: float | None = None
        self._want_write = False
        #: `on_data` kept work back: call it again before reading on.
        self._more = False

    def watch(self, sock: socket.socket, first: bytes = b"") -> bool:
        """(Any thread.) Read `sock` (non-blocking from now on) on the reader
        thread; `on_data(first)` comes first (the bytes already received
        with the response's head, maybe none). False when the stream was
        closed meanwhile: `sock` is still the caller's to close."""
        sock.setblocking(False)
        return self._reader._command(self, "watch", (sock, first))

    def unwatch(self) -> None:
        """(Reader thread, from a callback.) Stop reading the socket: the
        owner may close it after this."""
        self._reader._unwatch(self)

    def later(self, delay: float) -> None:
        """(Any thread.) Call `on_timer` on the reader thread after `delay`
        seconds (replacing a timer already set)."""
        self._reader._command(self, "later", time.monotonic() + max(delay, 0.0))

    def close(self, timeout: float) -> bool:
        """(Any thread; idempotent.) Stop the stream: its socket is no longer
        read and `on_close` runs on the reader thread (at once, when called
        there). Waits at most `timeout` seconds for that and, when it was the
        last stream, for the reader thread to end. False if it timed out."""
        return self._reader._close(self, timeout)

    @property
    def done(self) -> bool:
        """Whether `on_close` has run."""
        return self._done.is_set()


class _Run:
    """One life of the reader thread: its selector and wake socket."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        try:
            self.wake_r, self.wake_w = socket.socketpair()
        except BaseException:  # no descriptor left: leave none behind
            self.selector.close()
            raise
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        self.thread: threading.Thread | None = None
        #: Streams to read again without waiting (their turn ran out).
        self.ready: set[Stream] = set()
        self.timers: set[Stream] = set()
        #: Commands taken from the queue and not yet applied (the thread's own).
        self.pending: collections.deque[tuple[Stream, str, Any]] = collections.deque()
        #: The command being applied, until it took effect: a thread that
        #: dies meanwhile hands it to its successor with the pending ones.
        self.applying: tuple[Stream, str, Any] | None = None
        #: The thread of the run before this one (one that died, or one still
        #: ending when this one started). It is joined before this run's
        #: thread ends, so that whoever joins the last thread has outlived
        #: them all: either still closes its selector after letting go.
        self.predecessor: threading.Thread | None = None

    def wake(self) -> None:
        try:
            self.wake_w.send(b"\0")
        except OSError:  # full (a wake is pending anyway) or closed (the run is ending)
            pass

    def close(self) -> None:
        self.selector.close()
        self.wake_r.close()
        self.wake_w.close()


class SharedReader:
    """The process's reader of long-lived streams (see the module docstring).

    Example::

        stream = READER.open(on_data=parse, on_end=ended, on_timer=reconnect, on_close=release)
        stream.watch(sock)         # read on the reader thread from now on
        ...
        stream.close(timeout=5.0)  # on_close has run; no thread left if it was the last
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open = 0
        self._commands: list[tuple[Stream, str, Any]] = []
        self._run: _Run | None = None
        #: The run whose thread is ending (or ended) after its last stream.
        self._ending: _Run | None = None
        #: The open streams (a dead thread's successor takes them over).
        self._streams: set[Stream] = set()
        #: Threads that died in a row, with no data read since.
        self._deaths = 0

    @property
    def thread(self) -> threading.Thread | None:
        """The reader thread, while one runs."""
        run = self._run
        return None if run is None else run.thread

    @property
    def open_streams(self) -> int:
        """How many streams are open (not yet closed)."""
        return self._open

    def open(self, on_data: Callable[[bytes], bool | None], on_end: Callable[[OSError | None], None],
             on_timer: Callable[[], None], on_close: Callable[[], None]) -> Stream:
        """A new stream, with nothing to read yet: the thread runs (it is
        started if need be) until the stream is closed. The callbacks run on
        the reader thread: `on_data(bytes)` with what came, `on_end(error)`
        once the socket ended (None) or failed (the socket is no longer
        watched then), `on_timer()` when `later`'s delay passed,
        `on_close()` once the stream is closed. `on_data` returns True when
        it kept part of its work back (about a turn's worth done): it is
        called again, with b"", on the stream's next turn, before its
        socket is read on.

        Raises OSError or RuntimeError when the thread cannot be started
        (no descriptor or no thread left); nothing is left half open."""
        stream = Stream(self, on_data, on_end, on_timer, on_close)
        with self._cond:
            if self._run is None:
                # A thread whose last stream just closed may still be ending:
                # the new one waits for it, as for a dead one.
                ending = self._ending.thread if self._ending is not None else None
                if ending is threading.current_thread() or (ending is not None and not ending.is_alive()):
                    ending = None  # (a dead thread's on_close opening a stream: it is no predecessor of its own)
                self._start_run(predecessor=ending)
            self._open += 1
            self._streams.add(stream)
            self._cond.notify_all()  # a close() waiting for the thread's end need not wait
        return stream

    def _start_run(self, predecessor: threading.Thread | None = None) -> None:
        """(Under the lock.) A new run and its thread, or nothing (raised)."""
        run = _Run()
        run.predecessor = predecessor
        run.thread = threading.Thread(target=self._loop, args=(run,), name=THREAD_NAME, daemon=True)
        self._run = run
        try:
            run.thread.start()
        except BaseException:
            self._run = None
            run.close()
            raise

    # -- commands (any thread) ------------------------------------------------------------------

    def _command(self, stream: Stream, kind: str, arg: Any) -> bool:
        with self._cond:
            run = self._run
            if stream._closing or run is None:
                return False
            self._commands.append((stream, kind, arg))
            run.wake()
        return True

    def _close(self, stream: Stream, timeout: float) -> bool:
        limit = time.monotonic() + timeout
        with self._cond:
            run = self._run
            first = not stream._closing
            stream._closing = True
            here = run is not None and run.thread is threading.current_thread()
            # The dead thread closing the streams it gave up (`_died`): this
            # one's on_close runs now or ran, on this thread; never wait for it.
            dying = not first and self._ending is not None and self._ending.thread is threading.current_thread()
            if first and run is not None and not here:
                self._commands.append((stream, "close", None))
                run.wake()
        if here:
            assert run is not None
            if first:
                self._close_now(run, stream)  # the thread ends at the top of its loop if that was the last
            return True
        if dying:
            return True
        if run is None and first and not stream._done.is_set():  # no thread (a bug guard: an open stream keeps one)
            self._call(stream.on_close)
            stream._done.set()
        if not stream._done.wait(remaining(limit)):
            return False
        # When that was the last stream, the thread is ending: wait for it.
        with self._cond:
            self._cond.wait_for(lambda: self._open > 0 or self._run is None, remaining(limit))
            ending = self._ending if self._open == 0 and self._run is None else None
        if ending is not None and ending.thread is not None and ending.thread is not threading.current_thread():
            ending.thread.join(remaining(limit))
            return not ending.thread.is_alive()
        return True

    # -- the reader thread ---------------------------------------------------------------------

    def _loop(self, run: _Run) -> None:
        try:
            while True:
                with self._cond:
                    run.pending.extend(self._commands)
                    self._commands = []
                    if not run.pending and self._open == 0:
                        self._run, self._ending = None, run
                        self._cond.notify_all()
                        break
                while run.pending:
                    run.applying = run.pending.popleft()
                    self._apply(run, *run.applying)
                    run.applying = None
                for key, _ in run.selector.select(self._timeout(run)):
                    if key.data is None:
                        self._drain_wake(run)
                    else:
                        run.ready.add(key.data)
                for stream in list(run.ready):
                    run.ready.discard(stream)
                    self._pump(run, stream)
                self._fire_timers(run)
        except BaseException as exc:  # a bug of the reader's own: its streams must not go silent
            log.exception("the stream reader thread failed")
            self._died(run, exc)
        finally:
            run.close()
            if run.predecessor is not None:
                # Bounded: all it has left after handing over is its own close().
                run.predecessor.join()

    def _died(self, run: _Run, exc: BaseException) -> None:
        """(The dying thread.) Hand the streams to a new thread, each ended
        as if its socket had failed and with its timer kept; or, after too
        many deaths in a row (or none can start), close them."""
        error = OSError(f"the stream reader failed: {type(exc).__name__}: {exc}")
        dropped: list[Stream] = []
        deaths = 0
        with self._cond:
            if self._run is not run:
                return
            self._run, self._ending = None, run
            carried: list[tuple[Stream, str, Any]] = []
            lost = run.applying  # a watch not yet registered, a timer maybe not yet set
            for stream in self._streams:
                if stream.sock is not None:
                    carried.append((stream, "end", error))
                if stream in run.timers and stream.deadline is not None:
                    carried.append((stream, "later", stream.deadline))
                stream.sock, stream.deadline = None, None
                stream._want_write = stream._more = False
            if lost is not None and lost[0] in self._streams:
                carried.append(lost)
            self._deaths += 1
            restarted = False
            if self._streams and self._deaths <= _MOST_DEATHS:
                try:
                    self._start_run(predecessor=run.thread)
                    restarted = True
                except (OSError, RuntimeError) as failure:
                    log.error("no new stream reader thread: %s", failure)
            if restarted:  # in order: the dead thread's, then what was asked since
                self._commands = carried + list(run.pending) + self._commands
            else:
                dropped, self._streams = list(self._streams), set()
                for stream in dropped:  # closing from now on: a close() or command of its owner's is a no-op
                    stream._closing = True
                self._open = 0
                self._commands = []
                deaths, self._deaths = self._deaths, 0  # the next open() starts afresh
            self._cond.notify_all()
        if dropped:
            log.error("the stream reader thread failed %d times in a row; its %d streams are closed",
                      deaths, len(dropped))
        for stream in dropped:  # no other thread reads them: this one is still their reader
            self._call(stream.on_close)
            stream._done.set()

    @staticmethod
    def _drain_wake(run: _Run) -> None:
        try:
            while run.wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _apply(self, run: _Run, stream: Stream, kind: str, arg: Any) -> None:
        if kind in ("close", "end"):
            # Never applied twice: its callback may have run (a "later"
            # may, it only sets the timer again).
            run.applying = None
        if kind == "close":
            self._close_now(run, stream)
            return
        if stream._done.is_set():
            return  # closed on the reader thread after this command was queued
        if kind == "later":
            stream.deadline = arg
            run.timers.add(stream)
        elif kind == "end":  # from a dead thread: the socket it read is given up
            self._call(stream.on_end, arg)
        elif kind == "watch":
            sock, first = arg
            self._unwatch(stream)
            stream._want_write = False
            try:
                run.selector.register(sock, selectors.EVENT_READ, stream)
            except (KeyError, ValueError, OSError) as exc:  # closed under it: an owner's abort came first
                run.applying = None
                self._call(stream.on_end, exc if isinstance(exc, OSError) else OSError(str(exc)))
                return
            stream.sock = sock
            # Watched from here: a death now ends the socket ("end"), as any read one.
            run.applying = None
            self._feed(run, stream, first)
            if stream.sock is sock:
                run.ready.add(stream)  # bytes TLS decrypted with the head are not seen by the selector

    def _unwatch(self, stream: Stream) -> None:
        sock, stream.sock = stream.sock, None
        stream._more = False
        run = self._run
        if run is not None:
            run.ready.discard(stream)
        if sock is not None and run is not None:
            try:
                run.selector.unregister(sock)
            except (KeyError, ValueError, OSError):
                pass

    def _close_now(self, run: _Run, stream: Stream) -> None:
        if stream._done.is_set():
            return
        self._unwatch(stream)
        run.timers.discard(stream)
        stream.deadline = None
        try:
            self._call(stream.on_close)
        finally:
            with self._cond:
                self._open -= 1
                self._streams.discard(stream)
                self._cond.notify_all()
            stream._done.set()

    def _timeout(self, run: _Run) -> float | None:
        if run.ready or self._open == 0:
            return 0.0  # the last stream closed: to the top of the loop, where the thread ends
        deadlines = [stream.deadline for stream in run.timers if stream.deadline is not None]
        if not deadlines:
            return None
        return remaining(min(deadlines))

    def _fire_timers(self, run: _Run) -> None:
        now = time.monotonic()
        for stream in [s for s in run.timers if s.deadline is not None and s.deadline <= now]:
            run.timers.discard(stream)
            stream.deadline = None
            self._call(stream.on_timer)

    def _pump(self, run: _Run, stream: Stream) -> None:
        """Read what `stream`'s socket has, without blocking, at most
        `TURN_BYTES`; hand it over piece by piece. Work `on_data` kept back
        comes first: no more is read while some is left."""
        sock = stream.sock
        budget = TURN_BYTES
        if stream._more:
            stream._more = False
            if self._feed(run, stream, b""):
                return
        while sock is not None and stream.sock is sock:
            if budget <= 0:
                run.ready.add(stream)  # more may be there: after the others' turn
                return
            try:
                data = sock.recv(_RECV_SIZE)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                # Nothing more for now (a TLS record may be only partly
                # there). A send TLS wanted is done, as it wants to read:
                # wait for reading only, or select() returns at once forever.
                if stream._want_write:
                    self._want(run, stream, sock, write=False)
                break
            except ssl.SSLWantWriteError:
                # TLS must send before it can read on (rare: a key update
                # with a full send buffer): wait until the socket is writable.
                if not stream._want_write:
                    self._want(run, stream, sock, write=True)
                return
            except OSError as exc:
                self._unwatch(stream)
                self._call(stream.on_end, exc)
                return
            if stream._want_write and not self._want(run, stream, sock, write=False):
                return
            if not data:
                self._unwatch(stream)
                self._call(stream.on_end, None)
                return
            budget -= len(data)
            self._deaths = 0  # the reader works
            if self._feed(run, stream, data):
                return

    def _want(self, run: _Run, stream: Stream, sock: socket.socket, *, write: bool) -> bool:
        """Wait for the socket to be readable (and writable, if `write`).
        False when it could not be (a socket closed under the reader): the
        stream has ended then."""
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if write else 0)
        try:
            run.selector.modify(sock, events, stream)
        except (KeyError, ValueError, OSError) as exc:
            self._unwatch(stream)
            self._call(stream.on_end, exc if isinstance(exc, OSError) else OSError(str(exc)))
            return False
        stream._want_write = write
        return True

    def _feed(self, run: _Run, stream: Stream, data: bytes) -> bool:
        """Hand `data` to `on_data`. True when it kept work back: the
        stream's turn ends, and the next one starts with that work."""
        sock = stream.sock
        if self._call(stream.on_data, data) is True and sock is not None and stream.sock is sock:
            stream._more = True
            run.ready.add(stream)
            return True
        return False

    @staticmethod
    def _call(callback: Callable[..., Any], *args: Any) -> Any:
        try:
            return callback(*args)
        except Exception:  # an owner handles its own errors; this guards the other streams
            log.exception("a stream callback failed")
            return None

    # -- fork -----------------------------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """The parent's thread was not copied: forget it and every stream,
        and close this process's copies of the run's descriptors. No lock
        (its holder may not exist here), no change to the selector (an
        epoll set is shared with the parent)."""
        run = self._run
        self._cond = threading.Condition()
        self._open = 0
        self._commands = []
        self._run = self._ending = None
        self._streams = set()
        self._deaths = 0
        if run is not None:
            run.selector.close()  # closes the descriptor only: no epoll_ctl on the shared set
            for sock in (run.wake_r, run.wake_w):
                try:
                    _close_fd(sock.detach())
                except OSError:
                    pass


def _close_fd(fd: int) -> None:
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


#: The one reader of the process.
READER = SharedReader()
forking.in_child(READER._after_fork_in_child)


# -- a body's framing, pushed --------------------------------------------------------------------


class BodyFrames:
    """The body of one response, unframed as its bytes arrive (RFC 9112
    §6.3, §7.1): chunked, a Content-Length, or everything until the server
    closes (neither). The limits and errors are `http11`'s: a line longer
    than `MAX_LINE`, a bad chunk size, more than `MAX_HEADERS` trailer
    lines, a body cut short: `ResponseError`.

    Example::

        frames = BodyFrames(chunked=True)
        frames.feed(b"5\\r\\nhel")    # [b"hel"]
        frames.feed(b"lo\\r\\n0\\r\\n\\r\\n")  # [b"lo"]; frames.done is now True
    """

    __slots__ = ("done", "_chunked", "_left", "_state", "_line", "_trailers")

    def __init__(self, *, chunked: bool = False, length: int | None = None, done: bool = False) -> None:
        self.done = done or length == 0
        self._chunked = chunked
        #: Bytes left: of the body (Content-Length), or of the current chunk.
        self._left = length
        #: Chunked only: "size", "data", "crlf" (after a chunk's data) or "trailer".
        self._state = "size"
        self._line = bytearray()
        self._trailers = 0

    def feed(self, data: bytes) -> list[bytes]:
        """The body's bytes in `data` (bytes after the body's end are
        ignored, as the connection is not reused)."""
        if self.done or not data:
            return []
        if not self._chunked:
            if self._left is None:
                return [data]
            piece = data[:self._left]
            self._left -= len(piece)
            self.done = self._left == 0
            return [piece]
        pieces: list[bytes] = []
        pos, end = 0, len(data)
        while pos < end and not self.done:
            if self._state == "data":
                assert self._left is not None
                take = min(self._left, end - pos)
                pieces.append(data[pos:pos + take])
                pos += take
                self._left -= take
                if self._left == 0:
                    self._state = "crlf"
                continue
            newline = data.find(b"\n", pos)
            stop = end if newline < 0 else newline + 1
            self._line += data[pos:stop]
            pos = stop
            if len(self._line) > MAX_LINE:
                raise ResponseError(f"a response line is longer than {MAX_LINE} bytes")
            if newline >= 0:
                line, self._line = bytes(self._line), bytearray()
                self._on_line(line)
        return pieces

    def _on_line(self, line: bytes) -> None:
        if self._state == "size":
            size = line.split(b";", 1)[0].strip()
            if not size or not all(c in b"0123456789abcdefABCDEF" for c in size):
                raise ResponseError(f"invalid chunk size line {line[:40]!r}")
            self._left = int(size, 16)
            self._state = "data" if self._left else "trailer"
        elif self._state == "crlf":
            if line not in (b"\r\n", b"\n"):
                raise ResponseError("a chunk is not followed by CRLF")
            self._state = "size"
        else:  # trailer fields are not used
            if line in (b"\r\n", b"\n"):
                self.done = True
                return
            self._trailers += 1
            if self._trailers > MAX_HEADERS:
                raise ResponseError(f"the response has more than {MAX_HEADERS} trailer fields")

    def end(self) -> None:
        """The connection ended: `ResponseError` unless the body may end
        there (it did, or it runs until the server closes)."""
        if self.done:
            return
        if self._chunked:
            if self._state == "trailer":
                self.done = True  # as http11: the end of the connection ends the trailers
                return
            raise ResponseError("the response body ended inside a chunk")
        if self._left is not None:
            raise ResponseError(f"the response body ended {self._left} bytes short")
        self.done = True


def take_body(response: Response) -> tuple[BodyFrames, bytes]:
    """Take the body of a response whose head was read over: how it is
    framed, and the bytes of it (raw, framing included) the reader already
    received with the head. The response reads nothing more after this.

    `http11.Response` reads in blocking calls only and has no public way to
    hand its body over, so this reads its reader's buffer and framing state
    (set by `begin()`); tests pin that down against `Response` itself."""
    fp = response._fp
    if fp is None or response._done:
        return BodyFrames(done=True), b""
    first = fp._buf[fp._pos:]
    fp._buf, fp._pos = b"", 0
    response.close()
    if response._chunked:
        return BodyFrames(chunked=True), first
    return BodyFrames(length=response._length), first
