"""Content codings of HTTP response bodies (RFC 9110 §8.4.1): gzip and
deflate, decoded incrementally and in bounded pieces.

Owns: which codings the HTTP transport accepts (`ACCEPT_ENCODING`), what a
`Content-Encoding` header means to it (`coding_of`), and turning
compressed bytes into decoded ones (`Decoder`).

Must not know: HTTP framing (`http11` hands over the body's bytes as they
arrive), MCP, or what a limit is for: the caller counts the pieces and
stops. That is what makes a decompression bomb harmless: `Decoder.feed`
is lazy and never decodes more than `piece` bytes ahead of its caller
(zlib's `max_length`, the rest of the input kept as `unconsumed_tail`), so
a caller that stops at its limit holds at most limit + one piece, however
much the input would expand to.

Tolerance, as `urllib3` (and so `requests`) has it: `deflate` is decoded
whether the server sent a zlib stream (RFC 1950, what the RFC means) or a
raw deflate stream (what some servers send); gzip may come as several
members; bytes after the end of the compressed stream are ignored. Data
that is not validly compressed raises `DecodingError` naming the problem.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

__all__ = ["ACCEPT_ENCODING", "PIECE", "Decoder", "DecodingError", "UnsupportedEncoding", "coding_of", "raw_bound"]

#: The codings the transport asks for when compression is on.
ACCEPT_ENCODING = "gzip, deflate"

#: The most decoded bytes `Decoder.feed` yields at once.
PIECE = 65536

_GZIP = ("gzip", "x-gzip")


class DecodingError(ValueError):
    """A compressed body is corrupt or cut short."""


class UnsupportedEncoding(ValueError):
    """A body in a coding the client does not decode."""


def coding_of(header: str | None) -> str | None:
    """The coding a `Content-Encoding` value names: None for identity (or
    no header), "gzip" or "deflate"; `UnsupportedEncoding` for anything
    else, stacked codings ("gzip, gzip") included."""
    if header is None:
        return None
    name = header.strip().lower()
    if name in ("", "identity"):
        return None
    if name in _GZIP:
        return "gzip"
    if name == "deflate":
        return "deflate"
    raise UnsupportedEncoding(f"Content-Encoding {header.strip()[:40]!r}, which the client does not decode "
                              "(it decodes gzip and deflate)")


def raw_bound(limit: int) -> int:
    """The most compressed bytes a body that decodes to at most `limit`
    bytes can need: deflate's worst case (stored blocks, 5 bytes per
    64 KiB) and a gzip header with room to spare. More is refused, so a
    stream of empty blocks cannot run on without producing anything."""
    return limit + limit // 1000 + 65536


class Decoder:
    """Decodes one body in `coding` ("gzip" or "deflate") as its bytes arrive.

    Example::

        decoder = Decoder("gzip")
        for piece in decoder.feed(gzip.compress(b"x" * 200_000)):
            ...  # pieces of at most PIECE bytes, decoded only as they are taken
        decoder.finish()  # DecodingError if the stream was cut short

    `produced` counts the decoded bytes handed out so far.
    """

    __slots__ = ("coding", "produced", "_piece", "_zlib", "_head", "_members", "_ended")

    def __init__(self, coding: str, piece: int = PIECE) -> None:
        if coding not in ("gzip", "deflate"):
            raise UnsupportedEncoding(f"no decoder for {coding!r}")
        self.coding = coding
        self.produced = 0
        self._piece = piece
        #: The stream being decoded; None until its first two bytes came
        #: (they tell zlib from raw deflate, and a gzip member from the end).
        self._zlib: Any = None
        self._head = b""
        self._members = 0  # compressed streams decoded to their end
        self._ended = False  # what follows the last stream is ignored

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of `data`, in pieces of at most `piece` bytes,
        decoded lazily: nothing is decoded beyond the piece being taken."""
        pending = False  # zlib stopped at max_length: it may hold more output
        while not self._ended:
            if self._zlib is None:
                if not data:
                    return
                data, self._head = self._head + data, b""
                if len(data) < 2:
                    self._head = data
                    return
                if self._members and (self.coding == "deflate" or data[:2] != b"\x1f\x8b"):
                    self._ended = True  # not another gzip member: ignored, as urllib3 does
                    return
                if self.coding == "gzip":
                    self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
                else:
                    self._zlib = zlib.decompressobj(zlib.MAX_WBITS if _zlib_header(data) else -zlib.MAX_WBITS)
            if not data and not pending:
                return
            try:
                piece = self._zlib.decompress(data, self._piece)
            except zlib.error as exc:
                raise DecodingError(f"the {self.coding} body is not validly compressed ({exc})") from None
            data = self._zlib.unconsumed_tail
            pending = len(piece) == self._piece
            if piece:
                self.produced += len(piece)
                yield piece
            if self._zlib.eof:
                self._members += 1
                data, self._zlib, pending = self._zlib.unused_data, None, False

    @property
    def complete(self) -> bool:
        """Whether the body's compressed stream has come to its end."""
        return self._ended or (self._members > 0 and self._zlib is None)

    def finish(self) -> None:
        """The body ended: `DecodingError` unless its compressed stream did."""
        if not self.complete:
            raise DecodingError(f"the {self.coding} body ended before its compressed stream did")


def _zlib_header(data: bytes) -> bool:
    """Whether `data` starts with a zlib header (RFC 1950 §2.2): method 8
    (deflate), a window of at most 32 KiB, and the check bits right."""
    cmf, flg = data[0], data[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0
