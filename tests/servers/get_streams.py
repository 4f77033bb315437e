"""An initialize-era Streamable HTTP server whose session GET streams follow
a script, for tests of how the client opens that stream again.

Each GET takes the next action of `actions` (the last one repeats):

* ``"cut"``: open, nothing on it, cut short after `hold` seconds (the
  connection shut with no last chunk: a broken stream);
* ``"event_cut"``: the same after one log message;
* ``"event_end:RETRY"``: one log message (with SSE ``retry: RETRY`` before
  it), then a clean end at once;
* ``"hold"``: open, nothing on it, until the server closes.

POSTs are answered by `minimal_session.SessionHandler`. `gets` records the
`time.monotonic()` of each GET, with its action.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time

from tests.servers.minimal_session import SessionHandler

_NOTE = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "logger": "script", "data": "on the GET stream"}})


class ScriptedGetStreams:
    """The server: `url`, `gets`, `close()` (also a context manager)."""

    def __init__(self, actions: list[str], *, hold: float = 0.3) -> None:
        self.actions = list(actions)
        self.hold = hold
        self.gets: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/mcp"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="mcp-testing-get-streams")
        self._thread.start()

    def _next_action(self) -> str:
        with self._lock:
            action = self.actions.pop(0) if len(self.actions) > 1 else self.actions[0]
            self.gets.append((time.monotonic(), action))
            return action

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(SessionHandler):
            server_name = "scripted"

            def _chunk(self, text: str) -> None:
                data = text.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def do_GET(self) -> None:
                kind, _, retry = server._next_action().partition(":")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True
                if kind == "event_end":
                    self._chunk(f"retry: {retry}\n\ndata: {_NOTE}\n\n" if retry else f"data: {_NOTE}\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                elif kind in ("cut", "event_cut"):
                    if kind == "event_cut":
                        self._chunk(f"data: {_NOTE}\n\n")
                    server._stop.wait(server.hold)
                    self.connection.shutdown(socket.SHUT_RDWR)
                else:  # hold
                    server._stop.wait()

        return Handler

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    def __enter__(self) -> ScriptedGetStreams:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
