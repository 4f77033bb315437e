"""HTTP/1.1 for the HTTP transport: writing a request head, reading one
response from a socket (the head, then the body).

Every request the transport makes (POST, GET, DELETE; exchanges, one-way
messages, streams) is written by `RequestHead` and read by `Response`, so
there is one set of limits and one error type (`ResponseError`, a
`ValueError`) for all of them. Connecting and TLS are not here (`pool`).

`RequestHead` builds the request line and header block in one string and
checks it in one pass: a CR, LF or NUL inside any header value (a token
provider's, say) is refused, so nothing can add a header or split the
request; the bytes are what urllib3 would send. `http.client` would do, but it parses every header block with
the `email` package, which costs more CPU than everything else of a small
JSON answer (about 30% of a call under load, measured with py-spy). This
reads the status line and header lines directly and frames the body by
RFC 9112 §6.3: no body for 1xx/204/304, chunked transfer coding (which
overrides a Content-Length sent with it), a Content-Length, or everything
until the server closes. A connection is not reused (`will_close`) after
an answer that says so, an HTTP/1.0 one without keep-alive, one framed by
the connection's end, one with both framings (a smuggling attempt's
mark), or a 101 (the client never asks for an upgrade).

`Response` offers what the transport uses of a response: `status`,
`reason`, `headers` (case-insensitive `get()`, `items()`), `read(amt)`,
`read1(amt)`, `isclosed()`, `close()` and `shutdown()`. Malformed input raises
`ResponseError` (a `ValueError`): a status line that is not HTTP/1.x,
a header line without a colon, more than `MAX_HEADERS` headers or a line
longer than `MAX_LINE`, more than `MAX_INTERIM` interim (1xx) answers or
`MAX_HEADERS` trailer lines, a bad chunk size, or a body cut short.

Deadlines are absolute. `Response.deadline` (a `time.monotonic()` value, or
None) bounds every socket read of the response, not each one: the reader
sets the socket's timeout to the time left before each `recv`, so a server
that trickles a byte at a time cannot stretch a call past its deadline
(`TimeoutError` once it passed). On the main thread the reads also wake
every `waiting.MAIN_THREAD_SLICE` seconds, so that `_thread.interrupt_main()` (which
raises `KeyboardInterrupt` at the next bytecode, without a signal to cut a
blocked `recv` short) lands while a response is awaited.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator, Mapping

from ..waiting import MAIN_THREAD_SLICE, expired

__all__ = ["RequestHead", "Response", "ResponseError", "Headers", "MAX_LINE", "MAX_HEADERS", "MAX_INTERIM"]

#: The longest status or header line accepted (bytes, CRLF included).
MAX_LINE = 65536
#: The most header fields accepted in one response (and trailer fields).
MAX_HEADERS = 100
#: The most interim (1xx) answers accepted before the final one.
MAX_INTERIM = 10
#: Bytes asked of the socket at once.
_RECV_SIZE = 65536


#: What a connection that ended before a status line raises (`ResponseError`).
CLOSED_WITHOUT_ANSWERING = "the server closed the connection without answering"


class ResponseError(ValueError):
    """The server's answer is not a well-formed HTTP/1.1 response."""


class RequestHead:
    """The heads of requests to one target (`path` on `authority`), each
    with `Host`, `User-Agent` and `Accept-Encoding` (`accept_encoding`:
    the codings the caller decodes) first."""

    __slots__ = ("_prefixes",)

    #: Lines in a prefix: the request line and the three fixed headers.
    _PREFIX_LINES = 4

    def __init__(self, path: str, authority: str, user_agent: str, accept_encoding: str = "identity") -> None:
        self._prefixes = {
            method: (f"{method} {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {user_agent}\r\n"
                     f"Accept-Encoding: {accept_encoding}\r\n")
            for method in ("POST", "GET", "DELETE")
        }

    def encode(self, method: str, headers: Mapping[str, str], body_length: int | None) -> bytes:
        """The head of one request; `body_length` None: no body, no
        Content-Length. Raises ValueError for a value with CR, LF or NUL or
        one that is not Latin-1 text."""
        lines = [self._prefixes[method]]
        for name, value in headers.items():
            lines.append(f"{name}: {value}\r\n")
        if body_length is not None:
            lines.append(f"Content-Length: {body_length}\r\n")
        lines.append("\r\n")
        text = "".join(lines)
        breaks = self._PREFIX_LINES + len(headers) + (body_length is not None) + 1
        if text.count("\n") != breaks or text.count("\r") != breaks or "\0" in text:
            raise ValueError("a request header value holds CR, LF or NUL")
        try:
            return text.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError("a request header value is not Latin-1 text") from None


class Headers:
    """Header fields: names case-insensitive, repeated fields joined with
    ", " (RFC 9110 §5.3), the order of first appearance kept."""

    __slots__ = ("fields",)

    def __init__(self) -> None:
        #: lower-case name -> (the name as first sent, the value): what
        #: `add()` keeps, and what the response parser fills in directly.
        self.fields: dict[str, tuple[str, str]] = {}

    def add(self, name: str, value: str) -> None:
        key = name.lower()
        found = self.fields.get(key)
        self.fields[key] = (name, value) if found is None else (found[0], f"{found[1]}, {value}")

    def get(self, name: str, default: str | None = None) -> str | None:
        found = self.fields.get(name.lower())
        return default if found is None else found[1]

    def __getitem__(self, name: str) -> str:
        return self.fields[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self.fields

    def items(self) -> Iterator[tuple[str, str]]:
        return iter(list(self.fields.values()))

    def __repr__(self) -> str:
        return f"Headers({dict(self.fields.values())!r})"


class _Reader:
    """A buffered reader over a socket whose every `recv` is bounded by
    the owner's absolute deadline (see the module docstring).

    `io.BufferedReader` over `socket.makefile()` cannot do this: a socket
    file is unusable after one timeout, and its timeout is per read."""

    __slots__ = ("_sock", "_buf", "_pos", "_owner")

    def __init__(self, sock: socket.socket, owner: Response) -> None:
        self._sock = sock
        self._buf = b""
        self._pos = 0
        self._owner = owner

    def _recv(self) -> bytes:
        sock = self._sock
        # A read on the main thread is sliced (`slice_of`), so an interrupt
        # lands. (The helpers' bodies are written out: every read runs this.)
        main = threading.current_thread() is threading.main_thread()
        while True:
            deadline = self._owner.deadline
            if deadline is None:
                wait = MAIN_THREAD_SLICE if main else None
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the response did not arrive before the deadline")
                wait = left if not main or left < MAIN_THREAD_SLICE else MAIN_THREAD_SLICE
            sock.settimeout(wait)
            try:
                return sock.recv(_RECV_SIZE)
            except TimeoutError:
                if expired(deadline):
                    raise
                # A slice ended on the main thread: a pending interrupt is
                # raised here, at the loop's next bytecode; else read on.

    def readline(self, limit: int) -> bytes:
        """A line (with its LF) of at most `limit` bytes; shorter at EOF."""
        buf, pos = self._buf, self._pos
        end = buf.find(b"\n", pos, pos + limit)
        if end >= 0:
            self._pos = end + 1
            return buf[pos:end + 1]
        parts = [buf[pos:]]
        size = len(parts[0])
        self._buf, self._pos = b"", 0
        while size < limit:
            data = self._recv()
            if not data:
                break
            end = data.find(b"\n", 0, limit - size)
            if end >= 0:
                parts.append(data[:end + 1])
                self._buf, self._pos = data, end + 1
                break
            take = data[:limit - size]
            parts.append(take)
            size += len(take)
            if len(take) < len(data):
                self._buf, self._pos = data, len(take)
        return b"".join(parts)

    def whole_head(self) -> list[bytes] | None:
        """The lines of a response head (its status line and header lines,
        without their CRLFs or the empty line that ends the head) when all
        of it is in the buffer or came with one `recv`, each line within
        `MAX_LINE` and CRLF-ended, at most `MAX_HEADERS` fields; else None,
        nothing taken, and the caller reads it line by line (which reports
        what is wrong with it). One pass instead of a call per line: the
        head of every response is read here."""
        buf, pos = self._buf, self._pos
        if pos >= len(buf):
            buf, pos = self._recv(), 0
            self._buf, self._pos = buf, 0
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0:
            return None
        block = buf[pos:end]
        lines = block.split(b"\r\n")
        if (not lines[0] or len(lines) > MAX_HEADERS + 1 or block.count(b"\n") != len(lines) - 1
                or max(map(len, lines)) > MAX_LINE - 2):
            return None  # a bare LF, too many fields or a line too long: the slow path says which
        self._pos = end + 4
        return lines

    def take(self, amt: int) -> bytes | None:
        """Exactly `amt` bytes when they are all in the buffer already
        (taken); else None, and nothing taken."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < amt:
            return None
        self._pos = pos + amt
        return buf[pos:pos + amt]

    def buffered(self) -> int:
        """How many bytes the buffer holds that nobody took yet."""
        return len(self._buf) - self._pos

    def read1(self, amt: int) -> bytes:
        """At most `amt` bytes, after at most one `recv`; b"" at EOF."""
        buf, pos = self._buf, self._pos
        if pos < len(buf):
            end = min(pos + amt, len(buf))
            self._pos = end
            return buf[pos:end]
        data = self._recv()
        if len(data) > amt:
            self._buf, self._pos = data, amt
            return data[:amt]
        self._buf, self._pos = b"", 0
        return data


class Response:
    """One response read from `sock` (see the module docstring).

    `begin()` reads the head; the body is then read by the caller. A
    response to a request whose body the server may skip (`head_only`)
    has no body. `deadline` bounds all the reads (None: only a shutdown
    from another thread stops them); it may be moved at any time, for
    instance to None when a stream outlives its request's deadline.
    """

    def __init__(self, sock: socket.socket, *, head_only: bool = False, deadline: float | None = None) -> None:
        self._sock = sock
        self.deadline = deadline
        self._fp: _Reader | None = _Reader(sock, self)
        self._head_only = head_only
        self.status = 0
        self.reason = ""
        self.headers = Headers()
        #: The Content-Length that frames the body, as the head said it;
        #: None when something else does (chunked, the connection's end)
        #: or there is no body. Not the header: chunked overrides it.
        self.length: int | None = None
        # Body framing: exactly one of these describes what is left.
        self._length: int | None = None  # bytes left of a Content-Length body
        self._chunked = False
        self._chunk_left: int | None = None  # bytes left of the current chunk; None: read a size line
        self._done = False
        self._http10 = False
        self.will_close = False

    def begin(self) -> None:
        interim = 0
        while True:
            assert self._fp is not None
            lines = self._fp.whole_head()
            if lines is not None:
                self._status(lines[0])
                self._header_lines(lines)
            else:
                self._read_status()
                self._read_headers()
            if self.status >= 200 or self.status == 101:
                break
            interim += 1
            if interim > MAX_INTERIM:
                raise ResponseError(f"the server sent more than {MAX_INTERIM} interim (1xx) answers")
            self.headers = Headers()  # 1xx interim answer: its head is dropped
        fields = self.headers.fields  # (`Headers.get()` of a lower-case name, without the calls)
        found = fields.get("connection")
        connection = found[1].lower() if found is not None else ""
        # HTTP/1.0 closes after each response unless it says keep-alive.
        self.will_close = "close" in connection or (self._http10 and "keep-alive" not in connection)
        if self.status == 101:
            # The client never asks for an upgrade, so this is final (no
            # body) and the connection now speaks another protocol, or the
            # server is confused: either way nothing more is written on it.
            self.will_close = True
        if self._head_only or 100 <= self.status < 200 or self.status in (204, 304):
            self._finish()
            return
        found = fields.get("transfer-encoding")
        if found is not None:
            coding = found[1]
            if coding.lower().replace(" ", "").split(",")[-1] != "chunked":
                # Not chunked last: the body runs until the server closes.
                self.will_close = True
                return
            self._chunked = True
            if "content-length" in fields:
                # RFC 9112 §6.3: Transfer-Encoding overrides Content-Length,
                # and a message with both (which smuggling attempts send)
                # ends its connection: what follows it is not trusted.
                self.will_close = True
            return
        found = fields.get("content-length")
        if found is not None:
            length = found[1]
            values = set(map(str.strip, length.split(",")))
            value = next(iter(values))
            # 18 digits: any real length, and `int()` never meets its digit limit.
            if len(values) != 1 or not value.isascii() or not value.isdigit() or len(value) > 18:
                raise ResponseError(f"invalid Content-Length {length[:40]!r}")
            self._length = self.length = int(value)
            if self._length == 0:
                self._finish()
            return
        self.will_close = True  # framed by the end of the connection

    def _line(self) -> bytes:
        assert self._fp is not None
        line = self._fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise ResponseError(f"a response line is longer than {MAX_LINE} bytes")
        return line

    def _read_status(self) -> None:
        line = self._line()
        if not line:
            raise ResponseError(CLOSED_WITHOUT_ANSWERING)
        self._status(line)

    def _status(self, line: bytes) -> None:
        if line[:1] in (b"\x15", b"\x16") and line[1:2] == b"\x03":
            # A TLS record (an alert, or a handshake) where a status line goes.
            raise ResponseError("the server answered in TLS, not plain HTTP (it speaks HTTPS: try https://)")
        parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not (parts[1].isascii() and parts[1].isdigit() and len(parts[1]) == 3):
            raise ResponseError(f"not an HTTP/1.x status line: {line[:80]!r}")
        self.status = int(parts[1])
        self.reason = parts[2] if len(parts) > 2 else ""
        self._http10 = parts[0] == "HTTP/1.0"

    def _read_headers(self) -> None:
        count = 0
        while True:
            line = self._line()
            if line in (b"\r\n", b"\n"):
                return
            if not line:
                raise ResponseError("the response ended inside its header block")
            count += 1
            if count > MAX_HEADERS:
                raise ResponseError(f"the response has more than {MAX_HEADERS} header fields")
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon or not name or name != name.strip():
                raise ResponseError(f"malformed header line {line[:80]!r}")
            self.headers.add(name, value.strip(" \t\r\n"))

    def _header_lines(self, lines: list[bytes]) -> None:
        """`_read_headers()` for a head `whole_head()` read (`lines[0]` is
        the status line), in one frame."""
        fields = self.headers.fields
        for line in lines[1:]:
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon or not name or name != name.strip():
                raise ResponseError(f"malformed header line {line[:80]!r}")
            value = value.strip(" \t\r\n")
            key = name.lower()
            found = fields.get(key)  # `Headers.add()`, written out
            fields[key] = (name, value) if found is None else (found[0], f"{found[1]}, {value}")

    # -- the body ------------------------------------------------------------------------------

    def isclosed(self) -> bool:
        """True once the body was read to its end (or the response closed)."""
        return self._fp is None

    def read(self, amt: int | None = None) -> bytes:
        """Up to `amt` bytes of the body (all of it when None); b"" at its end.
        Blocks until `amt` bytes arrived or the body ended."""
        fp = self._fp
        if amt is not None and amt == self._length and fp is not None and not self._done:
            # The common case: the rest of a Content-Length body, already in
            # the reader's buffer (it came with the head): one call, where
            # `read1()` twice would give the same bytes.
            body = fp.take(amt) if amt > 0 else None
            if body is not None:
                self._length = 0
                self._finish()
                return body
        if amt is None:
            chunks: list[bytes] = []
            while True:
                chunk = self.read1(MAX_LINE)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        first = self.read1(amt)
        if len(first) >= amt or not first:
            return first
        out = bytearray(first)
        while len(out) < amt:
            chunk = self.read1(amt - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def read1(self, amt: int = MAX_LINE) -> bytes:
        """Some bytes of the body (at most `amt`), after at most one read
        from the socket; b"" at its end."""
        fp = self._fp
        if fp is None or self._done or amt <= 0:
            return b""
        if self._chunked:
            return self._read_chunked(fp, amt)
        if self._length is not None:
            data = fp.read1(min(amt, self._length))
            if not data:
                raise ResponseError(f"the response body ended {self._length} bytes short")
            self._length -= len(data)
            if self._length == 0:
                self._finish()
            return data
        data = fp.read1(amt)
        if not data:
            self._finish()
        return data

    def _read_chunked(self, fp: _Reader, amt: int) -> bytes:
        if self._chunk_left is None:
            line = self._line()
            size = line.split(b";", 1)[0].strip()
            try:
                if not size or not all(c in b"0123456789abcdefABCDEF" for c in size):
                    raise ValueError
                self._chunk_left = int(size, 16)
            except ValueError:
                raise ResponseError(f"invalid chunk size line {line[:40]!r}") from None
            if self._chunk_left == 0:
                self._skip_trailers()
                self._finish()
                return b""
        data = fp.read1(min(amt, self._chunk_left))
        if not data:
            raise ResponseError("the response body ended inside a chunk")
        self._chunk_left -= len(data)
        if self._chunk_left == 0:
            if self._line() not in (b"\r\n", b"\n"):
                raise ResponseError("a chunk is not followed by CRLF")
            self._chunk_left = None
        return data

    def _skip_trailers(self) -> None:
        """Trailer fields are not used; a server sending them without end is
        refused rather than followed."""
        for _ in range(MAX_HEADERS + 1):
            if self._line() in (b"\r\n", b"\n", b""):
                return
        raise ResponseError(f"the response has more than {MAX_HEADERS} trailer fields")

    def ready(self, timeout: float) -> bool:
        """Whether the next read would find bytes (or the body's end)
        without waiting, after waiting at most `timeout` seconds for the
        server to send some. A caller that must not block long asks first."""
        fp = self._fp
        if fp is None or fp.buffered():
            return True
        pending = getattr(self._sock, "pending", None)  # bytes TLS decrypted but not yet read
        if pending is not None and pending():
            return True
        if not hasattr(select, "poll"):  # Windows
            return bool(select.select([self._sock], [], [], max(timeout, 0.0))[0])
        poller = select.poll()  # not select() alone: it fails on descriptors above 1023
        poller.register(self._sock, select.POLLIN)
        return bool(poller.poll(max(timeout, 0.0) * 1000))

    def _finish(self) -> None:
        self._done = True
        self.close()

    def shutdown(self) -> None:
        """Unblock a read in progress from another thread (cancellation):
        shut the socket down; the connection is not reused after this."""
        self.will_close = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Drop the reader (the socket stays open: it belongs to the connection)."""
        self._fp = None
