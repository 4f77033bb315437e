"""Server-Sent Events: turning a byte stream into events, incrementally.

This module owns the "event stream interpretation" rules of the WHATWG HTML
standard (section 9.2.6): UTF-8 decoding, the three line-end styles, comments,
the `event`/`data`/`id`/`retry` fields and when an event is dispatched. It
knows nothing about HTTP, JSON-RPC or MCP: an `Event` carries the `data`
string exactly as the stream spelled it, and deciding what that string means
is the caller's business.

It works like h11: the caller owns the socket and hands every chunk of bytes
it reads to `SSEParser.feed`, which returns the events that chunk completed
(often none, sometimes several). At end of stream the caller calls
`SSEParser.close`. Chunk boundaries may fall anywhere -- inside a multi-byte
UTF-8 character, between the CR and LF of a CRLF, inside a field name -- and
never change the result: feeding a stream byte by byte gives the same events
as feeding it in one piece.

Two places where we go beyond (or against) the standard, on purpose:

* End of stream. Browsers discard an event that was not terminated by a blank
  line. A JSON-RPC server that closes the stream right after the final
  `data:` line of its response would then lose that response, so `close()`
  behaves as if the stream had ended with a line end and a blank line: a
  pending unterminated line is interpreted as a complete line, then the
  event being built is dispatched if it has data (and a pending `id` is
  committed, exactly as a blank line would).
* Memory. A hostile or broken server can send an endless line or an endless
  event. With `max_event_bytes` set, the parser raises `EventTooLarge` once
  the data of the event being built, or a single field value, is known to
  exceed the limit (measured in UTF-8 bytes; see `SSEParser`). Whether it
  raises never depends on how the stream was chunked, and a line or event
  trickled in tiny pieces costs about as much memory as one sent at once.
* Reconnection time. A `retry` value above `MAX_RETRY_MS` (one hour) is
  taken as `MAX_RETRY_MS`: a server cannot make the client wait for ever,
  nor hand it a number too large to turn into seconds.

Malformed input never raises: a field the standard says to ignore is
ignored. The only error is `EventTooLarge`, an `mcp_sync.MessageTooLarge`.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from ..errors import MessageTooLarge

__all__ = ["MAX_RETRY_MS", "Event", "EventTooLarge", "SSEParser"]

_LINE_END = re.compile(r"\r\n|\r|\n")
_BOM = "\ufeff"
_MAX_RETRY_DIGITS = 1000
#: The longest reconnection time a stream may set, in milliseconds (one hour).
MAX_RETRY_MS = 3_600_000
# Pieces of one line, or data lines of one event, kept apart before they are
# joined: a stream trickled in tiny pieces would otherwise cost one string
# object (about 50 bytes) per byte or two it sent.
_JOIN_EVERY = 64


@dataclass(frozen=True)
class Event:
    """One dispatched event.

    `event` is the event type ("message" unless the stream named another),
    `data` the data lines joined with "\\n", and `id` the last event ID at
    dispatch time: the value of the most recent valid `id` field (it persists
    across events, and across reconnections of one parser), or None if the
    stream never set one.
    """

    event: str
    data: str
    id: str | None


class EventTooLarge(MessageTooLarge):
    """An event's data, or a single line, grew beyond `max_event_bytes`.

    The parser cannot continue after this: drop the stream. It is a
    `MessageTooLarge`, so callers that do not catch it still see an
    `McpError`.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(f"server-sent event larger than {limit} bytes", limit=limit)


def _nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


class SSEParser:
    """Incremental parser for a `text/event-stream` body.

    Feed it bytes with `feed`; call `close` at end of stream. Readable state:

    * `last_event_id` -- the last event ID string: set from the `id` field
      buffer when an event is dispatched (a blank line, or `close`), None
      until then. An empty `id` field sets it to "".
    * `retry_ms` -- the reconnection time from the latest valid `retry`
      field (it takes effect at once, not at dispatch), None if the stream
      never sent one. A value needs at least one ASCII digit and only ASCII
      digits; one of more than 1000 significant digits is ignored, and one
      above `MAX_RETRY_MS` counts as `MAX_RETRY_MS`.
    * `comments_seen` -- how many comment lines (lines starting with ":")
      were seen; servers send these as keep-alives.

    One parser can follow one event source across reconnections: after
    `close`, or at any time through `reconnect`, the next `feed` starts a new
    stream (fresh UTF-8 decoder, BOM allowed again, no pending line or event)
    while `last_event_id`, `retry_ms` and `comments_seen` carry over, and
    the new stream's events keep the last event ID until it sends another.

    With `max_event_bytes`, `EventTooLarge` is raised when the data buffer of
    the event being built (its data lines joined by "\\n", in UTF-8 bytes)
    exceeds the limit, or when any single line's field value (the text after
    the colon and the optional space; for a comment, the text after the
    colon; for a line without a colon, the whole line) exceeds it. The second
    rule is checked on unterminated lines too, so a line that never ends is
    bounded, not buffered forever. After `EventTooLarge` the stream is lost:
    `feed` and `close` raise `RuntimeError` until `reconnect`.
    """

    # Per-stream state, (re)set by `_start_stream`.
    _decoder: codecs.IncrementalDecoder
    _at_start: bool
    _skip_lf: bool
    _partial: list[str]
    _partial_joined: int
    _partial_bytes: int
    _partial_name_bytes: int | None
    _data: list[str]
    _data_joined: int
    _data_bytes: int
    _event_type: str
    _id_buffer: str | None
    _closed: bool
    _failed: bool

    def __init__(self, max_event_bytes: int | None = None) -> None:
        if max_event_bytes is not None and max_event_bytes < 1:
            raise ValueError("max_event_bytes must be a positive integer or None")
        self.max_event_bytes = max_event_bytes
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self.comments_seen = 0
        self._start_stream()

    # -- public ---------------------------------------------------------

    def feed(self, chunk: bytes) -> list[Event]:
        """Parse the next chunk of the stream; return the events it completed.

        After `close` this begins a new stream, as `reconnect` would.
        """
        if self._failed:
            raise RuntimeError("the parser raised EventTooLarge; call reconnect() to parse a new stream")
        if self._closed:
            self._start_stream()
        text = self._decoder.decode(chunk, False)
        events: list[Event] = []
        try:
            self._feed_text(text, events)
        except EventTooLarge:
            self._failed = True
            raise
        return events

    def close(self) -> list[Event]:
        """End of stream: return the events still pending (at most one).

        Deliberate deviation from the standard (see the module docstring):
        `close` acts as a final line end plus blank line, so an event not
        terminated by a blank line is dispatched if it has data. Calling
        `close` again, with nothing fed in between, returns no events.
        """
        if self._failed:
            raise RuntimeError("the parser raised EventTooLarge; call reconnect() to parse a new stream")
        if self._closed:
            return []
        events: list[Event] = []
        try:
            self._feed_text(self._decoder.decode(b"", True), events)
            if self._partial:
                line = "".join(self._partial)
                self._reset_partial()
                self._line(line, events)
            self._dispatch(events)
        except EventTooLarge:
            self._failed = True
            raise
        self._closed = True
        return events

    def reconnect(self) -> None:
        """Abandon the current stream (a dropped connection); the next `feed` starts a new one.

        Whatever was pending -- an unterminated line, an event without its
        blank line -- is discarded, as browsers do, and an `id` not yet
        committed by a dispatch is forgotten. `last_event_id`, `retry_ms` and
        `comments_seen` are kept. Also the way out after `EventTooLarge`.
        """
        self._start_stream()

    # -- internals ------------------------------------------------------

    def _start_stream(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._at_start = True  # no text decoded yet: a BOM may follow
        self._skip_lf = False  # the last line ended with a CR: a LF right after it is part of that line end
        # The unterminated line, kept as parts so a long line is joined once.
        self._reset_partial()
        # The event being built.
        self._data = []
        self._data_joined = 0  # see _compact
        self._data_bytes = 0
        self._event_type = ""
        self._id_buffer = self.last_event_id
        self._closed = False
        self._failed = False

    def _reset_partial(self) -> None:
        self._partial = []
        self._partial_joined = 0  # see _compact
        self._partial_bytes = 0
        self._partial_name_bytes = None  # UTF-8 bytes before the first colon, once seen

    def _feed_text(self, text: str, events: list[Event]) -> None:
        if not text:
            return
        if self._at_start:
            self._at_start = False
            if text[0] == _BOM:
                text = text[1:]
                if not text:
                    return
        pos = 0
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                pos = 1
        end = len(text)
        while True:
            match = _LINE_END.search(text, pos)
            if match is None:
                break
            line = text[pos : match.start()]
            if self._partial:
                self._partial.append(line)
                line = "".join(self._partial)
                self._reset_partial()
            if match.end() == end and match.group() == "\r":
                self._skip_lf = True
            self._line(line, events)
            pos = match.end()
        if pos < end:
            self._add_partial(text[pos:])

    def _add_partial(self, rest: str) -> None:
        if self._partial_name_bytes is None:
            colon = rest.find(":")
            if colon >= 0:
                self._partial_name_bytes = self._partial_bytes + _nbytes(rest[:colon])
        self._partial.append(rest)
        if len(self._partial) - self._partial_joined >= _JOIN_EVERY:
            self._partial_joined = _compact(self._partial, self._partial_joined, "")
        self._partial_bytes += _nbytes(rest)
        limit = self.max_event_bytes
        if limit is None:
            return
        if self._partial_name_bytes is None:
            if self._partial_bytes > limit:  # the field name alone is too long
                raise EventTooLarge(limit)
        # The value so far may still include the one space `_line` strips.
        elif self._partial_bytes - self._partial_name_bytes - 1 > limit + 1:
            raise EventTooLarge(limit)

    def _line(self, line: str, events: list[Event]) -> None:
        if not line:
            self._dispatch(events)
            return
        limit = self.max_event_bytes
        colon = line.find(":")
        if colon == 0:
            self.comments_seen += 1
            if limit is not None and _nbytes(line) - 1 > limit:
                raise EventTooLarge(limit)
            return
        if colon < 0:
            field, value = line, ""
            if limit is not None and _nbytes(line) > limit:
                raise EventTooLarge(limit)
        else:
            field = line[:colon]
            value = line[colon + 1 :].removeprefix(" ")
            if limit is not None and (_nbytes(field) > limit or _nbytes(value) > limit):
                raise EventTooLarge(limit)
        if field == "data":
            self._data_bytes += _nbytes(value) + (1 if self._data else 0)
            self._data.append(value)
            if len(self._data) - self._data_joined >= _JOIN_EVERY:
                self._data_joined = _compact(self._data, self._data_joined, "\n")
            if limit is not None and self._data_bytes > limit:
                raise EventTooLarge(limit)
        elif field == "event":
            self._event_type = value
        elif field == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif field == "retry" and value.isascii() and value.isdigit():
            digits = value.lstrip("0") or "0"
            # Absurdly long numbers are ignored rather than converted
            # (int() refuses over 4300 digits on recent Pythons anyway).
            if len(digits) <= _MAX_RETRY_DIGITS:
                self.retry_ms = min(int(digits), MAX_RETRY_MS)
        # Any other field is ignored.

    def _dispatch(self, events: list[Event]) -> None:
        self.last_event_id = self._id_buffer
        if self._data:
            events.append(
                Event(event=self._event_type or "message", data="\n".join(self._data), id=self.last_event_id)
            )
        self._data = []
        self._data_joined = 0
        self._data_bytes = 0
        self._event_type = ""


def _compact(parts: list[str], joined: int, separator: str) -> int:
    """Join `parts[joined:]` (`_JOIN_EVERY` of them) into one part; return
    the new count of parts already joined.

    Each piece is copied once here and once more when the whole is joined,
    and the list holds one object per `_JOIN_EVERY` pieces, so memory stays
    within about twice the text however small the pieces.
    """
    parts[joined:] = [separator.join(parts[joined:])]
    return joined + 1
