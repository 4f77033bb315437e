"""Starting a peer server on a loopback port: `free_port()` to hand it one,
`wait_until_listening()` until it accepts connections (or has exited), and
`listening()` for the whole life of one."""

from __future__ import annotations

import socket
import subprocess
import time
from contextlib import contextmanager
from typing import Iterator, Mapping


def free_port() -> int:
    """A TCP port on 127.0.0.1 free now, for a server process to listen on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_listening(proc: subprocess.Popen[bytes], port: int, limit: float = 60.0) -> None:
    """Return once 127.0.0.1:`port` accepts a connection; RuntimeError (with
    the server's stderr) when `proc` exits first, or after `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read().decode(errors='replace') if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)  # polling a condition (the port accepting), bounded by the deadline
    raise RuntimeError("the server did not start listening")


@contextmanager
def listening(command: list[str], port: int, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Run the HTTP server `command` (which listens on 127.0.0.1:`port`)
    while the block runs; yields its MCP endpoint's URL (path `/mcp`). The
    process is stopped (killed after 10 s) and reaped on the way out."""
    proc = subprocess.Popen(command, env=None if env is None else dict(env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_listening(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
