"""Writing to the stdio server's stdin: each message whole, or never again.

What it owns: the write end of the server's stdin, the write lock, the
hand-shake that lets small messages skip that lock, and the rule that half
a message is never followed by another (`_broken`). It also owns closing
stdin, since only here is it known that no writer is in it. What it must
not know: JSON-RPC (it writes bytes), the process (`ServerProcess` asks it
to close stdin and nothing else), or how a failure is explained and
reported: the transport gives `explain` (a write failed: the server's exit
code and last stderr lines, found by the write's deadline) and `on_broken`
(fail the connection).

Lock discipline. On POSIX the pipe is non-blocking, so a server that does
not read cannot hold a caller past its deadline: a message that cannot
start by then is not written (`write()` says False), one cut off by then
breaks the writer. A message of at most PIPE_BUF bytes is written without
any lock (`_write_alone`, where the platform keeps the promise that such a
write is whole and unmixed); any other write, and the close of stdin, takes
the write lock and first keeps the lone writers out (`_exclude_alone`).
Whoever waits for the lock, or for room in the pipe, wakes every
`waiting.MAIN_THREAD_SLICE`, on any thread: to see that `begin_close()`
was called (and, on the main thread, to let a simulated Ctrl-C land). On
Windows, where pipes cannot be polled, every write takes the lock and
blocks until the server reads.
"""

from __future__ import annotations

import array
import os
import select
import sys
import threading
import time
from typing import IO, Callable

from ..errors import ConnectionClosed, TransportError, copy_error
from ..waiting import MAIN_THREAD_SLICE, expired, remaining

#: Whether a message of at most `_ATOMIC_WRITE` bytes is written without the
#: write lock (see `StdinWriter._write_alone`): on POSIX, where one write
#: of at most PIPE_BUF bytes to a pipe is never split nor mixed with another
#: writer's (on systems whose pipes are known to keep that promise), and
#: only with the GIL, whose order makes the hand-shake with the lock's
#: holders safe (a free-threaded build takes the lock).
_LOCK_FREE_WRITES = sys.platform.startswith(("linux", "darwin", "freebsd", "openbsd", "netbsd"))
if _LOCK_FREE_WRITES and hasattr(sys, "_is_gil_enabled"):  # 3.13 on: the build decides, not the moment
    import sysconfig

    _LOCK_FREE_WRITES = not sysconfig.get_config_var("Py_GIL_DISABLED")
_ATOMIC_WRITE = getattr(select, "PIPE_BUF", 512)


class StdinWriter:
    """Writes whole messages to the server's stdin from any thread.

    Example::

        writer = StdinWriter(proc.stdin, explain=exit_error, on_broken=fail)
        if not writer.write(b'{"jsonrpc":"2.0","method":"x"}\\n', deadline):
            ...  # the deadline passed first: nothing was written
    """

    def __init__(self, stdin: IO[bytes], *, explain: Callable[[str, float | None], TransportError],
                 on_broken: Callable[[TransportError], None]) -> None:
        if sys.platform != "win32":
            # Writes then never block: a deadline, or close(), can end a
            # write to a server that stopped reading (and a lone write,
            # see `_write_alone`, writes all or nothing). Set before the
            # writer exists, so that no write ever sees the pipe blocking.
            os.set_blocking(stdin.fileno(), False)
        self._stdin = stdin
        self._explain = explain
        self._on_broken = on_broken
        self._write_lock = threading.Lock()
        # Writers without the lock (small messages, see `_write_alone`): a
        # token each while they write; the lock's holder sets `_exclusive`
        # and waits for none to be left before it writes or closes stdin.
        self._alone: set[object] = set()
        self._exclusive = False
        self._closing = False
        #: Set once a message was cut off: nothing may be written after it.
        self._broken: TransportError | None = None

    def fileno(self) -> int | None:
        """stdin's descriptor (None once closed): a poll on it learns when
        no process is left to read it."""
        try:
            return self._stdin.fileno()
        except ValueError:
            return None

    def unread(self) -> int:
        """How many bytes written to stdin the server has not read yet, as
        the pipe says (`FIONREAD` on its write end, which Linux answers);
        0 where it cannot say."""
        try:
            import fcntl  # not on Windows
            import termios
        except ImportError:
            return 0
        held = array.array("i", [0])
        try:
            fcntl.ioctl(self._stdin.fileno(), termios.FIONREAD, held, True)
        except (OSError, ValueError):
            return 0
        return held[0]

    def write(self, data: bytes, deadline: float | None) -> bool:
        """Write `data` (one whole message) before `deadline` (a
        `time.monotonic()` value; None waits as long as it takes). False
        when it passed before any of it could be written: nothing was,
        and the writer stays usable. `ConnectionClosed` once
        `begin_close()` was called; a write cut off (deadline, interrupt,
        close, a dead server) breaks the writer for good."""
        if _LOCK_FREE_WRITES and len(data) <= _ATOMIC_WRITE and not self._closing:
            try:
                fd = self._stdin.fileno()
            except ValueError:  # closed by close() since: the locked path says so
                fd = -1
            if fd >= 0 and self._write_alone(fd, data, deadline):
                return True
        if not self._lock_for_writing(deadline):
            return False
        try:
            if not self._exclude_alone(deadline):
                return False
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            if self._broken is not None:
                raise copy_error(self._broken)
            if sys.platform == "win32":
                try:
                    self._stdin.write(data)
                    self._stdin.flush()
                except (ValueError, OSError) as exc:
                    raise self._explain(f"cannot write to the server: {exc}", deadline) from exc
                return True
            return self._write_whole(self._stdin.fileno(), data, deadline)
        finally:
            self._exclusive = False
            self._write_lock.release()

    def begin_close(self) -> None:
        """The transport is closing: a write waiting for the lock or for
        room gives up within `MAIN_THREAD_SLICE`, and none starts any more."""
        self._closing = True

    def close_stdin(self, until: float) -> bool:
        """Close the server's stdin with no writer in it: the write lock
        taken and the lone writers kept out (see `_write_alone`), both by
        `until`. False (stdin left open) when that could not be had."""
        if not self._write_lock.acquire(timeout=remaining(until)):
            return False
        try:
            if not self._exclude_alone(until):
                return False
            try:
                self._stdin.close()
            except (OSError, ValueError):
                pass
            return True
        finally:
            self._exclusive = False
            self._write_lock.release()

    def _write_alone(self, fd: int, data: bytes, deadline: float | None) -> bool:
        """Write a message of at most PIPE_BUF bytes without the write lock:
        True once written; False when it must take the lock (a holder of the
        lock is writing or closing, or the pipe has no room for all of it).

        At 8 and 32 threads the write lock was the convoy of the stdio call:
        its holder lets go of the GIL in `os.write` and must wait for it
        again before it can let go of the lock, while every other writer
        sleeps on the lock (a third of the samples holding the GIL were
        waits for it). One `write()` of at most PIPE_BUF bytes to a pipe is
        whole and unmixed (POSIX), and on a non-blocking pipe it writes all
        or nothing, so such a message needs no lock against the others like
        it; only against a holder of the lock, who may be writing a larger
        message in pieces or closing stdin. Hence the hand-shake: a writer
        puts a token in `_alone`, then looks at `_exclusive`; the holder
        sets `_exclusive`, then waits for `_alone` to be empty (see
        `_exclude_alone`). Whichever comes second sees the other."""
        token = object()
        alone = self._alone
        failure: OSError | None = None
        try:
            alone.add(token)
            if self._exclusive or self._closing or self._broken is not None:
                return False
            try:
                written = os.write(fd, data)
            except BlockingIOError:
                return False  # no room for all of it: nothing was written
            except OSError as exc:  # EPIPE: the server closed its stdin or exited
                failure = exc
                written = 0
        finally:
            alone.discard(token)
        if failure is not None:
            error = self._explain(f"cannot write to the server: {failure}", deadline)
            if isinstance(error, ConnectionClosed):
                error.may_have_executed = False  # nothing of it left: the client may send it elsewhere
            try:
                raise error from failure
            finally:
                del error, failure  # their tracebacks hold this frame: no reference cycle through it
        if written != len(data):  # pragma: no cover - a pipe never splits such a write
            cut = ConnectionClosed(f"a message to the server was cut off after {written} of {len(data)} bytes; "
                                   "the connection cannot be used any more")
            self._break(cut)
            raise cut
        return True

    def _exclude_alone(self, deadline: float | None) -> bool:
        """With the write lock held: keep writers without the lock out, and
        wait for those writing now (`_write_alone`). They never block (a
        non-blocking pipe), so this is a moment; False if `deadline` passed
        first (the caller releases the lock either way, and clears
        `_exclusive` when it does)."""
        self._exclusive = True
        if not self._alone:
            return True
        spin_until = time.monotonic() + 0.001
        while self._alone:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return False
            # sleep(0) lets them run (each needs the GIL to finish); past a
            # millisecond, one is held up (a signal handler on its own thread
            # closing, say): wait without burning a core.
            time.sleep(0 if now < spin_until else 0.0005)
        return True

    def _lock_for_writing(self, deadline: float | None) -> bool:
        """Take the write lock, waiting at most until `deadline`: False if
        it passed. Waits in slices, so close() and Ctrl-C are seen."""
        if self._write_lock.acquire(blocking=False):  # the common case: nobody writing
            return True
        while True:
            wait = MAIN_THREAD_SLICE  # on any thread, not only the main one: a close is seen within it
            if deadline is not None:
                wait = min(wait, remaining(deadline))
            if self._write_lock.acquire(timeout=wait):
                return True
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            if expired(deadline):
                return False

    def _write_whole(self, fd: int, data: bytes, deadline: float | None) -> bool:
        """Write `data` to the non-blocking `fd` (with the write lock held),
        waiting for room until `deadline`: False if it passed before any of
        it was written. A message cut off (deadline, interrupt, close, a
        dead server) breaks the writer for good."""
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                try:
                    written += os.write(fd, view[written:])
                    continue
                except BlockingIOError:
                    pass
                except OSError as exc:  # EPIPE: the server closed its stdin or exited
                    error = self._explain(f"cannot write to the server: {exc}", deadline)
                    if written == 0 and isinstance(error, ConnectionClosed):
                        # Nothing of it left: the client may send it elsewhere.
                        error.may_have_executed = False
                    try:
                        raise error from exc
                    finally:
                        del error  # (as in `_write_alone`)
                if self._closing:
                    raise ConnectionClosed("the connection is closed")
                wait = MAIN_THREAD_SLICE  # (on any thread, as in `_lock_for_writing`)
                if deadline is not None:
                    left = remaining(deadline)
                    if left <= 0:
                        if written == 0:
                            return False
                        raise ConnectionClosed(
                            f"the server did not read its input: a message was cut off after {written} of "
                            f"{len(data)} bytes at the call's deadline; the connection cannot be used any more")
                    wait = min(wait, left)
                _wait_writable(fd, wait)
        except BaseException as exc:
            if 0 < written < len(data):
                self._break(exc if isinstance(exc, TransportError) else ConnectionClosed(
                    f"a message to the server was cut off after {written} of {len(data)} bytes "
                    f"({type(exc).__name__}); the connection cannot be used any more"))
            raise
        return True

    def _break(self, error: TransportError) -> None:
        """Half a message went out: nothing may follow it. Fail the
        connection (`on_broken`: unless it is closing anyway). What is kept
        is a copy without a cause: `error` is raised, and its traceback (or
        its cause's) holds the frames that hold this writer."""
        kept = copy_error(error)
        kept.__cause__, kept.__suppress_context__ = None, True
        self._broken = kept
        self._on_broken(kept)


def _wait_writable(fd: int, seconds: float) -> None:
    """Wait at most `seconds` for room in the pipe `fd` (POSIX only: on
    Windows writes block and never come here)."""
    if sys.platform == "win32":
        raise NotImplementedError("pipes cannot be polled on Windows")
    poller = select.poll()  # not select(): it fails on descriptors above 1023
    poller.register(fd, select.POLLOUT)
    poller.poll(seconds * 1000)
