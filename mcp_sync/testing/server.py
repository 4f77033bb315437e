"""The stdio program: the demo server (or any `Server`) over stdin/stdout, or over HTTP.

Run it as `python -m mcp_sync.testing.server [--page-size N] [--versions
v1,v2] [--name NAME]` (or `python -m mcp_sync.testing`). It reads
newline-delimited JSON-RPC from stdin, hands each message to one
`ServerSession`, and writes each server message to stdout as one line of
compact JSON under a lock, flushing every line (a tool's requests to the
client go out the same way, and the client's responses read from stdin are
routed back to the waiting tool). A line that is not JSON is
answered with a -32700 error (no id). Diagnostics go to stderr only: when
nothing else shows the package's log (no handler but the library's
NullHandler), `serve_stdio` writes its warnings there itself, so an answer
the server had to replace (a tool result JSON cannot encode) is seen by
whoever runs the program, not only by the client. At
end of input it cancels the work in flight, joins the session's threads
(waiting at most `close_timeout` seconds for tools that ignore
cancellation) and exits 0.

With `--http PORT` (0: any free port; `--host`, default 127.0.0.1) it serves
Streamable HTTP instead (`mcp_sync.testing.HTTPServer`, both protocol
eras), prints one line `listening on http://HOST:PORT/mcp` to stderr, and
serves until SIGTERM or SIGINT, then closes everything and exits 0.
`--response-mode auto|json|sse` and `--sse-ids` set the HTTP options.

This module also re-exports the server API (`Server`, `ServerSession`,
`ToolContext`, `demo_server`), so `from mcp_sync.testing.server import
Server` works too. The package `__init__` never imports this module, so
`python -m mcp_sync.testing.server` runs it exactly once (as `__main__`).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from types import FrameType
from typing import Any, BinaryIO, Sequence

from ._context import ToolContext
from ._protocol import ALL_VERSIONS, OLD_VERSIONS, PARSE_ERROR, SUPPORTED_VERSIONS
from ._registry import Server
from ._session import ServerSession
from .demo import demo_server

__all__ = ["Server", "ServerSession", "ToolContext", "demo_server", "main", "serve_http", "serve_stdio"]

_log = logging.getLogger("mcp_sync.testing.stdio")


class _LineWriter:
    """Writes one compact JSON message per line; stops quietly once the pipe breaks."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._broken = False

    def __call__(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"
        with self._lock:
            if self._broken:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                self._broken = True
                _log.debug("stdout is closed; dropping further output")

    def stop(self) -> None:
        with self._lock:
            self._broken = True


def serve_stdio(
    server: Server,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    *,
    close_timeout: float = 5.0,
) -> int:
    """Serve one session over byte streams (default: this process's stdio) until EOF; returns 0."""
    source = stdin if stdin is not None else sys.stdin.buffer
    write = _LineWriter(stdout if stdout is not None else sys.stdout.buffer)
    shown = _show_warnings_on_stderr()
    session: ServerSession = server.open_session(write)
    try:
        for raw in source:
            line = raw.strip()
            if not line:
                continue
            try:
                message = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                _log.debug("unparseable input line: %s", exc)
                write({"jsonrpc": "2.0", "error": {"code": PARSE_ERROR, "message": f"Parse error: {exc}"}})
                continue
            session.receive(message)
    except KeyboardInterrupt:
        pass
    finally:
        closer = threading.Thread(target=session.close, name="mcp-testing-close", daemon=True)
        closer.start()
        closer.join(close_timeout)
        if closer.is_alive():
            _log.warning("some tools ignored cancellation; exiting without them")
        write.stop()
        if shown is not None:
            logging.getLogger("mcp_sync.testing").removeHandler(shown)
    return 0


def _show_warnings_on_stderr() -> logging.Handler | None:
    """A stderr handler for the package's warnings, added for one
    `serve_stdio` run when no handler would show them (the library adds
    only a NullHandler; a program that configured logging, as `main`
    does, keeps its own); None when one would. Not `Logger.hasHandlers()`:
    it counts that NullHandler."""
    logger: logging.Logger | None = logging.getLogger("mcp_sync.testing")
    while logger is not None:
        if any(not isinstance(handler, logging.NullHandler) for handler in logger.handlers):
            return None
        logger = logger.parent if logger.propagate else None
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
    logging.getLogger("mcp_sync.testing").addHandler(handler)
    return handler


def serve_http(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    response_mode: str = "auto",
    sse_ids: bool = False,
    stop: threading.Event | None = None,
) -> int:
    """Serve over Streamable HTTP until SIGTERM/SIGINT (or until `stop` is
    set); prints `listening on URL` to stderr first; returns 0."""
    from ._streamable import HTTPServer

    done = stop if stop is not None else threading.Event()
    previous: dict[signal.Signals, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        with HTTPServer(server, host, port, response_mode=response_mode, sse_ids=sse_ids) as http:
            sys.stderr.write(f"listening on {http.url}\n")
            sys.stderr.flush()
            done.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, not {text!r}")
    return value


def _parse_versions(text: str) -> list[str]:
    versions = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in versions if v not in ALL_VERSIONS]
    if unknown or not versions:
        raise argparse.ArgumentTypeError(
            f"choose one or more of {', '.join(ALL_VERSIONS)} (comma-separated), not {text!r}"
        )
    return versions


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the stdio demo server."""
    parser = argparse.ArgumentParser(
        prog="python -m mcp_sync.testing.server",
        description="The mcp_sync demo MCP server over stdio (newline-delimited JSON-RPC).",
    )
    parser.add_argument("--page-size", type=_positive, default=None, metavar="N",
                        help="page list results N items at a time (default: no paging)")
    parser.add_argument("--versions", type=_parse_versions, default=None, metavar="V1,V2",
                        help=f"protocol versions to speak (default: {','.join(SUPPORTED_VERSIONS)}; "
                             f"also {','.join(OLD_VERSIONS)})")
    parser.add_argument("--name", default="mcp-sync-demo", help="serverInfo name (default: %(default)s)")
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging to stderr")
    parser.add_argument("--tasks", action="store_true", help="add the Tasks extension's task tools")
    parser.add_argument("--http", type=_port, default=None, metavar="PORT",
                        help="serve Streamable HTTP on PORT (0: any free port) instead of stdio, "
                        "until SIGTERM or SIGINT")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default: %(default)s)")
    parser.add_argument("--response-mode", choices=("auto", "json", "sse"), default="auto",
                        help="HTTP: JSON or SSE answers (default: %(default)s)")
    parser.add_argument("--sse-ids", action="store_true",
                        help="HTTP, legacy era: SSE event ids, priming events and resumption")
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )
    server = demo_server(page_size=args.page_size, versions=args.versions, name=args.name, exit_on_crash=True,
                         tasks=args.tasks)
    if args.http is not None:
        return serve_http(server, args.host, args.http, response_mode=args.response_mode, sse_ids=args.sse_ids)
    return serve_stdio(server)


if __name__ == "__main__":
    sys.exit(main())
