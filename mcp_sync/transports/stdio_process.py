"""The stdio server's process: its start, its process group, its end.

What it owns: one server's `subprocess.Popen`, started in a process group
of its own (a session on POSIX, so that the SIGINT of a terminal's Ctrl-C
or Jupyter's "Interrupt kernel" reaches the client only), and the spec's
shutdown order for that whole group: end of input, SIGTERM, SIGKILL, at
most `grace` seconds each, the server reaped (or, in a child after a
fork, letting go of the pipes and nothing else). What it must not know: the
messages, the threads that read the pipes, or when stdin may be closed:
only the writer knows that no message is half written, so `stop()` is
given its `close_stdin` and calls nothing else of it.

Lock discipline: no lock of its own. The transport calls `spawn()`,
`stop()` and `kill()` under its close lock, so that a close racing a
(re)start either prevents it or stops what it started; `exit_code()` may
run on a reader thread meanwhile (`Popen` guards its own wait).

`subprocess` (with `signal`, `selectors`, `locale`) loads when a server is
started, not at `import mcp_sync`: this module is imported then too.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ConnectError
from ..waiting import remaining

if TYPE_CHECKING:
    import subprocess

log = logging.getLogger("mcp_sync.transport.stdio")

#: Pipes of servers inherited across `os.fork()`, whose descriptors
#: `forget()` closed: kept so that their file objects are never closed (or
#: collected) in the child. One entry per discarded transport.
_ORPHANS: list[subprocess.Popen[bytes]] = []


class ServerProcess:
    """A server started by `spawn()`; `popen` gives its pipes.

    Example::

        process = ServerProcess.spawn(["python", "server.py"], env=None, cwd=None)
        writer = StdinWriter(process.popen.stdin, explain=..., on_broken=...)
        ...
        process.stop(2.0, writer.close_stdin)  # EOF, SIGTERM, SIGKILL: 2 s each at most
    """

    __slots__ = ("popen", "name", "_exit_fd")

    def __init__(self, popen: subprocess.Popen[bytes], name: str) -> None:
        self.popen = popen
        #: The command, for the log.
        self.name = name
        # Readable once the process exited, even while a process it started
        # holds its pipes (Linux 5.3+: a pidfd; None elsewhere). Opened at
        # once, before its pid could be reaped and reused; closed by the
        # reader (`close_exit_watch`), or by `forget()` in a fork child.
        self._exit_fd = _watch_exit(popen.pid)

    @classmethod
    def spawn(cls, argv: Sequence[str], *, env: Mapping[str, str] | None,
              cwd: str | os.PathLike[str] | None) -> ServerProcess:
        """Start `argv` with piped stdin, stdout and stderr, in a process
        group of its own; `ConnectError` if it cannot be started."""
        import subprocess

        try:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, cwd=cwd, close_fds=True, **_own_process_group(),
            )
        except OSError as exc:
            command, hint = argv[0], ""
            if isinstance(exc, FileNotFoundError) and len(argv) == 1 and len(command.split()) > 1:
                # ['python server.py']: a command line given as one string.
                import shlex

                hint = f" (the command and its arguments are separate strings: {shlex.split(command)!r})"
            raise ConnectError(f"cannot start server {command!r}: {exc}{hint}") from exc
        return cls(popen, argv[0])

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def exit_fd(self) -> int | None:
        """A descriptor that becomes readable when the process exits (None
        where there is none, or once `close_exit_watch()` closed it)."""
        return self._exit_fd

    def close_exit_watch(self) -> None:
        """Close `exit_fd` (once; from the one thread that watches it)."""
        exit_fd, self._exit_fd = self._exit_fd, None
        if exit_fd is not None:
            try:
                os.close(exit_fd)
            except OSError:
                pass

    def exit_code(self, wait: float) -> int | None:
        """The server's exit code, waited for at most `wait` seconds; None
        while it still runs."""
        import subprocess

        try:
            return self.popen.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float, close_stdin: Callable[[float], bool]) -> None:
        """The spec's shutdown order, for the server's whole group: end of
        input (`close_stdin(until)`, False when it could not be had by
        then), SIGTERM, SIGKILL, at most `grace` seconds for each."""
        import subprocess

        proc = self.popen
        polite_until = time.monotonic() + grace
        if close_stdin(polite_until):
            if self._wait_group(remaining(polite_until)):
                return
        log.debug("server %s did not exit after stdin closed, or left processes behind; terminating", self.name)
        self._end(kill=False)
        if self._wait_group(grace):
            return
        log.warning("server %s (or a process it started) ignored SIGTERM; killing it", self.name)
        self.kill()
        # SIGKILL cannot be ignored: wait for the server itself only (an
        # orphan nobody reaps would keep the group "alive" as a zombie).
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log.warning("server %s did not die %g s after SIGKILL", self.name, grace)

    def kill(self) -> None:
        """SIGKILL to the server's group at once (an interrupted `stop()`)."""
        self._end(kill=True)

    def forget(self) -> None:
        """In a child after `os.fork()`: close this process's copies of the
        pipes and nothing else (the server is the parent's). The pipe
        objects are kept (`_ORPHANS`) rather than closed, because their
        buffer locks may have been held by a parent thread at the fork."""
        proc = self.popen
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is None:
                continue
            try:
                os.close(stream.fileno())
            except (OSError, ValueError):
                pass
        self.close_exit_watch()  # (this process's copy: the reader watching it was not copied)
        _ORPHANS.append(proc)

    def _wait_group(self, timeout: float) -> bool:
        """Wait at most `timeout` for the server to exit (it is reaped) and
        its process group to be empty. True when both happened."""
        proc = self.popen
        until = time.monotonic() + max(timeout, 0.0)
        pause = 0.001
        while True:
            if proc.poll() is not None and not _group_alive(proc):
                return True
            left = remaining(until)
            if left <= 0:
                return False
            # No call waits for a process group to empty: poll, briefly.
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)

    def _end(self, *, kill: bool) -> None:
        """SIGTERM (or SIGKILL) to the server's group; on Windows, which has
        no group signal to send, TerminateProcess on the server only."""
        import signal

        proc = self.popen
        try:
            if sys.platform != "win32":
                _signal_group(proc, signal.SIGKILL if kill else signal.SIGTERM)
            elif kill:
                proc.kill()
            else:
                proc.terminate()
        except OSError as exc:
            log.debug("could not signal server %s: %s", self.name, exc)


def _watch_exit(pid: int) -> int | None:
    """A descriptor that becomes readable when process `pid` exits (a
    pidfd), or None where there is none (not Linux 5.3+, or gone already)."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)
    except OSError:
        return None
    return fd


def _own_process_group() -> dict[str, Any]:
    """`Popen` options that start the server in a process group of its own
    (a session, on POSIX): the SIGINT a terminal's Ctrl-C or Jupyter's
    "Interrupt kernel" sends to the client's group must not reach it."""
    if sys.platform == "win32":
        import subprocess

        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Send `signum` to the server's process group, and to the server itself
    (it may have left the group). The group is only signalled while it has
    members or the server is unreaped: its id cannot be reused then."""
    if sys.platform == "win32":  # no groups to signal there (see `ServerProcess._end`)
        proc.send_signal(signum)
        return
    if proc.poll() is None or _group_alive(proc):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass
    proc.send_signal(signum)  # a no-op once the server was reaped


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """Is any process left in the server's group (the server's pid is its
    id)? Windows: only the server itself is known."""
    if sys.platform == "win32":
        return proc.poll() is None
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member that is not ours to signal; it is still there
    return True
