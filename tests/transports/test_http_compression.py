"""Compressed answers (issue 15): the client asks for `gzip, deflate`
(identity with `compress=False`) and decodes gzip and deflate (zlib or raw)
as the body arrives, JSON and SSE alike, under `max_response_bytes`
counted on the DECODED size: a decompression bomb is `MessageTooLarge`
without memory growing past the limit; corrupt data and other codings are
clear errors, and the client stays usable.

Each end-to-end test puts a `HostileFront` before a real test server: every
request is relayed, except `tools/call`, which the test answers itself,
compressed, straight on the socket.
"""

from __future__ import annotations

import gzip
import http.server
import json
import logging
import threading
import tracemalloc
import zlib
from typing import Any

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.transports.decoding import PIECE, Decoder, DecodingError, UnsupportedEncoding, coding_of
from tests.servers.hostile_http import HostileFront
from tests.servers.minimal_session import SessionHandler

ERAS = ["2026-07-28", "2025-11-25"]
LIMIT = 1_000_000


@pytest.fixture
def upstream():
    httpd = HTTPServer(demo_server()).start()
    yield httpd
    httpd.close()


def answer(message: dict[str, Any], text: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": message["id"],
                       "result": {"content": [{"type": "text", "text": text}], "resultType": "complete"}}).encode()


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def send(sock: Any, coding: str, body: bytes, *, chunked: bool = False, content_type: str = "application/json",
         status: bytes = b"200 OK") -> None:
    # Connection: close, as the front answers no more on this connection.
    head = b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Encoding: %s\r\nConnection: close\r\n" % (
        status, content_type.encode(), coding.encode())
    if chunked:
        sock.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
        for i in range(0, len(body), 5000):
            piece = body[i:i + 5000]
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\n\r\n")
    else:
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def answering(coding: str, compress: Any, *, chunked: bool = False, text: str = "squeezed " * 2000):
    def fault(front, sock, message):
        send(sock, coding, compress(answer(message, text)), chunked=chunked)
        front.stopping.wait(5)
    return fault


# -- what the client asks for ----------------------------------------------------------------------


@pytest.mark.parametrize("compress, expected", [(True, "gzip, deflate"), (False, "identity")])
def test_the_client_asks_for_gzip_and_deflate_unless_told_not_to(upstream, compress, expected):
    with mcp_sync.connect(upstream.url, compress=compress) as client:
        client.call_tool("echo", {"text": "x"})
    offered = {r.headers.get_all("Accept-Encoding")[0] for r in upstream.requests}
    assert offered == {expected}
    assert all(len(r.headers.get_all("Accept-Encoding")) == 1 for r in upstream.requests)


# -- JSON answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("coding, compress, chunked", [
    ("gzip", gzip.compress, False),
    ("x-gzip", gzip.compress, True),
    ("deflate", zlib.compress, False),  # zlib, as RFC 9110 means it
    ("deflate", raw_deflate, True),  # raw deflate, as some servers send it
], ids=["gzip", "x-gzip-chunked", "deflate-zlib", "deflate-raw-chunked"])
def test_a_compressed_json_answer_is_decoded(upstream, protocol, coding, compress, chunked):
    text = "squeezed " * 2000
    with HostileFront(upstream.url, {"tools/call": answering(coding, compress, chunked=chunked, text=text)}) as front:
        with mcp_sync.connect(front.url, protocol=protocol) as client:
            before = client.stats().bytes_received
            assert client.call_tool("echo", {"text": "x"}, timeout=5).text == text
            received = client.stats().bytes_received - before
            assert client.list_tools()  # the client goes on after it
    # What was received is counted as it came over the wire: compressed.
    assert 0 < received < len(text) // 10


def test_a_compressed_error_body_is_decoded_for_its_json_rpc_error(upstream):
    def refused(front, sock, message):
        error = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "no such thing " * 50}}
        send(sock, "gzip", gzip.compress(json.dumps(error).encode()), status=b"400 Bad Request")
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": refused}) as front:
        with mcp_sync.connect(front.url, protocol="2025-11-25") as client:
            with pytest.raises(mcp_sync.McpError, match="no such thing") as caught:
                client.call_tool("echo", {"text": "x"}, timeout=5)
            assert not isinstance(caught.value, mcp_sync.TransportError)


def test_with_compress_off_an_answer_compressed_anyway_is_still_decoded_under_the_limit(upstream):
    with HostileFront(upstream.url, {"tools/call": answering("gzip", gzip.compress, text="anyway")}) as front:
        with mcp_sync.connect(front.url, compress=False) as client:
            assert client.call_tool("echo", {"text": "x"}, timeout=5).text == "anyway"


# -- SSE streams ------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_sse_stream_is_decoded_as_it_arrives(upstream, protocol, coding):
    progressed = threading.Event()
    waited: list[bool] = []

    def streamed(front, sock, message):
        packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS)
        token = message["params"]["_meta"]["progressToken"]

        def event(payload: dict[str, Any]) -> None:
            data = packer.compress(b"event: message\ndata: %s\n\n" % json.dumps(payload).encode())
            data += packer.flush(zlib.Z_SYNC_FLUSH)  # the event leaves now, as a real server's would
            sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: %s\r\n"
                     b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n" % coding.encode())
        event({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": token, "progress": 1, "total": 2}})
        # The response is held back until the client has seen the progress:
        # only a stream decoded as it arrives gets there.
        waited.append(progressed.wait(5))
        event(json.loads(answer(message, "streamed")))
        tail = packer.flush()
        sock.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": streamed}) as front:
        with mcp_sync.connect(front.url, protocol=protocol) as client:
            result = client.call_tool("echo", {"text": "x"}, timeout=10, progress=lambda p: progressed.set())
            assert result.text == "streamed"
            assert client.list_tools()
    assert waited == [True]


def test_a_compressed_sse_bomb_is_message_too_large(upstream):
    # One endless line: 10 MB that compress to a few KB (made before memory is traced).
    body = gzip.compress(b"data: " + b"0" * 10_000_000)

    def bomb(front, sock, message):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": bomb}) as front:
        with mcp_sync.connect(front.url, max_response_bytes=LIMIT) as client:
            tracemalloc.start()
            try:
                tracemalloc.reset_peak()
                base = tracemalloc.get_traced_memory()[0]
                with pytest.raises(mcp_sync.MessageTooLarge):
                    client.call_tool("echo", {"text": "x"}, timeout=5)
                peak = tracemalloc.get_traced_memory()[1] - base
            finally:
                tracemalloc.stop()
            assert client.list_tools()
    assert peak < 4 * LIMIT, peak  # the 10 MB were never decoded whole


# -- bombs, corrupt data, other codings --------------------------------------------------------------


@pytest.mark.parametrize("coding, compress", [("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_a_decompression_bomb_is_message_too_large_and_memory_stays_flat(upstream, coding, compress):
    zeros = compress(b"0" * 10_000_000)
    assert len(zeros) < 20_000  # 10 MB of zeros in about 10 KB: small on the wire

    def bomb(front, sock, message):
        send(sock, coding, zeros)
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": bomb}) as front:
        with mcp_sync.connect(front.url, max_response_bytes=LIMIT) as client:
            tracemalloc.start()
            try:
                tracemalloc.reset_peak()
                base = tracemalloc.get_traced_memory()[0]
                with pytest.raises(mcp_sync.MessageTooLarge, match=f"decodes .*max_response_bytes={LIMIT}"):
                    client.call_tool("echo", {"text": "x"}, timeout=5)
                peak = tracemalloc.get_traced_memory()[1] - base
            finally:
                tracemalloc.stop()
            assert client.list_tools()  # the client is still usable
    assert peak < 3 * LIMIT, peak  # not the 10 MB the body would decode to


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_compressed_bytes_that_never_decode_to_anything_are_bounded_too(upstream, chunked):
    # A gzip header, then empty stored blocks without end: nothing decoded,
    # ever. Refused once the compressed size is past what the limit needs.
    limit = 50_000
    empty_blocks = gzip.compress(b"")[:10] + b"\x00\x00\x00\xff\xff" * 40_000

    def endless(front, sock, message):
        send(sock, "gzip", empty_blocks, chunked=chunked)
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": endless}) as front:
        with mcp_sync.connect(front.url, max_response_bytes=limit) as client:
            with pytest.raises(mcp_sync.MessageTooLarge, match="compressed"):
                client.call_tool("echo", {"text": "x"}, timeout=5)
            assert client.list_tools()


def test_the_decoder_never_produces_more_than_the_limit_plus_one_piece():
    bomb = gzip.compress(b"\0" * 10_000_000)
    decoder = Decoder("gzip")
    taken = 0
    for i in range(0, len(bomb), 4096):
        for piece in decoder.feed(bomb[i:i + 4096]):
            assert len(piece) <= PIECE
            taken += len(piece)
            if taken > LIMIT:
                break
        if taken > LIMIT:
            break
    assert LIMIT < decoder.produced <= LIMIT + PIECE


@pytest.mark.parametrize("damage, match", [
    (lambda body: body[:20] + bytes(b ^ 0x55 for b in body[20:40]) + body[40:], "not validly compressed"),
    (lambda body: body[:len(body) // 2], "ended before its compressed stream did"),
    (lambda body: b"plain text, not gzip at all", "not validly compressed"),
], ids=["corrupt", "cut-short", "not-gzip"])
def test_corrupt_compressed_data_is_a_clear_error(upstream, damage, match):
    def broken(front, sock, message):
        send(sock, "gzip", damage(gzip.compress(answer(message, "x" * 5000))))
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": broken}) as front:
        with mcp_sync.connect(front.url) as client:
            with pytest.raises(mcp_sync.InvalidMessage, match=f"could not be decoded: the gzip body .*{match}"):
                client.call_tool("echo", {"text": "x"}, timeout=5)
            assert client.list_tools()


def test_a_corrupt_compressed_sse_stream_is_a_clear_error(upstream):
    def broken(front, sock, message):
        body = bytearray(gzip.compress(b"data: " + answer(message, "x" * 5000) + b"\n\n"))
        body[30:50] = bytes(b ^ 0x55 for b in body[30:50])
        send(sock, "gzip", bytes(body), content_type="text/event-stream")
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": broken}) as front:
        with mcp_sync.connect(front.url) as client:
            with pytest.raises(mcp_sync.InvalidMessage, match="stream of request .* could not be decoded: the gzip"):
                client.call_tool("echo", {"text": "x"}, timeout=5)


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip", "compress"])
def test_another_coding_is_refused_clearly(upstream, coding):
    def other(front, sock, message):
        send(sock, coding, gzip.compress(answer(message, "x")))
        front.stopping.wait(5)

    with HostileFront(upstream.url, {"tools/call": other}) as front:
        with mcp_sync.connect(front.url) as client:
            with pytest.raises(mcp_sync.InvalidMessage, match=f"Content-Encoding '{coding}'.*decodes gzip and deflate"):
                client.call_tool("echo", {"text": "x"}, timeout=5)
            assert client.list_tools()


# -- the decoder alone ---------------------------------------------------------------------------------


@pytest.mark.parametrize("coding, pack", [
    ("gzip", gzip.compress),
    ("gzip", lambda data: gzip.compress(data[:1000]) + gzip.compress(data[1000:])),  # two members
    ("gzip", lambda data: gzip.compress(data) + b"\0\0 trailing junk"),  # ignored, as urllib3 does
    ("deflate", zlib.compress),
    ("deflate", raw_deflate),
], ids=["gzip", "gzip-members", "gzip-trailing", "deflate-zlib", "deflate-raw"])
@pytest.mark.parametrize("step", [1, 3, 4096, 1 << 20])
def test_the_decoder_gives_the_same_bytes_however_the_body_is_cut(coding, pack, step):
    data = bytes(range(256)) * 600 + b"tail" * 5000
    packed = pack(data)
    decoder = Decoder(coding)
    out = b"".join(piece for i in range(0, len(packed), step) for piece in decoder.feed(packed[i:i + step]))
    decoder.finish()
    assert out == data and decoder.produced == len(data)


def test_coding_names():
    assert coding_of(None) is None and coding_of(" Identity ") is None and coding_of("") is None
    assert coding_of("GZIP") == "gzip" and coding_of("x-gzip") == "gzip" and coding_of("deflate") == "deflate"
    with pytest.raises(UnsupportedEncoding, match="'br'"):
        coding_of("br")
    with pytest.raises(DecodingError):
        decoder = Decoder("deflate")
        list(decoder.feed(b"\x78"))
        decoder.finish()


# -- the initialize era's GET stream --------------------------------------------------------------------


class GzipGetStreamHandler(SessionHandler):
    """A minimal initialize-era server: a session, and a GET stream whose
    one message (a log notification) comes gzip-compressed and flushed, the
    stream left open."""

    server_name = "gzip-get"
    mcp_version = "2025-11-25"
    stop: threading.Event

    def do_GET(self) -> None:
        assert "gzip" in self.headers["Accept-Encoding"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "warning", "data": "pushed"}}
        data = packer.compress(b"data: %s\n\n" % json.dumps(note).encode()) + packer.flush(zlib.Z_SYNC_FLUSH)
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()
        self.stop.wait(5)  # the stream stays open; the client closes it


def test_the_get_stream_of_a_session_is_decoded_as_it_arrives():
    stop = threading.Event()
    handler = type("Handler", (GzipGetStreamHandler,), {"stop": stop})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serving = threading.Thread(target=httpd.serve_forever, daemon=True)
    serving.start()
    arrived = threading.Event()
    seen: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())
            arrived.set()

    catch = Catch()
    logger = logging.getLogger("mcp_sync.server")
    logger.addHandler(catch)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with mcp_sync.connect(f"http://127.0.0.1:{httpd.server_address[1]}/mcp", protocol="2025-11-25"):
            assert arrived.wait(10)  # decoded while the stream is still open
    finally:
        logger.removeHandler(catch)
        logger.setLevel(old_level)
        stop.set()
        httpd.shutdown()
        httpd.server_close()
        serving.join(5)
    assert seen == ["pushed"]
