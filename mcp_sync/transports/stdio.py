"""The stdio transport: a server subprocess, one JSON-RPC message per line.

Owns one thread, the *reader*: it waits on the server's stdout and stderr
with `poll()`, parses each stdout line and hands the message to the sink,
and queues each stderr line for where `Stdio(stderr=)` says (it never runs
user code and never writes), keeping the last lines so that a crash can
explain itself. The lines reach their destination (the
`mcp_sync.server.stderr` logger by default, see `stderr.StderrLines`) on
the thread of a `stderr.Handoff`, which runs while there are lines and
ends when idle: an idle connection costs one thread. A second thread, the
*stderr drain*, reads stderr instead when `stderr=` is a callable (a slow
one then holds up the server's stderr writes, never the reader) and on
Windows, where pipes cannot be selected.

Two collaborators own the rest, each behind a few public methods:
`stdio_process.ServerProcess` the child process (its own process group, so
that the SIGINT of Ctrl-C or Jupyter's "Interrupt kernel" reaches the
client only, and the staged shutdown of that group), and
`stdio_writer.StdinWriter` the server's stdin (writers from any thread,
each message whole or the connection fails; on POSIX non-blocking, so that
a server that does not read cannot hold a caller past its deadline).

When stdout ends, or a line is not JSON or is longer than `max_line_bytes`,
the reader reports one `TransportError` to the sink and stops; the engine
fails every pending call with it. `close()` follows the spec's shutdown
order, for the server's whole process group: close stdin, wait, SIGTERM,
wait, SIGKILL; it returns within `3 x shutdown_timeout + 1 s` whatever
the server's children do (a pipe still held by a process that left the group
is left to the reader threads, which close it when they end).

Lock discipline: `start()` and `close()` share `_close_lock`, so a close
racing a (re)start either prevents it or stops what it started. `_closing`
is written under it and read without it (a flag: readers and writers only
look). `_pipes_lock` settles who closes stdout and stderr (see
`_pipe_done`); `_sent_lock` guards `bytes_sent`; the writer has its own.
In a child after `os.fork()`, `discard()` only drops the child's copies of
the pipes: the server stays the parent's.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import sys
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from ..errors import (
    ConnectionClosed,
    InvalidMessage,
    MessageTooLarge,
    RequestTimeout,
    ServerExited,
    TransportError,
)
from ..options import check_flag
from ..protocol import jsonrpc
from ..waiting import MAIN_THREAD_SLICE, check_seconds, deadline_in, earliest, remaining
from .base import MessageSink, Target, Transport
from .stderr import Handoff, StderrLines, StderrOption, check_option

# `subprocess` (with `signal`, `selectors`, `locale`) and `shlex` load when a
# server is started, not at `import mcp_sync`: some 5 ms of it, which a
# program that never runs a stdio server would pay for nothing. So do the
# collaborators, `stdio_process` (which imports them) and `stdio_writer`.
if TYPE_CHECKING:
    import subprocess

    from .stdio_process import ServerProcess
    from .stdio_writer import StdinWriter

log = logging.getLogger("mcp_sync.transport.stdio")

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
STDERR_TAIL_LINES = 20

#: How long `close()` waits for the reader threads once the server's group
#: is gone (after its three `shutdown_timeout` steps at most).
_JOIN_SLACK = 0.5
#: How long `close()` then waits for a reader thread whose pipes have all
#: ended (it has only its last steps left, but a loaded machine may not run
#: them within `_JOIN_SLACK`).
_ENDING_SECONDS = 2.0

#: Bytes asked of a pipe at once by the reader (a pipe holds 64 KiB on Linux).
_READ_SIZE = 65536
#: The longest stderr line forwarded whole; a longer one comes in pieces.
_STDERR_LINE = 65536
#: How long the reader keeps reading stderr after stdout ended, before it
#: reports the server's exit: its last words explain the exit.
_LAST_WORDS_SECONDS = 1.0
#: How often the reader looks whether a full stderr hand-off has room again.
_PAUSED_MS = 20
#: How long the reader keeps reading stdout after the server process exited
#: without stdout ending (a process it started holds the pipe), for the
#: answers it wrote before it exited, before it reports the exit.
_AFTER_EXIT_SECONDS = 0.2
#: How long the report of a server that exited waits for its last stderr
#: lines to reach their destination (a hanging log handler cannot hold it up longer).
_LAST_WORDS_FLUSH = 0.5
#: The least `close()` gives the stderr hand-off to log the lines it holds
#: before it stops forwarding them (counted in a warning instead).
_HANDOFF_JOIN_SECONDS = 0.5


class Stdio(Target):
    """Target a server program speaking MCP on its stdin and stdout.

    Example::

        client = mcp_sync.connect(Stdio("python", ["server.py"], env={"TOKEN": "x"}))

    `env` is added to (not substituted for) this process's environment unless
    `inherit_env=False`. `max_line_bytes` bounds one incoming message;
    `shutdown_timeout` is how long `close()` waits at each step of shutdown
    (end of input, SIGTERM, SIGKILL), so it returns within three times that
    plus a second.

    The server runs in a process group (POSIX: a session) of its own, so
    Ctrl-C in a terminal or Jupyter's "Interrupt kernel" interrupts the
    client's call, not the server, and `close()` ends whatever the server
    started along with it. The server has no controlling terminal: it
    cannot prompt on `/dev/tty`.

    `stderr` says where the server's stderr lines go: ``"log"`` (the
    ``mcp_sync.server.stderr`` logger at INFO), ``"print"`` (each line,
    prefixed with the program's name, to `sys.stderr`), or a callable given
    each line. A callable runs on a stderr thread of its own (never the
    thread that reads responses; without a callable, that one thread reads
    both pipes): keep it quick, as the server may block writing to stderr
    while it runs; an exception it raises is logged and
    the next line still reaches it. The default is ``"log"``, except in a
    Jupyter kernel, where nobody configured logging: there it is
    ``"print"`` at most 20 lines a second after a burst of 100, the lines
    beyond that counted in a line "… N lines of server stderr not shown"
    before the next line printed or when stderr ends (and still sent to
    the logger). Whatever the choice, the last lines are kept for the
    error that reports a server's exit.

    Args:
        command: The program to run.
        args: Its arguments.
        env: Variables to set for the server (added to this process's
            environment unless `inherit_env=False`).
        inherit_env: Start the server from this process's environment.
        cwd: The server's working directory; None: this process's.
        max_line_bytes: The most one incoming message may hold.
        shutdown_timeout: Seconds `close()` waits at each step of shutdown.
        stderr: ``"log"``, ``"print"``, a callable given each line, or None
            for the default described above.

    Attributes:
        command (str): The program to run (looked up on `PATH` as
            `subprocess` does).
        args (list[str]): Its arguments, a list of strings.
        env (dict[str, str] | None): Variables to set for the server, or
            None for none beyond what it inherits.
        inherit_env (bool): Whether the server starts from this process's
            environment (True) or from `env` alone (False).
        cwd (str | os.PathLike[str] | None): The server's working
            directory, or None for this process's.
        max_line_bytes (int): The most one incoming message (one line) may
            hold (16 MiB by default); a longer one fails the connection.
        shutdown_timeout (float): Seconds `close()` waits at each step of
            shutdown.
        stderr (str | Callable[[str], object] | None): Where the server's
            stderr lines go, as given: `"log"`, `"print"`, a callable, or
            None for the default described above.

    Raises:
        TypeError: `command` is not a non-empty string, `args` is a string
            or holds something that is not, `env` is not a mapping of
            strings, `inherit_env` is not a bool, `cwd` is not a path,
            `max_line_bytes` is not an int, `shutdown_timeout` is not a
            number (a bool or a string), or `stderr` is none of the above.
        ValueError: `max_line_bytes` is not positive, `shutdown_timeout`
            is negative, NaN, infinite or longer than a thread can wait
            (`waiting.LONGEST_WAIT`), or `stderr` is a string other than
            ``"log"`` and ``"print"``.
    """

    kind = "stdio"
    """Always "stdio" (see `Target.kind` and `Transport.kind`)."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        cwd: str | os.PathLike[str] | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        shutdown_timeout: float = 2.0,
        stderr: StderrOption = None,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise TypeError("Stdio() needs a command string")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise TypeError("Stdio() args must be a sequence of strings")
        if env is not None and not (isinstance(env, Mapping)
                                    and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise TypeError("Stdio() env must be a mapping of strings to strings")
        check_flag("inherit_env", inherit_env)
        if cwd is not None and not isinstance(cwd, (str, bytes, os.PathLike)):
            raise TypeError(f"Stdio() cwd must be a path, not {cwd!r}")
        # What no program can be given (the system takes C strings), refused
        # here rather than as a bare error of the first connect().
        for what, texts in (("command", [command]), ("args", args), ("env", (env or {}).values()),
                            ("cwd", [] if cwd is None else [os.fsdecode(cwd)])):
            if any("\0" in text for text in texts):
                raise ValueError(f"Stdio() {what} must not contain a NUL character")
        if env is not None and any(not name or "=" in name or "\0" in name for name in env):
            raise ValueError("Stdio() env names must be non-empty and contain neither '=' nor a NUL character")
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int):
            raise TypeError(f"max_line_bytes must be an integer (a number of bytes), not {max_line_bytes!r}")
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be a positive integer, not {max_line_bytes!r}")
        # Finite: `close()` promises to return within three of these steps.
        check_seconds("shutdown_timeout", shutdown_timeout, allow_none=False, allow_zero=True)
        check_option(stderr)
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.inherit_env = inherit_env
        self.cwd = cwd
        self.max_line_bytes = max_line_bytes
        self.shutdown_timeout = shutdown_timeout
        self.stderr = stderr

    def open(self) -> Transport:
        """A new stdio transport: its `start()` starts the server process."""
        return StdioTransport(self)

    def server_key(self) -> Hashable:
        """The command line, `cwd` and environment: the same program run the
        same way is taken to be the same server."""
        env = None if self.env is None else tuple(sorted(self.env.items()))
        cwd = None if self.cwd is None else os.fspath(self.cwd)
        return ("stdio", self.command, tuple(self.args), cwd, env, self.inherit_env)

    def __repr__(self) -> str:
        return f"Stdio({self.command!r}, {self.args!r})"


class StdioTransport(Transport):

    kind = "stdio"
    """Always "stdio" (see `Target.kind` and `Transport.kind`)."""
    cancels_by_notification = True

    def __init__(self, target: Stdio) -> None:
        self._target = target
        self._process: ServerProcess | None = None
        # Made with the process, dropped by `discard()`: None means nothing
        # may be written (not started, or a child after a fork).
        self._writer: StdinWriter | None = None
        self._sink: MessageSink | None = None
        self._sent_lock = threading.Lock()  # bytes_sent, from writers with and without the write lock
        self._close_lock = threading.Lock()
        self._closing = False
        self._closed = False
        self._reader: threading.Thread | None = None
        self._drain: threading.Thread | None = None
        # Set when the server's stderr has ended (read to EOF, by the drain or
        # the reader): an exit explained from another thread waits for it, so
        # that the last words the process wrote are in the error.
        self._stderr_ended = threading.Event()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._handoff: Handoff | None = None  # forwards stderr lines the reader read
        # Who closes stdout and stderr: `close()`, unless it gave up waiting
        # for the thread reading it (a process outside the server's group
        # holds the pipe); then that thread does, when it ends.
        self._pipes_lock = threading.Lock()
        self._pipes_left = False
        self._pipes_done: list[IO[bytes]] = []

    # -- lifecycle ---------------------------------------------------------

    def start(self, sink: MessageSink) -> None:
        from .stdio_process import ServerProcess
        from .stdio_writer import StdinWriter

        target = self._target
        env = None
        if target.env is not None or not target.inherit_env:
            env = dict(os.environ) if target.inherit_env else {}
            env.update(target.env or {})
        # Under the close lock: a close() from another thread either comes
        # first (and nothing is started) or waits and then stops what was
        # started; a process is never started after close() returned.
        with self._close_lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            process = ServerProcess.spawn([target.command, *target.args], env=env, cwd=target.cwd)
            stdin = process.popen.stdin
            assert stdin is not None
            self._process = process
            self._sink = sink
            # Published last: a send finds the process (and its exit code,
            # should a write fail) and a non-blocking stdin.
            self._writer = StdinWriter(stdin, explain=self._exit_error,
                                       on_broken=lambda error: self._report(sink, error))
            name = os.path.basename(target.command)
            if sys.platform == "win32" or callable(target.stderr):
                process.close_exit_watch()  # (only the poll loop below watches the process)
                self._drain = threading.Thread(target=self._drain_stderr, name=f"mcp-sync-stderr-{name}",
                                               daemon=True)
                self._reader = threading.Thread(target=self._read_stdout, name=f"mcp-sync-reader-{name}",
                                                daemon=True)
                self._drain.start()
            else:
                self._reader = threading.Thread(target=self._read_both, name=f"mcp-sync-reader-{name}", daemon=True)
            self._reader.start()

    def discard(self) -> None:
        """In a child after `os.fork()`: close this process's copies of the
        pipes and nothing else. The server is the parent's: no EOF is
        written, no signal sent, no thread joined (none was copied). The
        writer goes, with the locks a parent thread may have held at the
        fork: the child writes nothing more."""
        self._closing = self._closed = True
        self._writer = None
        self._sent_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._pipes_lock = threading.Lock()
        process, self._process = self._process, None
        if process is not None:
            process.forget()

    @property
    def _proc(self) -> subprocess.Popen[bytes] | None:
        """The server's `Popen`, for its pipes (None before `start()` and
        after `discard()`)."""
        return self._process.popen if self._process is not None else None

    @property
    def close_budget(self) -> float:  # type: ignore[override]
        """`close()`'s bound: three shutdown steps, then the readers' join."""
        return 3 * self._target.shutdown_timeout + 1.0 + _JOIN_SLACK + _ENDING_SECONDS

    def close(self) -> None:
        """End the server and everything it started (its process group),
        join the reader threads, close the pipes. Returns within
        `3 x shutdown_timeout + 1 s`, whatever the server's children do.
        If interrupted (Ctrl-C), the group is killed before the interrupt
        propagates; a later `close()` finishes the rest."""
        with self._close_lock:
            self._closing = True
            writer = self._writer
            if writer is not None:
                writer.begin_close()  # a writer waiting for room lets go within a slice
            if self._closed:
                return
            process = self._process
            if process is not None and writer is not None:
                try:
                    process.stop(self._target.shutdown_timeout, writer.close_stdin)
                except BaseException:
                    process.kill()
                    raise
                # The group is gone: the pipes end at once unless a process
                # that left the group holds them, and then waiting is useless.
                self._join_readers(deadline_in(_JOIN_SLACK))
                self._close_pipes(process.popen, writer)
                if self._reader is None or not self._reader.is_alive():
                    process.close_exit_watch()  # (else the reader still watching closes it as it ends)
            self._closed = True

    def _join_readers(self, until: float) -> None:
        """Wait (until `until`) for the reader and the stderr drain, which end
        once every holder of the pipes is gone."""
        for thread in (self._reader, self._drain):
            if thread is not None and thread is not threading.current_thread():
                thread.join(remaining(until, at_least=0.05))
        if self._handoff is not None:  # the last lines, forwarded after the reader ended
            self._handoff.stop(remaining(until, at_least=_HANDOFF_JOIN_SECONDS))

    def _close_pipes(self, proc: subprocess.Popen[bytes], writer: StdinWriter) -> None:
        writer.close_stdin(deadline_in(2 * MAIN_THREAD_SLICE))  # if the polite step could not (two writers' wakes)
        # Without a drain thread, the reader reads stderr too.
        drain = self._drain if self._drain is not None else self._reader
        readers = ((proc.stdout, self._reader), (proc.stderr, drain))
        with self._pipes_lock:
            done = list(self._pipes_done)
        self._join_ended_readers(readers, done)
        with self._pipes_lock:
            self._pipes_left = True  # from now on a thread that ends closes its own pipe
            done = list(self._pipes_done)
        for stream, thread in readers:
            if thread is None or any(stream is d for d in done):
                _close_quietly(stream)
            elif thread is not threading.current_thread():
                log.warning("a process that left the process group of server %s still holds its %s; "
                            "the pipe is closed when that process ends", self._target.command,
                            "stdout" if stream is proc.stdout else "stderr")

    def _join_ended_readers(self, readers: tuple[tuple[IO[bytes] | None, threading.Thread | None], ...],
                            done: list[IO[bytes]]) -> None:
        """Wait (bounded) for each reader thread (of `readers`, its pipes and
        their threads) whose pipes have all ended, or whose writers are all
        gone (what is left in them is read at once): it is about to end,
        and must not outlive `close()`. One whose pipe a stray process still
        holds is not waited for (it ends with that process)."""
        def ended(stream: IO[bytes] | None) -> bool:
            return stream is None or any(stream is d for d in done) or _hung_up(stream)

        until = deadline_in(_ENDING_SECONDS)
        for thread in {thread for _, thread in readers}:
            if thread is None or thread is threading.current_thread() or not thread.is_alive():
                continue
            if all(ended(stream) for stream, reading in readers if reading is thread):
                thread.join(remaining(until))
                if thread.is_alive():
                    log.warning("the thread %s of server %s did not end within %.3g s of its pipes' end",
                                thread.name, self._target.command, _ENDING_SECONDS)

    def _pipe_done(self, stream: IO[bytes] | None) -> None:
        """Called by the reader and the drain as they end."""
        if stream is None:
            return
        with self._pipes_lock:
            self._pipes_done.append(stream)
            left = self._pipes_left
        if left:  # close() has returned without this pipe: it is ours to close
            _close_quietly(stream)

    # -- sending -------------------------------------------------------------

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None, *,
             deadline: float | None = None) -> None:
        """Write one message as one line; messages from many threads are
        written one at a time, each whole.

        `deadline` (a `time.monotonic()` value; None waits as long as it
        takes) bounds the wait for a server that does not read its stdin:
        `RequestTimeout` when it passes before the message could start
        (nothing was written, the connection stays usable); `ConnectionClosed`
        when it passes mid-message, which fails the connection, as does an
        interrupt mid-message. Any write ends once `close()` begins. On
        Windows a write waits until the server reads and `deadline` is not
        applied.
        """
        data = jsonrpc.encode(message) + b"\n"
        writer = self._writer
        if writer is None:
            raise ConnectionClosed("the stdio transport is not started")
        if not writer.write(data, deadline):
            raise _no_room(message)
        with self._sent_lock:
            self.bytes_sent += len(data)

    def exchange(
        self, message: Mapping[str, Any], headers: Mapping[str, str] | None, deadline: float | None,
    ) -> float:
        """Write a caller's request under the call's deadline (see `send()`).
        A request that could not start by then was not sent: this returns,
        and the caller's own wait reports the timeout."""
        try:
            self.send(message, headers, deadline=deadline)
        except RequestTimeout:
            pass
        return 0.0


    # -- reading ---------------------------------------------------------------

    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None
        try:
            self._read_lines(proc)
        except Exception as exc:
            self._reader_failed(exc)
        finally:
            self._pipe_done(proc.stdout)

    def _reader_failed(self, exc: Exception) -> None:
        """A bug or a failure nobody foresaw in a reader: it must fail the
        connection (every waiting call gets it), never end the reader
        silently with the connection still looking healthy."""
        log.error("the stdio reader failed unexpectedly", exc_info=True)
        sink = self._sink
        if not self._closing and sink is not None:
            sink.transport_failed(ConnectionClosed(
                f"reading the server's stdout failed unexpectedly: {type(exc).__name__}: {exc}"))

    def _read_lines(self, proc: subprocess.Popen[bytes]) -> None:
        sink = self._sink
        assert proc.stdout is not None and sink is not None
        limit = self._target.max_line_bytes
        readline = proc.stdout.readline
        error: TransportError
        while True:
            try:
                line = readline(limit + 1)
                self.bytes_received += len(line)  # the reader's own counter
            except (OSError, ValueError) as exc:
                error = ConnectionClosed(f"reading the server's stdout failed: {exc}")
                break
            if not line:
                error = self._exit_error("the server closed its stdout")
                break
            if len(line) > limit and not line.endswith(b"\n"):
                error = MessageTooLarge(
                    f"the server sent a line longer than max_line_bytes={limit}", limit=limit
                )
                break
            if line.isspace():
                continue
            if not line.endswith(b"\n"):
                # EOF inside a message: the server went away mid-write; say
                # so (exit code, stderr) rather than blame the half line.
                error = self._exit_error("the server exited in the middle of a message")
                break
            bad = self._take(line, sink)
            if bad is not None:
                error = bad
                break
        if not self._closing:
            sink.transport_failed(error)

    def _take(self, line: bytes, sink: MessageSink) -> TransportError | None:
        """One whole stdout line (with its LF, within the limit): its message
        delivered, or the error that ends reading."""
        try:
            message = jsonrpc.parse(line)  # one message, or a batch for the engine to split
        except InvalidMessage as exc:
            return self._not_jsonrpc(exc)
        sink.deliver(message)
        return None

    def _not_jsonrpc(self, exc: InvalidMessage) -> InvalidMessage:
        return InvalidMessage(f"the server wrote a line that is not JSON-RPC: {exc}{self._tail_text()}")

    def _read_both(self) -> None:
        """The reader of a connection without a drain thread: stdout and
        stderr, whichever has bytes, until both ended."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        # The lines go to their destination (logging, a print: code of the
        # user's) on a thread of the hand-off's, never waited for here.
        lines = self._handoff = Handoff(StderrLines(self._target.stderr, self._target.command), self._target.command)
        # Taken now: close() may close a pipe once it is done.
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        # poll(), not a `selectors` selector: its Python layer costs about
        # 5 us per wake-up, a tenth of a call; nor select(), which fails on
        # descriptors above 1023.
        poller = select.poll()
        watched = {out_fd, err_fd}
        for fd in watched:
            poller.register(fd, select.POLLIN)
        # The process itself, readable once it exited: a process it started
        # may hold its stdout, which then never ends (Linux 5.3+; elsewhere
        # the exit is known when stdout ends).
        process = self._process
        exit_fd = process.exit_fd if process is not None else None
        if exit_fd is not None:
            poller.register(exit_fd, select.POLLIN)
        try:
            self._poll_loop(proc, poller, watched, lines, out_fd, err_fd, exit_fd)
        except Exception as exc:
            self._reader_failed(exc)
        finally:
            if process is not None:
                process.close_exit_watch()
            left = watched  # the pipes not done yet (after a failure nobody foresaw)
            if err_fd in left:
                lines.finish()
            for stream, fd in ((proc.stdout, out_fd), (proc.stderr, err_fd)):
                if fd in left:
                    self._pipe_done(stream)

    def _poll_loop(self, proc: subprocess.Popen[bytes], poller: select.poll, watched: set[int], lines: Handoff,
                   out_fd: int, err_fd: int, exit_fd: int | None) -> None:
        """Read whichever pipe has bytes (`watched`: the pipes not ended),
        until both ended; stop reading stdout at the first error, or
        `_AFTER_EXIT_SECONDS` after the process exited (`exit_fd` readable)
        with its stdout still open and no process left to read its stdin."""
        sink = self._sink
        assert sink is not None
        # A sink may take the messages of one read together (the engine's
        # `Connection.deliver_all`); else they go one by one.
        deliver_all = getattr(sink, "deliver_all", None)
        limit = self._target.max_line_bytes
        parts: list[bytes] = []  # the stdout line begun, in pieces
        size = 0  # ... and its length
        err_rest = b""  # the stderr line begun
        wait, read = poller.poll, os.read
        # Once stdout ended: what to report, after stderr ended or at this time.
        ended: str | None = None
        report_at = exit_by = 0.0
        paused = False  # stderr is not read while its hand-off is full (see `Handoff.full`)
        in_fd: int | None = None  # stdin's write end, watched once the process exited
        cut_at = 0.0  # when to stop waiting for stdout to end, the process having exited
        while True:
            due = report_at if ended is not None else None
            if cut_at and (due is None or cut_at < due):
                due = cut_at
            if due is None:
                ready = wait(_PAUSED_MS) if paused else wait()
            else:
                ms = remaining(due) * 1000
                ready = wait(min(ms, _PAUSED_MS) if paused else ms)
            if paused and (lines.has_room() or self._closing):
                poller.register(err_fd, select.POLLIN)
                paused = False
            if cut_at and time.monotonic() >= cut_at and not any(fd == out_fd for fd, _ in ready):
                # Read to its end: what the server wrote before it exited is delivered.
                cut_at = 0.0
                if out_fd in watched:  # still open: held by a process the server started
                    poller.unregister(out_fd)
                    watched.discard(out_fd)
                    self._pipe_done(proc.stdout)
                    what = "in the middle of a message" if size else "without closing its stdout"
                    self._report(sink, self._exit_error(
                        f"the server exited {what}, which a process it started still holds", wait=0.0))
                    if not watched:
                        return
                    continue
            if not ready and ended is not None and time.monotonic() >= report_at:
                # The wait for its last words was the wait for its exit too.
                self._report(sink, self._exit_error(ended, wait=remaining(exit_by)))
                ended = None
                if not watched:
                    return
                continue
            for fd, _ in ready:
                if fd == out_fd:
                    error: TransportError | None = None
                    try:
                        data = read(out_fd, _READ_SIZE)
                    except OSError as exc:
                        data = b""
                        error = ConnectionClosed(f"reading the server's stdout failed: {exc}")
                    self.bytes_received += len(data)  # the reader's own counter
                    if data and not parts and data.find(b"\n") == len(data) - 1 and len(data) <= limit + 1:
                        # The common read: one whole line.
                        if data.isspace():
                            continue
                        try:  # `_take()`, in this frame
                            message = jsonrpc.parse(data)
                        except InvalidMessage as exc:
                            error = self._not_jsonrpc(exc)
                        else:
                            sink.deliver(message)
                            continue
                    elif data:
                        # The messages of this read, handed over together
                        # (`deliver_all`: one wake-up per caller), before
                        # any error found after them.
                        batch: list[Any] = []
                        start = data.rfind(b"\n") + 1  # what follows the last whole line begins the next
                        if start:
                            # The read's whole lines, the first with what earlier
                            # reads began of it; joined, the pieces go, so a long
                            # line is not held twice while it is parsed.
                            whole = b"".join((*parts, data[:start])) if parts else data[:start]
                            # One line, begun in earlier reads (a long one): `parse`
                            # takes it as it is, where a pass over lines splits a copy.
                            alone = bool(parts) and data.find(b"\n") == start - 1
                            parts, size = [], 0
                            # A flood's read: hundreds of lines, parsed in one
                            # pass when each is one JSON object and the read fits
                            # one line's limit, so no line can be too long (else
                            # line by line, which finds what is wrong).
                            parsed = None if alone or len(whole) > limit + 1 else jsonrpc.parse_lines(whole)
                            if parsed is not None:
                                batch = parsed
                            else:
                                error = self._parse_each(whole, batch)
                            del whole
                        if batch:
                            if deliver_all is not None:
                                deliver_all(batch)
                            else:
                                for message in batch:
                                    sink.deliver(message)
                        if error is None and start < len(data):
                            parts.append(data[start:])
                            size += len(data) - start
                            if size > limit:
                                error = MessageTooLarge(
                                    f"the server sent a line longer than max_line_bytes={limit}", limit=limit)
                        if error is None:
                            continue
                    poller.unregister(out_fd)
                    watched.discard(out_fd)
                    self._pipe_done(proc.stdout)
                    if error is not None:
                        self._report(sink, error)
                    else:
                        # Its last stderr lines explain the exit: read them first.
                        ended = "the server exited in the middle of a message" if size else (
                            "the server closed its stdout")
                        # (None to wait for when stderr has ended already.)
                        exit_by = time.monotonic() + _LAST_WORDS_SECONDS
                        report_at = exit_by if watched else 0.0
                elif fd == err_fd:
                    try:
                        data = read(err_fd, _READ_SIZE)
                    except OSError as exc:
                        log.debug("reading the stderr of server %s failed: %s", self._target.command, exc)
                        data = b""
                    texts, err_rest = _stderr_lines(err_rest + data, ended=not data)
                    for text in texts:
                        self._stderr_tail.append(text)
                        lines.line(text)
                    if data and lines.full() and not self._closing:  # a destination slower than the server
                        poller.unregister(err_fd)
                        paused = True
                    if not data:
                        poller.unregister(err_fd)
                        watched.discard(err_fd)
                        self._stderr_ended.set()
                        lines.finish()
                        self._pipe_done(proc.stderr)
                        if ended is not None:
                            report_at = 0.0  # nothing more to wait for
                elif fd == exit_fd:
                    poller.unregister(exit_fd)
                    if self._process is not None:
                        self._process.close_exit_watch()
                    # Its stdout ends at once, unless another process holds it:
                    # a helper it started, or the server itself when what was
                    # started is a launcher that exits. Only a server that
                    # nobody is left to read its stdin is gone for sure.
                    writer = self._writer
                    in_fd = writer.fileno() if writer is not None and not self._closing else None
                    if out_fd in watched and in_fd is not None:
                        poller.register(in_fd, 0)  # (its error is reported once no reader is left)
                elif fd == in_fd:
                    poller.unregister(in_fd)
                    if out_fd in watched:
                        cut_at = time.monotonic() + _AFTER_EXIT_SECONDS
            if not watched and ended is None:
                return

    def _parse_each(self, lines: bytes, into: list[Any]) -> TransportError | None:
        """Parse whole `lines` one by one into `into`, up to the first that
        is too long or not a JSON-RPC message: its error (None when all were
        parsed)."""
        limit = self._target.max_line_bytes
        start = 0
        while True:
            end = lines.find(b"\n", start)
            if end < 0:
                return None
            line = lines[start:end + 1]
            start = end + 1
            if len(line) > limit + 1:
                return MessageTooLarge(f"the server sent a line longer than max_line_bytes={limit}", limit=limit)
            if not line.isspace():
                try:
                    into.append(jsonrpc.parse(line))
                except InvalidMessage as exc:
                    return self._not_jsonrpc(exc)

    def _report(self, sink: MessageSink, error: TransportError) -> None:
        if not self._closing:
            sink.transport_failed(error)

    def _exit_error(self, what: str, deadline: float | None = None, *, wait: float = 1.0) -> TransportError:
        """The error for a server that went away: its exit code and last
        stderr, waited for `wait` seconds at most, and no later than
        `deadline` (a caller's, whose write found the pipe broken)."""
        process = self._process
        if self._closing:
            return ConnectionClosed("the connection is closed")
        until = earliest(deadline_in(wait), deadline)
        returncode = None
        if process is not None:
            # stdout ending usually means the process is exiting; give it a
            # moment so the exit code and its last stderr lines are known.
            returncode = process.exit_code(remaining(until))
        if returncode is None:
            return ConnectionClosed(f"{what} (the process is still running){self._tail_text()}")
        # The thread that reads stderr may not have come to its last lines
        # yet (a write that found the pipe broken explains it at once).
        if (self._drain or self._reader) is not threading.current_thread():
            self._stderr_ended.wait(remaining(until))
        handoff = self._handoff
        if handoff is not None:
            handoff.flush(min(_LAST_WORDS_FLUSH, remaining(until, at_least=0.05)))
        return ServerExited(
            f"{what}: the server process exited with code {returncode}{self._tail_text()}",
            returncode=returncode, stderr_tail=list(self._stderr_tail),
        )

    def _tail_text(self) -> str:
        """The server's last stderr lines, the very last on the first line so
        that a one-line report (the CLI's) still says why."""
        tail = [line for line in self._stderr_tail if line.strip()]
        if not tail:
            return ""
        text = f" (stderr: {tail[-1].strip()})"
        if len(tail) > 1:
            text += "; last stderr lines:\n  " + "\n  ".join(tail)
        return text

    def _drain_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        name = self._target.command
        lines = StderrLines(self._target.stderr, name)
        readline = proc.stderr.readline
        try:
            for raw in iter(lambda: readline(65536), b""):
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                self._stderr_tail.append(text)
                lines.line(text)
        except (OSError, ValueError) as exc:
            log.debug("reading the stderr of server %s failed: %s", name, exc)
        finally:
            self._stderr_ended.set()
            lines.finish()
            self._pipe_done(proc.stderr)

    def read_nothing(self) -> bool:
        """True when every byte written to the server's stdin is still in the
        pipe (or nothing could be written at all): the server read none of
        it. Asks the pipe how much it holds (`FIONREAD` on its write end,
        which Linux answers). Where the answer is 0 or cannot be had, this
        says False: the safe side (a server that failed on its own is then
        started once more)."""
        writer = self._writer
        if writer is None:
            return False
        with self._sent_lock:
            sent = self.bytes_sent
        return sent == 0 or writer.unread() >= sent

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._stderr_tail)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def describe(self) -> str:
        return f"stdio server {self._target.command!r}"



def _no_room(message: Mapping[str, Any]) -> RequestTimeout:
    method = message.get("method")
    return RequestTimeout(f"{method or 'a message'}: the server did not read its input in time; nothing was sent",
                          method=method if isinstance(method, str) else None)



def _stderr_lines(text: bytes, ended: bool) -> tuple[list[str], bytes]:
    """The whole lines of `text` (stderr read so far), each cut at
    `_STDERR_LINE` bytes, and what is left of a line begun; with `ended`
    (the pipe's end), what is left is a line too."""
    lines: list[str] = []
    start = 0
    while True:
        end = text.find(b"\n", start, start + _STDERR_LINE)
        if end >= 0:
            end += 1
        elif len(text) - start >= _STDERR_LINE:
            end = start + _STDERR_LINE
        elif ended and start < len(text):
            end = len(text)
        else:
            return lines, text[start:]
        lines.append(text[start:end].decode("utf-8", "replace").rstrip("\r\n"))
        start = end


def _hung_up(stream: IO[bytes]) -> bool:
    """Whether every writer of the pipe `stream` reads from is gone (its
    reader sees the end once it has read what is left)."""
    if not hasattr(select, "poll"):
        return False
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLIN)
        return any(events & select.POLLHUP for _, events in poller.poll(0))
    except (OSError, ValueError):  # closed meanwhile
        return False


def _close_quietly(stream: IO[bytes] | None) -> None:
    if stream is not None:
        try:
            stream.close()
        except (OSError, ValueError):
            pass
