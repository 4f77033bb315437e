"""The stdio transport: a server subprocess, one JSON-RPC message per line.

Owns the child process and two threads: the *reader*, which reads stdout
line by line, parses and hands each message to the sink (it never runs user
code and never writes), and the *stderr drain*, which forwards the server's
stderr to the `mcp_sync.server.stderr` logger and keeps the last lines so
that a crash can explain itself. Writers (any caller thread) share stdin
under one lock.

When stdout ends, or a line is not JSON or is longer than `max_line_bytes`,
the reader reports one `TransportError` to the sink and stops; the engine
fails every pending call with it. `close()` follows the spec's shutdown
order: close stdin, wait, SIGTERM, wait, SIGKILL, then reap and join.
`start()` and `close()` share a lock, so a close racing a (re)start either
prevents it or stops what it started. In a child after `os.fork()`,
`discard()` only drops the child's copies of the pipes: the server stays the
parent's.
"""

from __future__ import annotations

import collections
import logging
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import (
    ConnectError,
    ConnectionClosed,
    InvalidMessage,
    MessageTooLarge,
    ServerExited,
    TransportError,
)
from ..protocol import jsonrpc
from .base import MessageSink, Target, Transport

stderr_logger = logging.getLogger("mcp_sync.server.stderr")
log = logging.getLogger("mcp_sync.transport.stdio")

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
STDERR_TAIL_LINES = 20

#: Pipes of servers inherited across `os.fork()`, whose descriptors
#: `discard()` closed: kept so that their file objects are never closed (or
#: collected) in the child. One entry per discarded transport.
_ORPHANS: list[subprocess.Popen[bytes]] = []


class Stdio(Target):
    """Target a server program speaking MCP on its stdin and stdout.

    Example::

        client = mcp_sync.connect(Stdio("python", ["server.py"], env={"TOKEN": "x"}))

    `env` is added to (not substituted for) this process's environment unless
    `inherit_env=False`. `max_line_bytes` bounds one incoming message;
    `shutdown_timeout` is how long `close()` waits at each step of shutdown.
    """

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
    ) -> None:
        if not isinstance(command, str) or not command:
            raise TypeError("Stdio() needs a command string")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise TypeError("Stdio() args must be a sequence of strings")
        if not isinstance(max_line_bytes, int) or max_line_bytes < 1:
            raise ValueError("max_line_bytes must be a positive integer")
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.inherit_env = inherit_env
        self.cwd = cwd
        self.max_line_bytes = max_line_bytes
        self.shutdown_timeout = shutdown_timeout

    def open(self) -> Transport:
        return StdioTransport(self)

    def __repr__(self) -> str:
        return f"Stdio({self.command!r}, {self.args!r})"


class StdioTransport(Transport):
    cancels_by_notification = True

    def __init__(self, target: Stdio) -> None:
        self._target = target
        self._proc: subprocess.Popen[bytes] | None = None
        self._sink: MessageSink | None = None
        self._write_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._closing = False
        self._closed = False
        self._reader: threading.Thread | None = None
        self._drain: threading.Thread | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)

    # -- lifecycle ---------------------------------------------------------

    def start(self, sink: MessageSink) -> None:
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
            try:
                self._proc = subprocess.Popen(
                    [target.command, *target.args],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=env, cwd=target.cwd, close_fds=True,
                )
            except OSError as exc:
                raise ConnectError(f"cannot start server {target.command!r}: {exc}") from exc
            self._sink = sink
            name = os.path.basename(target.command)
            self._drain = threading.Thread(target=self._drain_stderr, name=f"mcp-sync-stderr-{name}", daemon=True)
            self._reader = threading.Thread(target=self._read_stdout, name=f"mcp-sync-reader-{name}", daemon=True)
            self._drain.start()
            self._reader.start()

    def discard(self) -> None:
        """In a child after `os.fork()`: close this process's copies of the
        pipes and nothing else. The server is the parent's: no EOF is
        written, no signal sent, no thread joined (none was copied). The
        pipe objects are kept (`_ORPHANS`) rather than closed, because their
        buffer locks may have been held by a parent thread at the fork."""
        self._closing = self._closed = True
        self._write_lock = threading.Lock()
        self._close_lock = threading.Lock()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is None:
                continue
            try:
                os.close(stream.fileno())
            except (OSError, ValueError):
                pass
        _ORPHANS.append(proc)

    def close(self) -> None:
        with self._close_lock:
            self._closing = True
            if self._closed:
                return
            proc = self._proc
            if proc is not None:
                self._stop_process(proc)
            for thread in (self._reader, self._drain):
                if thread is not None and thread is not threading.current_thread():
                    thread.join()
            if proc is not None:
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    if stream is not None:
                        try:
                            stream.close()
                        except OSError:
                            pass
            self._closed = True

    def _stop_process(self, proc: subprocess.Popen[bytes]) -> None:
        grace = self._target.shutdown_timeout
        # A writer stuck on a full pipe holds the write lock; then the server
        # is not reading, so skip the polite step and terminate it.
        if self._write_lock.acquire(timeout=grace):
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
            finally:
                self._write_lock.release()
            try:
                proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                pass
        log.debug("server %s did not exit after stdin closed; terminating", self._target.command)
        proc.terminate()
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass
        log.warning("server %s ignored SIGTERM; killing it", self._target.command)
        proc.kill()
        proc.wait()

    # -- sending -------------------------------------------------------------

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        data = jsonrpc.encode(message) + b"\n"
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ConnectionClosed("the stdio transport is not started")
        with self._write_lock:
            if self._closing:
                raise ConnectionClosed("the connection is closed")
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise self._exit_error(f"cannot write to the server: {exc}") from exc

    # -- reading ---------------------------------------------------------------

    def _read_stdout(self) -> None:
        proc = self._proc
        sink = self._sink
        assert proc is not None and proc.stdout is not None and sink is not None
        limit = self._target.max_line_bytes
        readline = proc.stdout.readline
        error: TransportError
        while True:
            try:
                line = readline(limit + 1)
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
            try:
                message = jsonrpc.decode(line)
            except InvalidMessage as exc:
                error = InvalidMessage(f"the server wrote a line that is not JSON-RPC: {exc}{self._tail_text()}")
                break
            sink.deliver(message)
        if not self._closing:
            sink.transport_failed(error)

    def _exit_error(self, what: str) -> TransportError:
        """The error for a server that went away: its exit code and last stderr."""
        proc = self._proc
        if self._closing:
            return ConnectionClosed("the connection is closed")
        returncode = None
        if proc is not None:
            try:
                # stdout ending usually means the process is exiting; give it a
                # moment so the exit code and its last stderr lines are known.
                returncode = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                returncode = None
        if returncode is None:
            return ConnectionClosed(f"{what} (the process is still running){self._tail_text()}")
        if self._drain is not None and self._drain is not threading.current_thread():
            self._drain.join(timeout=1.0)
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
        readline = proc.stderr.readline
        for raw in iter(lambda: readline(65536), b""):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            self._stderr_tail.append(text)
            stderr_logger.info("[%s] %s", name, text)

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._stderr_tail)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def describe(self) -> str:
        return f"stdio server {self._target.command!r}"
