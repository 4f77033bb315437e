"""HTTP/1.1 framing for the Streamable HTTP test server: reading requests, writing JSON and SSE.

It owns `RequestHandler`, the `http.server` handler of `HTTPServer`'s
connections (every method is handed to `owner._serve`; it reads bodies,
chunked or with Content-Length, and writes plain responses), `SSEWriter`
(one `text/event-stream` response: chunked on HTTP/1.1, close-delimited on
HTTP/1.0, one flush per event) and the JSON encoding of messages. It knows
nothing of MCP: what to answer is decided by `_streamable` and `_responses`.
"""

from __future__ import annotations

import http.server
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._listener import SocketServer, Waker

if TYPE_CHECKING:
    from ._streamable import HTTPServer

_log = logging.getLogger("mcp_sync.testing.http")


def encode(message: Any) -> bytes:
    """Compact UTF-8 JSON of a message."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot carry: escaped, as JSON can
        return json.dumps(message, separators=(",", ":")).encode("ascii")


def media_types(header: str | None) -> set[str]:
    """The lower-cased media types of an Accept or Content-Type header, without parameters."""
    return {part.split(";", 1)[0].strip().lower() for part in (header or "").split(",") if part.strip()}


class SSEWriter:
    """Writes one SSE response: chunked on HTTP/1.1, close-delimited otherwise."""

    def __init__(self, handler: RequestHandler, headers: Mapping[str, str]) -> None:
        self._handler = handler
        self._chunked = handler.request_version == "HTTP/1.1"
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("X-Accel-Buffering", "no")
        if self._chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Connection", "close")
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()

    def _write(self, data: bytes) -> None:
        out = self._handler.wfile
        if self._chunked:
            out.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            out.write(data)
        out.flush()

    def event(self, data: str, event_id: str | None = None, retry: int | None = None) -> None:
        lines = []
        if event_id is not None:
            lines.append(f"id: {event_id}")
        if retry is not None:
            lines.append(f"retry: {retry}")
        lines.append(f"data: {data}")
        self._write(("\n".join(lines) + "\n\n").encode("utf-8"))

    def retry(self, ms: int) -> None:
        self._write(f"retry: {ms}\n\n".encode("ascii"))

    def end(self) -> None:
        if self._chunked:
            self._handler.wfile.write(b"0\r\n\r\n")
            self._handler.wfile.flush()
        else:
            self._handler.close_connection = True


class RequestHandler(http.server.BaseHTTPRequestHandler):
    """One connection of an `HTTPServer`: hands each request to `owner._serve`
    and offers the body reading and plain responses it needs."""

    protocol_version = "HTTP/1.1"
    server_version = "mcp-sync-testing"
    server: SocketServer

    _waker: Waker | None = None

    def _owner(self) -> HTTPServer:
        owner: HTTPServer = self.server.owner
        return owner

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s - " + format, self.address_string(), *args)

    def waker(self) -> Waker:
        if self._waker is None:
            self._waker = Waker()
        return self._waker

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self._waker is not None:
                self._waker.close()
                self._waker = None

    def do_POST(self) -> None:
        self._owner()._serve(self, "POST")

    def do_GET(self) -> None:
        self._owner()._serve(self, "GET")

    def do_DELETE(self) -> None:
        self._owner()._serve(self, "DELETE")

    def do_PUT(self) -> None:
        self._owner()._serve(self, "PUT")

    def do_PATCH(self) -> None:
        self._owner()._serve(self, "PATCH")

    def do_HEAD(self) -> None:
        self._owner()._serve(self, "HEAD")

    def do_OPTIONS(self) -> None:
        self._owner()._serve(self, "OPTIONS")

    # -- plain responses ------------------------------------------------------

    def send_body(self, status: int, body: bytes, content_type: str | None, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        names = {name.lower() for name in (headers or {})}
        if content_type is not None and "content-type" not in names:
            self.send_header("Content-Type", content_type)
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def send_json(self, status: int, message: Any, headers: Mapping[str, str] | None = None) -> None:
        self.send_body(status, encode(message), "application/json", headers)

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        return self.rfile.read(int(length))


# --------------------------------------------------------------------------
